"""Motor actuators -> PD position servos: the conversion a position-controlled robot model needs.

A robot's MJCF usually declares torque motors (``ctrl`` in N m, ``gear``, ``ctrlrange``); a policy that outputs joint
targets needs PD servos (``force = kp (target - q) - kd qdot``, clamped to the motor's torque limit).
"""

from __future__ import annotations

import copy

import mujoco
import numpy as np


def actuated_joints(model: mujoco.MjModel, joint_names: list[str]) -> np.ndarray:
    """For each actuator, the index of its joint in ``joint_names``; every joint must have one actuator."""
    idx = []
    for a in range(model.nu):
        if model.actuator_trntype[a] != mujoco.mjtTrn.mjTRN_JOINT:
            raise ValueError(f"actuator {model.actuator(a).name!r} does not drive a joint")
        name = model.joint(int(model.actuator_trnid[a, 0])).name
        if name not in joint_names:
            raise ValueError(f"actuator {model.actuator(a).name!r} drives {name!r}, which is not a hinge/slide joint")
        idx.append(joint_names.index(name))
    unact = [n for i, n in enumerate(joint_names) if i not in idx]
    if unact or len(set(idx)) != len(idx):
        raise ValueError(f"motion tracking needs exactly one actuator per joint; unactuated: {unact}")
    return np.array(idx, dtype=np.int64)


def effort_limits(model: mujoco.MjModel) -> np.ndarray:
    """Per-actuator torque limit (inf if none is declared).

    The driven joint's actuatorfrcrange where it has one (MuJoCo clamps the joint's total actuator force to it; the G1
    MJCF declares the robot's torque limits there, holosoma's dof_effort_limit_list, while its motors' ctrlrange may be
    smaller, e.g. 88 for the 139 N m hip roll); else the actuator's forcerange if limited, else ctrlrange x gain x gear.
    """
    out = np.full(model.nu, np.inf)
    gear = np.abs(model.actuator_gear[:, 0])
    for a in range(model.nu):
        joint = int(model.actuator_trnid[a, 0])
        if model.actuator_trntype[a] == mujoco.mjtTrn.mjTRN_JOINT and model.jnt_actfrclimited[joint]:
            out[a] = np.max(np.abs(model.jnt_actfrcrange[joint]))
        elif model.actuator_forcelimited[a]:
            out[a] = np.max(np.abs(model.actuator_forcerange[a])) * gear[a]
        elif model.actuator_ctrllimited[a] and model.actuator_gaintype[a] == mujoco.mjtGain.mjGAIN_FIXED:
            out[a] = np.max(np.abs(model.actuator_ctrlrange[a])) * abs(model.actuator_gainprm[a, 0]) * gear[a]
    return out


def make_pd_model(model: mujoco.MjModel, kp: np.ndarray, kd: np.ndarray, effort: np.ndarray,
                  joint_ranges: np.ndarray | None) -> mujoco.MjModel:
    """Copy of ``model`` whose actuators are PD position servos: force = kp (ctrl - q) - kd qdot, clamped to +-effort
    (gain fixed kp, bias affine (0, -kp, -kd), gear 1); ``joint_ranges`` (nu, 2), if given, clamps the targets."""
    m = copy.deepcopy(model)
    m.actuator_dyntype[:] = mujoco.mjtDyn.mjDYN_NONE
    m.actuator_dynprm[:] = 0.0
    m.actuator_gear[:] = 0.0
    m.actuator_gear[:, 0] = 1.0
    m.actuator_gaintype[:] = mujoco.mjtGain.mjGAIN_FIXED
    m.actuator_gainprm[:] = 0.0
    m.actuator_gainprm[:, 0] = kp
    m.actuator_biastype[:] = mujoco.mjtBias.mjBIAS_AFFINE
    m.actuator_biasprm[:] = 0.0
    m.actuator_biasprm[:, 1] = -np.asarray(kp)
    m.actuator_biasprm[:, 2] = -np.asarray(kd)
    limited = np.isfinite(effort)
    m.actuator_forcelimited[:] = limited
    m.actuator_forcerange[limited] = np.stack([-effort, effort], axis=1)[limited]
    m.actuator_ctrllimited[:] = joint_ranges is not None
    if joint_ranges is not None:
        m.actuator_ctrlrange[:] = joint_ranges
    return m

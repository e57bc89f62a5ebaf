"""From a robot MJCF with torque motors to the PD-servo model a joint-target policy drives: PD gains, torque
limits, the default pose, the action's scale and bound (holosoma's FastSAC action space, ``tanh(u) * bound``) and
joint ranges, set up the same way for every position-controlled task.

A robot's MJCF usually declares torque motors (``ctrl`` in N m, ``gear``, ``ctrlrange``); a policy that outputs joint
targets needs PD servos (``force = kp (target - q) - kd qdot``, clamped to the motor's torque limit).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np

from unilab.tasks.core.joints import match_joint_values
from unilab.tasks.core.robot_config import ACTION_SCALE_MODES


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
        raise ValueError(f"a joint-target task needs exactly one actuator per joint; unactuated: {unact}")
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


@dataclass(frozen=True)
class Actuation:
    """A robot's actuation: arrays per joint ``(J,)`` (model joint order) or per actuator ``(nu,)``."""

    model: mujoco.MjModel
    """The PD-servo copy of the robot model (actuators: force = kp (target - q) - kd qdot, clamped)."""
    act_joint: np.ndarray  # (nu,) each actuator's joint, an index into the joints
    kp: np.ndarray
    kd: np.ndarray
    effort: np.ndarray  # (nu,) torque limit (the joint's actuatorfrcrange where declared)
    default_joint_pos: np.ndarray  # (J,) the default pose
    action_default: np.ndarray  # (nu,) PD target of a zero action (the default pose of each actuator's joint)
    action_scale: np.ndarray  # (nu,) PD-target change of a unit action
    action_bound: np.ndarray  # (nu,) b_j: the recipe's action is b_j x the env's [-1, 1] action (1: no bound)
    joint_lo: np.ndarray  # (J,) joint ranges; -inf / inf for a joint without limits
    joint_hi: np.ndarray
    limited: np.ndarray  # (J,) whether the joint has limits

    def limits(self, factor: float) -> tuple[np.ndarray, np.ndarray]:
        """``(lo, hi)`` per joint: the range shrunk about its middle to ``factor`` of its width (inf if unlimited)."""
        mid = 0.5 * (self.joint_lo + self.joint_hi)
        half = 0.5 * (self.joint_hi - self.joint_lo) * factor
        return np.where(self.limited, mid - half, -np.inf), np.where(self.limited, mid + half, np.inf)

    @classmethod
    def from_config(cls, model: mujoco.MjModel, joint_names: list[str], cfg: Any) -> Actuation:
        """The actuation of ``model``'s joints ``joint_names`` as ``cfg`` (a
        :class:`~unilab.tasks.core.robot_config.RobotTaskConfig`) asks; errors name the config key."""
        robot = cfg.robot
        act_joint = actuated_joints(model, joint_names)
        act_names = [joint_names[j] for j in act_joint]
        kp = match_joint_values(robot.kp, act_names, None, "task.robot.kp")
        kd = match_joint_values(robot.kd, act_names, None, "task.robot.kd")
        effort = (match_joint_values(robot.effort_limit, act_names, None, "task.robot.effort_limit")
                  if robot.effort_limit else effort_limits(model))
        jnt_ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, n) for n in joint_names]
        jrange = np.asarray(model.jnt_range[jnt_ids], dtype=np.float64)
        limited = np.asarray(model.jnt_limited[jnt_ids], dtype=bool)
        jrange[~limited] = (-np.inf, np.inf)
        default_joint_pos = match_joint_values(robot.default_joint_pos, joint_names, 0.0,
                                               "task.robot.default_joint_pos")
        if cfg.action_scale_mode == "effort_over_kp":
            if not np.isfinite(effort).all():
                raise ValueError("action_scale_mode effort_over_kp needs effort limits on every actuator "
                                 "(ctrlrange of a motor or forcerange); use action_scale_mode: radians")
            action_scale = cfg.action_scale * effort / kp
        elif cfg.action_scale_mode == "radians":
            action_scale = np.full(model.nu, float(cfg.action_scale))
        else:
            raise ValueError(f"action_scale_mode must be one of {ACTION_SCALE_MODES}, got {cfg.action_scale_mode!r}")
        action_default = default_joint_pos[act_joint]
        action_bound = np.ones(model.nu)
        if cfg.action_bound_from_joint_range:  # holosoma FastSAC's tanh boundaries, folded into the scale
            lo, hi = jrange[act_joint, 0], jrange[act_joint, 1]
            if not (np.isfinite(lo).all() and np.isfinite(hi).all()):
                raise ValueError("task.action_bound_from_joint_range needs every actuated joint to be limited")
            reach = np.maximum(np.abs(lo - action_default), np.abs(hi - action_default))
            action_bound = reach / cfg.action_scale
            action_scale = action_scale * action_bound
        clip_ranges = jrange[act_joint] if cfg.clip_targets_to_joint_range else None
        if clip_ranges is not None and not np.isfinite(clip_ranges).all():
            raise ValueError("clip_targets_to_joint_range needs every actuated joint to be limited")
        return cls(
            model=make_pd_model(model, kp, kd, effort, clip_ranges), act_joint=act_joint, kp=kp, kd=kd,
            effort=effort, default_joint_pos=default_joint_pos, action_default=action_default,
            action_scale=action_scale, action_bound=action_bound, joint_lo=jrange[:, 0].copy(),
            joint_hi=jrange[:, 1].copy(), limited=limited,
        )

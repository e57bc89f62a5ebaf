"""From a robot MJCF with torque motors to the PD-servo model a joint-target policy drives: PD gains, torque
limits, the default pose, the action's scale and bound (holosoma's FastSAC action space, ``tanh(u) * bound``) and
joint ranges, set up the same way for every position-controlled task.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np

from unilab.sim.mujoco.pd_model import actuated_joints, effort_limits, make_pd_model
from unilab.tasks.core.joints import match_joint_values
from unilab.tasks.core.robot_config import ACTION_SCALE_MODES


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

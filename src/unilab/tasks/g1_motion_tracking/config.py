"""``--task g1_motion_tracking``'s config (``config/task/g1_motion_tracking.yaml`` only names it; ``train --help``
prints the field docstrings). Defaults: the G1 29-DoF; any robot whose MJCF and clips fit runs (the tests use a
two-joint robot).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from unilab.dataclass_config import check_fields, check_file
from unilab.tasks.core.randomization_config import RandomizationConfig
from unilab.tasks.core.robot_config import RobotTaskConfig

_TRACKED = [
    "pelvis", "left_hip_roll_link", "left_knee_link", "left_ankle_roll_link",
    "right_hip_roll_link", "right_knee_link", "right_ankle_roll_link", "torso_link",
    "left_shoulder_roll_link", "left_elbow_link", "left_wrist_yaw_link",
    "right_shoulder_roll_link", "right_elbow_link", "right_wrist_yaw_link",
]
_END_EFFECTORS = ["left_ankle_roll_link", "right_ankle_roll_link", "left_wrist_yaw_link", "right_wrist_yaw_link"]


@dataclass
class TrackingTerm:
    """A reward term: ``weight * term``; tracking terms use ``exp(-error / sigma^2)``."""

    weight: float = 1.0
    """Weight in the reward sum (negative: a penalty)."""
    sigma: float | None = None
    """Error scale: term = exp(-error / sigma^2) in [0, 1]; null for a penalty term."""


# holosoma's undesired_contacts body regex (config_values/wbt/g1/reward.py): every body but the feet and wrists
_UNDESIRED_CONTACT_BODIES = ("^(?!left_foot_contact_point$)(?!right_foot_contact_point$)"
                             "(?!left_wrist_yaw_link$)(?!right_wrist_yaw_link$)"
                             "(?!left_ankle_roll_link$)(?!right_ankle_roll_link$).+$")


@dataclass
class ContactTerm(TrackingTerm):
    """The undesired-contacts penalty: how many of the matched bodies touched something (holosoma G1 WBT)."""

    threshold: float = 1.0
    """A body is in contact when the norm of its net contact force exceeds this (N)."""
    bodies: str = _UNDESIRED_CONTACT_BODIES
    """Regex (re.match, as holosoma) over the robot's body names: the bodies whose contacts are penalised."""
    history_steps: int = 3
    """A body counts when it was in contact at any of the last this many policy steps since the reset
    (holosoma's contact_sensor_history_length)."""


@dataclass
class RewardsConfig:
    """Reward = sum of weight x term (x control_dt with task.reward_times_dt); defaults: holosoma's G1 WBT
    FastSAC reward (g1_29dof_wbt_fast_sac_reward)."""

    anchor_pos: TrackingTerm = field(default_factory=lambda: TrackingTerm(1.0, 0.3))
    """Anchor body position, world frame (m)."""
    anchor_ori: TrackingTerm = field(default_factory=lambda: TrackingTerm(0.5, 0.4))
    """Anchor body orientation angle (rad)."""
    body_pos: TrackingTerm = field(default_factory=lambda: TrackingTerm(2.0, 0.3))
    """Tracked body positions, the reference re-anchored on the robot (m)."""
    body_ori: TrackingTerm = field(default_factory=lambda: TrackingTerm(1.0, 0.4))
    """Tracked body orientation angles, the reference re-anchored on the robot (rad)."""
    body_lin_vel: TrackingTerm = field(default_factory=lambda: TrackingTerm(1.0, 1.0))
    """Tracked body linear velocities (m/s)."""
    body_ang_vel: TrackingTerm = field(default_factory=lambda: TrackingTerm(1.0, 3.14))
    """Tracked body angular velocities (rad/s)."""
    action_rate: TrackingTerm = field(default_factory=lambda: TrackingTerm(-1.0))
    """Penalty on the sum of squared action changes between policy steps, in the recipe's action units (the
    [-1, 1] action times env.action_bound, the action holosoma's env receives)."""
    joint_limit: TrackingTerm = field(default_factory=lambda: TrackingTerm(-10.0))
    """Penalty on the sum of joint excursions past the soft joint range (rad)."""
    undesired_contacts: ContactTerm = field(default_factory=lambda: ContactTerm(-0.1))
    """Penalty on the number of bodies (task.rewards.undesired_contacts.bodies) touching something; weight 0
    turns it off, and with it the pool's contact computation (a faster step)."""


def tracking_term_names() -> tuple[str, ...]:
    """The exp(-error / sigma^2) terms: those whose default has a sigma (penalties have none)."""
    defaults = RewardsConfig()
    return tuple(name for name in RewardsConfig.__dataclass_fields__ if getattr(defaults, name).sigma is not None)


@dataclass
class TerminationsConfig:
    """An episode fails (terminated) when the robot strays this far from the reference (holosoma's G1 WBT values)."""

    anchor_height: float = 0.5
    """Largest |reference anchor z - robot anchor z| (m)."""
    anchor_orientation: float = 0.8
    """Largest difference of the anchors' projected-gravity z components (0..2)."""
    end_effector_height: float = 0.25
    """Largest |reference z - robot z| of any end effector (m)."""


@dataclass
class ResetNoiseConfig:
    """Uniform +-noise added to the reference start state of a reset."""

    root_pos: list[float] = field(default_factory=lambda: [0.05, 0.05, 0.01])
    """Root position noise, x y z (m)."""
    root_rpy: list[float] = field(default_factory=lambda: [0.1, 0.1, 0.2])
    """Root orientation noise, roll pitch yaw (rad)."""
    root_lin_vel: list[float] = field(default_factory=lambda: [0.5, 0.5, 0.2])
    """Root linear velocity noise, x y z (m/s)."""
    root_ang_vel: list[float] = field(default_factory=lambda: [0.52, 0.52, 0.78])
    """Root angular velocity noise, x y z (rad/s)."""
    joint_pos: float = 0.1
    """Joint position noise (rad); the noisy positions are clipped to the soft joint range below."""
    joint_pos_limit_factor: float = 0.95
    """Noisy joint positions are clipped to this fraction of each joint's range, centred (holosoma: the
    simulator's soft limits, robot soft_dof_pos_limit 0.95)."""


@dataclass
class ResetConfig:
    """Where in the clips episodes start, and how the start state is perturbed."""

    sampling: str = "adaptive"
    """Start-frame sampling: adaptive (holosoma's failure-weighted bins over the concatenated clips, about
    one second each; see resets.StartFrameSampler), or uniform (every startable frame of every clip alike)."""
    adaptive_ema: float = 0.001
    """Adaptive: EMA rate, per policy step, of each bin's count of failed episodes (holosoma adaptive_alpha)."""
    adaptive_uniform_count: float = 0.1
    """Adaptive: pseudo-failures spread evenly over the bins: this / number of bins is added to every bin's
    failure EMA before the kernel and normalisation (holosoma adaptive_uniform_ratio)."""
    adaptive_kernel_size: int = 1
    """Adaptive: bins in the smoothing kernel, 1 = none: bin i's weight = sum_k decay^k w[i+k] / sum_k decay^k
    over k < size, the last bin repeated past the end (holosoma adaptive_kernel_size)."""
    adaptive_kernel_decay: float = 0.8
    """Adaptive: kernel weight of the bin k after a bin = decay^k (holosoma adaptive_lambda)."""
    noise: ResetNoiseConfig = field(default_factory=ResetNoiseConfig)
    """Uniform +-noise added to the reference start state."""


@dataclass
class ObsNoiseConfig:
    """Uniform +-noise on the policy's observations only (0 disables; the critic sees clean values); defaults:
    holosoma's G1 WBT levels. A key whose piece is not in the actor set (task.policy_obs) has no effect."""

    anchor_pos: float = 0.25
    """Noise of the anchor position relative to the reference (m; privileged set only)."""
    anchor_ori: float = 0.05
    """Noise of the anchor orientation relative to the reference (rotation-matrix entries)."""
    base_lin_vel: float = 0.0
    """Noise of the base linear velocity (m/s; privileged set only)."""
    base_ang_vel: float = 0.2
    """Noise of the base angular velocity (rad/s)."""
    joint_pos: float = 0.01
    """Noise of the joint positions relative to the defaults (rad)."""
    joint_vel: float = 0.5
    """Noise of the joint velocities (rad/s)."""


@dataclass
class MotionTrackingConfig(RobotTaskConfig):
    """Everything the motion-tracking task reads; the model, simulation and actuation fields are
    :class:`~unilab.tasks.core.robot_config.RobotTaskConfig`'s."""

    name: str = "g1_motion_tracking"
    self_collisions: bool = True
    """Robot bodies collide with each other, as holosoma's g1_29dof_wbt_fast_sac (enable_self_collisions=True; the
    asset's default is False). Off: robot geoms touch the environment only (holosoma's MuJoCo scene: conaffinity 2).
    With them on, the G1 MJCF's pelvis and hip geoms overlap in about half of the built-in clip's frames."""

    # --- motions ---
    motion_files: Any = None
    """npz clips (BeyondMimic layout): a list of paths, or one path (a list of one); null: the built-in G1 clips."""
    include_object_clips: bool = False
    """Also use the built-in clips recorded with an object (*_w_obj*); they are skipped by default."""
    include_terrain_clips: bool = False
    """Also use the built-in clips recorded on terrain (*_slope*); skipped by default: the scene is flat."""
    max_episode_length_s: float | None = 10.0
    """Time-out (truncation) even before the clip ends (s); null: only the clip's end."""

    # --- bodies ---
    anchor_body: str = "torso_link"
    """Body the reference is anchored on (one of tracked_bodies)."""
    tracked_bodies: list[str] = field(default_factory=lambda: list(_TRACKED))
    """Bodies whose poses and velocities are tracked (rewards, critic observations)."""
    end_effector_bodies: list[str] = field(default_factory=lambda: list(_END_EFFECTORS))
    """Tracked bodies checked by the end-effector height termination."""

    # --- observations, rewards, terminations, resets ---
    policy_obs: str = "deployable"
    """Actor observation set: deployable (what a real robot computes: reference joints, reference anchor
    orientation in the robot frame, base angular velocity, joints, last action) or privileged (also the
    anchor position error and base linear velocity). The critic always sees every piece."""
    obs_noise: ObsNoiseConfig = field(default_factory=ObsNoiseConfig)
    """Uniform +-noise added to the policy observations only (0 disables)."""
    rewards: RewardsConfig = field(default_factory=RewardsConfig)
    """Reward terms: weight x term; tracking terms are exp(-error / sigma^2) in [0, 1]."""
    reward_times_dt: bool = True
    """Multiply the reward by control_dt, as holosoma's reward manager does: per-step rewards stay near
    0.1 and returns inside the distributional critic's support (algo.v_min..v_max); false: the plain sum."""
    soft_joint_limit_factor: float = 0.9
    """Soft joint range (for the joint_limit penalty) = this fraction of each joint's range, centred."""
    terminations: TerminationsConfig = field(default_factory=TerminationsConfig)
    """Failure thresholds (the episode is terminated)."""
    reset: ResetConfig = field(default_factory=ResetConfig)
    """Start-frame sampling and start-state noise."""
    randomization: RandomizationConfig = field(default_factory=RandomizationConfig)
    """Domain randomization: friction, torso centre of mass, joint encoder offsets, pushes, PD gains, action
    delay (task.randomization.enabled=false turns it all off)."""

    def __post_init__(self) -> None:
        self.motion_files = motion_file_list(self.motion_files)
        self.validate()

    def validate(self) -> None:
        """Raise ValueError naming the first invalid field."""
        super().validate()
        from unilab.tasks.g1_motion_tracking.observations import check_preset  # noqa: PLC0415 - it imports numba

        check_preset(self.policy_obs)
        check_fields(self, "task.", (
            (("reset.sampling",), lambda v: v in ("uniform", "adaptive"), "uniform|adaptive"),
            (("reset.adaptive_ema", "reset.noise.joint_pos_limit_factor", "soft_joint_limit_factor"),
             lambda v: 0 < v <= 1, "in (0, 1]"),
            (("reset.adaptive_uniform_count", "reset.adaptive_kernel_decay"), lambda v: v > 0, "> 0"),
            (("reset.adaptive_kernel_size", "rewards.undesired_contacts.history_steps"),
             lambda v: int(v) == v and v >= 1, "an int >= 1"),
            ([f"rewards.{name}.sigma" for name in tracking_term_names()], lambda v: v is not None and v > 0, "> 0"),
            (("rewards.undesired_contacts.threshold",), lambda v: v >= 0, ">= 0"),
            (("max_episode_length_s",), lambda v: v is None or v > 0, "> 0 or null"),
        ))
        if self.anchor_body not in self.tracked_bodies:
            raise ValueError(f"task.anchor_body {self.anchor_body!r} must be one of tracked_bodies")
        missing = [b for b in self.end_effector_bodies if b not in self.tracked_bodies]
        if missing:
            raise ValueError(f"task.end_effector_bodies must be tracked bodies; not tracked: {missing}")
        bodies = self.rewards.undesired_contacts.bodies
        try:
            re.compile(bodies)
        except re.error as exc:
            raise ValueError(f"task.rewards.undesired_contacts.bodies: bad regex {bodies!r}: {exc}") from exc
        self.randomization.validate()

    def check_paths(self) -> None:
        """The user's model and clips exist (checked before training starts anything)."""
        super().check_paths()
        for i, path in enumerate(self.motion_files or ()):
            check_file(path, f"task.motion_files[{i}]", "npz clips: a path or a list of paths, or null")


def motion_file_list(value: Any, key: str = "task.motion_files") -> list[str] | None:
    """``motion_files`` as a list of path strings (one path: a list of one; None stays None, the built-in clips);
    ValueError naming ``key`` for anything else."""
    if value is None:
        return None
    if isinstance(value, (str, os.PathLike)):
        value = [value]
    elif not isinstance(value, (list, tuple)):
        raise ValueError(f"{key} must be a path or a list of paths to npz clips, got {type(value).__name__} {value!r}")
    if not value:
        raise ValueError(f"{key}=[] lists no clips: give at least one npz path, or leave {key} unset "
                         "(null) for the built-in G1 clips")
    out = []
    for i, item in enumerate(value):
        if not isinstance(item, (str, os.PathLike)) or not os.fspath(item):
            raise ValueError(f"{key}[{i}] must be a path to an npz clip, got {type(item).__name__} {item!r}")
        out.append(os.fspath(item))
    return out

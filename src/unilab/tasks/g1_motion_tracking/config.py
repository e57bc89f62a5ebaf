"""Typed configuration of the G1 motion-tracking task; mirrors config/task/g1_motion_tracking.yaml."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from unilab.dataclass_config import build_dataclass

YAML_PATH = Path(__file__).resolve().parents[2] / "config" / "task" / "g1_motion_tracking.yaml"

_TRACKED = [
    "pelvis", "left_hip_roll_link", "left_knee_link", "left_ankle_roll_link",
    "right_hip_roll_link", "right_knee_link", "right_ankle_roll_link", "torso_link",
    "left_shoulder_roll_link", "left_elbow_link", "left_wrist_yaw_link",
    "right_shoulder_roll_link", "right_elbow_link", "right_wrist_yaw_link",
]
_END_EFFECTORS = ["left_ankle_roll_link", "right_ankle_roll_link", "left_wrist_yaw_link", "right_wrist_yaw_link"]
_ARMS = ".*_(shoulder_(pitch|roll|yaw)|elbow|wrist_roll)_joint"


@dataclass
class TrackingTerm:
    """A reward term: ``weight * term``; tracking terms use ``exp(-error / sigma^2)``."""

    weight: float = 1.0
    sigma: float | None = None


@dataclass
class RewardsConfig:
    anchor_pos: TrackingTerm = field(default_factory=lambda: TrackingTerm(0.5, 0.3))
    anchor_ori: TrackingTerm = field(default_factory=lambda: TrackingTerm(0.5, 0.4))
    body_pos: TrackingTerm = field(default_factory=lambda: TrackingTerm(1.0, 0.3))
    body_ori: TrackingTerm = field(default_factory=lambda: TrackingTerm(1.0, 0.4))
    body_lin_vel: TrackingTerm = field(default_factory=lambda: TrackingTerm(1.0, 1.0))
    body_ang_vel: TrackingTerm = field(default_factory=lambda: TrackingTerm(1.0, 3.14))
    action_rate: TrackingTerm = field(default_factory=lambda: TrackingTerm(-0.1))
    joint_limit: TrackingTerm = field(default_factory=lambda: TrackingTerm(-10.0))


TRACKING_TERMS = ("anchor_pos", "anchor_ori", "body_pos", "body_ori", "body_lin_vel", "body_ang_vel")
PENALTY_TERMS = ("action_rate", "joint_limit")


@dataclass
class TerminationsConfig:
    anchor_height: float = 0.25
    anchor_orientation: float = 0.8
    end_effector_height: float = 0.25


@dataclass
class ResetNoiseConfig:
    root_pos: list[float] = field(default_factory=lambda: [0.05, 0.05, 0.01])
    root_rpy: list[float] = field(default_factory=lambda: [0.1, 0.1, 0.2])
    root_lin_vel: list[float] = field(default_factory=lambda: [0.5, 0.5, 0.2])
    root_ang_vel: list[float] = field(default_factory=lambda: [0.52, 0.52, 0.78])
    joint_pos: float = 0.1


@dataclass
class ResetConfig:
    sampling: str = "uniform"
    adaptive_bin_s: float = 1.0
    adaptive_ema: float = 0.001
    adaptive_uniform_ratio: float = 0.1
    adaptive_kernel_bins: int = 3
    adaptive_kernel_decay: float = 0.8
    noise: ResetNoiseConfig = field(default_factory=ResetNoiseConfig)


@dataclass
class ObsNoiseConfig:
    anchor_pos: float = 0.0
    anchor_ori: float = 0.0
    base_lin_vel: float = 0.0
    base_ang_vel: float = 0.0
    joint_pos: float = 0.0
    joint_vel: float = 0.0


@dataclass
class G1TaskConfig:
    """Everything the task reads; see the YAML for the meaning of each field."""

    name: str = "g1_motion_tracking"
    model_xml: str | None = None
    motion_files: list[str] | None = None
    """npz clips (BeyondMimic layout): a list of paths, or one path (a list of one);
    null: the built-in G1 clips."""
    include_object_clips: bool = False
    include_terrain_clips: bool = False
    sim_dt: float = 0.005
    decimation: int = 4
    integrator: str | None = "implicitfast"
    max_episode_length_s: float | None = 10.0
    anchor_body: str = "torso_link"
    tracked_bodies: list[str] = field(default_factory=lambda: list(_TRACKED))
    end_effector_bodies: list[str] = field(default_factory=lambda: list(_END_EFFECTORS))
    default_joint_pos: dict[str, float] = field(default_factory=lambda: {
        ".*_hip_pitch_joint": -0.312, ".*_knee_joint": 0.669, ".*_ankle_pitch_joint": -0.363,
        ".*_elbow_joint": 0.6, "left_shoulder_roll_joint": 0.2, ".*_shoulder_pitch_joint": 0.2,
        "right_shoulder_roll_joint": -0.2,
    })
    """rad, {joint name or regex: value}; joints matching no key get 0. An exact joint name beats
    every pattern (+task.default_joint_pos.left_knee_joint=0.5 overrides .*_knee_joint); other keys
    are regexes (full match) and two giving one joint different values are an error naming both;
    a plain-name key naming no joint is an error."""
    kp: dict[str, float] = field(default_factory=lambda: {
        ".*_hip_pitch_joint": 40.18, ".*_hip_roll_joint": 99.10, ".*_hip_yaw_joint": 40.18,
        ".*_knee_joint": 99.10, ".*_ankle_(pitch|roll)_joint": 28.50, "waist_yaw_joint": 40.18,
        "waist_(roll|pitch)_joint": 28.50, _ARMS: 14.25, ".*_wrist_(pitch|yaw)_joint": 16.78,
    })
    """N m / rad, {joint name or regex: value}; every actuated joint needs a value. An exact joint
    name beats every pattern (+task.kp.left_knee_joint=120 overrides .*_knee_joint); other keys are
    regexes (full match) and two giving one joint different values are an error naming both; a
    plain-name key naming no joint is an error."""
    kd: dict[str, float] = field(default_factory=lambda: {
        ".*_hip_pitch_joint": 2.558, ".*_hip_roll_joint": 6.309, ".*_hip_yaw_joint": 2.558,
        ".*_knee_joint": 6.309, ".*_ankle_(pitch|roll)_joint": 1.814, "waist_yaw_joint": 2.558,
        "waist_(roll|pitch)_joint": 1.814, _ARMS: 0.907, ".*_wrist_(pitch|yaw)_joint": 1.068,
    })
    """N m s / rad, {joint name or regex: value}; every actuated joint needs a value; keys as for kp."""
    action_scale: float = 1.0
    action_scale_mode: str = "effort_over_kp"
    clip_targets_to_joint_range: bool = False
    obs_noise: ObsNoiseConfig = field(default_factory=ObsNoiseConfig)
    rewards: RewardsConfig = field(default_factory=RewardsConfig)
    soft_joint_limit_factor: float = 0.9
    terminations: TerminationsConfig = field(default_factory=TerminationsConfig)
    reset: ResetConfig = field(default_factory=ResetConfig)

    def __post_init__(self) -> None:
        self.motion_files = motion_file_list(self.motion_files)

    @property
    def control_dt(self) -> float:
        """Policy step (s) = sim_dt x decimation."""
        return self.sim_dt * self.decimation

    def validate(self) -> None:
        """Raise ValueError naming the first invalid field."""
        if not self.sim_dt > 0:
            raise ValueError(f"sim_dt must be > 0, got {self.sim_dt}")
        if int(self.decimation) != self.decimation or self.decimation < 1:
            raise ValueError(f"decimation must be an int >= 1, got {self.decimation}")
        if self.integrator not in (None, "euler", "implicit", "implicitfast", "rk4"):
            raise ValueError(f"integrator must be euler|implicit|implicitfast|rk4|null, got {self.integrator!r}")
        if self.action_scale_mode not in ("effort_over_kp", "radians"):
            raise ValueError(f"action_scale_mode must be effort_over_kp|radians, got {self.action_scale_mode!r}")
        if self.reset.sampling not in ("uniform", "adaptive"):
            raise ValueError(f"reset.sampling must be uniform|adaptive, got {self.reset.sampling!r}")
        if self.anchor_body not in self.tracked_bodies:
            raise ValueError(f"anchor_body {self.anchor_body!r} must be one of tracked_bodies")
        missing = [b for b in self.end_effector_bodies if b not in self.tracked_bodies]
        if missing:
            raise ValueError(f"end_effector_bodies must be tracked bodies; not tracked: {missing}")
        for name in TRACKING_TERMS:
            term = getattr(self.rewards, name)
            if term.sigma is None or not term.sigma > 0:
                raise ValueError(f"rewards.{name}.sigma must be > 0, got {term.sigma}")
        if not 0 < self.soft_joint_limit_factor <= 1:
            raise ValueError(f"soft_joint_limit_factor must be in (0, 1], got {self.soft_joint_limit_factor}")
        if self.max_episode_length_s is not None and not self.max_episode_length_s > 0:
            raise ValueError(f"max_episode_length_s must be > 0 or null, got {self.max_episode_length_s}")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "G1TaskConfig":
        """Build from a plain mapping (e.g. ``OmegaConf.to_container(cfg.task)``); unknown keys raise."""
        cfg = build_dataclass(cls, dict(data), "task")
        cfg.validate()
        return cfg

    @classmethod
    def from_yaml(cls, path: str | Path = YAML_PATH) -> "G1TaskConfig":
        """Load a task YAML (default: the packaged one)."""
        from omegaconf import OmegaConf

        return cls.from_dict(OmegaConf.to_container(OmegaConf.load(str(path)), resolve=True))


def motion_file_list(value: Any, key: str = "task.motion_files") -> list[str] | None:
    """``motion_files`` as a list of path strings: one path (str or PathLike) is a list of one.

    None stays None (the built-in clips). Anything else than a path or a
    list/tuple of paths is a ValueError naming ``key`` and what was expected.
    """
    if value is None:
        return None
    if isinstance(value, (str, os.PathLike)):
        value = [value]
    elif not isinstance(value, (list, tuple)):
        raise ValueError(  # noqa: TRY004 - config errors are ValueErrors (train: usage error, exit 2)
            f"{key} must be a path or a list of paths to npz clips, got {type(value).__name__} {value!r}"
        )
    out = []
    for i, item in enumerate(value):
        if not isinstance(item, (str, os.PathLike)) or not os.fspath(item):
            raise ValueError(f"{key}[{i}] must be a path to an npz clip, got {type(item).__name__} {item!r}")
        out.append(os.fspath(item))
    return out


def match_joint_values(patterns: Mapping[str, float], joint_names: list[str], default: float | None,
                       what: str) -> np.ndarray:
    """Per-joint values from a ``{joint name or regex: value}`` map.

    The rule (the same for ``default_joint_pos``, ``kp`` and ``kd``):

    - a key equal to a joint's name sets that joint, whatever patterns also
      match it (``+task.kp.left_knee_joint=120`` beats ``.*_knee_joint``);
    - otherwise the keys that fully match the joint's name as a regular
      expression apply; when two of them give it different values that is an
      error naming both keys (give the joint its own key, or make the
      patterns disjoint); equal values are fine;
    - a joint no key matches gets ``default``; ``default=None`` makes that an
      error naming the joint;
    - a key that is a plain name (no regex metacharacters) but names no joint
      is an error: a misspelt override must not be ignored silently.

    Raises:
        ValueError: any of the errors above, a bad regex or a non-numeric
            value; the message starts with ``what`` and names the key.
    """
    entries = []
    for key, val in patterns.items():
        key = str(key)
        try:
            value = float(val)
        except (TypeError, ValueError):
            raise ValueError(f"{what}: key {key!r} needs a number, got {val!r}") from None
        try:
            entries.append((key, re.compile(key), value))
        except re.error as exc:
            raise ValueError(f"{what}: bad joint pattern {key!r}: {exc}") from exc
    names = set(joint_names)
    strays = [key for key, _, _ in entries if key not in names and re.escape(key) == key]
    if strays:
        raise ValueError(f"{what}: key(s) {strays} name no joint of the model (joints: {list(joint_names)})")
    exact = {key: value for key, _, value in entries if key in names}
    out = np.empty(len(joint_names))
    unmatched = []
    for i, name in enumerate(joint_names):
        if name in exact:
            out[i] = exact[name]
            continue
        hits = [(key, value) for key, rx, value in entries if rx.fullmatch(name)]
        if not hits:
            if default is None:
                unmatched.append(name)
            else:
                out[i] = default
            continue
        first_key, first = hits[0]
        for key, value in hits[1:]:
            if value != first:
                raise ValueError(
                    f"{what}: joint {name!r} matches both {first_key!r} ({first:g}) and {key!r} ({value:g}); "
                    f"give {what} the key {name!r} (an exact joint name beats every pattern) "
                    "or make the patterns disjoint"
                )
        out[i] = first
    if unmatched:
        raise ValueError(f"{what}: no pattern matches joint(s) {unmatched}")
    return out

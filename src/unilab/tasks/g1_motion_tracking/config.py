"""Typed configuration of the G1 motion-tracking task; mirrors config/task/g1_motion_tracking.yaml."""

from __future__ import annotations

import dataclasses
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
    kp: dict[str, float] = field(default_factory=lambda: {
        ".*_hip_pitch_joint": 40.18, ".*_hip_roll_joint": 99.10, ".*_hip_yaw_joint": 40.18,
        ".*_knee_joint": 99.10, ".*_ankle_(pitch|roll)_joint": 28.50, "waist_yaw_joint": 40.18,
        "waist_(roll|pitch)_joint": 28.50, _ARMS: 14.25, ".*_wrist_(pitch|yaw)_joint": 16.78,
    })
    kd: dict[str, float] = field(default_factory=lambda: {
        ".*_hip_pitch_joint": 2.558, ".*_hip_roll_joint": 6.309, ".*_hip_yaw_joint": 2.558,
        ".*_knee_joint": 6.309, ".*_ankle_(pitch|roll)_joint": 1.814, "waist_yaw_joint": 2.558,
        "waist_(roll|pitch)_joint": 1.814, _ARMS: 0.907, ".*_wrist_(pitch|yaw)_joint": 1.068,
    })
    action_scale: float = 1.0
    action_scale_mode: str = "effort_over_kp"
    clip_targets_to_joint_range: bool = False
    obs_noise: ObsNoiseConfig = field(default_factory=ObsNoiseConfig)
    rewards: RewardsConfig = field(default_factory=RewardsConfig)
    soft_joint_limit_factor: float = 0.9
    terminations: TerminationsConfig = field(default_factory=TerminationsConfig)
    reset: ResetConfig = field(default_factory=ResetConfig)

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


def match_joint_values(patterns: Mapping[str, float], joint_names: list[str], default: float | None,
                       what: str) -> np.ndarray:
    """Per-joint values from a ``{regex: value}`` map (first full match wins).

    ``default=None`` makes a joint that matches no key an error naming it.
    """
    compiled = []
    for pat, val in patterns.items():
        try:
            compiled.append((re.compile(pat), float(val)))
        except re.error as exc:
            raise ValueError(f"{what}: bad joint pattern {pat!r}: {exc}") from exc
    out = np.empty(len(joint_names))
    unmatched = []
    for i, name in enumerate(joint_names):
        for rx, val in compiled:
            if rx.fullmatch(name):
                out[i] = val
                break
        else:
            if default is None:
                unmatched.append(name)
            else:
                out[i] = default
    if unmatched:
        raise ValueError(f"{what}: no pattern matches joint(s) {unmatched}")
    return out

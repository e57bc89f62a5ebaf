"""Pendulum swing-up settings: the `task` group's structured config when --task pendulum.

config/task/pendulum.yaml names it.
"""

from __future__ import annotations

from dataclasses import dataclass

from unilab.dataclass_config import check_file


@dataclass
class PendulumConfig:
    """Swing-up of a torque-limited pendulum (upright is angle 0)."""

    name: str = "pendulum"
    """Task registry name."""
    model_path: str | None = None
    """MJCF to load; None uses unilab's built-in pendulum."""
    substeps: int = 5
    """Physics steps per env step (0.01 s each: 20 Hz control)."""
    episode_length: int = 200
    """Env steps before a time-out (truncation)."""
    angle_cost: float = 1.0
    """Weight of angle^2 in the cost."""
    velocity_cost: float = 0.1
    """Weight of angular velocity^2 in the cost."""
    action_cost: float = 0.001
    """Weight of action^2 in the cost."""
    init_velocity: float = 1.0
    """Initial angular velocity is uniform in [-init_velocity, init_velocity]."""

    def check_paths(self) -> None:
        """The user's model exists (checked before training starts anything)."""
        if self.model_path is not None:
            check_file(self.model_path, "task.model_path", "an MJCF file, or null")

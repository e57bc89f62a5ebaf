"""The config fields every MuJoCo robot task shares, declared once: the model, the simulation step and the
PD actuation. A task's config subclasses :class:`RobotTaskConfig`, adds its own fields, and redeclares a field
only to change its default (``train --help`` reads the docstrings along the class hierarchy)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from unilab.assets import g1_actuation
from unilab.dataclass_config import check_fields
from unilab.tasks.core.model import INTEGRATORS

ACTION_SCALE_MODES = ("effort_over_kp", "radians")


@dataclass
class RobotTaskConfig:
    """A MuJoCo robot task's model, simulation step and actuation (defaults: the Unitree G1 29-DoF)."""

    name: str = ""
    """Task registry name."""
    model_xml: str | None = None
    """MJCF scene of the robot (a free-floating base and a floor); null: the built-in G1 scene (fetched into
    $UNILAB_CACHE)."""

    # --- simulation ---
    sim_dt: float = 0.005
    """Physics timestep (s)."""
    decimation: int = 4
    """Physics substeps per policy step (0.005 s x 4 = 50 Hz control)."""
    integrator: str | None = "implicitfast"
    """MuJoCo integrator: euler, implicit, implicitfast or rk4; null keeps the model's."""
    self_collisions: bool = False
    """Robot bodies collide with each other; off: robot geoms touch the environment only."""

    # --- actuation: PD inside MuJoCo (motor actuators become position actuators) ---
    default_joint_pos: dict[str, float] = field(default_factory=lambda: dict(g1_actuation.DEFAULT_JOINT_POS))
    """rad, {joint name or regex: value}; joints matching no key get 0. An exact joint name beats
    every pattern (+task.default_joint_pos.left_knee_joint=0.5 overrides .*_knee_joint); other keys
    are regexes (full match) and two giving one joint different values are an error naming both;
    a plain-name key naming no joint is an error."""
    kp: dict[str, float] = field(default_factory=lambda: dict(g1_actuation.KP))
    """N m / rad, {joint name or regex: value}; every actuated joint needs a value; keys as for
    default_joint_pos (+task.kp.left_knee_joint=120 overrides .*_knee_joint)."""
    kd: dict[str, float] = field(default_factory=lambda: dict(g1_actuation.KD))
    """N m s / rad, {joint name or regex: value}; every actuated joint needs a value; keys as for kp."""
    action_scale: float = 0.25
    """PD target = default + scale_j x action, action in [-1, 1]; scale_j per action_scale_mode
    (x action_bound_from_joint_range)."""
    action_scale_mode: str = "effort_over_kp"
    """effort_over_kp: scale_j = action_scale x effort_limit_j / kp_j; radians: scale_j = action_scale."""
    action_bound_from_joint_range: bool = True
    """true: as holosoma's FastSAC, the squashed action's bound is range_j / action_scale per joint
    (range_j: the larger distance from the default to a joint limit), so scale_j is further multiplied
    by that bound (action +-1 moves the target by range_j x effort_j / kp_j, or by range_j in radians mode);
    false: scale_j as it is. Needs every actuated joint limited."""
    clip_targets_to_joint_range: bool = False
    """true: actuator ctrlrange = joint range (targets clamped); false: targets unclamped."""

    obs_clip: float | None = 100.0
    """Policy and critic observation entries are clipped to +-this (after noise and scale; holosoma's
    clip_observations); null: no clip."""

    @property
    def control_dt(self) -> float:
        """Policy step (s) = sim_dt x decimation."""
        return self.sim_dt * self.decimation

    def validate(self) -> None:
        """Raise ValueError naming the first invalid shared field (a task's ``validate`` calls this first)."""
        check_fields(self, "task.", (
            (("sim_dt", "action_scale"), lambda v: v > 0, "> 0"),
            (("decimation",), lambda v: int(v) == v and v >= 1, "an int >= 1"),
            (("integrator",), lambda v: v is None or v in INTEGRATORS, f"{'|'.join(INTEGRATORS)}|null"),
            (("action_scale_mode",), lambda v: v in ACTION_SCALE_MODES, "|".join(ACTION_SCALE_MODES)),
            (("obs_clip",), lambda v: v is None or v > 0, "> 0 or null"),
        ))

    def check_paths(self) -> None:
        """The user's model exists (checked before training starts anything)."""
        if self.model_xml is not None and not Path(self.model_xml).expanduser().is_file():
            raise ValueError(f"task.model_xml={self.model_xml}: no such file (expected an MJCF file, or null)")

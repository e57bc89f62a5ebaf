"""The config fields every MuJoCo robot task shares, declared once: the robot (:class:`RobotConfig`: its model and
the facts about it), the simulation step and the PD actuation. A task's config subclasses :class:`RobotTaskConfig`,
adds its own fields, and redeclares a field only to change its default (``train --help`` reads the docstrings along
the class hierarchy). A robot preset is a :class:`RobotConfig` instance (:data:`ROBOTS`); a task preset (a row of
``unilab.tasks.registry.TASKS``) puts one into the task's config, so tasks never branch on a robot.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from unilab.assets import g1_actuation, t1_robot
from unilab.assets.holosoma import SCENES
from unilab.dataclass_config import check_fields, check_file
from unilab.tasks.core.model import INTEGRATORS

ACTION_SCALE_MODES = ("effort_over_kp", "radians")


@dataclass
class RobotConfig:
    """A robot: its model and what the tasks read about it, as holosoma's robot config (``config_values/robot.py``)
    holds it. Defaults: the Unitree G1 29-DoF (``g1_29dof``)."""

    asset: str = "g1"
    """Built-in robot whose scene (the MJCF on a floor) is fetched into $UNILAB_CACHE: g1 or t1; model_xml replaces
    it."""
    model_xml: str | None = None
    """MJCF scene of the robot (a free-floating base and a floor); null: the built-in asset's."""
    default_joint_pos: dict[str, float] = field(default_factory=lambda: dict(g1_actuation.DEFAULT_JOINT_POS))
    """rad, {joint name or regex: value}; joints matching no key get 0. An exact joint name beats
    every pattern (+task.robot.default_joint_pos.left_knee_joint=0.5 overrides .*_knee_joint); other keys
    are regexes (full match) and two giving one joint different values are an error naming both;
    a plain-name key naming no joint is an error."""
    kp: dict[str, float] = field(default_factory=lambda: dict(g1_actuation.KP))
    """N m / rad, {joint name or regex: value}; every actuated joint needs a value; keys as for
    default_joint_pos (+task.robot.kp.left_knee_joint=120 overrides .*_knee_joint)."""
    kd: dict[str, float] = field(default_factory=lambda: dict(g1_actuation.KD))
    """N m s / rad, {joint name or regex: value}; every actuated joint needs a value; keys as for kp."""
    effort_limit: dict[str, float] = field(default_factory=dict)
    """N m, {joint name or regex: value}, keys as for kp: each actuated joint's torque limit (the PD servo's force is
    clamped to it); {}: the model's (the joint's actuatorfrcrange, else its motor's forcerange or ctrlrange)."""
    base_body: str = "pelvis"
    """The floating base (the body of the model's free joint): velocities, orientation and the gravity observation
    are this body's."""
    base_height: float = 0.8
    """Base height at a reset (m; holosoma's init_state pos z)."""
    feet: list[str] = field(default_factory=lambda: ["left_ankle_roll_link", "right_ankle_roll_link"])
    """The left and right foot bodies (holosoma's foot_body_name)."""
    foot_points: list[str] = field(default_factory=lambda: ["left_foot_contact_point", "right_foot_contact_point"])
    """The left and right bodies whose height above the ground is the feet's (holosoma's foot_height_name)."""
    termination_bodies: str = ".*(pelvis|hip|shoulder).*"
    """Regex (full match) over body names: a contact force on any of them ends a locomotion episode (holosoma's
    terminate_after_contacts_on: the bodies whose names contain one of its words)."""

    def validate(self) -> None:
        """Raise ValueError naming the first invalid field."""
        check_fields(self, "task.robot.", (
            (("asset",), lambda v: v in SCENES, " or ".join(SCENES)),
            (("base_height",), lambda v: v > 0, "> 0"),
            (("feet", "foot_points"), lambda v: len(v) == 2, "[left, right] body names"),
        ))
        try:
            re.compile(self.termination_bodies)
        except re.error as exc:
            raise ValueError(f"task.robot.termination_bodies: bad regex {self.termination_bodies!r}: {exc}") from exc


ROBOTS = {
    "g1": RobotConfig(),
    "t1": RobotConfig(
        asset="t1", default_joint_pos=dict(t1_robot.DEFAULT_JOINT_POS), kp=dict(t1_robot.KP), kd=dict(t1_robot.KD),
        effort_limit=dict(t1_robot.EFFORT_LIMIT), base_body=t1_robot.BASE_BODY, base_height=t1_robot.BASE_HEIGHT,
        feet=list(t1_robot.FEET), foot_points=list(t1_robot.FOOT_POINTS),
        termination_bodies=t1_robot.TERMINATION_BODIES),
}
"""The robot presets: the Unitree G1 29-DoF and the Booster T1 29-DoF (holosoma's ``t1_29dof_waist_wrist``; its
values: :mod:`unilab.assets.t1_robot`). Copy one (``copy.deepcopy``) before changing it."""


@dataclass
class RobotTaskConfig:
    """A MuJoCo robot task's robot, simulation step and actuation (defaults: the Unitree G1 29-DoF)."""

    name: str = ""
    """Task registry name."""
    robot: RobotConfig = field(default_factory=RobotConfig)
    """The robot: model, joint defaults, PD gains, torque limits, base and feet (a task preset picks one:
    --task t1_locomotion is the Booster T1)."""

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
        self.robot.validate()

    def check_paths(self) -> None:
        """The user's model exists (checked before training starts anything)."""
        if self.robot.model_xml is not None:
            check_file(self.robot.model_xml, "task.robot.model_xml", "an MJCF file, or null")

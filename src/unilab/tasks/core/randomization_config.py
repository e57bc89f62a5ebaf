"""Domain randomization settings every task shares: one dataclass per term, ``task.randomization.<term>``.

Defaults are holosoma's G1 WBT recipe (the motion-tracking task's); a task with another recipe builds its own
defaults (:func:`unilab.tasks.g1_locomotion.config.locomotion_randomization`). MuJoCo-free, so configs
validate without it; the terms themselves are :mod:`unilab.tasks.core.randomization`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from unilab.dataclass_config import check_fields, is_low_high


@dataclass
class FrictionRandomization:
    """Setup time: one sliding friction coefficient per env for every geom (holosoma G1 WBT: on)."""

    enabled: bool = True
    """Draw one coefficient per env when the env is built."""
    range: list[float] = field(default_factory=lambda: [0.3, 1.6])
    """[low, high] of the uniform draw; MuJoCo's contact friction (column 0 of geom_friction). MuJoCo has one sliding
    coefficient where PhysX has a static and a dynamic one: holosoma's static range [0.3, 1.6] is used (its dynamic
    [0.3, 1.2] has no counterpart). Written to the robot's and the ground's geoms, so MuJoCo's max-of-the-pair rule
    makes it the contact's (as holosoma's MuJoCo backend: one value per env for all geoms), and to both sliding columns
    of every explicit <pair> of a robot geom, whose own friction overrides the geoms' (the G1's feet touch the floor
    only through such pairs)."""


@dataclass
class BaseComRandomization:
    """Setup time: a per-env centre-of-mass offset of one body (holosoma G1 WBT: on)."""

    enabled: bool = True
    """Offset the body's centre of mass (body_ipos) once per env when the env is built."""
    body: str | None = None
    """The body whose centre of mass moves; null: the task's anchor_body (torso_link on the G1, holosoma's
    torso_name)."""
    x: list[float] = field(default_factory=lambda: [-0.025, 0.025])
    """[low, high] of the offset along the body's x axis (m), added to its centre of mass."""
    y: list[float] = field(default_factory=lambda: [-0.05, 0.05])
    """[low, high] of the offset along the body's y axis (m)."""
    z: list[float] = field(default_factory=lambda: [-0.05, 0.05])
    """[low, high] of the offset along the body's z axis (m)."""


@dataclass
class JointPosBiasRandomization:
    """Setup time: a per-env, per-joint encoder offset (holosoma G1 WBT: on)."""

    enabled: bool = True
    """Draw one offset per env and joint when the env is built."""
    range: list[float] = field(default_factory=lambda: [-0.01, 0.01])
    """[low, high] of the offset (rad), added to the default joint positions as holosoma's setup_dof_pos_bias: the
    observed joint_pos_rel (q - default - offset; policy and critic) and the PD targets (default + offset + scale
    x action) both move; rewards use the true positions."""


@dataclass
class PushRandomization:
    """Step time: every few seconds per env, add a random kick to the root velocity (holosoma G1 WBT: on)."""

    enabled: bool = True
    """Push the robots. A kick is applied just before a step's physics (holosoma: just after the previous
    step's; the same motion, but the observation in between does not show the kick yet)."""
    interval_s: list[float] = field(default_factory=lambda: [1.0, 3.0])
    """[low, high] of the uniform time between an env's pushes (s), drawn per env at each reset and after
    each push, counted in policy steps (truncated to whole steps, as holosoma does)."""
    max_lin_vel: list[float] = field(default_factory=lambda: [0.5, 0.5, 0.2])
    """Largest kick of the root linear velocity, world x y z (m/s); each component is uniform in +-this. The
    kick is ADDED to the current velocity, as holosoma's WBT env does (BeyondMimic's push_by_setting_velocity)."""
    max_ang_vel: list[float] = field(default_factory=lambda: [0.52, 0.52, 0.78])
    """Largest kick of the root angular velocity, world x y z (rad/s); uniform in +-this, added."""


@dataclass
class PdGainsRandomization:
    """Reset time: per-env, per-joint scales of the PD gains kp and kd (holosoma G1 WBT: present, off)."""

    enabled: bool = False
    """Redraw the scales at each env's reset."""
    kp_scale: list[float] = field(default_factory=lambda: [0.9, 1.1])
    """[low, high] of the uniform factor on each joint's kp (the actuators' gain and position bias)."""
    kd_scale: list[float] = field(default_factory=lambda: [0.9, 1.1])
    """[low, high] of the uniform factor on each joint's kd (the actuators' velocity bias)."""


@dataclass
class MassRandomization:
    """Setup time: per-env link mass scales and a mass added to one body (holosoma G1 locomotion: on)."""

    enabled: bool = False
    """Draw the masses once per env when the env is built."""
    bodies: str = "pelvis|.*_hip_(pitch|roll|yaw)_link|.*_knee_link"
    """Regex (full match) over body names: the links whose masses are scaled (holosoma's
    randomize_link_body_names)."""
    scale: list[float] = field(default_factory=lambda: [0.9, 1.2])
    """[low, high] of each link's uniform mass factor (its inertia scales alike)."""
    added_body: str = "torso_link"
    """The body that gets the added mass (holosoma's torso_name)."""
    added: list[float] = field(default_factory=lambda: [-1.0, 3.0])
    """[low, high] of the uniform mass added to added_body (kg; its inertia scales with its mass)."""


@dataclass
class ActionDelayRandomization:
    """Reset time: a per-env delay of the PD targets, in policy steps (holosoma G1 WBT: present, off)."""

    enabled: bool = False
    """Redraw each env's delay at its reset (its queued targets restart at the default pose)."""
    steps: list[int] = field(default_factory=lambda: [0, 1])
    """[low, high] of the uniform integer delay (policy steps, both included)."""


@dataclass
class RandomizationConfig:
    """Domain randomization (defaults: holosoma's G1 WBT recipe); each term draws from its own stream of the env
    seed, so the task's other draws (start frames, reset and observation noise) are the same without it."""

    enabled: bool = True
    """false turns every term off: the task is then bit-identical to one without randomization."""
    friction: FrictionRandomization = field(default_factory=FrictionRandomization)
    """Contact friction (setup time)."""
    base_com: BaseComRandomization = field(default_factory=BaseComRandomization)
    """Centre-of-mass offset of the torso (setup time)."""
    joint_pos_bias: JointPosBiasRandomization = field(default_factory=JointPosBiasRandomization)
    """Encoder offset on the observed joint positions (setup time)."""
    push: PushRandomization = field(default_factory=PushRandomization)
    """Random root-velocity kicks (per-env timers)."""
    pd_gains: PdGainsRandomization = field(default_factory=PdGainsRandomization)
    """PD gain scales (reset time)."""
    action_delay: ActionDelayRandomization = field(default_factory=ActionDelayRandomization)
    """Delay of the applied PD targets (reset time)."""
    mass: MassRandomization = field(default_factory=MassRandomization)
    """Link mass scales and an added base mass (setup time)."""

    def active(self, term: str) -> bool:
        """Whether term ``term`` runs (the master switch and its own)."""
        return bool(self.enabled and getattr(self, term).enabled)

    def validate(self) -> None:
        """Raise ValueError naming the first invalid key."""
        check_fields(self, "task.randomization.", (
            (("friction.range", "pd_gains.kp_scale", "pd_gains.kd_scale", "action_delay.steps", "mass.scale"),
             lambda v: is_low_high(v, 0), "[low, high] with 0 <= low <= high"),
            (("base_com.x", "base_com.y", "base_com.z", "joint_pos_bias.range", "mass.added"), is_low_high,
             "[low, high] with low <= high"),
            (("push.interval_s",), lambda v: is_low_high(v) and v[0] > 0, "[low, high] with 0 < low <= high"),
            (("push.max_lin_vel", "push.max_ang_vel"), lambda v: len(v) == 3 and all(x >= 0 for x in v),
             "3 numbers >= 0"),
        ))

"""The locomotion task's config (``train --help`` prints the field docstrings). Defaults (``--task g1_locomotion``):
holosoma 0.0.3's G1 29-DoF FastSAC recipe, ``config_values/loco/g1/``: ``reward.py`` (``g1_29dof_loco_fast_sac``),
``command.py``, ``observation.py`` (``g1_29dof_loco_single_wolinvel``), ``termination.py``, ``randomization.py``,
``curriculum.py`` (``g1_29dof_curriculum_fast_sac``) and ``robot.py`` (``g1_29dof``). :func:`t1_locomotion`
(``--task t1_locomotion``): the same task on the Booster T1 with holosoma's T1 recipe, as its differences.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from unilab.assets import t1_robot
from unilab.dataclass_config import check_fields, is_low_high
from unilab.tasks.core.randomization_config import (
    ActionDelayRandomization,
    BaseComRandomization,
    FrictionRandomization,
    JointPosBiasRandomization,
    MassRandomization,
    PdGainsRandomization,
    PushRandomization,
    RandomizationConfig,
)
from unilab.tasks.core.robot_config import ROBOTS, RobotTaskConfig

_ARMS_AND_WAIST = "waist_.*|.*_(shoulder|elbow|wrist)_.*"


@dataclass
class LocoTerm:
    """A reward term: ``weight x term x control_dt`` (x the penalty curriculum's scale when ``curriculum``)."""

    weight: float = 1.0
    """Weight in the reward sum (negative: a penalty); 0 turns the term off."""
    tracking_sigma: float | None = None
    """Tracking terms: term = exp(-squared error / tracking_sigma), holosoma's locomotion tracking_sigma (a
    variance: it divides the squared error itself, unlike the tracking task's sigma^2); null for a penalty."""
    curriculum: bool = False
    """Scaled by the penalty curriculum (holosoma's tag penalty_curriculum)."""


@dataclass
class FeetPhaseTerm(LocoTerm):
    """Foot height against the gait phase's expected height (a cubic Bezier swing)."""

    swing_height: float = 0.09
    """Peak expected foot height in swing (m)."""


@dataclass
class PoseTerm(LocoTerm):
    """Weighted squared distance of the joints from the default pose."""

    joint_weights: dict[str, float] = field(default_factory=lambda: {
        ".*_hip_pitch_joint": 0.01, ".*_hip_roll_joint": 1.0, ".*_hip_yaw_joint": 5.0, ".*_knee_joint": 0.01,
        ".*_ankle_(pitch|roll)_joint": 5.0, _ARMS_AND_WAIST: 50.0,
    })
    """Per-joint weight, {joint name or regex: value} (the rule of task.robot.kp); every joint needs one."""


@dataclass
class CloseFeetTerm(LocoTerm):
    """1 when the feet are closer than ``threshold`` sideways (in the base's heading frame)."""

    threshold: float = 0.15
    """Smallest lateral distance of the feet (m)."""


@dataclass
class RewardsConfig:
    """Reward = control_dt x sum of weight x term (penalty-curriculum terms also x its scale); defaults:
    holosoma's g1_29dof_loco_fast_sac."""

    tracking_lin_vel: LocoTerm = field(default_factory=lambda: LocoTerm(2.0, 0.25))
    """exp(-|command xy - base linear velocity xy (base frame)|^2 / tracking_sigma)."""
    tracking_ang_vel: LocoTerm = field(default_factory=lambda: LocoTerm(1.5, 0.25))
    """exp(-(command yaw rate - base yaw rate)^2 / tracking_sigma)."""
    ang_vel_xy: LocoTerm = field(default_factory=lambda: LocoTerm(-1.0, curriculum=True))
    """Squared base roll and pitch rates (rad/s)^2."""
    orientation: LocoTerm = field(default_factory=lambda: LocoTerm(-10.0, curriculum=True))
    """Squared x and y of gravity in the base frame (0 upright)."""
    action_rate: LocoTerm = field(default_factory=lambda: LocoTerm(-2.0, curriculum=True))
    """Sum of squared action changes, in the recipe's units (the [-1, 1] action times env.action_bound)."""
    feet_phase: FeetPhaseTerm = field(default_factory=lambda: FeetPhaseTerm(5.0, 0.008))
    """exp(-(sum over feet of (height - expected height)^2) / tracking_sigma)."""
    pose: PoseTerm = field(default_factory=lambda: PoseTerm(-0.5, curriculum=True))
    """Sum over joints of weight x (q - default)^2."""
    close_feet_xy: CloseFeetTerm = field(default_factory=lambda: CloseFeetTerm(-10.0, curriculum=True))
    """1 when the feet are closer sideways than the threshold."""
    feet_ori: LocoTerm = field(default_factory=lambda: LocoTerm(-5.0, curriculum=True))
    """Sum over feet of |gravity xy in the foot frame| (0 with flat feet)."""
    alive: LocoTerm = field(default_factory=lambda: LocoTerm(10.0))
    """1 every step."""


@dataclass
class CommandConfig:
    """Velocity commands (base frame), drawn at each reset and every ``resampling_time_s`` (holosoma's)."""

    lin_vel_x: list[float] = field(default_factory=lambda: [-1.0, 1.0])
    """[low, high] of the forward velocity command (m/s)."""
    lin_vel_y: list[float] = field(default_factory=lambda: [-1.0, 1.0])
    """[low, high] of the lateral velocity command (m/s)."""
    ang_vel_yaw: list[float] = field(default_factory=lambda: [-1.0, 1.0])
    """[low, high] of the yaw-rate command (rad/s)."""
    stand_prob: float = 0.2
    """Probability that a drawn command is zero (stand still; the gait phase then holds both feet down)."""
    resampling_time_s: float = 10.0
    """A new command every this many seconds of an episode."""


@dataclass
class GaitConfig:
    """The gait clock: each leg's phase in [-pi, pi), the legs half a period apart."""

    period_s: float = 1.0
    """Mean gait period (s)."""
    frequency_width: float = 0.2
    """Each command draw also draws the gait frequency uniform in 1 / period_s +- this (Hz), as holosoma's
    gait_period_randomization_width (which widens the frequency, not the period)."""
    randomize_phase: bool = True
    """Start each episode at a uniform random phase (false: the left leg at 0)."""


@dataclass
class PushConfig:
    """Random pushes: every few seconds per env, the base's horizontal velocity is set to a random value."""

    enabled: bool = True
    """Push the robots during training (never in evaluation)."""
    interval_s: list[float] = field(default_factory=lambda: [5.0, 10.0])
    """[low, high] of the uniform time between an env's pushes (s), drawn at each reset and after each push."""
    max_vel: list[float] = field(default_factory=lambda: [1.0, 1.0])
    """The base's world x and y velocity become uniform in +-this (m/s): set, not added, as holosoma."""


@dataclass
class TerrainConfig:
    """The ground: the model's flat floor, or holosoma's terrain_locomotion_mix as a height field of tiles."""

    kind: str = "flat"
    """flat (the MJCF's floor) or mix (rows x cols tiles of flat, rough and low-obstacle ground)."""
    rows: int = 10
    """Tiles along y."""
    cols: int = 20
    """Tiles along x."""
    tile_size: float = 8.0
    """Side of a tile (m)."""
    resolution: float = 0.1
    """Height-field sample spacing (m; holosoma's horizontal_scale)."""
    flat: float = 0.2
    """Share of flat tiles."""
    rough: float = 0.6
    """Share of rough tiles (every sample 2.5 to 7.5 cm below 0 at the highest difficulty)."""
    low_obstacles: float = 0.2
    """Share of tiles with 30 shallow square pits (up to 3 cm deep)."""
    difficulties: list[float] = field(default_factory=lambda: [0.5, 0.75, 0.9])
    """A tile's difficulty is one of these, uniformly (holosoma's randomized terrain)."""
    spawn_offset: float = 1.0
    """A reset puts the base at its env's tile centre (drawn when the env is built) + uniform +-this in x, y (m)."""


@dataclass
class CurriculumConfig:
    """Penalty curriculum (holosoma's g1_29dof_curriculum_fast_sac)."""

    enabled: bool = True
    """Scale the penalty terms marked ``curriculum`` (task.rewards.*.curriculum) by a factor that starts at
    ``initial_scale`` and follows the average episode length; false: the factor stays at 1."""
    initial_scale: float = 0.5
    """Scale at the start of training."""
    min_scale: float = 0.5
    """Smallest scale."""
    max_scale: float = 1.0
    """Largest scale."""
    level_down_threshold: float = 150.0
    """Below this average episode length (steps) the scale shrinks by ``degree`` each step."""
    level_up_threshold: float = 750.0
    """Above this average episode length (steps) the scale grows by ``degree`` each step."""
    degree: float = 0.001
    """Relative change of the scale per env step."""
    average_over: int = 1000
    """The average episode length moves towards the mean of a step's ended episodes with weight min(count / this, 1)."""


@dataclass
class ObsNoiseConfig:
    """Uniform +-noise on the actor's observation (before the piece's scale, as holosoma); 0 disables."""

    base_ang_vel: float = 0.0
    """Base angular velocity noise (rad/s)."""
    projected_gravity: float = 0.0
    """Projected gravity noise."""
    joint_pos: float = 0.01
    """Joint position noise (rad)."""
    joint_vel: float = 0.1
    """Joint velocity noise (rad/s)."""


@dataclass
class ObsScalesConfig:
    """Factors applied to observation pieces (holosoma's observation scales)."""

    base_ang_vel: float = 0.25
    """Base angular velocity (actor and critic)."""
    joint_vel: float = 0.05
    """Joint velocities."""
    base_lin_vel: float = 2.0
    """Base linear velocity (critic only)."""


def locomotion_randomization() -> RandomizationConfig:
    """holosoma's g1_29dof_randomization (config_values/loco/g1/randomization.py; PD gains and masses: the
    core defaults). Its push is ``task.push``, which sets the base velocity (``task.randomization.push`` adds a
    kick, the tracking recipe's)."""
    return RandomizationConfig(
        friction=FrictionRandomization(range=[0.5, 1.25]),
        base_com=BaseComRandomization(body="torso_link", x=[-0.05, 0.05], y=[-0.05, 0.05], z=[-0.05, 0.05]),
        joint_pos_bias=JointPosBiasRandomization(enabled=False),
        push=PushRandomization(enabled=False),
        pd_gains=PdGainsRandomization(enabled=True),
        action_delay=ActionDelayRandomization(enabled=True, steps=[0, 1]),
        mass=MassRandomization(enabled=True),
    )


@dataclass
class LocomotionConfig(RobotTaskConfig):
    """Everything the locomotion task reads; the model, simulation and actuation fields are
    :class:`~unilab.tasks.core.robot_config.RobotTaskConfig`'s (self-collisions off as holosoma's g1_29dof asset)."""

    name: str = "g1_locomotion"
    action_scale_mode: str = "radians"
    """radians: scale_j = action_scale (holosoma's locomotion action_scale); effort_over_kp: scale_j =
    action_scale x effort_j / kp_j."""
    max_episode_length_s: float = 20.0
    """Time-out (truncation) after this many seconds (holosoma's max_episode_length_s)."""

    termination_force: float = 1.0
    """Net contact force (N) on a termination body (task.robot.termination_bodies) that ends the episode."""
    reset_joint_scale: list[float] = field(default_factory=lambda: [0.5, 1.5])
    """At a reset each joint starts at its default x uniform [low, high] (holosoma's randomize_dof_state)."""

    # --- task ---
    commands: CommandConfig = field(default_factory=CommandConfig)
    """Velocity commands."""
    gait: GaitConfig = field(default_factory=GaitConfig)
    """The gait clock the feet_phase reward follows."""
    rewards: RewardsConfig = field(default_factory=RewardsConfig)
    """Reward terms."""
    curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)
    """Penalty curriculum."""
    push: PushConfig = field(default_factory=PushConfig)
    """Random pushes (holosoma's locomotion push: the base velocity is set)."""
    terrain: TerrainConfig = field(default_factory=TerrainConfig)
    """The ground (task.terrain.kind=mix: holosoma's mixed tiles)."""
    randomization: RandomizationConfig = field(default_factory=locomotion_randomization)
    """Domain randomization: friction, torso centre of mass, PD gains, action delay, link and torso masses
    (task.randomization.enabled=false turns them off; pushes are task.push)."""
    obs_noise: ObsNoiseConfig = field(default_factory=ObsNoiseConfig)
    """Actor observation noise."""
    obs_scales: ObsScalesConfig = field(default_factory=ObsScalesConfig)
    """Observation scales."""

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ValueError naming the first invalid field."""
        super().validate()
        tracking = ("tracking_lin_vel", "tracking_ang_vel", "feet_phase")
        check_fields(self, "task.", (
            (("max_episode_length_s", "commands.resampling_time_s"), lambda v: v > 0, "> 0"),
            (("reset_joint_scale", "commands.lin_vel_x", "commands.lin_vel_y", "commands.ang_vel_yaw"), is_low_high,
             "[low, high] with low <= high"),
            (("commands.stand_prob",), lambda v: 0 <= v <= 1, "in [0, 1]"),
            (("push.interval_s",), lambda v: is_low_high(v) and v[0] > 0, "[low, high] with 0 < low <= high"),
            (("push.max_vel",), lambda v: len(v) == 2 and all(x >= 0 for x in v), "2 numbers >= 0"),
            (("curriculum.average_over",), lambda v: v >= 1, ">= 1"),
            (("curriculum.level_up_threshold",), lambda v: v >= self.curriculum.level_down_threshold,
             f">= task.curriculum.level_down_threshold ({self.curriculum.level_down_threshold})"),
            (("curriculum.degree",), lambda v: v >= 0, ">= 0"),
            ([f"rewards.{name}.tracking_sigma" for name in tracking], lambda v: v is not None and v > 0, "> 0"),
            ([f"rewards.{name}.tracking_sigma" for name in RewardsConfig.__dataclass_fields__ if name not in tracking],
             lambda v: v is None or v > 0, "> 0 or null"),
            (("terrain.kind",), lambda v: v in ("flat", "mix"), "flat|mix"),
        ))
        g = self.gait
        if not g.period_s > 0 or not 0 <= g.frequency_width < 1 / g.period_s:
            raise ValueError(f"task.gait needs period_s > 0 and 0 <= frequency_width < 1 / period_s, got "
                             f"{g.period_s} and {g.frequency_width}")
        cur = self.curriculum
        if not 0 <= cur.min_scale <= cur.initial_scale <= cur.max_scale:
            raise ValueError("task.curriculum needs 0 <= min_scale <= initial_scale <= max_scale, got "
                             f"{cur.min_scale}, {cur.initial_scale}, {cur.max_scale}")
        t = self.terrain
        if min(t.rows, t.cols) < 1 or not 0 < 2 * t.resolution <= t.tile_size:
            raise ValueError("task.terrain needs rows, cols >= 1 and 0 < 2 x resolution <= tile_size, got "
                             f"{t.rows}, {t.cols}, {t.resolution}, {t.tile_size}")
        if min(t.flat, t.rough, t.low_obstacles) < 0 or t.flat + t.rough + t.low_obstacles <= 0 or not t.difficulties:
            raise ValueError("task.terrain needs shares flat, rough, low_obstacles >= 0 with a positive sum and "
                             "at least one difficulty")
        self.randomization.validate()
        for term, why in (("joint_pos_bias", "its observation has no encoder offsets"),
                          ("push", "its push is task.push, which sets the base velocity")):
            if self.randomization.active(term):
                raise ValueError(f"task.randomization.{term}: not used by {self.name} ({why}); leave it off")


_T1_POSE_WEIGHTS = {".*_Hip_Pitch": 0.01, ".*_Hip_Roll": 1.0, ".*_Hip_Yaw": 5.0, ".*_Knee_Pitch": 0.01,
                    ".*_Ankle_(Pitch|Roll)": 5.0, "AAHead_yaw|Head_pitch|Waist|.*_(Shoulder|Elbow|Wrist|Hand)_.*": 50.0}


def t1_locomotion() -> LocomotionConfig:
    """``--task t1_locomotion``: the Booster T1 (``ROBOTS["t1"]``) with holosoma 0.0.3's ``t1_29dof_fast_sac``
    (``config_values/loco/t1/``), which differs from the G1 recipe in the values set here only."""
    cfg = LocomotionConfig(name="t1_locomotion", robot=copy.deepcopy(ROBOTS["t1"]))
    cfg.rewards.pose.joint_weights = dict(_T1_POSE_WEIGHTS)  # reward.py: the G1's weights per joint kind
    cfg.obs_scales = ObsScalesConfig(base_ang_vel=1.0, joint_vel=0.1, base_lin_vel=1.0)  # observation.py
    cfg.gait.frequency_width = 0.0  # command.py gives LocomotionGait no gait_period_randomization_width (0)
    r = cfg.randomization  # randomization.py
    r.friction.range = [0.1, 1.0]
    r.base_com = BaseComRandomization(enabled=False, body=t1_robot.TORSO_BODY, x=[-0.01, 0.01], y=[-0.01, 0.01],
                                      z=[-0.01, 0.01])
    r.mass.bodies, r.mass.added_body = t1_robot.LINK_MASS_BODIES, t1_robot.TORSO_BODY
    cfg.validate()
    return cfg

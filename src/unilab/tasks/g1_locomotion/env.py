"""Velocity-command locomotion of the robot ``task.robot`` on a physics pool (unilab.sim.physics), holosoma's
FastSAC recipe.

A ``step`` is one ``pool.step`` of ``decimation`` substeps (PD targets ``default + scale * action``), then the
step driver (:mod:`unilab.tasks.core.driver`: robot state, command and gait clock, rewards, terminations,
observations); ended envs restart upright over their spawn point (the driver's start row) and the penalty
curriculum follows the ended episodes. Ground: the MJCF's floor (task.terrain.kind=flat), or a height field of
tiles (mix, :mod:`unilab.tasks.core.terrain`), each env spawning on a tile drawn when the env is built.
"""

from __future__ import annotations

import mujoco
import numpy as np

from unilab.tasks.base import Buffers
from unilab.tasks.core.collisions import disable_self_collisions, matching_bodies
from unilab.tasks.core.driver import START, DriverRows
from unilab.tasks.core.driver_env import DriverEnv
from unilab.tasks.core.joints import match_joint_values
from unilab.tasks.core.model import load_task_model
from unilab.tasks.core.symmetry import partner_indices
from unilab.tasks.core.terrain import FLAT, add_to_spec, make_terrain
from unilab.tasks.env_streams import env_streams
from unilab.tasks.g1_locomotion.commands import START as START_ROWS
from unilab.tasks.g1_locomotion.commands import STATEFUL
from unilab.tasks.g1_locomotion.config import LocomotionConfig
from unilab.tasks.g1_locomotion.observations import GATHER, obs_layout
from unilab.tasks.g1_locomotion.rewards import REWARD_TERMS, RewardWeights
from unilab.tasks.g1_locomotion.state import STATE, TERRAIN, LocoArrays
from unilab.tasks.g1_locomotion.terminations import TERMINATIONS


def _body_ids(model: mujoco.MjModel, names: list[str], key: str) -> np.ndarray:
    ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, n) for n in names]
    missing = [n for n, i in zip(names, ids, strict=True) if i < 0]
    if missing:
        raise ValueError(f"{key}: no body named {missing} in the model")
    return np.array(ids, dtype=np.int64)


class LocomotionEnv(DriverEnv):
    """Vectorised velocity-command locomotion (``unilab.tasks.base.VecEnv``); ``pool_kwargs``: ``sim.*``; ``seed``:
    of the commands, gait clocks, pushes, start states and observation noise."""

    rows = DriverRows(STATE, writes=("streams", "qvel", "start_qpos", "start_qvel"), start=START_ROWS,
                      gather=GATHER, stateful=STATEFUL, rewards=REWARD_TERMS, terminations=TERMINATIONS)

    def __init__(self, cfg: LocomotionConfig, num_envs: int, pool_kwargs: dict | None = None, seed: int = 0):
        super().__init__(cfg, num_envs)
        n = self.num_envs
        rng = np.random.default_rng([int(seed), 0x544552])  # the terrain's own draws (tiles, spawn tiles)
        self.terrain = make_terrain(cfg.terrain, rng) if cfg.terrain.kind == "mix" else None
        robot = cfg.robot
        base = load_task_model(cfg, None if self.terrain is None else lambda spec: add_to_spec(spec, self.terrain))
        if base.njnt < 2 or int(base.jnt_type[0]) != int(mujoco.mjtJoint.mjJNT_FREE):
            raise ValueError(f"{cfg.name} needs a model whose first joint is the base's free joint")
        base_id = _body_ids(base, [robot.base_body], "task.robot.base_body")[0]
        if base.jnt_bodyid[0] != base_id:
            raise ValueError(f"task.robot.base_body {robot.base_body!r} is not the body of the model's free joint "
                             f"({base.body(base.jnt_bodyid[0]).name!r})")
        if not cfg.self_collisions:
            disable_self_collisions(base, robot.base_body)
        self._actuate(base, [base.joint(j).name for j in range(1, base.njnt)])

        self.feet = _body_ids(self.model, robot.feet, "task.robot.feet")
        self.foot_points = _body_ids(self.model, robot.foot_points, "task.robot.foot_points")
        self.termination_bodies = matching_bodies(self.model, robot.base_body, robot.termination_bodies,
                                                  "task.robot.termination_bodies")
        self._make_pool(pool_kwargs, seed, robot.base_body, "task.robot.termination_bodies")

        self.qpos_adr = self.model.jnt_qposadr[1:].astype(np.int64)
        self.dof_adr = self.model.jnt_dofadr[1:].astype(np.int64)
        self.rewards = RewardWeights(cfg.rewards, cfg.curriculum, self.control_dt)
        self.layout = obs_layout(len(self.joint_names))
        sc = cfg.obs_scales
        self.obs_scales = {"base_ang_vel": sc.base_ang_vel, "joint_vel": sc.joint_vel, "base_lin_vel": sc.base_lin_vel}
        """Each scaled piece's factor (its noise is drawn before it, as holosoma)."""
        self.noise_scale = self.layout.noise_scale(cfg.obs_noise, self.obs_scales)
        self.max_episode_steps = int(round(cfg.max_episode_length_s / self.control_dt))
        try:
            partner_indices(robot.feet, "foot body")
            partner_indices(robot.foot_points, "foot point")
            self.mirror = self.layout.env_mirror(base, list(range(1, base.njnt)), self.act_joint,
                                                 self.default_joint_pos)
        except ValueError as err:  # a robot without a mirror trains as before; algo.use_symmetry refuses it
            self.mirror, self.mirror_error = None, str(err)
        self.stat_names = ("curriculum/penalty_scale", "curriculum/average_episode_length", *self.stat_names)

        self._allocate(seed)
        pose_weights = match_joint_values(cfg.rewards.pose.joint_weights, self.joint_names, None,
                                          "task.rewards.pose.joint_weights")
        if self.terrain is None:
            origin, terrain = np.zeros((n, 2)), FLAT
        else:
            origin = self.terrain.tile_centres[rng.integers(0, len(self.terrain.tile_centres), n)]
            terrain = self.terrain.lookup
        self.evaluating = False
        self.arrays = self._struct(
            LocoArrays, origin=origin, default_joint_pos=self.default_joint_pos, action_bound=self.action_bound,
            pose_weights=pose_weights, ang_vel_scale=float(sc.base_ang_vel), joint_vel_scale=float(sc.joint_vel),
            lin_vel_scale=float(sc.base_lin_vel), qpos_adr=self.qpos_adr, dof_adr=self.dof_adr, feet=self.feet,
            foot_points=self.foot_points, termination_bodies=self.termination_bodies, **dict(zip(TERRAIN, terrain)),
            **self._command_params())
        self.task_streams = env_streams(seed, n, tag=2)  # commands, gait, pushes, start states
        # the start row's (qpos, qvel) of each restarted env, by its place among the restarted rows
        self._start = (np.empty((n, self.pool.qpos.shape[1])), np.empty((n, self.pool.qvel.shape[1])))
        self._compile_driver(streams=self.task_streams, qvel=self.pool.qvel, start_qpos=self._start[0],
                             start_qvel=self._start[1])

    def _command_params(self) -> dict:
        """The struct's command, gait, push and start-state settings (:data:`~.state.COMMAND_PARAMS`)."""
        c, g, p = self.cfg.commands, self.cfg.gait, self.cfg.push
        return dict(
            ranges=np.array([c.lin_vel_x, c.lin_vel_y, c.ang_vel_yaw], dtype=np.float64),
            stand_prob=float(c.stand_prob), resample_steps=max(int(c.resampling_time_s / self.control_dt), 1),
            freq_mean=1.0 / g.period_s, freq_width=float(g.frequency_width), dt=float(self.control_dt),
            randomize_phase=bool(g.randomize_phase), push=bool(p.enabled),
            push_interval=np.array(p.interval_s, dtype=np.float64), push_max=np.array(p.max_vel, dtype=np.float64),
            base_height=float(self.cfg.robot.base_height),
            spawn_offset=0.0 if self.terrain is None else float(self.cfg.terrain.spawn_offset),
            joint_scale=np.array(self.cfg.reset_joint_scale, dtype=np.float64), evaluating=bool(self.evaluating))

    def start_state(self, rows: np.ndarray, out: Buffers) -> tuple[np.ndarray, np.ndarray]:
        """The start row's states for ``rows`` (drawn in the driver, with their command and gait clock)."""
        self.run_stages(START, rows, out)
        return self._start[0][:rows.size], self._start[1][:rows.size]

    def evaluate(self, commands: np.ndarray | None) -> None:
        """``commands`` ``(num_envs, 3)``: from now on every env keeps its command (forward, lateral m/s, yaw
        rad/s), gait at the mean frequency with the legs at phases 0 and -pi, as holosoma's evaluation mode
        (pushes as ``task.push`` says); the next ``reset`` starts it. None: back to training's draws."""
        self.evaluating = commands is not None
        if commands is not None:
            commands = np.asarray(commands, dtype=np.float64)
            if commands.shape != (self.num_envs, 3):
                raise ValueError(f"commands must have shape {(self.num_envs, 3)}, got {commands.shape}")
            self.state.command[:] = commands
        self.arrays = self.arrays._replace(**self._command_params())

    def stats(self) -> dict[str, float]:
        """The penalty curriculum's scale and average episode length, and the randomization scalars."""
        return {"curriculum/penalty_scale": self.rewards.scale,
                "curriculum/average_episode_length": self.rewards.average_length, **super().stats()}

    def record_ended(self, done: np.ndarray, out: Buffers) -> None:
        self.rewards.record(self.book.lengths[done])  # the penalty curriculum (every step, as holosoma's)

    def deploy_metadata(self) -> dict:
        """What an export adds to the robot's contract (``unilab.deploy.export``): the base and its start height
        (upright, joints at the default), foot points, termination bodies, the gait clock's period (evaluation: legs
        at phases 0 and -pi, both at pi while the command is zero) and the command ranges."""
        cfg, c = self.cfg, self.cfg.commands
        return {"base_body": cfg.robot.base_body, "base_height": float(cfg.robot.base_height),
                "foot_points": list(cfg.robot.foot_points),
                "termination_bodies": [self.model.body(int(b)).name for b in self.termination_bodies],
                "termination_force": float(cfg.termination_force), "gait_period_s": float(cfg.gait.period_s),
                "command_ranges": {"lin_vel_x": list(c.lin_vel_x), "lin_vel_y": list(c.lin_vel_y),
                                   "ang_vel_yaw": list(c.ang_vel_yaw)}}

    def arrows(self, env: int = 0) -> np.ndarray:
        """Above env ``env``'s base: its command (green) and its base velocity (blue), horizontal, in the
        heading frame (1 m per m/s)."""
        s = self.state
        w, x, y, z = s.base_quat[env]
        yaw = np.arctan2(2.0 * (x * y + w * z), 1.0 - 2.0 * (y * y + z * z))
        c, sn = np.cos(yaw), np.sin(yaw)
        start = self.pool.qpos[env, :3] + np.array([0.0, 0.0, 0.5])
        out = np.empty((2, 2, 3))
        for k, (vx, vy) in enumerate((s.command[env, :2], s.base_lin_b[env, :2])):
            out[k, 0] = start
            out[k, 1] = start + np.array([c * vx - sn * vy, sn * vx + c * vy, 0.0])
        return out

    def overlay_text(self, env: int = 0) -> str:
        """The command and the base velocity of env ``env`` (play's text overlay)."""
        c, v, w = self.state.command[env], self.state.base_lin_b[env], self.state.base_ang_b[env]
        return (f"command vx {c[0]:+.2f} vy {c[1]:+.2f} yaw {c[2]:+.2f}\n"
                f"base    vx {v[0]:+.2f} vy {v[1]:+.2f} yaw {w[2]:+.2f}")

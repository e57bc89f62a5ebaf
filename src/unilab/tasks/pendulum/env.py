"""Pendulum swing-up: reward = -(angle^2 + c_v vel^2 + c_u u^2), 200-step time-outs."""

from __future__ import annotations

import mujoco
import numpy as np

from unilab.assets.builtin import pendulum_xml_path
from unilab.sim.physics import make_pool
from unilab.tasks.base import Buffers, EpisodeBook, Obs, PoolEnv, StepResult, observations, result
from unilab.tasks.pendulum.config import PendulumConfig
from unilab.telemetry.phase_timer import PhaseTimer


class PendulumEnv(PoolEnv):
    """Vectorised pendulum swing-up (see :class:`unilab.tasks.base.VecEnv`)."""

    obs_dim = 3
    critic_obs_dim = 3
    action_dim = 1
    reward_term_names = ("angle", "velocity", "action")
    termination_names = ()

    def __init__(self, cfg: PendulumConfig, num_envs: int, pool_kwargs: dict | None = None, seed: int = 0):
        self.cfg = cfg
        model = mujoco.MjModel.from_xml_path(cfg.model_path or str(pendulum_xml_path()))
        if model.nq != 1 or model.nu != 1:
            raise ValueError(f"pendulum model must have one hinge and one actuator, got nq={model.nq} nu={model.nu}")
        self.timer = PhaseTimer()
        self.pool = make_pool(model, num_envs, substeps=cfg.substeps, **(pool_kwargs or {}))
        self.num_envs = num_envs
        self.control_dt = model.opt.timestep * cfg.substeps
        self.rng = np.random.default_rng(seed)
        self.book = EpisodeBook(num_envs)

    def _observe(self, out: Buffers, rows: np.ndarray | slice = slice(None)) -> None:
        th, thd = self.pool.qpos[rows, 0], self.pool.qvel[rows, 0]
        o = np.stack([np.cos(th), np.sin(th), thd], axis=1).astype(np.float32)
        out["obs"][rows] = o
        out["critic_obs"][rows] = o

    def _reset_ids(self, ids: np.ndarray) -> None:
        v, n = self.cfg.init_velocity, ids.size
        self.pool.reset(ids, self.rng.uniform(-np.pi, np.pi, (n, 1)), self.rng.uniform(-v, v, (n, 1)))

    def reset(self, out: Buffers | None = None) -> Obs:
        """Reset every env to a random angle and velocity."""
        out = self.buffers() if out is None else out
        self._reset_ids(np.arange(self.num_envs))
        self.book.reset_all()
        self._observe(out)
        return observations(out)

    def step(self, action: np.ndarray, out: Buffers | None = None) -> StepResult:
        """One control step of every env (see VecEnv.step)."""
        out = self.buffers() if out is None else out
        a = np.clip(np.asarray(action, dtype=np.float64).reshape(self.num_envs, 1), -1.0, 1.0)
        with self.timer.phase("backend_step"):
            bad = self.pool.step(a, self.cfg.substeps).copy()
        with self.timer.phase("update_state"):
            self.book.begin_step()
            th = np.angle(np.exp(1j * self.pool.qpos[:, 0]))  # wrap to [-pi, pi]
            thd = self.pool.qvel[:, 0]
            terms = {
                "angle": -self.cfg.angle_cost * th**2,
                "velocity": -self.cfg.velocity_cost * thd**2,
                "action": -self.cfg.action_cost * a[:, 0] ** 2,
            }
            reward = (terms["angle"] + terms["velocity"] + terms["action"]).astype(np.float32)
            timeout = self.book.lengths >= self.cfg.episode_length
            done = self.book.settle(out, reward, np.zeros(self.num_envs, dtype=bool), timeout, bad)
            self._observe(out)

        def restart(ids: np.ndarray) -> None:
            self._reset_ids(ids)
            self._observe(out, ids)

        with self.timer.phase("reset_done"):
            info = self.book.auto_reset(out, done, restart, {k: v.astype(np.float32) for k, v in terms.items()}, {})
        return result(out, info)

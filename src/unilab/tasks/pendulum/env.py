"""Pendulum swing-up: reward = -(angle^2 + c_v vel^2 + c_u u^2), 200-step time-outs."""

from __future__ import annotations

from typing import Any

import mujoco
import numpy as np

from unilab.sim.mujoco.pool import BatchEnvPool
from unilab.tasks.pendulum.config import PendulumConfig
from unilab.telemetry.phase_timer import PhaseTimer


class PendulumEnv:
    """Vectorised pendulum swing-up (see :class:`unilab.tasks.base.VecEnv`)."""

    obs_dim = 3
    critic_obs_dim = 3
    action_dim = 1
    reward_term_names = ("angle", "velocity", "action")

    def __init__(self, cfg: PendulumConfig, num_envs: int, pool_kwargs: dict | None = None, seed: int = 0):
        from unilab.assets.builtin import pendulum_xml_path  # noqa: PLC0415

        self.cfg = cfg
        model = mujoco.MjModel.from_xml_path(cfg.model_path or str(pendulum_xml_path()))
        if model.nq != 1 or model.nu != 1:
            raise ValueError(f"pendulum model must have one hinge and one actuator, got nq={model.nq} nu={model.nu}")
        self.timer = PhaseTimer()
        self.pool = BatchEnvPool(model, num_envs, substeps=cfg.substeps, **(pool_kwargs or {}))
        self.num_envs = num_envs
        self.control_dt = model.opt.timestep * cfg.substeps
        self.rng = np.random.default_rng(seed)
        self.t = np.zeros(num_envs, dtype=np.int64)
        self.ep_return = np.zeros(num_envs)

    def _obs(self) -> dict[str, np.ndarray]:
        th, thd = self.pool.qpos[:, 0], self.pool.qvel[:, 0]
        o = np.stack([np.cos(th), np.sin(th), thd], axis=1).astype(np.float32)
        return {"policy": o, "critic": o}

    def _reset_ids(self, ids: np.ndarray) -> None:
        n = ids.size
        qpos = self.rng.uniform(-np.pi, np.pi, (n, 1))
        qvel = self.rng.uniform(-self.cfg.init_velocity, self.cfg.init_velocity, (n, 1))
        self.pool.reset(ids, qpos, qvel)
        self.t[ids] = 0
        self.ep_return[ids] = 0.0

    def reset(self) -> dict[str, np.ndarray]:
        """Reset every env to a random angle and velocity."""
        self._reset_ids(np.arange(self.num_envs))
        return self._obs()

    def step(self, action: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """One control step of every env (see VecEnv.step)."""
        a = np.clip(np.asarray(action, dtype=np.float64).reshape(self.num_envs, 1), -1.0, 1.0)
        with self.timer.phase("backend_step"):
            bad = self.pool.step(a, self.cfg.substeps).copy()
        with self.timer.phase("update_state"):
            th = np.angle(np.exp(1j * self.pool.qpos[:, 0]))  # wrap to [-pi, pi]
            thd = self.pool.qvel[:, 0]
            terms = {
                "angle": -self.cfg.angle_cost * th**2,
                "velocity": -self.cfg.velocity_cost * thd**2,
                "action": -self.cfg.action_cost * a[:, 0] ** 2,
            }
            reward = (terms["angle"] + terms["velocity"] + terms["action"]).astype(np.float32)
            reward[bad] = 0.0
            self.t += 1
            self.ep_return += reward
            truncated = (self.t >= self.cfg.episode_length) | bad
            terminated = np.zeros(self.num_envs, dtype=bool)
            obs = self._obs()
        with self.timer.phase("reset_done"):
            done = np.flatnonzero(truncated)
            final_obs = {k: v.copy() for k, v in obs.items()}
            episode = {"count": int(done.size)}
            if done.size:
                episode["return_mean"] = float(self.ep_return[done].mean())
                episode["length_mean"] = float(self.t[done].mean())
                self._reset_ids(done)
                fresh = self._obs()
                for k in obs:
                    obs[k][done] = fresh[k][done]
        info = {
            "final_obs": final_obs,
            "reward_terms": {k: v.astype(np.float32) for k, v in terms.items()},
            "episode": episode,
            "num_bad_envs": int(bad.sum()),
        }
        return obs, reward, terminated, truncated, info

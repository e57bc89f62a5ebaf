"""FastSAC must learn a small vectorised continuous-control task on the CPU.

The task is a 2-D point mass that has to reach and hold a random target,
written in torch with the same reset/step/autoreset interface as unilab's
envs (obs dicts with "policy"/"critic", ``info["final_obs"]``), including
terminations (leaving the arena) and truncations (time limit).
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from unilab.algo.sac import FastSAC, ReplayBuffer, SACConfig
from unilab.runtime.iteration import LearnerIteration
from unilab.sim.spec import step_record

ARENA = 2.0
EPISODE_LEN = 50


class PointMassReach:
    """Batched 2-D point mass: action = acceleration, reward = 1 - dist/2 (clipped at 0)."""

    def __init__(self, num_envs: int, seed: int) -> None:
        self.num_envs = num_envs
        self.gen = torch.Generator().manual_seed(seed)
        self.pos = torch.zeros(num_envs, 2)
        self.vel = torch.zeros(num_envs, 2)
        self.target = torch.zeros(num_envs, 2)
        self.t = torch.zeros(num_envs, dtype=torch.long)

    def _reset_rows(self, rows: torch.Tensor) -> None:
        n = int(rows.sum())
        if n == 0:
            return
        self.pos[rows] = torch.rand(n, 2, generator=self.gen) * 2.0 - 1.0
        self.vel[rows] = 0.0
        self.target[rows] = torch.rand(n, 2, generator=self.gen) * 2.0 - 1.0
        self.t[rows] = 0

    def _obs(self) -> dict[str, torch.Tensor]:
        policy = torch.cat([self.pos, self.vel, self.target - self.pos], dim=1)
        critic = torch.cat([policy, self.t.unsqueeze(1).float() / EPISODE_LEN], dim=1)
        return {"policy": policy, "critic": critic}

    def reset(self) -> dict[str, torch.Tensor]:
        self._reset_rows(torch.ones(self.num_envs, dtype=torch.bool))
        return self._obs()

    def step(self, action: torch.Tensor):
        action = action.clamp(-1.0, 1.0)
        self.vel = 0.8 * self.vel + 0.5 * action
        self.pos = self.pos + 0.1 * self.vel
        self.t += 1
        dist = (self.pos - self.target).norm(dim=1)
        reward = (1.0 - 0.5 * dist).clamp(min=0.0)
        terminated = self.pos.abs().max(dim=1).values > ARENA
        truncated = (self.t >= EPISODE_LEN) & ~terminated
        final_obs = self._obs()
        done = terminated | truncated
        self._reset_rows(done)
        return self._obs(), reward, terminated, truncated, {"final_obs": final_obs}


def evaluate(policy, num_envs: int = 64, seed: int = 123) -> float:
    """Mean return of the first episode of every env."""
    env = PointMassReach(num_envs, seed)
    obs = env.reset()
    total = torch.zeros(num_envs)
    running = torch.ones(num_envs, dtype=torch.bool)
    for _ in range(EPISODE_LEN):
        obs, reward, terminated, truncated, _ = env.step(policy(obs["policy"]))
        total += reward * running
        running &= ~(terminated | truncated)
    return float(total.mean())


class PointMassSource:
    """The point mass as the trainer's step source: the step mapping the collector would write, in process."""

    def __init__(self, env: PointMassReach):
        self.env = env
        self.action: torch.Tensor | None = None

    def reset(self) -> dict[str, np.ndarray]:
        obs = self.env.reset()
        return {"obs": obs["policy"].numpy(), "critic_obs": obs["critic"].numpy()}

    def send_action(self, action: np.ndarray) -> None:
        self.action = torch.from_numpy(action)

    def wait_step(self) -> dict[str, np.ndarray]:
        obs, reward, terminated, truncated, info = self.env.step(self.action)
        return {"obs": obs["policy"].numpy(), "critic_obs": obs["critic"].numpy(), "reward": reward.numpy(),
                "terminated": terminated.numpy(), "truncated": truncated.numpy(),
                "final_obs": info["final_obs"]["policy"].numpy(),
                "final_critic_obs": info["final_obs"]["critic"].numpy()}


def _point_mass_iteration(cfg: SACConfig) -> tuple[FastSAC, LearnerIteration, PointMassSource, dict]:
    """The trainer's own iteration (act, send, store, update, receive) on the point mass, and its first step."""
    source = PointMassSource(PointMassReach(cfg.num_envs, seed=cfg.seed))
    step = source.reset()
    agent = FastSAC(cfg, obs_dim=step["obs"].shape[1], critic_obs_dim=step["critic_obs"].shape[1], action_dim=2)
    replay = ReplayBuffer(cfg.num_envs, cfg.buffer_size, step_record(agent.obs_dim, agent.critic_obs_dim, 2),
                          n_steps=cfg.n_steps, gamma=cfg.gamma, device=agent.device, seed=cfg.seed)
    return agent, LearnerIteration(agent, replay, cfg, observations=("obs", "critic_obs")), source, step


def train(cfg: SACConfig) -> FastSAC:
    agent, loop, source, step = _point_mass_iteration(cfg)
    for it in range(cfg.max_iterations):
        step, _ = loop.run(it, step, source)
    return agent


def _config(**overrides) -> SACConfig:
    base = dict(
        seed=0, device="cpu", num_envs=64, buffer_size=1000, batch_size=512,
        learning_starts=20, n_steps=3, gamma=0.95, tau=0.05, num_updates=2, policy_frequency=2,
        actor_hidden_dims=[64, 64], critic_hidden_dims=[128, 128], compile=False, amp=False,
        max_iterations=600,
        # the critic this test was tuned with (SACConfig's defaults before the holosoma recipe)
        distributional=False, use_cdq=True, num_atoms=101,
    )
    base.update(overrides)
    return SACConfig(**base)


# A policy that reaches the target and holds it scores ~45; the random policy ~19.
THRESHOLD = 36.0


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """Small networks: one thread is as fast and does not fight other work for the 2 cores."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _check_learns(cfg: SACConfig) -> None:
    torch.manual_seed(cfg.seed)
    gen = torch.Generator().manual_seed(1)
    random_return = evaluate(lambda o: torch.rand(o.shape[0], 2, generator=gen) * 2.0 - 1.0)
    start = time.perf_counter()
    agent = train(cfg)
    elapsed = time.perf_counter() - start
    trained_return = evaluate(lambda o: agent.act(o, deterministic=True))
    print(f"random {random_return:.2f}  trained {trained_return:.2f}  ({elapsed:.1f} s, "
          f"{cfg.max_iterations * cfg.num_envs} env steps)")
    assert random_return < 28.0
    assert trained_return > THRESHOLD, (random_return, trained_return)


def test_fast_sac_learns_point_mass_reach():
    """Clipped double-Q critic, 3-step returns: 600 iterations x 64 envs = 38 400 env steps."""
    _check_learns(_config())


@pytest.mark.slow
def test_fast_sac_distributional_learns_point_mass_reach():
    """C51 critic (support covers the returns of this task): 1000 iterations x 64 envs."""
    _check_learns(_config(distributional=True, v_min=0.0, v_max=25.0, num_atoms=51, max_iterations=1000))


def test_the_iteration_trains_at_early_lr_until_its_env_steps_then_at_the_recipes_rates():
    cfg = _config(learning_starts=1, early_lr=1e-3, early_lr_env_steps=3 * 64, actor_lr=3e-4, critic_lr=2e-4)
    agent, loop, source, step = _point_mass_iteration(cfg)
    rates = []
    for it in range(5):  # 64 envs: 0, 64, 128, 192, 256 env steps before each iteration's updates
        step, _ = loop.run(it, step, source)
        rates.append((agent.actor_optimizer.param_groups[0]["lr"], agent.critic_optimizer.param_groups[0]["lr"]))
    assert rates == [(3e-4, 2e-4), (1e-3, 1e-3), (1e-3, 1e-3), (3e-4, 2e-4), (3e-4, 2e-4)]  # no update at 0


def test_updates_wait_for_learning_starts_stored_steps_also_after_a_resume():
    """A resumed run (iteration 100) without its replay collects learning_starts steps before it trains."""
    cfg = _config(learning_starts=3)
    agent, loop, source, step = _point_mass_iteration(cfg)
    done = []
    for it in range(100, 106):
        step, _ = loop.run(it, step, source)
        done.append(agent.num_updates_done)
    # the step of iteration k is stored at k + 1: 3 steps stored before iteration 103's updates
    assert done == [0, 0, 0, 2, 4, 6]


def test_a_stop_inside_the_replay_write_leaves_the_step_pending_and_it_is_stored_whole(monkeypatch):
    cfg = _config(learning_starts=100)
    agent, loop, source, step = _point_mass_iteration(cfg)
    loop.run(0, step, source)
    before, after = loop.pending
    clean = ReplayBuffer(cfg.num_envs, cfg.buffer_size, loop.replay.record, device="cpu")
    clean.extend(before, after)
    check, calls = loop.replay._check, []

    def interrupted(name, x, trailing):
        calls.append(name)
        if len(calls) == 3:
            raise KeyboardInterrupt  # Ctrl-C half way through the slot
        return check(name, x, trailing)

    monkeypatch.setattr(loop.replay, "_check", interrupted)
    with pytest.raises(KeyboardInterrupt):
        loop.store_pending()
    assert loop.pending is not None and loop.replay.size == 0
    loop.store_pending()  # the stop path's call
    assert loop.pending is None and loop.replay.size == 1
    for name, stored in loop.replay.storage.items():
        assert torch.equal(stored[:, 0], clean.storage[name][:, 0]), name

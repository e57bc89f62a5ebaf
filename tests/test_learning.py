"""FastSAC learns pendulum swing-up through the whole stack (collector process, pool, replay)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from unilab.runtime.play import play
from unilab.tasks.registry import make_env, task_config

# a swing-up policy holds the pole up after ~1 s (return ~ -150 to -350);
# random torques average about -1200 to -1500 over 200 steps
THRESHOLD = -550.0
ITERATIONS = 1200  # x 16 envs = 19,200 env steps, 2,300 gradient steps


def random_policy_return(num_envs: int = 16, seed: int = 3) -> float:
    env = make_env("pendulum", task_config("pendulum", {}), num_envs, seed=seed)
    rng = np.random.default_rng(seed)
    env.reset()
    for _ in range(200):
        _, _, _, _, info = env.step(rng.uniform(-1, 1, (num_envs, 1)).astype(np.float32))
    assert info["episode"]["count"] == num_envs
    return info["episode"]["return_mean"]


@pytest.mark.slow
def test_fastsac_swings_the_pendulum_up(tmp_path):
    cmd = [
        sys.executable, "-m", "unilab.cli.train", "--task", "pendulum",
        "algo.num_envs=16", "algo.batch_size=256", f"algo.max_iterations={ITERATIONS}",
        "algo.actor_hidden_dims=[128,128]", "algo.critic_hidden_dims=[256,256]", "algo.num_updates=2",
        "algo.actor_lr=0.001", "algo.critic_lr=0.001", "algo.learning_starts=50", "algo.alpha_init=0.1",
        "algo.seed=1", f"training.log_root={tmp_path}", "training.no_play=true", "training.save_interval=0",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr
    (run,) = (tmp_path / "fast_sac" / "pendulum").iterdir()
    learned = play(run, num_envs=16, steps=200, video=False, seed=3)
    baseline = random_policy_return()
    assert learned.episodes == 16
    print(f"learned return {learned.return_mean:.1f}, random {baseline:.1f}")
    assert learned.return_mean > THRESHOLD, (learned.return_mean, baseline)
    assert learned.return_mean > baseline + 500

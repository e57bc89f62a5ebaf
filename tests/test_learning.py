"""FastSAC learns pendulum swing-up through the whole stack (collector process, pool, replay).

The statement must hold on any x86 CPU: floating-point kernels differ between
CPU families, so a run that is still mid-way through learning lands on either
side of a threshold. The recipe below converges (deterministic returns of
-128, -132, -131 for seeds 1, 2, 3 at 1200 iterations on the box that set it,
where num_updates=2 gave -576 to -134), and every seed must clear a threshold
far from both the converged return and the random one.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from unilab.runtime.play import play
from unilab.tasks.registry import make_env, task_config

# a swing-up policy holds the pole up after ~1 s (return ~ -130 to -350);
# random torques average about -1200 to -1500 over 200 steps
THRESHOLD = -400.0
ITERATIONS = 1200  # x 16 envs = 19,200 env steps, 4,600 gradient steps
SEEDS = (1, 2)  # trained side by side: one core each


def random_policy_return(num_envs: int = 16, seed: int = 3) -> float:
    env = make_env("pendulum", task_config("pendulum", {}), num_envs, seed=seed)
    rng = np.random.default_rng(seed)
    env.reset()
    for _ in range(200):
        _, _, _, _, info = env.step(rng.uniform(-1, 1, (num_envs, 1)).astype(np.float32))
    assert info["episode"]["count"] == num_envs
    return info["episode"]["return_mean"]


def train_cmd(log_root, seed: int) -> list[str]:
    return [
        sys.executable, "-m", "unilab.cli.train", "--task", "pendulum", "--algo", "sac",
        # the critic this recipe was tuned with (the `sac` defaults before the holosoma recipe)
        "algo.distributional=false", "algo.use_cdq=true",
        "algo.num_envs=16", "algo.batch_size=256", f"algo.max_iterations={ITERATIONS}",
        "algo.actor_hidden_dims=[128,128]", "algo.critic_hidden_dims=[256,256]", "algo.num_updates=4",
        "algo.actor_lr=0.001", "algo.critic_lr=0.001", "algo.learning_starts=50", "algo.alpha_init=0.1",
        f"algo.seed={seed}", "training.learner_threads=1", f"training.log_root={log_root}",
        "training.no_play=true", "training.save_interval=0",
    ]


@pytest.mark.slow
def test_fastsac_swings_the_pendulum_up(tmp_path):
    procs = {
        seed: subprocess.Popen(train_cmd(tmp_path / f"seed{seed}", seed), stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
        for seed in SEEDS
    }
    for seed, proc in procs.items():
        _, err = proc.communicate(timeout=900)
        assert proc.returncode == 0, f"seed {seed}: {err}"
    baseline = random_policy_return()
    learned = {}
    for seed in SEEDS:
        (run,) = (tmp_path / f"seed{seed}" / "fast_sac" / "pendulum").iterdir()
        result = play(run, num_envs=16, steps=200, video=False, seed=3)
        assert result.episodes == 16
        learned[seed] = result.return_mean
    print(f"learned returns {learned}, random {baseline:.1f}")
    assert all(r > THRESHOLD for r in learned.values()), (learned, baseline)
    assert all(r > baseline + 700 for r in learned.values()), (learned, baseline)

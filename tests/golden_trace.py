"""A seeded golden trace of the tiny robot's motion-tracking env: what every step writes, stored once.

The trace holds 30 steps of 8 envs under seeded random actions (with reset noise and a 0.3 s time-out, so
failures, time-outs and restarts happen): observations, rewards, done flags and every reward term and
termination condition by name. ``tests/test_golden_trace.py`` replays it and compares. After a change that
is meant to alter the task's numbers, regenerate it and say in the commit which terms changed and why:

    python tests/golden_trace.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from tiny_robot import tiny_task_config  # tests/ is on the path: pytest's rootdir, or this script's folder

from unilab.tasks.g1_motion_tracking.config import ResetConfig, ResetNoiseConfig
from unilab.tasks.g1_motion_tracking.env import MotionTrackingEnv

GOLDEN = Path(__file__).parent / "data" / "golden_tiny_robot.npz"
NUM_ENVS, STEPS, SEED = 8, 30, 3


def record_trace(workdir: Path) -> dict[str, np.ndarray]:
    """Run the seeded rollout; arrays ``(STEPS, NUM_ENVS, ...)`` by output name (terms as ``term/<name>``)."""
    cfg = tiny_task_config(workdir)
    cfg.max_episode_length_s = 0.3
    cfg.reset = ResetConfig(noise=ResetNoiseConfig(root_pos=[0.02, 0.02, 0.01], root_rpy=[0.05, 0.05, 0.1],
                                                   root_lin_vel=[0.1, 0.1, 0.1], root_ang_vel=[0.1, 0.1, 0.1],
                                                   joint_pos=0.05))
    env = MotionTrackingEnv(cfg, NUM_ENVS, pool_kwargs={"nthread": 1}, seed=SEED)
    rng = np.random.default_rng(SEED)
    trace: dict[str, list[np.ndarray]] = {}

    def keep(name: str, value) -> None:
        trace.setdefault(name, []).append(np.array(value, copy=True))

    try:
        first = env.reset()
        keep("reset_obs", first["obs"])
        for _ in range(STEPS):
            action = rng.uniform(-1.5, 1.5, (NUM_ENVS, env.action_dim))  # past the bounds: the clip is exercised
            obs, reward, terminated, truncated, info = env.step(action)
            for name in ("obs", "critic_obs"):
                keep(name, obs[name])
            keep("reward", reward)
            keep("terminated", terminated)
            keep("truncated", truncated)
            for name, column in info["reward_terms"].items():
                keep(f"term/{name}", column)
            for name, column in info["termination_terms"].items():
                keep(f"condition/{name}", column)
    finally:
        env.close()
    return {name: np.stack(values) for name, values in trace.items()}


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        trace = record_trace(Path(tmp))
    GOLDEN.parent.mkdir(exist_ok=True)
    np.savez_compressed(GOLDEN, **trace)
    done = trace["terminated"] | trace["truncated"]
    print(f"wrote {GOLDEN} ({GOLDEN.stat().st_size} bytes): {len(trace)} arrays, {int(done.sum())} episode ends")


if __name__ == "__main__":
    main()

"""Cumulative collector counters shared with the learner through shared memory: the collector only adds, the learner
reads differences between two log points, so neither side ever waits on the other for metrics."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# wall ms and process-CPU ms of each collector phase
PHASES = ("env_step", "backend_step", "update_state", "reset_done", "action_wait", "replay_write")

BASE_COUNTERS = ("iterations", *(f"{p}_ms" for p in PHASES), *(f"{p}_cpu_ms" for p in PHASES), "episodes",
                 "episode_return_sum", "episode_length_sum", "reward_sum", "bad_envs")

STAT = "stat/"  # counter of a task scalar (EnvSpec.stats): the sum of its per-step values


def counter_names(reward_terms: Sequence[str], stats: Sequence[str] = (),
                  termination_terms: Sequence[str] = ()) -> list[str]:
    """All counters: the fixed ones, ``reward_term/<name>`` per term, ``stat/<tag>`` per task scalar, then
    ``termination/<name>`` per failure condition (how many envs it ended)."""
    return [*BASE_COUNTERS, *(f"reward_term/{t}" for t in reward_terms), *(STAT + s for s in stats),
            *(f"termination/{t}" for t in termination_terms)]


class Counters:
    """Name-indexed view over a float64 array of cumulative counters."""

    def __init__(self, array: np.ndarray, names: Sequence[str]):
        if array.shape != (len(names),):
            raise ValueError(f"counter array has shape {array.shape}, expected ({len(names)},)")
        self.array = array
        self.index = {n: i for i, n in enumerate(names)}

    def add(self, name: str, value: float) -> None:
        self.array[self.index[name]] += value

    def snapshot(self) -> dict[str, float]:
        return {n: float(self.array[i]) for n, i in self.index.items()}


def delta(now: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {k: v - before.get(k, 0.0) for k, v in now.items()}

"""What an env is (``EnvSpec``) and the one declaration of the step record.

Every per-step array that crosses a boundary (env -> shared memory -> learner -> replay buffer -> agent batch) is
declared here once, as a ``Field(name, shape, dtype)`` (as EnvPool's ``StateSpec`` declares every output once); the env
writes, the transport allocates and the replay buffer stores them by these names:

- ``obs`` / ``critic_obs``: the actor's and the critic's observation (after an auto-reset: the new episode's first);
- ``action``: written by the learner, read by the env;
- ``reward``, ``terminated`` (failure, incl. diverged envs), ``truncated`` (time-out);
- ``final_X`` for every observation field ``X``: the observation the episode ended on, in the done rows (terminated |
  truncated) only; its other rows are left as they were (garbage to readers).

The replay buffer stores every record field plus ``next_X`` per observation field (``X`` of the next step, or
``final_X`` where that step was done).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

FINAL = "final_"
NEXT = "next_"


@dataclass(frozen=True)
class Field:
    """One array of the step record: ``(num_envs, *shape)`` of ``dtype``."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    observation: bool = False
    """An observation: also crosses as ``final_<name>`` (done rows) and is stored as ``next_<name>``."""
    writer: str = "env"
    """Who fills it each step: ``"env"`` (``env.step``) or ``"learner"`` (the action)."""


@dataclass(frozen=True)
class EnvSpec:
    """The facts about a built env that the learner and the tools need."""

    obs_dim: int
    critic_obs_dim: int
    action_dim: int
    control_dt: float
    reward_terms: tuple[str, ...] = ()
    termination_terms: tuple[str, ...] = ()
    nthread: int | None = None
    cpu_ids: tuple[int, ...] | None = None
    persistent: bool = False
    stats: tuple[str, ...] = ()
    """TensorBoard tags of the task's per-step scalars (``env.stats()``), e.g. ``randomization/friction``."""
    action_bound: tuple[float, ...] | None = None
    """Per action dim, the factor b_j from the env's [-1, 1] action to the recipe's action space (holosoma's
    FastSAC acts with ``tanh(u) * b_j``); the learner's log-probs, entropy target and critic input live in
    that space. None: b_j = 1."""

    mirror: Mapping[str, tuple[tuple[int, ...], tuple[float, ...]]] | None = None
    """The task's left/right mirror of the step record's ``obs``, ``critic_obs`` and ``action`` as signed
    permutations ``(perm, sign)``: ``mirrored[..., k] = sign[k] * x[..., perm[k]]`` (``algo.use_symmetry``
    trains on mirrored copies too). None: the task has none, and ``mirror_error`` says why."""
    mirror_error: str = ""

    @property
    def record(self) -> tuple[Field, ...]:
        return step_record(self.obs_dim, self.critic_obs_dim, self.action_dim)


def step_record(obs_dim: int, critic_obs_dim: int, action_dim: int) -> tuple[Field, ...]:
    """The step record of an env with these widths."""
    return (
        Field("obs", (int(obs_dim),), "float32", observation=True),
        Field("critic_obs", (int(critic_obs_dim),), "float32", observation=True),
        Field("action", (int(action_dim),), "float32", writer="learner"),
        Field("reward", (), "float32"),
        Field("terminated", (), "bool"),
        Field("truncated", (), "bool"),
    )


def env_outputs(record: Iterable[Field]) -> tuple[Field, ...]:
    """The arrays ``env.step`` fills: the env fields plus ``final_<obs>`` per observation field."""
    env = [f for f in record if f.writer == "env"]
    return (*env, *(Field(FINAL + f.name, f.shape, f.dtype) for f in env if f.observation))


def allocate(fields: Iterable[Field], num_envs: int) -> dict[str, np.ndarray]:
    """Zeroed ``(num_envs, *shape)`` arrays for ``fields``."""
    return {f.name: np.zeros((num_envs, *f.shape), dtype=f.dtype) for f in fields}

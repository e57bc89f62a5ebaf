"""The env interface every unilab task offers the runtime (EnvPool-sized).

Observations are a dict of float32 ``(num_envs, D)`` arrays: ``"policy"`` for
the actor and ``"critic"`` for the (possibly privileged) critic. ``step``
auto-resets finished envs: the returned observations of a done env are its
first observations after the reset, and ``info["final_obs"]`` holds, in the
done rows, the observations the episode ended on (the bootstrap target of a
time-out). Time-outs are ``truncated``; failures are ``terminated``.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

Obs = dict[str, np.ndarray]


class VecEnv(Protocol):
    """What the collector needs from a task."""

    num_envs: int
    obs_dim: int
    critic_obs_dim: int
    action_dim: int

    def reset(self) -> Obs:
        """Reset every env; return the first observations."""

    def step(self, action: np.ndarray) -> tuple[Obs, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Apply ``action`` (num_envs, action_dim) in [-1, 1]; return obs, reward, terminated, truncated, info.

        ``info`` holds ``final_obs`` (as above), ``reward_terms`` (name -> (num_envs,)),
        ``episode`` (``{"count", "return_mean", "length_mean"}`` of the episodes
        that ended on this step) and ``num_bad_envs``.
        """

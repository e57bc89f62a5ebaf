"""One small random stream per env, drawn inside parallel kernels (SplitMix64).

A NumPy ``Generator`` is one sequential stream: filling ``(num_envs, width)`` from it runs on one core, which at
4096 envs x 154 observation entries was the largest serial piece of ``update_state`` (CONTRIBUTING.md, "Add a
host kernel").
Here each env owns a 64-bit state and a draw advances only its own, so a ``prange`` over envs draws in parallel, and
the values depend on the seed and each env's own history, not on the thread count or the other rows drawn.

SplitMix64 (Steele, Lea & Flood 2014; the seeder of the xoshiro generators) passes BigCrush; each env's stream is
a Weyl sequence from its own start, which ``SeedSequence`` spreads over the 2**64 states. Two streams overlap only
if their starts lie within the draws made of each other: for 4096 envs x 1e9 draws each, probability
~(4096**2 x 1e9) / 2**64 ~ 1e-3, and an overlap would only make two envs share noise for a while.
"""

from __future__ import annotations

import numpy as np
from numba import njit

_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31, _S11 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(11)
_TO_UNIT = 1.0 / 9007199254740992.0  # 2**-53: the top 53 bits as a double in [0, 1)


def env_streams(seed: int, num_envs: int, tag: int) -> np.ndarray:
    """``(num_envs,)`` uint64 start states from ``(seed, tag)``; ``tag`` keeps one env's uses apart."""
    return np.random.SeedSequence([int(seed), int(tag)]).generate_state(int(num_envs), np.uint64)


@njit(cache=True, fastmath=False, inline="always")
def next_symmetric(states, e):
    """Advance env ``e``'s stream; a uniform draw in [-1, 1)."""
    z = states[e] + _GAMMA
    states[e] = z
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    z = z ^ (z >> _S31)
    return 2.0 * (np.float64(z >> _S11) * _TO_UNIT) - 1.0

"""The per-body contact forces a term reads: the pool's ``CONTACT_FORCE`` (:mod:`unilab.sim.physics`)."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, fastmath=False, inline="always")
def force_norm(force, e, b):
    """Length of the net contact force on body ``b`` in env ``e`` (``force``: the pool's ``CONTACT_FORCE``)."""
    return np.sqrt(force[e, b, 0] * force[e, b, 0] + force[e, b, 1] * force[e, b, 1]
                   + force[e, b, 2] * force[e, b, 2])

"""Failure terminations of G1 locomotion (time-outs are truncations), each ``f(s, e, threshold) -> bool``."""

from __future__ import annotations

import numpy as np
from numba import njit

from unilab.tasks.core.terms import Term


@njit(cache=True, fastmath=False, inline="always")
def contact(s, e, threshold):
    """A termination body's net contact force over ``threshold`` (holosoma's contact_forces_exceeded), or a
    non-finite base state."""
    return s.contact_force[e] > threshold or not (np.isfinite(s.base_pos[e, 2]) and np.isfinite(s.gravity_b[e, 2]))


# the table: order = column of info["termination_terms"]
TERMINATIONS = (Term("contact", contact, config="termination_force"),)

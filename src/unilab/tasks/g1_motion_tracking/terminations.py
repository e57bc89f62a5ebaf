"""Failure terminations (time-outs are truncations): an env terminates when any condition of :data:`TERMINATIONS`
holds, each ``f(s, e, threshold) -> bool`` against the env's reference frame ``s.ref_index[e]``, with the
threshold ``cfg.terminations.<name>`` (its meaning there).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from unilab.tasks.core.terms import Term


@njit(cache=True, fastmath=False, inline="always")
def _gravity_z(q):
    # z of gravity in the body frame = -R[2, 2] = -(1 - 2 (x^2 + y^2)); the sign cancels in differences
    return 1.0 - 2.0 * (q[1] * q[1] + q[2] * q[2])


@njit(cache=True, fastmath=False, inline="always")
def anchor_height(s, e, threshold):
    a, r = s.anchor, s.ref_index[e]
    z = s.body_pos[e, a, 2]
    # a non-finite robot state fails every comparison: count it as a failure
    return (abs(s.ref_body_pos[r, a, 2] - z) > threshold
            or not (np.isfinite(z) and np.isfinite(_gravity_z(s.body_quat[e, a]))))


@njit(cache=True, fastmath=False, inline="always")
def anchor_orientation(s, e, threshold):
    a = s.anchor
    return abs(_gravity_z(s.ref_body_quat[s.ref_index[e], a]) - _gravity_z(s.body_quat[e, a])) > threshold


@njit(cache=True, fastmath=False, inline="always")
def end_effector_height(s, e, threshold):
    r = s.ref_index[e]
    worst = 0.0
    for i in range(s.ee_index.shape[0]):
        b = s.ee_index[i]
        d = abs(s.ref_body_pos[r, b, 2] - s.body_pos[e, b, 2])
        if d > worst:
            worst = d
    return worst > threshold


# the table: order = column of info["termination_terms"]; config key = name
TERMINATIONS = (
    Term("anchor_height", anchor_height),
    Term("anchor_orientation", anchor_orientation),
    Term("end_effector_height", end_effector_height),
)

@njit(cache=True, fastmath=False, inline="always")
def clip_end(s, e):
    """Env ``e`` is at its clip's last frame."""
    return s.frame[e] >= s.num_frames[s.clip[e]] - 1


# time-outs (truncations) besides max_episode_length_s
TIMEOUTS = (Term("clip_end", clip_end),)

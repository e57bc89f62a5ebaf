"""Failure terminations (distinct from time-outs, which the env reports as truncation), one row each.

An env terminates when any condition of :data:`TERMINATIONS` holds; each is
``f(s, e, r, threshold) -> bool`` with the threshold ``cfg.terminations.<name>``:
    anchor_height        |reference anchor z - robot anchor z|  (a non-finite robot state fails here too)
    anchor_orientation   |difference of the anchors' projected-gravity z| (0 upright match .. 2 upside down)
    end_effector_height  max over end effectors of |reference z - robot z|
"""

from __future__ import annotations

import numpy as np
from numba import njit

from unilab.tasks.g1_motion_tracking.config import TerminationsConfig
from unilab.tasks.g1_motion_tracking.terms import Term, generate_driver


@njit(cache=True, fastmath=False, inline="always")
def _gravity_z(q):
    # z of gravity in the body frame = -R[2, 2] = -(1 - 2 (x^2 + y^2)); the sign cancels in differences
    return 1.0 - 2.0 * (q[1] * q[1] + q[2] * q[2])


@njit(cache=True, fastmath=False, inline="always")
def anchor_height(s, e, r, p):
    a = s.anchor
    z = s.body_pos[e, a, 2]
    # a non-finite robot state fails every comparison: count it as a failure
    return abs(s.ref_body_pos[r, a, 2] - z) > p or not (np.isfinite(z) and np.isfinite(_gravity_z(s.body_quat[e, a])))


@njit(cache=True, fastmath=False, inline="always")
def anchor_orientation(s, e, r, p):
    a = s.anchor
    return abs(_gravity_z(s.ref_body_quat[r, a]) - _gravity_z(s.body_quat[e, a])) > p


@njit(cache=True, fastmath=False, inline="always")
def end_effector_height(s, e, r, p):
    worst = 0.0
    for i in range(s.ee_index.shape[0]):
        b = s.ee_index[i]
        d = abs(s.ref_body_pos[r, b, 2] - s.body_pos[e, b, 2])
        if d > worst:
            worst = d
    return worst > p


# the table: order = column of info["termination_terms"]; config key = name
TERMINATIONS = (
    Term("anchor_height", anchor_height),
    Term("anchor_orientation", anchor_orientation),
    Term("end_effector_height", end_effector_height),
)
CONDITION_NAMES = tuple(t.name for t in TERMINATIONS)

# the condition rows of one env, shared by both drivers: out[e, j] per condition, failed[e] = any
_CONDITIONS = '''        e = rows[i]
        r = s.ref_index[e]
        {calls}
        any_ = False
        for j in range(out.shape[1]):
            any_ = any_ or out[e, j]
        failed[e] = any_
'''

_TEMPLATE = '''
@njit(cache=True, parallel=True, fastmath=False)
def termination_driver(s, rows, thresholds, out, failed):
    for i in prange(rows.shape[0]):
''' + _CONDITIONS


def termination_driver(terms: tuple[Term, ...] = TERMINATIONS):
    """``driver(s, rows, thresholds, out (n, conditions) bool, failed (n,) bool)``."""
    return generate_driver(_TEMPLATE, "out[e, {i}] = f{i}(s, e, r, thresholds[{i}])", terms, "termination_driver")


def thresholds_vector(cfg: TerminationsConfig, terms: tuple[Term, ...] = TERMINATIONS) -> np.ndarray:
    """Thresholds in table order."""
    return np.array([getattr(cfg, t.name) for t in terms], dtype=np.float64)


# termination_driver, then the step's per-env tail, in one parallel region (env.step's
# "terminations" sub-phase): time-outs (clip end or max_steps), done semantics
# (unilab.tasks.base.settle_env), a bad env's reward terms zeroed, last_action = action (passed as
# arrays: Numba 0.68's parfor silently dropped writes through the TaskArrays tuple's members here).
# Elementwise per env, so bit-identical to the NumPy passes over envs it replaces.
_STEP_TEMPLATE = '''
from unilab.tasks.base import settle_env


@njit(cache=True, parallel=True, fastmath=False)
def termination_step_driver(s, rows, thresholds, out, failed, frame, clip, num_frames, lengths, max_steps, bad,
                            reward, returns, terms, action, last_action, out_reward, out_terminated, out_truncated,
                            done):
    for i in prange(rows.shape[0]):
''' + _CONDITIONS + '''        timeout = frame[e] >= num_frames[clip[e]] - 1 or lengths[e] >= max_steps
        done[e] = settle_env(e, any_, timeout, bad, reward, returns, out_reward, out_terminated, out_truncated)
        if bad[e]:
            for k in range(terms.shape[1]):
                terms[e, k] = 0.0
        for j in range(action.shape[1]):
            last_action[e, j] = action[e, j]
'''


def termination_step_driver(terms: tuple[Term, ...] = TERMINATIONS):
    """:func:`termination_driver` and the step's tail in one parallel driver.

    ``driver(s, rows, thresholds, out, failed, frame, clip, num_frames, lengths, max_steps, bad, reward,
    returns, reward_terms, action, last_action, out_reward, out_terminated, out_truncated, done)``.
    """
    return generate_driver(_STEP_TEMPLATE, "out[e, {i}] = f{i}(s, e, r, thresholds[{i}])", terms,
                           "termination_step_driver", depends=("unilab.tasks.base",))

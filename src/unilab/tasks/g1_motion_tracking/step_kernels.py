"""Parallel per-env kernel of ``MotionTrackingEnv.step``'s glue: action to PD targets.

A NumPy pass over ``(num_envs, ...)`` arrays runs on one core (with 64 cores, a
serial pass costs as much as 64 parallel ones; DESIGN.md, "Scaling rule"), so
this is ``prange`` over envs (chunks claimed as threads come free,
:mod:`unilab.sim.work_claims`) with per-env writes only: bit-identical at any
thread count (tests/test_g1_parallel.py).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from unilab.sim.work_claims import LEAST_ROWS, claim, new_counter, num_chunks


@njit(cache=True, parallel=True, fastmath=False)
def action_to_ctrl(action_in, scale, default, action, ctrl):
    """``action = nan_to_num(clip(action_in, -1, 1))`` and ``ctrl = action * scale + default``, per env
    (``default``: ``(num_envs, nu)``, each env's default pose, which joint_pos_bias shifts).

    As ``np.clip`` into ``action``, ``np.nan_to_num(nan=0)`` (a NaN stays NaN through
    the clip), ``np.multiply`` then ``+=``: two roundings, no fused multiply-add (Numba
    without fastmath does not contract them), so a NumPy check gives the same bits.
    """
    n = action.shape[0]
    counter = new_counter()
    for _ in prange(num_chunks(n, LEAST_ROWS)):
        while True:
            lo, hi = claim(counter, n, LEAST_ROWS)
            if lo >= hi:
                break
            for e in range(lo, hi):
                for j in range(action.shape[1]):
                    a = np.float64(action_in[e, j])
                    if np.isnan(a):
                        a = 0.0
                    elif a < -1.0:
                        a = -1.0
                    elif a > 1.0:
                        a = 1.0
                    action[e, j] = a
                    ctrl[e, j] = a * scale[j] + default[e, j]

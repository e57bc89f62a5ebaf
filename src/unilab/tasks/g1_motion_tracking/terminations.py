"""Failure terminations (distinct from time-outs, which the env reports as truncation).

An env terminates when any of these exceeds its threshold:
    anchor_height        |reference anchor z - robot anchor z|
    anchor_orientation   |difference of the anchors' projected-gravity z| (0 upright match .. 2 upside down)
    end_effector_height  max over end effectors of |reference z - robot z|
"""

from __future__ import annotations

import numpy as np
from numba import njit

from unilab.tasks.g1_motion_tracking.config import TerminationsConfig

CONDITION_NAMES = ("anchor_height", "anchor_orientation", "end_effector_height")


@njit(cache=True, fastmath=False)
def termination_kernel(anchor, ee_index, body_pos, body_quat, ref_pos, ref_quat, thresholds, out):
    """Fill ``out`` (n, 3) bool with each condition, in CONDITION_NAMES order."""
    n = body_pos.shape[0]
    for k in range(n):
        out[k, 0] = abs(ref_pos[k, anchor, 2] - body_pos[k, anchor, 2]) > thresholds[0]
        # z of gravity in the body frame = -R[2, 2] = -(1 - 2 (x^2 + y^2))
        qr = ref_quat[k, anchor]
        qb = body_quat[k, anchor]
        gr = 1.0 - 2.0 * (qr[1] * qr[1] + qr[2] * qr[2])
        gb = 1.0 - 2.0 * (qb[1] * qb[1] + qb[2] * qb[2])
        out[k, 1] = abs(gr - gb) > thresholds[1]
        worst = 0.0
        for i in range(ee_index.shape[0]):
            b = ee_index[i]
            d = abs(ref_pos[k, b, 2] - body_pos[k, b, 2])
            if d > worst:
                worst = d
        out[k, 2] = worst > thresholds[2]
        # a non-finite robot state fails every comparison above: count it as a failure
        if not (np.isfinite(body_pos[k, anchor, 2]) and np.isfinite(gb)):
            out[k, 0] = True


def thresholds_vector(cfg: TerminationsConfig) -> np.ndarray:
    """Thresholds in CONDITION_NAMES order."""
    return np.array([cfg.anchor_height, cfg.anchor_orientation, cfg.end_effector_height], dtype=np.float64)

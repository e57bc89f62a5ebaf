"""Tracking rewards (exponential kernels) and regularisation penalties, one array per term.

Tracking terms are ``exp(-error / sigma^2)`` in [0, 1] (1 exactly on the
reference):
    anchor_pos     squared distance of the robot anchor to the reference anchor (world)
    anchor_ori     squared rotation angle between the anchors
    body_pos       mean over tracked bodies of the squared distance to the reference
                   body re-anchored on the robot (robot anchor x/y and heading,
                   reference height), so a global drift is not punished twice
    body_ori       mean squared angle to the re-anchored reference orientation
    body_lin_vel   mean squared world linear-velocity error
    body_ang_vel   mean squared world angular-velocity error
Penalties (positive magnitudes; the configured weights are negative):
    action_rate    sum of squared action changes
    joint_limit    sum of joint excursions beyond the soft joint range
"""

from __future__ import annotations

import numpy as np
from numba import njit

from unilab.tasks.g1_motion_tracking.config import PENALTY_TERMS, TRACKING_TERMS, RewardsConfig
from unilab.sim.quat import quat_angle_sq_nb, quat_mul_nb, quat_rotate_nb, yaw_of_nb

TERM_NAMES = TRACKING_TERMS + PENALTY_TERMS


@njit(cache=True, fastmath=False)
def reward_terms_kernel(anchor, body_pos, body_quat, body_lin, body_ang, ref_pos, ref_quat, ref_lin, ref_ang,
                        joint_pos, soft_lo, soft_hi, action, last_action, inv_sigma_sq, out):
    """Fill ``out`` (n, 8) with the terms in TERM_NAMES order."""
    n = body_pos.shape[0]
    nb = body_pos.shape[1]
    nj = joint_pos.shape[1]
    qd = np.zeros(4)
    tmp = np.empty(4)
    qrel = np.empty(4)
    dv = np.empty(3)
    rv = np.empty(3)
    for k in range(n):
        ra = ref_quat[k, anchor]
        ba = body_quat[k, anchor]
        # heading offset robot anchor vs reference anchor: yaw of (robot * ref^-1)
        tmp[0] = ra[0]
        tmp[1] = -ra[1]
        tmp[2] = -ra[2]
        tmp[3] = -ra[3]
        quat_mul_nb(ba, tmp, qrel)
        yaw = yaw_of_nb(qrel)
        qd[0] = np.cos(0.5 * yaw)
        qd[3] = np.sin(0.5 * yaw)
        e_ap = 0.0
        for c in range(3):
            x = ref_pos[k, anchor, c] - body_pos[k, anchor, c]
            e_ap += x * x
        e_ao = quat_angle_sq_nb(ra, ba)
        e_bp = 0.0
        e_bo = 0.0
        e_bl = 0.0
        e_bw = 0.0
        for b in range(nb):
            for c in range(3):
                dv[c] = ref_pos[k, b, c] - ref_pos[k, anchor, c]
            quat_rotate_nb(qd, dv, rv, False)
            px = body_pos[k, anchor, 0] + rv[0] - body_pos[k, b, 0]
            py = body_pos[k, anchor, 1] + rv[1] - body_pos[k, b, 1]
            pz = ref_pos[k, anchor, 2] + rv[2] - body_pos[k, b, 2]
            e_bp += px * px + py * py + pz * pz
            quat_mul_nb(qd, ref_quat[k, b], tmp)
            e_bo += quat_angle_sq_nb(tmp, body_quat[k, b])
            for c in range(3):
                x = ref_lin[k, b, c] - body_lin[k, b, c]
                y = ref_ang[k, b, c] - body_ang[k, b, c]
                e_bl += x * x
                e_bw += y * y
        out[k, 0] = np.exp(-e_ap * inv_sigma_sq[0])
        out[k, 1] = np.exp(-e_ao * inv_sigma_sq[1])
        out[k, 2] = np.exp(-(e_bp / nb) * inv_sigma_sq[2])
        out[k, 3] = np.exp(-(e_bo / nb) * inv_sigma_sq[3])
        out[k, 4] = np.exp(-(e_bl / nb) * inv_sigma_sq[4])
        out[k, 5] = np.exp(-(e_bw / nb) * inv_sigma_sq[5])
        ar = 0.0
        jl = 0.0
        for j in range(nj):
            x = action[k, j] - last_action[k, j]
            ar += x * x
            q = joint_pos[k, j]
            if q < soft_lo[j]:
                jl += soft_lo[j] - q
            elif q > soft_hi[j]:
                jl += q - soft_hi[j]
        out[k, 6] = ar
        out[k, 7] = jl


class RewardComputer:
    """Evaluates all terms into one ``(n, 8)`` buffer and sums them with the weights."""

    def __init__(self, cfg: RewardsConfig):
        self.names = TERM_NAMES
        self.weights = np.array([getattr(cfg, n).weight for n in TERM_NAMES], dtype=np.float64)
        self.inv_sigma_sq = np.array([1.0 / getattr(cfg, n).sigma ** 2 for n in TRACKING_TERMS], dtype=np.float64)

    def compute(self, out: np.ndarray, anchor: int, robot: tuple, ref: tuple, joint_pos: np.ndarray,
                soft_lo: np.ndarray, soft_hi: np.ndarray, action: np.ndarray, last_action: np.ndarray) -> np.ndarray:
        """Fill ``out`` (n, 8) with the raw terms; return the weighted sum ``(n,)`` (float64).

        ``robot`` and ``ref`` are (body_pos, body_quat, body_lin_vel, body_ang_vel) of the tracked bodies.
        """
        reward_terms_kernel(anchor, *robot, *ref, joint_pos, soft_lo, soft_hi, action, last_action,
                            self.inv_sigma_sq, out)
        return out @ self.weights

"""Reward terms of G1 locomotion, one row each in :data:`REWARD_TERMS` (holosoma's
``managers/reward/terms/locomotion.py``, the formulas of ``g1_29dof_loco_fast_sac``).

Tracking terms (``kind="exp"``) are ``exp(-squared error / tracking_sigma)`` in [0, 1] (holosoma's
``tracking_sigma`` divides the squared error itself); penalties (``kind="penalty"``) are positive magnitudes with
negative weights. Each is ``f(s, e, ...)``: ``s`` the :data:`~.state.LocoArrays`, the other parameters
(``tracking_sigma``, ``swing_height``, ``threshold``) the fields of ``cfg.rewards.<name>``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from unilab.tasks.core.terms import Term
from unilab.tasks.g1_locomotion.config import CurriculumConfig, RewardsConfig


@njit(cache=True, fastmath=False, inline="always")
def tracking_lin_vel(s, e, tracking_sigma):
    dx = s.command[e, 0] - s.base_lin_b[e, 0]
    dy = s.command[e, 1] - s.base_lin_b[e, 1]
    return np.exp(-(dx * dx + dy * dy) * (1.0 / tracking_sigma))


@njit(cache=True, fastmath=False, inline="always")
def tracking_ang_vel(s, e, tracking_sigma):
    d = s.command[e, 2] - s.base_ang_b[e, 2]
    return np.exp(-(d * d) * (1.0 / tracking_sigma))


@njit(cache=True, fastmath=False, inline="always")
def ang_vel_xy(s, e):
    return s.base_ang_b[e, 0] * s.base_ang_b[e, 0] + s.base_ang_b[e, 1] * s.base_ang_b[e, 1]


@njit(cache=True, fastmath=False, inline="always")
def orientation(s, e):
    return s.gravity_b[e, 0] * s.gravity_b[e, 0] + s.gravity_b[e, 1] * s.gravity_b[e, 1]


@njit(cache=True, fastmath=False, inline="always")
def action_rate(s, e):
    # holosoma penalises the action its env receives: the [-1, 1] action times the FastSAC bound
    out = 0.0
    for j in range(s.action.shape[1]):
        x = s.action_bound[j] * (s.action[e, j] - s.last_action[e, j])
        out += x * x
    return out


@njit(cache=True, fastmath=False, inline="always")
def expected_foot_height(phi, swing_height):
    """The foot height the gait asks for at phase ``phi`` in [-pi, pi): a cubic Bezier rise over the first
    half of the period (x = (phi + pi) / 2 pi <= 0.5) to ``swing_height`` and fall back over the second."""
    x = (phi + np.pi) / (2.0 * np.pi)
    if x <= 0.5:
        t = 2.0 * x
        return swing_height * (t ** 3 + 3.0 * (t ** 2 * (1.0 - t)))
    t = 2.0 * x - 1.0
    return swing_height + (0.0 - swing_height) * (t ** 3 + 3.0 * (t ** 2 * (1.0 - t)))


@njit(cache=True, fastmath=False, inline="always")
def feet_phase(s, e, swing_height, tracking_sigma):
    err = 0.0
    for k in range(2):
        d = s.foot_height[e, k] - expected_foot_height(s.phase[e, k], swing_height)
        err += d * d
    return np.exp(-err * (1.0 / tracking_sigma))


@njit(cache=True, fastmath=False, inline="always")
def pose(s, e):
    out = 0.0
    for j in range(s.joint_pos.shape[1]):
        d = s.joint_pos[e, j] - s.default_joint_pos[j]
        out += s.pose_weights[j] * (d * d)
    return out


@njit(cache=True, fastmath=False, inline="always")
def close_feet_xy(s, e, threshold):
    w, x, y, z = s.base_quat[e, 0], s.base_quat[e, 1], s.base_quat[e, 2], s.base_quat[e, 3]
    yaw = np.arctan2(2.0 * (x * y + w * z), 1.0 - 2.0 * (y * y + z * z))  # heading of the base's x axis
    dist = abs(np.cos(yaw) * (s.feet_pos[e, 0, 1] - s.feet_pos[e, 1, 1])
               - np.sin(yaw) * (s.feet_pos[e, 0, 0] - s.feet_pos[e, 1, 0]))
    return 1.0 if dist < threshold else 0.0


@njit(cache=True, fastmath=False, inline="always")
def feet_ori(s, e):
    out = 0.0
    for k in range(2):
        w, x, y, z = s.feet_quat[e, k, 0], s.feet_quat[e, k, 1], s.feet_quat[e, k, 2], s.feet_quat[e, k, 3]
        gx = -2.0 * (x * z - w * y)  # gravity (0, 0, -1) in the foot frame: -(R^T e_z)
        gy = -2.0 * (y * z + w * x)
        out += np.sqrt(gx * gx + gy * gy)
    return out


@njit(cache=True, fastmath=False, inline="always")
def alive(s, e):
    return 1.0


# the table: order = column of info["reward_terms"]; config key and TensorBoard tag (reward_term/<name>) = name
REWARD_TERMS = (
    Term("tracking_lin_vel", tracking_lin_vel, "exp"),
    Term("tracking_ang_vel", tracking_ang_vel, "exp"),
    Term("ang_vel_xy", ang_vel_xy, "penalty"),
    Term("orientation", orientation, "penalty"),
    Term("action_rate", action_rate, "penalty"),
    Term("feet_phase", feet_phase, "exp"),
    Term("pose", pose, "penalty"),
    Term("close_feet_xy", close_feet_xy, "penalty"),
    Term("feet_ori", feet_ori, "penalty"),
    Term("alive", alive, "bonus"),
)
TERM_NAMES = tuple(t.name for t in REWARD_TERMS)
assert set(TERM_NAMES) == set(RewardsConfig.__dataclass_fields__), "the reward table and its config disagree"


class RewardWeights:
    """The driver's weights: ``weight x control_dt``, the curriculum's terms also x its scale (holosoma's
    PenaltyCurriculum and AverageEpisodeLengthTracker; the rule: task.curriculum's fields)."""

    def __init__(self, cfg: RewardsConfig, curriculum: CurriculumConfig, control_dt: float):
        rows = [getattr(cfg, t.name) for t in REWARD_TERMS]
        self.base = np.array([c.weight * control_dt for c in rows])
        self.tagged = np.array([bool(c.curriculum) for c in rows])
        self.curriculum = curriculum
        self.scale = float(curriculum.initial_scale) if curriculum.enabled else 1.0
        self.average_length = 0.0
        self.weights = np.empty_like(self.base)
        self._apply()

    def _apply(self) -> None:
        self.weights[:] = np.where(self.tagged, self.base * self.scale, self.base)

    def record(self, lengths: np.ndarray) -> None:
        """One env step's ended episodes' lengths (possibly none): update the average and the scale."""
        cur = self.curriculum
        if lengths.size:
            w = min(lengths.size / cur.average_over, 1.0)
            self.average_length = self.average_length * (1.0 - w) + float(lengths.mean()) * w
        if not cur.enabled:
            return
        if self.average_length < cur.level_down_threshold:
            scale = self.scale * (1.0 - cur.degree)
        elif self.average_length > cur.level_up_threshold:
            scale = self.scale * (1.0 + cur.degree)
        else:
            return
        # plain floats: this runs on the calling thread every step, where NumPy's scalar calls cost tens of us
        scale = min(max(scale, cur.min_scale), cur.max_scale)
        if scale != self.scale:
            self.scale = scale
            self._apply()

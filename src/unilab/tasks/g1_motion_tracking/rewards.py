"""Reward terms ``f(s, e, ...)`` (:mod:`.terms`), one row each in :data:`REWARD_TERMS`, scoring env ``e``
against its reference frame ``s.ref_index[e]``; the reward is ``sum(weight x term)``, the weight and a term's
parameters (``sigma``, ``history_steps``) from ``cfg.rewards.<name>``.

Tracking terms (``kind="exp"``) are ``exp(-error / sigma^2)`` in [0, 1], 1 on the reference (holosoma's ``sigma``,
a standard deviation); the error is the anchors' squared distance or angle, or the mean over tracked bodies of a
squared (world) error.
body_pos and body_ori compare with the reference re-anchored on the robot (its anchor x/y and heading, the
reference's height), so a global drift is not punished twice. Penalties (``kind="penalty"``) are positive
magnitudes with negative weights.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from unilab.sim.quat import qangle_sq, qmul, qrot
from unilab.tasks.core.contacts import force_norm
from unilab.tasks.core.terms import Term
from unilab.tasks.g1_motion_tracking.config import RewardsConfig, tracking_term_names


@njit(cache=True, fastmath=False, inline="always")
def _gaussian(err, sigma):
    """``exp(-err / sigma^2)``, as ``exp(-err * (1 / sigma^2))``."""
    return np.exp(-err * (1.0 / (sigma * sigma)))


@njit(cache=True, fastmath=False, inline="always")
def _heading_delta(s, e, r):
    """(w, z) of the yaw-only rotation taking the reference anchor's heading to the robot's."""
    a = s.anchor
    ra = s.ref_body_quat[r, a]
    ba = s.body_quat[e, a]
    q = qmul(ba[0], ba[1], ba[2], ba[3], ra[0], -ra[1], -ra[2], -ra[3])
    yaw = np.arctan2(2.0 * (q[0] * q[3] + q[1] * q[2]), 1.0 - 2.0 * (q[2] * q[2] + q[3] * q[3]))
    return np.cos(0.5 * yaw), np.sin(0.5 * yaw)


@njit(cache=True, fastmath=False, inline="always")
def anchor_pos(s, e, sigma):
    a, r = s.anchor, s.ref_index[e]
    err = 0.0
    for c in range(3):
        x = s.ref_body_pos[r, a, c] - s.body_pos[e, a, c]
        err += x * x
    return _gaussian(err, sigma)


@njit(cache=True, fastmath=False, inline="always")
def anchor_ori(s, e, sigma):
    ra = s.ref_body_quat[s.ref_index[e], s.anchor]
    ba = s.body_quat[e, s.anchor]
    return _gaussian(qangle_sq(ra[0], ra[1], ra[2], ra[3], ba[0], ba[1], ba[2], ba[3]), sigma)


@njit(cache=True, fastmath=False, inline="always")
def body_pos(s, e, sigma):
    a, r = s.anchor, s.ref_index[e]
    qw, qz = _heading_delta(s, e, r)
    nb = s.body_pos.shape[1]
    err = 0.0
    for b in range(nb):
        rv = qrot(qw, 0.0, 0.0, qz, s.ref_body_pos[r, b, 0] - s.ref_body_pos[r, a, 0],
                  s.ref_body_pos[r, b, 1] - s.ref_body_pos[r, a, 1],
                  s.ref_body_pos[r, b, 2] - s.ref_body_pos[r, a, 2], False)
        px = s.body_pos[e, a, 0] + rv[0] - s.body_pos[e, b, 0]
        py = s.body_pos[e, a, 1] + rv[1] - s.body_pos[e, b, 1]
        pz = s.ref_body_pos[r, a, 2] + rv[2] - s.body_pos[e, b, 2]
        err += px * px + py * py + pz * pz
    return _gaussian(err / nb, sigma)


@njit(cache=True, fastmath=False, inline="always")
def body_ori(s, e, sigma):
    r = s.ref_index[e]
    qw, qz = _heading_delta(s, e, r)
    nb = s.body_pos.shape[1]
    err = 0.0
    for b in range(nb):
        rq = s.ref_body_quat[r, b]
        t = qmul(qw, 0.0, 0.0, qz, rq[0], rq[1], rq[2], rq[3])
        bq = s.body_quat[e, b]
        err += qangle_sq(t[0], t[1], t[2], t[3], bq[0], bq[1], bq[2], bq[3])
    return _gaussian(err / nb, sigma)


@njit(cache=True, fastmath=False, inline="always")
def _mean_sq_error(ref, robot, e, r):
    """Mean over the tracked bodies of the squared distance between reference row ``r`` and env ``e``."""
    nb = robot.shape[1]
    err = 0.0
    for b in range(nb):
        for c in range(3):
            x = ref[r, b, c] - robot[e, b, c]
            err += x * x
    return err / nb


@njit(cache=True, fastmath=False, inline="always")
def body_lin_vel(s, e, sigma):
    return _gaussian(_mean_sq_error(s.ref_body_lin, s.body_lin, e, s.ref_index[e]), sigma)


@njit(cache=True, fastmath=False, inline="always")
def body_ang_vel(s, e, sigma):
    return _gaussian(_mean_sq_error(s.ref_body_ang, s.body_ang, e, s.ref_index[e]), sigma)


@njit(cache=True, fastmath=False, inline="always")
def action_rate(s, e):
    # holosoma penalises the action its env receives: the [-1, 1] action times the FastSAC bound
    out = 0.0
    for j in range(s.action.shape[1]):
        x = s.action_bound[j] * (s.action[e, j] - s.last_action[e, j])
        out += x * x
    return out


@njit(cache=True, fastmath=False, inline="always")
def undesired_contacts(s, e, history_steps):
    out = 0.0
    for k in range(s.contact_age.shape[1]):
        if s.contact_age[e, k] < history_steps:
            out += 1.0
    return out


@njit(cache=True, fastmath=False, inline="always")
def joint_limit(s, e):
    out = 0.0
    for j in range(s.joint_pos.shape[1]):
        q = s.joint_pos[e, j]
        if q < s.soft_lo[j]:
            out += s.soft_lo[j] - q
        elif q > s.soft_hi[j]:
            out += q - s.soft_hi[j]
    return out


# the table: order = column of the (n, terms) buffer = info["reward_terms"] order;
# config key and TensorBoard tag (reward_term/<name>) = name
REWARD_TERMS = (
    Term("anchor_pos", anchor_pos, "exp"),
    Term("anchor_ori", anchor_ori, "exp"),
    Term("body_pos", body_pos, "exp"),
    Term("body_ori", body_ori, "exp"),
    Term("body_lin_vel", body_lin_vel, "exp"),
    Term("body_ang_vel", body_ang_vel, "exp"),
    Term("action_rate", action_rate, "penalty"),
    Term("joint_limit", joint_limit, "penalty"),
    Term("undesired_contacts", undesired_contacts, "penalty"),
)
TERM_NAMES = tuple(t.name for t in REWARD_TERMS)
TRACKING_TERMS = tuple(t.name for t in REWARD_TERMS if t.kind == "exp")
assert TRACKING_TERMS == tracking_term_names(), "a term's kind and its config default disagree"


@njit(cache=True, fastmath=False, inline="always")
def update_contact_age(s, e, contact_age, threshold):
    """Env ``e``'s contact ages after a step: 0 for a body whose net contact force norm exceeds ``threshold``
    (of the step's last substep, as holosoma's MuJoCo backend samples it); saturating."""
    for k in range(s.contact_bodies.shape[0]):
        if force_norm(s.body_contact_force_w, e, s.contact_bodies[k]) > threshold:
            contact_age[e, k] = 0
        elif contact_age[e, k] < 1 << 30:
            contact_age[e, k] += 1


@njit(cache=True, fastmath=False, inline="always")
def clear_contact_age(s, e, contact_age):
    """Env ``e`` restarted: no contact in its history (holosoma clears the contact-force history)."""
    for k in range(contact_age.shape[1]):
        contact_age[e, k] = 1 << 30


# the stateful rows: the contact history undesired_contacts counts
STATEFUL = (Term("contact_age", update_contact_age, config="rewards.undesired_contacts", reset=clear_contact_age),)

class RewardComputer:
    """The step driver's weights of :data:`REWARD_TERMS` (x ``weight_scale``)."""

    def __init__(self, cfg: RewardsConfig, weight_scale: float = 1.0):
        self.names = TERM_NAMES
        self.weights = np.array([getattr(cfg, t.name).weight for t in REWARD_TERMS], dtype=np.float64) * weight_scale

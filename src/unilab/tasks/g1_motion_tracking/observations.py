"""Robot state read-out and the observation pieces, each ``f(s, e, row, o)`` writing ``row[o:o + width]``; a
piece shows the reference frame ``s.obs_index[e]``, the one the next step's reward scores.

Actor-capable pieces (:data:`POLICY_OBS`; J joints, B tracked bodies):
    ref_joint_pos J | ref_joint_vel J | anchor_pos_b 3 | anchor_ori_b 6 |
    base_lin_vel 3 | base_ang_vel 3 | joint_pos_rel J | joint_vel J | last_action J
An actor set (:data:`POLICY_PRESETS`, ``task.policy_obs``) picks some in order. The critic sees the set's pieces
without noise, the other POLICY_OBS pieces, then :data:`CRITIC_OBS` (body_pos_b 3B | body_ori_b 6B), so the policy
observation is its first ``policy_dim`` entries plus noise. ``*_b``: in the robot's anchor frame; orientations: the
first two columns of the rotation matrix (6 numbers, continuous, unlike quaternions).
"""

from __future__ import annotations

from numba import njit

from unilab.sim.quat import qmul, qrot
from unilab.tasks.core.observations import PieceLayout, fixed_width, joints_width
from unilab.tasks.core.terms import Term
from unilab.tasks.g1_motion_tracking.motion import library_row


@njit(cache=True, fastmath=False, inline="always")
def _rot6(w, x, y, z, out, o):
    out[o + 0] = 1.0 - 2.0 * (y * y + z * z)
    out[o + 1] = 2.0 * (x * y - w * z)
    out[o + 2] = 2.0 * (x * y + w * z)
    out[o + 3] = 1.0 - 2.0 * (x * x + z * z)
    out[o + 4] = 2.0 * (x * z - w * y)
    out[o + 5] = 2.0 * (y * z + w * x)


@njit(cache=True, fastmath=False, inline="always")
def ref_joint_pos(s, e, row, o):
    r = s.obs_index[e]
    for j in range(s.joint_pos.shape[1]):
        row[o + j] = s.ref_joint_pos[r, j]


@njit(cache=True, fastmath=False, inline="always")
def ref_joint_vel(s, e, row, o):
    r = s.obs_index[e]
    for j in range(s.joint_pos.shape[1]):
        row[o + j] = s.ref_joint_vel[r, j]


@njit(cache=True, fastmath=False, inline="always")
def anchor_pos_b(s, e, row, o):
    a, r = s.anchor, s.obs_index[e]
    qa = s.body_quat[e, a]
    v = qrot(qa[0], qa[1], qa[2], qa[3], s.ref_body_pos[r, a, 0] - s.body_pos[e, a, 0],
             s.ref_body_pos[r, a, 1] - s.body_pos[e, a, 1], s.ref_body_pos[r, a, 2] - s.body_pos[e, a, 2], True)
    row[o] = v[0]
    row[o + 1] = v[1]
    row[o + 2] = v[2]


@njit(cache=True, fastmath=False, inline="always")
def anchor_ori_b(s, e, row, o):
    a = s.anchor
    qa = s.body_quat[e, a]
    rq = s.ref_body_quat[s.obs_index[e], a]
    t = qmul(qa[0], -qa[1], -qa[2], -qa[3], rq[0], rq[1], rq[2], rq[3])
    _rot6(t[0], t[1], t[2], t[3], row, o)


@njit(cache=True, fastmath=False, inline="always")
def base_lin_vel(s, e, row, o):
    for c in range(3):
        row[o + c] = s.base_lin_b[e, c]


@njit(cache=True, fastmath=False, inline="always")
def base_ang_vel(s, e, row, o):
    for c in range(3):
        row[o + c] = s.base_ang_b[e, c]


@njit(cache=True, fastmath=False, inline="always")
def joint_pos_rel(s, e, row, o):
    if s.joint_pos_bias.shape[0] == 0:  # no default-pose offsets: exactly the unrandomized values
        for j in range(s.joint_pos.shape[1]):
            row[o + j] = s.joint_pos[e, j] - s.default_joint_pos[j]
    else:  # relative to the env's shifted default pose, as holosoma's setup_dof_pos_bias
        for j in range(s.joint_pos.shape[1]):
            row[o + j] = s.joint_pos[e, j] - (s.default_joint_pos[j] + s.joint_pos_bias[e, j])


@njit(cache=True, fastmath=False, inline="always")
def joint_vel(s, e, row, o):
    for j in range(s.joint_pos.shape[1]):
        row[o + j] = s.joint_vel[e, j]


@njit(cache=True, fastmath=False, inline="always")
def last_action(s, e, row, o):
    # in the recipe's units: the action holosoma's env receives (the [-1, 1] action times the bound)
    for j in range(s.last_action.shape[1]):
        row[o + j] = s.action_bound[j] * s.last_action[e, j]


@njit(cache=True, fastmath=False, inline="always")
def body_pos_b(s, e, row, o):
    a = s.anchor
    qa = s.body_quat[e, a]
    for b in range(s.body_pos.shape[1]):
        v = qrot(qa[0], qa[1], qa[2], qa[3], s.body_pos[e, b, 0] - s.body_pos[e, a, 0],
                 s.body_pos[e, b, 1] - s.body_pos[e, a, 1], s.body_pos[e, b, 2] - s.body_pos[e, a, 2], True)
        row[o + 3 * b] = v[0]
        row[o + 3 * b + 1] = v[1]
        row[o + 3 * b + 2] = v[2]


@njit(cache=True, fastmath=False, inline="always")
def body_ori_b(s, e, row, o):
    qa = s.body_quat[e, s.anchor]
    for b in range(s.body_pos.shape[1]):
        bq = s.body_quat[e, b]
        t = qmul(qa[0], -qa[1], -qa[2], -qa[3], bq[0], bq[1], bq[2], bq[3])
        _rot6(t[0], t[1], t[2], t[3], row, o + 6 * b)


# every piece an actor may observe, in privileged order (noise: the obs_noise config key of the piece)
POLICY_OBS = (
    Term("ref_joint_pos", ref_joint_pos, width=joints_width, mirror="joints"),
    Term("ref_joint_vel", ref_joint_vel, width=joints_width, mirror="joints"),
    Term("anchor_pos_b", anchor_pos_b, width=fixed_width(3), noise="anchor_pos", mirror="vector"),
    Term("anchor_ori_b", anchor_ori_b, width=fixed_width(6), noise="anchor_ori", mirror="rot6"),
    Term("base_lin_vel", base_lin_vel, width=fixed_width(3), noise="base_lin_vel", mirror="vector"),
    Term("base_ang_vel", base_ang_vel, width=fixed_width(3), noise="base_ang_vel", mirror="axial"),
    Term("joint_pos_rel", joint_pos_rel, width=joints_width, noise="joint_pos", mirror="joints"),
    Term("joint_vel", joint_vel, width=joints_width, noise="joint_vel", mirror="joints"),
    Term("last_action", last_action, width=joints_width, mirror="actions"),
)
# the critic's privileged pieces, after the (noise-free) policy pieces
CRITIC_OBS = (
    Term("body_pos_b", body_pos_b, width=lambda nj, nb: 3 * nb, mirror="bodies_vector"),
    Term("body_ori_b", body_ori_b, width=lambda nj, nb: 6 * nb, mirror="bodies_rot6"),
)
# holosoma's observation term of each piece (its WBT terms, ``holosoma.managers.observation.terms.wbt``): term ->
# the pieces it concatenates, same quantities, units and frames; the holosoma deploy format (unilab.interop) reads it
HOLOSOMA_TERMS: dict[str, tuple[str, ...]] = {
    "actions": ("last_action",),
    "base_ang_vel": ("base_ang_vel",),
    "base_lin_vel": ("base_lin_vel",),
    "dof_pos": ("joint_pos_rel",),
    "dof_vel": ("joint_vel",),
    "motion_command": ("ref_joint_pos", "ref_joint_vel"),
    "motion_ref_ori_b": ("anchor_ori_b",),
    "motion_ref_pos_b": ("anchor_pos_b",),
}
# the actor observation sets (task.policy_obs), pieces of POLICY_OBS in order
POLICY_PRESETS: dict[str, tuple[str, ...]] = {
    # a real G1 has no global position and no reliable base linear velocity without mocap or a
    # state estimator: holosoma's WBT actor terms (motion command = reference joint pos + vel)
    "deployable": ("ref_joint_pos", "ref_joint_vel", "anchor_ori_b", "base_ang_vel", "joint_pos_rel", "joint_vel",
                   "last_action"),
    # every piece, the actor before the deployable set (for comparison runs)
    "privileged": tuple(t.name for t in POLICY_OBS),
}


def check_preset(name: str) -> tuple[str, ...]:
    """The piece names of preset ``name``; ValueError naming task.policy_obs and the presets if unknown."""
    try:
        return POLICY_PRESETS[name]
    except KeyError:
        raise ValueError(f"task.policy_obs must be one of {', '.join(POLICY_PRESETS)}, got {name!r}") from None


def obs_layout(num_joints: int, num_bodies: int, preset: str = "deployable") -> PieceLayout:
    """The layout: the ``preset``'s pieces, the other actor-capable ones, the critic's own."""
    by_name = {t.name: t for t in POLICY_OBS}
    mine = tuple(by_name[n] for n in check_preset(preset))
    pieces = mine + tuple(t for t in POLICY_OBS if t not in mine) + CRITIC_OBS
    return PieceLayout(pieces, len(mine), num_joints, num_bodies)



@njit(cache=True, fastmath=False, inline="always")
def gather_reference(s, e, ref_index, obs_index):
    """Env ``e``'s reference frames: the motion library rows of its (clip, frame) and of the next frame."""
    ref_index[e] = library_row(s.clip_offsets, s.num_frames, s.clip[e], s.frame[e])
    obs_index[e] = library_row(s.clip_offsets, s.num_frames, s.clip[e], s.frame[e] + 1)


@njit(cache=True, fastmath=False, inline="always")
def gather_robot(s, e, body_pos, body_quat, body_lin, body_ang, joint_pos, joint_vel, base_lin_b, base_ang_b):
    """Env ``e``'s tracked bodies, joints and base velocities from the pool."""
    for b in range(s.body_ids.shape[0]):
        i = s.body_ids[b]
        for c in range(3):
            body_pos[e, b, c] = s.body_pos_w[e, i, c]
            body_lin[e, b, c] = s.body_lin_vel_w[e, i, c]
            body_ang[e, b, c] = s.body_ang_vel_w[e, i, c]
        for c in range(4):
            body_quat[e, b, c] = s.body_quat_w[e, i, c]
    qpos, qvel = s.qpos, s.qvel
    for j in range(s.qpos_adr.shape[0]):
        joint_pos[e, j] = qpos[e, s.qpos_adr[j]]
        joint_vel[e, j] = qvel[e, s.dof_adr[j]]
    # floating base: qvel[0:3] is world linear velocity, qvel[3:6] body angular velocity
    v = qrot(qpos[e, 3], qpos[e, 4], qpos[e, 5], qpos[e, 6], qvel[e, 0], qvel[e, 1], qvel[e, 2], True)
    for c in range(3):
        base_lin_b[e, c] = v[c]
        base_ang_b[e, c] = qvel[e, 3 + c]


GATHER = (Term("reference", gather_reference), Term("robot", gather_robot))
"""The gather rows, in order."""

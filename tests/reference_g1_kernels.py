"""Today's serial G1 task kernels (before the term tables), kept verbatim as the bit-identity reference.

Copied from src/unilab/tasks/g1_motion_tracking/{observations,rewards,terminations}.py at commit
4ade959; the tests compare the parallel drivers with these (np.array_equal). Below them, the
NumPy code of the reset start state and of the step's action / info handling at commit 7497f27,
which parallel kernels replaced too. Changed since, for the holosoma recipe: action_rate is in units of
the action bound (reward_terms_kernel's ``bound``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from unilab.sim.quat import quat_mul, quat_normalize, quat_rotate_inv


@njit(fastmath=False)
def gather_robot_state(rows, xpos, xquat, cvel, subtree_com, qpos, qvel, body_ids, root_ids, qpos_adr, dof_adr,
                       body_pos, body_quat, body_lin, body_ang, joint_pos, joint_vel, base_lin_b, base_ang_b):
    """Copy the tracked bodies' world pose and velocity and the joint state of envs ``rows``.

    Output arrays have ``len(rows)`` rows. Linear velocity is that of each
    body origin (``cvel`` holds it at the root subtree's centre of mass).
    """
    v = np.empty(3)
    for k in range(rows.shape[0]):
        e = rows[k]
        for b in range(body_ids.shape[0]):
            i = body_ids[b]
            r = root_ids[b]
            for c in range(3):
                body_pos[k, b, c] = xpos[e, i, c]
            for c in range(4):
                body_quat[k, b, c] = xquat[e, i, c]
            wx, wy, wz = cvel[e, i, 0], cvel[e, i, 1], cvel[e, i, 2]
            ox = xpos[e, i, 0] - subtree_com[e, r, 0]
            oy = xpos[e, i, 1] - subtree_com[e, r, 1]
            oz = xpos[e, i, 2] - subtree_com[e, r, 2]
            body_ang[k, b, 0] = wx
            body_ang[k, b, 1] = wy
            body_ang[k, b, 2] = wz
            body_lin[k, b, 0] = cvel[e, i, 3] + wy * oz - wz * oy
            body_lin[k, b, 1] = cvel[e, i, 4] + wz * ox - wx * oz
            body_lin[k, b, 2] = cvel[e, i, 5] + wx * oy - wy * ox
        for j in range(qpos_adr.shape[0]):
            joint_pos[k, j] = qpos[e, qpos_adr[j]]
            joint_vel[k, j] = qvel[e, dof_adr[j]]
        # floating base: qvel[0:3] is world linear velocity, qvel[3:6] body angular velocity
        for c in range(3):
            v[c] = qvel[e, c]
        quat_rotate_nb(qpos[e, 3:7], v, base_lin_b[k], True)
        for c in range(3):
            base_ang_b[k, c] = qvel[e, 3 + c]


@njit(fastmath=False, inline="always")
def _rot6(q, out, o):
    w, x, y, z = q[0], q[1], q[2], q[3]
    out[o + 0] = 1.0 - 2.0 * (y * y + z * z)
    out[o + 1] = 2.0 * (x * y - w * z)
    out[o + 2] = 2.0 * (x * y + w * z)
    out[o + 3] = 1.0 - 2.0 * (x * x + z * z)
    out[o + 4] = 2.0 * (x * z - w * y)
    out[o + 5] = 2.0 * (y * z + w * x)


@njit(fastmath=False)
def fill_observations(anchor, body_pos, body_quat, joint_pos, joint_vel, base_lin_b, base_ang_b,
                      ref_anchor_pos, ref_anchor_quat, ref_joint_pos, ref_joint_vel, default_joint_pos,
                      last_action, noise_scale, noise, policy_out, critic_out):
    """Write policy (with ``noise_scale * noise``) and critic observations, float32.

    ``noise`` is ``(n, policy_dim)`` uniform [-1, 1] (ignored where the scale is 0).
    """
    n = body_pos.shape[0]
    nb = body_pos.shape[1]
    nj = joint_pos.shape[1]
    d = 5 * nj + 15
    row = np.empty(d)
    qinv = np.empty(4)
    tmp = np.empty(4)
    dv = np.empty(3)
    pb = np.empty(3)
    use_noise = False
    for i in range(d):
        if noise_scale[i] != 0.0:
            use_noise = True
    for k in range(n):
        qa = body_quat[k, anchor]
        qinv[0] = qa[0]
        qinv[1] = -qa[1]
        qinv[2] = -qa[2]
        qinv[3] = -qa[3]
        o = 0
        for j in range(nj):
            row[o + j] = ref_joint_pos[k, j]
            row[o + nj + j] = ref_joint_vel[k, j]
        o = 2 * nj
        for c in range(3):
            dv[c] = ref_anchor_pos[k, c] - body_pos[k, anchor, c]
        quat_rotate_nb(qa, dv, pb, True)
        row[o] = pb[0]
        row[o + 1] = pb[1]
        row[o + 2] = pb[2]
        quat_mul_nb(qinv, ref_anchor_quat[k], tmp)
        _rot6(tmp, row, o + 3)
        o += 9
        for c in range(3):
            row[o + c] = base_lin_b[k, c]
            row[o + 3 + c] = base_ang_b[k, c]
        o += 6
        for j in range(nj):
            row[o + j] = joint_pos[k, j] - default_joint_pos[j]
            row[o + nj + j] = joint_vel[k, j]
            row[o + 2 * nj + j] = last_action[k, j]
        for i in range(d):
            critic_out[k, i] = row[i]
            if use_noise:
                policy_out[k, i] = row[i] + noise_scale[i] * noise[k, i]
            else:
                policy_out[k, i] = row[i]
        o = d
        for b in range(nb):
            for c in range(3):
                dv[c] = body_pos[k, b, c] - body_pos[k, anchor, c]
            quat_rotate_nb(qa, dv, pb, True)
            critic_out[k, o + 3 * b] = pb[0]
            critic_out[k, o + 3 * b + 1] = pb[1]
            critic_out[k, o + 3 * b + 2] = pb[2]
        o += 3 * nb
        for b in range(nb):
            quat_mul_nb(qinv, body_quat[k, b], tmp)
            for c in range(6):
                row[c] = 0.0
            _rot6(tmp, row, 0)
            for c in range(6):
                critic_out[k, o + 6 * b + c] = row[c]


@njit(fastmath=False)
def reward_terms_kernel(anchor, body_pos, body_quat, body_lin, body_ang, ref_pos, ref_quat, ref_lin, ref_ang,
                        joint_pos, soft_lo, soft_hi, action, last_action, inv_sigma_sq, out, bound):
    """Fill ``out`` (n, 8) with the terms in TERM_NAMES order (action_rate in units of ``bound`` x action)."""
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
            x = bound[j] * (action[k, j] - last_action[k, j])
            ar += x * x
            q = joint_pos[k, j]
            if q < soft_lo[j]:
                jl += soft_lo[j] - q
            elif q > soft_hi[j]:
                jl += q - soft_hi[j]
        out[k, 6] = ar
        out[k, 7] = jl


@njit(fastmath=False)
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


# ---------------------------------------------------------------------------
# the quaternion kernels the serial implementation used: q is a length-4 view, out a preallocated view


@njit(cache=True, fastmath=False, inline="always")
def quat_mul_nb(a, b, out):
    aw, ax, ay, az = a[0], a[1], a[2], a[3]
    bw, bx, by, bz = b[0], b[1], b[2], b[3]
    out[0] = aw * bw - ax * bx - ay * by - az * bz
    out[1] = aw * bx + ax * bw + ay * bz - az * by
    out[2] = aw * by - ax * bz + ay * bw + az * bx
    out[3] = aw * bz + ax * by - ay * bx + az * bw


@njit(cache=True, fastmath=False, inline="always")
def quat_rotate_nb(q, v, out, inverse):
    """out = R(q) v, or R(q)^T v when ``inverse``; ``out`` may not alias ``v``."""
    w = q[0]
    ux, uy, uz = q[1], q[2], q[3]
    if inverse:
        ux, uy, uz = -ux, -uy, -uz
    tx = 2.0 * (uy * v[2] - uz * v[1])
    ty = 2.0 * (uz * v[0] - ux * v[2])
    tz = 2.0 * (ux * v[1] - uy * v[0])
    out[0] = v[0] + w * tx + (uy * tz - uz * ty)
    out[1] = v[1] + w * ty + (uz * tx - ux * tz)
    out[2] = v[2] + w * tz + (ux * ty - uy * tx)


@njit(cache=True, fastmath=False, inline="always")
def quat_angle_sq_nb(a, b):
    """Squared rotation angle between unit quaternions ``a`` and ``b``."""
    d = abs(a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3])
    if d > 1.0:
        d = 1.0
    ang = 2.0 * np.arccos(d)
    return ang * ang


@njit(cache=True, fastmath=False, inline="always")
def yaw_of_nb(q):
    """Heading angle (rad) of ``q``."""
    w, x, y, z = q[0], q[1], q[2], q[3]
    return np.arctan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


# ---------------------------------------------------------------------------
# NumPy (commit 7497f27): resets.start_state, env.step's action -> PD targets and info columns


def _rpy_quat(rpy: np.ndarray) -> np.ndarray:
    """Quaternions (n, 4) of roll-pitch-yaw angles (n, 3), extrinsic x then y then z."""
    half = 0.5 * rpy
    cr, sr = np.cos(half[:, 0]), np.sin(half[:, 0])
    cp, sp = np.cos(half[:, 1]), np.sin(half[:, 1])
    cy, sy = np.cos(half[:, 2]), np.sin(half[:, 2])
    return np.stack([
        cr * cp * cy + sr * sp * sy,
        sr * cp * cy - cr * sp * sy,
        cr * sp * cy + sr * cp * sy,
        cr * cp * sy - sr * sp * cy,
    ], axis=1)


def start_state(library, ref_index, rows, noise, rng, joint_qposadr, joint_lo, joint_hi):
    """Reference (qpos, qvel) of envs ``rows`` (frames ``ref_index[rows]``) with uniform noise."""
    idx = ref_index[rows]
    qpos = library.qpos[idx]
    qvel = library.qvel[idx]
    n = qpos.shape[0]
    if n == 0:
        return qpos, qvel

    def u(scale, size):
        s = np.asarray(scale, dtype=np.float64)
        if not np.any(s):
            return np.zeros(size)
        return rng.uniform(-1.0, 1.0, size=size) * s

    qpos[:, 0:3] += u(noise.root_pos, (n, 3))
    rpy = u(noise.root_rpy, (n, 3))
    if np.any(rpy):
        qpos[:, 3:7] = quat_normalize(quat_mul(_rpy_quat(rpy), qpos[:, 3:7]))
    qvel[:, 0:3] += u(noise.root_lin_vel, (n, 3))
    w = u(noise.root_ang_vel, (n, 3))
    if np.any(w):
        qvel[:, 3:6] += quat_rotate_inv(qpos[:, 3:7], w)
    nj = joint_qposadr.shape[0]
    dj = u(noise.joint_pos, (n, nj))
    if np.any(dj):
        qpos[:, joint_qposadr] = np.clip(qpos[:, joint_qposadr] + dj, joint_lo, joint_hi)
    return qpos, qvel


def action_to_ctrl(action_in, scale, default):
    """(action, ctrl) as env.step's backend_step computed them."""
    action = np.empty((action_in.shape[0], scale.shape[0]))
    ctrl = np.empty_like(action)
    np.clip(action_in, -1.0, 1.0, out=action)
    np.nan_to_num(action, copy=False, nan=0.0)
    np.multiply(action, scale, out=ctrl)
    ctrl += default
    return action, ctrl


def info_columns(terms, conds, term_names, condition_names):
    """info["reward_terms"] and info["termination_terms"] as env.step built them."""
    return ({name: terms[:, i].astype(np.float32) for i, name in enumerate(term_names)},
            {name: conds[:, i].copy() for i, name in enumerate(condition_names)})

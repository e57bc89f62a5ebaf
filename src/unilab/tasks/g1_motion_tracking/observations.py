"""Robot state read-out and the policy / critic observation vectors (Numba kernels over envs).

Policy observation, in order (J joints, B tracked bodies):
    ref_joint_pos J | ref_joint_vel J | anchor_pos_b 3 | anchor_ori_b 6 |
    base_lin_vel 3 | base_ang_vel 3 | joint_pos - default J | joint_vel J | last_action J
Critic observation: the same terms without noise, then
    body_pos_b 3B | body_ori_b 6B   (robot bodies in the robot anchor frame)
``*_b`` is expressed in the robot's anchor frame; orientations are the first
two columns of the rotation matrix (6 numbers, continuous, unlike quaternions).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from unilab.sim.quat import quat_mul_nb, quat_rotate_nb


def policy_obs_dim(num_joints: int) -> int:
    """Length of the policy observation."""
    return 5 * num_joints + 15


def critic_obs_dim(num_joints: int, num_bodies: int) -> int:
    """Length of the critic observation."""
    return policy_obs_dim(num_joints) + 9 * num_bodies


def policy_obs_slices(num_joints: int) -> dict[str, slice]:
    """Where each named term sits in the policy observation."""
    sizes = [("ref_joint_pos", num_joints), ("ref_joint_vel", num_joints), ("anchor_pos_b", 3),
             ("anchor_ori_b", 6), ("base_lin_vel", 3), ("base_ang_vel", 3), ("joint_pos_rel", num_joints),
             ("joint_vel", num_joints), ("last_action", num_joints)]
    out, i = {}, 0
    for name, n in sizes:
        out[name] = slice(i, i + n)
        i += n
    return out


@njit(cache=True, fastmath=False)
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


@njit(cache=True, fastmath=False, inline="always")
def _rot6(q, out, o):
    w, x, y, z = q[0], q[1], q[2], q[3]
    out[o + 0] = 1.0 - 2.0 * (y * y + z * z)
    out[o + 1] = 2.0 * (x * y - w * z)
    out[o + 2] = 2.0 * (x * y + w * z)
    out[o + 3] = 1.0 - 2.0 * (x * x + z * z)
    out[o + 4] = 2.0 * (x * z - w * y)
    out[o + 5] = 2.0 * (y * z + w * x)


@njit(cache=True, fastmath=False)
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


def noise_scale_vector(num_joints: int, noise_cfg) -> np.ndarray:
    """Per-entry uniform noise half-widths of the policy observation."""
    s = policy_obs_slices(num_joints)
    out = np.zeros(policy_obs_dim(num_joints))
    out[s["anchor_pos_b"]] = noise_cfg.anchor_pos
    out[s["anchor_ori_b"]] = noise_cfg.anchor_ori
    out[s["base_lin_vel"]] = noise_cfg.base_lin_vel
    out[s["base_ang_vel"]] = noise_cfg.base_ang_vel
    out[s["joint_pos_rel"]] = noise_cfg.joint_pos
    out[s["joint_vel"]] = noise_cfg.joint_vel
    return out

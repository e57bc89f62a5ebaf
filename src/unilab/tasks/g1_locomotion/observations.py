"""Robot state read-out and the observation pieces of G1 locomotion (holosoma's
``g1_29dof_loco_single_wolinvel``), one row each.

Actor (and critic) pieces, in order:
    base_ang_vel 3 (x0.25) | projected_gravity 3 | command_lin_vel 2 | command_ang_vel 1 |
    joint_pos J (relative to the default) | joint_vel J (x0.05) | actions A | sin_phase 2 | cos_phase 2
Critic only: base_lin_vel 3 (x2.0; a real robot has no reliable base linear velocity).
A piece ``f(s, e, row, o)`` writes its scaled values into ``row[o:o + width]``; actor noise is drawn in
the unscaled units (``task.obs_noise``) and scaled with the piece, as holosoma adds noise before the scale.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from unilab.sim.quat import qrot
from unilab.tasks.core.contacts import force_norm
from unilab.tasks.core.observations import PieceLayout, fixed_width, joints_width
from unilab.tasks.core.terms import Term
from unilab.tasks.core.terrain import terrain_height


@njit(cache=True, fastmath=False, inline="always")
def base_ang_vel(s, e, row, o):
    for c in range(3):
        row[o + c] = s.base_ang_b[e, c] * s.ang_vel_scale


@njit(cache=True, fastmath=False, inline="always")
def projected_gravity(s, e, row, o):
    for c in range(3):
        row[o + c] = s.gravity_b[e, c]


@njit(cache=True, fastmath=False, inline="always")
def command_lin_vel(s, e, row, o):
    row[o] = s.command[e, 0]
    row[o + 1] = s.command[e, 1]


@njit(cache=True, fastmath=False, inline="always")
def command_ang_vel(s, e, row, o):
    row[o] = s.command[e, 2]


@njit(cache=True, fastmath=False, inline="always")
def joint_pos(s, e, row, o):
    for j in range(s.joint_pos.shape[1]):
        row[o + j] = s.joint_pos[e, j] - s.default_joint_pos[j]


@njit(cache=True, fastmath=False, inline="always")
def joint_vel(s, e, row, o):
    for j in range(s.joint_vel.shape[1]):
        row[o + j] = s.joint_vel[e, j] * s.joint_vel_scale


@njit(cache=True, fastmath=False, inline="always")
def actions(s, e, row, o):
    # the action holosoma's env receives: the [-1, 1] action times the FastSAC bound
    for j in range(s.last_action.shape[1]):
        row[o + j] = s.action_bound[j] * s.last_action[e, j]


@njit(cache=True, fastmath=False, inline="always")
def sin_phase(s, e, row, o):
    row[o] = np.sin(s.phase[e, 0])
    row[o + 1] = np.sin(s.phase[e, 1])


@njit(cache=True, fastmath=False, inline="always")
def cos_phase(s, e, row, o):
    row[o] = np.cos(s.phase[e, 0])
    row[o + 1] = np.cos(s.phase[e, 1])


@njit(cache=True, fastmath=False, inline="always")
def base_lin_vel(s, e, row, o):
    for c in range(3):
        row[o + c] = s.base_lin_b[e, c] * s.lin_vel_scale


# critic order; the first NUM_POLICY are the actor's (noise: the obs_noise key; mirror: symmetry.piece_mirror)
OBS_PIECES = (
    Term("base_ang_vel", base_ang_vel, width=fixed_width(3), noise="base_ang_vel", mirror="axial"),
    Term("projected_gravity", projected_gravity, width=fixed_width(3), noise="projected_gravity", mirror="vector"),
    Term("command_lin_vel", command_lin_vel, width=fixed_width(2), mirror="planar"),
    Term("command_ang_vel", command_ang_vel, width=fixed_width(1), mirror="yaw"),
    Term("joint_pos", joint_pos, width=joints_width, noise="joint_pos", mirror="joints"),
    Term("joint_vel", joint_vel, width=joints_width, noise="joint_vel", mirror="joints"),
    Term("actions", actions, width=joints_width, mirror="actions"),
    Term("sin_phase", sin_phase, width=fixed_width(2), mirror="sides"),
    Term("cos_phase", cos_phase, width=fixed_width(2), mirror="sides"),
    Term("base_lin_vel", base_lin_vel, width=fixed_width(3), mirror="vector"),
)
NUM_POLICY = len(OBS_PIECES) - 1
# holosoma's observation term of each piece (its locomotion terms): term -> the pieces it concatenates, same
# quantities, units and frames (scales: each piece's task.obs_scales); the holosoma deploy format (unilab.interop)
# reads it
HOLOSOMA_TERMS: dict[str, tuple[str, ...]] = {
    "actions": ("actions",),
    "base_ang_vel": ("base_ang_vel",),
    "base_lin_vel": ("base_lin_vel",),
    "command_ang_vel": ("command_ang_vel",),
    "command_lin_vel": ("command_lin_vel",),
    "cos_phase": ("cos_phase",),
    "dof_pos": ("joint_pos",),
    "dof_vel": ("joint_vel",),
    "projected_gravity": ("projected_gravity",),
    "sin_phase": ("sin_phase",),
}


def obs_layout(num_joints: int) -> PieceLayout:
    """The actor and critic layout for ``num_joints`` joints (as many actions)."""
    return PieceLayout(OBS_PIECES, NUM_POLICY, num_joints)


@njit(cache=True, fastmath=False, inline="always")
def gather_robot(s, e, base_pos, base_quat, base_lin_b, base_ang_b, gravity_b, joint_pos, joint_vel, feet_pos,
                 feet_quat, foot_height, contact_force):
    """Env ``e``'s robot state from the pool; the base is the model's free joint (qpos 0:7, qvel 0:6), the
    foot heights are above the ground (``s.terrain_*``, its height lookup)."""
    qpos, qvel, xpos, xquat = s.qpos, s.qvel, s.body_pos_w, s.body_quat_w
    w, x, y, z = qpos[e, 3], qpos[e, 4], qpos[e, 5], qpos[e, 6]
    for c in range(3):
        base_pos[e, c] = qpos[e, c]
    base_quat[e, 0], base_quat[e, 1], base_quat[e, 2], base_quat[e, 3] = w, x, y, z
    # free joint: qvel[0:3] is the world linear velocity, qvel[3:6] the body-frame angular velocity
    v = qrot(w, x, y, z, qvel[e, 0], qvel[e, 1], qvel[e, 2], True)
    g = qrot(w, x, y, z, 0.0, 0.0, -1.0, True)
    for c in range(3):
        base_lin_b[e, c] = v[c]
        base_ang_b[e, c] = qvel[e, 3 + c]
        gravity_b[e, c] = g[c]
    for j in range(s.qpos_adr.shape[0]):
        joint_pos[e, j] = qpos[e, s.qpos_adr[j]]
        joint_vel[e, j] = qvel[e, s.dof_adr[j]]
    for k in range(2):
        for c in range(3):
            feet_pos[e, k, c] = xpos[e, s.feet[k], c]
        for c in range(4):
            feet_quat[e, k, c] = xquat[e, s.feet[k], c]
        p = s.foot_points[k]  # height above the ground under the point (holosoma: a ray cast down to the terrain)
        foot_height[e, k] = xpos[e, p, 2] - terrain_height(xpos[e, p, 0], xpos[e, p, 1], s.terrain_heights,
                                                           s.terrain_x0, s.terrain_y0, s.terrain_res)
    # a running maximum in place: kept in a local, Numba's parfor dropped it (the rows stayed 0)
    contact_force[e] = 0.0
    for k in range(s.termination_bodies.shape[0]):
        contact_force[e] = max(contact_force[e], force_norm(s.body_contact_force_w, e, s.termination_bodies[k]))


GATHER = (Term("robot", gather_robot),)

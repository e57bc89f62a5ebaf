"""The per-env state of G1 tracking and the struct every row function reads.

Row functions read ``s``, the env's :class:`TaskArrays`, for env ``e`` (their other arguments come by name,
:mod:`unilab.tasks.core.driver`); the reference frames are state rows: ``ref_index`` (what rewards and terminations
score) and ``obs_index`` (what the observation shows). State a new term needs: a row in :data:`STATE` and the
gather row that fills it (``observations.gather_robot``); the buffer and the ``TaskArrays`` field follow.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from unilab.tasks.core.state import StateSpec

# dimensions: n envs, B tracked bodies, J joints, A actions, K undesired-contact bodies
STATE = StateSpec((
    # gathered every step: the reference frames and the robot's state
    ("ref_index", ("n",), np.int64),  # each env's reference frame: a row of the motion library's arrays
    ("obs_index", ("n",), np.int64),  # the frame its observation shows: the next, which the next step scores
    ("body_pos", ("n", "B", 3), np.float64),  # tracked bodies, world frame (velocities of the body origin)
    ("body_quat", ("n", "B", 4), np.float64),
    ("body_lin", ("n", "B", 3), np.float64),
    ("body_ang", ("n", "B", 3), np.float64),
    ("joint_pos", ("n", "J"), np.float64),
    ("joint_vel", ("n", "J"), np.float64),
    ("base_lin_b", ("n", 3), np.float64),  # base velocities, base frame
    ("base_ang_b", ("n", 3), np.float64),
    # written by the backend step, the step's end and the stateful rows
    ("action", ("n", "A"), np.float64),  # this step's action, in [-1, 1]
    ("last_action", ("n", "A"), np.float64),
    # policy steps since each undesired-contact body last touched (a large age: not within the history)
    ("contact_age", ("n", "K"), np.int64, 1 << 30),
))

TaskArrays = namedtuple("TaskArrays", [
    *STATE.names,
    "anchor",          # int: index of the anchor among the tracked bodies
    "ee_index",        # (E,) end-effector indices among the tracked bodies
    "ref_body_pos", "ref_body_quat", "ref_body_lin", "ref_body_ang",  # (F, B, .) library arrays
    "ref_joint_pos", "ref_joint_vel",                 # (F, J)
    "clip", "frame",   # (n,) each env's clip and frame in it (the clock before_update advances)
    "clip_offsets", "num_frames",                     # (clips,) the library's
    "soft_lo", "soft_hi", "default_joint_pos",        # (J,)
    "action_bound",    # (A,) factors from the [-1, 1] action to the recipe's (holosoma's) action
    "joint_pos_bias",  # (n, J) offsets of the default joint positions (domain randomization); (0, J): none
    "body_ids", "qpos_adr", "dof_adr",                # the tracked bodies' model ids, the joints' addresses
    "contact_bodies",  # (K,) the undesired-contact bodies' model ids
    # the pool's live arrays
    "body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w", "qpos", "qvel", "body_contact_force_w",
])
"""The arrays every row function may read (one namedtuple: Numba passes it as a struct)."""

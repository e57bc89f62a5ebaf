"""The per-env state of G1 tracking and the arrays every term function reads.

Term functions read ``s``, the env's :class:`TaskArrays`, for env ``e`` (their other arguments: by name,
:mod:`unilab.tasks.core.terms`); the reference frames are state rows: ``ref_index`` (what rewards and terminations
score) and ``obs_index`` (what the observation shows). State a new term
needs: a row in :data:`GATHERED` and its line in :func:`~.observations.gather_env` (which fills the rows in this
order); the buffers, ``TaskArrays`` and the gather tuple follow.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from unilab.tasks.core.state import StateSpec

# dimensions: n envs, B tracked bodies, J joints, A actions, K undesired-contact bodies
GATHERED = StateSpec((
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
))
"""Robot state and reference row, written by the gather stage every step."""

STEP_STATE = StateSpec((
    ("action", ("n", "A"), np.float64),  # this step's action, in [-1, 1]
    ("last_action", ("n", "A"), np.float64),
    # policy steps since each undesired-contact body last touched (a large age: not within the history)
    ("contact_age", ("n", "K"), np.int64, 1 << 30),
))
"""Per-env state written by the other stages: the actions (step, step tail), the contact history (rewards)."""

# the arrays every term function may read (one namedtuple: Numba passes it as a struct)
TaskArrays = namedtuple("TaskArrays", [
    "anchor",          # int: index of the anchor among the tracked bodies
    "ee_index",        # (E,) end-effector indices among the tracked bodies
    *GATHERED.names,
    *STEP_STATE.names,
    "ref_body_pos", "ref_body_quat", "ref_body_lin", "ref_body_ang",  # (F, B, .) library arrays
    "ref_joint_pos", "ref_joint_vel",                 # (F, J)
    "soft_lo", "soft_hi", "default_joint_pos",        # (J,)
    "action_bound",    # (A,) factors from the [-1, 1] action to the recipe's (holosoma's) action
    "joint_pos_bias",  # (n, J) offsets of the default joint positions (domain randomization); (0, J): none
])

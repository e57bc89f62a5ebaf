"""The arrays every G1 tracking term function reads.

Term functions share one signature: ``f(s, e, r, p)`` with ``s`` the
:class:`TaskArrays` of the env, ``e`` the env, ``r`` its flat reference frame
(a row of the motion library's arrays) and ``p`` the row's parameter (the rows
and the drivers: :mod:`unilab.tasks.core.terms`).
"""

from __future__ import annotations

from collections import namedtuple

# the arrays every term function may read (one namedtuple: Numba passes it as a struct)
TaskArrays = namedtuple("TaskArrays", [
    "anchor",          # int: index of the anchor among the tracked bodies
    "ee_index",        # (E,) end-effector indices among the tracked bodies
    "body_pos", "body_quat", "body_lin", "body_ang",  # (n, B, .) robot tracked bodies, world frame
    "joint_pos", "joint_vel",                          # (n, J)
    "base_lin_b", "base_ang_b",                        # (n, 3) base velocities, base frame
    "ref_index",       # (n,) flat reference frame of each env (motion library row)
    "ref_body_pos", "ref_body_quat", "ref_body_lin", "ref_body_ang",  # (F, B, .) library arrays
    "ref_joint_pos", "ref_joint_vel",                 # (F, J)
    "soft_lo", "soft_hi", "default_joint_pos",        # (J,)
    "action", "last_action",                          # (n, A) in [-1, 1]
    "action_bound",    # (A,) factors from the [-1, 1] action to the recipe's (holosoma's) action
    "joint_pos_bias",  # (n, J) offsets of the default joint positions (domain randomization); (0, J): none
    "contact_age",     # (n, K) policy steps since each undesired-contact body last touched (K = 0: term off)
    "contact_history", # int: a body counts while its contact_age is below this
])

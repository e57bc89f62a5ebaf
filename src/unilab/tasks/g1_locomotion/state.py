"""The per-env state of G1 locomotion and the struct every term function reads.

Term functions share one signature per table (rewards and conditions ``f(s, e, p)``, observation pieces
``f(s, e, row, o)``) with ``s`` the :data:`LocoArrays` of the env, ``e`` the env and ``p`` the row's parameters.
State a new term needs: a row in :data:`GATHERED` and its line in :func:`~.observations.gather_env`; the buffers,
the struct and the gather tuple follow.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from unilab.tasks.core.state import StateSpec

# dimensions: n envs, J joints, A actions
GATHERED = StateSpec((
    ("base_pos", ("n", 3), np.float64),  # world frame
    ("base_quat", ("n", 4), np.float64),  # (w, x, y, z)
    ("base_lin_b", ("n", 3), np.float64),  # base velocities, base frame
    ("base_ang_b", ("n", 3), np.float64),
    ("gravity_b", ("n", 3), np.float64),  # unit gravity in the base frame
    ("joint_pos", ("n", "J"), np.float64),
    ("joint_vel", ("n", "J"), np.float64),
    ("feet_pos", ("n", 2, 3), np.float64),  # left, right foot bodies, world frame
    ("feet_quat", ("n", 2, 4), np.float64),
    ("foot_height", ("n", 2), np.float64),  # the foot points' height above the floor
    ("contact_force", ("n",), np.float64),  # largest net contact force on a termination body (N)
))
"""Robot state, written by the gather stage every step."""

STEP_STATE = StateSpec((
    ("action", ("n", "A"), np.float64),  # this step's action, in [-1, 1]
    ("last_action", ("n", "A"), np.float64),
    ("command", ("n", 3), np.float64),  # forward, lateral velocity (m/s), yaw rate (rad/s), base frame
    ("phase", ("n", 2), np.float64),  # gait phase of the left and right leg, [-pi, pi)
    ("phase_offset", ("n", 2), np.float64),
    ("phase_dt", ("n",), np.float64),  # phase advance per policy step (rad)
    ("push_counter", ("n",), np.int64),  # policy steps since the last push
    ("push_steps", ("n",), np.int64),  # policy steps between pushes
))
"""Per-env state written by the other stages: actions, the command and gait clock (command stage, restarts),
the push timer."""

LocoArrays = namedtuple("LocoArrays", [
    *GATHERED.names,
    *STEP_STATE.names,
    "origin",             # (n, 2) world x, y of each env's spawn point (its terrain tile's centre)
    "default_joint_pos",  # (J,)
    "action_bound",       # (A,) factors from the [-1, 1] action to the recipe's (holosoma's) action
    "pose_weights",       # (J,) the pose term's per-joint weights
    "ang_vel_scale", "joint_vel_scale", "lin_vel_scale",  # observation scales
])
"""The arrays every term function may read (one namedtuple: Numba passes it as a struct)."""

CommandParams = namedtuple("CommandParams", [
    "ranges",          # (3, 2) [low, high] of forward, lateral velocity and yaw rate
    "stand_prob",      # a drawn command is zero with this probability
    "resample_steps",  # a new command every this many policy steps of an episode
    "freq_mean",       # gait frequency (Hz) and the half-width of its uniform draw
    "freq_width",
    "dt",              # policy step (s)
    "randomize_phase",
    "push",            # pushes on
    "push_interval",   # (2,) [low, high] seconds between pushes
    "push_max",        # (2,) largest world x, y base velocity of a push (m/s)
    "base_height",     # reset base height above the ground (m)
    "spawn_offset",    # a reset puts the base at its origin + uniform +-this in x and y (m)
    "joint_scale",     # (2,) [low, high] of the reset joint factor
    "evaluating",      # fixed commands, mean gait frequency, legs at phase 0 and -pi (pushes as "push")
])
"""The command, gait, push and start-state settings (read-only inside the driver)."""

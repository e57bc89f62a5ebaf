"""The per-env state of G1 locomotion and the struct every row function reads.

Row functions read ``s``, the :data:`LocoArrays`, for env ``e`` (their other arguments come by name,
:mod:`unilab.tasks.core.driver`). State a new term needs: a row in :data:`STATE` and its line in
:func:`~.observations.gather_robot`; the buffer and the struct field follow.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from unilab.tasks.core.state import StateSpec

# dimensions: n envs, J joints, A actions
STATE = StateSpec((
    # gathered every step
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
    # written by the backend step, the step's end, the start and command rows
    ("action", ("n", "A"), np.float64),  # this step's action, in [-1, 1]
    ("last_action", ("n", "A"), np.float64),
    ("command", ("n", 3), np.float64),  # forward, lateral velocity (m/s), yaw rate (rad/s), base frame
    ("phase", ("n", 2), np.float64),  # gait phase of the left and right leg, [-pi, pi)
    ("phase_offset", ("n", 2), np.float64),
    ("phase_dt", ("n",), np.float64),  # phase advance per policy step (rad)
    ("push_counter", ("n",), np.int64),  # policy steps since the last push
    ("push_steps", ("n",), np.int64),  # policy steps between pushes
))

COMMAND_PARAMS = (
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
)
"""The command, gait, push and start-state settings (``evaluate`` sets them anew)."""
TERRAIN = ("terrain_heights", "terrain_x0", "terrain_y0", "terrain_res")
"""The ground's height lookup: the arguments of :func:`unilab.tasks.core.terrain.terrain_height` after x, y."""

LocoArrays = namedtuple("LocoArrays", [
    *STATE.names,
    "origin",             # (n, 2) world x, y of each env's spawn point (its terrain tile's centre)
    "default_joint_pos",  # (J,)
    "action_bound",       # (A,) factors from the [-1, 1] action to the recipe's (holosoma's) action
    "pose_weights",       # (J,) the pose term's per-joint weights
    "ang_vel_scale", "joint_vel_scale", "lin_vel_scale",  # observation scales
    "qpos_adr", "dof_adr",  # (J,) the joints' addresses
    "feet", "foot_points", "termination_bodies",  # body ids (task.feet, task.foot_points, task.termination_bodies)
    *TERRAIN,
    *COMMAND_PARAMS,
    # the pool's live arrays
    "body_pos_w", "body_quat_w", "qpos", "qvel", "body_contact_force_w",
])
"""The arrays and numbers every row function may read (one flat namedtuple: Numba passes it as a struct; a tuple
nested in it is refused inside the driver's parallel loop)."""

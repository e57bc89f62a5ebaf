"""Velocity commands, the gait clock, pushes and the start state of G1 locomotion, per env (holosoma's
``LocomotionCommand``, ``LocomotionGait``, ``PushRandomizerState``/``apply_pushes`` and ``_reset_dofs``/
``_reset_root_states``).

Every draw comes from the env's own stream (:mod:`unilab.tasks.env_streams`), inside the task's parallel
driver. ``cmd`` is the plain tuple ``(command, phase, phase_offset, phase_dt, push_counter, push_steps)`` of
:data:`~.state.STEP_STATE`'s buffers (a driver writes through plain tuples only), ``cp`` the
:data:`~.state.CommandParams`.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from unilab.tasks.core.terrain import terrain_height
from unilab.tasks.env_streams import next_symmetric


@njit(cache=True, fastmath=False, inline="always")
def _uniform(streams, e, lo, hi):
    return lo + (hi - lo) * (0.5 * (next_symmetric(streams, e) + 1.0))


@njit(cache=True, fastmath=False, inline="always")
def _set_frequency(e, cmd, cp, streams):
    f = cp.freq_mean
    if not cp.evaluating:
        f = _uniform(streams, e, cp.freq_mean - cp.freq_width, cp.freq_mean + cp.freq_width)
    cmd[3][e] = 2.0 * np.pi * cp.dt * f


@njit(cache=True, fastmath=False, inline="always")
def draw_command(e, cmd, cp, streams):
    """A new command for env ``e`` (each component uniform in its range, then all zero with ``stand_prob``)
    and a new gait frequency, in holosoma's order."""
    command = cmd[0]
    for k in range(3):
        command[e, k] = _uniform(streams, e, cp.ranges[k, 0], cp.ranges[k, 1])
    _set_frequency(e, cmd, cp, streams)
    if 0.5 * (next_symmetric(streams, e) + 1.0) < cp.stand_prob:
        for k in range(3):
            command[e, k] = 0.0


@njit(cache=True, fastmath=False, inline="always")
def _push_interval(e, cp, streams):
    return int(_uniform(streams, e, cp.push_interval[0], cp.push_interval[1]) / cp.dt)


@njit(cache=True, fastmath=False, inline="always")
def start_env(k, e, origin, terrain, cmd, cp, streams, default_pos, qpos_adr, start_qpos, start_qvel, action,
              last_action):
    """Env ``e``'s start: base upright ``base_height`` over the ground at its origin + uniform
    +-``spawn_offset`` in x and y, joints at their default x uniform ``joint_scale``, at rest (into row ``k`` of
    ``start_qpos``/``start_qvel``); actions cleared; a fresh gait clock (random phase, legs half a period
    apart), command and push timer."""
    for m in range(start_qpos.shape[1]):
        start_qpos[k, m] = 0.0
    for m in range(start_qvel.shape[1]):
        start_qvel[k, m] = 0.0
    x = origin[e, 0] + cp.spawn_offset * next_symmetric(streams, e)
    y = origin[e, 1] + cp.spawn_offset * next_symmetric(streams, e)
    start_qpos[k, 0] = x
    start_qpos[k, 1] = y
    start_qpos[k, 2] = cp.base_height + terrain_height(x, y, terrain[0], terrain[1], terrain[2], terrain[3])
    start_qpos[k, 3] = 1.0
    for j in range(qpos_adr.shape[0]):
        start_qpos[k, qpos_adr[j]] = default_pos[j] * _uniform(streams, e, cp.joint_scale[0], cp.joint_scale[1])
    for j in range(action.shape[1]):
        action[e, j] = 0.0
        last_action[e, j] = 0.0
    phase, offset = cmd[1], cmd[2]
    if cp.evaluating:
        offset[e, 0], offset[e, 1] = 0.0, -np.pi
    elif cp.randomize_phase:
        offset[e, 0] = _uniform(streams, e, -np.pi, np.pi)
        offset[e, 1] = np.fmod(offset[e, 0] + 2.0 * np.pi, 2.0 * np.pi) - np.pi
    else:
        offset[e, 0], offset[e, 1] = 0.0, 0.0
    phase[e, 0], phase[e, 1] = offset[e, 0], offset[e, 1]
    if cp.evaluating:  # the evaluation's command stays
        _set_frequency(e, cmd, cp, streams)
    else:
        draw_command(e, cmd, cp, streams)
    cmd[4][e] = 0
    cmd[5][e] = _push_interval(e, cp, streams)


@njit(cache=True, fastmath=False, inline="always")
def command_step(e, length, cmd, cp, streams, qvel):
    """Env ``e`` after its ``length``-th step: the gait phase advances (both legs down at ``pi`` while the
    command is zero), a new command every ``resample_steps``, and a push when its timer is due (the base's
    world x, y velocity set, effective from the next physics step). Holosoma's step order: gait, command,
    push."""
    command, phase, offset, phase_dt = cmd[0], cmd[1], cmd[2], cmd[3]
    # each entry written once: a second, conditional write of the same entry was lost inside the parallel driver
    stand = np.sqrt(command[e, 0] * command[e, 0] + command[e, 1] * command[e, 1]) < 0.01 \
        and abs(command[e, 2]) < 0.01
    for k in range(2):
        phase[e, k] = np.pi if stand else np.fmod(length * phase_dt[e] + offset[e, k] + np.pi, 2.0 * np.pi) - np.pi
    if not cp.evaluating and length % cp.resample_steps == 0:
        draw_command(e, cmd, cp, streams)
    if cp.push:
        counter, steps = cmd[4], cmd[5]
        counter[e] += 1
        if counter[e] == steps[e]:
            counter[e] = 0
            steps[e] = _push_interval(e, cp, streams)
            qvel[e, 0] = cp.push_max[0] * next_symmetric(streams, e)
            qvel[e, 1] = cp.push_max[1] * next_symmetric(streams, e)

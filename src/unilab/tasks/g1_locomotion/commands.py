"""Velocity commands, the gait clock, pushes and the start state of G1 locomotion, per env (holosoma's
``LocomotionCommand``, ``LocomotionGait``, ``PushRandomizerState``/``apply_pushes`` and ``_reset_dofs``/
``_reset_root_states``).

Every draw comes from the env's own stream (``streams``, :mod:`unilab.tasks.env_streams`), inside the step
driver; the functions write the state rows they name (a driver writes through those only) and read the settings
(:data:`~.state.COMMAND_PARAMS`) from ``s``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from unilab.tasks.core.terms import Term
from unilab.tasks.core.terrain import terrain_height
from unilab.tasks.env_streams import next_symmetric


@njit(cache=True, fastmath=False, inline="always")
def _uniform(streams, e, lo, hi):
    return lo + (hi - lo) * (0.5 * (next_symmetric(streams, e) + 1.0))


@njit(cache=True, fastmath=False, inline="always")
def _set_frequency(e, phase_dt, s, streams):
    f = s.freq_mean
    if not s.evaluating:
        f = _uniform(streams, e, s.freq_mean - s.freq_width, s.freq_mean + s.freq_width)
    phase_dt[e] = 2.0 * np.pi * s.dt * f


@njit(cache=True, fastmath=False, inline="always")
def draw_command(e, command, phase_dt, s, streams):
    """A new command for env ``e`` (each component uniform in its range, then all zero with ``stand_prob``)
    and a new gait frequency, in holosoma's order."""
    for k in range(3):
        command[e, k] = _uniform(streams, e, s.ranges[k, 0], s.ranges[k, 1])
    _set_frequency(e, phase_dt, s, streams)
    if 0.5 * (next_symmetric(streams, e) + 1.0) < s.stand_prob:
        for k in range(3):
            command[e, k] = 0.0


@njit(cache=True, fastmath=False, inline="always")
def _push_interval(e, s, streams):
    return int(_uniform(streams, e, s.push_interval[0], s.push_interval[1]) / s.dt)


@njit(cache=True, fastmath=False, inline="always")
def start_episode(s, e, i, streams, start_qpos, start_qvel, action, last_action, command, phase, phase_offset,
                  phase_dt, push_counter, push_steps):
    """Env ``e``'s start: base upright ``base_height`` over the ground at its origin + uniform
    +-``spawn_offset`` in x and y, joints at their default x uniform ``joint_scale``, at rest (into row ``i`` of
    ``start_qpos``/``start_qvel``); actions cleared; a fresh gait clock (random phase, legs half a period
    apart), command and push timer."""
    for m in range(start_qpos.shape[1]):
        start_qpos[i, m] = 0.0
    for m in range(start_qvel.shape[1]):
        start_qvel[i, m] = 0.0
    x = s.origin[e, 0] + s.spawn_offset * next_symmetric(streams, e)
    y = s.origin[e, 1] + s.spawn_offset * next_symmetric(streams, e)
    start_qpos[i, 0] = x
    start_qpos[i, 1] = y
    start_qpos[i, 2] = s.base_height + terrain_height(x, y, s.terrain_heights, s.terrain_x0, s.terrain_y0,
                                                       s.terrain_res)
    start_qpos[i, 3] = 1.0
    for j in range(s.qpos_adr.shape[0]):
        start_qpos[i, s.qpos_adr[j]] = s.default_joint_pos[j] * _uniform(streams, e, s.joint_scale[0],
                                                                          s.joint_scale[1])
    for j in range(action.shape[1]):
        action[e, j] = 0.0
        last_action[e, j] = 0.0
    if s.evaluating:
        phase_offset[e, 0], phase_offset[e, 1] = 0.0, -np.pi
    elif s.randomize_phase:
        phase_offset[e, 0] = _uniform(streams, e, -np.pi, np.pi)
        phase_offset[e, 1] = np.fmod(phase_offset[e, 0] + 2.0 * np.pi, 2.0 * np.pi) - np.pi
    else:
        phase_offset[e, 0], phase_offset[e, 1] = 0.0, 0.0
    phase[e, 0], phase[e, 1] = phase_offset[e, 0], phase_offset[e, 1]
    if s.evaluating:  # the evaluation's command stays
        _set_frequency(e, phase_dt, s, streams)
    else:
        draw_command(e, command, phase_dt, s, streams)
    push_counter[e] = 0
    push_steps[e] = _push_interval(e, s, streams)


@njit(cache=True, fastmath=False, inline="always")
def command_step(s, e, lengths, streams, qvel, command, phase, phase_dt, push_counter, push_steps):
    """Env ``e`` after its ``lengths[e]``-th step: the gait phase advances (both legs down at ``pi`` while the
    command is zero), a new command every ``resample_steps``, and a push when its timer is due (the base's
    world x, y velocity set, effective from the next physics step). Holosoma's step order: gait, command,
    push."""
    length = lengths[e]
    # each entry written once: a second, conditional write of the same entry was lost inside the parallel driver
    stand = np.sqrt(command[e, 0] * command[e, 0] + command[e, 1] * command[e, 1]) < 0.01 \
        and abs(command[e, 2]) < 0.01
    for k in range(2):
        phase[e, k] = np.pi if stand else np.fmod(length * phase_dt[e] + s.phase_offset[e, k] + np.pi,
                                                  2.0 * np.pi) - np.pi
    if not s.evaluating and length % s.resample_steps == 0:
        draw_command(e, command, phase_dt, s, streams)
    if s.push:
        push_counter[e] += 1
        if push_counter[e] == push_steps[e]:
            push_counter[e] = 0
            push_steps[e] = _push_interval(e, s, streams)
            qvel[e, 0] = s.push_max[0] * next_symmetric(streams, e)
            qvel[e, 1] = s.push_max[1] * next_symmetric(streams, e)


START = (Term("episode", start_episode),)
"""The start row: a restarted env's start state and its command, gait clock and push timer, one stream's draws."""
STATEFUL = (Term("command", command_step),)
"""The command, gait clock and push timer advance every step (their reset is the start row's)."""

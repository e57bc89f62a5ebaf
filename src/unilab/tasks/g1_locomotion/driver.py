"""A step's per-env host work of G1 locomotion in one parallel region, compiled from a template and the term
tables (as :mod:`unilab.tasks.g1_motion_tracking.step_driver`):

    START      (a restart) the env's start state into the ``start_*`` rows, gait clock, command, push timer
    GATHER     its robot state (``observations.gather_env``)
    COMMAND    its gait phase, command resampling and push (``commands.command_step``)
    REWARDS    its reward terms (``REWARD_TERMS``) and their weighted sum
    TERMINATE  its conditions (``TERMINATIONS``), time-out, done semantics and last_action, info columns
    OBSERVE    its observation pieces (``OBS_PIECES``), noise, clip, float32 rows
    FINALS     if it is done: its observations into the ``final_*`` rows, before its restart overwrites them

A step runs GATHER..FINALS; a restart runs START, then (after the pool has taken the start state) GATHER |
OBSERVE. As in holosoma, the command and gait advance before rewards and terminations, and the observation shows
the state they scored.
"""

from __future__ import annotations

from collections.abc import Callable

from unilab.tasks.core.terms import DriverSource, compile_driver, driver_source
from unilab.tasks.g1_locomotion.observations import OBS_PIECES
from unilab.tasks.g1_locomotion.rewards import REWARD_TERMS
from unilab.tasks.g1_locomotion.terminations import TERMINATIONS

START, GATHER, COMMAND, REWARDS, TERMINATE, OBSERVE, FINALS = 1, 2, 4, 8, 16, 32, 64
STEP = GATHER | COMMAND | REWARDS | TERMINATE | OBSERVE | FINALS
RESTART = GATHER | OBSERVE
# the benchmark's sub-phases: one stage each, in step order
SPLIT = (("gather", GATHER | COMMAND), ("rewards", REWARDS), ("terminations", TERMINATE),
         ("observations", OBSERVE | FINALS))

_TEMPLATE = '''
from unilab.sim.work_claims import LEAST_BYTES, claimed, new_counter, num_chunks
from unilab.tasks.core.kernels import (any_condition, any_nonzero, copy_final_obs, info_columns, settle_step,
                                      weighted_sum, write_obs)
from unilab.tasks.g1_locomotion.commands import command_step, start_env
from unilab.tasks.g1_locomotion.driver import COMMAND, FINALS, GATHER, OBSERVE, REWARDS, START, TERMINATE
from unilab.tasks.g1_locomotion.observations import gather_env


@njit(cache=True, parallel=True, fastmath=False)
def loco_driver(stages, s, rows, pool_state, index, gathered, terrain, cmd, cp, streams, start, params, weights,
                offs, noise_scale, noise_streams, lengths, returns, max_steps, bad, terms, reward, conds,
                failed, out_reward, out_terminated, out_truncated, done, policy, critic, final_policy, final_critic,
                terms_info, conds_info, obs_clip):
    start_qpos, start_qvel, default_pos, qpos_adr, action, last_action = start
    qvel = pool_state[3]
    n = rows.shape[0]
    use_noise = any_nonzero(noise_scale)
    # chunks are claimed, not split statically (unilab.sim.work_claims); at least LEAST_BYTES envs, as the info
    # rows (conds_info: one byte per env) must not share cache lines between threads
    counter = new_counter()
    for _ in prange(num_chunks(n, LEAST_BYTES)):
        row = np.empty(critic.shape[1])
        for i in claimed(counter, n, LEAST_BYTES):
            e = rows[i]
            if stages & START:
                start_env(i, e, s.origin, terrain, cmd, cp, streams, default_pos, qpos_adr, start_qpos,
                          start_qvel, action, last_action)
            if stages & GATHER:
                gather_env(e, pool_state, index, gathered, terrain)
            if stages & COMMAND:
                command_step(e, lengths[e], cmd, cp, streams, qvel)
            if stages & REWARDS:
                {rewards}
                reward[e] = weighted_sum(terms, e, weights)
            if stages & TERMINATE:
                {terminations}
                failed[e] = any_condition(conds, e)
                done[e] = settle_step(e, failed[e], lengths[e] >= max_steps, bad, reward, returns, terms,
                                      action, last_action, out_reward, out_terminated, out_truncated)
                info_columns(e, terms, conds, terms_info, conds_info)
            if stages & OBSERVE:
                {observations}
                write_obs(e, row, noise_scale, use_noise, noise_streams, obs_clip, policy, critic)
            if stages & FINALS and done[e]:
                copy_final_obs(e, policy, critic, final_policy, final_critic)
'''

def loco_driver_source() -> DriverSource:
    """The driver's source as compiled."""
    return driver_source(_TEMPLATE, {"rewards": ("terms[e, {i}] = {call}", REWARD_TERMS),
                                     "terminations": ("conds[e, {i}] = {call}", TERMINATIONS),
                                     "observations": ("{call}", OBS_PIECES)},
                         {"s": "s", "e": "e", "row": "row", "o": "offs[{i}]"})


def loco_driver() -> Callable:
    """The compiled driver (see the module doc; arguments: the template)."""
    return compile_driver(loco_driver_source(), "loco_driver")

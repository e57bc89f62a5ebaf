"""A step's per-env host work in one parallel region, compiled from a template and the term tables.

No env's step depends on another env's, so one ``prange`` region over envs runs every stage of an env's step back
to back (its data stays in cache), selected by the ``stages`` bit mask; threads claim chunks of envs as they come
free (:mod:`unilab.sim.work_claims`: a late worker takes fewer, none waits for it):

    GATHER     its reference row and robot state (``observations.gather_env``)
    CLEAR      (a restart) its contact history emptied
    REWARDS    its contact history updated from the step's contact forces, its reward terms (``REWARD_TERMS``)
               and their weighted sum
    TERMINATE  its conditions (``TERMINATIONS``), time-out, done semantics and last_action
               (``terminations.step_tail``), and its info columns
    OBSERVE    its observation pieces (the layout's), noise, clip, float32 rows
    FINALS     if it is done: its observations into the ``final_*`` rows, before its restart overwrites them

``update_state`` runs every stage but CLEAR; a restart runs GATHER | CLEAR | OBSERVE on the restarted rows.

Rewards and terminations score the robot against the env's frame (``ref_index``), the observation shows the next
(``obs_index``, clamped into the clip): the frame the next step's reward scores, as holosoma's motion command
advances its clock after the reward and before the observation.

Why one region: each region wakes the sleeping workers (passive OpenMP, :mod:`unilab.sim.numba_threads`) and waits
for the slowest, a fork/join whose cost grows with the thread count while the work per thread shrinks; the seven
regions a step would otherwise have (gather, rewards, terminations/tail, observations, info columns, two final
observations) are one here. Running the stages one at a time (the benchmark's sub-phases) is the same code on the
same arrays, so bit-identical (tests/test_g1_parallel.py).

The driver reads through the ``TaskArrays`` namedtuple ``s`` but writes only through explicit arguments or plain
tuples: Numba 0.68's parfor silently drops writes through a namedtuple's array members inside ``prange`` (plain
tuples are fine).
"""

from __future__ import annotations

from collections.abc import Callable

from unilab.tasks.core.observations import PieceLayout
from unilab.tasks.core.terms import DriverSource, compile_driver, driver_source
from unilab.tasks.g1_motion_tracking.rewards import REWARD_TERMS
from unilab.tasks.g1_motion_tracking.terminations import TERMINATIONS

GATHER, REWARDS, TERMINATE, OBSERVE, FINALS, CLEAR = 1, 2, 4, 8, 16, 32
STEP = GATHER | REWARDS | TERMINATE | OBSERVE | FINALS
RESTART = GATHER | CLEAR | OBSERVE
# the benchmark's sub-phases: one stage each, in step order (FINALS goes with the observations)
SPLIT = (("gather", GATHER), ("rewards", REWARDS), ("terminations", TERMINATE), ("observations", OBSERVE | FINALS))

_TEMPLATE = '''
from unilab.sim.work_claims import LEAST_BYTES, claimed, new_counter, num_chunks
from unilab.tasks.core.kernels import any_condition, any_nonzero, copy_final_obs, info_columns, weighted_sum, write_obs
from unilab.tasks.g1_motion_tracking.observations import gather_env
from unilab.tasks.g1_motion_tracking.rewards import clear_contact_age, update_contact_age
from unilab.tasks.g1_motion_tracking.step_driver import CLEAR, FINALS, GATHER, OBSERVE, REWARDS, TERMINATE
from unilab.tasks.g1_motion_tracking.terminations import step_tail


@njit(cache=True, parallel=True, fastmath=False)
def step_driver(stages, s, rows, lookup, pool_state, index, gathered, params, weights, offs, noise_scale,
                noise_streams, lengths, returns, max_steps, bad, action, last_action, terms, reward, conds, failed,
                out_reward, out_terminated, out_truncated, done, policy, critic, final_policy, final_critic,
                terms_info, conds_info, contacts, obs_clip):
    clip, frame, clip_offsets, num_frames = lookup
    contact_force, contact_ids, contact_threshold, contact_age = contacts
    n = rows.shape[0]
    use_noise = any_nonzero(noise_scale)
    # chunks are claimed, not split statically (unilab.sim.work_claims); at least LEAST_BYTES envs, as the info rows
    # (conds_info: one byte per env) must not share cache lines between threads
    counter = new_counter()
    for _ in prange(num_chunks(n, LEAST_BYTES)):
        row = np.empty(critic.shape[1])
        for i in claimed(counter, n, LEAST_BYTES):
            e = rows[i]
            if stages & GATHER:
                gather_env(e, clip, frame, clip_offsets, num_frames, pool_state, index, gathered)
            if stages & CLEAR:
                clear_contact_age(e, contact_age)
            if stages & REWARDS:
                update_contact_age(e, contact_force, contact_ids, contact_threshold, contact_age)
                {rewards}
                reward[e] = weighted_sum(terms, e, weights)
            if stages & TERMINATE:
                {terminations}
                failed[e] = any_condition(conds, e)
                done[e] = step_tail(e, failed[e], frame, clip, num_frames, lengths, max_steps, bad, reward,
                                    returns, terms, action, last_action, out_reward, out_terminated,
                                    out_truncated)
                info_columns(e, terms, conds, terms_info, conds_info)
            if stages & OBSERVE:
                {observations}
                write_obs(e, row, noise_scale, use_noise, noise_streams, obs_clip, policy, critic)
            if stages & FINALS and done[e]:
                copy_final_obs(e, policy, critic, final_policy, final_critic)
'''


def step_driver_source(layout: PieceLayout) -> DriverSource:
    """The driver's source for ``layout``'s observation pieces (``unilab-bench env-phases --show-driver`` prints it)."""
    return driver_source(_TEMPLATE, {"rewards": ("terms[e, {i}] = {call}", REWARD_TERMS),
                                     "terminations": ("conds[e, {i}] = {call}", TERMINATIONS),
                                     "observations": ("{call}", tuple(layout.pieces))},
                         {"s": "s", "e": "e", "row": "row", "o": "offs[{i}]"})


def step_driver(layout: PieceLayout) -> Callable:
    """The driver for ``layout``'s observation pieces (see the module doc; arguments: the template)."""
    return compile_driver(step_driver_source(layout), "step_driver")

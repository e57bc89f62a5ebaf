"""The one step driver of every joint-target task: its per-env host work in one parallel region, compiled from a
template here and the task's rows (:class:`DriverRows`).

No env's step depends on another env's, so one ``prange`` region over envs runs every stage of an env's step back
to back (its data stays in cache), selected by the ``stages`` bit mask; threads claim chunks of envs as they come
free (:mod:`unilab.sim.work_claims`: a late worker takes fewer, none waits for it):

    START      (a restart, before the pool takes the start state) the ``start`` rows: a start state drawn per env
    GATHER     the ``gather`` rows: state rows from the pool (robot state, a reference frame)
    RESET      (a restart) each stateful row's reset
    UPDATE     each stateful row's update (after the gather: a contact history, a command and gait clock)
    REWARDS    the reward rows and their weighted sum
    TERMINATE  the condition rows, the time-out (``max_steps`` or a ``timeouts`` row), done semantics and
               last_action (:func:`~.kernels.settle_step`), the info columns
    OBSERVE    the observation pieces (the layout's), noise, clip, float32 rows
    FINALS     if the env is done: its observations into the ``final_*`` rows, before its restart overwrites them

A step runs :data:`STEP`; a restart runs START (when the task draws its start state in the driver), then, after
the pool has taken the start state, :data:`RESTART`.

Why one region: each region wakes the sleeping workers (passive OpenMP, :mod:`unilab.sim.numba_threads`) and waits
for the slowest, a fork/join whose cost grows with the thread count while the work per thread shrinks; the seven
regions a step would otherwise have (gather, rewards, terminations and tail, observations, info columns, two final
observations) are one here. Running the stages one at a time (the benchmark's sub-phases, :data:`SPLIT`) is the
same code on the same arrays, so bit-identical (tests/test_g1_parallel.py).

A row function receives its arguments by name (:mod:`.terms`): ``s`` (the task's read-only struct), ``e`` (the env),
``i`` (its place in ``rows``: a START row's index into the start-state buffers), ``row`` and ``o`` (an observation
piece's scratch row and offset), ``lengths`` (the episode lengths), any state row or array of ``DriverRows.writes``
(the arrays it writes), and config numbers. Writes go through those names only: Numba 0.68's parfor silently drops
writes through a namedtuple's array members inside ``prange`` (``s``), while the plain tuple ``w`` unpacked at the
top works.
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass, replace

from unilab.tasks.core.state import StateSpec
from unilab.tasks.core.terms import DriverSource, Term, driver_source

START, GATHER, RESET, UPDATE, REWARDS, TERMINATE, OBSERVE, FINALS = 1, 2, 4, 8, 16, 32, 64, 128
STEP = GATHER | UPDATE | REWARDS | TERMINATE | OBSERVE | FINALS
RESTART = GATHER | RESET | OBSERVE
SPLIT = (("gather", GATHER | UPDATE), ("rewards", REWARDS), ("terminations", TERMINATE),
         ("observations", OBSERVE | FINALS))
"""The benchmark's sub-phases of ``update_state``: its stages one region each, in step order."""

# the state rows the template itself reads and writes (the step's end)
REQUIRED_STATE = ("action", "last_action")


@dataclass(frozen=True)
class DriverRows:
    """A task's per-env state and rows, by stage (see the module doc)."""

    state: StateSpec
    """Per-env state rows (``action`` and ``last_action`` among them); every row function may write one by name."""
    writes: tuple[str, ...] = ()
    """Other arrays row functions write, by name (``DriverEnv._compile_driver``'s: random streams, a pool array)."""
    start: tuple[Term, ...] = ()
    gather: tuple[Term, ...] = ()
    stateful: tuple[Term, ...] = ()
    """Stateful rows: ``func`` updates the state every step, ``reset`` (if any) clears it on a restart."""
    rewards: tuple[Term, ...] = ()
    terminations: tuple[Term, ...] = ()
    timeouts: tuple[Term, ...] = ()
    """Conditions that end an episode as a time-out (truncated), besides ``max_steps``."""

    @property
    def written(self) -> tuple[str, ...]:
        """The names of the arrays in the plain tuple ``w``, in order."""
        return (*self.state.names, *self.writes)


TEMPLATE = '''
from unilab.sim.work_claims import LEAST_BYTES, LEAST_ROWS, claimed, new_counter, num_chunks
from unilab.tasks.core.driver import FINALS, GATHER, OBSERVE, RESET, REWARDS, START, TERMINATE, UPDATE
from unilab.tasks.core.kernels import (any_condition, any_nonzero, copy_final_obs, info_columns, settle_step,
                                      weighted_sum, write_obs)


@njit(cache=True, parallel=True, fastmath=False)
def step_driver(stages, rows, s, w, params, weights, book, scratch, obs, out):
    {unpack}
    lengths, returns, max_steps, bad = book
    terms, reward, conds, failed, done = scratch
    offs, noise_scale, noise_streams, obs_clip = obs
    out_reward, out_terminated, out_truncated, policy, critic, final_policy, final_critic, terms_info, conds_info = out
    n = rows.shape[0]
    use_noise = any_nonzero(noise_scale)
    # chunks are claimed, not split statically (unilab.sim.work_claims). Over every env (a step) at least LEAST_BYTES
    # envs, as byte-per-env rows (conds_info) must not share cache lines between threads; a restart's few scattered
    # envs share no line that way, and chunks of LEAST_ROWS let a worker that wakes late take a share of them
    least = LEAST_BYTES if n == done.shape[0] else LEAST_ROWS
    counter = new_counter()
    for _ in prange(num_chunks(n, least)):
        row = np.empty(critic.shape[1])
        for i in claimed(counter, n, least):
            e = rows[i]
            if stages & START:
                {start}
            if stages & GATHER:
                {gather}
            if stages & RESET:
                {reset}
            if stages & UPDATE:
                {update}
            if stages & REWARDS:
                {rewards}
                reward[e] = weighted_sum(terms, e, weights)
            if stages & TERMINATE:
                {terminations}
                failed[e] = any_condition(conds, e)
                timeout = lengths[e] >= max_steps
                {timeouts}
                done[e] = settle_step(e, failed[e], timeout, bad, reward, returns, terms, action, last_action,
                                      out_reward, out_terminated, out_truncated)
                info_columns(e, terms, conds, terms_info, conds_info)
            if stages & OBSERVE:
                {observations}
                write_obs(e, row, noise_scale, use_noise, noise_streams, obs_clip, policy, critic)
            if stages & FINALS and done[e]:
                copy_final_obs(e, policy, critic, final_policy, final_critic)
'''

# every name the template binds or reads (a state row of one of these names would shadow it)
_TEMPLATE_NAMES = {node.id if isinstance(node, ast.Name) else node.arg
                   for node in ast.walk(ast.parse(re.sub(r"\{\w+\}", "pass", TEMPLATE)))
                   if isinstance(node, (ast.Name, ast.arg))}


def step_driver_source(rows: DriverRows, pieces: tuple[Term, ...]) -> DriverSource:
    """The step driver of ``rows`` and the observation ``pieces`` (``unilab-bench env-phases --show-driver``
    prints its text); ValueError for a task without the required state rows or a name the template holds."""
    written = rows.written
    missing = [name for name in REQUIRED_STATE if name not in rows.state.names]
    taken = sorted(set(written) & (_TEMPLATE_NAMES - set(REQUIRED_STATE)))
    if missing or taken:
        raise ValueError(f"a driver task needs state rows {REQUIRED_STATE} (missing: {missing}) and no state or "
                         f"written array named like the template's own ({taken})")
    unpack = textwrap.fill(", ".join(written), 100, subsequent_indent="    " * 2)
    template = TEMPLATE.replace("{unpack}", f"({unpack}) = w" if len(written) > 1 else f"{written[0]}, = w")
    names = {"s": "s", "e": "e", "i": "i", "row": "row", "o": "offs[{i}]", "lengths": "lengths",
             **{name: name for name in written}}
    resets = tuple(replace(t, func=t.reset) for t in rows.stateful if t.reset is not None)
    return driver_source(template, {
        "start": ("{call}", rows.start), "gather": ("{call}", rows.gather), "reset": ("{call}", resets),
        "update": ("{call}", rows.stateful), "rewards": ("terms[e, {i}] = {call}", rows.rewards),
        "terminations": ("conds[e, {i}] = {call}", rows.terminations),
        "timeouts": ("timeout = timeout or {call}", rows.timeouts), "observations": ("{call}", pieces),
    }, names)

"""Dynamic work sharing in a Numba ``prange`` region: threads claim chunks of envs from one atomic counter.

Numba's OpenMP layer splits a ``prange`` statically (thread ``k`` gets the ``k``-th contiguous block: its ``omp for``
has no schedule clause, and ``numba.set_parallel_chunksize`` only cuts the blocks smaller), so a region lasts as long as
its slowest thread: between two physics steps, a worker that was asleep wakes late (on a VM, tens of microseconds to
over a millisecond for a parked vCPU) and may start on cold caches. Measured in the G1 step loop at 4096 envs on 2
cores: with the static split the update_state driver's worker spent up to 25 % more CPU on its half than the caller,
which then waited (8.1 ms at 1.75 cores); with claims it took 6.6 ms at 1.96 cores. 64 workers waking in turn lose more.

With claims every thread, the caller first, takes the next unclaimed chunk until none is left, so a late or slow thread
takes fewer. A chunk holds the same envs whichever thread runs it and every write is per env: results stay
bit-identical to a serial loop. The pattern (``n`` items, chunks of at least ``least``)::

    counter = new_counter()
    for _ in prange(num_chunks(n, least)):  # no more participants than chunks
        for i in claimed(counter, n, least):
            ...

:func:`claimed` holds the claim loop once as a Numba generator, which loads from Numba's cache like any function (a
per-env body passed to one shared kernel as an argument would not: its type names the function object, which differs
in every process, so every process would compile every kernel again). Each thread's first iteration drains the
counter; its others find it empty at once (one atomic add each).

``n`` items are cut into about :data:`CHUNKS` chunks (four per thread at 64 threads, so others can take a late thread's
share), none smaller than ``least``: where chunks meet two threads may write one cache line, and a kernel writing a
byte per env into the rows of a ``(k, num_envs)`` array shares a line between chunks of fewer than 64 envs. Measured
(G1 step driver, TERMINATE stage, whose info rows are such arrays; 4096 envs, 2 cores): 1.42 ms with chunks of 16 envs,
0.98 ms with 32, 0.54 ms with 64.

:func:`new_counter`, not ``np.zeros(1)``: in a ``parallel=True`` function Numba turns ``np.zeros``/``np.ones``, array
expressions and ``.sum()`` into parallel loops of their own, each one more fork/join of the team (``unilab-bench
env-phases`` shows it as fewer cores used).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

LEAST_ROWS = 8
"""Smallest chunk for a kernel that writes whole rows of its envs (rows of 8 bytes or more; a (num_envs,)
float64 vector: 8 envs fill a 64-byte cache line)."""
LEAST_BYTES = 64
"""Smallest chunk for a kernel that writes a byte per env (bool flags, ``(k, num_envs)`` bool rows)."""


@intrinsic
def _fetch_add_one(_typingctx, counter):
    """Atomically ``counter[0] += 1``; returns the value before (an LLVM ``atomicrmw add``).

    Monotonic ordering: each value is handed out exactly once; the region's closing barrier, not the counter, publishes
    what the chunks wrote.
    """
    if not (isinstance(counter, types.Array) and counter.dtype == types.int64 and counter.ndim == 1):
        return None

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [context.get_constant(types.intp, 0)])
        return builder.atomic_rmw("add", ptr, context.get_constant(types.int64, 1), "monotonic")

    return types.int64(counter), codegen


CHUNKS = 256
"""About how many chunks a region's items are cut into (see the module doc)."""


@njit(cache=True, inline="always")
def new_counter():
    """A zeroed ``(1,)`` int64 counter for :func:`claim`, made without a parallel loop (see the module doc)."""
    counter = np.empty(1, np.int64)
    counter[0] = 0
    return counter


@njit(cache=True, inline="always")
def chunk_size(n, least):
    """Items per chunk for ``n`` items: ``ceil(n / CHUNKS)``, at least ``least`` (>= 1)."""
    return max(least, (n + CHUNKS - 1) // CHUNKS)


@njit(cache=True, inline="always")
def num_chunks(n, least):
    """How many chunks hold ``n`` items (the ``prange`` length of the pattern); chunk ``c`` starts at
    ``c * chunk_size(n, least)``."""
    size = chunk_size(n, least)
    return (n + size - 1) // size


@njit(cache=True, inline="always")
def claim(counter, n, least):
    """The next unclaimed chunk of ``range(n)`` as ``(lo, hi)``; ``lo >= hi`` once all are taken. ``counter``: a
    ``(1,)`` int64 array, zero when the region starts, shared by its threads; ``least``: the smallest chunk."""
    size = chunk_size(n, least)
    c = _fetch_add_one(counter)
    lo = min(c * size, n)
    return lo, min(lo + size, n)


@njit  # not cached: Numba 0.68 loads a cached generator without registering it for callers compiled later
def claimed(counter, n, least):
    """The items of ``range(n)`` in the chunks this thread claims, one after another, until none is left
    (the loop of the module doc's pattern; ``counter`` and ``least`` as in :func:`claim`)."""
    while True:
        lo, hi = claim(counter, n, least)
        if lo >= hi:
            return
        while lo < hi:  # not `yield from range(...)`: Numba compiles no `yield from`
            yield lo
            lo += 1


@njit(cache=True, parallel=True, fastmath=False)
def copy_rows_at(ids, src, dst):
    """``dst[ids] = src[ids]`` for ``(num_envs, k)`` arrays, in claimed chunks of rows (a fancy copy is serial)."""
    n = ids.shape[0]
    counter = new_counter()
    for _ in prange(num_chunks(n, LEAST_ROWS)):
        for i in claimed(counter, n, LEAST_ROWS):
            e = ids[i]
            for j in range(src.shape[1]):
                dst[e, j] = src[e, j]

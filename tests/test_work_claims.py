"""Chunks claimed from an atomic counter inside a prange region (unilab.sim.work_claims)."""

from __future__ import annotations

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit, prange

from unilab.sim.work_claims import CHUNKS, chunk_size, claimed, new_counter, num_chunks


@njit(parallel=True, cache=True)
def _cover(n, least, hits, owner, slow_work):
    """The module's pattern: ``hits[i]`` counts item i's visits, ``owner[c]`` is chunk c's thread;
    the thread that claims chunk 0 first does ``slow_work`` iterations of busy work."""
    counter = new_counter()
    for _ in prange(num_chunks(n, least)):
        for i in claimed(counter, n, least):
            owner[i // chunk_size(n, least)] = numba.get_thread_id()
            if i == 0:
                x = 0.0
                for k in range(slow_work):
                    x += np.sqrt(k + x * 1e-9)
                if x < 0.0:
                    hits[0] += 1  # never: keeps the busy work from being optimised away
            hits[i] += 1


def _run(n: int, least: int, threads: int, slow_work: int = 0) -> tuple[np.ndarray, np.ndarray]:
    hits = np.zeros(n, dtype=np.int64)
    owner = np.full(num_chunks(n, least), -1, dtype=np.int64)
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(threads)
        _cover(n, least, hits, owner, slow_work)
    finally:
        numba.set_num_threads(before)
    return hits, owner


@given(st.integers(0, 20 * CHUNKS), st.sampled_from([1, 8, 64]), st.sampled_from([1, 2]))
@settings(max_examples=60, deadline=None)
def test_every_item_is_visited_once(n, least, threads):
    threads = min(threads, numba.config.NUMBA_NUM_THREADS)
    hits, owner = _run(n, least, threads)
    size = chunk_size(n, least)
    assert size >= least and owner.size == -(-n // size) and (owner.size <= CHUNKS or size == least)
    np.testing.assert_array_equal(hits, np.ones(n, dtype=np.int64))
    assert (owner >= 0).all() and (owner < threads).all()  # every chunk claimed, by a thread of the team


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs two Numba threads")
def test_a_slow_thread_leaves_the_other_chunks_to_the_others():
    """A static split would give the slow thread a fixed half of the chunks: with claims it keeps only chunk 0."""
    n = 4 * CHUNKS
    hits, owner = _run(n, 1, 2, slow_work=30_000_000)  # ~0.1 s of busy work in chunk 0
    np.testing.assert_array_equal(hits, np.ones(n, dtype=np.int64))
    assert (owner[1:] != owner[0]).all(), owner

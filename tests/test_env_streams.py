"""Per-env random streams (SplitMix64) drawn inside parallel kernels."""

from __future__ import annotations

import numba
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_helpers import fill_symmetric  # tests/ is on the path (pytest's rootdir)

from unilab.tasks.env_streams import env_streams

_MASK = (1 << 64) - 1


def _splitmix64(state: int) -> tuple[int, int]:
    """Steele, Lea & Flood's SplitMix64 in Python integers: (new state, output)."""
    state = (state + 0x9E3779B97F4A7C15) & _MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return state, z ^ (z >> 31)


@given(st.integers(0, _MASK), st.integers(1, 6))
@settings(max_examples=50, deadline=None)
def test_draws_are_splitmix64_top_53_bits(start, count):
    states = np.array([start], dtype=np.uint64)
    out = np.empty((1, count))
    fill_symmetric(states, np.zeros(1, dtype=np.int64), out)
    s = start
    for m in range(count):
        s, z = _splitmix64(s)
        assert out[0, m] == 2.0 * ((z >> 11) / 2.0**53) - 1.0
    assert int(states[0]) == s  # the state advanced by exactly the draws made


def test_an_envs_draws_depend_on_its_own_history_only():
    """The same values whichever rows share the call and however many threads run it."""
    states = env_streams(3, 50, tag=1)
    whole = np.empty((50, 9))
    fill_symmetric(states.copy(), np.arange(50), whole)
    rows = np.array([40, 2, 17])
    part = np.empty((3, 9))
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        fill_symmetric(states.copy(), rows, part)
    finally:
        numba.set_num_threads(before)
    np.testing.assert_array_equal(part, whole[rows])
    # drawing for some envs leaves the others' streams where they were
    s = states.copy()
    fill_symmetric(s, rows, part)
    untouched = np.setdiff1d(np.arange(50), rows)
    np.testing.assert_array_equal(s[untouched], states[untouched])
    assert (s[rows] != states[rows]).all()


def test_streams_are_reproducible_distinct_and_uniform():
    a, b = env_streams(11, 256, tag=1), env_streams(11, 256, tag=1)
    np.testing.assert_array_equal(a, b)
    assert len(set(a.tolist())) == 256
    assert not np.array_equal(a, env_streams(12, 256, tag=1))
    assert not np.array_equal(a, env_streams(11, 256, tag=2))
    out = np.empty((256, 400))
    fill_symmetric(a, np.arange(256), out)
    assert out.min() >= -1.0 and out.max() < 1.0
    assert abs(out.mean()) < 0.01  # 102400 draws: standard error 0.0018
    assert abs(out.var() - 1 / 3) < 0.01
    counts, _ = np.histogram(out, bins=10, range=(-1, 1))
    assert counts.min() > 0.95 * out.size / 10 and counts.max() < 1.05 * out.size / 10
    # neighbouring envs are not correlated
    assert abs(np.corrcoef(out[:-1].ravel(), out[1:].ravel())[0, 1]) < 0.02

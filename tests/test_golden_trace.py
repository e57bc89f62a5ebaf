"""The tiny robot's seeded rollout equals its stored golden trace (tests/golden_trace.py says how to renew it).

Compared with a tolerance: the same code on another CPU (Intel or AMD, other SIMD paths in MuJoCo and
Numba) may round the last bits differently; a changed term is off by far more.
"""

from __future__ import annotations

import numpy as np
from golden_trace import GOLDEN, record_trace


def test_the_rollout_equals_the_golden_trace(tmp_path):
    assert GOLDEN.is_file(), "missing golden trace: run `python tests/golden_trace.py`"
    with np.load(GOLDEN) as stored:
        want = {name: stored[name] for name in stored.files}
    got = record_trace(tmp_path)
    assert sorted(got) == sorted(want), "the env's outputs or term names changed: regenerate the trace"
    done = want["terminated"] | want["truncated"]
    assert want["terminated"].any() and want["truncated"].any() and done.sum() < done.size // 2  # a varied trace
    for name in sorted(want):
        if want[name].dtype == bool:
            np.testing.assert_array_equal(got[name], want[name], err_msg=name)
        else:
            np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-5, err_msg=name)

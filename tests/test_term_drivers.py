"""Drivers compiled from a template and term rows: in memory, cached by Numba, keyed by what they reach."""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit

from unilab.tasks.core.terms import Term, _reached_modules, compile_driver, driver_source
from unilab.tasks.g1_motion_tracking.config import MotionTrackingConfig
from unilab.tasks.g1_motion_tracking.observations import obs_layout
from unilab.tasks.g1_motion_tracking.step_driver import step_driver_source

TEMPLATE = '''
@njit(cache=True)
def run(x, params, out):
    for e in range(x.shape[0]):
        {ops}
'''


@njit(inline="always")
def scale(x, e, p):
    return x[e] * p


@njit(inline="always")
def shift(x, e, p):
    return x[e] + p


def test_a_driver_calls_each_row_by_name_and_computes_the_table(tmp_path, monkeypatch):
    monkeypatch.setenv("UNILAB_CACHE", str(tmp_path))
    rows = (Term("scale", scale), Term("shift", shift))
    blocks = {"ops": ("out[e, {i}] = {f}(x, e, params[{i}])", rows)}
    source = driver_source(TEMPLATE, blocks)
    assert "out[e, 0] = ops_scale(x, e, params[0])" in source
    assert "out[e, 1] = ops_shift(x, e, params[1])" in source
    run = compile_driver(TEMPLATE, blocks, "run")
    x, out = np.arange(5.0), np.zeros((5, 2))
    run(x, np.array([3.0, -1.0]), out)
    np.testing.assert_array_equal(out, np.stack([3.0 * x, x - 1.0], axis=1))
    assert compile_driver(TEMPLATE, blocks, "run") is run  # once per process per source
    # Numba's cache holds the compiled code; the source itself never goes to disk
    files = [p.name for p in (tmp_path / "numba_drivers").iterdir()]
    assert any(f.endswith(".nbi") for f in files) and any(f.endswith(".nbc") for f in files)
    assert not any(f.endswith(".py") for f in files)


def test_two_functions_of_one_name_in_a_table_are_refused():
    @njit(inline="always")
    def scale(x, e, p):  # a second `scale`, defined elsewhere
        return x[e]

    rows = (Term("a", globals()["scale"]), Term("b", scale))
    with pytest.raises(ValueError, match="two ops functions named 'scale'"):
        driver_source(TEMPLATE, {"ops": ("out[e, {i}] = {f}(x, e, params[{i}])", rows)})


def test_the_cache_key_covers_every_module_the_step_driver_reaches():
    """An edit in any module whose jitted code the driver inlines must compile afresh: all are found by walking."""
    cfg = MotionTrackingConfig()
    reached = _reached_modules(step_driver_source(obs_layout(29, len(cfg.tracked_bodies), cfg.policy_obs)))
    for mod in ("unilab.sim.work_claims", "unilab.sim.quat", "unilab.tasks.env_streams",
                "unilab.tasks.g1_motion_tracking.motion", "unilab.tasks.g1_motion_tracking.rewards",
                "unilab.tasks.g1_motion_tracking.terminations", "unilab.tasks.g1_motion_tracking.observations",
                "unilab.tasks.g1_motion_tracking.step_driver"):
        assert mod in reached, mod


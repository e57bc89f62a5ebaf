"""Drivers compiled from a template and term rows: arguments by name, in memory, cached by Numba, keyed by what
they reach."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pytest
from numba import njit

from unilab.tasks.core.driver import step_driver_source
from unilab.tasks.core.state import StateSpec
from unilab.tasks.core.terms import Term, _reached_modules, compile_driver, driver_source
from unilab.tasks.g1_motion_tracking.config import MotionTrackingConfig
from unilab.tasks.g1_motion_tracking.env import MotionTrackingEnv
from unilab.tasks.g1_motion_tracking.observations import obs_layout

TEMPLATE = '''
@njit(cache=True)
def run(x, params, out):
    for e in range(x.shape[0]):
        {ops}
'''
NAMES = {"x": "x", "e": "e", "col": "{i}"}


@njit(inline="always")
def scale(x, e, factor):
    return x[e] * factor


@njit(inline="always")
def shift(x, e, col, offset, factor):
    return (x[e] + offset) * factor + col


@dataclass
class Section:
    offset: float = -1.0
    factor: float = 0.5
    gain: float = 3.0


@dataclass
class Config:
    ops: Section


def test_a_driver_calls_each_row_by_name_with_its_config_numbers(tmp_path, monkeypatch):
    monkeypatch.setenv("UNILAB_CACHE", str(tmp_path))
    rows = (Term("gain", scale), Term("shifted", shift, config="ops"))
    blocks = {"ops": ("out[e, {i}] = {call}", rows)}
    source = driver_source(TEMPLATE, blocks, NAMES)
    assert "out[e, 0] = ops_gain(x, e, factor=params[0])" in source.text
    assert "out[e, 1] = ops_shifted(x, e, 1, offset=params[1], factor=params[2])" in source.text
    # a section that is a number is the row's one parameter; a section with fields gives them by name
    assert source.params == (("ops.gain", "factor"), ("ops", "offset"), ("ops", "factor"))
    params = source.values(Config(Section()))
    np.testing.assert_array_equal(params, [3.0, -1.0, 0.5])
    run = compile_driver(source, "run")
    x, out = np.arange(5.0), np.zeros((5, 2))
    run(x, params, out)
    np.testing.assert_array_equal(out, np.stack([3.0 * x, (x - 1.0) * 0.5 + 1], axis=1))
    assert compile_driver(driver_source(TEMPLATE, blocks, NAMES), "run") is run  # once per process per source
    # Numba's cache holds the compiled code; the source itself never goes to disk
    files = [p.name for p in (tmp_path / "numba_drivers").iterdir()]
    assert any(f.endswith(".nbi") for f in files) and any(f.endswith(".nbc") for f in files)
    assert not any(f.endswith(".py") for f in files)


def test_a_missing_or_non_number_parameter_names_its_config_key():
    source = driver_source(TEMPLATE, {"ops": ("out[e, {i}] = {call}", (Term("shifted", shift, config="ops"),))},
                           NAMES)
    with pytest.raises(ValueError, match=r"task.ops.offset must be a number \(a term's parameter offset\), got None"):
        source.values(Config(None))
    with pytest.raises(ValueError, match="task.ops.factor must be a number"):
        source.values(Config(Section(factor="1")))


def test_two_rows_of_one_name_and_misplaced_parameters_are_refused():
    rows = (Term("a", scale), Term("a", shift))
    with pytest.raises(ValueError, match="two ops rows named 'a'"):
        driver_source(TEMPLATE, {"ops": ("out[e, {i}] = {call}", rows)}, NAMES)

    @njit(inline="always")
    def late(x, factor, e):
        return x[e]

    with pytest.raises(ValueError, match="parameter 'e' .* must come before its config parameters"):
        driver_source(TEMPLATE, {"ops": ("out[e, {i}] = {call}", (Term("late", late),))}, NAMES)


def test_the_cache_key_covers_every_module_the_step_driver_reaches():
    """An edit in any module whose jitted code the driver inlines must compile afresh: all are found by walking."""
    cfg = MotionTrackingConfig()
    layout = obs_layout(29, len(cfg.tracked_bodies), cfg.policy_obs)
    reached = _reached_modules(step_driver_source(MotionTrackingEnv.rows, layout.pieces).text)
    for mod in ("unilab.sim.work_claims", "unilab.sim.quat", "unilab.tasks.env_streams",
                "unilab.tasks.g1_motion_tracking.motion", "unilab.tasks.g1_motion_tracking.rewards",
                "unilab.tasks.g1_motion_tracking.terminations", "unilab.tasks.g1_motion_tracking.observations",
                "unilab.tasks.core.driver", "unilab.tasks.core.kernels", "unilab.tasks.core.contacts"):
        assert mod in reached, mod


def test_a_driver_task_needs_the_action_rows_and_names_of_its_own():
    rows = MotionTrackingEnv.rows
    pieces = obs_layout(2, 3).pieces
    with pytest.raises(ValueError, match=r"missing: \['last_action'\]"):
        step_driver_source(replace(rows, state=StateSpec(tuple(r for r in rows.state.rows if r[0] != "last_action"))),
                           pieces)
    with pytest.raises(ValueError, match=r"template's own \(\['reward'\]\)"):
        step_driver_source(replace(rows, writes=("reward",)), pieces)
    # every row's line, by stage: a stateful row's update and its reset
    text = step_driver_source(rows, pieces).text
    assert "update_contact_age(s, e, contact_age, threshold=params[0])" in text
    assert "reset_contact_age(s, e, contact_age)" in text
    assert "timeout = timeout or timeouts_clip_end(s, e)" in text

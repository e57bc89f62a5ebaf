"""The divergence stop: one verdict for all ranks (none left waiting in an all-reduce)."""

from __future__ import annotations

import functools
import os

import numpy as np
from runtime_helpers import on_two_gloo_ranks

from unilab.runtime import distributed
from unilab.runtime.metrics import MetricsLogger, TrainingDiverged
from unilab.runtime.stats import counter_names
from unilab.telemetry.phase_timer import PhaseTimer

NUM_ENVS = 4
WINDOW = 4


def _logger(tmp_path, agree=None):
    names = counter_names([])
    counters = np.zeros(len(names))
    m = MetricsLogger(tmp_path, NUM_ENVS, names, [os.getpid()], enabled=False, log_interval=1,
                      max_bad_env_fraction=0.9, divergence_window=WINDOW, agree=agree)
    m.start(0, counters)
    return m, counters, names


def _collector_step(counters, names, bad_envs):
    """What the collector adds per env step: one iteration, ``bad_envs`` bad envs."""
    counters[names.index("iterations")] += 1
    counters[names.index("bad_envs")] += bad_envs


def _run_until_stop(m, counters, names, bad_envs, iterations):
    """Iterations of the learner loop; returns the iteration that raised and the message (or None, None)."""
    for it in range(1, iterations + 1):
        _collector_step(counters, names, bad_envs)
        try:
            m.step(it, PhaseTimer(), {})
        except TrainingDiverged as err:
            return it, str(err)
    return None, None


def test_one_rank_diverging_stops_the_others_at_the_same_iteration(tmp_path):
    asked = []

    def other_rank_diverged(flag):
        asked.append(flag)
        return len(asked) >= 3  # the other rank's verdict arrives at this rank's third log

    m, counters, names = _logger(tmp_path, agree=other_rank_diverged)
    it, msg = _run_until_stop(m, counters, names, bad_envs=0, iterations=50)
    assert it == 3 and "another rank" in msg
    assert asked == [False, False, False]  # this rank's own envs were fine


def test_every_rank_asks_at_every_log_even_with_no_collector_step(tmp_path):
    """A rank whose counters did not move in an interval still takes part, or the collective would hang."""
    asked = []
    m, counters, names = _logger(tmp_path, agree=lambda flag: asked.append(flag) or False)
    for it in range(1, 6):
        m.step(it, PhaseTimer(), {})  # no collector step in between
    assert asked == [False] * 5


def test_a_diverging_rank_reports_its_own_limit(tmp_path):
    m, counters, names = _logger(tmp_path, agree=lambda flag: flag)
    it, msg = _run_until_stop(m, counters, names, bad_envs=NUM_ENVS, iterations=50)
    assert it == WINDOW and "at least 90% of the envs were in a bad state" in msg


def _run_rank(tmp: str, rank: int) -> tuple:
    m, counters, names = _logger(os.path.join(tmp, str(rank)), agree=distributed.any_rank)
    # only rank 1's envs go bad; both must stop at the same iteration
    return _run_until_stop(m, counters, names, bad_envs=NUM_ENVS if rank == 1 else 0, iterations=40)


def test_two_gloo_ranks_stop_together_when_one_diverges(tmp_path):
    (it0, msg0), (it1, msg1) = on_two_gloo_ranks(functools.partial(_run_rank, str(tmp_path)))
    assert it0 == it1 == WINDOW  # bad from the first interval on: WINDOW iterations
    assert "another rank" in msg0 and "bad state" in msg1

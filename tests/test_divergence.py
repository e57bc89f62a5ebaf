"""The divergence stop: one verdict for all ranks (none left waiting in an all-reduce)."""

from __future__ import annotations

import os

import numpy as np
import torch.distributed as dist
import torch.multiprocessing as mp
from runtime_helpers import free_port

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


def _rank_main(rank, port, tmp, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        m, counters, names = _logger(os.path.join(tmp, str(rank)), agree=distributed.any_rank)
        # only rank 1's envs go bad; both must stop at the same iteration
        out[rank] = _run_until_stop(m, counters, names, bad_envs=NUM_ENVS if rank == 1 else 0, iterations=40)
    finally:
        dist.destroy_process_group()


def test_two_gloo_ranks_stop_together_when_one_diverges(tmp_path):
    with mp.Manager() as manager:
        out = manager.dict()
        ctx = mp.start_processes(_rank_main, args=(free_port(), str(tmp_path), out), nprocs=2, join=False,
                                 start_method="spawn")
        for proc in ctx.processes:
            proc.join(timeout=90)
        alive = [p for p in ctx.processes if p.is_alive()]
        for p in alive:
            p.kill()
        assert not alive, "a rank hung"
        assert all(p.exitcode == 0 for p in ctx.processes)
        (it0, msg0), (it1, msg1) = out[0], out[1]
    assert it0 == it1 == WINDOW  # bad from the first interval on: WINDOW iterations
    assert "another rank" in msg0 and "bad state" in msg1

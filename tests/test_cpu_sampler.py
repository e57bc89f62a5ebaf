"""CpuSampler against child processes that burn a core or sleep."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

from unilab.telemetry.cpu_sampler import MACHINE_PERCENT, PROCESS_CORES, CpuSampler

# each child prints once it has started, so interpreter start-up CPU time
# falls before the sampler's first reference sample
BUSY = "import sys; print('ready', flush=True)\nwhile True: pass"
SLEEPING = "import sys, time; print('ready', flush=True); time.sleep(120)"
INTERVAL_S = 1.0
# an unloaded machine gives the busy child ~1 core; the bound leaves room for
# a small CI box whose cores are shared with other jobs
BUSY_MIN_CORES = 0.25
SLEEPING_MAX_CORES = 0.1


def _spawn(code: str) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    return p


@pytest.fixture
def children():
    procs: list[subprocess.Popen] = []

    def spawn(code: str) -> subprocess.Popen:
        procs.append(_spawn(code))
        return procs[-1]

    yield spawn
    for p in procs:
        p.kill()
        p.wait()


def test_busy_vs_sleeping_child(children):
    busy, sleeping = children(BUSY), children(SLEEPING)
    s_busy, s_sleep, s_both = CpuSampler([busy.pid]), CpuSampler([sleeping.pid]), CpuSampler([busy.pid, sleeping.pid])
    time.sleep(INTERVAL_S)
    a, b, c = s_busy.sample(), s_sleep.sample(), s_both.sample()
    assert a[PROCESS_CORES] > BUSY_MIN_CORES
    assert b[PROCESS_CORES] < SLEEPING_MAX_CORES
    assert c[PROCESS_CORES] > BUSY_MIN_CORES
    for s in (a, b, c):
        assert 0.0 < s[MACHINE_PERCENT] <= 100.0  # the busy child keeps the machine above idle
    # the next sample covers only the interval since this one
    time.sleep(INTERVAL_S)
    assert s_busy.sample()[PROCESS_CORES] > BUSY_MIN_CORES


def test_dead_and_missing_pids_are_dropped(children):
    victim, other = children(SLEEPING), children(SLEEPING)
    sampler = CpuSampler([victim.pid, other.pid])
    assert sampler.pids == [victim.pid, other.pid]
    victim.kill()
    deadline = time.monotonic() + 10.0
    # killed but not reaped yet: a zombie
    while psutil.Process(victim.pid).status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
        time.sleep(0.02)
    s = sampler.sample()
    assert sampler.pids == [other.pid]
    assert s[PROCESS_CORES] >= 0.0
    victim.wait()
    other.kill()
    other.wait()
    # a pid that no longer exists at construction is skipped too
    gone = CpuSampler([other.pid])
    assert gone.pids == []
    assert gone.sample()[PROCESS_CORES] == 0.0


def test_bad_pids_rejected():
    with pytest.raises(ValueError, match="list"):
        CpuSampler(123)
    with pytest.raises(ValueError, match="positive int"):
        CpuSampler([0])
    with pytest.raises(ValueError, match="positive int"):
        CpuSampler(["1"])

"""Phase timer accounting on known workloads: sleeping uses ~0 CPU, spinning uses the CPU it spun for."""

from __future__ import annotations

import time

from unilab.telemetry.phase_timer import PhaseTimer
from unilab.telemetry.trace import TraceRecorder


def _spin(cpu_seconds: float) -> None:
    """Busy until this process has used ``cpu_seconds`` of CPU (a loaded machine stretches the wall time, not this)."""
    end = time.process_time() + cpu_seconds
    while time.process_time() < end:
        pass


def test_sleep_and_busy_phases():
    t = PhaseTimer()
    for _ in range(3):
        with t.phase("sleep"):
            time.sleep(0.05)
        with t.phase("busy"):
            _spin(0.05)
    s = t.summary()
    assert s["sleep"].count == 3 and s["busy"].count == 3
    assert 140 <= s["sleep"].wall_ms_total < 1000
    assert s["sleep"].cores < 0.2
    # the CPU spun is counted whatever the machine's load; one thread is one core at most
    assert s["busy"].cpu_ms_total >= 150 and s["busy"].cores <= 1.05
    assert abs(s["busy"].mean_ms - s["busy"].wall_ms_total / 3) < 1e-9


def test_nesting_and_reset():
    t = PhaseTimer()
    with t.phase("outer"):
        with t.phase("inner"):
            time.sleep(0.02)
        time.sleep(0.02)
    s = t.pop_summary()
    assert s["outer"].wall_ms_total >= s["inner"].wall_ms_total + 15
    assert t.summary() == {}


def test_disabled_timer_records_nothing():
    t = PhaseTimer(enabled=False)
    with t.phase("x"):
        pass
    assert t.summary() == {}


def test_trace_events(tmp_path):
    rec = TraceRecorder("test", max_events=2)
    t = PhaseTimer(trace=rec)
    for _ in range(3):
        with t.phase("p"):
            time.sleep(0.001)
    assert len(rec.events) == 2 and rec.dropped == 1
    assert all(e["ph"] == "X" and e["dur"] >= 1000 * 0.9 for e in rec.events)
    path = rec.save(tmp_path / "t.json")
    assert path.exists()

"""The env-step phase benchmark: its script runs end to end, and its CPU accounting helpers."""

from __future__ import annotations

import pytest


@pytest.mark.g1
@pytest.mark.slow
@pytest.mark.parametrize("task", ["g1_motion_tracking", "t1_locomotion"])
def test_benchmark_script_smoke(task, tmp_path):
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "scripts/benchmark/env/benchmark_env_step_phase_cpu.py"
    out = tmp_path / "bench.json"
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1] / "src") + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, str(script), "--task", task, "--num-envs", "8", "--steps", "4", "--warmup",
                           "1", "--block", "2", "--json", str(out)], capture_output=True, text=True, env=env,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "backend_step" in proc.stdout and "env / raw steps/s" in proc.stdout
    data = json.loads(out.read_text())
    assert data["task"] == task
    (run,) = data["runs"]
    assert set(run["phases"]) == {"backend_step", "update_state", "reset_done", "env.step"}
    assert run["phases"]["env.step"]["count"] == 4
    assert run["env_steps_per_sec"] > 0 and run["raw_steps_per_sec"] > 0
    assert 0.0 <= run["steal_share"] < 1.0 and "steal time" in proc.stdout
    threads = run["threads"]  # per thread group, steps of their own
    assert {"backend_step", "update_state", "reset_done"} <= set(threads)
    for row in threads.values():
        assert 0.0 <= row["main_alone_ms"] <= row["main_ms"] + 1e-9
    assert set(run["projection_main_alone"]) == set(run["projection"])


def test_main_alone_is_the_calling_threads_cpu_beyond_its_share_of_each_pool():
    import threading
    import time

    from unilab.bench.env_step_phase_cpu import ThreadPhaseTimer
    from unilab.sim import cpu

    stop = threading.Event()
    tids = []

    def spin():
        tids.append(cpu.current_tid())
        stop.wait()

    worker = threading.Thread(target=spin)
    worker.start()
    while not tids:
        time.sleep(0.001)
    timer = ThreadPhaseTimer({"parked": tids, "none": []})
    with timer.phase("serial"):
        t0 = time.thread_time()
        while time.thread_time() - t0 < 0.02:  # 20 ms of the calling thread alone
            pass
    stop.set()
    worker.join()
    row = timer.breakdown(steps=2)["serial"]
    assert row["parked_ms"] < 1.0 and row["none_ms"] == 0.0
    assert row["main_ms"] == pytest.approx(10.0, abs=2.0)  # per step
    assert row["main_alone_ms"] == pytest.approx(row["main_ms"] - row["parked_ms"])


def test_steal_share_is_steal_over_the_machines_time_without_guest():
    from collections import namedtuple

    from unilab.bench.env_step_phase_cpu import steal_share

    times = namedtuple("times", "user nice system idle steal guest guest_nice")
    before = times(10, 0, 5, 100, 1, 2, 0)
    after = times(16, 0, 6, 102, 2, 5, 0)  # +3 guest seconds, already inside user's +6
    assert steal_share(before, after) == pytest.approx(1 / 10)
    assert steal_share(after, after) == 0.0

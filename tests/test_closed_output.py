"""Console output that cannot be written (a closed pipe, a full disk) loses nothing: training goes on to its end with
the rest of its console in the run's console.log; evaluations, play and benchmarks finish their work; a benchmark that
is stopped or killed leaves its trainings' checkpoints, and they stop cleanly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from runtime_helpers import TINY, run_dirs, train_cmd, wait_for_line

from unilab.runtime import console
from unilab.runtime.checkpoint import latest_checkpoint, load_checkpoint

ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}


def _closed_pipe_run(cmd: list[str], after: str, timeout: float = 300) -> tuple[int, str]:
    """Run ``cmd`` with stdout a pipe whose reader goes away (as ``| head`` does) once ``after`` was printed; its return
    code and stderr."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
                            start_new_session=True)
    try:
        wait_for_line(proc, after)
        proc.stdout.close()
        err = proc.stderr.read()
        return proc.wait(timeout=timeout), err
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def _assert_quiet_failure_note(err: str, why: str) -> None:
    assert "Traceback" not in err and "Exception ignored" not in err, err
    notes = [line for line in err.splitlines() if "stdout cannot be written" in line]
    assert len(notes) == 1 and why in notes[0], err


def test_training_goes_on_to_its_end_when_its_stdout_pipe_closes(tmp_path):
    rc, err = _closed_pipe_run(train_cmd(tmp_path, "algo.max_iterations=60", "training.save_interval=20"),
                               "unilab: logging to")
    assert rc == 0, err
    _assert_quiet_failure_note(err, "Broken pipe")
    (run,) = run_dirs(tmp_path)
    assert latest_checkpoint(run).name == "model_60.pt"  # the normal end, not a stop
    log = (run / "console.log").read_text()
    assert "stdout could not be written (Broken pipe)" in log  # where the console went, and why
    assert "unilab: iter" in log and f"unilab: run directory {run}; checkpoint {run / 'model_60.pt'}" in log
    assert str(run / "console.log") in err


def test_training_to_a_full_disk_goes_on_to_its_end(tmp_path):
    with open("/dev/full", "w") as full:
        out = subprocess.run(train_cmd(tmp_path, "algo.max_iterations=20"), stdout=full, stderr=subprocess.PIPE,
                             text=True, env=ENV, timeout=300)
    assert out.returncode == 0, out.stderr
    _assert_quiet_failure_note(out.stderr, "No space left on device")
    (run,) = run_dirs(tmp_path)
    assert latest_checkpoint(run).name == "model_20.pt"
    assert "unilab: run directory" in (run / "console.log").read_text()


@pytest.fixture(scope="module")
def pendulum_run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("pendulum")
    subprocess.run(train_cmd(root, "algo.max_iterations=10"), check=True, capture_output=True, timeout=300)
    return run_dirs(root)[0]


def test_play_and_the_benchmarks_finish_when_stdout_cannot_be_written(pendulum_run, tmp_path):
    commands = {
        "play": [sys.executable, "-m", "unilab.cli.play", str(pendulum_run), "--no-video", "--steps", "20"],
        "unilab-bench": [sys.executable, "-m", "unilab.cli.bench", "pool-threads", "--num-envs", "4", "--steps", "2",
                         "--warmup", "0", "--repeats", "1", "--nthreads", "1", "--no-pinned", "--json",
                         str(tmp_path / "pool.json")],
    }
    for name, cmd in commands.items():
        with open("/dev/full", "w") as full:
            out = subprocess.run(cmd, stdout=full, stderr=subprocess.PIPE, text=True, env=ENV, timeout=300)
        assert out.returncode == 0, (name, out.stderr)
        _assert_quiet_failure_note(out.stderr, "No space left on device")
    assert json.loads((tmp_path / "pool.json").read_text())["benchmark"]  # its result is written all the same


def test_an_evaluation_whose_reader_went_away_still_writes_its_report(g1_short_run, tmp_path):
    report = tmp_path / "eval.json"
    cmd = [sys.executable, "-m", "unilab.cli.eval", str(g1_short_run), "--max-frames", "5", "--no-plot",
           "--json", str(report)]
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first line: an evaluation is over in a second once it prints
    try:
        out = subprocess.run(cmd, stdout=write_end, stderr=subprocess.PIPE, text=True, env=ENV, timeout=300)
    finally:
        os.close(write_end)
    assert out.returncode == 0, out.stderr
    _assert_quiet_failure_note(out.stderr, "Broken pipe")
    assert json.loads(report.read_text())["overall"]


def test_console_output_goes_to_the_log_file_once_a_stream_fails(tmp_path):
    """In one process: the first failed write diverts the descriptor to the log; the lost line is written there."""
    log = tmp_path / "console.log"
    code = (f"import os, sys; from unilab.runtime import console\n"
            f"sys.stdout.reconfigure(line_buffering=True); console.guard('t'); console.divert_to({str(log)!r})\n"
            "print('first', flush=True)\n"
            "sys.stdin.readline()\n"  # the parent closes the pipe meanwhile
            "for i in range(3): print(f'line {i}')\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "first\n"
    proc.stdout.close()
    proc.stdin.write("go\n")
    proc.stdin.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 0, err
    lines = log.read_text().splitlines()
    assert "stdout could not be written (Broken pipe)" in lines[0]
    assert lines[1:] == ["line 0", "line 1", "line 2"]  # nothing lost, nothing twice
    assert err.strip() == f"t: stdout cannot be written (Broken pipe); its output goes to {log} from here on"


def test_guard_leaves_an_in_process_capture_alone(capsys):
    console.guard("t")  # pytest's capture is not fd 1: not ours to divert
    assert not isinstance(sys.stdout, console.GuardedStream)


# ------------------------------------------------------------------ a benchmark that is stopped or killed

BENCH = [sys.executable, "-m", "unilab.cli.bench", "learn", "--task", "pendulum", "--minutes", "5",
         *TINY[2:], "training.log_interval=2"]


def _start_bench(tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    """``unilab-bench learn`` on the tiny pendulum; returns it and its training's run directory, once the training is
    past a few iterations."""
    proc = subprocess.Popen([*BENCH, "--log-root", str(tmp_path), "--out", str(tmp_path / "learn.json")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
                            start_new_session=True)
    run = None
    t0 = time.monotonic()
    for line in proc.stdout:
        if line.startswith("unilab: logging to "):
            run = Path(line.removeprefix("unilab: logging to ").strip())
        if run is not None and line.startswith("unilab: iter"):
            break
        assert time.monotonic() - t0 < 240, "the benchmark's training never started"
    assert run is not None
    return proc, run


def _training_log(tmp_path: Path) -> str:
    (log,) = tmp_path.glob("bench_learn_*.log")
    return log.read_text()


def test_a_stopped_benchmark_stops_its_training_with_a_checkpoint_and_writes_its_report(tmp_path):
    proc, run = _start_bench(tmp_path)
    try:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=120)
        err = proc.stderr.read()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert rc == 143, err
    assert "Traceback" not in err
    report = json.loads((tmp_path / "learn.json").read_text())
    assert report["train_returncode"] == 143 and report["stop_signal"] == signal.SIGTERM
    ckpt = Path(report["checkpoint"])
    assert ckpt.parent == run and load_checkpoint(ckpt)[0]["iteration"] > 0
    assert f"unilab: run directory {run}; checkpoint {ckpt}" in _training_log(tmp_path)


def test_a_benchmark_stopped_during_its_trainings_start_up_writes_its_report(tmp_path):
    proc = subprocess.Popen([*BENCH, "--log-root", str(tmp_path), "--out", str(tmp_path / "learn.json")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
                            start_new_session=True)
    try:
        wait_for_line(proc, "unilab-bench learn: ")  # the training command, printed as it starts
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
        rc = proc.returncode
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert rc == 143, err
    assert "Traceback" not in err and "before making a run directory" not in err, err
    report = json.loads((tmp_path / "learn.json").read_text())
    assert report["stop_signal"] == signal.SIGTERM and report["train_returncode"] != 0
    assert report["run_dir"] is None and report["checkpoint"] is None and report["eval_returncode"] is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_a_killed_benchmark_leaves_its_training_stopping_cleanly(tmp_path):
    proc, run = _start_bench(tmp_path)
    os.kill(proc.pid, signal.SIGKILL)  # no handler runs: the training's own parent-death signal stops it
    proc.wait(timeout=30)
    t0 = time.monotonic()
    while "unilab: run directory" not in _training_log(tmp_path):
        assert time.monotonic() - t0 < 120, _training_log(tmp_path)[-2000:]
        time.sleep(0.5)
    ckpt = latest_checkpoint(run)
    assert ckpt is not None and load_checkpoint(ckpt)[0]["iteration"] > 0
    assert "interrupted at iteration" in _training_log(tmp_path)  # a SIGTERM stop, not the time limit

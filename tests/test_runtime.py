"""Training end to end on the pendulum: metrics, checkpoints, resume, traces, failures."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time

import psutil
import pytest
import torch
from runtime_helpers import TINY, popen_train, run_dirs, train_cmd, wait_for_line

from unilab.runtime.checkpoint import latest_checkpoint, load_checkpoint
from unilab.runtime.trainer import learner_threads, pool_threads
from unilab.sim import cpu
from unilab.telemetry.scalars import read_scalars

METRIC_TAGS = [
    "perf/steps_per_sec", "perf/iter_ms", "perf/collector_active_steps_per_sec",
    "timing/learner_train_ms", "timing/learner_collector_wait_ms",
    "timing/collector_env_step_ms", "timing/collector_env_step_backend_ms",
    "timing/collector_env_step_update_state_ms", "timing/collector_env_step_reset_done_ms",
    "timing/collector_learner_action_wait_ms", "timing/collector_replay_write_ms",
    "cpu/process_cores", "cpu/machine_percent",
]


def _run(cmd, timeout=240):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def test_training_writes_metrics_checkpoints_and_trace(tmp_path):
    out = _run(train_cmd(
        tmp_path, "algo.max_iterations=30", "training.save_interval=20", "training.trace_enabled=true",
        "training.console_interval_s=0",
    ))
    assert out.returncode == 0, out.stderr
    (run,) = run_dirs(tmp_path)
    assert run.parent.name == "pendulum" and run.name.endswith("_mujoco")
    assert sorted(p.name for p in run.glob("model_*.pt")) == ["model_20.pt", "model_30.pt"]
    assert (run / "config.yaml").exists()
    scalars = read_scalars(run)
    for tag in METRIC_TAGS:
        assert tag in scalars, tag
        assert len(scalars[tag]) == 6  # every 5 of 30 iterations
    assert "reward/angle" in scalars and "train/critic_loss" in scalars
    steps = [s for s, _ in scalars["perf/steps_per_sec"]]
    assert steps == [5 * 8 * k for k in range(1, 7)]  # env steps of 8 envs
    trace = json.loads((run / "trace.json").read_text())["traceEvents"]
    pids = {e["pid"] for e in trace if e["ph"] == "X"}
    names = {e["name"] for e in trace}
    assert len(pids) == 2
    assert {"learner_train", "learner_collector_wait", "env_step", "backend_step", "action_wait"} <= names
    assert re.search(r"^unilab: iter 30\b", out.stdout, re.M)  # a console line at every log point with interval 0
    assert ("unilab: learning rate 0.001 for actor and critic until 800,000 env steps, then algo.actor_lr=0.0003, "
            "algo.critic_lr=0.0003") in out.stdout  # sac_cpu's early rate, said once
    # the banner says how the CPUs are split: the learner's half, the pool the rest (at most one per env)
    usable = cpu.usable_cpu_count()
    split = re.search(r"learner on cpu \(torch threads: (\d+)\), collector pool nthread=(\d+)", out.stdout)
    assert split, out.stdout
    assert (int(split[1]), int(split[2])) == (learner_threads(usable, None, False),
                                              min(8, pool_threads(usable, None, False)))


def test_resume_continues_the_iteration_count(tmp_path):
    first = tmp_path / "a"
    assert _run(train_cmd(first, "algo.max_iterations=10")).returncode == 0
    (run,) = run_dirs(first)
    second = tmp_path / "b"
    out = _run(train_cmd(second, "algo.max_iterations=16", f"training.resume={run}", "training.save_replay=true"))
    assert out.returncode == 0, out.stderr
    assert "resumed from" in out.stdout
    (run2,) = run_dirs(second)
    payload, path = load_checkpoint(run2)
    assert path.name == "model_16.pt" and payload["iteration"] == 16
    assert "replay" in payload


def _trainer(tmp_path, *overrides: str, rank: int = 0):
    from unilab.cli.config import compose_config, explicit_algo_keys, split_argv, to_run_spec
    from unilab.runtime.distributed import DistInfo
    from unilab.runtime.trainer import Trainer

    argv, _ = split_argv([*TINY, "algo.device=cpu", *overrides])
    trainer = Trainer(to_run_spec(compose_config(argv), explicit_algo_keys(argv)), run_dir=tmp_path)
    trainer.dist = DistInfo(rank=rank)  # a rank's own choices only: no process group
    return trainer


def test_ranks_draw_their_own_noise_and_a_resume_goes_on_with_the_saved_stream(tmp_path):
    from unilab.tasks.registry import make_env

    env = make_env("pendulum", _trainer(tmp_path / "t0").spec.task_cfg, 8)
    spec = env.spec
    env.close()
    draws = []
    for rank in (0, 1):
        trainer = _trainer(tmp_path / f"r{rank}", rank=rank)
        trainer._build(spec)
        draws.append(torch.randn(8))  # the global stream the actor's noise comes from
    assert not torch.equal(draws[0], draws[1])  # the same networks, not the same exploration on every rank

    first = tmp_path / "a"
    assert _run(train_cmd(first, "algo.max_iterations=10")).returncode == 0
    (run,) = run_dirs(first)
    payload, _ = load_checkpoint(run)
    trainer = _trainer(tmp_path / "b", f"training.resume={run}", "algo.max_iterations=16")
    trainer._resume_payload = trainer._load_resume()
    # the resumed envs do not replay the fresh run's resets and randomization
    assert trainer._collector_args().seed != _trainer(tmp_path / "c")._collector_args().seed
    agent, replay = trainer._build(spec)
    torch.manual_seed(0)  # the fresh run's stream, which the resume must not repeat
    assert trainer._maybe_resume(agent, replay) == 10
    assert torch.equal(torch.get_rng_state(), payload["rng"]["torch"])


def test_resume_from_a_missing_checkpoint_is_clear(tmp_path):
    out = _run(train_cmd(tmp_path, "algo.max_iterations=5", f"training.resume={tmp_path / 'nope.pt'}"))
    assert out.returncode != 0
    assert "does not exist" in out.stderr


def _collector_of(proc: subprocess.Popen, timeout=120) -> psutil.Process:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        kids = psutil.Process(proc.pid).children(recursive=True)
        for k in kids:
            try:
                if "multiprocessing" in " ".join(k.cmdline()) and "resource_tracker" not in " ".join(k.cmdline()):
                    return k
            except psutil.Error:
                pass
        time.sleep(0.2)
    raise AssertionError("no collector process appeared")


def test_dead_collector_stops_the_learner_with_a_clear_message(tmp_path):
    proc = popen_train(tmp_path, "algo.max_iterations=100000")
    try:
        wait_for_line(proc, "unilab: iter")
        collector = _collector_of(proc)
        collector.send_signal(signal.SIGKILL)
        t0 = time.monotonic()
        rc = proc.wait(timeout=30)
        took = time.monotonic() - t0
        err = proc.stderr.read()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert rc == 1
    assert f"collector process (pid {collector.pid}) died with exit code -9" in err
    assert took < 15
    (run,) = run_dirs(tmp_path)
    assert latest_checkpoint(run) is not None  # what was learned is kept


def test_dead_learner_stops_the_collector(tmp_path):
    proc = popen_train(tmp_path, "algo.max_iterations=100000")
    try:
        wait_for_line(proc, "unilab: iter")
        collector = _collector_of(proc)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        collector.wait(timeout=15)  # psutil raises TimeoutExpired if it hangs
    finally:
        os.killpg(proc.pid, signal.SIGKILL) if proc.poll() is None else None
    assert not collector.is_running()


@pytest.mark.parametrize(
    "override,needle",
    [
        # the model file exists (a missing one is refused before any process starts) but its mesh does not
        ("task.model_path={tmp}/bad_mesh.xml", "/nonexistent/pendulum.stl"),
        ("sim.cpu_ids=99999", "outside the usable CPU set"),
    ],
)
def test_env_build_error_is_one_clear_message(tmp_path, override, needle):
    """A config/asset problem in the collector's env build: one short message, exit 2, no run directory."""
    (tmp_path / "bad_mesh.xml").write_text('<mujoco><asset><mesh file="/nonexistent/pendulum.stl"/></asset></mujoco>')
    out = _run(train_cmd(tmp_path, "algo.max_iterations=5", override.format(tmp=tmp_path)))
    assert out.returncode == 2, out.stderr
    assert out.stderr.startswith("train: error: could not build the pendulum env: ")
    assert out.stderr.count(needle) == 1  # printed once, not once per process
    assert "Traceback" not in out.stderr and "UNILAB_DEBUG=1" in out.stderr
    assert len(out.stderr.splitlines()) <= 4
    assert run_dirs(tmp_path) == []


def test_stopped_collector_is_killed_within_the_timeout(tmp_path):
    """SIGSTOP ignores SIGTERM: the learner must escalate to SIGKILL and exit, not wait forever."""
    timeout = 3
    proc = popen_train(tmp_path, "algo.max_iterations=100000", f"training.collector_timeout_s={timeout}")
    try:
        wait_for_line(proc, "unilab: iter")
        collector = _collector_of(proc)
        collector.send_signal(signal.SIGSTOP)
        t0 = time.monotonic()
        rc = proc.wait(timeout=120)
        took = time.monotonic() - t0
        err = proc.stderr.read()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        try:
            collector.kill()
        except (psutil.Error, NameError):
            pass
    assert rc == 1, err
    assert f"collector process (pid {collector.pid}) sent no step" in err
    assert f"training.collector_timeout_s={timeout}" in err
    assert took < timeout + 15
    assert not collector.is_running()  # killed and reaped by the learner


def test_envs_that_all_diverge_stop_training(tmp_path):
    """Every env starts at an absurd speed: a console warning, then a 'diverged' error and a non-zero exit."""
    out = _run(train_cmd(
        tmp_path, "algo.max_iterations=100000", "task.init_velocity=1e8", "training.divergence_window=20",
        "training.console_interval_s=0",
    ))
    assert out.returncode == 1, out.stderr
    assert "train: error: training diverged" in out.stderr
    assert "% of envs diverged (bad state)" in out.stdout
    assert "WARNING: Nan, Inf" not in out.stdout + out.stderr  # MuJoCo's per-env lines are silenced


def test_a_divergence_stop_keeps_a_checkpoint(tmp_path):
    """Every env is bad at every step (|qvel| over a tiny bound) while the weights stay finite: the stop saves."""
    out = _run(train_cmd(
        tmp_path, "algo.max_iterations=100000", "sim.max_qvel=1e-9", "training.divergence_window=20",
    ))
    assert out.returncode == 1, out.stderr
    assert "train: error: training diverged" in out.stderr
    (run_dir,) = run_dirs(tmp_path)
    ckpt = latest_checkpoint(run_dir)
    assert ckpt is not None and f"saved {ckpt} before stopping" in out.stderr
    assert load_checkpoint(ckpt)[0]["iteration"] >= 20


@pytest.mark.parametrize(
    "sig,group",
    [
        (signal.SIGINT, True),  # a terminal's Ctrl-C reaches the whole process group
        (signal.SIGTERM, False),  # `timeout` or a scheduler signals the learner only
    ],
)
def test_stop_signal_saves_a_checkpoint_and_exits_cleanly(tmp_path, sig, group):
    proc = popen_train(tmp_path, "algo.max_iterations=100000")
    try:
        wait_for_line(proc, "unilab: iter")
        collector = _collector_of(proc)
        os.killpg(proc.pid, sig) if group else proc.send_signal(sig)
        rc = proc.wait(timeout=60)
        out, err = proc.stdout.read(), proc.stderr.read()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert rc == 128 + sig  # 130 for Ctrl-C, 143 for SIGTERM
    assert "interrupted at iteration" in out
    assert "leaked" not in err, err  # semaphores and shared memory were released
    (run,) = run_dirs(tmp_path)
    ckpt = latest_checkpoint(run)
    assert ckpt is not None
    it = load_checkpoint(ckpt)[0]["iteration"]
    assert it > 0 and ckpt.name == f"model_{it}.pt"
    collector.wait(timeout=15)  # psutil raises TimeoutExpired if it lingers


def test_play_writes_a_video(tmp_path):
    pytest.importorskip("imageio")
    out = _run(train_cmd(tmp_path, "algo.max_iterations=5", "training.no_play=false", "training.play_steps=10"))
    assert out.returncode == 0, out.stderr
    (run,) = run_dirs(tmp_path)
    assert "play:" in out.stdout
    videos = list((run / "videos").glob("*.mp4"))
    if "no video" in out.stdout:
        pytest.skip("no offscreen OpenGL on this machine: " + out.stdout)
    assert len(videos) == 1 and videos[0].stat().st_size > 1000

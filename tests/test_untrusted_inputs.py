"""A checkpoint never runs code, a closed terminal (SIGHUP) saves, and kill -9 leaves no shared memory behind."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import subprocess
import sys
import termios
import time
from pathlib import Path

import psutil
import pytest
import torch
from runtime_helpers import popen_train, run_dirs, train_cmd, wait_for_line
from script_modules import SCRIPTS, load_script

from unilab.runtime import shm
from unilab.runtime.checkpoint import latest_checkpoint, load_checkpoint


class _RunsCode:
    """Unpickling this calls os.system: what a malicious checkpoint would do."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.fixture
def malicious_run(tmp_path):
    marker = tmp_path / "code_ran"
    run = tmp_path / "run"
    run.mkdir()
    payload = {"iteration": 5, "agent": _RunsCode(marker), "config": {}, "task": "g1_motion_tracking"}
    torch.save(payload, run / "model_5.pt")
    return run, marker


COMMANDS = {
    "play": ["unilab.cli.play", "{run}", "--no-video"],
    "unilab-eval": ["unilab.cli.eval", "{run}", "--no-plot"],
    "unilab-export": ["unilab.cli.export", "{run}", "--out", "{tmp}/policy.onnx"],
    "train": ["unilab.cli.train", "--task", "pendulum", "training.resume={run}", "training.log_root={tmp}/logs",
              "training.no_play=true"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_checkpoint_that_would_run_code_is_refused(malicious_run, tmp_path, command):
    run, marker = malicious_run
    argv = [a.format(run=run, tmp=tmp_path) for a in COMMANDS[command]]
    out = subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True, timeout=180)
    assert out.returncode == 2, out.stdout + out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr  # one line, no traceback
    assert str(run / "model_5.pt") in lines[0] and "refused" in lines[0] and "posix.system" in lines[0]
    assert not marker.exists()  # nothing in the file ran
    assert not (tmp_path / "policy.onnx").exists()
    assert not list((tmp_path / "logs").glob("**/config.yaml"))  # a refused resume leaves no run directory


def test_load_checkpoint_refuses_in_process_too(malicious_run):
    run, marker = malicious_run
    with pytest.raises(ValueError, match="refused") as err:
        load_checkpoint(run)
    assert "\n" not in str(err.value) and not marker.exists()


# ---------------------------------------------------------------- SIGHUP


def _collector_pid(learner_pid: int, timeout: float = 120) -> int:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        for kid in psutil.Process(learner_pid).children(recursive=True):
            try:
                cmd = " ".join(kid.cmdline())
            except psutil.Error:
                continue
            if "multiprocessing" in cmd and "resource_tracker" not in cmd:
                return kid.pid
        time.sleep(0.2)
    raise AssertionError("no collector process")


def _assert_final_checkpoint(log_root: Path) -> None:
    (run,) = run_dirs(log_root)
    ckpt = latest_checkpoint(run)
    assert ckpt is not None
    it = load_checkpoint(ckpt)[0]["iteration"]
    assert it > 0 and ckpt.name == f"model_{it}.pt"


def test_sighup_saves_a_checkpoint_and_exits_129(tmp_path):
    """A hang-up sent to the process group (a shell passing on a closed terminal) stops like SIGTERM."""
    proc = popen_train(tmp_path, "algo.max_iterations=100000")
    try:
        wait_for_line(proc, "unilab: iter")
        collector = psutil.Process(_collector_pid(proc.pid))
        os.killpg(proc.pid, signal.SIGHUP)
        rc = proc.wait(timeout=60)
        out, err = proc.stdout.read(), proc.stderr.read()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert rc == 128 + signal.SIGHUP == 129, err
    assert "interrupted at iteration" in out
    assert "Traceback" not in err and "leaked" not in err
    _assert_final_checkpoint(tmp_path)
    collector.wait(timeout=15)  # psutil raises TimeoutExpired if it lingers


# SIGINT is left out: the collector's start ignores it for the fork and exec (collector_client.interrupts_ignored, so
# the collector inherits an ignored SIGINT), and one sent to this process alone in that window is lost
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_stop_signal_during_start_up_is_one_line_and_leaves_nothing(tmp_path, sig):
    """Sent once the run directory exists, while the collector starts and builds its env: as Ctrl-C there does, the
    collector stops, the run directory goes, one line names the signal (no traceback, no leaked semaphore)."""
    proc = popen_train(tmp_path, "algo.max_iterations=100000")
    try:
        t0 = time.monotonic()
        while not any((run / "config.yaml").is_file() for run in run_dirs(tmp_path)):
            assert proc.poll() is None and time.monotonic() - t0 < 120, "no run directory"
            time.sleep(0.01)
        os.kill(proc.pid, sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 128 + sig, err
    assert err.strip().splitlines() == [f"train: {signal.Signals(sig).name}: interrupted before training started"]
    assert "unilab: iter" not in out and run_dirs(tmp_path) == []
    assert not list(Path(shm.SHM_DIR).glob(f"*unilab_{proc.pid}_*"))


def test_closing_the_terminal_saves_a_checkpoint_and_exits_129(tmp_path):
    """Training on a pseudo-terminal that is then closed: SIGHUP, and every later write to it fails (EIO)."""
    master, slave = pty.openpty()

    def take_terminal() -> None:  # the new session's controlling terminal, as a login shell has
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(
        train_cmd(tmp_path, "algo.max_iterations=100000"), stdin=slave, stdout=slave, stderr=slave,
        start_new_session=True, preexec_fn=take_terminal, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    os.close(slave)
    try:
        seen, t0 = b"", time.monotonic()
        while b"unilab: iter" not in seen:
            assert time.monotonic() - t0 < 120 and proc.poll() is None, seen.decode(errors="replace")
            if select.select([master], [], [], 1.0)[0]:
                seen += os.read(master, 65536)
        collector = psutil.Process(_collector_pid(proc.pid))
        os.close(master)  # the terminal window is closed
        master = -1
        rc = proc.wait(timeout=60)
    finally:
        if master >= 0:
            os.close(master)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert rc == 129
    _assert_final_checkpoint(tmp_path)
    collector.wait(timeout=15)


# ---------------------------------------------------------------- stale shared memory


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_stale_segments_of_dead_pids_are_removed(tmp_path):
    dead, live = _dead_pid(), os.getpid()
    names = {
        "dead_block": f"unilab_{dead}_0123abcd",
        "dead_sem": f"sem.unilab_{dead}_mp-abc12345",
        "live_block": f"unilab_{live}_0123abcd",
        "live_sem": f"sem.unilab_{live}_mp-abc12345",
        "other": f"psm_{dead}",  # not ours: never touched
    }
    for name in names.values():
        (tmp_path / name).write_bytes(b"\0" * 32)
    removed = shm.remove_stale_segments(tmp_path)
    assert sorted(p.name for p in removed) == sorted([names["dead_block"], names["dead_sem"]])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [names["live_block"], names["live_sem"], names["other"]])
    assert shm.remove_stale_segments(tmp_path / "absent") == []  # no /dev/shm (macOS): nothing to do


def test_blocks_carry_the_owner_pid():
    arrays = shm.SharedArrays.create({"x": ((4,), "float32")})
    try:
        name = arrays.handle()["name"].lstrip("/")
        assert name.startswith(f"unilab_{os.getpid()}_")
        if shm.SHM_DIR.is_dir():
            shm.remove_stale_segments()
            assert (shm.SHM_DIR / name).exists()  # its owner (this process) is alive: kept
    finally:
        arrays.close()


@pytest.mark.skipif(not shm.SHM_DIR.is_dir(), reason="no /dev/shm: segments are not files here")
def test_kill_9_leaks_are_removed_at_the_next_start(tmp_path):
    proc = popen_train(tmp_path / "a", "algo.max_iterations=100000")
    try:
        wait_for_line(proc, "unilab: iter")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # learner, collector and resource tracker at once
        proc.wait(timeout=30)
    time.sleep(0.5)
    leaked = sorted(p.name for p in shm.SHM_DIR.glob(f"*unilab_{proc.pid}_*"))
    assert any(n.startswith("unilab_") for n in leaked), leaked  # the transport block
    assert any(n.startswith("sem.unilab_") for n in leaked), leaked  # the queues' and events' semaphores
    out = subprocess.run(train_cmd(tmp_path / "b", "algo.max_iterations=2"), capture_output=True, text=True,
                         timeout=240)
    assert out.returncode == 0, out.stderr
    assert "shared-memory segment(s) of dead runs" in out.stdout
    assert not list(shm.SHM_DIR.glob(f"*unilab_{proc.pid}_*"))


# ------------------------------------------------------------------ run directories
def test_run_dirs_made_in_the_same_second_never_collide(tmp_path):
    """Many runs starting at once (threads, so calls truly overlap) each get a directory of their own."""
    from concurrent.futures import ThreadPoolExecutor

    from unilab.runtime.config import TrainingConfig
    from unilab.runtime.trainer import make_run_dir

    training = TrainingConfig(log_root=str(tmp_path))
    with ThreadPoolExecutor(8) as pool:
        runs = list(pool.map(lambda _: make_run_dir(training, "pendulum"), range(50)))
    assert len(set(runs)) == 50 and all(r.is_dir() and r.name.endswith("_mujoco") for r in runs)
    assert len(list((tmp_path / "fast_sac" / "pendulum").iterdir())) == 50


def test_a_replay_buffer_too_large_exits_2_in_one_line_and_leaves_no_run_dir(tmp_path):
    out = subprocess.run(train_cmd(tmp_path, "algo.buffer_size=1000000000"), capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 2, out.stderr
    err = out.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("train: error: replay buffer needs "), out.stderr
    assert "algo.buffer_size" in err[0] and "Traceback" not in out.stderr
    assert run_dirs(tmp_path) == []


# ------------------------------------------------------------------ Ctrl-C and output paths of play / eval
@pytest.mark.parametrize("module, line", [("play", "play: interrupted"), ("eval", "unilab-eval: interrupted")])
def test_ctrl_c_in_play_and_eval_is_one_line_and_exit_130(monkeypatch, capsys, module, line):
    import importlib

    cli = importlib.import_module(f"unilab.cli.{module}")

    def interrupted(_args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_main", interrupted)
    assert cli.main(["run"]) == 130
    assert capsys.readouterr().err.strip() == line


def test_play_refuses_an_unwritable_video_path_before_the_rollout(monkeypatch, capsys, tmp_path):
    from unilab.cli import play as play_cli
    from unilab.runtime import play as play_mod

    ckpt = tmp_path / "model_3.pt"
    payload = {"iteration": 3, "agent": {}, "config": {"task": {"name": "pendulum"}, "sim": {}}}
    monkeypatch.setattr(play_mod, "load_checkpoint", lambda _c: (payload, ckpt))

    def no_rollout(*_a, **_k):
        raise AssertionError("the policy was built before the video path was checked")

    monkeypatch.setattr(play_mod, "load_agent", no_rollout)
    assert play_cli.main([str(ckpt), "--out", "/proc/x.mp4"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("play: error: cannot write the video to /proc/x.mp4"), err


@pytest.mark.parametrize(("args", "message"), [
    (["--width", "321"], "play --width must be a positive even number of pixels, got 321"),
    (["--height", "0"], "play --height must be a positive even number of pixels, got 0"),
    (["--out", "clip.avi"], "play --out must end in .mp4, got clip.avi"),
])
def test_play_refuses_a_bad_video_size_or_name_before_loading_anything(monkeypatch, capsys, args, message):
    from unilab.cli import play as play_cli
    from unilab.runtime import play as play_mod

    def no_load(*_a, **_k):
        raise AssertionError("the checkpoint was loaded before the video options were checked")

    monkeypatch.setattr(play_mod, "load_checkpoint", no_load)
    assert play_cli.main(["run", *args]) == 2
    assert capsys.readouterr().err.strip() == f"play: error: {message}"


def test_export_refuses_a_directory_as_its_output_before_reading_the_checkpoint(capsys, tmp_path):
    from unilab.cli import export as export_cli

    assert export_cli.main([str(tmp_path / "no_such_run"), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"unilab-export: error: cannot write the ONNX file to {tmp_path}: it is a directory", err


def test_collector_starts_with_ctrl_c_ignored():
    """Ctrl-C reaches the whole process group: a collector still importing must not die of it (with a traceback)."""
    if not Path("/proc/self/status").exists():
        pytest.skip("needs /proc")
    import multiprocessing as mp

    from unilab.runtime.collector_client import interrupts_ignored

    before = signal.getsignal(signal.SIGINT)
    with interrupts_ignored():
        proc = mp.get_context("spawn").Process(target=time.sleep, args=(5,), daemon=True)
        proc.start()
    try:
        assert signal.getsignal(signal.SIGINT) is before  # the learner's own Ctrl-C handling is back
        ignored = next(ln for ln in Path(f"/proc/{proc.pid}/status").read_text().splitlines()
                       if ln.startswith("SigIgn:"))
        assert int(ignored.split()[1], 16) & (1 << (signal.SIGINT - 1))
    finally:
        proc.kill()
        proc.join()


# ------------------------------------------------------------------ the asset hint
def test_fetch_force_is_suggested_only_for_corrupt_cached_files(monkeypatch, tmp_path):
    from unilab.assets import holosoma
    from unilab.runtime.collector import asset_hint, build_error_message

    monkeypatch.setenv("UNILAB_CACHE", str(tmp_path / "cache"))
    mesh = holosoma.assets_dir() / "robots" / "g1" / "meshes" / "pelvis.STL"
    assert "unilab-assets fetch --force" in asset_hint(ValueError(f"Error: could not read mesh file '{mesh}'"))
    assert "unilab-assets fetch --force" in build_error_message("g1_motion_tracking", ValueError(f"bad '{mesh}'"))
    # no network, a wrong wheel: the AssetError says what to do; a refetch cannot help
    assert asset_hint(holosoma.WheelDownloadError("could not download the G1 assets: no network")) == ""
    assert asset_hint(holosoma.AssetError(f"holosoma wheel {tmp_path}/x.whl does not exist")) == ""
    # an unusable UNILAB_CACHE (permissions, read-only disk) is named as such
    denied = PermissionError(13, "Permission denied", str(tmp_path / "cache" / "holosoma.lock"))
    assert "fetch --force" not in asset_hint(denied) and "UNILAB_CACHE" in asset_hint(denied)
    # a file outside the cache
    assert asset_hint(ValueError("Error: could not read mesh file '/nonexistent/pendulum.stl'")) == ""


def test_an_env_too_large_for_memory_names_the_key_to_lower():
    from unilab.runtime.collector import build_error_message

    # what MuJoCo's batch raises (two kinds); Python's own
    for err in (ValueError("std::bad_alloc"), RuntimeError("Caught an unknown exception!"), MemoryError()):
        msg = build_error_message("g1_motion_tracking", err, num_envs=50_000_000)
        assert "out of memory for algo.num_envs=50000000 envs: lower algo.num_envs" in msg
    assert "algo.num_envs" not in build_error_message("g1_motion_tracking", ValueError("bad value"), num_envs=8)


# ------------------------------------------------------------------ sim2sim: the ONNX metadata is input too
SIM2SIM = SCRIPTS / "deploy" / "sim2sim.py"


def _sim2sim():
    return load_script("deploy/sim2sim.py")


def _good_meta() -> dict:
    joints = ["hip", "knee"]
    return {
        "obs_dim": 5, "action_dim": 2, "joint_names": joints, "obs_joint_names": joints,
        "default_joint_pos": [0.0, 0.1], "action_scale": [0.5, 0.5], "action_bound": [2.0, 4.0], "kp": [40.0, 40.0],
        "kd": [1.0, 1.0],
        "effort_limit": [80.0, None], "pd_target_range": None, "control_dt": 0.02, "sim_dt": 0.005,
        "decimation": 4, "integrator": "implicitfast", "self_collisions": False,
        "obs_layout": [{"name": "base_ang_vel", "offset": 0, "width": 3},
                       {"name": "last_action", "offset": 3, "width": 2}],
        "anchor_body": "torso", "tracked_bodies": ["pelvis", "torso", "foot"], "end_effector_bodies": ["foot"],
        "termination_thresholds": {"anchor_height": 0.25, "anchor_orientation": 0.8, "end_effector_height": 0.25},
        "model_xml": "robot.xml", "motion_files": ["clip.npz"],
    }


@pytest.mark.parametrize("key, value, needle", [
    ("kp", "abc", "metadata kp=\"abc\": expected a list of 2 finite numbers"),
    ("kp", [40.0], "metadata kp=[40.0]: expected a list of 2"),
    ("kd", [1.0, float("nan")], "metadata kd="),
    ("obs_layout", [{"name": "base_ang_vel", "width": 3}], "metadata obs_layout[0] (base_ang_vel): offset=null"),
    ("anchor_body", "head", "metadata anchor_body=\"head\": expected one of tracked_bodies"),
    ("termination_thresholds", {}, "metadata termination_thresholds={}: expected numbers >= 0"),
    ("decimation", -3, "metadata decimation=-3: expected an integer >= 1"),
    ("sim_dt", 0, "metadata sim_dt=0: expected a finite number of seconds > 0"),
    ("joint_names", ["hip"], "metadata joint_names=[\"hip\"]: expected action_dim=2 names"),
    ("effort_limit", [80.0, -1.0], "metadata effort_limit="),
    ("end_effector_bodies", ["hand"], "metadata end_effector_bodies="),
    ("integrator", "leapfrog", "metadata integrator=\"leapfrog\""),
    ("self_collisions", "no", "metadata self_collisions=\"no\": expected true or false"),
])
def test_sim2sim_refuses_bad_metadata_naming_the_key(key, value, needle):
    mod = _sim2sim()
    mod.check_metadata(_good_meta())  # the reference dict itself passes
    meta = {**_good_meta(), key: value}
    with pytest.raises(mod.Sim2SimError) as err:
        mod.check_metadata(meta)
    assert needle in str(err.value) and "\n" not in str(err.value), err.value


def test_sim2sim_checks_the_json_path_before_anything(tmp_path):
    out = subprocess.run([sys.executable, str(SIM2SIM), str(tmp_path / "missing.onnx"), "--json", "/proc/x.json"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    err = out.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("sim2sim: error: --json: cannot write /proc/x.json"), out.stderr

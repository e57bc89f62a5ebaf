"""ScalarWriter / read_scalars round trip, and the curve plot script on top."""

from __future__ import annotations

import errno
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pytest
from script_modules import load_script

from unilab.telemetry.scalars import ScalarWriter, read_scalars

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _f32(x: float) -> float:
    # event files store simple_value as float32
    return float(np.float32(x))


def test_round_trip_add_and_add_dict(tmp_path):
    rng = np.random.default_rng(0)
    sps = rng.uniform(1e3, 1e6, size=20)
    rew = rng.normal(size=20)
    with ScalarWriter(tmp_path) as w:
        for step in range(20):
            w.add("perf/steps_per_sec", sps[step], step * 100)
            w.add_dict({"reward/tracking": rew[step], "episode/length_mean": float(step)}, step * 100)
    got = read_scalars(tmp_path)
    assert set(got) == {"perf/steps_per_sec", "reward/tracking", "episode/length_mean"}
    assert got["perf/steps_per_sec"] == [(s * 100, _f32(v)) for s, v in enumerate(sps)]
    assert got["reward/tracking"] == [(s * 100, _f32(v)) for s, v in enumerate(rew)]
    assert got["episode/length_mean"] == [(s * 100, float(s)) for s in range(20)]


def test_nonfinite_written_as_is(tmp_path):
    w = ScalarWriter(tmp_path)
    w.add_dict({"loss/critic": float("nan"), "loss/actor": 1.0}, 0)
    w.add("loss/critic", float("inf"), 1)
    w.add("loss/critic", np.float64(2.5), 2)
    w.close()
    vals = [v for _, v in read_scalars(tmp_path)["loss/critic"]]
    assert math.isnan(vals[0]) and vals[1] == math.inf and vals[2] == 2.5


def test_flush_makes_data_readable_while_open(tmp_path):
    w = ScalarWriter(tmp_path, flush_secs=3600)
    w.add("a", 1.0, 0)
    w.flush()
    assert read_scalars(tmp_path)["a"] == [(0, 1.0)]
    w.close()


def test_periodic_flush_without_explicit_flush(tmp_path):
    w = ScalarWriter(tmp_path, flush_secs=0.2)
    w.add("a", 3.0, 7)
    # the writer's thread must flush on its own; poll generously
    deadline = time.monotonic() + 20.0
    seen = {}
    while time.monotonic() < deadline:
        seen = read_scalars(tmp_path)
        if seen.get("a"):
            break
        time.sleep(0.1)
    assert seen.get("a") == [(7, 3.0)]
    w.close()


def test_two_writers_in_one_dir(tmp_path):
    """Learner and collector processes may log distinct tags into one run directory."""
    a, b = ScalarWriter(tmp_path), ScalarWriter(tmp_path)
    for s in range(5):
        a.add("timing/learner_train_ms", s, 10 * s)
        b.add("timing/collector_env_step_ms", 2 * s, 10 * s + 1)
    a.close()
    b.close()
    got = read_scalars(tmp_path)
    assert got["timing/learner_train_ms"] == [(10 * s, float(s)) for s in range(5)]
    assert got["timing/collector_env_step_ms"] == [(10 * s + 1, float(2 * s)) for s in range(5)]


def test_unclosed_writer_flushed_at_exit(tmp_path):
    code = (f"from unilab.telemetry.scalars import ScalarWriter; "
            f"w = ScalarWriter({str(tmp_path)!r}, flush_secs=3600); w.add('a', 5.0, 3)")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]))
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=120)
    assert read_scalars(tmp_path)["a"] == [(3, 5.0)]


def test_bad_input_and_closed_writer(tmp_path):
    w = ScalarWriter(tmp_path)
    with pytest.raises(ValueError, match="step"):
        w.add("a", 1.0, -1)
    with pytest.raises(ValueError, match="step"):
        w.add("a", 1.0, 1.5)
    with pytest.raises(ValueError, match="not a number"):
        w.add("a", "fast", 0)
    with pytest.raises(ValueError, match="tag"):
        w.add("", 1.0, 0)
    w.close()
    with pytest.raises(RuntimeError, match="closed"):
        w.add("a", 1.0, 0)
    with pytest.raises(ValueError, match="flush_secs"):
        ScalarWriter(tmp_path, flush_secs=0)


def test_read_scalars_missing_or_empty_dir(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_scalars(tmp_path / "nope")
    with pytest.raises(FileNotFoundError, match="no TensorBoard event files"):
        read_scalars(tmp_path)


@pytest.fixture(scope="module")
def plot_module():
    return load_script("plot_curves.py")


def test_plot_default_tags(plot_module):
    tags = ["timing/learner_train_ms", "Episode/length_mean", "reward/tracking_body_pos", "perf/steps_per_sec",
            "cpu/process_cores"]
    assert plot_module.default_tags(tags) == ["Episode/length_mean", "reward/tracking_body_pos", "perf/steps_per_sec"]


def test_plot_script_writes_png(plot_module, tmp_path, capsys):
    logs = tmp_path / "run"
    with ScalarWriter(logs) as w:
        for step in range(10):
            w.add_dict({"episode/length_mean": step, "reward/total": -step, "perf/steps_per_sec": 1e4,
                        "timing/x_ms": 1.0}, step)
        w.add("reward/total", float("nan"), 10)
    out = tmp_path / "plots" / "curves.png"
    assert plot_module.main([str(logs), "--out", str(out)]) == 0
    img = iio.imread(out)
    assert img.ndim == 3 and img.shape[0] > 100 and img.shape[1] > 100
    assert img.std() > 0
    assert "3 curves" in capsys.readouterr().out

    assert plot_module.main([str(logs), "--tags", "timing/x_ms", "--out", str(tmp_path / "t.png")]) == 0
    assert (tmp_path / "t.png").stat().st_size > 0
    # an unknown tag or an empty log directory is a clear error, not a traceback
    assert plot_module.main([str(logs), "--tags", "nope", "--out", str(tmp_path / "n.png")]) == 2
    assert "nope" in capsys.readouterr().err
    assert plot_module.main([str(tmp_path / "plots"), "--out", str(tmp_path / "e.png")]) == 2

    # two runs on one figure, one line each
    other = tmp_path / "other"
    with ScalarWriter(other) as w:
        for step in range(10):
            w.add_dict({"episode/length_mean": 2 * step, "reward/total": step, "perf/steps_per_sec": 2e4}, step)
    capsys.readouterr()
    both = tmp_path / "both.png"
    assert plot_module.main([str(logs), str(other), "--labels", "a,b", "--out", str(both)]) == 0
    assert "3 curves, 2 runs" in capsys.readouterr().out
    assert not np.array_equal(iio.imread(both), iio.imread(out))
    assert plot_module.main([str(logs), str(other), "--labels", "a", "--out", str(both)]) == 2
    assert "1 labels for 2 log dirs" in capsys.readouterr().err


SCALARS_ON_A_FULL_DISK = """
import resource, sys
from unilab.telemetry.scalars import ScalarWriter
# the kernel refuses writes past 4 KiB with EFBIG, as a full disk refuses them with ENOSPC
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
w = ScalarWriter(sys.argv[1], flush_secs=0.05)
for step in range(300):
    w.add_dict({f"tag/{k}": float(k) for k in range(20)}, step)
    if step % 10 == 0:
        w.flush()
w.close()
print("done", w.failed)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_FSIZE/EFBIG as on Linux")
def test_write_errors_warn_once_and_the_caller_keeps_going(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run(
        [sys.executable, "-c", SCALARS_ON_A_FULL_DISK, str(tmp_path)], check=False, env=env, capture_output=True,
        text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "done True" in out.stdout
    warning = (f"unilab: warning: TensorBoard scalars to {tmp_path} failed "
               f"([Errno {errno.EFBIG}] {os.strerror(errno.EFBIG)})")
    assert out.stderr.count("unilab: warning:") == 1 and warning in out.stderr, out.stderr
    assert "training continues without scalars" in out.stderr
    assert "Traceback" not in out.stderr and "Exception" not in out.stderr, out.stderr
    assert read_scalars(tmp_path)["tag/0"][0] == (0, 0.0)  # what fitted is readable


def test_unwritable_log_dir_warns_and_drops_scalars(tmp_path, capsys):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    w = ScalarWriter(not_a_dir / "run")
    w.add("a", 1.0, 0)
    w.flush()
    w.close()
    assert w.failed
    err = capsys.readouterr().err
    assert err.count("unilab: warning: TensorBoard scalars to") == 1 and f"{not_a_dir / 'run'}" in err
    assert f"[Errno {errno.ENOTDIR}]" in err

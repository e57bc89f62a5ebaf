"""Training on a full disk and old-checkpoint pruning, end to end on the pendulum."""

from __future__ import annotations

import errno
import os
import resource
import subprocess
import sys

import pytest
from runtime_helpers import run_dirs, train_cmd

from unilab.telemetry.scalars import read_scalars


def _run(cmd, timeout=240, **kw):
    return subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=timeout, **kw)


def test_keep_checkpoints_leaves_the_newest(tmp_path):
    out = _run(train_cmd(tmp_path, "algo.max_iterations=12", "training.save_interval=1", "training.keep_checkpoints=3"))
    assert out.returncode == 0, out.stderr
    (run,) = run_dirs(tmp_path)
    assert sorted(p.name for p in run.iterdir() if p.name.startswith(("model_", ".model_"))) == [
        "model_10.pt", "model_11.pt", "model_12.pt",
    ]


def _file_size_limit(limit: int):
    def apply() -> None:
        # the kernel refuses every write past `limit` bytes of a file (EFBIG), as a full disk does (ENOSPC)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_FSIZE/EFBIG as on Linux")
def test_full_disk_keeps_training_then_fails_clearly(tmp_path):
    """No checkpoint fits: periodic saves report once and training goes on; the final one fails the run."""
    out = _run(
        train_cmd(
            tmp_path, "algo.max_iterations=30", "training.save_interval=10", "training.console_interval_s=0",
            "training.log_interval=1",  # ~1.5 KB of scalars an iteration: the event file hits the limit too
        ),
        preexec_fn=_file_size_limit(8192),
    )
    reason = f"[Errno {errno.EFBIG}] {os.strerror(errno.EFBIG)}"
    assert out.returncode == 1, out.stderr
    (run,) = run_dirs(tmp_path)
    # the first periodic save (iteration 10) fails, is reported once, and training goes on
    assert out.stderr.count("unilab: error: could not write checkpoint") == 1, out.stderr
    assert f"could not write checkpoint {run / 'model_10.pt'}: {reason}; training continues" in out.stderr
    assert "unilab: iter 30/30 |" in out.stdout
    # the final save fails the run with the cause, not torch's "enforce fail"
    assert f"train: error: could not write checkpoint {run / 'model_30.pt'}: {reason}" in out.stderr
    assert "enforce fail" not in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert not list(run.glob("*.pt*")) and not list(run.glob(".*.tmp"))  # no checkpoint, no temp file
    # the TensorBoard writer hit the same limit: one warning, training went on
    assert out.stderr.count("unilab: warning: TensorBoard scalars to") == 1, out.stderr
    assert f"TensorBoard scalars to {run} failed ({reason})" in out.stderr
    assert "perf/steps_per_sec" in read_scalars(run)  # what fitted is readable

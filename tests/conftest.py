"""Shared fixtures: Numba's workers, the built-in humanoid, an isolated unilab cache, a short G1 training run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import mujoco
import pytest

from unilab.assets.builtin import load_humanoid
from unilab.render.video import RenderUnavailable, select_gl_backend
from unilab.sim import numba_threads


@pytest.fixture(scope="session", autouse=True)
def _numba_workers_started_by_unilab():
    """Numba's workers start through unilab whatever test runs first.

    A bare parallel kernel (e.g. a unit test of one driver) would otherwise start
    them itself, and the tests that read their thread ids and pins back would
    depend on the order the tests run in, as a user's program would not: every
    env starts them through :func:`numba_threads.launch` before any kernel runs.
    """
    numba_threads.launch()


@pytest.fixture(scope="session")
def humanoid() -> mujoco.MjModel:
    return load_humanoid()


@pytest.fixture
def tmp_cache(tmp_path, monkeypatch):
    """Point $UNILAB_CACHE at a fresh directory for one test."""
    d = tmp_path / "cache"
    monkeypatch.setenv("UNILAB_CACHE", str(d))
    return d


# the CPU recipe cut down to seconds: a real G1 checkpoint for export / eval / sim2sim tests, not a good policy
G1_SHORT_RUN = [
    "--algo", "sac_cpu", "--task", "g1_motion_tracking",
    "algo.num_envs=16", "algo.max_iterations=20", "algo.learning_starts=5", "algo.batch_size=64",
    "training.no_play=true",
]


@pytest.fixture(scope="session")
def g1_short_run(tmp_path_factory) -> Path:
    """Run directory of a ~10 s G1 training run (20 iterations x 16 envs) holding ``model_20.pt``.

    Shared by the whole session: treat it as read-only (write outputs elsewhere).
    """
    root = tmp_path_factory.mktemp("g1_short_run")
    cmd = [sys.executable, "-m", "unilab.cli.train", *G1_SHORT_RUN, f"training.log_root={root}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (
        f"G1 short run failed (rc {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    runs = sorted((root / "fast_sac" / "g1_motion_tracking").glob("*_mujoco"))
    assert len(runs) == 1 and (runs[0] / "model_20.pt").is_file(), f"no model_20.pt under {root}"
    return runs[0]


@pytest.fixture(scope="module")
def gl_backend():
    """A working GL backend for rendering tests, probed once; skips (with the reason) on machines without one."""
    saved = os.environ.get("MUJOCO_GL")
    try:
        return select_gl_backend()
    except RenderUnavailable as e:
        pytest.skip(str(e))
    finally:
        # keep the probe's choice out of other tests' environment
        if saved is None:
            os.environ.pop("MUJOCO_GL", None)
        else:
            os.environ["MUJOCO_GL"] = saved


@pytest.fixture
def tiny_cfg(tmp_path):
    """Motion tracking on the tiny self-made robot (tests/tiny_robot.py): no download."""
    from tiny_robot import tiny_task_config

    return tiny_task_config(tmp_path)

"""``unilab-export --format holosoma`` driven by holosoma_inference's own policy classes (the ``test`` extra installs
holosoma-inference; its robot SDK interface and input providers are replaced by fakes, tests/holosoma_harness.py):
for the same robot state the file commands what ``unilab-eval`` commands, and the robot it drives in a MuJoCo loop
lasts as long."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from holosoma_harness import drive_locomotion, drive_tracking, still_start_clip

pytestmark = [pytest.mark.g1, pytest.mark.slow]
STEPS = 120


def test_tracking_export_runs_in_holosoma_inference_as_in_unilab_eval(g1_short_run, tmp_path):
    from unilab.assets import g1
    from unilab.deploy.holosoma import export_holosoma
    from unilab.motion_io.onnx_tables import embedded_clip

    clip = still_start_clip(g1.motion_paths()[0], tmp_path / "still_start.npz")
    overrides = {"task.motion_files": [str(clip)]}
    res = export_holosoma(g1_short_run, tmp_path / "wbt.onnx", overrides=overrides)
    assert res.kind == "wbt" and res.terms == sorted(res.terms) and res.obs_dim == 154
    # the tables lead by 2 frames; read back they are the clip's 325 frames and the 2 held, in place
    tables, data = embedded_clip(res.path), np.load(clip)
    assert tables.num_frames == 327 and tables.dof_names == tuple(str(n) for n in data["joint_names"])
    np.testing.assert_allclose(tables.joint_pos, data["joint_pos"][:, 7:], atol=1e-6)
    out = drive_tracking(g1_short_run, res.path, overrides, STEPS)
    assert out["max_action_difference"] < 1e-5, out
    assert out["first_failure_holosoma_inference"] == out["first_failure_unilab_eval"], out


@pytest.fixture(scope="module")
def loco_run(tmp_path_factory) -> Path:
    """A checkpoint of a few seconds of locomotion training (not a good policy: the contract is tested)."""
    root = tmp_path_factory.mktemp("loco_run")
    cmd = [sys.executable, "-m", "unilab.cli.train", "--algo", "sac_cpu_loco", "--task", "g1_locomotion",
           "algo.num_envs=16", "algo.max_iterations=20", "algo.learning_starts=5", "algo.batch_size=64",
           "training.no_play=true", f"training.log_root={root}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return next((root / "fast_sac" / "g1_locomotion").glob("*_mujoco"))


def test_locomotion_export_runs_in_holosoma_inference_as_in_unilab_eval(loco_run, tmp_path):
    from unilab.deploy.holosoma import export_holosoma

    res = export_holosoma(loco_run, tmp_path / "loco.onnx")
    assert res.kind == "loco" and res.obs_dim == 100
    assert res.metadata["action_scale"] == [0.25] * 29  # LocomotionPolicy's policy_action_scale
    out = drive_locomotion(loco_run, res.path, STEPS)
    assert out["max_action_difference"] < 1e-5, out
    assert out["first_failure_holosoma_inference"] == out["first_failure_unilab"], out

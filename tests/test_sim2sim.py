"""scripts/deploy/sim2sim.py: a policy runs from its ONNX metadata alone and tracks as it does in unilab-eval."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from script_modules import SCRIPTS, load_script

SCRIPT = SCRIPTS / "deploy" / "sim2sim.py"
METRICS = ("success_rate", "mpjpe_mm", "mpjpe_local_mm", "anchor_pos_err", "anchor_ori_err", "joint_pos_err",
           "joint_vel_err")
# sim2sim and unilab-eval run the same physics on the same observations; only the policy's float32
# arithmetic differs (onnxruntime vs torch, ~1e-6 in the action). A falling robot amplifies that, so the
# comparison covers the first STEPS control steps, where the two agree to ~1e-6 relative (measured);
# the tolerance leaves three orders of magnitude of margin for other CPUs and math libraries.
STEPS = 30
REL_TOL, ABS_TOL = 1e-3, 1e-4


def _script_module():
    return load_script("deploy/sim2sim.py")


def _run(*args: str, importtime: bool = False) -> subprocess.CompletedProcess:
    flags = ["-X", "importtime"] if importtime else []
    return subprocess.run([sys.executable, *flags, str(SCRIPT), *args], capture_output=True, text=True, timeout=600)


def _imported(stderr: str) -> set[str]:
    """Top-level names of the modules a ``-X importtime`` run imported."""
    names = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name and name != "imported package":
                names.add(name.split(".")[0])
    return names


def test_unknown_or_misplaced_piece_is_a_clear_error():
    mod = _script_module()
    meta = {"obs_dim": 6, "obs_layout": [{"name": "base_ang_vel", "offset": 0, "width": 3},
                                         {"name": "gps_position", "offset": 3, "width": 3}]}
    with pytest.raises(mod.Sim2SimError, match="'gps_position' is unknown"):
        mod.check_layout(meta)
    meta["obs_layout"][1] = {"name": "base_lin_vel", "offset": 4, "width": 3}
    with pytest.raises(mod.Sim2SimError, match="starts at 4, expected 3"):
        mod.check_layout(meta)
    meta["obs_layout"][1]["offset"] = 3
    meta["obs_dim"] = 7
    with pytest.raises(mod.Sim2SimError, match="cover 6 entries, the policy takes 7"):
        mod.check_layout(meta)


def test_rot6_is_the_first_two_columns():
    mod = _script_module()
    q = np.array([0.9, 0.1, -0.3, 0.2])
    q /= np.linalg.norm(q)
    r = mod.quat_to_mat(q)
    assert np.allclose(r @ r.T, np.eye(3))
    assert np.allclose(mod._rot6(q), r[:, :2].reshape(-1))


def test_files_without_the_contract_are_clear_errors(tmp_path):
    missing = tmp_path / "nope.onnx"
    proc = _run(str(missing))
    assert proc.returncode == 2 and str(missing) in proc.stderr
    graph = helper.make_graph([helper.make_node("Identity", ["obs"], ["action"])], "g",
                              [helper.make_tensor_value_info("obs", TensorProto.FLOAT, [None, 3])],
                              [helper.make_tensor_value_info("action", TensorProto.FLOAT, [None, 3])])
    bare = tmp_path / "bare.onnx"
    onnx.save(helper.make_model(graph), str(bare))
    proc = _run(str(bare))
    assert proc.returncode == 2 and "metadata lacks" in proc.stderr and "joint_names" in proc.stderr
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"not a model")
    proc = _run(str(junk))
    assert proc.returncode == 2 and str(junk) in proc.stderr


@pytest.mark.g1
def test_sim2sim_matches_unilab_eval_without_importing_unilab(g1_short_run, tmp_path):
    from unilab.deploy.export import export_policy

    policy = export_policy(g1_short_run, tmp_path / "policy.onnx")
    clip = Path(policy.metadata["motion_files"][0])

    out = tmp_path / "sim2sim.json"
    proc = _run(str(policy.path), "--clip", str(clip), "--steps", str(STEPS), "--json", str(out), importtime=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    imported = _imported(proc.stderr)
    assert {"mujoco", "numpy", "onnxruntime"} <= imported
    assert not imported & {"unilab", "torch", "numba"}, f"sim2sim imported {imported & {'unilab', 'torch', 'numba'}}"
    mine = json.loads(out.read_text())
    assert mine["steps"] == STEPS and mine["frames"] == STEPS + 1

    ev_json = tmp_path / "eval.json"
    ev = subprocess.run([sys.executable, "-m", "unilab.cli.eval", str(g1_short_run), "--clips", clip.stem,
                         "--max-frames", str(STEPS + 1), "--randomization", "off", "--json", str(ev_json),
                         "--no-plot", "--no-progress"], capture_output=True, text=True, timeout=600)
    assert ev.returncode == 0, ev.stderr[-3000:]
    theirs = json.loads(ev_json.read_text())["clips"][clip.stem]
    assert theirs["frames"] == STEPS + 1
    for key in METRICS:
        assert mine[key] == pytest.approx(theirs[key], rel=REL_TOL, abs=ABS_TOL), key
    assert mine["failed_at_frame"] == theirs["first_failure_frame"]
    assert mine["mpjpe_mm"] > 0  # the robot moved off the reference: the comparison is not of two zeros

    # a wrong model is caught before anything runs
    proc = _run(str(policy.path), "--model", str(tmp_path / "missing.xml"))
    assert proc.returncode == 2 and "missing.xml" in proc.stderr

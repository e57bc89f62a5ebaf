"""`unilab-export`: the ONNX graph computes the torch policy, its metadata is complete, bad input is clear."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from unilab.algo.sac.agent import FastSAC
from unilab.cli import export as export_cli
from unilab.cli.config import compose_config, explicit_algo_keys, split_argv, to_run_spec
from unilab.deploy.export import METADATA_KEYS, ROBOT_KEYS, export_policy, read_metadata
from unilab.runtime.checkpoint import checkpoint_path, save_checkpoint

MAX_ABS_DIFF = 1e-5  # float32 rounding between two runtimes; the tanh output is in [-1, 1]


def _pendulum_run(run_dir, iteration=7):
    """A pendulum checkpoint as the trainer writes it, with non-trivial normaliser statistics."""
    overrides, _ = split_argv(["--task", "pendulum", "algo.actor_hidden_dims=[32,16]",
                               "algo.critic_hidden_dims=[16]"])
    spec = to_run_spec(compose_config(overrides), explicit_algo_keys(overrides))
    agent = FastSAC(spec.algo, obs_dim=3, critic_obs_dim=3, action_dim=1, device="cpu")
    g = torch.Generator().manual_seed(0)
    agent.obs_normalizer.update(torch.randn(512, 3, generator=g, dtype=torch.float64) * torch.tensor([0.5, 3.0, 8.0])
                                + torch.tensor([0.2, -1.0, 4.0]))
    with torch.no_grad():  # a trained-looking actor (a fresh one has zero heads): reaches the tanh's tails
        for p in agent.actor.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 10.0 / max(1, p.shape[-1]) ** 0.5)
    payload = {"iteration": iteration, "agent": agent.state_dict(), "config": spec.raw, "task": spec.task_name}
    save_checkpoint(checkpoint_path(run_dir, iteration), payload)
    return agent


def _onnx_actions(path, obs):
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, {"obs": obs})[0]


def _assert_matches_torch(path, agent, scale):
    rng = np.random.default_rng(1)
    obs = (rng.standard_normal((1000, agent.obs_dim)) * scale).astype(np.float32)
    got = _onnx_actions(path, obs)
    want = agent.act(torch.from_numpy(obs), deterministic=True).numpy()
    assert got.shape == want.shape == (1000, agent.action_dim) and got.dtype == np.float32
    diff = float(np.abs(got - want).max())
    assert diff <= MAX_ABS_DIFF, f"onnxruntime vs torch: max abs diff {diff:.3g}"
    assert np.abs(got).max() <= 1.0
    return got


def test_pendulum_export_matches_torch_and_carries_metadata(tmp_path):
    run = tmp_path / "run"
    agent = _pendulum_run(run)
    out = tmp_path / "out" / "policy.onnx"
    assert export_cli.main([str(run), "--out", str(out)]) == 0
    got = _assert_matches_torch(out, agent, scale=5.0)
    assert (np.abs(got) > 0.99).any(), "the test should reach the saturated ends of the tanh"
    # dynamic batch: one row and many rows give the same per-row actions
    one = _onnx_actions(out, np.zeros((1, 3), np.float32))
    assert one.shape == (1, 1)
    graph = onnx.load(str(out))
    onnx.checker.check_model(graph)
    assert [i.name for i in graph.graph.input] == ["obs"] and [o.name for o in graph.graph.output] == ["action"]
    meta = read_metadata(out)
    assert set(METADATA_KEYS) <= set(meta)
    assert meta["task"] == "pendulum" and meta["obs_dim"] == 3 and meta["action_dim"] == 1
    assert meta["iteration"] == 7 and meta["config"]["task"]["name"] == "pendulum"
    assert meta["unilab_version"] == __import__("unilab").__version__
    assert meta["control_dt"] > 0
    for p in graph.metadata_props:  # every value is a JSON string
        json.loads(p.value)


def test_normaliser_off_and_newest_checkpoint_of_a_run_dir(tmp_path):
    run = tmp_path / "run"
    _pendulum_run(run, iteration=3)
    newest = _pendulum_run(run, iteration=12)
    res = export_policy(run, tmp_path / "p.onnx")
    assert res.checkpoint.name == "model_12.pt" and res.metadata["iteration"] == 12
    _assert_matches_torch(res.path, newest, scale=5.0)
    newest.obs_normalizer.enabled = False
    newest.cfg.obs_normalization = False
    save_checkpoint(checkpoint_path(run, 13), {"iteration": 13, "agent": newest.state_dict(),
                                               "config": res.metadata["config"], "task": "pendulum"})
    _assert_matches_torch(export_policy(run, tmp_path / "q.onnx").path, newest, scale=5.0)


def test_help_explains_every_flag(capsys):
    with pytest.raises(SystemExit) as exc:
        export_cli.main(["--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    for flag in ("RUN_DIR_OR_CHECKPOINT", "--out", "metadata"):
        assert flag in text


def test_missing_corrupt_and_foreign_checkpoints_are_clear_errors(tmp_path, capsys):
    out = tmp_path / "p.onnx"
    missing = tmp_path / "model_5.pt"
    assert export_cli.main([str(missing), "--out", str(out)]) == 2
    assert str(missing) in capsys.readouterr().err
    empty = tmp_path / "empty_run"
    empty.mkdir()
    assert export_cli.main([str(empty), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "no model_<iter>.pt" in err and str(empty) in err

    run = tmp_path / "run"
    _pendulum_run(run, iteration=4)
    good = checkpoint_path(run, 4)
    data = bytearray(good.read_bytes())
    truncated = tmp_path / "model_6.pt"
    truncated.write_bytes(data[: len(data) // 2])
    assert export_cli.main([str(truncated), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert str(truncated) in err and ("unreadable" in err or "corrupt" in err)
    data[len(data) // 3] ^= 0xFF  # one flipped byte: the sha256 trailer catches it
    flipped = tmp_path / "model_7.pt"
    flipped.write_bytes(bytes(data))
    assert export_cli.main([str(flipped), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert str(flipped) in err and "corrupt" in err
    foreign = tmp_path / "weights.pt"
    torch.save({"weights": torch.zeros(3)}, foreign)
    assert export_cli.main([str(foreign), "--out", str(out)]) == 2
    assert "not a unilab checkpoint" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.g1
def test_g1_export_matches_torch_and_describes_the_task(g1_short_run, tmp_path):
    from unilab.runtime.checkpoint import load_checkpoint
    from unilab.tasks.g1_motion_tracking.observations import POLICY_OBS

    out = tmp_path / "g1.onnx"
    res = export_policy(g1_short_run, out)
    payload, _ = load_checkpoint(g1_short_run)
    agent = FastSAC.from_checkpoint(payload["agent"], device="cpu")
    _assert_matches_torch(out, agent, scale=2.0)
    meta = read_metadata(out)
    assert {*METADATA_KEYS, *ROBOT_KEYS, "anchor_body", "tracked_bodies", "end_effector_bodies",
            "termination_thresholds", "motion_files"} <= set(meta)
    nj = agent.action_dim
    for key in ("joint_names", "obs_joint_names", "default_joint_pos", "action_scale", "action_bound", "kp", "kd",
                "effort_limit"):
        assert len(meta[key]) == nj, key
    assert sorted(meta["joint_names"]) == sorted(meta["obs_joint_names"])
    assert all(k > 0 for k in meta["kp"]) and all(s > 0 for s in meta["action_scale"])
    assert meta["control_dt"] == pytest.approx(meta["sim_dt"] * meta["decimation"])
    layout = meta["obs_layout"]
    known = {t.name for t in POLICY_OBS}
    offset = 0
    for piece in layout:
        assert piece["name"] in known and piece["offset"] == offset and piece["width"] > 0
        assert piece["noise"] >= 0
        offset += piece["width"]
    assert offset == meta["obs_dim"] == agent.obs_dim == res.obs_dim
    task = payload["config"]["task"]
    assert meta["anchor_body"] == task["anchor_body"] and meta["anchor_body"] in meta["tracked_bodies"]
    assert set(meta["termination_thresholds"]) == set(task["terminations"])
    assert meta["config"] == payload["config"]
    assert meta["model_xml"].endswith(".xml") and all(f.endswith(".npz") for f in meta["motion_files"])

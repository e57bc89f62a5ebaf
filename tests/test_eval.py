"""Tracking evaluation: the metric definitions on synthetic arrays, and unilab-eval on a short G1 run."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from unilab.eval.metrics import (
    ERROR_NAMES,
    METRIC_NAMES,
    TrackingAccumulator,
    frame_errors,
    summarize,
)


def _quat_z(angle: float, n: int) -> np.ndarray:
    return np.tile([np.cos(angle / 2), 0.0, 0.0, np.sin(angle / 2)], (n, 1))


def _rot_z(angle: float) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def _reference(n=3, b=4, j=5, seed=0):
    rng = np.random.default_rng(seed)
    pos = rng.normal(size=(n, b, 3))
    quat = rng.normal(size=(n, b, 4))
    quat /= np.linalg.norm(quat, axis=-1, keepdims=True)
    return pos, quat, rng.normal(size=(n, j)), rng.normal(size=(n, j))


def _errors(robot, ref, anchor=1):
    return frame_errors(*robot, *ref, anchor=anchor)


def test_identical_trajectories_have_zero_error():
    ref = _reference()
    err = _errors(ref, ref)
    assert set(err) == set(ERROR_NAMES)
    for name, v in err.items():
        assert v.shape == (3,)
        np.testing.assert_allclose(v, 0.0, atol=1e-6, err_msg=name)


def test_known_offset_gives_known_errors():
    pos, quat, jp, jv = _reference()
    offset = np.array([0.003, 0.004, 0.0])  # 5 mm
    err = _errors((pos + offset, quat, jp + 0.1, jv - 0.5), (pos, quat, jp, jv))
    np.testing.assert_allclose(err["mpjpe_mm"], 5.0, rtol=1e-9)
    np.testing.assert_allclose(err["anchor_pos_err"], 0.005, rtol=1e-9)
    np.testing.assert_allclose(err["mpjpe_local_mm"], 0.0, atol=1e-9)  # the anchor moved with the bodies
    np.testing.assert_allclose(err["anchor_ori_err"], 0.0, atol=1e-6)
    np.testing.assert_allclose(err["joint_pos_err"], 0.1, rtol=1e-9)
    np.testing.assert_allclose(err["joint_vel_err"], 0.5, rtol=1e-9)


def test_one_body_offset_is_averaged_over_bodies():
    pos, quat, jp, jv = _reference(b=4)
    robot = pos.copy()
    robot[:, 3] += [0.0, 0.0, 0.04]  # one body of four, 40 mm up; not the anchor (1)
    err = _errors((robot, quat, jp, jv), (pos, quat, jp, jv))
    np.testing.assert_allclose(err["mpjpe_mm"], 10.0, rtol=1e-9)
    assert np.all(err["mpjpe_local_mm"] > 0)
    np.testing.assert_allclose(err["anchor_pos_err"], 0.0, atol=1e-12)


def test_rotation_about_the_anchor_is_a_world_error_only():
    n, b, anchor, angle = 2, 4, 1, np.pi / 2
    pos, _, jp, jv = _reference(n=n, b=b)
    quat = np.tile(_quat_z(0.3, n)[:, None, :], (1, b, 1))
    a = pos[:, anchor:anchor + 1]
    rotated = a + (pos - a) @ _rot_z(angle).T
    rquat = quat.copy()
    rquat[:, anchor] = _quat_z(0.3 + angle, n)  # the robot's anchor turned by the same rotation
    err = _errors((rotated, rquat, jp, jv), (pos, quat, jp, jv), anchor=anchor)
    np.testing.assert_allclose(err["mpjpe_local_mm"], 0.0, atol=1e-9)
    np.testing.assert_allclose(err["anchor_ori_err"], angle, rtol=1e-9)
    # world error: every body moves by 2 r sin(angle / 2) with r its horizontal distance from the anchor
    r = np.linalg.norm((pos - a)[..., :2], axis=-1)
    np.testing.assert_allclose(err["mpjpe_mm"], 1000 * (2 * r * np.sin(angle / 2)).mean(axis=1), rtol=1e-9)
    assert np.all(err["mpjpe_mm"] > 0)


def test_turned_anchor_alone_is_a_local_error_only():
    pos, quat, jp, jv = _reference(n=2, b=3)
    quat[:, 1] = _quat_z(0.0, 2)
    turned = quat.copy()
    turned[:, 1] = _quat_z(np.pi, 2)
    err = _errors((pos, turned, jp, jv), (pos, quat, jp, jv), anchor=1)
    np.testing.assert_allclose(err["mpjpe_mm"], 0.0, atol=1e-12)
    np.testing.assert_allclose(err["anchor_ori_err"], np.pi, rtol=1e-6)
    # a half turn about z mirrors x and y: |local - local_ref| = 2 |horizontal offset from the anchor|
    d = np.linalg.norm((pos - pos[:, 1:2])[..., :2], axis=-1)
    np.testing.assert_allclose(err["mpjpe_local_mm"], 1000 * 2 * d.mean(axis=1), rtol=1e-9)


def test_quaternion_sign_does_not_count_as_error():
    pos, quat, jp, jv = _reference()
    err = _errors((pos, -quat, jp, jv), (pos, quat, jp, jv))
    np.testing.assert_allclose(err["anchor_ori_err"], 0.0, atol=1e-6)
    np.testing.assert_allclose(err["mpjpe_local_mm"], 0.0, atol=1e-9)


def test_accumulator_means_over_each_envs_frames_and_records_first_failure():
    acc = TrackingAccumulator([3, 2])
    for t in range(3):
        errors = {name: np.array([t + 1.0, 10.0 * (t + 1)]) for name in ERROR_NAMES}
        terminated = np.array([t == 1, t == 2])  # env 1's termination falls after its last frame
        acc.add(t, errors, terminated, {"anchor_height": terminated})
    per_env = acc.per_env()
    assert set(per_env) == set(METRIC_NAMES)
    np.testing.assert_allclose(per_env["mpjpe_mm"], [2.0, 15.0])  # (1+2+3)/3 and (10+20)/2
    np.testing.assert_array_equal(per_env["success_rate"], [0.0, 1.0])
    assert acc.first_failure.tolist() == [1, -1]
    assert acc.first_failure_term[0] == "anchor_height"
    s = summarize(per_env, np.array([0, 1]), ["a", "b"], [3, 2])
    assert s["clips"]["a"]["frames"] == 3 and s["clips"]["b"]["mpjpe_mm"] == 15.0
    assert s["overall"]["success_rate"] == 0.5  # mean over clips
    assert s["overall"]["mpjpe_mm"] == pytest.approx(8.5)


def test_accumulator_keeps_a_diverged_frame_visible():
    acc = TrackingAccumulator([2])
    acc.add(0, {name: np.array([0.0]) for name in ERROR_NAMES}, np.array([False]))
    acc.add(1, {name: np.array([np.nan]) for name in ERROR_NAMES}, np.array([True]))
    per_env = acc.per_env()
    assert np.isnan(per_env["mpjpe_mm"][0]) and per_env["success_rate"][0] == 0.0
    assert acc.first_failure_term[0] == "diverged"


def _enabled_flags(tree) -> list[bool]:
    if isinstance(tree, dict):
        return [v for k, v in tree.items() if k == "enabled"] + [f for v in tree.values() for f in _enabled_flags(v)]
    return []


def test_eval_config_has_no_noise_and_no_randomization_unless_kept():
    from unilab.eval.rollout import eval_task_config

    raw = {"name": "g1_motion_tracking", "obs_noise": {"joint_pos": 0.3, "joint_vel": 1.0}}
    cfg = eval_task_config(raw, randomization=False)
    assert not any(dataclasses.asdict(cfg.obs_noise).values())
    assert not any(np.any(v) for v in dataclasses.asdict(cfg.reset.noise).values())
    if not hasattr(cfg, "randomization"):
        pytest.skip("this task config has no randomization section")
    flags = _enabled_flags(dataclasses.asdict(cfg.randomization))
    assert flags and not any(flags)
    kept = eval_task_config(raw, randomization=True)
    assert kept.randomization == type(kept.randomization)()  # the checkpoint's (here: default) terms
    assert any(_enabled_flags(dataclasses.asdict(kept.randomization)))


def test_eval_of_a_task_that_is_not_motion_tracking_is_refused():
    from unilab.eval.rollout import eval_task_config

    with pytest.raises(ValueError, match="measures motion tracking.*'pendulum'"):
        eval_task_config({"name": "pendulum"}, randomization=False)


# ---------------------------------------------------------------------------------------------- G1
def _with_task_changes(run_dir, tmp_path, **task_changes):
    """A copy of the run's checkpoint whose stored task config has ``task_changes`` (nested dicts merged)."""
    from unilab.runtime.checkpoint import load_checkpoint, save_checkpoint

    payload, path = load_checkpoint(run_dir)
    task = payload["config"]["task"]
    for key, value in task_changes.items():
        task[key] = {**task.get(key, {}), **value} if isinstance(value, dict) else value
    return save_checkpoint(tmp_path / path.name, payload)


@pytest.mark.g1
def test_eval_cli_writes_json_table_and_png(g1_short_run, tmp_path, capsys):
    from unilab.cli.eval import main

    out = tmp_path / "report" / "eval.json"
    rc = main([str(g1_short_run), "--json", str(out), "--max-frames", "30", "--no-progress"])
    assert rc == 0
    report = json.loads(out.read_text())
    assert set(report["overall"]) == set(METRIC_NAMES)
    assert report["iteration"] == 20 and report["task"] == "g1_motion_tracking"
    assert report["clips"], "no per-clip entries"
    for name, entry in report["clips"].items():
        assert set(METRIC_NAMES) <= set(entry) and entry["frames"] == 30
        assert 0.0 <= entry["success_rate"] <= 1.0
        assert all(np.isfinite(entry[m]) for m in METRIC_NAMES)
        png = out.with_name(f"eval_{name}.png")
        assert png.is_file() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = capsys.readouterr().out
    assert "overall" in text and "mpjpe_mm" in text


@pytest.mark.g1
def test_eval_cli_unknown_clip_lists_the_valid_ones(g1_short_run, capsys):
    from unilab.cli.eval import main

    assert main([str(g1_short_run), "--clips", "no_such_clip", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "unknown clip 'no_such_clip'" in err and "0: " in err


@pytest.mark.g1
def test_start_state_is_the_reference_frame_and_nothing_resets(g1_short_run):
    from unilab.eval.rollout import eval_task_config
    from unilab.runtime.checkpoint import load_checkpoint
    from unilab.tasks.g1_motion_tracking.config import TerminationsConfig
    from unilab.tasks.registry import make_env

    payload, _ = load_checkpoint(g1_short_run)
    cfg = eval_task_config(payload["config"]["task"], randomization=False)
    # tiny thresholds: every env fails at the first step; without auto-reset it must keep running
    cfg = dataclasses.replace(cfg, terminations=TerminationsConfig(1e-9, 1e-9, 1e-9))
    env = make_env("g1_motion_tracking", cfg, 2, pool_kwargs={"nthread": 1})
    try:
        env.auto_reset = False
        lib = env.motion
        frames = np.array([0, 5])
        env.start_at(np.zeros(2, dtype=np.int64), frames)
        idx = lib.flat_index(np.zeros(2, dtype=np.int64), frames)
        np.testing.assert_allclose(env.pool.qpos, lib.qpos[idx], atol=1e-12)
        np.testing.assert_allclose(env.pool.qvel, lib.qvel[idx], atol=1e-12)
        np.testing.assert_allclose(env.body_pos, lib.body_pos_w[idx], atol=1e-9)
        np.testing.assert_allclose(env.joint_pos, lib.joint_pos[idx], atol=1e-12)
        prev = env.pool.qpos.copy()
        for t in range(1, 8):
            _, _, terminated, _, _ = env.step(np.zeros((2, env.action_dim)))
            assert terminated.all()
            assert env.frame.tolist() == (frames + t).tolist()  # no restart at a sampled frame
            # the state moved on by one step from where it was, not back to a reference start
            assert np.abs(env.pool.qpos - prev).max() < 0.5
            prev = env.pool.qpos.copy()
    finally:
        env.close()


@pytest.mark.g1
def test_success_follows_the_termination_thresholds(g1_short_run, tmp_path):
    from unilab.eval.rollout import evaluate

    strict = _with_task_changes(g1_short_run, tmp_path / "strict", terminations={
        "anchor_height": 1e-9, "anchor_orientation": 1e-9, "end_effector_height": 1e-9})
    res = evaluate(strict, max_frames=12, progress=False)
    report = res.to_json()
    assert report["overall"]["success_rate"] == 0.0
    entry = next(iter(report["clips"].values()))
    assert entry["first_failure_frame"] == 1 and entry["first_failure_terms"]

    loose = _with_task_changes(g1_short_run, tmp_path / "loose", terminations={
        "anchor_height": 1e3, "anchor_orientation": 3.0, "end_effector_height": 1e3})
    res = evaluate(loose, max_frames=12, progress=False)
    assert res.summary["overall"]["success_rate"] == 1.0
    # frame 0 is the reference itself; later frames drift from it, the same in both rollouts
    assert res.errors["mpjpe_mm"][0, 0] < 1e-6
    assert res.summary["overall"]["mpjpe_mm"] > 0


@pytest.mark.g1
def test_eval_is_deterministic_and_ignores_observation_noise(g1_short_run, tmp_path):
    from unilab.eval.rollout import evaluate

    noisy = _with_task_changes(g1_short_run, tmp_path, obs_noise={"joint_pos": 0.5, "joint_vel": 3.0})
    a = evaluate(g1_short_run, max_frames=15, progress=False, seed=0)
    b = evaluate(noisy, max_frames=15, progress=False, seed=7)
    assert a.summary == b.summary


# ------------------------------------------------------------------------------ during training
@pytest.mark.slow
def test_training_survives_a_failing_evaluation(tmp_path):
    """A pendulum cannot be evaluated: the evaluation subprocess fails, training finishes normally."""
    import subprocess

    from runtime_helpers import run_dirs, train_cmd

    out = subprocess.run(train_cmd(tmp_path, "algo.max_iterations=12", "training.eval_interval=5"),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "evaluation of iteration 5 failed" in out.stderr
    (run,) = run_dirs(tmp_path)
    assert "measures motion tracking" in (run / "eval" / "eval_5.log").read_text()
    assert not list((run / "eval").glob("policy_*.pt"))  # snapshots are removed
    assert (run / "model_12.pt").is_file()


def test_eval_interval_must_not_be_negative():
    from unilab.runtime.config import TrainingConfig

    with pytest.raises(ValueError, match="training.eval_interval"):
        TrainingConfig(eval_interval=-1)


class _Writer:
    def __init__(self):
        self.calls = []

    def add_dict(self, values, step):
        self.calls.append((dict(values), step))


@pytest.mark.slow
@pytest.mark.g1
def test_periodic_eval_logs_eval_scalars_at_the_iterations_step(g1_short_run, tmp_path):
    from unilab.runtime.checkpoint import load_checkpoint
    from unilab.runtime.periodic_eval import PeriodicEval

    payload, _ = load_checkpoint(g1_short_run)
    # a short clip keeps the subprocess quick
    payload["config"]["task"]["motion_files"] = [_short_clip(payload, tmp_path)]
    ev = PeriodicEval(tmp_path / "run", 10, lambda i: {**payload, "iteration": i}, step_scale=16)
    writer = _Writer()
    for it in range(1, 10):
        ev.step(it, writer)
        assert ev.proc is None
    ev.step(10, writer)
    assert ev.proc is not None and (tmp_path / "run" / "eval" / "policy_10.pt").is_file()
    ev.finish(writer)
    assert ev.proc is None
    ((values, step),) = writer.calls
    assert step == 160 and set(values) == {f"eval/{m}" for m in METRIC_NAMES}
    assert ev.results[10]["mpjpe_mm"] == pytest.approx(values["eval/mpjpe_mm"], rel=1e-6)
    assert (tmp_path / "run" / "eval" / "eval_10.json").is_file()
    assert not (tmp_path / "run" / "eval" / "policy_10.pt").exists()


def _short_clip(payload, tmp_path):
    """The run's first clip cut to 20 frames (50 fps), as an npz."""
    from unilab.eval.rollout import eval_task_config
    from unilab.tasks.g1_motion_tracking.env import task_motion_files

    src = task_motion_files(eval_task_config(payload["config"]["task"], randomization=False))[0]
    with np.load(src) as npz:
        data = {k: npz[k] for k in ("fps", "joint_pos", "joint_vel", "joint_names")}
    data["joint_pos"], data["joint_vel"] = data["joint_pos"][:20], data["joint_vel"][:20]
    path = tmp_path / "short.npz"
    np.savez(path, **data)
    return str(path)

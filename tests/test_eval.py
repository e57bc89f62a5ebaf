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
    from unilab.tasks.g1_motion_tracking.evaluation import eval_task_config
    from unilab.tasks.registry import task_config

    raw = task_config("g1_motion_tracking", {"obs_noise": {"joint_pos": 0.3, "joint_vel": 1.0}})
    cfg = eval_task_config(raw, randomization=False)
    assert not any(dataclasses.asdict(cfg.obs_noise).values())
    noise = dataclasses.asdict(cfg.reset.noise)
    noise.pop("joint_pos_limit_factor", None)  # a clamp of the noisy joints, not a noise level
    assert not any(np.any(v) for v in noise.values())
    if not hasattr(cfg, "randomization"):
        pytest.skip("this task config has no randomization section")
    flags = _enabled_flags(dataclasses.asdict(cfg.randomization))
    assert flags and not any(flags)
    kept = eval_task_config(raw, randomization=True)
    assert kept.randomization == type(kept.randomization)()  # the checkpoint's (here: default) terms
    assert any(_enabled_flags(dataclasses.asdict(kept.randomization)))


def test_eval_of_a_task_that_is_not_motion_tracking_is_refused():
    from unilab.tasks.g1_motion_tracking.evaluation import eval_task_config
    from unilab.tasks.registry import task_config

    with pytest.raises(ValueError, match="measures motion tracking.*'pendulum'"):
        eval_task_config(task_config("pendulum", {}), randomization=False)


# ------------------------------------------------------------------ baselines and random starts (tiny robot)


def _tiny_env(cfg, n, **cfg_changes):
    from unilab.tasks.g1_motion_tracking.env import MotionTrackingEnv

    return MotionTrackingEnv(dataclasses.replace(cfg, **cfg_changes), n, pool_kwargs={"nthread": 1})


def _first_steps_joint_error(cfg, kind, frames=(10, 20, 30, 40), steps=4):
    """Mean joint_pos_err over the first ``steps`` steps of ``kind`` from exact reference starts at ``frames``."""
    from unilab.tasks.g1_motion_tracking.evaluation import _errors, baseline_policy

    env = _tiny_env(cfg, len(frames))
    try:
        env.auto_reset = False
        obs = env.start_at(np.zeros(len(frames), dtype=np.int64), np.array(frames))
        policy = baseline_policy(env, kind)
        errs = []
        for _ in range(steps):
            obs, *_ = env.step(policy(obs))
            errs.append(_errors(env)["joint_pos_err"])
        return float(np.mean(errs))
    finally:
        env.close()


def test_reference_action_targets_the_frame_the_next_reward_scores(tiny_cfg):
    from unilab.tasks.g1_motion_tracking.evaluation import next_scored_rows, reference_action, scored_rows

    env = _tiny_env(tiny_cfg, 3)
    try:
        env.auto_reset = False
        env.start_at(np.zeros(3, dtype=np.int64), np.array([0, 7, 44]))
        lib = env.motion
        rows = next_scored_rows(env)
        np.testing.assert_array_equal(rows, scored_rows(env) + [1, 1, 1])
        a = reference_action(env)
        assert a.shape == (3, env.action_dim) and np.all(np.abs(a) <= 1.0)
        target = env.action_default + env.action_scale * a
        np.testing.assert_allclose(target, lib.joint_pos[rows][:, env.act_joint], atol=1e-12)  # inside [-1, 1] here
        env.step(a)
        np.testing.assert_array_equal(scored_rows(env), rows)  # the step scored the frame the action aimed at
        # at a clip's last frame the target stays on it (the env truncates there)
        last = int(lib.num_frames[0]) - 1
        env.start_at(np.zeros(3, dtype=np.int64), np.array([last, last, last]))
        np.testing.assert_array_equal(next_scored_rows(env), scored_rows(env))
    finally:
        env.close()


def test_reference_policy_tracks_the_first_steps_far_better_than_zero(tiny_cfg):
    zero = _first_steps_joint_error(tiny_cfg, "zero")
    reference = _first_steps_joint_error(tiny_cfg, "reference")
    assert zero > 0.1  # the clip's joints swing 0.2-0.6 rad away from the default pose
    assert reference < 0.3 * zero, (reference, zero)


def test_baseline_policy_shapes_and_unknown_kind(tiny_cfg):
    from unilab.tasks.g1_motion_tracking.evaluation import baseline_policy

    env = _tiny_env(tiny_cfg, 5)
    try:
        obs = env.reset()
        assert np.all(baseline_policy(env, "zero")(obs) == 0.0)
        r = baseline_policy(env, "random", seed=3)(obs)
        assert r.shape == (5, env.action_dim) and np.all(np.abs(r) <= 1.0) and np.std(r) > 0.1
        with pytest.raises(ValueError, match="zero, reference, random.*'walk'"):
            baseline_policy(env, "walk")
    finally:
        env.close()


@pytest.mark.parametrize("kind", ["zero", "reference"])
def test_random_start_metrics_count_the_asked_episodes(tiny_cfg, kind):
    from unilab.tasks.g1_motion_tracking.evaluation import RANDOM_START_KEYS, baseline_policy, random_start_metrics

    env = _tiny_env(tiny_cfg, 4)
    try:
        env.auto_reset = False
        m = random_start_metrics(env, baseline_policy(env, kind), episodes=6)
        assert env.auto_reset is False  # restored
        assert tuple(m) == RANDOM_START_KEYS
        assert m["episodes"] == 6  # envs 0 and 1 give two episodes each, envs 2 and 3 one
        assert 1.0 <= m["episode_length_mean"] <= 59 and m["episode_length_std"] >= 0.0
        assert 0.0 <= m["failure_rate"] <= 1.0
        assert m["total_steps"] % 4 == 0 and m["total_steps"] >= 6 * m["episode_length_mean"]
        assert m["measured_steps"] <= 6 * m["episode_length_mean"] - 6 + 1e-9  # the ending steps are left out
        assert all(np.isfinite(m[name]) and m[name] >= 0.0 for name in ERROR_NAMES)
    finally:
        env.close()


def test_random_start_episode_lengths_follow_the_time_limit(tiny_cfg):
    """With failures off and a 5-step time limit, no episode fails and none lasts more than 5 steps."""
    from unilab.tasks.g1_motion_tracking.config import TerminationsConfig
    from unilab.tasks.g1_motion_tracking.evaluation import baseline_policy, random_start_metrics

    env = _tiny_env(tiny_cfg, 3, max_episode_length_s=5 * tiny_cfg.control_dt,
                    terminations=TerminationsConfig(1e3, 4.0, 1e3))
    try:
        m = random_start_metrics(env, baseline_policy(env, "zero"), episodes=7)
        assert m["failure_rate"] == 0.0 and m["episodes"] == 7
        # a start in a clip's last 5 frames ends earlier, on the clip end (truncated too)
        assert 3.0 < m["episode_length_mean"] <= 5.0
        # every step of a measured episode but its last is measured
        assert m["measured_steps"] == pytest.approx(7 * (m["episode_length_mean"] - 1))
    finally:
        env.close()


def test_random_start_action_statistics_tell_a_held_posture_from_jitter(tiny_cfg):
    """A constant action c: |action| mean |c|, no change. The action k c at an episode's k-th step: a change
    of c each step; an episode start (from (L - 1) c back to 0) is not a change."""
    from unilab.tasks.g1_motion_tracking.evaluation import random_start_metrics

    env = _tiny_env(tiny_cfg, 3)
    try:
        c = np.linspace(-0.01, 0.01, env.action_dim)
        held = random_start_metrics(env, lambda obs: np.tile(30 * c, (env.num_envs, 1)), episodes=5)
        assert held["action_abs_mean"] == pytest.approx(30 * np.abs(c).mean())
        assert held["action_change_rms"] == 0.0
        ramp = random_start_metrics(env, lambda obs: env.book.lengths[:, None] * c, episodes=8)
        assert ramp["episodes"] == 8 and ramp["episode_length_mean"] > 2.0
        assert ramp["action_change_rms"] == pytest.approx(np.sqrt(np.mean(c**2)))
    finally:
        env.close()


def test_agent_policy_feeds_the_actor_observations_and_asks_for_the_mean(tiny_cfg):
    import torch

    from unilab.eval.rollout import agent_policy
    from unilab.tasks.g1_motion_tracking.evaluation import random_start_metrics

    calls = []

    class Agent:
        def act(self, obs, deterministic=False):
            calls.append((tuple(obs.shape), deterministic))
            return torch.zeros(obs.shape[0], 2)

    env = _tiny_env(tiny_cfg, 3)
    try:
        m = random_start_metrics(env, agent_policy(Agent()), episodes=3)
        assert m["episodes"] == 3 and calls
        assert set(calls) == {((3, env.obs_dim), True)}
    finally:
        env.close()


def test_unwritable_json_path_exits_2_before_any_rollout(tmp_path, monkeypatch, capsys):
    import unilab.tasks.g1_motion_tracking.evaluation as evaluation
    from unilab.cli.eval import main

    def no_rollout(*args, **kwargs):
        raise AssertionError("the rollout started before the report path was checked")

    monkeypatch.setattr(evaluation, "evaluate", no_rollout)
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    bad = blocker / "out.json"  # its folder would have to be a file
    assert main(["--policy", "zero", "--json", str(bad), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(bad) in err[0] and "--json" in err[0]


def test_checkpoint_policy_without_a_checkpoint_is_refused(capsys):
    from unilab.cli.eval import main

    assert main(["--no-progress"]) == 2
    assert "RUN_DIR_OR_CHECKPOINT is required with --policy checkpoint" in capsys.readouterr().err
    assert main(["--policy", "zero", "max_frames=3"]) == 2
    assert "task.KEY=VALUE" in capsys.readouterr().err


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
    from unilab.runtime.checkpoint import load_checkpoint
    from unilab.tasks.g1_motion_tracking.config import TerminationsConfig
    from unilab.tasks.g1_motion_tracking.evaluation import eval_task_config
    from unilab.tasks.registry import make_env, task_config

    payload, _ = load_checkpoint(g1_short_run)
    cfg = eval_task_config(task_config("g1_motion_tracking", payload["config"]["task"]), randomization=False)
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
        np.testing.assert_allclose(env.state.body_pos, lib.body_pos_w[idx], atol=1e-9)
        np.testing.assert_allclose(env.state.joint_pos, lib.joint_pos[idx], atol=1e-12)
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
    from unilab.tasks.g1_motion_tracking.evaluation import evaluate

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
    from unilab.tasks.g1_motion_tracking.evaluation import evaluate

    noisy = _with_task_changes(g1_short_run, tmp_path, obs_noise={"joint_pos": 0.5, "joint_vel": 3.0})
    a = evaluate(g1_short_run, max_frames=15, progress=False, seed=0)
    b = evaluate(noisy, max_frames=15, progress=False, seed=7)
    assert a.summary == b.summary


# ------------------------------------------------------------------------------ during training
@pytest.mark.slow
def test_a_failing_evaluation_is_reported_and_cleaned_up(tmp_path, capsys):
    """An evaluation subprocess that fails (here: a snapshot of a task unilab-eval cannot measure) is reported
    once; the trainer's loop goes on, and the snapshot is removed."""
    from unilab.runtime.periodic_eval import PeriodicEval

    payload = {"iteration": 0, "agent": {}, "config": {}, "task": "pendulum"}
    ev = PeriodicEval(tmp_path / "run", 5, lambda i: {**payload, "iteration": i}, step_scale=4, headline=())
    writer = _Writer()
    ev.step(5, writer)
    assert ev.proc is not None
    ev.finish(writer)
    assert writer.calls == [] and 5 not in ev.results
    assert "evaluation of iteration 5 failed" in capsys.readouterr().err
    assert (tmp_path / "run" / "eval" / "eval_5.log").read_text().strip()
    assert not list((tmp_path / "run" / "eval").glob("policy_*.pt"))


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
def test_periodic_eval_logs_eval_scalars_at_the_iterations_step(g1_short_run, tmp_path, capsys):
    from unilab.runtime.checkpoint import load_checkpoint
    from unilab.runtime.periodic_eval import PeriodicEval
    from unilab.tasks.g1_motion_tracking.evaluation import HEADLINE

    payload, _ = load_checkpoint(g1_short_run)
    # a short clip keeps the subprocess quick
    payload["config"]["task"]["motion_files"] = [_short_clip(payload, tmp_path)]
    ev = PeriodicEval(tmp_path / "run", 10, lambda i: {**payload, "iteration": i}, step_scale=16,
                      headline=HEADLINE)
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
    assert f"eval @ iter 10: success {values['eval/success_rate']:.2f} | mpjpe " in capsys.readouterr().out
    assert (tmp_path / "run" / "eval" / "eval_10.json").is_file()
    assert not (tmp_path / "run" / "eval" / "policy_10.pt").exists()


def _short_clip(payload, tmp_path):
    """The run's first clip cut to 20 frames (50 fps), as an npz."""
    from unilab.tasks.g1_motion_tracking.env import task_motion_files
    from unilab.tasks.registry import task_config

    src = task_motion_files(task_config("g1_motion_tracking", payload["config"]["task"]))[0]
    with np.load(src) as npz:
        data = {k: npz[k] for k in ("fps", "joint_pos", "joint_vel", "joint_names")}
    data["joint_pos"], data["joint_vel"] = data["joint_pos"][:20], data["joint_vel"][:20]
    path = tmp_path / "short.npz"
    np.savez(path, **data)
    return str(path)


# ------------------------------------------------------------------------------- G1 baselines
@pytest.mark.g1
def test_g1_reference_outlasts_zero_on_random_starts():
    from unilab.tasks.g1_motion_tracking.evaluation import evaluate

    common = dict(starts="random", num_envs=16, episodes=32, threads=1, progress=False)
    zero = evaluate(None, policy="zero", **common).summary["overall"]
    reference = evaluate(None, policy="reference", **common).summary["overall"]
    assert zero["episodes"] == reference["episodes"] == 32
    # measured at 128 envs: 18.7 steps for zero, 27.4 for reference
    assert reference["episode_length_mean"] > zero["episode_length_mean"] + 2, (reference, zero)
    assert reference["joint_pos_err"] < zero["joint_pos_err"]


@pytest.mark.g1
def test_g1_zero_policy_cli_runs_without_a_checkpoint(tmp_path, capsys):
    from unilab.cli.eval import main
    from unilab.tasks.g1_motion_tracking.evaluation import RANDOM_START_KEYS

    out = tmp_path / "zero.json"
    rc = main(["--policy", "zero", "--starts", "random", "--num-envs", "8", "--episodes", "8", "--threads", "1",
               "--json", str(out), "--no-progress", "task.max_episode_length_s=2"])
    assert rc == 0
    report = json.loads(out.read_text())
    assert report["policy"] == "zero" and report["starts"] == "random"
    assert report["checkpoint"] is None and report["iteration"] is None
    assert report["task"] == "g1_motion_tracking" and report["config"]["task"]["max_episode_length_s"] == 2
    assert set(report["overall"]) == set(RANDOM_START_KEYS) and report["overall"]["episodes"] == 8
    text = capsys.readouterr().out
    assert "policy zero, random starts" in text and "episode_length_mean" in text

    clip_out = tmp_path / "clip" / "zero.json"
    rc = main(["--policy", "zero", "--max-frames", "5", "--clips", "0", "--threads", "1", "--json", str(clip_out),
               "--no-progress", "--no-plot"])
    assert rc == 0
    report = json.loads(clip_out.read_text())
    assert report["policy"] == "zero" and report["starts"] == "clip"
    assert set(report["overall"]) == set(METRIC_NAMES) and len(report["clips"]) == 1


def test_clip_frame_counts_are_the_motion_librarys(tiny_cfg):
    from unilab.motion_io.clip import clip_frame_counts
    from unilab.tasks.g1_motion_tracking.env import MotionTrackingEnv, task_motion_files

    for cfg in (tiny_cfg, dataclasses.replace(tiny_cfg, decimation=3)):  # another control_dt resamples the clip
        env = MotionTrackingEnv(cfg, 1)
        try:
            counts = clip_frame_counts(task_motion_files(cfg), cfg.control_dt)
            np.testing.assert_array_equal(counts, env.motion.num_frames)
        finally:
            env.close()


@pytest.mark.parametrize(("argv", "named"), [
    (["--speed", "1.0"], "--speed: locomotion option(s), not read with --task g1_motion_tracking"),
    (["--pushes", "off", "--envs-per-bin", "4"], "--envs-per-bin, --pushes: locomotion option(s)"),
    (["--task", "g1_locomotion", "--starts", "random"], "--starts: motion_tracking option(s), not read with "
                                                        "--task g1_locomotion"),
    (["--task", "t1_locomotion", "--clips", "a"], "--clips: motion_tracking option(s), not read with "
                                                  "--task t1_locomotion"),
])
def test_an_option_the_task_does_not_read_is_refused(argv, named, capsys):
    from unilab.cli import eval as eval_cli

    with pytest.raises(SystemExit) as done:
        eval_cli.main(["--policy", "zero", *argv])
    assert done.value.code == 2 and named in capsys.readouterr().err


@pytest.mark.parametrize(("flag", "value", "floor"), [
    ("--episodes", "0", 1), ("--num-envs", "0", 1), ("--envs-per-clip", "0", 1), ("--max-frames", "1", 2),
    ("--threads", "0", 1), ("--start-stride", "0", 1),
])
def test_out_of_range_options_are_refused_naming_the_flag(flag, value, floor, capsys):
    from unilab.cli import eval as eval_cli

    assert eval_cli.main(["--policy", "zero", flag, value, "--no-plot", "--no-progress"]) == 2
    assert f"unilab-eval: error: {flag} must be >= {floor}" in capsys.readouterr().err


@pytest.mark.g1
def test_g1_start_sweep_starts_every_kth_frame_and_keeps_the_frame_0_result(tmp_path, capsys):
    from unilab.cli.eval import main
    from unilab.tasks.g1_motion_tracking.evaluation import evaluate

    common = dict(policy="zero", clips=["0"], max_frames=40, threads=1, progress=False)  # zero fails from every start
    plain = evaluate(None, **common).to_json()["clips"]
    sweep = evaluate(None, start_stride=10, **common)
    clip = sweep.to_json()["clips"]
    (name, entry), = clip.items()
    assert entry["start_frames"] == [0, 10, 20, 30] and sweep.env_start.tolist() == [0, 10, 20, 30]
    # the frame-0 start is the plain evaluation's rollout: the same failure, wherever the later starts fail
    assert entry["first_failure_frame"] == plain[name]["first_failure_frame"]
    assert entry["failure_frames"][0] == plain[name]["first_failure_frame"]
    for start, failed in zip(entry["start_frames"], entry["failure_frames"]):
        assert start < failed < start + 20  # holding the default pose fails within 20 frames (11 from frame 0)
    assert entry["success_rate"] == 0.0

    out = tmp_path / "sweep.json"
    assert main(["--policy", "zero", "--clips", "0", "--max-frames", "40", "--start-stride", "10", "--threads",
                 "1", "--json", str(out), "--no-progress", "--no-plot"]) == 0
    assert json.loads(out.read_text())["clips"][name]["failure_frames"] == entry["failure_frames"]
    assert "start->failure frame: 0->" in capsys.readouterr().out

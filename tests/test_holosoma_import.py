"""holosoma's deploy format in unilab: fetching the published policies, reading a file (kind, terms, action mapping,
embedded clip), the task chosen by the file's joints, the observation assembled from a task's pieces, and the
published G1 and T1 policies in unilab's envs."""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import zipfile
from pathlib import Path

import mujoco
import numpy as np
import onnxruntime as ort
import pytest
from holosoma_files import loco_file, wbt_file

from unilab.assets import holosoma, holosoma_inference
from unilab.interop import holosoma_actions
from unilab.interop.holosoma_onnx import HolosomaFormatError, PolicyFile, read_policy_file, session
from unilab.interop.holosoma_terms import DEFAULT_ACTOR_TERMS, file_term_names, missing_terms, task_terms
from unilab.motion_io.onnx_tables import LEAD_KEY, embedded_clip

NAMES = [f"j{i}" for i in range(3)]


# ------------------------------------------------------------------ fetch (no network)
def _fake_policy_wheel(path: Path) -> str:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("holosoma_inference/__init__.py", b"")
        for rel in holosoma_inference.PUBLISHED.values():
            zf.writestr("holosoma_inference/" + rel, rel.encode())
    return holosoma.sha256_file(path)


def test_policies_fetched_once_into_the_cache(tmp_cache, tmp_path, monkeypatch):
    wheel = tmp_path / "w.whl"
    monkeypatch.setattr(holosoma_inference, "WHEEL_SHA256", _fake_policy_wheel(wheel))
    monkeypatch.delenv(holosoma_inference.WHEEL_ENV_VAR, raising=False)
    calls = []

    def download(dest: Path) -> Path:
        calls.append(dest)
        out = dest / holosoma_inference.WHEEL_NAME
        out.write_bytes(wheel.read_bytes())
        return out

    root = holosoma_inference.ensure_policies(downloader=download, progress=False)
    assert root == tmp_cache / f"holosoma_inference-{holosoma_inference.VERSION}"
    for rel in holosoma_inference.PUBLISHED.values():
        assert (root / rel).read_bytes() == rel.encode()
    assert not (root / "__init__.py").exists()
    manifest = json.loads((root / "manifest.json").read_text())
    assert manifest["files"]["models/wbt/ppo_g1_29dof_dancing.onnx"]["sha256"] == hashlib.sha256(
        b"models/wbt/ppo_g1_29dof_dancing.onnx").hexdigest()
    assert holosoma_inference.ensure_policies(downloader=download, progress=False) == root
    assert len(calls) == 1  # cached: no second download
    assert holosoma_inference.published_policy("ppo_g1_29dof.onnx") == root / "models/loco/g1_29dof/ppo_g1_29dof.onnx"
    with pytest.raises(ValueError, match="published: fastsac_g1_29dof_dancing"):
        holosoma_inference.published_policy("nope")


def test_policies_offline_error_says_what_to_download(tmp_cache, monkeypatch):
    monkeypatch.delenv(holosoma_inference.WHEEL_ENV_VAR, raising=False)

    def offline(dest: Path) -> Path:
        raise holosoma.WheelDownloadError("network is unreachable")

    with pytest.raises(holosoma.AssetError) as err:
        holosoma_inference.ensure_policies(downloader=offline, progress=False)
    text = str(err.value)
    assert "python -m pip download --no-deps holosoma-inference==0.1.3" in text
    assert str(tmp_cache / "downloads" / holosoma_inference.WHEEL_NAME) in text
    assert holosoma_inference.WHEEL_ENV_VAR in text and holosoma_inference.WHEEL_SHA256 in text


def test_policies_wrong_wheel_is_refused(tmp_cache, tmp_path, monkeypatch):
    wheel = tmp_path / "other.whl"
    _fake_policy_wheel(wheel)  # not the pinned hash
    monkeypatch.setenv(holosoma_inference.WHEEL_ENV_VAR, str(wheel))
    with pytest.raises(holosoma.AssetError, match="has sha256 .* expected 3c11fd45"):
        holosoma_inference.ensure_policies(progress=False)


# ------------------------------------------------------------------ reading files (made here)
def _clip(t: int = 5) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(0)
    quat = rng.normal(size=(t, 4))
    return rng.normal(size=(t, 3)), rng.normal(size=(t, 3)), rng.normal(size=(t, 3)), quat / np.linalg.norm(
        quat, axis=1, keepdims=True)


def test_tracking_file_kind_batch_session_and_embedded_clip(tmp_path):
    jp, jv, pos, quat = _clip()
    w = np.random.default_rng(1).normal(size=(7, 3))
    path = wbt_file(tmp_path / "w.onnx", w, jp, jv, pos, quat, {"dof_names": NAMES, "kp": [1.0, 2, 3]})
    f = read_policy_file(path)
    assert (f.kind, f.obs_name, f.obs_dim, f.action_dim, f.tanh_bounded) == ("wbt", "obs", 7, 3, False)
    assert f.kp.tolist() == [1.0, 2.0, 3.0] and f.kd is None
    obs = np.random.default_rng(2).normal(size=(4, 7)).astype(np.float32)
    steps = np.array([[0], [2], [4], [9]], dtype=np.float32)
    out = session(path).run(None, {"obs": obs, "time_step": steps})  # 4 rows; the file fixes batch 1
    one = ort.InferenceSession(str(path))
    for i in range(4):
        ref = one.run(None, {"obs": obs[i:i + 1], "time_step": steps[i:i + 1]})
        for a, b in zip(out, ref, strict=True):
            np.testing.assert_allclose(a[i], b[0], rtol=1e-6)
    np.testing.assert_allclose(out[1][3], jp[4], rtol=1e-6)  # time_step clamped at the last frame
    clip = embedded_clip(path)  # holosoma's clamp written as Min: the reader runs the graph, not a pattern
    np.testing.assert_allclose(clip.joint_pos, jp.astype(np.float32))
    np.testing.assert_allclose(clip.ref_pos_xyz, pos.astype(np.float32))
    np.testing.assert_allclose(clip.ref_quat_xyzw, quat.astype(np.float32))
    assert clip.dof_names == tuple(NAMES)


def test_embedded_clip_of_a_leading_file_comes_back_in_place(tmp_path):
    """``unilab-export --format holosoma`` writes row t = frame t + 2 (metadata reference_lead_frames): read back, row
    t is frame t again, the first two rows holding frame 2 (the frames before it are not in the file)."""
    jp, jv, pos, quat = _clip(t=8)
    rows = np.minimum(np.arange(8) + 2, 7)
    path = wbt_file(tmp_path / "w.onnx", np.zeros((7, 3)), jp[rows], jv[rows], pos[rows], quat[rows],
                    {"dof_names": NAMES, LEAD_KEY: 2})
    back = embedded_clip(path)
    in_place = np.maximum(np.arange(8), 2)
    np.testing.assert_allclose(back.joint_pos, jp[in_place].astype(np.float32))
    np.testing.assert_allclose(back.ref_quat_xyzw, quat[in_place].astype(np.float32))


def test_bad_files_are_one_error_naming_the_file(tmp_path):
    jp, jv, pos, quat = _clip()
    w = np.zeros((7, 3))
    with pytest.raises(HolosomaFormatError, match=r"w\.onnx: metadata dof_names"):
        read_policy_file(wbt_file(tmp_path / "w.onnx", w, jp, jv, pos, quat, {}))
    with pytest.raises(HolosomaFormatError, match=r"the action has 3 entries, dof_names 2"):
        read_policy_file(loco_file(tmp_path / "l.onnx", w, {"dof_names": NAMES[:2]}))
    with pytest.raises(HolosomaFormatError, match="kp must list 3 gains"):
        read_policy_file(loco_file(tmp_path / "l.onnx", w, {"dof_names": NAMES, "kp": [1.0]}))
    (tmp_path / "x.onnx").write_bytes(b"not onnx")
    with pytest.raises(HolosomaFormatError, match=r"x\.onnx: not a readable ONNX model"):
        read_policy_file(tmp_path / "x.onnx")


def _policy(kind: str, metadata: dict, bounded: bool = False) -> PolicyFile:
    return PolicyFile(Path("f.onnx"), kind, "obs", 10, 3, list(NAMES), metadata, bounded)


def test_action_scale_precedence():
    effort = np.array([10.0, 20.0, 40.0])
    kp = [5.0, 5.0, 10.0]
    # 1. metadata action_scale: a number, a list, holosoma's comma-separated string
    for value, want in ((0.5, [0.5] * 3), ([0.1, 0.2, 0.3], [0.1, 0.2, 0.3]), ("0.1, 0.2,0.3", [0.1, 0.2, 0.3])):
        s, source = holosoma_actions.action_scale(_policy("loco", {"action_scale": value}), effort)
        np.testing.assert_allclose(s, want)
        assert source == "metadata action_scale"
    # 2. experiment_config robot.control: 0.25 x effort / kp with effort from its dof_effort_limit_list
    control = {"action_scale": 0.25, "action_scales_by_effort_limit_over_p_gain": True}
    robot = {"control": control, "dof_names": NAMES[::-1], "dof_effort_limit_list": [8.0, 4.0, 2.0]}
    s, _ = holosoma_actions.action_scale(_policy("wbt", {"kp": kp, "experiment_config": {"robot": robot}}), effort)
    np.testing.assert_allclose(s, 0.25 * np.array([2.0, 4.0, 8.0]) / np.array(kp))
    # 3. per kind: tanh-bounded tracking 1, tracking 0.25 effort / kp (the env's effort), locomotion 0.25
    np.testing.assert_allclose(holosoma_actions.action_scale(_policy("wbt", {"kp": kp}, True), effort)[0], 1.0)
    np.testing.assert_allclose(holosoma_actions.action_scale(_policy("wbt", {"kp": kp}), effort)[0],
                               0.25 * effort / np.array(kp))
    np.testing.assert_allclose(holosoma_actions.action_scale(_policy("loco", {}, True), effort)[0], 0.25)
    with pytest.raises(HolosomaFormatError, match="action_scale must be one number or 3"):
        holosoma_actions.action_scale(_policy("loco", {"action_scale": [1.0, 2.0]}), effort)


def test_terms_from_metadata_or_the_kinds_defaults():
    assert file_term_names(_policy("wbt", {})) == sorted(DEFAULT_ACTOR_TERMS["wbt"])
    assert file_term_names(_policy("loco", {})) == [
        "actions", "base_ang_vel", "command_ang_vel", "command_lin_vel", "cos_phase", "dof_pos", "dof_vel",
        "projected_gravity", "sin_phase"]
    layout = [{"name": "b", "dim": 2}, {"name": "a", "dim": 3}]
    assert file_term_names(_policy("loco", {"observation_layout": layout})) == ["b", "a"]
    groups = {"actor_obs": {"terms": {"z": {}, "dof_pos": {}}}}
    assert file_term_names(_policy("wbt", {"experiment_config": {"observation": {"groups": groups}}})) == [
        "dof_pos", "z"]


def test_task_terms_by_the_tasks_package():
    assert task_terms("t1_locomotion") is task_terms("g1_locomotion")  # the T1 is configuration of that task
    assert missing_terms(DEFAULT_ACTOR_TERMS["loco"], "t1_locomotion") == []
    assert missing_terms(DEFAULT_ACTOR_TERMS["loco"], "g1_motion_tracking") == [
        "command_ang_vel", "command_lin_vel", "cos_phase", "projected_gravity", "sin_phase"]
    assert task_terms("pendulum") is None and missing_terms(["actions"], "pendulum") == ["actions"]


# ------------------------------------------------------------------ the G1 (assets and published policies)
def _inference_wheel() -> Path:
    """The pinned holosoma-inference wheel itself (``$UNILAB_HOLOSOMA_INFERENCE_WHEEL``, ``<cache>/downloads/`` or a
    download), whose source holds the config values compared against."""
    with holosoma.cache_lock(holosoma_inference.policies_dir().parent):
        return holosoma.acquire_wheel(holosoma_inference.wheel(), None, None, None, False)


def _holosoma_inference_config(name: str):
    """A constant of holosoma_inference 0.1.3's config_values/robot.py, read from the cached wheel's source."""
    with zipfile.ZipFile(_inference_wheel()) as zf:
        src = zf.read("holosoma_inference/config/config_values/robot.py").decode()
    for node in ast.parse(src).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == name:
            return ast.literal_eval(node.value)
    raise AssertionError(name)


@pytest.fixture(scope="module")
def g1_tracking_env():
    from unilab.eval.holosoma import prepare
    from unilab.tasks.g1_motion_tracking.evaluation import eval_task_config
    from unilab.tasks.registry import make_env, task_config

    source = prepare("ppo_g1_29dof_dancing", action_clip="env")  # the task's own action bound
    env = make_env(source.task, eval_task_config(task_config(source.task, source.raw["task"]), False), 2,
                   pool_kwargs={"nthread": 1})
    yield env, source
    env.close()


@pytest.mark.g1
def test_the_task_is_the_one_whose_robot_has_the_files_joints():
    from unilab.eval.holosoma import choose_task

    files = {n: read_policy_file(holosoma_inference.published_policy(n))
             for n in ("fastsac_g1_29dof_dancing", "ppo_g1_29dof", "ppo_t1_29dof")}
    assert choose_task(files["fastsac_g1_29dof_dancing"]) == "g1_motion_tracking"
    assert choose_task(files["ppo_g1_29dof"]) == "g1_locomotion"
    assert choose_task(files["ppo_t1_29dof"]) == "t1_locomotion"
    assert choose_task(files["ppo_t1_29dof"], "t1_locomotion") == "t1_locomotion"
    with pytest.raises(ValueError, match="its robot's joints are not ppo_t1_29dof.onnx's dof_names: only in the "
                                         r"file: AAHead_yaw, Head_pitch, .*\(29 in all\); only in the robot: "
                                         "left_hip_pitch_joint"):
        choose_task(files["ppo_t1_29dof"], "g1_locomotion")
    with pytest.raises(ValueError, match="g1_motion_tracking is a motion_tracking task; ppo_g1_29dof.onnx is a "
                                         "locomotion policy"):
        choose_task(files["ppo_g1_29dof"], "g1_motion_tracking")
    other = dataclasses.replace(files["ppo_g1_29dof"], dof_names=[f"j{i}" for i in range(29)])
    with pytest.raises(ValueError, match=r"no locomotion task's robot has its 29 joints \(j0, j1, j2, j3, \.\.\. "
                                         r"\(29 in all\)\)"):
        choose_task(other)
    no_phase = dataclasses.replace(files["ppo_t1_29dof"], metadata={
        "observation_layout": [{"name": "gait_clock", "dim": 2}]})
    with pytest.raises(ValueError, match=r"t1_locomotion has no piece for its holosoma term\(s\) \['gait_clock'\]"):
        choose_task(no_phase)


@pytest.mark.g1
def test_published_wbt_defaults_match_holosoma_inference(g1_tracking_env):
    env, source = g1_tracking_env
    # holosoma_inference's fallback per-joint scale for WBT files without metadata: 0.25 effort / kp
    want = np.asarray(_holosoma_inference_config("G1_29DOF_PER_JOINT_ACTION_SCALE"))
    ppo = read_policy_file(holosoma_inference.published_policy("ppo_g1_29dof_dancing"))
    mapping = holosoma_actions.HolosomaActions.for_env(ppo, env)
    np.testing.assert_allclose(mapping.scale, want, rtol=1e-9)  # experiment_config's 0.25 effort / kp
    no_config = PolicyFile(ppo.path, "wbt", "obs", 154, 29, ppo.dof_names, {"kp": ppo.metadata["kp"]}, False)
    np.testing.assert_allclose(holosoma_actions.HolosomaActions.for_env(no_config, env).scale, want, rtol=1e-9)
    # the FastSAC dance actor's tanh bound is reach_j (rad) on our model: its output is the PD-target offset
    import onnx
    from onnx import numpy_helper

    fast = holosoma_inference.published_policy("fastsac_g1_29dof_dancing")
    bound = [numpy_helper.to_array(i) for i in onnx.load(str(fast)).graph.initializer
             if i.name.endswith("actor.action_scale")][0]
    act = np.asarray(env.act_joint)
    reach = holosoma_actions.reach(env.action_default, env.joint_lo[act], env.joint_hi[act])
    np.testing.assert_allclose(bound, reach, rtol=1e-5)


@pytest.mark.g1
def test_assembled_observation_is_holosomas_terms(g1_tracking_env):
    from unilab.interop.holosoma_terms import HolosomaObservation, file_terms, piece_widths
    from unilab.sim.quat import quat_conj, quat_mul

    env, source = g1_tracking_env
    p = source.policy
    table = task_terms(source.task)
    mapping = holosoma_actions.HolosomaActions.for_env(p, env)
    terms = file_terms(p, piece_widths(env, table))
    assert [t.name for t in terms] == sorted(DEFAULT_ACTOR_TERMS["wbt"]) and sum(t.width for t in terms) == 154
    observe = HolosomaObservation(env, terms, table, p.dof_names, mapping.piece_to_output())
    obs = env.start_at(np.zeros(2, dtype=np.int64), np.array([0, 40]))
    u = np.random.default_rng(0).uniform(-2, 2, size=(2, 29)).astype(np.float32)
    obs, *_ = env.step(mapping.to_env(u))
    x = observe(obs["critic_obs"]).astype(np.float64)
    o = np.cumsum([0] + [t.width for t in terms])
    got = {t.name: x[:, o[k]:o[k + 1]] for k, t in enumerate(terms)}
    s, order = env.state, [env.joint_names.index(n) for n in p.dof_names]
    lib, row = env.motion, env.motion.flat_index(env.clip, env.frame + 1)
    # the previous output, recovered from the env's piece; where the env clipped it at its bound, the bound's
    clipped = mapping.beyond_bound(u)
    assert clipped.any() and not clipped.all()  # ankle rolls: reach 0.26 rad, so past 0.26 / 0.44 ~ 0.6 units
    np.testing.assert_allclose(got["actions"][~clipped], u[~clipped], atol=2e-5)
    bound = mapping.env_scale / mapping.scale
    np.testing.assert_allclose(got["actions"][clipped], (np.sign(u) * bound)[clipped], atol=2e-5)
    np.testing.assert_allclose(got["dof_pos"], (s.joint_pos - env.default_joint_pos)[:, order], atol=1e-5)
    np.testing.assert_allclose(got["dof_vel"], s.joint_vel[:, order], rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(got["base_ang_vel"], s.base_ang_b, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got["motion_command"], np.concatenate(
        [lib.joint_pos[row][:, order], lib.joint_vel[row][:, order]], axis=1), rtol=1e-5, atol=1e-5)
    rel = quat_mul(quat_conj(s.body_quat[:, env.anchor]), lib.body_quat_w[row, env.anchor])
    mats = np.stack([np.eye(3)] * 2)
    for e in range(2):
        mujoco.mju_quat2Mat(mats[e].reshape(-1), rel[e])
    np.testing.assert_allclose(got["motion_ref_ori_b"], mats[:, :, :2].reshape(2, 6), atol=1e-5)


@pytest.mark.g1
@pytest.mark.slow
@pytest.mark.parametrize("name", ["fastsac_g1_29dof_dancing", "ppo_g1_29dof_dancing"])
def test_published_dance_policies_track_the_dance_start(name):
    """A short stretch in CI (the whole 2-minute dance: docs/results/holosoma_published_g1.json)."""
    from unilab.eval.holosoma import prepare
    from unilab.eval.rollout import EvalOptions
    from unilab.tasks.g1_motion_tracking.evaluation import evaluate

    source = prepare(name)
    res = evaluate(None, EvalOptions(max_frames=150, progress=False, threads=1), source)
    overall = res.summary["overall"]
    assert overall["success_rate"] == 1.0
    assert overall["mpjpe_local_mm"] < 40.0


@pytest.mark.g1
@pytest.mark.slow
@pytest.mark.parametrize("name", ["fastsac_g1_29dof", "ppo_g1_29dof"])
def test_published_loco_policies_walk(name):
    """Every command bin for 4 s (the 20 s measurement: docs/results/holosoma_published_g1.json)."""
    from unilab.eval.holosoma import prepare
    from unilab.tasks.g1_locomotion.evaluation import run

    source = prepare(name, overrides={"task.max_episode_length_s": 4.0})
    res = run(source.task, None, "checkpoint", 0.5, 1, False, 0, "cpu", 1, {}, False, source=source)
    for b in res["bins"].values():
        assert b["survived"] == 1.0
    assert res["bins"]["forward"]["lin_vel_x_error"] < 0.25  # the 0.5 m/s command, its first seconds included
    assert res["bins"]["standing"]["lin_vel_x_error"] < 0.05


@pytest.mark.g1
@pytest.mark.slow
def test_published_t1_loco_policy_walks():
    """The T1 as configuration: the file's joints pick t1_locomotion, which runs it with no T1 case; every command bin
    for 4 s (the 20 s measurement of both T1 files: docs/results/holosoma_published_t1.json)."""
    from unilab.eval.holosoma import prepare
    from unilab.tasks.g1_locomotion.evaluation import run

    source = prepare("fastsac_t1_29dof", overrides={"task.max_episode_length_s": 4.0})
    assert source.task == "t1_locomotion"
    res = run(source.task, None, "checkpoint", 0.5, 1, False, 0, "cpu", 1, {}, False, source=source)
    for b in res["bins"].values():
        assert b["survived"] == 1.0
    assert res["bins"]["forward"]["lin_vel_x_error"] < 0.25  # the 0.5 m/s command, its first seconds included
    assert res["bins"]["standing"]["lin_vel_x_error"] < 0.05


# ------------------------------------------------------------------ robustness bins and the command line
def test_metrics_per_randomization_bin():
    from unilab.eval.robustness import bin_edges, by_bins

    friction = np.array([0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2])
    delay = np.array([0, 1, 0, 1, 0, 1, 0, 1], dtype=float)
    survived = np.array([0, 0, 1, 1, 1, 1, 1, 1], dtype=float)
    out = by_bins({"friction": friction, "delay": delay}, {"survived": survived}, bins=4)
    assert [(e["low"], e["high"], e["envs"], e["survived"]) for e in out["friction"]] == [
        (0.5, 0.6, 2, 0.0), (0.7, 0.8, 2, 1.0), (0.9, 1.0, 2, 1.0), (1.1, 1.2, 2, 1.0)]
    assert [(e["low"], e["envs"], e["survived"]) for e in out["delay"]] == [(0.0, 4, 0.75), (1.0, 4, 0.75)]
    np.testing.assert_allclose(bin_edges(delay, 4), [0.0, 0.5, 1.0])  # discrete: one bin per value
    rows = np.arange(4)
    assert [e["survived"] for e in by_bins({"friction": friction}, {"survived": survived}, 2, rows)["friction"]] == [
        0.0, 1.0]


@pytest.mark.parametrize("argv, message", [
    (["--clip", "x.npz"], "--clip: only with --onnx"),
    (["--action-clip", "env"], "--action-clip: only with --onnx"),
    (["--onnx", "nothing_published"], "neither an ONNX file nor a published holosoma policy"),
    (["--onnx", "missing/file.onnx"], "no such file"),
])
def test_eval_onnx_usage_errors_exit_2(argv, message, capsys, tmp_cache):
    from unilab.cli import eval as eval_cli

    with pytest.raises(SystemExit) as exit_:
        eval_cli.main(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err



def test_export_layout_groups_policy_pieces_into_sorted_terms():
    from types import SimpleNamespace

    from unilab.deploy.export import ExportError
    from unilab.deploy.holosoma import _layout

    env = SimpleNamespace(layout=SimpleNamespace(policy_slices={"q": slice(0, 3), "act": slice(3, 6),
                                                                "ref_a": slice(6, 8), "ref_b": slice(8, 9)}))
    table = {"dof_pos": ("q",), "actions": ("act",), "motion_command": ("ref_a", "ref_b"), "base_lin_vel": ("v",)}
    terms, offset = _layout(env, table)
    assert terms == ["actions", "dof_pos", "motion_command"]  # sorted; base_lin_vel is not observed
    assert offset == {"act": 0, "q": 3, "ref_a": 6, "ref_b": 8}
    with pytest.raises(ExportError, match=r"observes \['q'\], which have no holosoma term"):
        _layout(env, {k: v for k, v in table.items() if k != "dof_pos"})
    split = dict(table, motion_command=("ref_a", "ref_b", "ref_c"))
    with pytest.raises(ExportError, match="need pieces the policy does not observe"):
        _layout(env, split)


@pytest.mark.g1
def test_play_runs_a_published_policy(tmp_path):
    from unilab.eval.holosoma import prepare
    from unilab.runtime.play import play

    res = play(None, source=prepare("ppo_g1_29dof_dancing"), num_envs=1, steps=20, video=False)
    assert res.steps == 20 and res.episodes == 0  # tracks its clip's first 20 frames without failing


def test_export_cli_holosoma_options_need_the_format(capsys):
    from unilab.cli import export as export_cli

    with pytest.raises(SystemExit) as exit_:
        export_cli.main(["run", "--clip", "a"])
    assert exit_.value.code == 2 and "--clip: only with --format holosoma" in capsys.readouterr().err

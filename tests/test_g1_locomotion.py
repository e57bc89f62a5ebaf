"""G1 locomotion: each term against holosoma's formula (managers/*/terms/locomotion.py) on synthetic states, the
gait clock, commands, pushes, the contact termination, the penalty curriculum and the left/right mirror."""

from __future__ import annotations

import numpy as np
import pytest
from reference_helpers import state_mirror  # tests/ is on the path (pytest's rootdir)

from unilab.tasks.core.driver import GATHER, OBSERVE, REWARDS, TERMINATE
from unilab.tasks.g1_locomotion.config import CurriculumConfig, LocomotionConfig
from unilab.tasks.g1_locomotion.rewards import REWARD_TERMS, TERM_NAMES, RewardWeights
from unilab.tasks.registry import task_config

pytestmark = pytest.mark.g1
N = 16


@pytest.fixture(scope="module")
def env():
    from unilab.tasks.g1_locomotion.env import LocomotionEnv

    e = LocomotionEnv(LocomotionConfig(), N, pool_kwargs={"nthread": 1}, seed=3)
    e.reset()
    yield e
    e.close()


def _rotate_inverse(q_wxyz: np.ndarray, v: np.ndarray) -> np.ndarray:
    """holosoma's quat_rotate_inverse: R(q)^T v, for (n, 4) w-first quaternions."""
    w, u = q_wxyz[:, :1], q_wxyz[:, 1:]
    return v * (2.0 * w ** 2 - 1.0) - np.cross(u, v) * w * 2.0 + u * np.sum(u * v, axis=1, keepdims=True) * 2.0


def _rotate(q_wxyz: np.ndarray, v: np.ndarray) -> np.ndarray:
    w, u = q_wxyz[:, :1], q_wxyz[:, 1:]
    return v * (2.0 * w ** 2 - 1.0) + np.cross(u, v) * w * 2.0 + u * np.sum(u * v, axis=1, keepdims=True) * 2.0


def _unit_quats(rng, shape) -> np.ndarray:
    q = rng.normal(size=(*shape, 4))
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def _expected_height(phi: np.ndarray, swing: float) -> np.ndarray:
    """holosoma's _expected_foot_height."""
    def bezier(y0, y1, x):
        return y0 + (y1 - y0) * (x ** 3 + 3 * (x ** 2 * (1 - x)))

    x = (phi + np.pi) / (2 * np.pi)
    return np.where(x <= 0.5, bezier(0.0, swing, 2 * x), bezier(swing, 0.0, 2 * x - 1))


def _synthetic_state(env, rng) -> None:
    s, n, nj = env.state, env.num_envs, len(env.joint_names)
    s.base_quat[:] = _unit_quats(rng, (n,))
    s.base_lin_b[:] = rng.normal(0, 0.7, (n, 3))
    s.base_ang_b[:] = rng.normal(0, 0.7, (n, 3))
    s.gravity_b[:] = _rotate_inverse(s.base_quat, np.tile([0.0, 0.0, -1.0], (n, 1)))
    s.base_pos[:] = rng.normal(0, 1, (n, 3))
    s.joint_pos[:] = env.default_joint_pos + rng.normal(0, 0.3, (n, nj))
    s.feet_pos[:] = rng.normal(0, 0.15, (n, 2, 3))
    s.feet_quat[:] = _unit_quats(rng, (n, 2))
    s.foot_height[:] = rng.uniform(0, 0.12, (n, 2))
    s.command[:] = rng.uniform(-1, 1, (n, 3))
    s.phase[:] = rng.uniform(-np.pi, np.pi, (n, 2))
    s.action[:] = rng.uniform(-1, 1, (n, env.action_dim))
    s.last_action[:] = rng.uniform(-1, 1, (n, env.action_dim))
    s.contact_force[:] = 0.0


def test_reward_terms_are_holosomas_formulas(env):
    rng = np.random.default_rng(0)
    _synthetic_state(env, rng)
    s, cfg = env.state, env.cfg.rewards
    out = env.buffers()
    info = (np.empty((len(TERM_NAMES), N), np.float32), np.empty((1, N), bool))
    env.run_stages(REWARDS, env._all_rows, out, np.zeros(N, bool), info)
    got = dict(zip(TERM_NAMES, env._terms.T))
    want = {
        "tracking_lin_vel": np.exp(-np.sum((s.command[:, :2] - s.base_lin_b[:, :2]) ** 2, 1)
                                   / cfg.tracking_lin_vel.tracking_sigma),
        "tracking_ang_vel": np.exp(-(s.command[:, 2] - s.base_ang_b[:, 2]) ** 2
                                   / cfg.tracking_ang_vel.tracking_sigma),
        "ang_vel_xy": np.sum(s.base_ang_b[:, :2] ** 2, 1),
        "orientation": np.sum(s.gravity_b[:, :2] ** 2, 1),
        "action_rate": np.sum((env.action_bound * (s.last_action - s.action)) ** 2, 1),
        "alive": np.ones(N),
    }
    err = sum((s.foot_height[:, k] - _expected_height(s.phase[:, k], cfg.feet_phase.swing_height)) ** 2
              for k in range(2))
    want["feet_phase"] = np.exp(-err / cfg.feet_phase.tracking_sigma)
    weights = {"hip_pitch": 0.01, "hip_roll": 1.0, "hip_yaw": 5.0, "knee": 0.01, "ankle_pitch": 5.0, "ankle_roll": 5.0}
    pose_w = np.array([next((w for k, w in weights.items() if k in n), 50.0) for n in env.joint_names])
    want["pose"] = np.sum(pose_w * (s.joint_pos - env.default_joint_pos) ** 2, 1)
    fwd = _rotate(s.base_quat, np.tile([1.0, 0.0, 0.0], (N, 1)))
    yaw = np.arctan2(fwd[:, 1], fwd[:, 0])
    dist = np.abs(np.cos(yaw) * (s.feet_pos[:, 0, 1] - s.feet_pos[:, 1, 1])
                  - np.sin(yaw) * (s.feet_pos[:, 0, 0] - s.feet_pos[:, 1, 0]))
    want["close_feet_xy"] = (dist < cfg.close_feet_xy.threshold).astype(float)
    grav = np.tile([0.0, 0.0, -1.0], (N, 1))
    want["feet_ori"] = sum(np.sqrt(np.sum(_rotate_inverse(s.feet_quat[:, k], grav)[:, :2] ** 2, 1)) for k in range(2))
    assert set(want) == set(TERM_NAMES)
    for name in TERM_NAMES:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-9, atol=1e-12, err_msg=name)
    assert 0 < want["close_feet_xy"].sum() < N  # both cases occur
    # the reward: control_dt x sum of weight x term, the curriculum's terms x its scale (0.5 at the start)
    scale = {t.name: env.rewards.scale if getattr(cfg, t.name).curriculum else 1.0 for t in REWARD_TERMS}
    reward = env.control_dt * sum(getattr(cfg, k).weight * scale[k] * want[k] for k in TERM_NAMES)
    np.testing.assert_allclose(env._reward, reward, rtol=1e-9)


def test_gathered_base_state_is_in_the_base_frame(env):
    rng = np.random.default_rng(1)
    p = env.pool
    qpos, qvel = p.qpos.copy(), p.qvel.copy()
    qpos[:, 3:7] = _unit_quats(rng, (N,))
    qvel[:, :6] = rng.normal(0, 1, (N, 6))
    p.reset(env._all_rows, qpos, qvel)
    env.run_stages(GATHER, env._all_rows, env.buffers())
    s = env.state
    np.testing.assert_allclose(s.base_lin_b, _rotate_inverse(qpos[:, 3:7], qvel[:, :3]), atol=1e-12)
    np.testing.assert_allclose(s.base_ang_b, qvel[:, 3:6])
    np.testing.assert_allclose(s.gravity_b, _rotate_inverse(qpos[:, 3:7], np.tile([0.0, 0.0, -1.0], (N, 1))),
                               atol=1e-12)
    np.testing.assert_allclose(s.foot_height, p.body_pos_w[:, env.foot_points, 2])
    env.reset()


def test_expected_foot_height_is_zero_in_stance_and_the_swing_height_mid_swing():
    from unilab.tasks.g1_locomotion.rewards import expected_foot_height

    phis = np.linspace(-np.pi, np.pi, 41)
    got = np.array([expected_foot_height(p, 0.09) for p in phis])
    np.testing.assert_allclose(got, _expected_height(phis, 0.09), atol=1e-15)
    assert expected_foot_height(-np.pi, 0.09) == 0.0 and expected_foot_height(np.pi, 0.09) == 0.0
    assert expected_foot_height(0.0, 0.09) == pytest.approx(0.09)


def test_gait_clock_commands_and_their_draws():
    from unilab.tasks.g1_locomotion.env import LocomotionEnv

    cfg = LocomotionConfig()
    cfg.push.enabled = False
    env = LocomotionEnv(cfg, 400, pool_kwargs={"nthread": 1}, seed=5)
    try:
        env.reset()
        s = env.state
        # legs half a period apart, phase offsets uniform over the circle
        np.testing.assert_allclose(np.cos(s.phase[:, 1] - s.phase[:, 0]), -1.0, atol=1e-12)
        freq = s.phase_dt / (2 * np.pi * env.control_dt)
        assert freq.min() >= 0.8 and freq.max() <= 1.2 and freq.std() > 0.05
        stand = ~s.command.any(axis=1)
        assert 0.1 < stand.mean() < 0.3  # stand_prob 0.2
        moving = s.command[~stand]
        assert (np.abs(moving) <= 1.0).all() and moving.std(axis=0).min() > 0.4
        offset, dt, command = s.phase_offset.copy(), s.phase_dt.copy(), s.command.copy()
        env.auto_reset = False
        for k in range(1, 4):
            env.step(np.zeros((env.num_envs, env.action_dim), np.float32))
            want = np.fmod(k * dt[:, None] + offset + np.pi, 2 * np.pi) - np.pi
            want[stand] = np.pi  # a zero command holds both feet down
            np.testing.assert_allclose(s.phase, want, atol=1e-12)
        np.testing.assert_array_equal(s.command, command)  # kept until resampling_time_s
    finally:
        env.close()


def test_evaluation_keeps_the_command_and_starts_the_legs_at_0_and_minus_pi(env):
    cmd = np.tile([0.5, 0.0, 0.0], (N, 1))
    env.evaluate(cmd)
    try:
        env.reset()
        np.testing.assert_array_equal(env.state.command, cmd)
        np.testing.assert_allclose(env.state.phase, np.tile([0.0, -np.pi], (N, 1)))
        np.testing.assert_allclose(env.state.phase_dt, 2 * np.pi * env.control_dt * 1.0)
    finally:
        env.evaluate(None)
        env.reset()


def test_pushes_set_the_base_velocity_when_due():
    from unilab.tasks.g1_locomotion.env import LocomotionEnv

    cfg = LocomotionConfig()
    cfg.push.interval_s = [0.1, 0.1]  # every 5 steps
    cfg.commands.resampling_time_s = 0.08  # a new command every 4 steps
    env = LocomotionEnv(cfg, 200, pool_kwargs={"nthread": 1}, seed=2)
    try:
        env.reset()
        assert (env.state.push_steps == 5).all()
        zero = np.zeros((200, env.action_dim), np.float32)
        for _ in range(3):
            env.step(zero)
        command = env.state.command.copy()
        env.step(zero)
        assert (env.state.command != command).any(axis=1).mean() > 0.7  # resampled (some stand before and after)
        assert 0.1 < (~env.state.command.any(axis=1)).mean() < 0.3
        assert (env.state.push_counter == 4).all()
        # the push lands after the 5th step's gather: the live base velocity is the kick
        env.auto_reset = False
        env.step(zero)
        assert (env.state.push_counter == 0).all()
        kick = env.pool.qvel[:, :2]
        assert (np.abs(kick) <= 1.0).all() and kick.std() > 0.4  # uniform in +-1: std 0.58
        assert not np.allclose(kick, env.state.base_lin_b[:, :2])
    finally:
        env.close()


def test_a_robot_that_falls_terminates_on_contact(env):
    """The zero action (hold the default pose) falls within seconds; the episode ends when a termination body
    (pelvis, hips, shoulders) touches the floor with more than 1 N, its largest contact force gathered."""
    env.reset()
    zero = np.zeros((N, env.action_dim), np.float32)
    ended = np.zeros(N, bool)
    for _ in range(250):
        _, _, term, trunc, info = env.step(zero)
        assert not trunc.any()
        ended |= term
        np.testing.assert_array_equal(term, info["termination_terms"]["contact"])
    assert ended.all()
    env.auto_reset = False
    try:
        env.step(zero)
        forces = np.linalg.norm(env.pool.body_contact_force_w[:, env.termination_bodies], axis=-1).max(axis=1)
        np.testing.assert_allclose(env.state.contact_force, forces)
    finally:
        env.auto_reset = True
        env.reset()


def test_penalty_curriculum_is_holosomas_rule():
    cur = CurriculumConfig()
    w = RewardWeights(LocomotionConfig().rewards, cur, 0.02)
    assert w.scale == 0.5
    tagged = np.array([getattr(LocomotionConfig().rewards, t.name).curriculum for t in REWARD_TERMS])
    np.testing.assert_allclose(w.weights[tagged], w.base[tagged] * 0.5)
    np.testing.assert_allclose(w.weights[~tagged], w.base[~tagged])
    w.record(np.full(500, 1000))  # half the averaging window: the average moves half way
    assert w.average_length == pytest.approx(500.0)
    assert w.scale == pytest.approx(0.5)  # between the thresholds: unchanged
    w.record(np.full(2000, 1000))
    assert w.average_length == pytest.approx(1000.0)
    assert w.scale == pytest.approx(0.5 * 1.001)  # above 750: up by degree, every step
    for _ in range(2000):
        w.record(np.zeros(0))
    assert w.scale == 1.0  # clamped at max_scale
    np.testing.assert_allclose(w.weights, w.base)
    w.record(np.full(1000, 10))
    assert w.scale == pytest.approx(0.999)


def test_mirrored_state_gives_the_mirrored_observation(env):
    """EnvSpec.mirror against the env: env 1 holds the mirror image of env 0 (base and joints, command, the
    legs' phases swapped, last action); its observation is the mirrored observation of env 0's."""
    rng = np.random.default_rng(4)
    sm = state_mirror(env.pool.model)
    p, s = env.pool, env.state
    qpos, qvel = p.qpos.copy(), p.qvel.copy()
    qpos[0, 3:7] = _unit_quats(rng, (1,))[0]
    qpos[0, 7:] += rng.normal(0, 0.2, qpos.shape[1] - 7)
    qvel[0] = rng.normal(0, 0.5, qvel.shape[1])
    qpos[1], qvel[1] = sm.qpos(qpos[0]), sm.qvel(qvel[0])
    p.reset(env._all_rows, qpos, qvel)
    s.command[0] = [0.3, -0.4, 0.7]
    s.command[1] = [0.3, 0.4, -0.7]
    s.phase[0] = [0.4, 0.4 - np.pi]
    s.phase[1] = s.phase[0, ::-1]
    s.last_action[0] = rng.uniform(-1, 1, env.action_dim)
    s.last_action[1] = sm.ctrl(s.last_action[0])
    out = env.buffers()
    env.run_stages(GATHER | OBSERVE, env._all_rows, out)
    perm, sign = env.spec.mirror["critic_obs"]
    crit = out["critic_obs"]
    np.testing.assert_allclose(crit[0][list(perm)] * np.array(sign), crit[1], atol=1e-5)
    assert np.abs(crit[0] - crit[1]).max() > 0.1
    twice = np.asarray(perm)[list(perm)]
    np.testing.assert_array_equal(twice, np.arange(len(perm)))  # mirroring twice: the identity
    env.reset()


def test_terminate_stage_times_out_at_the_episode_length(env):
    env.reset()
    env.book.lengths[:] = env.max_episode_steps
    out = env.buffers()
    env.run_stages(TERMINATE, env._all_rows, out, np.zeros(N, bool),
                   (np.empty((len(TERM_NAMES), N), np.float32), np.empty((1, N), bool)))
    assert out["truncated"].all()
    assert env.max_episode_steps == 1000  # 20 s at 50 Hz
    env.reset()


def test_unilab_eval_locomotion_zero_baseline_reports_each_bin(tmp_path, capsys):
    """unilab-eval --task g1_locomotion --policy zero: per-bin survival, errors and tracking terms; the zero action
    falls within the 2 s episode in every bin, and its standing yaw-rate error is below its turning one."""
    import json

    from unilab.cli.eval import main

    out = tmp_path / "zero.json"
    rc = main(["--task", "g1_locomotion", "--policy", "zero", "--envs-per-bin", "2", "--threads", "1", "--pushes",
               "off", "--no-progress", "--json", str(out), "task.max_episode_length_s=4.0"])
    assert rc == 0
    report = json.loads(out.read_text())
    assert list(report["bins"]) == ["standing", "forward", "lateral", "turning"]
    assert report["episode_s"] == pytest.approx(4.0)
    for m in report["bins"].values():
        assert m["survived"] == 0.0 and m["falls"] == 2 and 0 < m["episode_length_s"] < 4.0
        assert 0 < m["rew_tracking_lin_vel"] <= 1 and 0 < m["rew_tracking_ang_vel"] <= 1
    assert report["bins"]["standing"]["yaw_rate_error"] < report["bins"]["turning"]["yaw_rate_error"]
    assert "standing" in capsys.readouterr().out
    assert main(["--task", "g1_locomotion", "--policy", "reference"]) == 2  # no reference motion in this task


def _loco_checkpoint(run_dir):
    """A g1_locomotion checkpoint as the trainer writes it, with a random (non-zero) actor."""
    import torch

    from unilab.algo.sac.agent import FastSAC
    from unilab.cli.config import compose_config, explicit_algo_keys, split_argv, to_run_spec
    from unilab.runtime.checkpoint import checkpoint_path, save_checkpoint

    overrides, _ = split_argv(["--task", "g1_locomotion", "--algo", "sac_cpu_loco", "algo.use_symmetry=false",
                               "algo.actor_hidden_dims=[32,16]",
                               "algo.critic_hidden_dims=[16]"])
    spec = to_run_spec(compose_config(overrides), explicit_algo_keys(overrides))
    agent = FastSAC(spec.algo, obs_dim=100, critic_obs_dim=103, action_dim=29, device="cpu")
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():  # small actions: the robot stays up for the compared steps
        for p in agent.actor.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.3 / max(1, p.shape[-1]) ** 0.5)
    payload = {"iteration": 5, "agent": agent.state_dict(), "config": spec.raw, "task": spec.task_name}
    path = checkpoint_path(run_dir, 5)
    save_checkpoint(path, payload)
    return agent, path


def test_export_describes_locomotion_and_sim2sim_walks_it_as_the_env_does(tmp_path):
    """unilab-export writes the locomotion contract (pieces with their scales, base, termination bodies, gait);
    scripts/deploy/sim2sim.py, from that file alone, gives the base velocities the env gives in evaluation mode
    (same start pose, command, gait clock, physics) for the first steps, up to float32 policy arithmetic."""
    from script_modules import load_script

    from unilab.deploy.export import METADATA_KEYS, ROBOT_KEYS, export_policy, read_metadata
    from unilab.eval.rollout import agent_policy
    from unilab.tasks.g1_locomotion.env import LocomotionEnv
    from unilab.tasks.g1_locomotion.evaluation import eval_config

    agent, ckpt = _loco_checkpoint(tmp_path / "run")
    out = tmp_path / "loco.onnx"
    export_policy(ckpt, out)
    meta = read_metadata(out)
    assert {*METADATA_KEYS, *ROBOT_KEYS, "base_body", "base_height", "foot_points", "termination_bodies",
            "termination_force", "gait_period_s", "command_ranges"} <= set(meta) and meta["task"] == "g1_locomotion"
    pieces = {p["name"]: p for p in meta["obs_layout"]}
    assert list(pieces)[-2:] == ["sin_phase", "cos_phase"] and "base_lin_vel" not in pieces  # critic only
    assert pieces["base_ang_vel"]["scale"] == 0.25 and pieces["joint_vel"]["scale"] == 0.05
    assert pieces["joint_vel"]["noise"] == pytest.approx(0.1) and pieces["joint_pos"]["noise"] == pytest.approx(0.01)
    assert "pelvis" in meta["termination_bodies"] and meta["gait_period_s"] == 1.0

    sim2sim = load_script("deploy/sim2sim.py")
    steps, command = 20, (0.4, -0.1, 0.3)
    res = sim2sim.run_locomotion(out, steps=steps, command=command)
    assert res["fell_at_step"] is None and res["survived"] == 1.0
    got = np.array(res["per_step"]["base_velocity"])

    cfg = eval_config(LocomotionConfig(reset_joint_scale=[1.0, 1.0]), pushes=False)
    env = LocomotionEnv(cfg, 1, pool_kwargs={"nthread": 1})
    try:
        env.evaluate(np.array([command]))
        obs = env.reset()
        policy = agent_policy(agent)
        want = []
        for _ in range(steps):
            obs, _, term, _, _ = env.step(policy(obs))
            assert not term.any()
            want.append([env.state.base_lin_b[0, 0], env.state.base_lin_b[0, 1], env.state.base_ang_b[0, 2]])
    finally:
        env.close()
    np.testing.assert_allclose(got, np.array(want), rtol=1e-3, atol=1e-4)
    assert np.abs(got).max() > 0.01  # the robot moves


def test_video_arrows_show_the_command_in_the_heading_frame(env):
    env.reset()
    s = env.state
    yaw = 0.7
    s.base_quat[0] = [np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)]
    s.command[0] = [0.5, 0.2, 0.0]
    s.base_lin_b[0] = [0.1, -0.3, 0.0]
    arrows = env.arrows(0)
    assert arrows.shape == (2, 2, 3)
    np.testing.assert_allclose(arrows[:, 0], np.tile(env.pool.qpos[0, :3] + [0, 0, 0.5], (2, 1)))
    c, sn = np.cos(yaw), np.sin(yaw)
    np.testing.assert_allclose(arrows[0, 1] - arrows[0, 0], [0.5 * c - 0.2 * sn, 0.5 * sn + 0.2 * c, 0.0], atol=1e-12)
    np.testing.assert_allclose(arrows[1, 1] - arrows[1, 0], [0.1 * c + 0.3 * sn, 0.1 * sn - 0.3 * c, 0.0], atol=1e-12)
    env.reset()


def test_domain_randomization_is_holosomas_locomotion_recipe():
    """Friction on the foot-floor pairs, link masses x [0.9, 1.2] with their inertia, +[-1, 3] kg on the torso,
    torso centre of mass +-5 cm, PD gains x [0.9, 1.1] and a 0-1 step action delay, per env; the zero-noise
    evaluation config turns them off."""
    import mujoco

    from unilab.tasks.g1_locomotion.env import LocomotionEnv
    from unilab.tasks.g1_locomotion.evaluation import eval_config

    env = LocomotionEnv(LocomotionConfig(), 64, pool_kwargs={"nthread": 1}, seed=9)
    try:
        env.reset()
        m, r = env.model, env.randomizer
        mass = env.pool.expand("body_mass")
        links = [m.body(n).id for n in ("pelvis", "left_hip_roll_link", "right_knee_link")]
        factor = mass[:, links] / m.body_mass[links]
        assert 0.9 <= factor.min() and factor.max() <= 1.2 and factor.std() > 0.05
        np.testing.assert_allclose(env.pool.expand("body_inertia")[:, links] / m.body_inertia[links],
                                   factor[..., None] * np.ones(3))
        torso = m.body("torso_link").id
        added = mass[:, torso] - m.body_mass[torso]
        assert -1.0 <= added.min() and added.max() <= 3.0 and added.std() > 0.5
        assert mass[:, m.body("left_ankle_roll_link").id].std() == 0  # not a randomized link
        pairs = env.pool.expand("pair_friction")[:, :, 0]
        assert 0.5 <= pairs.min() and pairs.max() <= 1.25 and (pairs == pairs[:, :1]).all()
        assert set(np.unique(r.delay)) == {0, 1}
        assert 0.9 <= r.kp_scale.min() and r.kp_scale.max() <= 1.1
        assert np.abs(r.com_offset).max() <= 0.05 and r.com_offset.std() > 0.01
        assert {"randomization/mass_scale", "randomization/added_mass"} <= set(env.stats())
        # the mass change reaches the physics: a heavier torso, a heavier robot
        assert env.pool.expand("body_subtreemass")[:, 1].std() > 0.5
    finally:
        env.close()
    cfg = eval_config(LocomotionConfig(), pushes=True)
    assert not any(cfg.randomization.active(t) for t in ("friction", "mass", "pd_gains", "action_delay"))
    with pytest.raises(ValueError, match="task.randomization.push: not used by g1_locomotion"):
        task_config("g1_locomotion", {"randomization": {"push": {"enabled": True}}})
    assert mujoco.mj_name2id(env.model, mujoco.mjtObj.mjOBJ_BODY, "torso_link") == torso


def test_mixed_terrain_is_a_height_field_the_robot_stands_on():
    """task.terrain.kind=mix: the height field's surface is terrain_height at every sample (MuJoCo's ray down
    hits it), tiles are flat, rough or pitted at holosoma's depths, envs spawn over their tile with the ground's
    height added, and the feet's height is measured from the ground under them."""
    import mujoco

    from unilab.tasks.core.terrain import KINDS, terrain_height
    from unilab.tasks.g1_locomotion.env import LocomotionEnv

    cfg = LocomotionConfig()
    cfg.terrain.kind, cfg.terrain.rows, cfg.terrain.cols, cfg.terrain.tile_size = "mix", 2, 3, 4.0
    cfg.terrain.flat, cfg.terrain.rough, cfg.terrain.low_obstacles = 0.0, 0.5, 0.5
    env = LocomotionEnv(cfg, 24, pool_kwargs={"nthread": 1}, seed=4)
    try:
        t = env.terrain
        assert t.heights.shape == (80, 120) and t.heights.max() <= 0.0 and t.heights.min() >= -0.075 - 1e-12
        kinds = {KINDS[k] for k in t.tile_kinds}
        assert kinds == {"rough", "low_obstacles"}
        m = env.model
        data = mujoco.MjData(m)
        mujoco.mj_forward(m, data)
        terrain_geom = m.geom("terrain").id
        rng = np.random.default_rng(0)
        geomid = np.zeros(1, np.int32)
        for iy, ix in zip(rng.integers(0, 80, 40), rng.integers(0, 120, 40)):
            x, y = t.origin + np.array([ix, iy]) * t.resolution
            dist = mujoco.mj_ray(m, data, np.array([x, y, 1.0]), np.array([0.0, 0.0, -1.0]), None, 1, -1, geomid)
            assert geomid[0] == terrain_geom
            assert 1.0 - dist == pytest.approx(t.heights[iy, ix], abs=1e-5)
            assert terrain_height(x, y, *t.lookup) == pytest.approx(t.heights[iy, ix], abs=1e-12)
        env.reset()
        base = env.pool.qpos[:, :3]
        near = np.linalg.norm(base[:, None, :2] - t.tile_centres[None], axis=-1).min(axis=1)
        assert near.max() <= np.sqrt(2) * cfg.terrain.spawn_offset + 1e-9
        ground = np.array([terrain_height(x, y, *t.lookup) for x, y in base[:, :2]])
        np.testing.assert_allclose(base[:, 2], 0.8 + ground)
        zero = np.zeros((24, env.action_dim), np.float32)
        for _ in range(5):
            env.step(zero)
        s = env.state
        under = np.array([[terrain_height(*env.pool.body_pos_w[e, p, :2], *t.lookup) for p in env.foot_points]
                          for e in range(24)])
        np.testing.assert_allclose(s.foot_height, env.pool.body_pos_w[:, env.foot_points, 2] - under)
        assert s.foot_height.min() > -0.02  # standing on the field, not through it
    finally:
        env.close()


def test_a_short_training_run_of_the_locomotion_recipe(tmp_path):
    """Plain `train --task g1_locomotion` (no CUDA: sac_cpu_loco, symmetry on, randomization on) at tiny sizes:
    it trains, logs the task's reward terms and curriculum, evaluates itself during training (its registry row's
    evaluation) and writes a checkpoint unilab-eval measures from the checkpoint alone, as --task would."""
    import json
    import subprocess
    import sys

    from unilab.cli.eval import main as eval_main
    from unilab.telemetry.scalars import read_scalars

    cmd = [sys.executable, "-m", "unilab.cli.train", "--task", "g1_locomotion", "--algo", "sac_cpu_loco",
           "algo.num_envs=16", "algo.max_iterations=20", "algo.learning_starts=5", "algo.batch_size=64",
           "algo.actor_hidden_dims=[32]", "algo.critic_hidden_dims=[32]", "training.no_play=true",
           "training.log_interval=5", "training.eval_interval=20", "task.max_episode_length_s=1.0",
           f"training.log_root={tmp_path}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    run = next((tmp_path / "fast_sac" / "g1_locomotion").glob("*_mujoco"))
    assert (run / "model_20.pt").is_file()
    tags = set(read_scalars(run))
    assert {"reward/tracking_lin_vel", "reward/feet_phase", "curriculum/penalty_scale",
            "randomization/mass_scale", "eval/survived", "eval/lin_vel_x_error"} <= tags
    assert "unilab: eval @ iter 20: survived" in proc.stdout
    assert set(json.loads((run / "eval" / "eval_20.json").read_text())["bins"]) == {"standing", "forward", "lateral",
                                                                                   "turning"}
    reports = []
    for task in ([], ["--task", "g1_locomotion"]):
        out = tmp_path / f"eval{len(task)}.json"
        assert eval_main([str(run), *task, "--envs-per-bin", "1", "--threads", "1", "--no-progress", "--json",
                          str(out)]) == 0
        reports.append(json.loads(out.read_text()))
    assert reports[0]["task"] == "g1_locomotion" and reports[0]["iteration"] == 20
    assert reports[0]["bins"] == reports[1]["bins"] and len(reports[0]["bins"]) == 4

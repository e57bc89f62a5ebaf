"""Motion-tracking env semantics on a tiny self-made robot (no download) and on the real G1."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
from tiny_robot import ZERO_NOISE, teleport

from unilab.sim.quat import quat_mul, quat_normalize, quat_rotate_inv
from unilab.tasks.core.driver_env import SUBPHASES
from unilab.tasks.g1_motion_tracking.config import (
    MotionTrackingConfig,
    ResetConfig,
)
from unilab.tasks.g1_motion_tracking.env import MotionTrackingEnv
from unilab.tasks.g1_motion_tracking.observations import obs_layout
from unilab.tasks.g1_motion_tracking.resets import StartFrameSampler
from unilab.tasks.g1_motion_tracking.rewards import TRACKING_TERMS
from unilab.tasks.registry import task_config


def test_pd_actuators_and_dimensions(tiny_cfg):
    env = MotionTrackingEnv(tiny_cfg, 8)
    m = env.model
    assert env.action_dim == 2 and env.obs_dim == 5 * 2 + 15 and env.critic_obs_dim == env.obs_dim + 27
    assert m.opt.timestep == pytest.approx(0.005)
    np.testing.assert_allclose(m.actuator_gainprm[:, 0], [20, 20])
    np.testing.assert_allclose(m.actuator_biasprm[:, 1:3], [[-20, -1], [-20, -1]])
    np.testing.assert_allclose(m.actuator_forcerange, [[-20, 20], [-10, 10]])
    assert not m.actuator_ctrllimited.any()
    # effort_over_kp: scale = effort / kp
    np.testing.assert_allclose(env.action_scale, [1.0, 0.5])
    # a PD servo in MuJoCo holds the target: force = kp (target - q) - kd qd
    d = mujoco.MjData(m)
    d.qpos[7] = 0.3
    d.ctrl[0] = 0.5
    mujoco.mj_forward(m, d)
    assert d.actuator_force[0] == pytest.approx(20 * 0.2)


def test_reset_puts_env_on_reference_frame(tiny_cfg):
    env = MotionTrackingEnv(tiny_cfg, 16, seed=3)
    obs = env.reset()
    assert obs["obs"].shape == (16, env.obs_dim) and obs["obs"].dtype == np.float32
    assert obs["critic_obs"].shape == (16, env.critic_obs_dim)
    ref = env.motion.lookup(env.clip, env.frame)
    np.testing.assert_allclose(env.pool.qpos, ref.qpos, atol=1e-12)
    np.testing.assert_allclose(env.pool.qvel, ref.qvel, atol=1e-12)
    np.testing.assert_allclose(env.pool.body_pos_w[:, env.body_ids], ref.body_pos_w, atol=1e-9)
    # the observation shows the next reference frame (the one the first step's reward scores), as holosoma's
    # motion command advances its clock before the observation
    nxt = env.motion.lookup(env.clip, env.frame + 1)
    a = env.anchor
    s = obs_layout(2, 0, "privileged").policy_slices
    want = quat_rotate_inv(ref.body_quat_w[:, a], nxt.body_pos_w[:, a] - ref.body_pos_w[:, a])
    np.testing.assert_allclose(obs["obs"][:, s["anchor_pos_b"]], want, atol=1e-6)
    assert np.abs(want).max() > 1e-3  # the frames differ: the test tells them apart
    np.testing.assert_allclose(obs["obs"][:, s["ref_joint_pos"]], nxt.joint_pos, atol=1e-6)
    np.testing.assert_allclose(obs["obs"][:, s["joint_pos_rel"]], ref.joint_pos - [0.1, 0.0], atol=1e-6)
    assert (env.frame < env.motion.num_frames[env.clip] - 1).all()


def test_reward_is_one_per_tracking_term_on_reference(tiny_cfg):
    env = MotionTrackingEnv(tiny_cfg, 16)
    env.reset()
    teleport(env)
    zero = np.zeros((16, 2), dtype=np.float32)
    for _ in range(3):
        obs, reward, terminated, truncated, info = env.step(zero)
        live = ~(terminated | truncated)
        for name in TRACKING_TERMS:
            np.testing.assert_allclose(info["reward_terms"][name][live], 1.0, atol=1e-6, err_msg=name)
        np.testing.assert_allclose(info["reward_terms"]["action_rate"], 0.0)
        assert not terminated.any()
    w = dict(zip(env.rewards.names, env.rewards.weights))
    expected = sum(w[name] for name in TRACKING_TERMS) + w["joint_limit"] * info["reward_terms"]["joint_limit"]
    np.testing.assert_allclose(reward[live], expected[live], rtol=1e-5, atol=1e-5)


def test_tracking_terms_drop_off_reference(tiny_cfg):
    env = MotionTrackingEnv(tiny_cfg, 4)
    env.reset()

    def shift(qpos, qvel):
        qpos[:, 0] += 0.1  # 10 cm along x, same everything else
    teleport(env, shift)
    _, _, _, _, info = env.step(np.zeros((4, 2), dtype=np.float32))
    np.testing.assert_allclose(info["reward_terms"]["anchor_pos"], np.exp(-0.01 / 0.3 ** 2), rtol=1e-6)
    # body_pos is re-anchored on the robot, so a pure translation is not punished there
    np.testing.assert_allclose(info["reward_terms"]["body_pos"], 1.0, atol=1e-6)
    np.testing.assert_allclose(info["reward_terms"]["anchor_ori"], 1.0, atol=1e-6)


@pytest.mark.parametrize("condition", ["anchor_height", "anchor_orientation", "end_effector_height"])
def test_terminations_trigger(tiny_cfg, condition):
    env = MotionTrackingEnv(tiny_cfg, 6)
    env.reset()

    def modify(qpos, qvel):
        if condition == "anchor_height":
            qpos[:3, 2] -= 0.3
        elif condition == "anchor_orientation":
            flip = np.tile([np.cos(0.75), np.sin(0.75), 0, 0], (3, 1))  # 86 deg about x
            qpos[:3, 3:7] = quat_normalize(quat_mul(qpos[:3, 3:7], flip))
        else:
            qpos[:3, 7] = np.where(qpos[:3, 7] >= 0, -np.pi / 2, np.pi / 2)  # swing the arm: tip moves >= 0.3 m in z
    teleport(env, modify)
    _, _, terminated, truncated, info = env.step(np.zeros((6, 2), dtype=np.float32))
    cond = info["termination_terms"][condition]
    assert cond[:3].all() and not cond[3:].any()
    assert terminated[:3].all() and not terminated[3:].any()
    assert not truncated[:3].any()
    assert info["episode"]["count"] >= 3


def test_clip_end_is_truncation_with_final_obs(tiny_cfg):
    env = MotionTrackingEnv(tiny_cfg, 4)
    env.reset()
    teleport(env)
    env.frame[:2] = env.motion.num_frames[env.clip[:2]] - 2
    obs, _, terminated, truncated, info = env.step(np.zeros((4, 2), dtype=np.float32))
    assert truncated.tolist() == [True, True, False, False]
    assert not terminated.any()
    final = info["final_obs"]
    assert final["obs"].shape == obs["obs"].shape
    # final observations are written in the done rows only (the rest of the buffer is left as it was)
    assert not final["obs"][2:].any() and final["obs"][:2].any()
    assert not np.allclose(final["critic_obs"][:2], obs["critic_obs"][:2])
    # the done envs restarted: new episode, fresh reference state
    assert (env.book.lengths[:2] == 0).all()
    np.testing.assert_allclose(env.pool.qpos[:2], env.motion.lookup(env.clip[:2], env.frame[:2]).qpos, atol=1e-12)
    assert info["episode"]["count"] == 2 and info["episode"]["length_mean"] == 1.0


def test_max_episode_length_truncates(tiny_cfg):
    tiny_cfg.max_episode_length_s = 0.04  # 2 policy steps
    env = MotionTrackingEnv(tiny_cfg, 4)
    env.reset()
    teleport(env)
    env.frame[:] = 0
    zero = np.zeros((4, 2), dtype=np.float32)
    assert not env.step(zero)[3].any()
    assert env.step(zero)[3].all()


def test_nan_env_is_reset_and_counted(tiny_cfg):
    env = MotionTrackingEnv(tiny_cfg, 8)
    env.reset()
    env.pool.qvel[3, 0] = np.nan
    obs, reward, terminated, truncated, info = env.step(np.zeros((8, 2), dtype=np.float32))
    assert info["num_bad_envs"] == 1
    assert terminated[3]
    assert np.isfinite(reward).all() and reward[3] == 0.0
    for part in ("obs", "critic_obs"):
        assert np.isfinite(obs[part]).all() and np.isfinite(info["final_obs"][part]).all()
    assert not env.pool.bad_envs.any()
    assert np.isfinite(env.pool.qpos).all() and np.isfinite(env.pool.qvel).all()
    assert env.book.lengths[3] == 0


def test_random_actions_run_and_stay_finite(tiny_cfg):
    tiny_cfg.reset = ResetConfig(sampling="adaptive")
    env = MotionTrackingEnv(tiny_cfg, 32, seed=1)
    env.reset()
    rng = np.random.default_rng(0)
    ended = 0
    for i in range(40):
        env.split_sub_phases = i >= 20  # update_state's stages timed one by one (the benchmark's breakdown)
        obs, reward, terminated, truncated, info = env.step(rng.uniform(-1, 1, (32, 2)).astype(np.float32))
        assert reward.shape == (32,) and reward.dtype == np.float32
        assert terminated.dtype == bool and truncated.dtype == bool
        # both flags only for a failure at a time-out (the learner bootstraps it, holosoma's truncation wins)
        failed = np.stack(list(info["termination_terms"].values())).any(axis=0)
        assert not (terminated & truncated & ~failed).any()
        assert np.isfinite(obs["obs"]).all() and np.isfinite(reward).all()
        assert set(info["reward_terms"]) == set(env.reward_term_names)
        ended += info["episode"]["count"]
    assert ended > 0
    assert set(env.timer.summary()) == {"backend_step", "update_state", "reset_done", *SUBPHASES}
    assert env.timer.summary()["backend_step"].count == 40


def test_env_outputs_do_not_depend_on_the_pools_contact_fields(tiny_cfg):
    """Without the undesired_contacts term the env builds its pool with contacts=False (no other term reads a
    contact field): every output, restarts included, equals a contacts=True pool's bit for bit."""
    tiny_cfg.reset = ResetConfig(sampling="adaptive")
    ended, _ = _same_outputs_with_and_without_contacts(tiny_cfg, 24, steps=30, seed=3)
    # restarts (whose forward contacts=False thins) were compared; the tiny robot's episodes end (anchor height)
    # before it reaches its floor: the real G1 test below and tests/test_pool.py compare with contacts
    assert ended > 0


def _same_outputs_with_and_without_contacts(cfg, n, steps, seed):
    """Step an env built as the task builds it (contacts=False) and one with contacts=True alike; every output
    must be equal after every step. Returns (episodes ended, contacts the contacts=True pool saw)."""
    envs = [MotionTrackingEnv(cfg, n, seed=seed, pool_kwargs=kw) for kw in (None, {"contacts": True})]
    assert not envs[0].pool.contacts and envs[1].pool.contacts
    ncon = envs[1].pool.bind("ncon")
    outs = [env.buffers() for env in envs]
    for env, out in zip(envs, outs):
        env.reset(out)
    rng = np.random.default_rng(seed)
    ended = contacts = 0
    for _ in range(steps):
        action = rng.uniform(-1, 1, (n, envs[0].action_dim)).astype(np.float32)
        infos = [env.step(action, out)[4] for env, out in zip(envs, outs)]
        for key in outs[0]:
            assert np.array_equal(outs[0][key], outs[1][key]), key
        ended += infos[0]["episode"]["count"]
        contacts += int(ncon.sum())
    return ended, contacts


def test_action_shape_checked(tiny_cfg):
    env = MotionTrackingEnv(tiny_cfg, 4)
    env.reset()
    with pytest.raises(ValueError, match="action must have shape"):
        env.step(np.zeros((4, 3), dtype=np.float32))


def test_adaptive_sampling_favours_failing_frames(tiny_cfg):
    env = MotionTrackingEnv(tiny_cfg, 2)
    cfg = ResetConfig(sampling="adaptive", adaptive_ema=0.5)
    s = StartFrameSampler(env.motion, cfg)
    np.testing.assert_allclose(s.probabilities(), 1.0 / s.num_bins)
    clip = np.array([0, 0, 0, 1])
    frame = np.array([25, 26, 27, 5])
    s.record(clip, frame, np.array([True, True, True, False]))
    np.testing.assert_allclose(s.probabilities(), 1.0 / s.num_bins)  # counted, folded in by the next step
    s.record(clip, frame, np.zeros(4, dtype=bool))
    p = s.probabilities()
    hot = s.bin_of(np.array([0]), np.array([25]))[0]
    assert p[hot] == p.max() and p[hot] > 0.5
    assert p.sum() == pytest.approx(1.0)
    rng = np.random.default_rng(0)
    c, f = s.sample(4000, rng)
    assert (f < env.motion.num_frames[c] - 1).all()
    # (a bin's edge frames are shared with its neighbours: tests/test_start_sampler.py checks per frame)
    assert np.mean(s.bin_of(c, f) == hot) == pytest.approx(p[hot], abs=0.04)
    # uniform sampling covers every startable frame of every clip
    u = StartFrameSampler(env.motion, ResetConfig(sampling="uniform"))
    c, f = u.sample(20000, rng)
    assert set(c.tolist()) == {0, 1}
    assert f[c == 0].max() == env.motion.num_frames[0] - 2 and f.min() == 0


def test_config_rejects_unknown_keys_and_bad_values():
    with pytest.raises(ValueError, match="unknown key"):
        task_config("g1_motion_tracking", {"decimaton": 4})
    with pytest.raises(ValueError, match="reset.sampling"):
        task_config("g1_motion_tracking", {"reset": {"sampling": "greedy"}})


def test_unmatched_gain_pattern_is_an_error(tiny_cfg):
    tiny_cfg.robot.kp = {"j_a": 10.0}
    with pytest.raises(ValueError, match="kp: no pattern matches joint.*j_b"):
        MotionTrackingEnv(tiny_cfg, 2)


@pytest.mark.g1
def test_g1_env_on_reference_and_random_steps():
    cfg = MotionTrackingConfig(reset=ResetConfig(noise=ZERO_NOISE))
    env = MotionTrackingEnv(cfg, 8)
    # the deployable actor set: 5 x 29 joints + anchor orientation 6 + angular velocity 3; the critic every piece
    assert (env.obs_dim, env.critic_obs_dim, env.action_dim) == (154, 160 + 9 * 14, 29)
    assert env.model.nu == 29 and env.model.opt.timestep == pytest.approx(0.005)
    obs = env.reset()
    ref = env.motion.lookup(env.clip, env.frame)
    np.testing.assert_allclose(env.pool.body_pos_w[:, env.body_ids], ref.body_pos_w, atol=1e-9)
    real_step = env.pool.step
    teleport(env)
    _, _, terminated, truncated, info = env.step(np.zeros((8, 29), dtype=np.float32))
    live = ~(terminated | truncated)
    for name in TRACKING_TERMS:
        np.testing.assert_allclose(info["reward_terms"][name][live], 1.0, atol=1e-6, err_msg=name)
    env.pool.step = real_step
    rng = np.random.default_rng(0)
    for _ in range(5):
        obs, reward, terminated, truncated, info = env.step(rng.uniform(-1, 1, (8, 29)).astype(np.float32))
        assert np.isfinite(obs["obs"]).all() and np.isfinite(obs["critic_obs"]).all() and np.isfinite(reward).all()


@pytest.mark.g1
def test_g1_outputs_with_randomization_do_not_depend_on_the_pools_contact_fields():
    """The real G1 with the task's defaults (domain randomization on: per-env friction, com, gains, pushes), but
    for the undesired_contacts term, which reads contact forces (off: the env's pool skips contacts)."""
    cfg = MotionTrackingConfig()
    cfg.rewards.undesired_contacts.weight = 0.0
    assert cfg.randomization.enabled
    ended, contacts = _same_outputs_with_and_without_contacts(cfg, 16, steps=12, seed=4)
    assert ended > 0 and contacts > 0  # restarts and feet on the ground were compared


def test_policy_noise_only_on_policy_obs(tiny_cfg):
    tiny_cfg.obs_noise.joint_pos = 0.05
    tiny_cfg.obs_noise.base_ang_vel = 0.2
    env = MotionTrackingEnv(tiny_cfg, 64, seed=2)
    obs = env.reset()
    s = obs_layout(2, 0, "privileged").policy_slices
    diff = obs["obs"] - obs["critic_obs"][:, : env.obs_dim]
    assert 0 < np.abs(diff[:, s["joint_pos_rel"]]).max() <= 0.05 + 1e-6
    assert 0.1 < np.abs(diff[:, s["base_ang_vel"]]).max() <= 0.2 + 1e-6
    untouched = np.ones(env.obs_dim, dtype=bool)
    untouched[s["joint_pos_rel"]] = untouched[s["base_ang_vel"]] = False
    np.testing.assert_array_equal(diff[:, untouched], 0.0)


def test_missing_user_model_is_a_clear_error(tiny_cfg, tmp_path):
    tiny_cfg.robot.model_xml = str(tmp_path / "nope.xml")
    with pytest.raises(FileNotFoundError, match="nope.xml"):
        MotionTrackingEnv(tiny_cfg, 2)


def test_motion_tracking_uses_the_shared_episode_book(tiny_cfg):
    """Same done bookkeeping and info keys as every task (see unilab.tasks.base.EpisodeBook)."""
    from unilab.tasks.base import EpisodeBook

    env = MotionTrackingEnv(tiny_cfg, 4)
    assert isinstance(env.book, EpisodeBook)
    out = env.buffers()
    env.reset(out=out)
    out["final_obs"][...] = np.nan  # garbage: the env writes final obs in done rows only
    teleport(env)
    env.frame[:1] = env.motion.num_frames[env.clip[:1]] - 2
    obs, _, _, truncated, info = env.step(np.zeros((4, 2), dtype=np.float32), out=out)
    assert obs["obs"] is out["obs"] and truncated.tolist() == [True, False, False, False]
    assert np.isfinite(out["final_obs"][0]).all() and np.isnan(out["final_obs"][1:]).all()
    assert set(info) == {"final_obs", "reward_terms", "termination_terms", "episode", "num_bad_envs"}
    env.close()

"""Domain randomization of the motion-tracking task: each term's fields, ranges, streams, resets and logging."""

from __future__ import annotations

import copy

import mujoco
import numpy as np
import pytest
from mujoco import batch as mjbatch

from unilab.runtime.collector import _count
from unilab.runtime.metrics import MetricsLogger
from unilab.runtime.stats import Counters, counter_names
from unilab.sim.quat import quat_rotate_inv
from unilab.tasks.core.randomization import TERMS
from unilab.tasks.core.randomization_config import RandomizationConfig
from unilab.tasks.g1_motion_tracking.config import MotionTrackingConfig, TerminationsConfig
from unilab.tasks.g1_motion_tracking.env import MotionTrackingEnv
from unilab.tasks.registry import task_config
from unilab.telemetry.phase_timer import PhaseTimer

TERM_NAMES = tuple(t.name for t in TERMS)


def _only(cfg: MotionTrackingConfig, *terms: str) -> MotionTrackingConfig:
    """A copy of ``cfg`` with randomization on and exactly ``terms`` enabled."""
    cfg = copy.deepcopy(cfg)
    cfg.randomization = RandomizationConfig()
    for name in TERM_NAMES:
        getattr(cfg.randomization, name).enabled = name in terms
    cfg.randomization.mass.bodies, cfg.randomization.mass.added_body = ".*", cfg.anchor_body  # the tiny robot's
    return cfg


def _off(cfg: MotionTrackingConfig) -> MotionTrackingConfig:
    cfg = copy.deepcopy(cfg)
    cfg.randomization = RandomizationConfig(enabled=False)
    return cfg


def _changed_model_fields(env: MotionTrackingEnv) -> dict[str, np.ndarray]:
    """Per-env model fields that differ from the env's model: name -> (num_envs, ...) mask of changed entries."""
    b, m = env.pool._batch, env.model
    out = {}
    for name in sorted(mjbatch.MODEL_FIELDS):
        if name.startswith("opt.") or name == "bvh_aabb":  # bvh_aabb: the bodies' part of the model's array
            continue
        arr = b.expanded(name)
        if arr is None:
            continue
        mask = arr != np.asarray(getattr(m, name))[None]
        if mask.any():
            out[name] = mask
    return out


def _rollout(env: MotionTrackingEnv, steps: int, seed: int = 0) -> list[tuple[np.ndarray, ...]]:
    """(qpos, qvel, obs, critic_obs, reward, terminated, truncated) after reset and each random-action step."""
    rng = np.random.default_rng(seed)
    out = env.buffers()
    env.reset(out=out)
    rec = [(env.pool.qpos.copy(), env.pool.qvel.copy(), out["obs"].copy(), out["critic_obs"].copy())]
    for _ in range(steps):
        _, r, te, tr, _ = env.step(rng.uniform(-1, 1, (env.num_envs, env.action_dim)).astype(np.float32), out=out)
        rec.append((env.pool.qpos.copy(), env.pool.qvel.copy(), out["obs"].copy(), out["critic_obs"].copy(),
                    r.copy(), te.copy(), tr.copy()))
    return rec


def _assert_same(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        for j, (u, v) in enumerate(zip(x, y)):
            assert np.array_equal(u, v), f"step {i}, item {j}"


def _neutral(cfg: MotionTrackingConfig) -> MotionTrackingConfig:
    """Every term on, with ranges that change nothing (runs every hook of the randomized path)."""
    cfg = _only(cfg, *TERM_NAMES)
    r = cfg.randomization
    r.friction.range = [1.0, 1.0]  # the tiny model's friction
    r.base_com.x = r.base_com.y = r.base_com.z = [0.0, 0.0]
    r.joint_pos_bias.range = [0.0, 0.0]
    r.push.max_lin_vel = [0.0, 0.0, 0.0]
    r.push.max_ang_vel = [0.0, 0.0, 0.0]
    r.push.interval_s = [0.02, 0.06]
    r.pd_gains.kp_scale = r.pd_gains.kd_scale = [1.0, 1.0]
    r.action_delay.steps = [0, 0]
    r.mass.scale, r.mass.added = [1.0, 1.0], [0.0, 0.0]
    return cfg


def test_disabled_means_no_randomizer_and_identical_rollouts(tiny_cfg):
    master_off = MotionTrackingEnv(_off(tiny_cfg), 16, seed=4)
    terms_off = MotionTrackingEnv(_only(tiny_cfg), 16, seed=4)
    assert master_off.randomizer is None and terms_off.randomizer is None
    assert master_off.stats() == {} and master_off.spec.stats == ()
    assert not _changed_model_fields(master_off) and all(
        master_off.pool._batch.expanded(n) is None for n in ("geom_friction", "body_ipos", "actuator_gainprm"))
    _assert_same(_rollout(master_off, 12), _rollout(terms_off, 12))


def test_neutral_randomization_is_bit_identical_and_leaves_the_env_rng_alone(tiny_cfg):
    """Every hook runs (per-env fields, set_const, pushes, delay queue, bias rows) with zero effect."""
    plain = MotionTrackingEnv(_off(tiny_cfg), 16, seed=7)
    neutral = MotionTrackingEnv(_neutral(tiny_cfg), 16, seed=7)
    assert neutral.randomizer is not None and len(neutral.randomizer.terms) == len(TERMS)
    a, b = _rollout(plain, 15), _rollout(neutral, 15)
    assert neutral.book.lengths.max() > 3  # pushes every 1-3 steps: some envs were pushed (by zero)
    _assert_same(a, b)
    np.testing.assert_array_equal(plain.clip, neutral.clip)
    np.testing.assert_array_equal(plain.frame, neutral.frame)
    assert plain.rng.bit_generator.state == neutral.rng.bit_generator.state
    np.testing.assert_array_equal(plain.reset_noise_streams, neutral.reset_noise_streams)
    np.testing.assert_array_equal(plain.obs_noise_streams, neutral.obs_noise_streams)


def test_every_term_on_leaves_the_env_rng_stream_alone(tiny_cfg):
    plain = MotionTrackingEnv(_off(tiny_cfg), 16, seed=9)
    rand = MotionTrackingEnv(_only(tiny_cfg, *TERM_NAMES), 16, seed=9)
    plain.reset()
    rand.reset()
    np.testing.assert_array_equal(plain.clip, rand.clip)
    np.testing.assert_array_equal(plain.frame, rand.frame)
    assert plain.rng.bit_generator.state == rand.rng.bit_generator.state
    np.testing.assert_array_equal(plain.reset_noise_streams, rand.reset_noise_streams)


def test_friction_per_env_in_range_on_robot_and_ground_only(tiny_cfg):
    env = MotionTrackingEnv(_only(tiny_cfg, "friction"), 32, seed=1)
    env.reset()
    changed = _changed_model_fields(env)
    assert set(changed) == {"geom_friction"}
    assert changed["geom_friction"][:, :, 1:].sum() == 0  # torsional and rolling untouched
    f = env.pool._batch.expanded("geom_friction")[:, :, 0]
    assert f.shape == (32, env.model.ngeom)
    assert np.all((f >= 0.3) & (f <= 1.6))
    np.testing.assert_array_equal(f, f[:, :1].repeat(env.model.ngeom, 1))  # one coefficient per env
    assert np.unique(f[:, 0]).size == 32
    np.testing.assert_array_equal(env.randomizer.friction, f[:, 0])
    # the values reach the simulation: a model of env 5 has its coefficient
    assert env.pool._batch.get_model(5).geom_friction[0, 0] == f[5, 0]


def test_friction_changes_contact_physics(tiny_cfg):
    """Same states, same actions: only the friction differs, and so does the motion on the ground."""
    cfg = _only(tiny_cfg, "friction")
    cfg.terminations = TerminationsConfig(anchor_height=100.0, anchor_orientation=2.0, end_effector_height=100.0)
    cfg.randomization.friction.range = [0.05, 0.05]
    low = MotionTrackingEnv(cfg, 4, seed=0)
    cfg.randomization.friction.range = [1.5, 1.5]
    high = MotionTrackingEnv(cfg, 4, seed=0)
    a, b = _rollout(low, 40), _rollout(high, 40)
    assert not np.array_equal(a[-1][0], b[-1][0])


def test_base_com_offsets_one_body_per_env_in_range(tiny_cfg):
    env = MotionTrackingEnv(_only(tiny_cfg, "base_com"), 32, seed=1)
    env.reset()
    changed = _changed_model_fields(env)
    body = mujoco.mj_name2id(env.model, mujoco.mjtObj.mjOBJ_BODY, "base")  # the anchor body (default)
    mask = changed.pop("body_ipos")
    assert mask[:, body].all() and mask.sum() == 32 * 3  # exactly that body, every axis, every env
    # the rest are mj_setConst's outputs, derived from body_ipos (no input of its other than body_ipos moved)
    assert not set(changed) & set(mujoco.MjModel._setconst_inputs)
    off = env.pool._batch.expanded("body_ipos")[:, body] - env.model.body_ipos[body]
    np.testing.assert_allclose(off, env.randomizer.com_offset, atol=1e-15)
    for axis, (lo, hi) in enumerate(([-0.025, 0.025], [-0.05, 0.05], [-0.05, 0.05])):
        assert np.all((off[:, axis] >= lo) & (off[:, axis] <= hi)) and np.unique(off[:, axis]).size == 32


def test_base_com_names_a_missing_body(tiny_cfg):
    cfg = _only(tiny_cfg, "base_com")
    cfg.randomization.base_com.body = "torso_link"
    with pytest.raises(ValueError, match=r"task.randomization.base_com.body: 'torso_link'"):
        MotionTrackingEnv(cfg, 2)


def test_pd_gains_scale_kp_and_kd_per_env_and_joint_at_reset(tiny_cfg):
    env = MotionTrackingEnv(_only(tiny_cfg, "pd_gains"), 32, seed=1)
    env.reset()
    assert set(_changed_model_fields(env)) == {"actuator_gainprm", "actuator_biasprm"}
    g, bias = env.pool._batch.expanded("actuator_gainprm"), env.pool._batch.expanded("actuator_biasprm")
    kp_s, kd_s = g[:, :, 0] / env.kp, -bias[:, :, 2] / env.kd
    np.testing.assert_allclose(-bias[:, :, 1], g[:, :, 0], rtol=0, atol=0)  # force = kp (target - q)
    for s in (kp_s, kd_s):
        assert np.all((s >= 0.9 - 1e-12) & (s <= 1.1 + 1e-12)) and np.unique(s).size == s.size
    np.testing.assert_array_equal(g[:, :, 1:], np.broadcast_to(env.model.actuator_gainprm[:, 1:], g[:, :, 1:].shape))
    # redrawn at a reset, for the reset envs only
    before = g.copy()
    env.restart_rows(np.array([3, 7]), env.buffers())
    after = env.pool._batch.expanded("actuator_gainprm")
    moved = (after != before).any(axis=(1, 2))
    assert moved.tolist() == [i in (3, 7) for i in range(32)]


def test_joint_pos_bias_shifts_the_default_pose_of_observations_and_targets(tiny_cfg):
    """holosoma's setup_dof_pos_bias: default_dof_pos = default + bias, which its PD targets
    (default_dof_pos + scale x action) and its joint_pos_rel observation (q - default_dof_pos) both use."""
    biased = MotionTrackingEnv(_only(tiny_cfg, "joint_pos_bias"), 16, seed=2)
    bias = biased.randomizer.joint_pos_bias
    assert bias.shape == (16, 2) and np.all(np.abs(bias) <= 0.01) and np.unique(bias).size == 32
    assert not _changed_model_fields(biased)
    default = biased.default_joint_pos + bias  # holosoma's per-env default_dof_pos
    s = biased.layout.slices["joint_pos_rel"]
    obs = biased.reset()
    rng = np.random.default_rng(0)
    for _ in range(5):
        q = biased.pool.qpos[:, biased.qpos_adr]
        for part in ("obs", "critic_obs"):
            np.testing.assert_allclose(obs[part][:, s], q - default, atol=1e-6)
        action = rng.uniform(-1, 1, (16, biased.action_dim))
        obs, _, term, trunc, _ = biased.step(action.astype(np.float32))
        # the targets the step applied (a restarted env's are zeroed): the shifted default plus the scaled action
        want = default[:, biased.act_joint] + biased.action_scale * action.astype(np.float32)
        kept = ~(term | trunc)
        np.testing.assert_allclose(biased.pool.ctrl[kept], want[kept], atol=1e-12)


def _push_cfg(cfg):
    cfg = _only(cfg, "push")
    cfg.terminations = TerminationsConfig(anchor_height=100.0, anchor_orientation=2.0, end_effector_height=100.0)
    cfg.max_episode_length_s = 100.0
    return cfg


def test_push_adds_the_sampled_kick_to_the_root_velocity(tiny_cfg):
    cfg = _push_cfg(tiny_cfg)
    cfg.randomization.push.interval_s = [0.1, 0.2]  # 5..10 policy steps of 0.02 s
    cfg.reset.sampling = "uniform"  # start frames far enough from the clip ends for every env to be pushed
    env = MotionTrackingEnv(cfg, 16, seed=3)
    r = env.randomizer
    env.reset()
    assert np.all((r.push_steps >= 5) & (r.push_steps <= 10)) and np.unique(r.push_steps).size > 1
    seen = {}
    real_step = env.pool.step

    def spy(ctrl, substeps=1):
        seen["qvel"], seen["qpos"] = env.pool.qvel.copy(), env.pool.qpos.copy()
        return real_step(ctrl, substeps)

    env.pool.step = spy
    pushed = np.zeros(16, dtype=int)
    limit = np.array([0.5, 0.5, 0.2, 0.52, 0.52, 0.78])
    for _ in range(12):
        qvel_before = env.pool.qvel.copy()
        expect_due = r.push_counter + 1 >= r.push_steps
        env.step(np.zeros((16, 2), dtype=np.float32))
        due = np.flatnonzero(expect_due)
        assert r.pushes == due.size
        d = seen["qvel"] - qvel_before
        np.testing.assert_array_equal(d[~expect_due], 0.0)
        kick = r.last_kick[due]
        assert np.all(np.abs(kick) <= limit)
        np.testing.assert_allclose(d[due, :3], kick[:, :3], atol=1e-12)  # world-frame linear velocity
        ang_b = quat_rotate_inv(seen["qpos"][due, 3:7] / np.linalg.norm(seen["qpos"][due, 3:7], axis=1)[:, None],
                                kick[:, 3:])
        np.testing.assert_allclose(d[due, 3:6], ang_b, atol=1e-12)  # body-frame angular velocity of a world kick
        np.testing.assert_array_equal(d[:, 6:], 0.0)
        pushed += expect_due
    assert pushed.min() >= 1  # every env was pushed at least once in 12 steps


def test_push_timer_restarts_at_reset(tiny_cfg):
    env = MotionTrackingEnv(_push_cfg(tiny_cfg), 8, seed=3)
    r = env.randomizer
    env.reset()
    for _ in range(3):
        env.step(np.zeros((8, 2), dtype=np.float32))
    assert (r.push_counter == 3).all()
    steps = r.push_steps.copy()
    env.restart_rows(np.array([1, 4]), env.buffers())
    assert r.push_counter.tolist() == [3, 0, 3, 3, 0, 3, 3, 3]
    assert (r.push_steps[[0, 2, 3, 5, 6, 7]] == steps[[0, 2, 3, 5, 6, 7]]).all()
    assert np.all((r.push_steps >= 50) & (r.push_steps <= 150))  # U[1, 3] s at 0.02 s per step


def test_action_delay_applies_the_targets_of_the_drawn_step(tiny_cfg):
    env = MotionTrackingEnv(_only(tiny_cfg, "action_delay"), 16, seed=5)
    r = env.randomizer
    env.reset()
    assert set(np.unique(r.delay)) == {0, 1}
    rng = np.random.default_rng(0)
    prev = np.broadcast_to(env.action_default, (16, 2))  # an empty queue holds the default pose
    for _ in range(4):
        a = rng.uniform(-1, 1, (16, 2)).astype(np.float32)
        ctrl = env.action_default + env.action_scale * np.clip(a, -1, 1)
        _, _, te, tr, _ = env.step(a)
        live = ~(te | tr)
        want = np.where((r.delay == 1)[:, None], prev, ctrl)
        np.testing.assert_allclose(env.pool.ctrl[live], want[live], atol=1e-12)
        prev = np.where(live[:, None], ctrl, env.action_default)  # a reset empties the queue


@pytest.mark.parametrize("persistent", [False, True])
def test_randomized_model_fields_survive_resets(tiny_cfg, persistent):
    env = MotionTrackingEnv(_only(tiny_cfg, "friction", "base_com", "pd_gains"), 8, seed=6,
                            pool_kwargs={"persistent": persistent, "nthread": 1})
    env.reset()
    b = env.pool._batch
    fric, ipos = b.expanded("geom_friction").copy(), b.expanded("body_ipos").copy()
    invw = b.expanded("dof_invweight0").copy()
    env.reset()  # every env restarts (pool.reset of all rows)
    rng = np.random.default_rng(1)
    for _ in range(30):  # auto-resets of the ended envs
        env.step(rng.uniform(-1, 1, (8, 2)).astype(np.float32))
    env.pool.reset(env._all_rows, np.tile(env.model.qpos0, (8, 1)), np.zeros((8, env.model.nv)))
    np.testing.assert_array_equal(b.expanded("geom_friction"), fric)
    np.testing.assert_array_equal(b.expanded("body_ipos"), ipos)
    np.testing.assert_array_equal(b.expanded("dof_invweight0"), invw)
    np.testing.assert_array_equal(b.expanded("actuator_gainprm")[:, :, 0], env.kp * env.randomizer.kp_scale)


def _values(env):
    r = env.randomizer
    return (r.friction, r.com_offset, r.joint_pos_bias, r.push_steps, r.kp_scale, r.kd_scale, r.delay)


def test_values_are_reproducible_from_the_seed(tiny_cfg):
    cfg = _only(tiny_cfg, *TERM_NAMES)
    envs = [MotionTrackingEnv(cfg, 16, seed=s) for s in (11, 11, 12)]
    for e in envs:
        e.reset()
    a, b, c = (_values(e) for e in envs)
    for x, y, z in zip(a, b, c):
        np.testing.assert_array_equal(x, y)
        assert not np.array_equal(x, z)
    # a term's values do not depend on which other terms are on
    alone = MotionTrackingEnv(_only(tiny_cfg, "friction"), 16, seed=11)
    np.testing.assert_array_equal(alone.randomizer.friction, a[0])


def test_config_errors_name_the_key():
    with pytest.raises(ValueError, match=r"task.randomization.friction.range"):
        task_config("g1_motion_tracking", {"randomization": {"friction": {"range": [1.0, 0.5]}}})
    with pytest.raises(ValueError, match=r"task.randomization.push.max_lin_vel"):
        task_config("g1_motion_tracking", {"randomization": {"push": {"max_lin_vel": [0.5, 0.5]}}})
    with pytest.raises(ValueError, match=r"task.randomization.action_delay.steps"):
        task_config("g1_motion_tracking", {"randomization": {"action_delay": {"steps": [-1, 1]}}})
    with pytest.raises(ValueError, match=r"randomization.*frictoin"):
        task_config("g1_motion_tracking", {"randomization": {"frictoin": {"enabled": False}}})


def test_holosoma_defaults():
    r = RandomizationConfig()
    assert [r.active(n) for n in TERM_NAMES] == [True, True, True, True, False, False, False]
    assert r.friction.range == [0.3, 1.6] and r.joint_pos_bias.range == [-0.01, 0.01]
    assert (r.base_com.x, r.base_com.y, r.base_com.z) == ([-0.025, 0.025], [-0.05, 0.05], [-0.05, 0.05])
    assert r.push.interval_s == [1.0, 3.0] and r.push.max_lin_vel + r.push.max_ang_vel == [0.5, 0.5, 0.2, 0.52,
                                                                                          0.52, 0.78]
    assert r.pd_gains.kp_scale == r.pd_gains.kd_scale == [0.9, 1.1] and r.action_delay.steps == [0, 1]


def test_stats_reach_the_metrics_as_randomization_tags(tiny_cfg, tmp_path):
    env = MotionTrackingEnv(_only(tiny_cfg, *TERM_NAMES), 8, seed=1)
    out = env.buffers()
    env.reset(out=out)
    spec = env.spec
    assert spec.stats == env.stat_names and "randomization/friction" in spec.stats
    assert "randomization/push_count" in spec.stats
    names = counter_names(spec.reward_terms, spec.stats)
    counters = Counters(np.zeros(len(names)), names)
    log = MetricsLogger(tmp_path, 8, names, pids=[], enabled=False, log_interval=4)
    log.start(0, counters.array)
    timer = PhaseTimer()
    for _ in range(4):
        _, reward, _, _, info = env.step(np.zeros((8, 2), dtype=np.float32), out=out)
        _count(counters, timer, env.timer, reward, info, env.stats())
    log.step(4, PhaseTimer(), {})
    assert log.last["randomization/friction"] == pytest.approx(env.randomizer.friction.mean())
    assert log.last["randomization/action_delay"] == pytest.approx(env.randomizer.delay.mean())
    assert log.last["randomization/push_count"] == 0.0  # U[1, 3] s: no push in the first 4 steps


@pytest.mark.parametrize("tight", [("end_effector_height",), ("anchor_height", "end_effector_height")])
def test_termination_shares_name_what_ended_the_episodes(tiny_cfg, tmp_path, tight, capsys):
    """``termination/<name>`` is the share of ended episodes that the condition ended: 1 for a threshold every
    state breaks, 0 for one no state reaches; the console line names the leading one."""
    cfg = _off(tiny_cfg)
    cfg.terminations = TerminationsConfig(anchor_height=1e3, anchor_orientation=3.0, end_effector_height=1e3)
    for name in tight:
        setattr(cfg.terminations, name, -1.0)  # |error| > -1 always holds
    env = MotionTrackingEnv(cfg, 8, seed=0)
    out = env.buffers()
    env.reset(out=out)
    names = counter_names(env.spec.reward_terms, env.spec.stats, env.spec.termination_terms)
    counters = Counters(np.zeros(len(names)), names)
    log = MetricsLogger(tmp_path, 8, names, pids=[], log_interval=3, console_interval_s=0.0)
    log.start(0, counters.array)
    ended = 0
    for _ in range(3):
        _, reward, terminated, _, info = env.step(np.zeros((8, 2), dtype=np.float32), out=out)
        ended += int(terminated.sum())
        _count(counters, PhaseTimer(), env.timer, reward, info)
    log.step(3, PhaseTimer(), {})
    assert ended == 3 * 8 and log.last["episode/count"] == ended
    for name in env.spec.termination_terms:
        assert log.last[f"termination/{name}"] == (1.0 if name in tight else 0.0), name
    log.close()
    leading = next(n for n in env.spec.termination_terms if n in tight)  # ties: the first declared
    assert f"| ended by {leading} 100 %" in capsys.readouterr().out


@pytest.mark.g1
def test_g1_every_term_on_the_real_model():
    cfg = MotionTrackingConfig()
    cfg.randomization.pd_gains.enabled = cfg.randomization.action_delay.enabled = True
    env = MotionTrackingEnv(cfg, 8, seed=0)
    env.reset()
    m, b = env.model, env.pool._batch
    changed = _changed_model_fields(env)
    assert {"geom_friction", "body_ipos", "actuator_gainprm", "actuator_biasprm"} <= set(changed)
    f = b.expanded("geom_friction")[:, :, 0]
    assert f.shape == (8, m.ngeom) and np.all((f >= 0.3) & (f <= 1.6))
    torso = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "torso_link")
    assert changed["body_ipos"][:, torso].all() and changed["body_ipos"].sum() == 8 * 3
    assert b.expanded("actuator_gainprm").shape == (8, 29, 10)
    assert env.randomizer.root_dof == 0 and env.randomizer.joint_pos_bias.shape == (8, 29)
    rng = np.random.default_rng(0)
    for _ in range(5):
        obs, reward, _, _, _ = env.step(rng.uniform(-1, 1, (8, 29)).astype(np.float32))
        assert np.isfinite(obs["obs"]).all() and np.isfinite(reward).all()
    assert set(env.stats()) == set(env.spec.stats) and len(env.spec.stats) == 8


@pytest.mark.g1
def test_g1_disabled_is_bit_identical_to_neutral():
    cfg = MotionTrackingConfig()
    plain = MotionTrackingEnv(_off(cfg), 8, seed=1)
    neutral = _neutral(cfg)
    neutral.randomization.friction.enabled = False  # the G1 geoms' frictions differ from the ground's
    env = MotionTrackingEnv(neutral, 8, seed=1)
    _assert_same(_rollout(plain, 6), _rollout(env, 6))

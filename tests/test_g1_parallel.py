"""The G1 task's parallel drivers: bit-identical to the serial kernels they replaced, term tables, threads.

The reference is today's serial kernels, kept verbatim in ``reference_g1_kernels``;
every comparison is exact (``np.array_equal``), on real (stepped) and random states.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numba
import numpy as np
import pytest
import reference_g1_kernels as ref_k
from test_g1_task import tiny_cfg  # noqa: F401 - the fixture

from unilab.sim import cpu, numba_threads
from unilab.sim.mujoco import pool as pool_mod
from unilab.tasks import base
from unilab.tasks.env_streams import env_streams, fill_symmetric
from unilab.tasks.g1_motion_tracking import resets, step_kernels
from unilab.tasks.g1_motion_tracking.config import (
    ObsNoiseConfig,
    ResetConfig,
    ResetNoiseConfig,
    RewardsConfig,
    TerminationsConfig,
)
from unilab.tasks.g1_motion_tracking.env import MotionTrackingEnv
from unilab.tasks.g1_motion_tracking.observations import CRITIC_OBS, POLICY_OBS, ObsLayout
from unilab.tasks.g1_motion_tracking.resets import StartFrameSampler, start_state
from unilab.tasks.g1_motion_tracking.rewards import REWARD_TERMS, TERM_NAMES
from unilab.tasks.g1_motion_tracking.step_driver import GATHER, OBSERVE, REWARDS, STEP, TERMINATE
from unilab.tasks.g1_motion_tracking.step_kernels import action_to_ctrl
from unilab.tasks.g1_motion_tracking.terminations import CONDITION_NAMES, TERMINATIONS


def _noisy_env(cfg, n=64, seed=5):
    # the serial reference kernels fill the privileged actor set (every policy piece, in table order)
    cfg.policy_obs = "privileged"
    cfg.obs_noise = ObsNoiseConfig(anchor_pos=0.05, anchor_ori=0.1, base_lin_vel=0.2, base_ang_vel=0.3,
                                   joint_pos=0.01, joint_vel=0.5)
    env = MotionTrackingEnv(cfg, n, seed=seed)
    env.reset()
    rng = np.random.default_rng(seed)
    for _ in range(7):  # real states: a few physics steps with random actions (some envs restart)
        env.step(rng.uniform(-1, 1, (n, env.action_dim)).astype(np.float32))
    return env


def _randomize(env, rng):
    """Random robot states (unit and non-unit quaternions, large velocities) in the pool's bound arrays."""
    p = env.pool
    for name in ("xpos", "cvel", "subtree_com"):  # derived fields are read-only: replace the arrays
        setattr(p, name, rng.normal(0, 2, getattr(p, name).shape))
    p.qvel[...] = rng.normal(0, 2, p.qvel.shape)
    q = rng.normal(size=p.xquat.shape)
    p.xquat = q / np.linalg.norm(q, axis=-1, keepdims=True)
    p.qpos[...] = rng.normal(size=p.qpos.shape)
    env.action[...] = rng.uniform(-1, 1, env.action.shape)
    env.last_action[...] = rng.uniform(-1, 1, env.last_action.shape)
    env.frame[...] = rng.integers(0, 200, env.num_envs)
    env.clip[...] = rng.integers(0, env.motion.num_clips, env.num_envs)


def _reference_update(env, rows, noise):
    """Today's serial kernels on env's state: (ref frames, state, terms, reward, conds, policy, critic)."""
    p, k = env.pool, rows.shape[0]
    lib = env.motion
    ref = lib.lookup(env.clip[rows], env.frame[rows])
    nb, nj = len(env.body_ids), len(env.joint_names)
    state = (np.empty((k, nb, 3)), np.empty((k, nb, 4)), np.empty((k, nb, 3)), np.empty((k, nb, 3)),
             np.empty((k, nj)), np.empty((k, nj)), np.empty((k, 3)), np.empty((k, 3)))
    ref_k.gather_robot_state(rows, p.xpos, p.xquat, p.cvel, p.subtree_com, p.qpos, p.qvel, env.body_ids,
                             env.root_ids, env.qpos_adr, env.dof_adr, *state)
    terms = np.zeros((k, len(TERM_NAMES)))
    inv_sigma_sq = env.rewards.params[:6]
    ref_k.reward_terms_kernel(env.anchor, *state[:4], ref.body_pos_w, ref.body_quat_w, ref.body_lin_vel_w,
                              ref.body_ang_vel_w, state[4], env.soft_lo, env.soft_hi, env.action[rows],
                              env.last_action[rows], inv_sigma_sq, terms, env.action_bound)
    conds = np.zeros((k, 3), dtype=bool)
    ref_k.termination_kernel(env.anchor, env.ee_index, state[0], state[1], ref.body_pos_w, ref.body_quat_w,
                             env.thresholds, conds)
    policy = np.empty((k, env.obs_dim), dtype=np.float32)
    critic = np.empty((k, env.critic_obs_dim), dtype=np.float32)
    a = env.anchor
    # the observation shows the next reference frame (the next step's reward's); the step's tail sets
    # last_action = action before the observations read it, shown times the action bound
    obs_ref = lib.lookup(env.clip[rows], env.frame[rows] + 1)
    ref_k.fill_observations(a, state[0], state[1], state[4], state[5], state[6], state[7], obs_ref.body_pos_w[:, a],
                            obs_ref.body_quat_w[:, a], obs_ref.joint_pos, obs_ref.joint_vel, env.default_joint_pos,
                            env.action[rows] * env.action_bound, env.noise_scale, noise, policy, critic)
    if not (np.isfinite(policy).all() and np.isfinite(critic).all()):
        np.nan_to_num(policy, copy=False, nan=0.0, posinf=0.0, neginf=0.0)
        np.nan_to_num(critic, copy=False, nan=0.0, posinf=0.0, neginf=0.0)
    for o in (policy, critic):  # holosoma's clip_observations
        np.clip(o, -env.cfg.obs_clip, env.cfg.obs_clip, out=o)
    # the weighted sum in table order (was OpenBLAS's dot, whose order depends on the CPU)
    reward = np.zeros(k)
    for j, w in enumerate(env.rewards.weights):
        reward += terms[:, j] * w
    return lib.flat_index(env.clip[rows], env.frame[rows]), state, terms, reward, conds, policy, critic


def _draws(states, rows, width):
    """The noise the observation driver draws from ``states`` for ``rows`` (states left as they were)."""
    out = np.empty((rows.size, width))
    fill_symmetric(states.copy(), rows, out)
    return out


def _parallel_update(env, rows, noise_streams, stages=(GATHER, REWARDS, TERMINATE, OBSERVE)):
    """The env's step driver on the same state, outputs in the rows ``rows`` (noise from ``noise_streams``).

    ``stages``: the driver's stage masks, run in this order (one region each, or fused).
    """
    env.ref_index[rows] = -1  # the gather stage looks each env's reference row up itself
    n = env.num_envs
    env._terms[...] = np.nan
    env._reward[...] = np.nan
    env._conds[...] = False
    env._failed[...] = True
    out = env.buffers()
    for name in ("obs", "critic_obs"):
        out[name][...] = np.nan
    info = (np.full((len(TERM_NAMES), n), np.nan, dtype=np.float32), np.zeros((len(CONDITION_NAMES), n), bool))
    env.obs_noise_streams = noise_streams
    for st in stages:
        env.run_stages(st, rows, out, np.zeros(n, dtype=bool), info)
    np.testing.assert_array_equal(env._failed[rows], env._conds[rows].any(axis=1))
    want_t, want_c = ref_k.info_columns(env._terms[rows], env._conds[rows], TERM_NAMES, CONDITION_NAMES)
    for i, name in enumerate(TERM_NAMES):
        assert np.array_equal(info[0][i, rows], want_t[name], equal_nan=True), name
    for i, name in enumerate(CONDITION_NAMES):
        assert np.array_equal(info[1][i, rows], want_c[name]), name
    state = tuple(b[rows] for b in (env.body_pos, env.body_quat, env.body_lin, env.body_ang, env.joint_pos,
                                    env.joint_vel, env.base_lin_b, env.base_ang_b))
    return (env.ref_index[rows], state, env._terms[rows].copy(), env._reward[rows].copy(), env._conds[rows].copy(),
            out["obs"][rows], out["critic_obs"][rows])


def _assert_identical(got, want):
    names = ("ref_index", "state", "terms", "reward", "conds", "policy", "critic")
    for name, g, w in zip(names, got, want):
        if name == "state":
            for i, (gs, ws) in enumerate(zip(g, w)):
                assert np.array_equal(gs, ws, equal_nan=True), f"state[{i}]"
        else:
            assert np.array_equal(g, w, equal_nan=True), name


@pytest.mark.parametrize("states", ["real", "random"])
@pytest.mark.parametrize("subset", [False, True])
def test_update_drivers_bit_identical_to_serial_kernels(tiny_cfg, states, subset):  # noqa: F811
    env = _noisy_env(tiny_cfg)
    rng = np.random.default_rng(11)
    if states == "random":
        _randomize(env, rng)
        env.pool.xpos[3, 1, 2] = np.nan  # a diverged env: NaN must become 0 in the observations, alike
        env.pool.qvel[5, 0] = np.inf
    # all envs (update_state), or a shuffled subset (reset_done's restarted rows)
    rows = np.sort(rng.choice(env.num_envs, 17, replace=False)) if subset else np.arange(env.num_envs)
    states = env_streams(int(rng.integers(1 << 30)), env.num_envs, tag=7)
    want = _reference_update(env, rows, _draws(states, rows, env.obs_dim))
    got = _parallel_update(env, rows, states.copy(), stages=(STEP,))
    _assert_identical(got, want)


_NOISES = {
    "default": ResetNoiseConfig(),
    "none": ResetNoiseConfig(root_pos=[0, 0, 0], root_rpy=[0, 0, 0], root_lin_vel=[0, 0, 0],
                             root_ang_vel=[0, 0, 0], joint_pos=0.0),
    # partly zero scales (draws times 0 give -0.0), a full turn of roll, joints pushed past their limits
    "mixed": ResetNoiseConfig(root_pos=[0.0, 0.3, 0.0], root_rpy=[3.5, 0.0, 0.7], root_lin_vel=[0, 0, 0],
                              root_ang_vel=[2.0, 0.0, 1.0], joint_pos=3.0),
}


class _Draws:
    """Stands in for the NumPy generator of the reference code: its ``uniform`` calls get the draws
    the start-state driver makes from the envs' streams (each noise group's columns, in call order;
    the reference skips the groups whose scales are all 0, the driver draws them anyway)."""

    def __init__(self, draws, noise):
        groups = [(0, noise.root_pos), (3, noise.root_rpy), (6, noise.root_lin_vel), (9, noise.root_ang_vel)]
        cols = [slice(c, c + 3) for c, s in groups if np.any(s)]
        if noise.joint_pos:
            cols.append(slice(12, draws.shape[1]))
        self._next = iter([draws[:, c] for c in cols])

    def uniform(self, lo, hi, size):
        out = next(self._next)
        assert (lo, hi) == (-1.0, 1.0) and out.shape == size
        return out


@pytest.mark.parametrize("noise", list(_NOISES))
def test_start_state_matches_numpy(tiny_cfg, noise):  # noqa: F811
    """The start-state driver against the NumPy code it replaced, on the same draws.

    Bit for bit, except that the roll-pitch-yaw cos/sin are Numba's (the C library's)
    where the reference used NumPy's (which may be SIMD code, rounding differently by a
    unit in the last place on some CPUs): with roll-pitch-yaw noise, within 1e-14.
    """
    env = _noisy_env(tiny_cfg, n=64)
    cfg = _NOISES[noise]
    rng = np.random.default_rng(3)
    nj = env.qpos_adr.shape[0]
    for k in (0, 1, 17, 64):
        rows = np.sort(rng.choice(env.num_envs, k, replace=False))
        starts = rng.integers(0, env.motion.num_clips, k), rng.integers(0, 40, k)
        streams = env_streams(int(rng.integers(1 << 30)), env.num_envs, tag=2)
        draws = _draws(streams, rows, 12 + nj)
        adr = (env.qpos_adr, env.joint_lo, env.joint_hi)
        env.last_action[...] = 1.0
        episode = tuple(a.copy() for a in (env.clip, env.frame, env.ref_index, env.last_action))
        before = streams.copy()
        got = start_state(env.motion, rows, starts, episode, cfg, streams, *adr)
        # the rows are placed: clip, frame, their library row, last_action 0; the other envs untouched
        clip, frame, ref_index, last_action = episode
        others = np.setdiff1d(np.arange(env.num_envs), rows)
        assert np.array_equal(clip[rows], starts[0]) and np.array_equal(frame[rows], starts[1])
        assert np.array_equal(ref_index[rows], env.motion.flat_index(*starts))
        assert not last_action[rows].any() and (last_action[others] == 1.0).all()
        assert np.array_equal(ref_index[others], env.ref_index[others]) and np.array_equal(clip[others],
                                                                                           env.clip[others])
        want = ref_k.start_state(env.motion, ref_index, rows, cfg, _Draws(draws, cfg), *adr)
        if np.any(cfg.root_rpy):
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w, rtol=0, atol=1e-14)
        else:
            assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
        # each restarted env's stream moved on by its 12 + nj draws, the others' stayed
        after = before.copy()
        fill_symmetric(after, rows, np.empty((k, 12 + nj)))
        np.testing.assert_array_equal(streams, after)
    if noise == "mixed":  # the clip was hit: the test covers it
        assert (got[0][:, env.qpos_adr] == env.joint_hi).any() or (got[0][:, env.qpos_adr] == env.joint_lo).any()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_action_to_ctrl_bit_identical_to_numpy(tiny_cfg, dtype):  # noqa: F811
    rng = np.random.default_rng(4)
    n, a = 300, 7
    action = rng.uniform(-2.5, 2.5, (n, a)).astype(dtype)
    for value in (np.nan, np.inf, -np.inf, -0.0, 1.0, -1.0):
        action[rng.integers(0, n, 5), rng.integers(0, a, 5)] = value
    scale = rng.uniform(0.1, 2.0, a)
    default = rng.uniform(-1, 1, (n, a))  # each env's default pose (joint_pos_bias shifts it)
    want = ref_k.action_to_ctrl(action, scale, default)
    got = np.full((n, a), np.nan), np.full((n, a), np.nan)
    action_to_ctrl(action, scale, default, *got)
    for g, w in zip(got, want):
        assert np.array_equal(g, w)
        assert np.array_equal(np.signbit(g), np.signbit(w))  # -0.0 kept alike


def test_step_tail_bookkeeping(tiny_cfg):  # noqa: F811
    """The fused terminations/tail driver: done flags, bad envs, lengths and last_action after each step."""
    env = _noisy_env(tiny_cfg)
    n = env.num_envs
    rng = np.random.default_rng(13)
    for _ in range(12):
        lengths = env.book.lengths.copy()
        env.pool.qvel[rng.integers(0, n, 2), 0] = np.nan  # diverged envs this step
        action = rng.uniform(-1.5, 1.5, (n, env.action_dim)).astype(np.float32)
        _, _, term, trunc, info = env.step(action)
        done = term | trunc
        assert info["num_bad_envs"] >= 1
        failed = np.stack(list(info["termination_terms"].values())).any(axis=0)
        assert not (term & trunc & ~failed).any()  # both only for a failure at a time-out
        kept = ~done
        assert np.array_equal(env.last_action[kept], np.clip(action[kept], -1.0, 1.0).astype(np.float64))
        assert not env.last_action[done].any()  # restarted
        assert np.array_equal(env.book.lengths[kept], lengths[kept] + 1)
        assert not env.book.lengths[done].any()


def test_results_do_not_depend_on_thread_count(tiny_cfg):  # noqa: F811
    env = _noisy_env(tiny_cfg, n=200)
    rows = np.arange(env.num_envs)
    states = env_streams(0, env.num_envs, tag=7)
    before = numba.get_num_threads()
    try:
        last_action = env.last_action.copy()  # the step's tail overwrites it
        numba.set_num_threads(1)
        one = _parallel_update(env, rows, states.copy())
        env.last_action[...] = last_action
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
        many = _parallel_update(env, rows, states.copy())
    finally:
        numba.set_num_threads(before)
    _assert_identical(one, many)


def test_split_stages_equal_one_region(tiny_cfg):  # noqa: F811
    """update_state's stages one region each (the benchmark's sub-phases) give the fused step's results bit for bit.

    Whole steps with noise, restarts, time-outs and a diverged env: every output, info
    column and final observation.
    """
    tiny_cfg.max_episode_length_s = 0.2  # time-outs too
    envs = [_noisy_env(tiny_cfg, n=48, seed=9) for _ in range(2)]
    envs[1].split_sub_phases = True
    rng = np.random.default_rng(2)
    ended = 0
    for step in range(15):
        action = rng.uniform(-1.2, 1.2, (48, envs[0].action_dim)).astype(np.float32)
        results = []
        for env in envs:
            if step == 4:
                env.pool.qvel[7, 0] = np.nan  # a diverged env
            obs, reward, term, trunc, info = env.step(action)
            results.append((obs["obs"].copy(), obs["critic_obs"].copy(), reward.copy(), term.copy(), trunc.copy(),
                            info["final_obs"]["obs"].copy(), info["final_obs"]["critic_obs"].copy(),
                            np.stack(list(info["reward_terms"].values())),
                            np.stack(list(info["termination_terms"].values()))))
        ended += int((results[0][3] | results[0][4]).sum())
        for a, b in zip(*results):
            assert np.array_equal(a, b, equal_nan=True)
    assert ended > 0


def test_sampler_record_matches_serial_update(tiny_cfg):  # noqa: F811
    env = MotionTrackingEnv(tiny_cfg, 2)
    cfg = ResetConfig(sampling="adaptive", adaptive_ema=0.3)
    s = StartFrameSampler(env.motion, cfg)
    want = s.fail_ema.copy()
    pending = np.zeros(s.num_bins)
    rng = np.random.default_rng(0)
    for _ in range(20):
        clip = rng.integers(0, 2, 50)
        frame = rng.integers(0, 40, 50)
        failed = rng.random(50) < 0.3
        s.record(clip, frame, failed)
        want = cfg.adaptive_ema * pending + (1.0 - cfg.adaptive_ema) * want  # the serial update the kernel replaced
        pending = np.zeros(s.num_bins)
        np.add.at(pending, s.bin_of(clip[failed], frame[failed]), 1.0)
        assert np.array_equal(s.fail_ema, want) and np.array_equal(s.step_failures, pending)


def test_tables_name_everything(tiny_cfg):  # noqa: F811
    env = MotionTrackingEnv(tiny_cfg, 4)
    assert env.reward_term_names == tuple(t.name for t in REWARD_TERMS)
    assert env.termination_names == tuple(t.name for t in TERMINATIONS)
    # every row has its config key, and nothing else is configured
    assert {t.name for t in REWARD_TERMS} == set(RewardsConfig.__dataclass_fields__)
    assert {t.name for t in TERMINATIONS} == set(TerminationsConfig.__dataclass_fields__)
    assert {t.noise for t in POLICY_OBS if t.noise} == set(ObsNoiseConfig.__dataclass_fields__)
    np.testing.assert_array_equal(env.rewards.weights, [getattr(tiny_cfg.rewards, n).weight for n in TERM_NAMES])
    # the layout: contiguous pieces, policy first; dims derive from it
    lay = ObsLayout(2, 3, "privileged")
    sl = lay.slices
    assert list(sl) == [t.name for t in POLICY_OBS + CRITIC_OBS]
    assert all(a.stop == b.start for a, b in zip(list(sl.values()), list(sl.values())[1:]))
    assert (env.obs_dim, env.critic_obs_dim) == (lay.policy_dim, lay.critic_dim) == (5 * 2 + 15, 5 * 2 + 15 + 27)
    # TensorBoard tags come from the table through env.reward_term_names
    from unilab.runtime.stats import counter_names

    assert [c for c in counter_names(env.spec.reward_terms) if c.startswith("reward_term/")] == \
        [f"reward_term/{n}" for n in TERM_NAMES]


def test_numba_threads_follow_the_pool(tiny_cfg):  # noqa: F811
    env = MotionTrackingEnv(tiny_cfg, 8)
    assert numba.get_num_threads() == min(env.pool.nthread, numba.config.NUMBA_NUM_THREADS)
    assert numba.threading_layer() == numba_threads.LAYER
    env.close()


@pytest.mark.skipif(not cpu.affinity_supported() or not os.path.isdir("/proc/self/task"), reason="Linux only")
def test_numba_workers_run_on_the_pool_cpus(tiny_cfg):  # noqa: F811
    usable = cpu.usable_cpus()
    cpu_ids = [usable[-1]]  # one CPU, not the first: inheriting the caller's first CPU would not pass
    env = MotionTrackingEnv(tiny_cfg, 8, pool_kwargs={"cpu_ids": cpu_ids})
    try:
        env.reset()
        env.step(np.zeros((8, 2), dtype=np.float32))  # parallel drivers ran
        tids = numba_threads.worker_tids()
        assert tids, "Numba's workers were not seen starting"
        for tid in tids:
            assert cpu.thread_affinity(tid) == set(cpu_ids), tid
        assert numba.get_num_threads() == 1
    finally:
        env.close()
    for tid in numba_threads.worker_tids():  # given back
        assert cpu.thread_affinity(tid) == set(cpu.usable_cpus())


_NO_SPIN = """
import sys, time
import numpy as np
import unilab.runtime.collector  # the collector process's imports: the env's, never torch's
from unilab.sim import cpu, numba_threads
from unilab.tasks.base import copy_rows_at
assert "torch" not in sys.modules
workers = numba_threads.configure(2)
src = np.ones((4096, 200))
dst = np.zeros_like(src)
ids = np.arange(4096)
for _ in range(3):
    copy_rows_at(ids, src, dst)  # a parallel host phase
before = {t: cpu.thread_cpu_seconds(t) for t in workers}
w0 = time.perf_counter()
time.sleep(0.3)
wall = time.perf_counter() - w0
print(len(workers), max([(cpu.thread_cpu_seconds(t) - c) / wall for t, c in before.items()], default=0.0))
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="Linux only")
def test_workers_do_not_spin_after_a_parallel_region():
    """In a collector process, Numba's workers sleep at once after a host phase: no CPU while the caller sleeps.

    Only the workers' own CPU time counts. A fresh interpreter with the
    collector's imports: a process that loaded libgomp before Numba did (PyTorch's
    import does, and libgomp reads its wait policy once) spins with that load's
    policy, libgomp's default of ~300k turns per region (milliseconds: caught here,
    as is ``OMP_WAIT_POLICY=active``, which a user may set and Numba then keeps).
    """
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env["NUMBA_NUM_THREADS"] = "2"
    run = subprocess.run([sys.executable, "-c", _NO_SPIN], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr
    workers, busy = run.stdout.split()
    assert int(workers) == 1, "Numba's worker ids were not seen"
    assert float(busy) < 0.005, f"a worker used {float(busy):.3f} cores while the caller slept: it spins"


def test_every_host_kernel_is_one_parallel_loop(tiny_cfg):  # noqa: F811
    """Each kernel a step or restart calls forks and joins the team once: Numba makes ``np.zeros``, array
    expressions and ``.sum()`` in a parallel function into parallel loops of their own, each another region."""
    tiny_cfg.reset = ResetConfig(sampling="adaptive")  # the sampler's statistics kernel runs too
    env = _noisy_env(tiny_cfg)  # steps with restarts: every kernel below has run, so has its signatures
    env.book.auto_reset(env.buffers(), np.ones(env.num_envs, dtype=bool), lambda ids: None, {}, {})
    env.pool.step(env.pool.ctrl.copy(), 1)  # the env writes its controls in place; a caller's are copied
    kernels = {"step driver": env._step_driver, "action_to_ctrl": step_kernels.action_to_ctrl,
               "start state": resets._start_state_driver, "sampler statistics": resets._fold_failures,
               "pool controls copy": pool_mod._copy_rows, "pool health check": pool_mod._health_kernel,
               "pool row reset": pool_mod._reset_rows, "final rows copy": base.copy_rows_at}
    for name, kernel in kernels.items():
        assert kernel.signatures, f"{name} did not run"
        for sig in kernel.signatures:  # compiled afresh: a kernel loaded from Numba's cache has no diagnostics
            fresh = numba.njit(parallel=True, fastmath=False)(kernel.py_func)
            fresh.compile(sig)
            loops = fresh.get_metadata(sig)["parfor_diagnostics"].get_parfors()
            assert len(loops) == 1, f"{name}: {len(loops)} parallel loops"

"""The G1 task's parallel drivers: the same results at any thread count and any stage split, term tables,
threads. What the terms compute is tested term by term (tests/test_g1_task.py, tests/test_g1_recipe.py) and as a
whole by the golden trace (tests/test_golden_trace.py); how parallel a kernel is, by the phase benchmark's cores.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numba
import numpy as np
import pytest
from reference_helpers import fill_symmetric, thread_affinity  # tests/ is on the path (pytest's rootdir)

from unilab.sim import cpu, numba_threads
from unilab.tasks.core.driver import GATHER, OBSERVE, REWARDS, TERMINATE, UPDATE
from unilab.tasks.core.kernels import action_to_ctrl
from unilab.tasks.env_streams import env_streams
from unilab.tasks.g1_motion_tracking.config import (
    ObsNoiseConfig,
    ResetConfig,
    ResetNoiseConfig,
    RewardsConfig,
    TerminationsConfig,
)
from unilab.tasks.g1_motion_tracking.env import MotionTrackingEnv
from unilab.tasks.g1_motion_tracking.observations import CRITIC_OBS, POLICY_OBS, obs_layout
from unilab.tasks.g1_motion_tracking.resets import StartFrameSampler, start_state
from unilab.tasks.g1_motion_tracking.rewards import REWARD_TERMS, TERM_NAMES
from unilab.tasks.g1_motion_tracking.state import STATE
from unilab.tasks.g1_motion_tracking.terminations import TERMINATIONS


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


def _parallel_update(env, rows, noise_streams, stages=(GATHER, UPDATE, REWARDS, TERMINATE, OBSERVE)):
    """The env's step driver on the same state, outputs in the rows ``rows`` (noise from ``noise_streams``).

    ``stages``: the driver's stage masks, run in this order (one region each, or fused).
    """
    env.state.ref_index[rows] = -1  # the gather stage looks each env's reference row up itself
    n = env.num_envs
    env._terms[...] = np.nan
    env._reward[...] = np.nan
    env._conds[...] = False
    env._failed[...] = True
    out = env.buffers()
    for name in ("obs", "critic_obs"):
        out[name][...] = np.nan
    info = (np.full((len(TERM_NAMES), n), np.nan, dtype=np.float32), np.zeros((len(TERMINATIONS), n), bool))
    env.obs_noise_streams = noise_streams
    for st in stages:
        env.run_stages(st, rows, out, np.zeros(n, dtype=bool), info)
    np.testing.assert_array_equal(env._failed[rows], env._conds[rows].any(axis=1))
    # the step's info: one float32 row per term, one row per condition, by table order
    for i, name in enumerate(TERM_NAMES):
        assert np.array_equal(info[0][i, rows], env._terms[rows, i].astype(np.float32), equal_nan=True), name
    for i, name in enumerate(env.termination_names):
        assert np.array_equal(info[1][i, rows], env._conds[rows, i]), name
    state = tuple(getattr(env.state, name)[rows] for name in STATE.names[1:])  # ref_index on its own
    return (env.state.ref_index[rows], state, env._terms[rows].copy(), env._reward[rows].copy(),
            env._conds[rows].copy(), out["obs"][rows], out["critic_obs"][rows])


def _assert_identical(got, want):
    names = ("ref_index", "state", "terms", "reward", "conds", "policy", "critic")
    for name, g, w in zip(names, got, want):
        if name == "state":
            for i, (gs, ws) in enumerate(zip(g, w)):
                assert np.array_equal(gs, ws, equal_nan=True), f"state[{i}]"
        else:
            assert np.array_equal(g, w, equal_nan=True), name


_NOISES = {
    "default": ResetNoiseConfig(),
    "none": ResetNoiseConfig(root_pos=[0, 0, 0], root_rpy=[0, 0, 0], root_lin_vel=[0, 0, 0],
                             root_ang_vel=[0, 0, 0], joint_pos=0.0),
    # partly zero scales (draws times 0 give -0.0), a full turn of roll, joints pushed past their limits
    "mixed": ResetNoiseConfig(root_pos=[0.0, 0.3, 0.0], root_rpy=[3.5, 0.0, 0.7], root_lin_vel=[0, 0, 0],
                              root_ang_vel=[2.0, 0.0, 1.0], joint_pos=3.0),
}


@pytest.mark.parametrize("noise", list(_NOISES))
def test_start_state_is_the_reference_frame_within_the_noise(tiny_cfg, noise):
    """The start-state driver: each restarted env gets its reference frame, moved by at most the noise scales,
    joints inside their limits; the other envs and their random streams are untouched."""
    env = _noisy_env(tiny_cfg, n=64)
    cfg = _NOISES[noise]
    rng = np.random.default_rng(3)
    nj = env.qpos_adr.shape[0]
    for k in (0, 1, 17, 64):
        rows = np.sort(rng.choice(env.num_envs, k, replace=False))
        starts = rng.integers(0, env.motion.num_clips, k), rng.integers(0, 40, k)
        streams = env_streams(int(rng.integers(1 << 30)), env.num_envs, tag=2)
        adr = (env.qpos_adr, env.joint_lo, env.joint_hi)
        env.state.last_action[...] = 1.0
        episode = tuple(a.copy() for a in (env.clip, env.frame, env.state.ref_index, env.state.last_action))
        before = streams.copy()
        got = start_state(env.motion, rows, starts, episode, cfg, streams, *adr)
        # the rows are placed: clip, frame, their library row, last_action 0; the other envs untouched
        clip, frame, ref_index, last_action = episode
        others = np.setdiff1d(np.arange(env.num_envs), rows)
        assert np.array_equal(clip[rows], starts[0]) and np.array_equal(frame[rows], starts[1])
        assert np.array_equal(ref_index[rows], env.motion.flat_index(*starts))
        assert not last_action[rows].any() and (last_action[others] == 1.0).all()
        assert np.array_equal(ref_index[others], env.state.ref_index[others]) and np.array_equal(clip[others],
                                                                                           env.clip[others])
        qpos, qvel = got
        ref_q, ref_v = env.motion.qpos[ref_index[rows]], env.motion.qvel[ref_index[rows]]
        if noise == "none":
            assert np.array_equal(qpos, ref_q) and np.array_equal(qvel, ref_v)
        assert (np.abs(qpos[:, :3] - ref_q[:, :3]) <= np.asarray(cfg.root_pos) + 1e-12).all()
        assert (np.abs(qvel[:, :3] - ref_v[:, :3]) <= np.asarray(cfg.root_lin_vel) + 1e-12).all()
        np.testing.assert_allclose(np.linalg.norm(qpos[:, 3:7], axis=1), 1.0, atol=1e-12)
        joints = qpos[:, env.qpos_adr]
        assert (joints >= env.joint_lo).all() and (joints <= env.joint_hi).all()
        assert (np.abs(joints - ref_q[:, env.qpos_adr]) <= cfg.joint_pos + 1e-12).all()
        # each restarted env's stream moved on by its 12 + nj draws, the others' stayed
        after = before.copy()
        fill_symmetric(after, rows, np.empty((k, 12 + nj)))
        np.testing.assert_array_equal(streams, after)
    if noise == "mixed":  # the clip was hit: the test covers it
        assert (got[0][:, env.qpos_adr] == env.joint_hi).any() or (got[0][:, env.qpos_adr] == env.joint_lo).any()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_action_to_ctrl_is_the_clipped_scaled_action_around_the_default(tiny_cfg, dtype):
    rng = np.random.default_rng(4)
    n, a = 300, 7
    action = rng.uniform(-2.5, 2.5, (n, a)).astype(dtype)
    for value in (np.nan, np.inf, -np.inf, -0.0, 1.0, -1.0):
        action[rng.integers(0, n, 5), rng.integers(0, a, 5)] = value
    scale = rng.uniform(0.1, 2.0, a)
    default = rng.uniform(-1, 1, (n, a))  # each env's default pose (joint_pos_bias shifts it)
    clipped = np.nan_to_num(np.clip(action.astype(np.float64), -1.0, 1.0), nan=0.0)
    want = clipped, clipped * scale + default
    got = np.full((n, a), np.nan), np.full((n, a), np.nan)
    action_to_ctrl(action, scale, default, *got)
    for g, w in zip(got, want):
        assert np.array_equal(g, w)
        assert np.array_equal(np.signbit(g), np.signbit(w))  # -0.0 kept alike


def test_step_tail_bookkeeping(tiny_cfg):
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
        assert np.array_equal(env.state.last_action[kept], np.clip(action[kept], -1.0, 1.0).astype(np.float64))
        assert not env.state.last_action[done].any()  # restarted
        assert np.array_equal(env.book.lengths[kept], lengths[kept] + 1)
        assert not env.book.lengths[done].any()


def test_results_do_not_depend_on_thread_count(tiny_cfg):
    env = _noisy_env(tiny_cfg, n=200)
    rows = np.arange(env.num_envs)
    states = env_streams(0, env.num_envs, tag=7)
    before = numba.get_num_threads()
    try:
        last_action = env.state.last_action.copy()  # the step's tail overwrites it
        numba.set_num_threads(1)
        one = _parallel_update(env, rows, states.copy())
        env.state.last_action[...] = last_action
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
        many = _parallel_update(env, rows, states.copy())
    finally:
        numba.set_num_threads(before)
    _assert_identical(one, many)


def test_split_stages_equal_one_region(tiny_cfg):
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


def test_sampler_record_matches_serial_update(tiny_cfg):
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


def test_tables_name_everything(tiny_cfg):
    env = MotionTrackingEnv(tiny_cfg, 4)
    assert env.reward_term_names == tuple(t.name for t in REWARD_TERMS)
    assert env.termination_names == tuple(t.name for t in TERMINATIONS)
    # every row has its config key, and nothing else is configured
    assert {t.name for t in REWARD_TERMS} == set(RewardsConfig.__dataclass_fields__)
    assert {t.name for t in TERMINATIONS} == set(TerminationsConfig.__dataclass_fields__)
    assert {t.noise for t in POLICY_OBS if t.noise} == set(ObsNoiseConfig.__dataclass_fields__)
    np.testing.assert_array_equal(env.rewards.weights, [getattr(tiny_cfg.rewards, n).weight for n in TERM_NAMES])
    # the layout: contiguous pieces, policy first; dims derive from it
    lay = obs_layout(2, 3, "privileged")
    sl = lay.slices
    assert list(sl) == [t.name for t in POLICY_OBS + CRITIC_OBS]
    assert all(a.stop == b.start for a, b in zip(list(sl.values()), list(sl.values())[1:]))
    assert (env.obs_dim, env.critic_obs_dim) == (lay.policy_dim, lay.critic_dim) == (5 * 2 + 15, 5 * 2 + 15 + 27)
    # TensorBoard tags come from the table through env.reward_term_names
    from unilab.runtime.stats import counter_names

    assert [c for c in counter_names(env.spec.reward_terms) if c.startswith("reward_term/")] == \
        [f"reward_term/{n}" for n in TERM_NAMES]


def test_numba_threads_follow_the_pool(tiny_cfg):
    env = MotionTrackingEnv(tiny_cfg, 8)
    assert numba.get_num_threads() == min(env.pool.nthread, numba.config.NUMBA_NUM_THREADS)
    assert numba.threading_layer() == numba_threads.LAYER
    env.close()


@pytest.mark.skipif(not cpu.affinity_supported() or not os.path.isdir("/proc/self/task"), reason="Linux only")
def test_numba_workers_run_on_the_pool_cpus(tiny_cfg):
    usable = cpu.usable_cpus()
    cpu_ids = [usable[-1]]  # one CPU, not the first: inheriting the caller's first CPU would not pass
    env = MotionTrackingEnv(tiny_cfg, 8, pool_kwargs={"cpu_ids": cpu_ids})
    try:
        env.reset()
        env.step(np.zeros((8, 2), dtype=np.float32))  # parallel drivers ran
        tids = numba_threads.worker_tids()
        assert tids, "Numba's workers were not seen starting"
        for tid in tids:
            assert thread_affinity(tid) == set(cpu_ids), tid
        assert numba.get_num_threads() == 1
    finally:
        env.close()
    for tid in numba_threads.worker_tids():  # given back
        assert thread_affinity(tid) == set(cpu.usable_cpus())


_NO_SPIN = """
import sys, time
import numpy as np
import unilab.runtime.collector  # the collector process's imports: the env's, never torch's
from unilab.sim import cpu, numba_threads
from unilab.sim.work_claims import copy_rows_at
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

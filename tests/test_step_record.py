"""The step record declaration drives the transport and the replay; every task has the same done semantics;
the learner sends actions before it stores the step."""

from __future__ import annotations

import json
import subprocess

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from runtime_helpers import run_dirs, train_cmd

from unilab.algo.sac.replay import ReplayBuffer
from unilab.runtime.shm import SLOTS, SharedArrays, step_slot, transport_spec
from unilab.sim.spec import EnvSpec, env_outputs
from unilab.tasks.base import EpisodeBook
from unilab.tasks.registry import make_env, task_config


def test_transport_arrays_are_the_step_record():
    spec = EnvSpec(obs_dim=3, critic_obs_dim=5, action_dim=2, control_dt=0.02)
    layout = transport_spec(4, spec, ["iterations"])
    shm = SharedArrays.create(layout)
    try:
        expected = {f.name: ((SLOTS, 4, *f.shape), f.dtype) for f in env_outputs(spec.record)}
        expected.update({f.name: ((4, *f.shape), f.dtype) for f in spec.record if f.writer == "learner"})
        got = {name: (tuple(a.shape), a.dtype.name) for name, a in shm.arrays.items() if name != "counters"}
        assert got == {k: (s, np.dtype(d).name) for k, (s, d) in expected.items()}
        assert {"obs", "critic_obs", "final_obs", "final_critic_obs", "reward", "terminated", "truncated",
                "action"} == set(got)
        # the replay stores what the record declares, in its shapes
        replay = ReplayBuffer(4, 3, spec.record)
        assert {f.name: tuple(replay.storage[f.name].shape) for f in spec.record} == {
            f.name: (4, 3, *f.shape) for f in spec.record}
        # slots alternate: step k and step k + 1 never share memory
        assert not np.shares_memory(step_slot(shm, spec, 0)["obs"], step_slot(shm, spec, 1)["obs"])
        assert np.shares_memory(step_slot(shm, spec, 0)["obs"], step_slot(shm, spec, SLOTS)["obs"])
    finally:
        shm.close()


@settings(max_examples=50, deadline=None)
@given(flags=st.lists(st.tuples(st.booleans(), st.booleans(), st.booleans()), min_size=1, max_size=300))
def test_settle_is_the_done_semantics(flags):
    """A bad env is terminated with reward 0; a time-out counts only where nothing terminated."""
    terminated, truncated, bad = (np.array(c, dtype=bool) for c in zip(*flags))
    n = terminated.size
    book = EpisodeBook(n)
    book.returns[:] = 1.0
    reward = np.arange(1, n + 1, dtype=np.float32)
    out = {"reward": np.full(n, np.nan, np.float32), "terminated": np.zeros(n, bool), "truncated": np.zeros(n, bool)}
    done = book.settle(out, reward, terminated, truncated, bad)
    want_term = terminated | bad
    want_trunc = truncated & ~want_term
    want_reward = np.where(bad, 0.0, np.arange(1, n + 1)).astype(np.float32)
    np.testing.assert_array_equal(out["terminated"], want_term)
    np.testing.assert_array_equal(out["truncated"], want_trunc)
    np.testing.assert_array_equal(done, want_term | want_trunc)
    np.testing.assert_array_equal(out["reward"], want_reward)
    np.testing.assert_array_equal(book.returns, 1.0 + want_reward)


def test_pendulum_bad_envs_are_terminated_with_zero_reward():
    env = make_env("pendulum", task_config("pendulum", {}), 4, seed=0)
    try:
        env.reset()
        env.pool.qvel[2, 0] = np.nan
        obs, reward, terminated, truncated, info = env.step(np.zeros((4, 1), np.float32))
        assert info["num_bad_envs"] == 1
        assert terminated.tolist() == [False, False, True, False] and not truncated.any()
        assert reward[2] == 0.0 and np.isfinite(obs["obs"]).all()
        assert info["episode"]["count"] == 1 and env.book.lengths[2] == 0
    finally:
        env.close()


def test_pendulum_uses_the_shared_episode_book():
    env = make_env("pendulum", task_config("pendulum", {"episode_length": 3}), 2, seed=0)
    try:
        assert isinstance(env.book, EpisodeBook)
        out = env.buffers()
        env.reset(out=out)
        out["final_obs"][...] = np.nan  # garbage: only done rows may be written
        for _ in range(2):
            _, _, _, truncated, info = env.step(np.zeros((2, 1), np.float32), out=out)
            assert not truncated.any() and np.isnan(out["final_obs"]).all()
        before = out["obs"].copy()
        obs, _, _, truncated, info = env.step(np.zeros((2, 1), np.float32), out=out)
        assert truncated.all() and obs["obs"] is out["obs"]
        assert np.isfinite(out["final_obs"]).all() and not np.array_equal(out["final_obs"], before)
        assert set(info) == {"final_obs", "reward_terms", "termination_terms", "episode", "num_bad_envs"}
        assert info["episode"] == {"count": 2, "return_mean": info["episode"]["return_mean"], "length_mean": 3.0}
    finally:
        env.close()


def test_learner_sends_actions_before_it_stores_the_step(tmp_path):
    """After each collector wait the learner acts (and sends) first; the replay insert overlaps env.step."""
    proc = subprocess.run(train_cmd(tmp_path, "algo.max_iterations=12", "training.trace_enabled=true"),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    (run,) = run_dirs(tmp_path)
    events = [e for e in json.loads((run / "trace.json").read_text())["traceEvents"] if e.get("ph") == "X"]
    learner = sorted((e for e in events if e["name"].startswith("learner_")), key=lambda e: e["ts"])
    names = [e["name"] for e in learner]
    waits = [i for i, n in enumerate(names) if n == "learner_collector_wait"]
    assert len(waits) >= 10
    for i in waits[:-1]:
        assert names[i + 1] == "learner_act", names[i: i + 3]
        assert names[i + 2] == "learner_replay_write", names[i: i + 3]

"""ReplayBuffer: storage, wraparound and n-step returns against a brute-force reference."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from unilab.algo.sac import ReplayBuffer
from unilab.sim.spec import step_record

OBS, COBS, ACT = 3, 4, 2

FIELDS = ("obs", "critic_obs", "action", "reward", "next_obs", "next_critic_obs", "terminated", "truncated")


def _rb(num_envs: int, capacity: int, obs_dim: int, critic_obs_dim: int, action_dim: int, **kw) -> ReplayBuffer:
    return ReplayBuffer(num_envs, capacity, step_record(obs_dim, critic_obs_dim, action_dim), **kw)


def _put(buf: ReplayBuffer, *args, **kw) -> None:
    """Store one transition given as
    (obs, critic_obs, action, reward, next_obs, next_critic_obs, terminated, truncated).

    The next observations go in as both the step's observations and its final observations.
    """
    t = dict(zip(FIELDS, args), **kw)
    before = {k: t[k] for k in ("obs", "critic_obs", "action")}
    after = {"reward": t["reward"], "terminated": t["terminated"], "truncated": t["truncated"],
             "obs": t["next_obs"], "critic_obs": t["next_critic_obs"],
             "final_obs": t["next_obs"], "final_critic_obs": t["next_critic_obs"]}
    buf.extend(before, after)


def _random_history(num_envs: int, steps: int, seed: int, p_term: float, p_trunc: float):
    rng = np.random.default_rng(seed)
    return {
        "obs": rng.normal(size=(steps, num_envs, OBS)).astype(np.float32),
        "critic_obs": rng.normal(size=(steps, num_envs, COBS)).astype(np.float32),
        "action": rng.uniform(-1, 1, size=(steps, num_envs, ACT)).astype(np.float32),
        "reward": rng.normal(size=(steps, num_envs)).astype(np.float32),
        "next_obs": rng.normal(size=(steps, num_envs, OBS)).astype(np.float32),
        "next_critic_obs": rng.normal(size=(steps, num_envs, COBS)).astype(np.float32),
        "terminated": rng.random(size=(steps, num_envs)) < p_term,
        "truncated": rng.random(size=(steps, num_envs)) < p_trunc,
    }


def _fill(buf: ReplayBuffer, hist: dict, steps: int) -> None:
    for t in range(steps):
        _put(buf, *(torch.from_numpy(np.ascontiguousarray(hist[k][t])) for k in FIELDS))


def _reference(hist: dict, env: int, t: int, newest: int, n: int, gamma: float):
    """Plain-Python n-step transition starting at global time t of one env."""
    ret, k = 0.0, 0
    for j in range(n):
        s = t + j
        if s > newest:
            break
        ret += gamma**j * float(hist["reward"][s, env])
        k = j + 1
        if hist["terminated"][s, env] or hist["truncated"][s, env]:
            break
    last = t + k - 1
    return {
        "rewards": ret,
        "bootstrap": 0.0 if hist["terminated"][last, env] and not hist["truncated"][last, env] else 1.0,
        "discount": gamma**k,
        "n": k,
        "next_obs": hist["next_obs"][last, env],
        "next_critic_obs": hist["next_critic_obs"][last, env],
        "obs": hist["obs"][t, env],
        "action": hist["action"][t, env],
    }


@pytest.mark.parametrize(
    "capacity,steps,n_steps,p_term,p_trunc",
    [
        (7, 5, 3, 0.2, 0.2),    # partially filled
        (7, 7, 3, 0.2, 0.2),    # exactly full
        (7, 19, 3, 0.2, 0.2),   # wrapped around several times
        (6, 23, 4, 0.1, 0.3),   # truncation-heavy
        (5, 13, 5, 0.0, 0.0),   # no episode ends: windows cut only by the newest step
        (8, 30, 1, 0.3, 0.3),   # one-step returns
    ],
)
def test_n_step_matches_brute_force(capacity, steps, n_steps, p_term, p_trunc):
    num_envs, gamma = 3, 0.9
    hist = _random_history(num_envs, steps, seed=capacity * 100 + steps, p_term=p_term, p_trunc=p_trunc)
    buf = _rb(num_envs, capacity, OBS, COBS, ACT, n_steps=n_steps, gamma=gamma)
    _fill(buf, hist, steps)
    assert buf.size == min(steps, capacity) and len(buf) == buf.size * num_envs

    oldest = max(0, steps - capacity)
    newest = steps - 1
    pairs = [(e, t) for e in range(num_envs) for t in range(oldest, steps)]
    env = torch.tensor([e for e, _ in pairs])
    slot = torch.tensor([t % capacity for _, t in pairs])
    got = buf.gather(env, slot)
    for i, (e, t) in enumerate(pairs):
        ref = _reference(hist, e, t, newest, n_steps, gamma)
        assert math.isclose(float(got["rewards"][i]), ref["rewards"], rel_tol=1e-5, abs_tol=1e-5), (e, t)
        assert float(got["bootstrap"][i]) == ref["bootstrap"], (e, t)
        assert math.isclose(float(got["discount"][i]), ref["discount"], rel_tol=1e-6), (e, t)
        assert int(got["n"][i]) == ref["n"], (e, t)
        for key in ("next_obs", "next_critic_obs", "obs", "action"):
            np.testing.assert_array_equal(got[key][i].numpy(), ref[key], err_msg=f"{key} env {e} t {t}")


def test_sample_draws_only_stored_transitions():
    num_envs, capacity = 2, 10
    buf = _rb(num_envs, capacity, 1, 1, 1, n_steps=2, gamma=0.5, seed=3)
    for t in range(4):  # obs encodes global time
        o = torch.full((num_envs, 1), float(t))
        _put(buf, o, o, o, torch.zeros(num_envs), o + 1, o + 1, torch.zeros(num_envs, dtype=torch.bool),
                   torch.zeros(num_envs, dtype=torch.bool))
    batch = buf.sample(2000)
    times = batch["obs"][:, 0]
    assert set(times.unique().tolist()) == {0.0, 1.0, 2.0, 3.0}
    # the newest step has no successor in the buffer: a one-step window
    assert torch.all(batch["n"][times == 3.0] == 1)
    assert torch.all(batch["n"][times < 3.0] == 2)
    assert torch.all(batch["next_obs"][:, 0] == times + batch["n"].float())


@pytest.mark.parametrize("ended_by,bootstrap", [("terminated", 0.0), ("truncated", 1.0)])
def test_termination_cuts_bootstrap_truncation_keeps_it(ended_by, bootstrap):
    gamma = 0.9
    buf = _rb(1, 8, 1, 1, 1, n_steps=3, gamma=gamma)
    final_obs_value = 42.0
    for t in range(4):
        ended = torch.tensor([t == 1])
        never = torch.tensor([False])
        nxt = torch.tensor([[final_obs_value if t == 1 else float(t + 1)]])
        _put(buf, torch.tensor([[float(t)]]), torch.tensor([[float(t)]]), torch.zeros(1, 1), torch.ones(1), nxt,
                   nxt, ended if ended_by == "terminated" else never, ended if ended_by == "truncated" else never)
    out = buf.gather(torch.tensor([0, 0]), torch.tensor([0, 2]))
    # window from t=0 stops at the episode end at t=1
    assert out["rewards"][0].item() == pytest.approx(1.0 + gamma)
    assert out["discount"][0].item() == pytest.approx(gamma**2)
    assert out["bootstrap"][0].item() == bootstrap
    assert out["next_obs"][0, 0].item() == final_obs_value  # the true final obs, not a reset obs
    # window from t=2 (new episode) is not affected by the earlier end
    assert out["bootstrap"][1].item() == 1.0
    assert out["n"][1].item() == 2  # cut by the newest stored step (t=3)


def test_extend_rejects_bad_shapes_and_empty_sample():
    buf = _rb(4, 5, OBS, COBS, ACT)
    with pytest.raises(ValueError, match="empty"):
        buf.sample(8)
    good = dict(
        obs=torch.zeros(4, OBS), critic_obs=torch.zeros(4, COBS), action=torch.zeros(4, ACT),
        reward=torch.zeros(4), next_obs=torch.zeros(4, OBS), next_critic_obs=torch.zeros(4, COBS),
        terminated=torch.zeros(4, dtype=torch.bool), truncated=torch.zeros(4, dtype=torch.bool),
    )
    _put(buf, **good)
    bad = dict(good, action=torch.zeros(3, ACT))
    with pytest.raises(ValueError, match="action"):
        _put(buf, **bad)
    with pytest.raises(ValueError, match="n_steps"):
        _rb(4, 2, OBS, COBS, ACT, n_steps=3)
    with pytest.raises(ValueError, match="outside"):
        buf.gather(torch.tensor([0]), torch.tensor([3]))


def _filled_and_copy() -> tuple[ReplayBuffer, ReplayBuffer]:
    """A filled buffer and a buffer of another seed that loaded its state."""
    a = _rb(2, 6, OBS, COBS, ACT, n_steps=3, gamma=0.8, seed=11)
    _fill(a, _random_history(2, 9, seed=5, p_term=0.2, p_trunc=0.2), 9)
    b = _rb(2, 6, OBS, COBS, ACT, n_steps=3, gamma=0.8, seed=99)
    b.load_state_dict(a.state_dict())
    return a, b


def test_state_dict_round_trip():
    a, b = _filled_and_copy()
    sa, sb = a.sample(64), b.sample(64)
    for key in sa:
        assert torch.equal(sa[key], sb[key]), key


def test_a_loaded_buffer_ends_every_window_at_its_newest_step():
    """After a resume the envs restart: a window from before the save must not run on into the new episode."""
    hist = _random_history(2, 5, seed=3, p_term=0.0, p_trunc=0.0)
    a = _rb(2, 8, OBS, COBS, ACT, n_steps=3, gamma=0.5)
    _fill(a, hist, 5)
    b = _rb(2, 8, OBS, COBS, ACT, n_steps=3, gamma=0.5)
    b.load_state_dict(a.state_dict())
    first = _random_history(2, 1, seed=4, p_term=0.0, p_trunc=0.0)  # the restarted envs' first step
    for buf in (a, b):
        _fill(buf, first, 1)
    env, start = torch.tensor([0, 1]), torch.tensor([3, 3])
    running_on, cut = a.gather(env, start), b.gather(env, start)
    assert running_on["n"].tolist() == [3, 3]  # without the cut: into the new episode's step
    assert cut["n"].tolist() == [2, 2] and cut["bootstrap"].tolist() == [1.0, 1.0]
    assert torch.equal(cut["next_obs"], torch.from_numpy(hist["next_obs"][4]))
    assert torch.allclose(cut["rewards"], torch.from_numpy(hist["reward"][3] + 0.5 * hist["reward"][4]))


def test_a_replay_state_that_cannot_load_changes_nothing():
    a, _ = _filled_and_copy()
    state = {**a.state_dict(), "generator": torch.zeros(16, dtype=torch.uint8)}  # not a CPU generator's state
    empty = _rb(2, 6, OBS, COBS, ACT, n_steps=3, gamma=0.8)
    with pytest.raises(RuntimeError):
        empty.load_state_dict(state)
    assert empty.size == 0 and empty.ptr == 0 and not empty.storage["obs"].any()


def test_a_reseeded_copy_draws_other_batches_from_the_same_contents():
    a, b = _filled_and_copy()
    b.reseed(12)
    sa, sb = a.sample(64), b.sample(64)
    assert not torch.equal(sa["obs"], sb["obs"])
    stored = {tuple(row.tolist()) for row in a.storage["obs"].reshape(-1, OBS)}
    assert {tuple(row.tolist()) for row in sb["obs"]} <= stored


def test_too_large_buffer_fails_with_a_clear_message(monkeypatch):
    import unilab.algo.sac.replay as replay_module

    assert replay_module.transition_nbytes(step_record(OBS, COBS, ACT)) * 4 * 5 == _rb(4, 5, OBS, COBS, ACT).nbytes
    monkeypatch.setattr(replay_module, "available_memory_bytes", lambda device: 1000)
    with pytest.raises(MemoryError, match="buffer_size"):
        _rb(4, 5, OBS, COBS, ACT)


def test_final_obs_are_read_only_in_done_rows():
    """The env writes final observations in the done rows only; the rest of that buffer is garbage."""
    n = 4
    buf = _rb(n, 4, OBS, COBS, ACT)
    after = {
        "obs": np.full((n, OBS), 1.0, np.float32), "critic_obs": np.full((n, COBS), 1.0, np.float32),
        "reward": np.zeros(n, np.float32),
        "terminated": np.array([True, False, False, False]), "truncated": np.array([False, False, True, False]),
        "final_obs": np.full((n, OBS), np.nan, np.float32), "final_critic_obs": np.full((n, COBS), np.nan, np.float32),
    }
    after["final_obs"][[0, 2]] = 7.0
    after["final_critic_obs"][[0, 2]] = 7.0
    before = {"obs": np.zeros((n, OBS), np.float32), "critic_obs": np.zeros((n, COBS), np.float32),
              "action": np.zeros((n, ACT), np.float32)}
    buf.extend(before, after)
    for name in ("next_obs", "next_critic_obs"):
        stored = buf.storage[name][:, 0]
        assert torch.isfinite(stored).all(), name
        assert (stored[[0, 2]] == 7.0).all() and (stored[[1, 3]] == 1.0).all(), name


def test_the_step_record_declares_the_storage():
    """A field added to the record is stored and sampled without other edits."""
    from unilab.sim.spec import Field

    record = (*step_record(OBS, COBS, ACT), Field("phase", (2,), "float32"))
    buf = ReplayBuffer(3, 4, record)
    assert {f.name: (tuple(buf.storage[f.name].shape[2:]), f.dtype) for f in record} == {
        f.name: (f.shape, f.dtype) for f in record}
    assert set(buf.storage) == {f.name for f in record} | {"next_obs", "next_critic_obs"}
    before = {"obs": np.zeros((3, OBS), np.float32), "critic_obs": np.zeros((3, COBS), np.float32),
              "action": np.zeros((3, ACT), np.float32)}
    after = {"obs": np.zeros((3, OBS), np.float32), "critic_obs": np.zeros((3, COBS), np.float32),
             "reward": np.zeros(3, np.float32), "terminated": np.zeros(3, bool), "truncated": np.zeros(3, bool),
             "final_obs": np.zeros((3, OBS), np.float32), "final_critic_obs": np.zeros((3, COBS), np.float32),
             "phase": np.full((3, 2), 5.0, np.float32)}
    buf.extend(before, after)
    assert (buf.sample(8)["phase"] == 5.0).all()

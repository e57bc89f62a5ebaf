"""nthread='auto': measure once, cache by key, survive a corrupt cache."""

from __future__ import annotations

import json

import pytest

from unilab.sim.mujoco import autotune as at
from unilab.sim.mujoco.pool import BatchEnvPool


@pytest.fixture
def counted(monkeypatch):
    calls = []
    real = at.measure

    def measure(*args, **kw):
        calls.append(args[3:5])
        return real(*args, **{**kw, "steps": 1})

    monkeypatch.setattr(at, "measure", measure)
    return calls


def test_miss_then_hit(humanoid, tmp_path, counted):
    path = tmp_path / "tune.json"
    first = at.autotune(humanoid, 32, 2, cache_path=path)
    assert not first.cached
    assert len(counted) == len(at.candidates(32)) and set(counted) == set(at.candidates(32))
    assert (first.nthread, first.persistent) in at.candidates(32)
    second = at.autotune(humanoid, 32, 2, cache_path=path)
    assert second.cached and (second.nthread, second.persistent) == (first.nthread, first.persistent)
    assert len(counted) == len(at.candidates(32))  # nothing measured again


def test_changed_key_retunes(humanoid, tmp_path, counted):
    path = tmp_path / "tune.json"
    at.autotune(humanoid, 32, 2, cache_path=path)
    n = len(counted)
    assert not at.autotune(humanoid, 32, 3, cache_path=path).cached  # substeps
    assert not at.autotune(humanoid, 16, 2, cache_path=path).cached  # num_envs
    assert len(counted) == 3 * n
    assert len(json.loads(path.read_text())) == 3


def test_key_covers_model_cpus_and_version(humanoid, monkeypatch):
    base = json.loads(at.cache_key(humanoid, 32, 2))
    assert set(base) == {"model", "num_envs", "substeps", "cpus", "cpu_model", "mujoco"}
    monkeypatch.setattr(at.cpu, "usable_cpus", lambda: [0])
    assert json.loads(at.cache_key(humanoid, 32, 2))["cpus"] == [0]


def test_model_hash_changes_with_the_model(humanoid):
    import mujoco

    other = mujoco.MjModel.from_xml_string(
        "<mujoco><worldbody><body><freejoint/><geom size='.1'/></body></worldbody></mujoco>")
    assert at.model_hash(humanoid) != at.model_hash(other)
    assert at.model_hash(humanoid) == at.model_hash(humanoid)


@pytest.mark.parametrize("garbage", ["{not json", "[1, 2]", ""])
def test_corrupt_cache_warns_and_is_rewritten(humanoid, tmp_path, counted, garbage):
    path = tmp_path / "tune.json"
    path.write_text(garbage)
    with pytest.warns(UserWarning, match="unreadable autotune cache"):
        res = at.autotune(humanoid, 32, 2, cache_path=path)
    assert not res.cached
    assert json.loads(path.read_text())  # valid again


def test_malformed_entry_warns_and_retunes(humanoid, tmp_path, counted):
    path = tmp_path / "tune.json"
    path.write_text(json.dumps({at.cache_key(humanoid, 32, 2): {"nthread": "x"}}))
    with pytest.warns(UserWarning, match="malformed"):
        assert not at.autotune(humanoid, 32, 2, cache_path=path).cached


def test_pool_auto_uses_the_cache(humanoid, tmp_cache, counted):
    pool = BatchEnvPool(humanoid, 32, nthread="auto", substeps=2)
    assert pool.autotune_result is not None and not pool.autotune_result.cached
    assert pool.nthread == pool.autotune_result.nthread
    again = BatchEnvPool(humanoid, 32, nthread="auto", substeps=2)
    assert again.autotune_result.cached
    assert (tmp_cache / "autotune.json").exists()


def test_ties_go_to_the_sizing_rule(humanoid, tmp_path, monkeypatch):
    monkeypatch.setattr(at, "measure", lambda m, n, s, nthread, persistent, **kw: 10.0 + 0.1 * persistent)
    res = at.autotune(humanoid, 32, 2, cache_path=tmp_path / "t.json")
    assert res.nthread == at.cpu.resolve_nthread(32) and not res.persistent


# 33 > num_envs 32: never a candidate, whatever the machine
@pytest.mark.parametrize("nthread", [0, -1, 33, 500, 2.5, "2", True, None])
def test_out_of_range_nthread_entry_warns_remeasures_and_is_overwritten(humanoid, tmp_path, counted, nthread):
    path = tmp_path / "tune.json"
    key = at.cache_key(humanoid, 32, 2)
    path.write_text(json.dumps({key: {"nthread": nthread, "persistent": False, "ms_per_step": {}}}))
    with pytest.warns(UserWarning) as rec:
        res = at.autotune(humanoid, 32, 2, cache_path=path)
    msg = " ".join(str(w.message) for w in rec)
    assert str(path) in msg and f"nthread={nthread!r}" in msg and "re-measuring" in msg
    assert not res.cached and (res.nthread, res.persistent) in at.candidates(32)
    assert set(counted) == set(at.candidates(32))  # measured again
    saved = json.loads(path.read_text())[key]
    assert (saved["nthread"], saved["persistent"]) == (res.nthread, res.persistent)
    again = at.autotune(humanoid, 32, 2, cache_path=path)
    assert again.cached and again.nthread == res.nthread


def test_non_bool_persistent_entry_is_remeasured(humanoid, tmp_path, counted):
    path = tmp_path / "tune.json"
    path.write_text(json.dumps({at.cache_key(humanoid, 32, 2): {"nthread": 1, "persistent": "false"}}))
    with pytest.warns(UserWarning, match=r"persistent='false'"):
        assert not at.autotune(humanoid, 32, 2, cache_path=path).cached


def test_pool_auto_survives_a_zero_nthread_entry(humanoid, tmp_cache, counted):
    path = tmp_cache / "autotune.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({at.cache_key(humanoid, 32, 2): {"nthread": 0, "persistent": False}}))
    with pytest.warns(UserWarning, match=r"autotune\.json: nthread=0 is not an int"):
        pool = BatchEnvPool(humanoid, 32, nthread="auto", substeps=2)
    assert 1 <= pool.nthread <= at.cpu.usable_cpu_count()
    pool.close()
    assert json.loads(path.read_text())[at.cache_key(humanoid, 32, 2)]["nthread"] == pool.nthread


def test_a_pool_without_contacts_is_tuned_as_it_steps(humanoid, tmp_cache, monkeypatch):
    """contacts=False: its own cache key, and every candidate timed with contacts=False (the thin stage)."""
    seen = []
    real = at.measure

    def measure(*args, **kw):
        seen.append(kw.get("contacts"))
        return real(*args, **{**kw, "steps": 1})

    monkeypatch.setattr(at, "measure", measure)
    pool = BatchEnvPool(humanoid, 32, nthread="auto", substeps=2, contacts=False)
    assert seen and set(seen) == {False}
    keys = json.loads((tmp_cache / "autotune.json").read_text())
    assert at.cache_key(humanoid, 32, 2, contacts=False) in keys and at.cache_key(humanoid, 32, 2) not in keys
    assert json.loads(at.cache_key(humanoid, 32, 2, contacts=False))["contacts"] is False
    assert pool.nthread == pool.autotune_result.nthread


def test_thin_measure_times_both_kinds_of_batch(humanoid):
    assert at.measure(humanoid, 8, 2, 1, False, steps=1, contacts=False) > 0
    assert at.measure(humanoid, 8, 2, 1, True, steps=1, contacts=False) > 0  # persistent: the full stage

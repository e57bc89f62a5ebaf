"""The thread sizing rule and cpu-id validation (unilab.sim.cpu)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from hypothesis import given
from hypothesis import strategies as st

from unilab.sim import cpu

linux_only = pytest.mark.skipif(not cpu.affinity_supported(), reason="needs os.sched_setaffinity")


def test_usable_cpus_follows_affinity(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3, 1, 7}, raising=False)
    assert cpu.usable_cpus() == [1, 3, 7]
    assert cpu.resolve_nthread(1024) == 3
    assert cpu.resolve_nthread(2) == 2  # never more threads than envs


def test_usable_cpus_falls_back_to_cpu_count(monkeypatch):
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 5)
    assert cpu.usable_cpus() == [0, 1, 2, 3, 4]
    assert cpu.resolve_nthread(64) == 5


def test_rule_never_returns_zero(monkeypatch):
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert cpu.resolve_nthread(8) == 1


@linux_only
def test_sizing_rule_in_a_child_restricted_to_one_cpu():
    """A real affinity mask (as taskset sets it) shrinks the pool, not os.cpu_count()."""
    first = cpu.usable_cpus()[0]
    code = textwrap.dedent(
        """
        import os
        from unilab.assets.builtin import load_humanoid
        from unilab.sim.cpu import resolve_nthread
        from unilab.sim.mujoco.pool import BatchEnvPool
        pool = BatchEnvPool(load_humanoid(), 16)
        print(os.cpu_count(), resolve_nthread(16), pool.nthread)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        preexec_fn=lambda: os.sched_setaffinity(0, {first}),
    ).stdout.split()
    assert int(out[1]) == 1 and int(out[2]) == 1


@linux_only
def test_explicit_cpu_ids_size_the_pool():
    ids = cpu.usable_cpus()
    assert cpu.resolve_nthread(1024, cpu_ids=ids[:1]) == 1
    assert cpu.resolve_nthread(1024, cpu_ids=ids) == len(ids)


@pytest.mark.parametrize("n", [0, -1, 2.5, True, "4"])
def test_bad_nthread_is_rejected(n):
    with pytest.raises(ValueError, match="nthread"):
        cpu.resolve_nthread(16, nthread=n)


def test_bad_num_envs_is_rejected():
    with pytest.raises(ValueError, match="num_envs"):
        cpu.resolve_nthread(0)


@linux_only
@pytest.mark.parametrize(
    "ids,match",
    [([], "empty"), ([-1], "negative"), ([0, 0], "duplicate"), ([10_000], "outside the usable")],
)
def test_bad_cpu_ids_are_named(ids, match):
    with pytest.raises(ValueError, match=match):
        cpu.validate_cpu_ids(ids)


def test_pinning_without_affinity_support_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(cpu, "affinity_supported", lambda: False)
    with pytest.raises(ValueError, match="no thread affinity"):
        cpu.validate_cpu_ids([0])


@linux_only
def test_nthread_disagreeing_with_cpu_ids():
    with pytest.raises(ValueError, match="disagrees"):
        cpu.resolve_nthread(16, nthread=5, cpu_ids=[cpu.usable_cpus()[0]])


@linux_only
def test_more_cpu_ids_than_envs():
    ids = cpu.usable_cpus()
    if len(ids) < 2:
        pytest.skip("needs 2 usable cpus")
    with pytest.raises(ValueError, match="only 1 envs"):
        cpu.resolve_nthread(1, cpu_ids=ids[:2])


@pytest.mark.parametrize(
    "spec,expected",
    [("0-3", [0, 1, 2, 3]), ("2,0", [2, 0]), ("0-1, 4", [0, 1, 4]), (3, [3]), ([1, 2], [1, 2]),
     ("", None), (None, None)],
)
def test_parse_cpu_ids(spec, expected):
    assert cpu.parse_cpu_ids(spec) == expected


@pytest.mark.parametrize("spec", ["a", "3-1", "1-", "0,,1", "1.5"])
def test_parse_cpu_ids_rejects_garbage(spec):
    with pytest.raises(ValueError, match="bad cpu id list"):
        cpu.parse_cpu_ids(spec)


@given(st.text(max_size=20))
def test_parse_cpu_ids_only_raises_value_error(spec):
    try:
        out = cpu.parse_cpu_ids(spec)
    except ValueError:
        return
    assert out is None or all(isinstance(i, int) for i in out)


@pytest.mark.parametrize(("usable", "setting", "on_cuda", "learner", "pool"), [
    (2, None, False, 1, 1),  # the 2-core box: one core each instead of both processes on both
    (16, None, False, 8, 8),
    (1, None, False, 1, 1),  # one CPU: both need a thread on it
    (16, 4, False, 4, 12),  # training.learner_threads sets the split
    (4, 6, False, 6, 1),  # a learner asking for more than there is still leaves the pool one thread
    (16, None, True, 1, None),  # GPU learner: the pool keeps its own rule (every usable CPU)
])
def test_training_gives_the_pool_the_cpus_the_learner_leaves(usable, setting, on_cuda, learner, pool):
    from unilab.runtime.trainer import learner_threads, pool_threads

    assert learner_threads(usable, setting, on_cuda) == learner
    assert pool_threads(usable, setting, on_cuda) == pool


@pytest.mark.parametrize(("extra", "expected"), [
    ([], "split"), (["sim.nthread=3"], 3), (["sim.cpu_ids=[0]"], None),
])
def test_trainer_sizes_the_pool_only_when_sim_leaves_it_open(tmp_path, extra, expected):
    from unilab.cli.config import compose_config, explicit_algo_keys, split_argv, to_run_spec
    from unilab.runtime.trainer import Trainer, pool_threads

    overrides, _ = split_argv(["--task", "pendulum", "algo.device=cpu", *extra])
    spec = to_run_spec(compose_config(overrides), explicit_algo_keys(overrides))
    kw = Trainer(spec, run_dir=tmp_path)._pool_kwargs()
    if expected == "split":
        expected = min(spec.algo.num_envs, pool_threads(cpu.usable_cpu_count(), None, on_cuda=False))
    assert kw["nthread"] == expected

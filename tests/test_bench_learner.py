"""`unilab-bench learner` at tiny sizes: the JSON's keys, and counts that see what the update does."""

from __future__ import annotations

import json

import pytest

from unilab.algo.sac.agent import FastSAC
from unilab.bench.learner import REPORT_KEYS, main

TINY = ["--algo", "sac_cpu", "--task", "pendulum", "--rounds", "2", "--iterations", "1", "--warmup", "1",
        "--replay-steps", "8", "algo.num_envs=4", "algo.batch_size=16", "algo.num_updates=2",
        "algo.actor_hidden_dims=[16,8,4]", "algo.critic_hidden_dims=[16,8,4]", "algo.num_atoms=11"]


def _run(tmp_path, name: str, *extra: str) -> dict:
    out = tmp_path / f"{name}.json"
    assert main([*TINY, *extra, "--out", str(out)]) == 0
    return json.loads(out.read_text())


@pytest.mark.g1  # holosoma's update comes from the wheel the G1 assets are fetched from
def test_learner_bench_times_both_learners_and_counts_what_the_update_does(tmp_path, monkeypatch, capsys):
    import torch

    from unilab.assets.holosoma import ensure_assets

    ensure_assets(progress=False)
    # torch's default, which the first torch.compile in a process turns off (another test may have compiled)
    monkeypatch.setattr(torch.distributions.Distribution, "_validate_args", True)
    report = _run(tmp_path, "plain")
    assert list(report) == ["environment", "benchmark", *REPORT_KEYS]
    assert report["device"] == "cpu" and report["benchmark"] == "learner"
    assert report["ms_per_update"] > 0 and report["reference_ms_per_update"] > 0
    assert report["ratio"] == pytest.approx(report["ms_per_update"] / report["reference_ms_per_update"])
    assert report["syncs_per_update"] == 0  # the update never reads the device
    # holosoma's Normal validates its arguments on the host: bool(tensor) in every actor sample
    assert report["reference_syncs_per_update"] > 0 and report["reference"]["sync_names"]
    assert report["ops_per_update"] > 50 and report["reference_ops_per_update"] > 50
    assert sum(report["split_ms"].values()) == pytest.approx(report["ms_per_update"])
    assert report["split_ms"]["critic_forward"] > 0 and report["split_ms"]["actor_backward"] > 0
    table = capsys.readouterr().out
    assert "ms per update" in table and "host syncs per update" in table

    original = FastSAC.update_step

    def with_host_reads(self, b, actor_turn):  # what a careless metric would add: two waits for the device
        original(self, b, actor_turn)
        self.log_alpha.detach().exp().item()
        self.log_alpha.detach().cpu()

    monkeypatch.setattr(FastSAC, "update_step", with_host_reads)
    careless = _run(tmp_path, "careless", "--no-reference")
    assert careless["syncs_per_update"] == 2
    assert careless["sync_names"] == {"aten::_local_scalar_dense": 1.0, "Tensor.cpu": 1.0}
    assert careless["ops_per_update"] > report["ops_per_update"]
    assert careless["reference_ms_per_update"] is None and careless["ratio"] is None


def test_learner_bench_refuses_bad_input(capsys):
    assert main(["--threads", "0"]) == 2
    assert "--threads must be >= 1" in capsys.readouterr().err
    assert main(["--no-reference", "batch_size=3"]) == 2
    assert "algo.KEY=VALUE" in capsys.readouterr().err
    assert main(["--no-reference", "--task", "pendulum", "algo.no_such_key=1"]) == 2
    assert "no_such_key" in capsys.readouterr().err

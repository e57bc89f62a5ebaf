"""The learning benchmark's curve summary and JSON, on a tiny hand-written event file (no training)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from unilab.bench import learn
from unilab.eval.metrics import METRIC_NAMES
from unilab.telemetry.scalars import ScalarWriter

NUM_ENVS = 4


def _tiny_run(run_dir: Path, returns: list[float]) -> Path:
    run_dir.mkdir(parents=True)
    (run_dir / "config.yaml").write_text(yaml.safe_dump({"algo": {"num_envs": NUM_ENVS}}))
    w = ScalarWriter(str(run_dir))
    for i, r in enumerate(returns, start=1):
        w.add_dict({"episode/return_mean": r, "episode/length_mean": 10.0 * i, "perf/steps_per_sec": 100.0 * i,
                    "reward/mean": r / 10}, step=10 * i * NUM_ENVS)
    w.close()
    return run_dir


def test_curve_summary_of_a_tiny_event_file(tmp_path):
    returns = [1.0, 5.0, 3.0, 2.0, 4.0, 0.5, 2.5, 3.5, 1.5, 6.0, 2.0, 7.0]
    run = _tiny_run(tmp_path / "run", returns)
    s = learn.curve_summary(learn.read_curves(run), NUM_ENVS)
    assert set(s) == set(learn.CURVE_KEYS)
    assert s["return_final"] == 7.0 and s["return_max"] == 7.0
    assert s["return_last10pct_mean"] == 7.0  # 12 points: the last one
    assert s["episode_length_final"] == 120.0
    assert s["steps_per_sec_mean"] == pytest.approx(650.0)
    assert s["reward_per_step_final"] == pytest.approx(0.7)
    assert s["iterations"] == 120 and s["env_steps"] == 120 * NUM_ENVS and s["points"] == 12
    assert s["train_wall_s"] >= 0.0


def test_curve_summary_without_episodes_keeps_every_key(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    w = ScalarWriter(str(run))
    w.add_dict({"perf/steps_per_sec": 50.0}, step=8)
    w.close()
    s = learn.curve_summary(learn.read_curves(run), NUM_ENVS)
    assert set(s) == set(learn.CURVE_KEYS)
    assert s["return_final"] is None and s["steps_per_sec_final"] == 50.0 and s["iterations"] == 2


def test_train_command_carries_the_budget_and_overrides():
    args = learn.build_parser().parse_args(["--minutes", "1.5", "--num-envs", "16", "algo.batch_size=64"])
    cmd = learn.train_command(args)
    assert cmd[cmd.index("--algo") + 1] == "sac_cpu" and cmd[cmd.index("--task") + 1] == "g1_motion_tracking"
    assert "training.time_limit_s=90" in cmd and "algo.num_envs=16" in cmd and cmd[-1] == "algo.batch_size=64"
    assert "training.no_play=true" in cmd


def test_main_writes_the_json_with_fixed_keys(tmp_path, monkeypatch, capsys):
    run = _tiny_run(tmp_path / "logs" / "run", [1.0, 2.0, 3.0])
    ckpt = run / "model_33.pt"
    ckpt.write_bytes(b"stand-in")
    report = {"overall": dict.fromkeys(METRIC_NAMES, 0.25), "clips": {"c": {"frames": 9}}}

    def fake_eval(cmd):
        out = Path(cmd[cmd.index("--json") + 1])
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report))
        return 0

    monkeypatch.setattr(learn, "run_training", lambda cmd: (0, run, ckpt, 12.5))
    monkeypatch.setattr(learn, "run_eval", fake_eval)
    out = tmp_path / "learn.json"
    assert learn.main(["--minutes", "0.1", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert {"environment", "benchmark", "algo", "minutes", "num_envs", "curve", "eval", "eval_clips",
            "train_returncode", "train_process_wall_s", "run_dir", "checkpoint"} <= set(data)
    assert set(data["curve"]) == set(learn.CURVE_KEYS)
    assert data["eval"] == dict.fromkeys(METRIC_NAMES, 0.25)
    assert data["curve"]["iterations"] == 33 and data["curve"]["env_steps"] == 33 * NUM_ENVS
    assert "curve/return_final" in capsys.readouterr().out


def test_main_without_a_checkpoint_still_reports_and_fails(tmp_path, monkeypatch):
    run = _tiny_run(tmp_path / "run", [1.0])
    monkeypatch.setattr(learn, "run_training", lambda cmd: (1, run, None, 3.0))
    out = tmp_path / "learn.json"
    assert learn.main(["--out", str(out)]) == 1
    data = json.loads(out.read_text())
    assert data["train_returncode"] == 1 and data["eval"] == dict.fromkeys(METRIC_NAMES)


def test_bad_override_is_a_usage_error(capsys):
    assert learn.main(["not_an_override"]) == 2
    assert "KEY=VALUE" in capsys.readouterr().err

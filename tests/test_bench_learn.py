"""The learning benchmark's curve summary and JSON, on a tiny hand-written event file (no training)."""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path

import pytest
import yaml

from unilab.bench import children, compare, evaluation, learn, training
from unilab.eval.metrics import METRIC_NAMES
from unilab.telemetry.scalars import ScalarWriter

NUM_ENVS = 4
# the single run's JSON, as in docs/results/learn_*.json: keys and their order fixed across commits
LEARN_KEYS = ["environment", "benchmark", "task", "algo", "minutes", "num_envs", "overrides", "command", "run_dir",
              "checkpoint", "train_returncode", "train_process_wall_s", "curve", "eval_returncode", "eval",
              "eval_clips", "eval_locomotion", "stop_signal"]


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
    s = evaluation.curve_summary(evaluation.read_curves(run), NUM_ENVS)
    assert set(s) == set(evaluation.CURVE_KEYS)
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
    s = evaluation.curve_summary(evaluation.read_curves(run), NUM_ENVS)
    assert set(s) == set(evaluation.CURVE_KEYS)
    assert s["return_final"] is None and s["steps_per_sec_final"] == 50.0 and s["iterations"] == 2


def test_train_command_carries_the_budget_and_overrides():
    args = learn.build_parser().parse_args(["--minutes", "1.5", "--num-envs", "16", "algo.batch_size=64"])
    cmd = training.train_command(args)
    assert cmd[cmd.index("--algo") + 1] == "sac_cpu" and cmd[cmd.index("--task") + 1] == "g1_motion_tracking"
    assert "training.time_limit_s=90" in cmd and "algo.num_envs=16" in cmd and cmd[-1] == "algo.batch_size=64"
    assert "training.no_play=true" in cmd


def test_main_writes_the_json_with_fixed_keys(tmp_path, monkeypatch, capsys):
    run = _tiny_run(tmp_path / "logs" / "run", [1.0, 2.0, 3.0])
    ckpt = run / "model_33.pt"
    ckpt.write_bytes(b"stand-in")
    report = {"overall": dict.fromkeys(METRIC_NAMES, 0.25), "clips": {"c": {"frames": 9}}}
    commands = []

    def fake_eval(cmd, cpus=None, env=None):
        commands.append(cmd)
        out = Path(cmd[cmd.index("--json") + 1])
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report))
        return 0

    monkeypatch.setattr(learn, "run_training", lambda cmd: (0, run, ckpt, 12.5))
    monkeypatch.setattr(children, "run", fake_eval)
    out = tmp_path / "learn.json"
    assert learn.main(["--minutes", "0.1", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert list(data) == LEARN_KEYS
    assert set(data["curve"]) == set(evaluation.CURVE_KEYS)
    assert data["eval"] == dict.fromkeys(METRIC_NAMES, 0.25) and data["eval_clips"] == {"c": {"frames": 9}}
    assert data["eval_returncode"] == 0 and data["eval_locomotion"] is None
    assert len(commands) == 1 and "--starts" not in commands[0]  # the clips from frame 0 only
    assert data["curve"]["iterations"] == 33 and data["curve"]["env_steps"] == 33 * NUM_ENVS
    assert "curve/return_final" in capsys.readouterr().out


@pytest.mark.parametrize("task", ["g1_locomotion", "t1_locomotion"])
def test_locomotion_is_evaluated_per_command_bin_against_the_zero_policy(task, tmp_path, monkeypatch, capsys):
    run = _tiny_run(tmp_path / "logs" / "run", [1.0, 2.0, 3.0])
    ckpt = run / "model_33.pt"
    ckpt.write_bytes(b"stand-in")
    commands = []

    def fake_eval(cmd, cpus=None, env=None):
        commands.append(cmd)
        policy = cmd[cmd.index("--policy") + 1]
        out = Path(cmd[cmd.index("--json") + 1])
        out.parent.mkdir(parents=True, exist_ok=True)
        pushes = cmd[cmd.index("--pushes") + 1]
        length = {("checkpoint", "on"): 3.0, ("checkpoint", "off"): 20.0}.get((policy, pushes), 1.5)
        out.write_text(json.dumps({"overall": {"episode_length_s": length}, "bins": {}, "control_dt": 0.02}))
        return 0

    monkeypatch.setattr(learn, "run_training", lambda cmd: (0, run, ckpt, 12.5))
    monkeypatch.setattr(children, "run", fake_eval)
    out = tmp_path / "learn.json"
    assert learn.main(["--task", task, "--minutes", "0.1", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert list(data) == LEARN_KEYS and data["eval_clips"] == {} and data["eval_returncode"] == 0
    assert data["algo"] == "sac_cpu_loco" and data["eval"] == dict.fromkeys(METRIC_NAMES)
    assert data["eval_locomotion"]["checkpoint"]["overall"]["episode_length_s"] == 3.0
    assert data["eval_locomotion"]["zero"]["overall"]["episode_length_s"] == 1.5
    # the checkpoint once more without pushes: standing still vs falling to pushes
    assert data["eval_locomotion"]["checkpoint_no_pushes"]["overall"]["episode_length_s"] == 20.0
    assert all(c[c.index("--task") + 1] == task for c in commands) and len(commands) == 3
    printed = capsys.readouterr().out
    assert "locomotion/zero/episode_length_s" in printed and "locomotion/checkpoint_no_pushes/" in printed


def test_main_without_a_checkpoint_still_reports_and_fails(tmp_path, monkeypatch):
    run = _tiny_run(tmp_path / "run", [1.0])
    monkeypatch.setattr(learn, "run_training", lambda cmd: (1, run, None, 3.0))
    out = tmp_path / "learn.json"
    assert learn.main(["--out", str(out)]) == 1
    data = json.loads(out.read_text())
    assert list(data) == LEARN_KEYS and data["eval_returncode"] is None
    assert data["train_returncode"] == 1 and data["eval"] == dict.fromkeys(METRIC_NAMES)


@pytest.mark.parametrize("argv", [[], ["--seeds", "0,1", "--task", "pendulum"]])
def test_a_stop_before_the_training_made_a_run_directory_still_writes_the_json(tmp_path, monkeypatch, capsys, argv):
    """SIGTERM during a training's start-up (it exits -15 without a run directory) and nothing more started."""
    started = []

    def stopped_training(cmd, *_args, **_kwargs):
        rc = -15 if not started else 128 + 15  # the first was running; run_training starts no more
        started.append(cmd)
        monkeypatch.setattr(children.CHILDREN, "signum", signal.SIGTERM)
        return rc, None, None, 1.5

    monkeypatch.setattr(learn, "run_training", stopped_training)
    monkeypatch.setattr(compare, "run_training", stopped_training)
    out = tmp_path / "learn.json"
    assert learn.main([*argv, "--out", str(out), "--log-root", str(tmp_path)]) == 128 + signal.SIGTERM
    data = json.loads(out.read_text())
    assert data["stop_signal"] == signal.SIGTERM
    assert "before making a run directory" not in capsys.readouterr().err  # a stop, not a failure
    runs = data["runs"] if argv else [data]
    assert runs[0]["train_returncode"] == -15 and all(r["run_dir"] is r["checkpoint"] is None for r in runs)
    if argv:
        assert list(data) == ["environment", "benchmark", "task", "algo", "minutes", "env_steps_budget", "seeds",
                              "parallel", "cpu_slots", "arms", "common_overrides", "machine", "wall_s", "baselines",
                              "checkpoint_env_steps", "runs", "plot", "stop_signal"]
        assert [r["stopped_by"] for r in runs] == ["signal", "signal"]
    else:
        assert list(data) == LEARN_KEYS and data["num_envs"] is None and data["eval_returncode"] is None
        assert data["curve"] == dict.fromkeys(evaluation.CURVE_KEYS) and data["eval"] == dict.fromkeys(METRIC_NAMES)


def test_a_training_that_fails_before_its_run_directory_is_an_error_with_a_json(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(learn, "run_training", lambda cmd: (1, None, None, 0.5))
    out = tmp_path / "learn.json"
    assert learn.main(["--out", str(out)]) == 1
    assert "training exited with rc 1 before making a run directory" in capsys.readouterr().err
    data = json.loads(out.read_text())
    assert list(data) == LEARN_KEYS and data["train_returncode"] == 1 and data["stop_signal"] is None


def test_bad_override_is_a_usage_error(capsys):
    assert learn.main(["not_an_override"]) == 2
    assert "KEY=VALUE" in capsys.readouterr().err


# ------------------------------------------------------------------------------- recipe comparison (--arm)
PENDULUM_TINY = ["--task", "pendulum", "--algo", "sac_cpu", "algo.num_envs=8", "algo.batch_size=64",
                 "algo.buffer_size=64", "algo.learning_starts=2", "algo.actor_hidden_dims=[16]",
                 "algo.critic_hidden_dims=[16]", "algo.num_atoms=11", "algo.compile=false",
                 "training.log_interval=2", "task.episode_length=5"]


def test_arm_parser_accepts_names_and_override_strings():
    arms = compare.parse_arms([["base", ""], ["lr", "algo.actor_lr=1e-3  algo.critic_lr='1e-3'"]])
    assert arms == [compare.Arm("base", ()), compare.Arm("lr", ("algo.actor_lr=1e-3", "algo.critic_lr=1e-3"))]
    assert compare.parse_arms([]) == [compare.Arm("base", ())]
    assert compare.parse_seeds("0, 1,2") == [0, 1, 2] and compare.parse_seeds(None) == [0]


@pytest.mark.parametrize(("pairs", "message"), [
    ([["ok", ""], ["bad", "algo.batch_size"]], "--arm bad: overrides must be KEY=VALUE"),
    ([["bad name", ""]], "--arm 'bad name'"),
    ([["steps", "algo.max_iterations=5"]], "--arm steps: ['algo.max_iterations=5'] set keys the benchmark owns"),
    ([["pin", "sim.cpu_ids=[0]"]], "--arm pin:"),
    ([["twice", ""], ["twice", "algo.tau=0.1"]], "--arm twice: the name is given twice"),
    ([["quote", "algo.tau='0.1"]], "--arm quote: cannot split"),
])
def test_arm_parser_errors_name_the_bad_arm(pairs, message):
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        compare.parse_arms(pairs)


def test_bad_seeds_and_unknown_arm_keys_are_usage_errors(capsys):
    assert learn.main(["--seeds", "0,x", "--task", "pendulum"]) == 2
    assert "--seeds '0,x'" in capsys.readouterr().err
    assert learn.main(["--task", "pendulum", "--arm", "good", "", "--arm", "typo", "algo.batchsize=4"]) == 2
    err = capsys.readouterr().err
    assert "--arm typo: unknown key algo.batchsize" in err
    assert learn.main(["--parallel", "4096", "--task", "pendulum"]) == 2
    assert "--parallel 4096: only" in capsys.readouterr().err


def test_env_step_budget_sets_iterations_per_arm_and_pinning_goes_before_the_arm():
    args = learn.build_parser().parse_args(["--env-steps", "96", *PENDULUM_TINY])
    arms = compare.parse_arms([["a", ""], ["b", "algo.num_envs=16 training.learner_threads=2"]])
    jobs = compare.make_jobs(args, arms, [0, 3])
    assert [(j.arm.name, j.seed, j.iterations, j.num_envs) for j in jobs] == [
        ("a", 0, 12, 8), ("a", 3, 12, 8), ("b", 0, 6, 16), ("b", 3, 6, 16)]
    assert "algo.seed=3" in jobs[1].cmd and "training.seed=3" in jobs[1].cmd
    assert jobs[2].cmd[-1] == "algo.max_iterations=6"
    cmd = compare.pinned_command(jobs[2].cmd, [1], jobs[2].arm)
    assert cmd.index("sim.cpu_ids=[1]") < cmd.index("algo.num_envs=16")  # the arm's keys stay last
    assert not any(c.startswith("training.learner_threads=1") for c in cmd)  # the arm sized the learner
    assert "training.learner_threads=1" in compare.pinned_command(jobs[0].cmd, [0], jobs[0].arm)
    assert compare.pinned_command(jobs[0].cmd, None, jobs[0].arm) == jobs[0].cmd
    # more CPUs per run: the learner's half and the pool's half do not overlap
    four = compare.pinned_command(jobs[0].cmd, [4, 5, 6, 7], jobs[0].arm)
    assert "sim.cpu_ids=[6,7]" in four and "training.learner_threads=2" in four
    assert "sim.cpu_ids=[5,6]" in compare.pinned_command(jobs[0].cmd, [4, 5, 6], jobs[0].arm)
    assert "sim.cpu_ids=[6]" in compare.pinned_command(jobs[2].cmd, [4, 5, 6], jobs[2].arm)  # the arm's 2 threads


def test_curves_are_sampled_at_common_env_steps():
    runs = [{"env_steps": 100, "series": {"env_steps": [20, 50, 100], "episode_length": [1.0, 2.0, 3.0],
                                          "return_env_steps": [20, 50, 100], "return": [-1.0, -0.5, 0.0]}},
            {"env_steps": None, "series": None}]
    steps = evaluation.add_checkpoints(runs, 100)
    assert steps == [5 * k for k in range(1, 21)]
    at = runs[0]["at_checkpoints"]
    assert at["episode_length"][0] is None and at["episode_length"][3] == 1.0  # 20 env steps
    assert at["episode_length"][9] == 2.0 and at["episode_length"][-1] == 3.0 and at["return"][-1] == 0.0
    assert runs[0]["episode_length_last10pct"] == 3.0
    assert runs[1]["at_checkpoints"]["episode_length"] == [None] * 20


def test_final_eval_command_carries_the_start_stride_and_a_bad_one_is_refused_before_training(tmp_path, capsys):
    args = learn.build_parser().parse_args(["--eval-start-stride", "10", "--eval-max-frames", "40"])
    cmd = evaluation.eval_command(args, tmp_path / "model_5.pt", tmp_path / "final.json")
    assert cmd[cmd.index("--start-stride") + 1] == "10" and cmd[cmd.index("--max-frames") + 1] == "40"
    assert "--start-stride" not in evaluation.eval_command(learn.build_parser().parse_args([]), tmp_path / "m.pt",
                                                      tmp_path / "f.json")
    assert learn.main(["--eval-start-stride", "0", "--log-root", str(tmp_path / "logs")]) == 2
    assert "--eval-start-stride must be >= 1" in capsys.readouterr().err
    assert not (tmp_path / "logs").exists()  # nothing trained


def test_compare_table_shows_the_earliest_first_failure_from_frame_0():
    from unilab.eval.metrics import METRIC_NAMES

    def run(arm, clips):
        return {**dict.fromkeys(compare.RUN_KEYS), "arm": arm, "seed": 0, "eval": dict.fromkeys(METRIC_NAMES),
                "eval_clips": clips}

    report = {"checkpoint_env_steps": [5 * k for k in range(1, 21)],
              "runs": [run("failing", {"a": {"first_failure_frame": 84}, "b": {"first_failure_frame": 21}}),
                       run("tracking", {"a": {"first_failure_frame": None}}), run("no_eval", None)]}
    lines = compare.compare_table(report).splitlines()
    col = [c.strip() for c in lines[0].split("|")].index("first_fail")
    cells = {row.split("|")[0].strip(): row.split("|")[col].strip() for row in lines[2:]}
    assert cells == {"failing": "21", "tracking": "-", "no_eval": "-"}


@pytest.mark.slow
def test_two_arms_train_to_equal_env_steps_and_write_json_and_png(tmp_path, capsys):
    """Two pendulum arms with different num_envs, side by side on disjoint CPUs where there are two."""
    from unilab.sim.cpu import usable_cpus

    parallel = 2 if len(usable_cpus()) >= 2 else 1
    out = tmp_path / "arms.json"
    rc = learn.main(["--env-steps", "96", "--minutes", "3", "--parallel", str(parallel), "--log-root",
                     str(tmp_path / "logs"), "--out", str(out), "--arm", "small", "",
                     "--arm", "wide", "algo.num_envs=16", *PENDULUM_TINY])
    assert rc == 0
    data = json.loads(out.read_text())
    assert list(data) == ["environment", "benchmark", "task", "algo", "minutes", "env_steps_budget", "seeds",
                          "parallel", "cpu_slots", "arms", "common_overrides", "machine", "wall_s", "baselines",
                          "checkpoint_env_steps", "runs", "plot", "stop_signal"]
    assert data["machine"]["lscpu_model_name"] is None or isinstance(data["machine"]["lscpu_model_name"], str)
    runs = {r["arm"]: r for r in data["runs"]}
    assert set(runs) == {"small", "wide"} and all(set(r) == set(compare.RUN_KEYS) for r in runs.values())
    assert runs["small"]["iterations"] == 12 and runs["wide"]["iterations"] == 6
    for r in runs.values():  # equal env steps, reached by the step budget, not the clock
        assert r["env_steps"] == r["env_steps_target"] == 96 and r["stopped_by"] == "env_steps"
        assert r["train_returncode"] == 0 and r["eval_returncode"] is None  # no tracking eval for the pendulum
        assert r["at_checkpoints"]["env_steps"] == data["checkpoint_env_steps"]
        assert r["at_checkpoints"]["env_steps"][-1] == 96
        assert r["series"]["episode_length"] and r["at_checkpoints"]["episode_length"][-1] == pytest.approx(5.0)
        assert r["learner_ms_per_update"] > 0 and r["steps_per_sec"] > 0
    if parallel == 2:
        assert sorted(r["cpu_ids"][0] for r in runs.values()) == sorted(usable_cpus()[:2])
    png = Path(data["plot"])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = capsys.readouterr().out
    assert "len@25%" in table and "len_last10%" in table and "wide" in table


# --------------------------------------------------------------------------------------------- GPU check
@pytest.mark.slow
def test_gpu_check_tiny_path_end_to_end(tmp_path):
    from unilab.bench import gpu_check

    out = tmp_path / "gpu.json"
    rc = gpu_check.main(["--tiny", "--task", "pendulum", "--iterations", "6", "--log-root", str(tmp_path / "logs"),
                         "--out", str(out), "training.log_interval=2", "task.episode_length=5"])
    assert rc == 0
    data = json.loads(out.read_text())
    assert data["benchmark"] == "gpu" and set(gpu_check.REPORT_KEYS) <= set(data)
    assert data["tiny"] is True and data["num_envs"] == 8 and data["iterations"] == 6 and data["env_steps"] == 48
    assert data["learner_ms_per_update"] == pytest.approx(data["learner_train_ms"] / 2)
    assert data["overlap"] == pytest.approx(data["learner_train_ms"] / data["collector_env_step_ms"])
    assert data["steps_per_sec"] > 0 and data["eval"] == dict.fromkeys(METRIC_NAMES)


def test_a_child_command_runs_on_the_given_cpus():
    import os
    import subprocess
    import sys

    cpu = sorted(os.sched_getaffinity(0))[-1]
    probe = [sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"]
    out = subprocess.run(children.command(probe, [cpu]), capture_output=True, text=True, check=True).stdout
    assert out.strip() == f"[{cpu}]"
    out = subprocess.run(children.command(probe, None), capture_output=True, text=True, check=True).stdout
    assert out.strip() == str(sorted(os.sched_getaffinity(0)))


def test_arm_src_runs_an_arm_on_another_checkout(tmp_path, monkeypatch):
    checkout = tmp_path / "old"
    (checkout / "src" / "unilab").mkdir(parents=True)
    (checkout / "src" / "unilab" / "__init__.py").write_text("")
    monkeypatch.setenv("PYTHONPATH", "/somewhere")
    arms = compare.with_sources(compare.parse_arms([["new", ""], ["old", ""]]), [["old", str(checkout)]])
    assert arms[0].environment() is None  # this checkout: the inherited environment
    assert arms[1].environment()["PYTHONPATH"].split(":") == [str(checkout.resolve() / "src"), "/somewhere"]
    with pytest.raises(ValueError, match="--arm-src nope: no arm of that name"):
        compare.with_sources(arms, [["nope", str(checkout)]])
    with pytest.raises(ValueError, match="not a unilab checkout"):
        compare.with_sources(arms, [["old", str(tmp_path)]])

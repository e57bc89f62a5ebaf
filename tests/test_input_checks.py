"""Bad input is refused before anything starts, with one line naming the key, flag or file: non-finite config numbers,
out-of-range options, broken checkpoints and ONNX metadata, files that moved or are directories."""

from __future__ import annotations

import argparse
import dataclasses
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from runtime_helpers import TINY, run_dirs, train_cmd
from script_modules import load_script

from unilab.cli import eval as eval_cli
from unilab.cli import play as play_cli
from unilab.cli.config import ConfigError, compose_config, group_options, to_run_spec
from unilab.dataclass_config import NONFINITE_OK, build_dataclass
from unilab.runtime import checkpoint as ck
from unilab.runtime.signals import StopRequested, StopSignals


def _spec(*overrides: str):
    return to_run_spec(compose_config(list(overrides)), check_paths=False)


# ------------------------------------------------------------------ every config number finite (and sigma > 0)

@pytest.mark.parametrize("overrides, key, value", [
    (("task=g1_locomotion", "task.rewards.alive.weight=nan"), "task.rewards.alive.weight", "nan"),
    (("task=g1_locomotion", "task.rewards.tracking_lin_vel.tracking_sigma=inf"),
     "task.rewards.tracking_lin_vel.tracking_sigma", "inf"),
    (("task=g1_locomotion", "+task.rewards.pose.joint_weights.waist_yaw_joint=nan"),
     "task.rewards.pose.joint_weights.waist_yaw_joint", "nan"),
    (("task.rewards.anchor_pos.weight=inf",), "task.rewards.anchor_pos.weight", "inf"),
    (("task.rewards.body_pos.sigma=-inf",), "task.rewards.body_pos.sigma", "-inf"),
    (("task.terminations.anchor_height=nan",), "task.terminations.anchor_height", "nan"),
    (("+task.robot.kp.left_knee_joint=nan",), "task.robot.kp.left_knee_joint", "nan"),
    (("task.reset.noise.root_pos=[0.1,nan,0]",), "task.reset.noise.root_pos[1]", "nan"),
    (("task=pendulum", "task.angle_cost=nan"), "task.angle_cost", "nan"),
    (("algo.gamma=nan",), "algo.gamma", "nan"),
    (("training.console_interval_s=inf",), "training.console_interval_s", "inf"),
])
def test_a_non_finite_number_anywhere_in_the_config_is_refused_naming_its_key(overrides, key, value):
    with pytest.raises(ConfigError) as err:
        _spec(*overrides)
    assert str(err.value) == f"invalid value for {key}: {value} (expected a finite number)"


@pytest.mark.parametrize("override, key", [
    ("task.rewards.anchor_pos.sigma=0", "task.rewards.anchor_pos.sigma"),
    ("task.rewards.body_ori.sigma=-1", "task.rewards.body_ori.sigma"),
])
def test_an_exp_term_sigma_must_be_positive(override, key):
    with pytest.raises(ConfigError, match=f"^{key} must be > 0"):
        _spec(override)


def test_train_refuses_a_nan_reward_weight_before_anything_starts(tmp_path):
    out = subprocess.run([sys.executable, "-m", "unilab.cli.train", "--task", "g1_locomotion",
                          "task.rewards.alive.weight=nan", f"training.log_root={tmp_path}"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "train: error: invalid value for task.rewards.alive.weight: nan (expected a finite number)"]
    assert not (tmp_path / "fast_sac").exists()


@pytest.mark.parametrize("task", group_options("task"))
@pytest.mark.parametrize("algo", group_options("algo"))
def test_no_default_or_preset_needs_a_non_finite_number(task, algo):
    _spec(f"task={task}", f"algo={algo}")


def test_a_field_may_declare_that_it_takes_non_finite_values():
    @dataclasses.dataclass
    class Limits:
        bound: float = dataclasses.field(default=1.0, metadata={NONFINITE_OK: True})
        gain: float = 1.0

    assert build_dataclass(Limits, {"bound": float("inf")}, "x").bound == float("inf")
    with pytest.raises(ValueError, match=r"^invalid value for x\.gain: nan \(expected a finite number\)$"):
        build_dataclass(Limits, {"gain": float("nan")}, "x")


# ------------------------------------------------------------------ numbers checked with the config or the flags

@pytest.mark.parametrize("overrides, message", [
    (("training.seed=-1",), "training.seed must be an integer >= 0"),
    (("task=g1_locomotion", "task.curriculum.level_down_threshold=800"),
     "task.curriculum.level_up_threshold must be >= task.curriculum.level_down_threshold (800.0), got 750.0"),
    (("task=g1_locomotion", "task.curriculum.degree=-0.1"), "task.curriculum.degree must be >= 0"),
])
def test_out_of_range_values_are_refused_naming_the_key(overrides, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        _spec(*overrides)


def test_eval_interval_on_a_task_without_an_evaluation_says_why():
    assert _spec("task=g1_locomotion", "training.eval_interval=5").training.eval_interval == 5  # its row has one
    with pytest.raises(ConfigError) as err:
        _spec("task=pendulum", "training.eval_interval=5")
    assert str(err.value).startswith("training.eval_interval=5: task pendulum has no evaluation")


@pytest.mark.parametrize("argv, message", [
    (["--speed", "nan"], "--speed nan: expected a number in (0, 10]"),
    (["--speed", "-1"], "--speed -1.0: expected a number in (0, 10]"),
    (["--speed", "1e6"], "--speed 1000000.0: expected a number in (0, 10]"),
    (["--envs-per-bin", "0"], "--envs-per-bin must be >= 1, got 0"),
])
def test_eval_refuses_a_locomotion_option_out_of_range(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        eval_cli.main(["--task", "g1_locomotion", "--policy", "zero", *argv])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["--num-envs", "0"], "argument --num-envs: expected an integer >= 1, got 0"),
    (["--steps", "0"], "argument --steps: expected an integer >= 1, got 0"),
    (["--cpu-ids", "99"], "argument --cpu-ids: '99' names CPUs [99] outside the usable set"),
])
def test_bench_env_phases_refuses_a_bad_flag_naming_it(argv, message, capsys):
    from unilab.bench import env_step_phase_cpu

    with pytest.raises(SystemExit) as exit_:
        env_step_phase_cpu.main(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_an_env_that_cannot_fit_in_memory_is_refused_with_its_size(humanoid):
    from unilab.sim.mujoco.pool import BatchEnvPool, bytes_per_env

    with pytest.raises(MemoryError, match=r"^10000000000 simulations need at least .* GiB") as err:
        BatchEnvPool(humanoid, 10**10)
    assert f"({bytes_per_env(humanoid)} bytes each)" in str(err.value)


# ------------------------------------------------------------------ the benchmark's own flags

def test_bench_learn_checks_its_report_path_seeds_and_arm_sources_before_training(monkeypatch, capsys, tmp_path):
    from unilab.bench import learn

    monkeypatch.setattr(learn, "run_training", lambda *_a, **_k: pytest.fail("a training started"))
    assert learn.main(["--task", "pendulum", "--out", "/proc/learn.json"]) == 2
    assert "cannot write the report to /proc/learn.json" in capsys.readouterr().err
    assert learn.main(["--task", "pendulum", "--seeds", "-1", "--out", str(tmp_path / "x.json")]) == 2
    assert "--seeds '-1': expected distinct comma-separated integers >= 0" in capsys.readouterr().err
    assert learn.main(["--task", "pendulum", "--arm-src", "nosuch", str(tmp_path), "--out",
                       str(tmp_path / "x.json")]) == 2
    assert "--arm-src nosuch: no arm of that name (arms: base)" in capsys.readouterr().err


# ------------------------------------------------------------------ checkpoints: broken entries, nesting, garbage

def _save_raw(path: Path, payload: dict) -> Path:
    """A checkpoint with a valid hash whatever its entries hold."""
    return ck.save_checkpoint(path, payload)


PENDULUM_CONFIG = {"task": {"name": "pendulum"}, "sim": {}}


@pytest.mark.parametrize("change, message", [
    ({"iteration": "abc"}, "entry 'iteration' is 'abc', expected an integer >= 0"),
    ({"iteration": -5}, "entry 'iteration' is -5, expected an integer >= 0"),
    ({"iteration": True}, "entry 'iteration' is True, expected an integer >= 0"),
    ({"agent": [1, 2]}, "entry 'agent' is a list, expected a mapping"),
    ({"config": "x"}, "entry 'config' is a str, expected a mapping"),
])
def test_a_checkpoint_with_broken_entries_is_refused_naming_the_entry(tmp_path, change, message):
    path = _save_raw(tmp_path / "model_3.pt", {"iteration": 3, "agent": {}, "config": PENDULUM_CONFIG, **change})
    with pytest.raises(ValueError) as err:
        ck.load_checkpoint(path)
    assert str(err.value) == f"checkpoint {path}: {message}"


@pytest.mark.parametrize("prog, main, task, argv", [
    ("play", play_cli.main, "pendulum", ["--no-video"]),
    ("unilab-eval", eval_cli.main, "g1_locomotion", ["--no-plot", "--no-progress"]),
])
def test_a_checkpoint_whose_agent_is_empty_is_one_line_naming_the_file(tmp_path, capsys, prog, main, task, argv):
    config = {"task": {"name": task}, "sim": {}}
    path = _save_raw(tmp_path / "model_3.pt", {"iteration": 3, "agent": {}, "config": config})
    assert main([str(path), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"{prog}: error: checkpoint {path}: the agent cannot be rebuilt (KeyError: 'config')"]


def test_a_deeply_nested_checkpoint_config_is_refused_without_a_recursion_error(tmp_path, capsys):
    deep: dict = {}
    node = deep
    for _ in range(300):
        node["a"] = {}
        node = node["a"]
    config = {**PENDULUM_CONFIG, "task": {"name": "pendulum", "deep": deep}}
    path = _save_raw(tmp_path / "model_3.pt", {"iteration": 3, "agent": {}, "config": config})
    assert play_cli.main([str(path), "--no-video"]) == 2
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert err.startswith(f"play: error: checkpoint {path}: entry config.task.deep.a.a")
    assert err.endswith(f"nests more than {ck.MAX_DEPTH} levels deep; it is not a unilab checkpoint")


@pytest.mark.parametrize("content", [np.random.default_rng(0).bytes(4096), b"\x80\x02" + bytes(200)])
def test_random_bytes_are_called_corrupt_not_malicious(tmp_path, content):
    path = tmp_path / "model_1.pt"
    path.write_bytes(content)
    with pytest.raises(ValueError) as err:
        ck.load_checkpoint(path)
    assert not isinstance(err.value, ck.UntrustedCheckpoint)
    assert str(err.value).startswith(f"checkpoint {path} is unreadable: truncated, corrupt or not a checkpoint")


# ------------------------------------------------------------------ files that moved, or are directories

def test_a_moved_clip_says_how_to_give_its_new_place(tmp_path):
    raw = {"task": {"name": "g1_motion_tracking", "motion_files": [str(tmp_path / "gone.npz")]}}
    with pytest.raises(ValueError) as err:
        ck.stored_run_config({"config": raw}, tmp_path / "model_1.pt")
    assert str(err.value).startswith(f"task.motion_files[0]={tmp_path / 'gone.npz'}: no such file")
    assert "give its new place after the checkpoint as task.KEY=VALUE, e.g. task.motion_files=[" in str(err.value)
    # the user's own new place that is a directory: said as such, and no hint about moving
    with pytest.raises(ValueError) as err:
        ck.stored_run_config({"config": raw}, tmp_path / "model_1.pt", {"task.motion_files": [str(tmp_path)]})
    assert str(err.value) == (f"task.motion_files[0]={tmp_path}: a directory, not a file (expected npz clips: a path "
                              "or a list of paths, or null)")


@pytest.mark.parametrize("module, argv, field", [
    (play_cli, ["RUN", "--no-video", "task.max_episode_length_s=5"], "overrides"),
    (eval_cli, ["RUN", "--no-plot", "task.max_episode_length_s=5"], "targets"),
])
def test_task_overrides_may_follow_an_option(monkeypatch, module, argv, field):
    seen = {}
    monkeypatch.setattr(module, "run_cli", lambda _prog, _main, args: seen.setdefault("args", args) and 0)
    module.main(argv)
    assert getattr(seen["args"], field)[-1] == "task.max_episode_length_s=5"


# ------------------------------------------------------------------ messages that name the real cause

def test_spaces_around_the_equals_sign_get_the_right_hint():
    with pytest.raises(ConfigError, match="an override has no spaces around '=': write algo.num_envs=4$"):
        compose_config(["algo.num_envs = 4"])


def test_a_recipe_that_needs_a_mirror_is_named_not_the_user(tmp_path):
    out = subprocess.run([sys.executable, "-m", "unilab.cli.train", "--algo", "sac_cpu_loco", *TINY,
                          f"training.log_root={tmp_path}"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "train: error: --algo sac_cpu_loco sets algo.use_symmetry=true, which trains on left/right mirrored copies, "
        "but task pendulum has no mirror (the task declares no left/right mirror): add algo.use_symmetry=false, or "
        "choose a recipe without it"]
    assert not run_dirs(tmp_path)


@pytest.mark.parametrize("saves, says", [(False, "training had not started: nothing to save"),
                                         (True, "writing the final checkpoint")])
def test_a_second_signal_says_what_the_stop_is_doing(capsys, saves, says):
    with StopSignals() as stop:
        stop.saves = saves
        with pytest.raises(StopRequested):
            stop._handle(signal.SIGINT, None)
        stop._handle(signal.SIGINT, None)  # reported and ignored
    assert f"SIGINT ignored: already stopping ({says}" in capsys.readouterr().err


def test_train_refuses_a_negative_seed_before_anything_starts(tmp_path):
    out = subprocess.run([*train_cmd(tmp_path), "training.seed=-1"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "training.seed must be an integer >= 0" in out.stderr
    assert not run_dirs(tmp_path)


# ------------------------------------------------------------------ sim2sim's own input

def _sim2sim():
    return load_script("deploy/sim2sim.py")


@pytest.mark.parametrize("task, argv, message", [
    ("locomotion", ["--command", "nan", "0", "0"],
     "--command nan 0.0 0.0: expected finite numbers within +-10 (m/s, rad/s)"),
    ("motion_tracking", ["--command", "1", "0", "0"],
     "--command is not read for a motion_tracking policy (--clip is its option)"),
    ("locomotion", ["--clip", "c.npz"], "--clip is not read for a locomotion policy (--command is its option)"),
])
def test_sim2sim_refuses_an_option_its_policy_does_not_read(monkeypatch, capsys, task, argv, message):
    mod = _sim2sim()
    monkeypatch.setattr(mod, "read_policy", lambda _p: (None, {"task_kind": task}))
    monkeypatch.setattr(mod, "run", lambda *_a, **_k: pytest.fail("rolled out"))
    monkeypatch.setattr(mod, "run_locomotion", lambda *_a, **_k: pytest.fail("rolled out"))
    assert mod.main(["policy.onnx", *argv]) == 2
    assert capsys.readouterr().err.strip() == f"sim2sim: error: {message}"


def test_sim2sim_refuses_a_clip_unilab_refuses(tmp_path):
    mod = _sim2sim()
    jp, jv = np.zeros((5, 9)), np.zeros((5, 8))
    jp[:, 3] = 1.0
    mod.check_clip(tmp_path / "c.npz", 50.0, jp, jv, 2)  # a good one passes
    for damage, message in (("nan", "joint_pos has NaN/inf values (first at frame 2)"),
                            ("zero_quat", "root quaternion has zero norm at frame 0"),
                            ("fps", "fps 0.0 is outside [1, 10000]")):
        bad = jp.copy()
        if damage == "nan":
            bad[2, 7] = np.nan
        if damage == "zero_quat":
            bad[:, 3:7] = 0.0
        with pytest.raises(mod.Sim2SimError, match=re.escape(message)):
            mod.check_clip(tmp_path / "c.npz", 0.0 if damage == "fps" else 50.0, bad, jv, 2)


def test_sim2sim_refuses_a_model_that_is_not_mjcf(tmp_path):
    mod = _sim2sim()
    bad = tmp_path / "robot.xml"
    bad.write_text("not xml at all")
    with pytest.raises(mod.Sim2SimError, match=f"^model {bad}: MuJoCo cannot load it \\(XML parse error"):
        mod.load_pd_model(bad, {"sim_dt": 0.005})


def test_sim2sim_says_a_clip_or_model_that_is_a_directory_is_one(tmp_path):
    mod = _sim2sim()
    folder = tmp_path / "clip.npz"
    folder.mkdir()
    no_bodies = np.zeros(0, dtype=np.int64)
    for load, message in (
            (lambda: mod.load_reference(folder, None, 0.02, no_bodies),
             f"clip {folder} is a directory, not a file (pass --clip NPZ)"),
            (lambda: mod.load_pd_model(folder, {"sim_dt": 0.005}),
             f"model {folder} is a directory, not a file (pass --model MJCF)"),
            (lambda: mod.load_reference(tmp_path / "gone.npz", None, 0.02, no_bodies),
             f"clip {tmp_path / 'gone.npz'} does not exist (pass --clip NPZ)")):
        with pytest.raises(mod.Sim2SimError, match=f"^{re.escape(message)}$"):
            load()


def test_sim2sim_refuses_metadata_nested_past_the_recursion_limit(tmp_path):
    graph = helper.make_graph([helper.make_node("Identity", ["obs"], ["action"])], "g",
                              [helper.make_tensor_value_info("obs", TensorProto.FLOAT, [None, 3])],
                              [helper.make_tensor_value_info("action", TensorProto.FLOAT, [None, 3])])
    model = helper.make_model(graph)
    helper.set_model_props(model, {"kp": "[" * 100_000 + "]" * 100_000})
    path = tmp_path / "deep.onnx"
    onnx.save(model, str(path))
    out = subprocess.run([sys.executable, str(Path(_sim2sim().__file__)), str(path)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 2
    assert out.stderr.strip() == f"sim2sim: error: {path}: metadata 'kp' nests too deep to be read"


def test_bench_option_types_are_usage_errors():
    from unilab.bench.options import at_least, cpu_list, integers_at_least
    from unilab.sim.cpu import usable_cpus

    assert at_least(0)("0") == 0 and integers_at_least(1)("1, 2") == [1, 2]
    assert cpu_list(str(usable_cpus()[0])) == [usable_cpus()[0]]
    for parse, text in ((at_least(1), "0"), (at_least(1), "x"), (integers_at_least(1), "1,0"), (cpu_list, "0-"),
                        (cpu_list, "99999")):
        with pytest.raises(argparse.ArgumentTypeError):
            parse(text)

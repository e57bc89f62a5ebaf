"""The train CLI's config: structured Hydra composition, presets, validation before anything starts, --help."""

from __future__ import annotations

import dataclasses
import pickle
import signal
import subprocess
import sys
import time
import typing
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from unilab.algo.sac.config import SACConfig
from unilab.cli import play as play_cli
from unilab.cli import train as train_cli
from unilab.cli.config import ConfigError, compose_config, field_docs, group_options, split_argv, to_run_spec
from unilab.runtime.config import PlayConfig, RunSpec, SimConfig, TrainingConfig
from unilab.runtime.signals import StopRequested
from unilab.tasks import registry

CONFIG = Path(__file__).resolve().parents[1] / "src" / "unilab" / "config"
# each group's defaults of a preset: a task preset's are its registry row's (a robot and its recipe's values)
SCHEMAS = {"algo": lambda _: SACConfig(), "task": lambda name: registry.task_config(name, {}),
           "sim": lambda _: SimConfig(), "training": lambda _: TrainingConfig()}


def _presets() -> list[tuple[str, str]]:
    return [(group, name) for group in SCHEMAS for name in group_options(group)]


@pytest.mark.parametrize("group, preset", _presets())
def test_presets_differ_from_the_dataclass_defaults_only_by_their_diff(group, preset):
    """A preset YAML names its dataclass (or another preset of its group) and lists only what it changes:
    nothing else differs."""
    body = yaml.safe_load((CONFIG / group / f"{preset}.yaml").read_text()) or {}
    parents = body.pop("defaults")
    assert parents[-1] == "_self_"
    composed = OmegaConf.to_container(compose_config([f"{group}={preset}"])[group], resolve=True)
    if parents[0] in group_options(group):  # a diff on another preset
        defaults = OmegaConf.to_container(compose_config([f"{group}={parents[0]}"])[group], resolve=True)
    else:
        defaults = dataclasses.asdict(SCHEMAS[group](preset))
    diff = {k: v for k, v in composed.items() if v != defaults[k]}
    assert diff == body
    assert composed.keys() == defaults.keys()


def test_sac_cpu_is_the_sac_defaults_plus_its_lines():
    sac = to_run_spec(compose_config(["algo=sac_cpu", "task=pendulum"])).algo
    assert sac.num_envs == 256 and sac.actor_hidden_dims == [256, 128, 64]
    assert sac.gamma == SACConfig().gamma and sac.compile == SACConfig().compile


def test_upstream_command_line_composes():
    overrides, flags = split_argv(
        ["--algo", "sac", "--task", "g1_motion_tracking", "--sim", "mujoco", "algo.num_envs=4096",
         "training.trace_enabled=true"]
    )
    assert overrides[:3] == ["algo=sac", "task=g1_motion_tracking", "sim=mujoco"]
    cfg = compose_config(overrides)
    assert cfg.algo.num_envs == 4096 and cfg.training.trace_enabled is True
    spec = to_run_spec(cfg)
    assert spec.algo.num_envs == 4096 and spec.task_name == "g1_motion_tracking"


def test_run_spec_is_typed_pickles_and_rebuilds_from_its_raw_config():
    """The collector gets the typed task config as it is; play rebuilds the same objects from the stored raw config."""
    spec = to_run_spec(compose_config(["+task.robot.kp.left_knee_joint=120", "task.reset.noise.joint_pos=0.2"]))
    assert isinstance(spec.task_cfg, registry.config_class("g1_motion_tracking"))
    assert spec.task_cfg.robot.kp["left_knee_joint"] == 120.0 and spec.task_cfg.reset.noise.joint_pos == 0.2
    assert pickle.loads(pickle.dumps(spec.task_cfg)) == spec.task_cfg
    again = RunSpec.from_raw(yaml.safe_load(yaml.safe_dump(spec.raw)))  # as config.yaml / the checkpoint store it
    for part in ("algo", "task_cfg", "sim", "training"):
        assert getattr(again, part) == getattr(spec, part), part


def test_unknown_override_key_is_named():
    with pytest.raises(ConfigError, match="nope"):
        compose_config(["algo.nope=1"])
    with pytest.raises(ConfigError, match="unknown key algo.nope"):
        to_run_spec(compose_config(["+algo.nope=1"]))


def test_unknown_task_is_named():
    with pytest.raises(ConfigError,
                       match="unknown task 'no_such_task'; available: g1_locomotion, g1_motion_tracking, pendulum"):
        compose_config(["task=no_such_task"])


def test_bad_value_is_named():
    with pytest.raises(ConfigError, match="num_envs"):
        to_run_spec(compose_config(["algo.num_envs=0"]))
    with pytest.raises(ConfigError, match="backend"):
        to_run_spec(compose_config(["sim.backend=bullet"]))


def test_bools_take_only_true_or_false():
    assert to_run_spec(compose_config(["task=pendulum", "training.save_replay=true"])).training.save_replay is True
    for spelling in ("no", "yes", "off", "0", "1", "maybe"):
        with pytest.raises(ConfigError, match=f"training.save_replay: '{spelling}' \\(expected true or false\\)"):
            to_run_spec(compose_config(["task=pendulum", f"training.save_replay={spelling}"]))


@pytest.mark.parametrize("kind, override, key, value", [
    ("bool", "training.save_replay=no", "training.save_replay", "'no'"),
    ("int", "training.save_interval=abc", "training.save_interval", "'abc'"),
    ("int", "training.seed=abc", "training.seed", "'abc'"),
    ("float", "algo.gamma=abc", "algo.gamma", "'abc'"),
    ("list", "algo.actor_hidden_dims=abc", "algo.actor_hidden_dims", "'abc'"),
    ("path", "training.resume={tmp}/no_such_run", "training.resume", "{tmp}/no_such_run"),
    ("path", "task.model_path={tmp}/no_such.xml", "task.model_path", "{tmp}/no_such.xml"),
])
def test_a_refused_value_exits_2_naming_it_and_leaves_no_run_dir(tmp_path, kind, override, key, value):
    logs = tmp_path / "logs"
    t0 = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "unilab.cli.train", "--task", "pendulum", f"training.log_root={logs}",
         override.format(tmp=tmp_path)],
        capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 2, out.stderr
    assert time.monotonic() - t0 < 15
    err = out.stderr.strip()
    assert err.startswith("train: error:") and len(err.splitlines()) == 1, err
    assert key in err and value.format(tmp=tmp_path) in err and "expected" in err, err
    assert not logs.exists()


@pytest.mark.parametrize("argv", [["--bogus"], ["--task"], ["stray"]])
def test_bad_command_lines(argv, capsys):
    assert train_cli.main(argv) == 2
    assert "train: error:" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["algo.num_envs=abc", "algo.num_envs=16"], ["algo.num_envs=16", "algo.num_envs=abc"]])
def test_a_key_given_twice_is_refused_quoting_the_bad_value(argv):
    with pytest.raises(ConfigError, match="invalid value for algo.num_envs: 'abc'"):
        compose_config(argv)


@pytest.mark.parametrize("flag", ["--task", "--algo", "--sim"])
def test_a_flag_whose_value_is_missing_does_not_take_the_next_override(flag, capsys):
    assert train_cli.main([flag, "algo.num_envs=16"]) == 2
    assert f"option {flag} needs a value" in capsys.readouterr().err


def _leaf_keys(node, prefix: str) -> list[str]:
    """Every leaf key of a composed group: nested config dataclasses are walked, other values are leaves."""
    keys = []
    for key in node:
        if dataclasses.is_dataclass(OmegaConf.get_type(node, key)):
            keys += _leaf_keys(node[key], f"{prefix}.{key}")
        else:
            keys.append(f"{prefix}.{key}")
    return keys


@pytest.mark.parametrize("task", ["pendulum", "g1_motion_tracking", "g1_locomotion", "t1_locomotion"])
def test_help_documents_every_key_of_every_group(task, capsys):
    assert train_cli.main(["--task", task, "--help"]) == 0
    lines = capsys.readouterr().out.splitlines()
    documented = {}
    for line, nxt in zip(lines, lines[1:] + [""]):
        if line.startswith("  ") and " = " in line and not line.startswith("   "):
            key = line.strip().split(" = ", 1)[0]
            documented[key] = nxt.strip() if nxt.startswith("      ") else ""
    cfg = compose_config([f"task={task}"])
    leaves = [k for group in SCHEMAS for k in _leaf_keys(cfg[group], group)]
    assert len(leaves) > 60
    missing = [k for k in leaves if not documented.get(k)]
    assert not missing, f"undocumented in --help: {missing}"
    if task == "g1_motion_tracking":
        assert "  task.reset.noise.root_lin_vel = [0.5, 0.5, 0.2]" in lines
        assert "task.rewards.body_pos.sigma" in documented and "task.robot.kp" in documented
    if task.endswith("_locomotion"):  # a term of its own subclass still says what it measures
        assert documented["task.rewards.pose.weight"].startswith("Sum over joints of weight x (q - default)^2:")
    if task == "t1_locomotion":  # the preset's values are the ones shown
        assert "  task.robot.base_body = Trunk" in lines and "  task.obs_scales.joint_vel = 0.1" in lines


def test_help_says_which_recipe_its_values_are(capsys):
    assert train_cli.main(["--task", "pendulum", "--algo", "sac_cpu", "algo.gamma=0.9", "--help"]) == 0
    out = capsys.readouterr().out
    assert "Values below: recipe sac_cpu (--algo sac_cpu), with the overrides given." in out
    assert "  algo.gamma = 0.9" in out


def test_help_imports_no_torch():
    code = (
        "import sys, contextlib, io\n"
        "from unilab.cli import train\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    assert train.main(['--task', 'g1_motion_tracking', '--help']) == 0\n"
        "assert 'task.reset.noise.root_pos' in out.getvalue()\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'mujoco')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_play_defaults_are_declared_once():
    assert vars(play_cli.build_parser().parse_args(["run"])) == {
        "checkpoint": "run", "overrides": [], "num_envs": PlayConfig.num_envs, "steps": PlayConfig.steps,
        "out": PlayConfig.out,
        "no_video": not PlayConfig.video, "device": PlayConfig.device, "seed": PlayConfig.seed,
        "width": PlayConfig.width, "height": PlayConfig.height,
        "ghost": PlayConfig.ghost, "no_text": not PlayConfig.text, "onnx": None,
    }
    training = TrainingConfig()
    assert (training.play_num_envs, training.play_steps) == (PlayConfig.num_envs, PlayConfig.steps)


def test_every_config_field_has_a_doc():
    seen = set()
    todo = [SACConfig, SimConfig, TrainingConfig, PlayConfig] + [registry.config_class(n) for n in registry.TASKS]
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.add(cls)
        docs = field_docs(cls)
        assert not [f.name for f in dataclasses.fields(cls) if not docs.get(f.name)], cls.__name__
        todo += [t for t in typing.get_type_hints(cls).values() if dataclasses.is_dataclass(t)]
    assert len(seen) > 8  # the nested configs of the motion-tracking task were walked


@pytest.mark.parametrize("override, key, value", [
    ("training.collector_timeout_s=0", "training.collector_timeout_s", "0.0"),
    ("training.startup_timeout_s=-1", "training.startup_timeout_s", "-1.0"),
    ("training.startup_timeout_s=inf", "training.startup_timeout_s", "inf"),
    ("training.time_limit_s=0", "training.time_limit_s", "0.0"),
    ("training.time_limit_s=nan", "training.time_limit_s", "nan"),
    ("training.time_limit_s=inf", "training.time_limit_s", "inf"),
    ("training.max_bad_env_fraction=1.5", "training.max_bad_env_fraction", "1.5"),
    ("training.warn_bad_env_fraction=-0.1", "training.warn_bad_env_fraction", "-0.1"),
    ("training.warn_bad_env_fraction=nan", "training.warn_bad_env_fraction", "nan"),
    ("training.divergence_window=0", "training.divergence_window", "0"),
    ("training.eval_interval=10", "training.eval_interval=10", "pendulum"),
    ("algo.device=gpu", "algo.device", "'gpu'"),
    ("algo.early_lr=0", "algo.early_lr", "0.0"),
    ("algo.early_lr_env_steps=-1", "algo.early_lr_env_steps", "-1"),
    ("training.experiment_name=/tmp/elsewhere", "training.experiment_name", "'/tmp/elsewhere'"),
    ("training.experiment_name=a/../../b", "training.experiment_name", "'a/../../b'"),
    ("algo.bc_weight=-0.1", "algo.bc_weight", "-0.1"),
])
def test_out_of_range_training_values_are_refused_naming_key_and_value(override, key, value):
    with pytest.raises(ConfigError) as err:
        to_run_spec(compose_config(["task=pendulum", override]))
    assert key in str(err.value) and value in str(err.value), err.value


@pytest.mark.parametrize("override", ["training.time_limit_s=null", "training.time_limit_s=30",
                                      "training.max_bad_env_fraction=null", "training.max_bad_env_fraction=0",
                                      "training.warn_bad_env_fraction=1", "training.divergence_window=1",
                                      "algo.device=cpu", "algo.device=auto", "algo.early_lr=null",
                                      "algo.early_lr_env_steps=0", "training.experiment_name=sweeps/lr_1e-3"])
def test_values_at_the_edges_of_their_ranges_are_taken(override):
    to_run_spec(compose_config(["task=pendulum", override]))


def test_a_cuda_device_this_machine_lacks_is_refused():
    from unilab.cli.config import check_device

    with pytest.raises(ConfigError, match=r"algo.device=cuda: no CUDA device"):
        check_device("cuda", count=0)
    with pytest.raises(ConfigError, match=r"algo.device=cuda:1: this machine has 1 CUDA device\(s\), cuda:0 to cuda:0"):
        check_device("cuda:1", count=1)
    check_device("cuda:0", count=1)
    check_device("cpu", count=0)


def test_a_missing_cuda_device_exits_2_before_anything_starts(tmp_path):
    from unilab.cli.config import cuda_available

    if cuda_available():
        pytest.skip("this machine has a CUDA device")
    logs = tmp_path / "logs"
    out = subprocess.run([sys.executable, "-m", "unilab.cli.train", "--task", "pendulum", f"training.log_root={logs}",
                          "algo.device=cuda"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().splitlines() == [
        "train: error: algo.device=cuda: no CUDA device is available here (use algo.device=cpu or auto)"]
    assert not logs.exists()


@pytest.mark.parametrize("path", ["{tmp}/my run (2)", "{tmp}/it's", "{tmp}/a\"b'c("])
def test_an_unquoted_resume_path_gets_a_quoting_hint_that_works(tmp_path, path):
    """Hydra's grammar refuses a space + parenthesis or a quote unquoted; the hint's spelling is taken as it is."""
    import shlex

    path = path.format(tmp=tmp_path)
    with pytest.raises(ConfigError, match="in training.resume= put the path in quotes, e.g. ") as err:
        compose_config(["task=pendulum", f"training.resume={path}"])
    suggested = shlex.split(str(err.value).rsplit("e.g. ", 1)[1])
    assert len(suggested) == 1
    assert compose_config(["task=pendulum", suggested[0]]).training.resume == path


def test_ctrl_c_before_training_is_one_line_and_exit_130(monkeypatch, capsys):
    def interrupted(_argv):
        raise KeyboardInterrupt

    monkeypatch.setattr(train_cli, "_main", interrupted)
    assert train_cli.main(["--task", "pendulum"]) == 130
    assert capsys.readouterr().err.strip() == "train: interrupted before training started"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_stop_signal_before_training_is_one_line_naming_it_and_exit_128_plus_it(monkeypatch, capsys, sig):
    def stopped(_argv):
        raise StopRequested(sig)

    monkeypatch.setattr(train_cli, "_main", stopped)
    assert train_cli.main(["--task", "pendulum"]) == 128 + sig
    assert capsys.readouterr().err.strip() == f"train: {signal.Signals(sig).name}: interrupted before training started"

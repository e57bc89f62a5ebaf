"""The train CLI's config: Hydra composition, typed validation, --help."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from unilab.algo.sac.config import SACConfig
from unilab.cli import train as train_cli
from unilab.cli.config import ConfigError, compose_config, field_docs, split_argv, to_run_spec
from unilab.runtime.config import SimConfig, TrainingConfig
from unilab.tasks.pendulum.config import PendulumConfig

CONFIG = Path(__file__).resolve().parents[1] / "src" / "unilab" / "config"


@pytest.mark.parametrize(
    "yaml_path,cls",
    [
        ("algo/sac.yaml", SACConfig),
        ("sim/mujoco.yaml", SimConfig),
        ("training/default.yaml", TrainingConfig),
        ("task/pendulum.yaml", PendulumConfig),
    ],
)
def test_yaml_mirrors_its_dataclass(yaml_path, cls):
    data = yaml.safe_load((CONFIG / yaml_path).read_text())
    fields = {f.name: f for f in dataclasses.fields(cls)}
    assert set(data) == set(fields)
    defaults = dataclasses.asdict(cls())
    for key, value in data.items():
        assert value == defaults[key], key


def test_upstream_command_line_composes():
    overrides, flags = split_argv(
        ["--algo", "sac", "--task", "g1_motion_tracking", "--sim", "mujoco", "algo.num_envs=4096", "training.trace_enabled=true"]
    )
    assert overrides[:3] == ["algo=sac", "task=g1_motion_tracking", "sim=mujoco"]
    cfg = compose_config(overrides)
    assert cfg.algo.num_envs == 4096 and cfg.training.trace_enabled is True
    spec = to_run_spec(cfg)
    assert spec.algo.num_envs == 4096 and spec.task_name == "g1_motion_tracking"


def test_unknown_override_key_is_named():
    with pytest.raises(ConfigError, match="nope"):
        compose_config(["algo.nope=1"])


def test_unknown_task_is_named():
    with pytest.raises(ConfigError, match="no_such_task"):
        compose_config(["task=no_such_task"])


def test_bad_value_is_named():
    with pytest.raises(ConfigError, match="num_envs"):
        to_run_spec(compose_config(["algo.num_envs=0"]))
    with pytest.raises(ConfigError, match="backend"):
        to_run_spec(compose_config(["sim.backend=bullet"]))


@pytest.mark.parametrize("argv", [["--bogus"], ["--task"], ["stray"]])
def test_bad_command_lines(argv, capsys):
    assert train_cli.main(argv) == 2
    assert "train: error:" in capsys.readouterr().err


def test_help_explains_every_knob(capsys):
    assert train_cli.main(["--task", "pendulum", "--help"]) == 0
    out = capsys.readouterr().out
    for group, cls in (("algo", SACConfig), ("sim", SimConfig), ("training", TrainingConfig), ("task", PendulumConfig)):
        for f in dataclasses.fields(cls):
            assert f"{group}.{f.name} = " in out, f"{group}.{f.name}"
    for cls in (SimConfig, TrainingConfig, PendulumConfig):
        docs = field_docs(cls)
        undocumented = [f.name for f in dataclasses.fields(cls) if f.name not in docs and f.name != "name"]
        assert not undocumented, f"{cls.__name__}: {undocumented}"
    assert field_docs(TrainingConfig)["save_interval"] in out

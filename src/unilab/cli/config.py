"""Hydra composition of the train/play config and its validation into typed dataclasses.

The YAML groups under ``unilab/config`` are the data; the dataclasses
(SACConfig, the task's config, SimConfig, TrainingConfig) are the schema. An
unknown key, in a YAML file or an override, is an error that names it.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import textwrap
from collections.abc import Sequence
from typing import Any

from hydra import compose, initialize_config_module
from hydra.errors import HydraException
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from unilab.algo.sac.config import SACConfig
from unilab.dataclass_config import build_dataclass
from unilab.runtime.config import SimConfig, TrainingConfig
from unilab.runtime.trainer import RunSpec
from unilab.tasks import registry

GROUP_FLAGS = ("algo", "task", "sim")


class ConfigError(ValueError):
    """A bad command line or config value, explained for the user."""


def split_argv(argv: Sequence[str]) -> tuple[list[str], dict[str, bool]]:
    """Turn ``--algo sac --task X key=value ...`` into Hydra overrides plus flags."""
    overrides: list[str] = []
    flags = {"help": False, "cfg": False}
    it = iter(argv)
    for tok in it:
        if tok in ("-h", "--help"):
            flags["help"] = True
        elif tok == "--cfg":
            flags["cfg"] = True
        elif tok.startswith("--"):
            name, eq, value = tok[2:].partition("=")
            if name not in GROUP_FLAGS:
                raise ConfigError(
                    f"unknown option {tok!r}; options are --algo, --task, --sim, --cfg, --help, "
                    "and key=value overrides such as algo.num_envs=4096"
                )
            if not eq:
                value = next(it, None)
                if value is None or value.startswith("-"):
                    raise ConfigError(f"option --{name} needs a value, e.g. --{name} {_example(name)}")
            overrides.append(f"{name}={value}")
        elif "=" in tok:
            overrides.append(tok)
        else:
            raise ConfigError(f"unexpected argument {tok!r}: overrides look like key=value (e.g. algo.num_envs=4096)")
    return overrides, flags


def explicit_algo_keys(overrides: Sequence[str]) -> tuple[str, ...] | None:
    """The ``algo.<key>`` names set by overrides; None when an algo preset was chosen (``--algo``).

    A resumed run takes every other algo key from its checkpoint.
    """
    keys = []
    for ov in overrides:
        name = ov.split("=", 1)[0].lstrip("+~")
        if name == "algo":
            return None
        if name.startswith("algo."):
            keys.append(name[len("algo."):].split(".", 1)[0])
    return tuple(keys)


def _example(group: str) -> str:
    return {"algo": "sac", "task": "g1_motion_tracking", "sim": "mujoco"}[group]


def compose_config(overrides: Sequence[str], config_name: str = "train") -> Any:
    """Compose ``unilab/config/<config_name>.yaml`` with Hydra overrides."""
    try:
        with initialize_config_module(config_module="unilab.config", version_base="1.3"):
            return compose(config_name=config_name, overrides=list(overrides))
    except (HydraException, OmegaConfBaseException) as err:
        raise ConfigError(f"bad config override: {err}") from None


def to_run_spec(cfg: Any) -> RunSpec:
    """Validate a composed config into typed configs (errors name the key)."""
    raw = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(raw, dict)
    try:
        algo = SACConfig.from_mapping(raw["algo"])
        task = dict(raw["task"])
        name = task.get("name")
        if not name:
            raise ValueError("the task config has no 'name'")
        registry.task_config(name, task)  # validates early, in this process
        sim = build_dataclass(SimConfig, raw["sim"], "sim")
        sim.pool_kwargs()
        training = build_dataclass(TrainingConfig, raw["training"], "training")
    except (ValueError, TypeError) as err:
        raise ConfigError(str(err)) from None
    return RunSpec(algo=algo, task_name=name, task_cfg=task, sim=sim, training=training, raw=raw)


def group_options(group: str) -> list[str]:
    """The YAML files of a config group (the values --algo/--task/--sim accept)."""
    from importlib import resources  # noqa: PLC0415

    folder = resources.files("unilab.config") / group
    return sorted(p.name[: -len(".yaml")] for p in folder.iterdir() if p.name.endswith(".yaml"))


def field_docs(cls: type) -> dict[str, str]:
    """The attribute docstrings (a string right after a field) of a dataclass."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError):
            continue
        body = tree.body[0].body  # type: ignore[attr-defined]
        for node, nxt in zip(body, body[1:]):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(nxt, ast.Expr)
                and isinstance(nxt.value, ast.Constant)
                and isinstance(nxt.value.value, str)
            ):
                docs[node.target.id] = " ".join(nxt.value.value.split())
    return docs


def help_text(cfg: Any, prog: str = "train") -> str:
    """``--help``: usage, then every knob of every group with value and meaning."""
    raw = OmegaConf.to_container(cfg, resolve=True)
    task_name = raw["task"].get("name", "?")
    try:
        task_cls = registry.TASKS[task_name]()[0]
    except KeyError:
        task_cls = None
    schemas = {"algo": SACConfig, "task": task_cls, "sim": SimConfig, "training": TrainingConfig}
    lines = [
        f"usage: {prog} [--algo sac] [--task NAME] [--sim mujoco] [--cfg] [--help] [key=value ...]",
        "",
        "Trains a FastSAC policy: a collector process steps the task's MuJoCo envs on the CPU",
        "while the learner (GPU if available) trains on the replay buffer.",
        "",
        f"  --algo NAME   algorithm group (available: {', '.join(group_options('algo'))})",
        f"  --task NAME   task group (available: {', '.join(group_options('task'))})",
        f"  --sim NAME    physics backend group (available: {', '.join(group_options('sim'))})",
        "  --cfg         print the composed config and exit",
        "  key=value     override any key below, e.g. algo.num_envs=4096 training.trace_enabled=true",
        "",
    ]
    for group, schema in schemas.items():
        docs = field_docs(schema) if schema is not None else {}
        lines.append(f"{group}:")
        for key, value in raw[group].items():
            doc = docs.get(key, "")
            val = OmegaConf.to_yaml({key: value}).strip().split(": ", 1)[-1] if not isinstance(value, (list, dict)) else str(value)
            lines.append(f"  {group}.{key} = {val}" + (f"\n      {doc}" if doc else ""))
        lines.append("")
    return "\n".join(lines)

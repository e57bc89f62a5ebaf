"""Hydra composition of the train/play config and its validation into typed dataclasses.

The dataclasses (SACConfig, the task's config, SimConfig, TrainingConfig) are the single source of every key, type,
default and meaning, registered with Hydra's ConfigStore as structured configs; the YAML files under ``unilab/config``
are presets that name one and list only what they change. OmegaConf type-checks every override and refuses unknown
keys; ``RunSpec.from_raw`` then runs each config's range checks before anything starts. Every error is a ConfigError
naming the key, the refused value and what is allowed.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import inspect
import sys
import textwrap
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from unilab.algo.sac.config import SACConfig
from unilab.dataclass_config import NO_VALUE, describe_config_error
from unilab.runtime.config import RunSpec, SimConfig, TrainingConfig
from unilab.tasks import registry

GROUP_FLAGS = ("algo", "task", "sim")
GROUPS = (*GROUP_FLAGS, "training")


class ConfigError(ValueError):
    """A bad command line or config value, explained for the user."""


def register_schemas() -> None:
    """Store the config dataclasses in Hydra's ConfigStore (the presets' ``defaults``)."""
    from hydra.core.config_store import ConfigStore  # lazy: hydra only to compose

    cs = ConfigStore.instance()
    cs.store(group="algo", name="base_sac", node=SACConfig)
    cs.store(group="sim", name="base_mujoco", node=SimConfig)
    cs.store(group="training", name="base_training", node=TrainingConfig)
    for name in registry.TASKS:
        cs.store(group="task", name=f"base_{name}", node=registry.task_defaults(name))


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
                raise ConfigError(f"unknown option {tok!r}; options are --algo, --task, --sim, --cfg, --help, "
                                  "and key=value overrides such as algo.num_envs=4096")
            if not eq:
                value = next(it, None)
                if value is None or value.startswith("-") or "=" in value:  # an override, not a name
                    example = {"algo": "sac", "task": registry.DEFAULT_TASK, "sim": "mujoco"}[name]
                    raise ConfigError(f"option --{name} needs a value, e.g. --{name} {example}")
            overrides.append(f"{name}={value}")
        elif "=" in tok:
            overrides.append(tok)
        else:
            raise ConfigError(f"unexpected argument {tok!r}: overrides look like key=value (e.g. algo.num_envs=4096)")
    return overrides, flags


def explicit_algo_keys(overrides: Sequence[str]) -> tuple[str, ...] | None:
    """The ``algo.<key>`` names overrides set (a resumed run takes the others from its checkpoint); None with --algo."""
    names = [ov.split("=", 1)[0].lstrip("+~") for ov in overrides]
    if "algo" in names:
        return None
    return tuple(name[len("algo."):].split(".", 1)[0] for name in names if name.startswith("algo."))


def choose_recipe(overrides: Sequence[str], cuda: bool | None = None) -> tuple[list[str], str]:
    """The overrides with the algo recipe made explicit, and a banner line saying which and why.

    A named ``--algo`` is kept; otherwise the task's GPU recipe (``registry.RECIPES``: ``sac`` / ``sac_cpu`` for motion
    tracking, ``sac_loco`` / ``sac_cpu_loco`` for locomotion) where a CUDA device exists (``cuda``; None:
    :func:`cuda_available`, which imports no torch), else its CPU-sized one. The user's own overrides still decide
    :func:`explicit_algo_keys`.
    """
    named = _override_value(overrides, "algo", None)
    if named is not None:
        return list(overrides), f"unilab: recipe {named} (--algo {named})"
    cuda = cuda_available() if cuda is None else cuda
    resumed = _override_value(overrides, "training.resume", "") not in ("", "null")
    tail = "; the resumed checkpoint's algo keys win" if resumed else ""
    gpu, cpu = registry.recipes(_override_value(overrides, "task", None))
    if cuda:
        return [f"algo={gpu}", *overrides], f"unilab: recipe {gpu} (CUDA device found{tail})"
    return [f"algo={cpu}", *overrides], (
        f"unilab: recipe {cpu} (no CUDA device; --algo {gpu} forces the GPU recipe{tail})")


def recipe_name(overrides: Sequence[str]) -> str | None:
    """The algo preset of :func:`choose_recipe`'s overrides."""
    return _override_value(overrides, "algo", None)


def cuda_available() -> bool:
    """Whether torch would find a CUDA device (see :func:`cuda_device_count`)."""
    return cuda_device_count() > 0


def cuda_device_count() -> int:
    """How many CUDA devices torch would find, without importing torch (seconds that ``--help``, ``--cfg`` and a config
    error must not pay) where possible: a torch built without CUDA (``torch/version.py``) or no NVIDIA driver library
    means 0, else the driver's ``cuDeviceGetCount`` (which honours ``CUDA_VISIBLE_DEVICES`` as torch does); a ROCm
    build, whose driver is not NVIDIA's, asks torch itself."""
    import ctypes  # only when the recipe is chosen

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return 0
    build: dict[str, Any] = {}
    try:
        tree = ast.parse((Path(spec.submodule_search_locations[0]) / "version.py").read_text())
        for node in tree.body:
            target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
            if isinstance(target, ast.Name) and isinstance(getattr(node, "value", None), ast.Constant):
                build[target.id] = node.value.value  # type: ignore[union-attr]
    except (OSError, SyntaxError):
        build = {"cuda": "unknown"}
    if build.get("hip"):
        import torch  # ROCm: no cheap probe

        return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0
    if not build.get("cuda") or sys.platform == "darwin":
        return 0
    try:
        lib = ctypes.CDLL("nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1")
        count = ctypes.c_int(0)
        found = lib.cuInit(0) == 0 and lib.cuDeviceGetCount(ctypes.byref(count)) == 0
        return max(0, count.value) if found else 0
    except (OSError, AttributeError):
        return 0


def check_device(device: str, count: int | None = None) -> None:
    """A cuda ``algo.device`` names a device this machine has (ConfigError otherwise), checked before anything starts
    rather than after the collector's env is up; ``count``: the CUDA devices (None: :func:`cuda_device_count`)."""
    if not device.startswith("cuda"):
        return
    count = cuda_device_count() if count is None else count
    index = int(device.partition(":")[2] or 0)
    if count == 0:
        raise ConfigError(f"algo.device={device}: no CUDA device is available here (use algo.device=cpu or auto)")
    if index >= count:
        raise ConfigError(f"algo.device={device}: this machine has {count} CUDA device(s), cuda:0 to "
                          f"cuda:{count - 1}")


def compose_config(overrides: Sequence[str], config_name: str = "train") -> Any:
    """Compose ``unilab/config/<config_name>.yaml`` with Hydra overrides (types checked, bools strict)."""
    from hydra import compose, initialize_config_module  # lazy: hydra only to compose
    from hydra.errors import HydraException, MissingConfigException  # lazy: hydra only to compose
    from omegaconf.errors import OmegaConfBaseException  # lazy: hydra only to compose

    register_schemas()
    try:
        with initialize_config_module(config_module="unilab.config", version_base="1.3"):
            cfg = compose(config_name=config_name, overrides=list(overrides))
    except MissingConfigException as err:
        group = next((g for g in GROUPS if f"'{g}/" in str(err)), None)
        if group is None:
            raise ConfigError(f"bad config override: {err}") from None
        bad = _override_value(overrides, group, "?")
        raise ConfigError(f"unknown {group} {bad!r}; available: {', '.join(group_options(group))}") from None
    except (HydraException, OmegaConfBaseException) as err:
        cause = err.__cause__ if isinstance(err.__cause__, OmegaConfBaseException) else err
        if isinstance(cause, OmegaConfBaseException) and (getattr(cause, "object_type", None) not in (None, dict, list)
                                                          or "Value '" in str(cause)):
            key = str(getattr(cause, "full_key", ""))
            # Hydra names the override it failed on: the first bad one of a key given twice, not the last
            failed = str(err).removeprefix("Error merging override ")
            given = [failed] if failed != str(err) else overrides
            raise ConfigError(describe_config_error(cause, value=_override_value(given, key))) from None
        raise ConfigError(f"bad config override: {' '.join(str(err).split())}{_quoting_hint(overrides)}") from None
    _check_bool_overrides(cfg, overrides)
    return cfg


def _quoting_hint(overrides: Sequence[str]) -> str:
    """For the first override Hydra's grammar refuses (a path with a space, quote or parenthesis such as
    ``training.resume=/runs/my run (2)``): how to write its value quoted (empty if none)."""
    import shlex  # only on this error path

    from hydra.core.override_parser.overrides_parser import OverridesParser  # lazy: hydra
    from hydra.errors import HydraException  # lazy: hydra only to compose

    parser = OverridesParser.create()
    for ov in overrides:
        try:
            parser.parse_overrides([ov])
        except HydraException:
            key, eq, value = ov.partition("=")
            if not eq:
                return ""
            if key != key.rstrip() or value != value.lstrip():  # 'algo.num_envs = 4', one shell word
                fixed = f"{key.strip()}={value.strip()}"
                if _parses(parser, fixed):
                    return f"; an override has no spaces around '=': write {shlex.quote(fixed)}"
                key, value = key.strip(), value.strip()
            quoted = f"'{value}'" if '"' in value and "'" not in value else '"' + value.replace('"', '\\"') + '"'
            what = "the path" if key.lstrip("+~") == "training.resume" else "the value"
            return f"; in {key}= put {what} in quotes, e.g. {shlex.quote(f'{key}={quoted}')}"
    return ""


def _parses(parser: Any, override: str) -> bool:
    """Whether Hydra's grammar takes ``override``."""
    from hydra.errors import HydraException  # lazy: hydra only to compose

    try:
        parser.parse_overrides([override])
    except HydraException:
        return False
    return True


def _override_value(overrides: Sequence[str], key: str, default: Any = NO_VALUE) -> Any:
    """The text the last override of ``key`` gave it (the one Hydra takes), else ``default``."""
    for ov in reversed(overrides):
        name, eq, value = ov.partition("=")
        if eq and name.lstrip("+~") == key:
            return value
    return default


def _check_bool_overrides(cfg: Any, overrides: Sequence[str]) -> None:
    """A bool key takes only true or false: OmegaConf alone would read ``no``, ``off`` or ``0`` as false."""
    from hydra.core.override_parser.overrides_parser import OverridesParser  # lazy: hydra only to compose
    from omegaconf import BooleanNode, OmegaConf  # lazy: hydra only to compose

    for ov in OverridesParser.create().parse_overrides(list(overrides)):
        if ov.is_delete() or "." not in ov.key_or_group:
            continue
        node = cfg
        for part in ov.key_or_group.split("."):
            node = node._get_node(part) if OmegaConf.is_dict(node) else None  # noqa: SLF001
            if node is None:
                break
        value = ov.value()
        if isinstance(node, BooleanNode) and not (isinstance(value, bool) or value is None and node._is_optional()):  # noqa: SLF001
            raise ConfigError(f"invalid value for {ov.key_or_group}: {ov.get_value_element_as_str()!r} "
                              "(expected true or false)")


def to_run_spec(cfg: Any, explicit_algo_keys: tuple[str, ...] | None = None, check_paths: bool = True) -> RunSpec:
    """Validate a composed config into typed configs (errors name the key); ``check_paths``: also require the files
    the run reads and a cuda ``algo.device`` to exist, before any process starts or run directory is made."""
    try:
        spec = RunSpec.from_raw(cfg, explicit_algo_keys)
        if check_paths:
            spec.check_paths()
            check_device(spec.algo.device)
    except (ValueError, TypeError) as err:
        raise ConfigError(str(err)) from None
    return spec


def group_options(group: str) -> list[str]:
    """The YAML files of a config group (the values --algo/--task/--sim accept)."""
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
            if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(nxt, ast.Expr)
                    and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str)):
                docs[node.target.id] = " ".join(nxt.value.value.split())
    return docs


def help_text(cfg: Any, prog: str = "train", values_from: str = "") -> str:
    """``--help``: usage, then every key of every group with its value and meaning; ``values_from``:
    :func:`choose_recipe`'s banner, saying which recipe the values are."""
    lines = [
        f"usage: {prog} [--algo sac] [--task NAME] [--sim mujoco] [--cfg] [--help] [key=value ...]",
        "",
        "Trains a FastSAC policy: a collector process steps the task's MuJoCo envs on the CPU",
        "while the learner (GPU if available) trains on the replay buffer.",
        "",
        f"  --algo NAME   algorithm recipe (available: {', '.join(group_options('algo'))}); default: "
        f"the task's GPU recipe with a CUDA device, else its CPU one ({' / '.join(registry.DEFAULT_RECIPES)}; "
        + ", ".join(f"{t}: {g} / {c}" for t, (g, c) in registry.RECIPES.items()) + ")",
        f"  --task NAME   task group (available: {', '.join(group_options('task'))})",
        f"  --sim NAME    physics backend group (available: {', '.join(group_options('sim'))})",
        "  --cfg         print the composed config and exit",
        "  key=value     override any key below, e.g. algo.num_envs=4096 training.trace_enabled=true",
        "                (add a key to a name-keyed map with +, e.g. +task.robot.kp.left_knee_joint=120)",
        "",
    ]
    if values_from:
        lines += [f"Values below: {values_from.removeprefix('unilab: ')}, with the overrides given.", ""]
    for group in GROUPS:
        lines.append(f"{group}:")
        lines.extend(f"  {key} = {value}" + (f"\n      {doc}" if doc else "")
                     for key, value, doc in help_entries(cfg[group], group))
        lines.append("")
    return "\n".join(lines)


def help_entries(node: Any, prefix: str, prefix_doc: str = "") -> list[tuple[str, str, str]]:
    """``(dotted key, value as text, description)`` of every leaf under a structured config node, nested dataclasses
    walked; where several fields share one dataclass type or its subclasses (the reward terms), a leaf's description
    starts with its parent field's."""
    from omegaconf import OmegaConf  # lazy: hydra only to compose

    cls = OmegaConf.get_type(node)
    docs = field_docs(cls) if dataclasses.is_dataclass(cls) else {}
    types = [OmegaConf.get_type(node, k) for k in node]
    out = []
    for key, child_type in zip(node, types):
        doc = docs.get(key, "")
        if prefix_doc:
            doc = f"{prefix_doc} {doc[:1].lower()}{doc[1:]}" if doc else prefix_doc
        if dataclasses.is_dataclass(child_type) and OmegaConf.is_dict(node[key]):
            kin = sum(dataclasses.is_dataclass(t) and (issubclass(t, child_type) or issubclass(child_type, t))
                      for t in types)
            inherited = docs.get(key, "") if kin > 1 else ""
            inherited = inherited.rstrip(".") + ":" if inherited else ""
            out.extend(help_entries(node[key], f"{prefix}.{key}", inherited))
            continue
        value = node[key]
        text = (str(OmegaConf.to_container(value, resolve=True)) if OmegaConf.is_config(value)
                else OmegaConf.to_yaml({key: value}).strip().split(": ", 1)[-1])
        out.append((f"{prefix}.{key}", text, doc))
    return out

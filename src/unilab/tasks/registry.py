"""Task name -> env constructor; the runtime builds envs only through here."""

from __future__ import annotations

from collections.abc import Mapping
from importlib import import_module
from types import ModuleType
from typing import Any, NamedTuple

from unilab.dataclass_config import build_dataclass
from unilab.tasks.base import VecEnv


class Task(NamedTuple):
    """A registry row: where the task's code lives, its defaults and what kind of task it is."""

    package: str
    """``unilab.tasks.<package>``: its ``config`` module holds ``config``, its ``env`` module ``env``."""
    config: str
    env: str
    kind: str
    """What ``unilab-export`` and the benchmarks describe and which options ``unilab-eval`` reads: motion_tracking,
    locomotion or pendulum."""
    preset: str | None = None
    """A function of the config module returning the task's defaults (a robot and its recipe's values); None: the
    config class's own defaults."""
    evaluation: str | None = None
    """The package's module that measures a policy (``unilab-eval``, ``training.eval_interval``): ``evaluate``
    (tracking) or ``run`` (locomotion), and ``HEADLINE``, what training prints as (label, metric, format); or None."""


# the config imports without the env (no mujoco; the train CLI registers the defaults as the `task` group's structured
# config and validates with them), the env only when built (a pendulum should not import the G1 stack)
TASKS: dict[str, Task] = {
    "pendulum": Task("pendulum", "PendulumConfig", "PendulumEnv", "pendulum"),
    "g1_motion_tracking": Task("g1_motion_tracking", "MotionTrackingConfig", "MotionTrackingEnv", "motion_tracking",
                               evaluation="evaluation"),
    "g1_locomotion": Task("g1_locomotion", "LocomotionConfig", "LocomotionEnv", "locomotion", evaluation="evaluation"),
    "t1_locomotion": Task("g1_locomotion", "LocomotionConfig", "LocomotionEnv", "locomotion", "t1_locomotion",
                          "evaluation"),
}

DEFAULT_TASK = "g1_motion_tracking"
"""The task of a command that is told none (``train``, ``unilab-eval``, the benchmarks)."""

DEFAULT_RECIPES = ("sac", "sac_cpu")
"""The GPU and CPU algo presets (config/algo/) of a task without a row in :data:`RECIPES`."""

# a task whose published recipe differs from motion tracking's in learner numbers: its GPU and CPU algo presets,
# which plain `train --task NAME` picks
RECIPES: dict[str, tuple[str, str]] = {
    "g1_locomotion": ("sac_loco", "sac_cpu_loco"),
    "t1_locomotion": ("sac_t1_loco", "sac_cpu_loco"),
}


def recipes(name: str | None) -> tuple[str, str]:
    """The GPU and CPU algo presets of task ``name`` (None: :data:`DEFAULT_TASK`)."""
    return RECIPES.get(name or DEFAULT_TASK, DEFAULT_RECIPES)


def task_for_recipe(algo: str) -> str:
    """The first task of :data:`RECIPES` whose GPU or CPU recipe is ``algo``; :data:`DEFAULT_TASK` for any other."""
    return next((name for name, pair in RECIPES.items() if algo in pair), DEFAULT_TASK)


def _row(name: str) -> Task:
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; known tasks: {sorted(TASKS)}")
    return TASKS[name]


def kind(name: str) -> str:
    """The kind of task ``name`` (:attr:`Task.kind`; ValueError for an unknown task)."""
    return _row(name).kind


def evaluation(name: str) -> ModuleType:
    """The evaluation module of task ``name`` (:attr:`Task.evaluation`; the task must have one)."""
    return import_module(f"unilab.tasks.{TASKS[name].package}.{TASKS[name].evaluation}")


def tasks_of_kind(task_kind: str) -> tuple[str, ...]:
    """The task names of one kind, in registry order."""
    return tuple(name for name, row in TASKS.items() if row.kind == task_kind)


def config_class(name: str) -> type:
    """The config dataclass of task ``name`` (ValueError for an unknown task)."""
    row = _row(name)
    return getattr(import_module(f"unilab.tasks.{row.package}.config"), row.config)


def task_defaults(name: str) -> Any:
    """Task ``name``'s defaults as Hydra's ConfigStore and :func:`task_config` take them: its preset's config, else its
    config class (not instantiated: a class's validation may import the task's kernels, which ``--help`` must not)."""
    row = _row(name)
    if row.preset is None:
        return config_class(name)
    return getattr(import_module(f"unilab.tasks.{row.package}.config"), row.preset)()


def task_config(name: str, values: Mapping[str, Any]) -> Any:
    """The typed, validated config of task ``name`` from a plain mapping over its defaults (errors name the key): a
    joint-keyed map merges into the preset's own, never into another robot's."""
    return build_dataclass(task_defaults(name), values, "task")


def make_env(name: str, cfg: Any, num_envs: int, pool_kwargs: dict | None = None, seed: int = 0) -> VecEnv:
    """Build the env of task ``name`` with its typed config."""
    row = _row(name)
    env_class = getattr(import_module(f"unilab.tasks.{row.package}.env"), row.env)
    return env_class(cfg, num_envs, pool_kwargs=pool_kwargs, seed=seed)

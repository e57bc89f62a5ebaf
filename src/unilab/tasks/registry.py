"""Task name -> env constructor; the runtime builds envs only through here."""

from __future__ import annotations

from collections.abc import Mapping
from importlib import import_module
from typing import Any

from unilab.dataclass_config import build_dataclass
from unilab.tasks.base import VecEnv

# task name -> "module:class" of its config dataclass, importable without the env (no mujoco):
# the train CLI registers these as the `task` group's structured configs and validates with them
CONFIGS: dict[str, str] = {
    "pendulum": "unilab.tasks.pendulum.config:PendulumConfig",
    "g1_motion_tracking": "unilab.tasks.g1_motion_tracking.config:MotionTrackingConfig",
    "g1_locomotion": "unilab.tasks.g1_locomotion.config:LocomotionConfig",
}

# a task whose published recipe differs from motion tracking's (sac / sac_cpu) in learner numbers: its GPU and
# CPU algo presets (config/algo/), which plain `train --task NAME` picks
RECIPES: dict[str, tuple[str, str]] = {
    "g1_locomotion": ("sac_loco", "sac_cpu_loco"),
}

# tasks unilab-eval can measure (training.eval_interval runs it): the tracking metrics need a reference motion
EVALUATED_TASKS: tuple[str, ...] = ("g1_motion_tracking",)

# task name -> "module:class" of its env, imported only when built: a pendulum should not import the G1 stack
TASKS: dict[str, str] = {
    "pendulum": "unilab.tasks.pendulum.env:PendulumEnv",
    "g1_motion_tracking": "unilab.tasks.g1_motion_tracking.env:MotionTrackingEnv",
    "g1_locomotion": "unilab.tasks.g1_locomotion.env:LocomotionEnv",
}


def _load(path: str) -> Any:
    module, _, name = path.partition(":")
    return getattr(import_module(module), name)


def config_class(name: str) -> type:
    """The config dataclass of task ``name`` (ValueError for an unknown task)."""
    if name not in CONFIGS:
        raise ValueError(f"unknown task {name!r}; known tasks: {sorted(CONFIGS)}")
    return _load(CONFIGS[name])


def task_config(name: str, values: Mapping[str, Any]) -> Any:
    """The typed, validated config of task ``name`` from a plain mapping (errors name the key)."""
    return build_dataclass(config_class(name), values, "task")


def make_env(name: str, cfg: Any, num_envs: int, pool_kwargs: dict | None = None, seed: int = 0) -> VecEnv:
    """Build the env of task ``name`` with its typed config."""
    return _load(TASKS[name])(cfg, num_envs, pool_kwargs=pool_kwargs, seed=seed)

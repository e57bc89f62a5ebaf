"""Task name -> env constructor; the runtime builds envs only through here."""

from __future__ import annotations

from collections.abc import Mapping
from importlib import import_module
from typing import Any

from unilab.dataclass_config import build_dataclass
from unilab.tasks.base import VecEnv

# task name -> (config dataclass, env class) in unilab.tasks.<name>.config / .env: the config imports without the env
# (no mujoco; the train CLI registers it as the `task` group's structured config and validates with it), the env only
# when built (a pendulum should not import the G1 stack)
TASKS: dict[str, tuple[str, str]] = {
    "pendulum": ("PendulumConfig", "PendulumEnv"),
    "g1_motion_tracking": ("MotionTrackingConfig", "MotionTrackingEnv"),
    "g1_locomotion": ("LocomotionConfig", "LocomotionEnv"),
}

# a task whose published recipe differs from motion tracking's (sac / sac_cpu) in learner numbers: its GPU and
# CPU algo presets (config/algo/), which plain `train --task NAME` picks
RECIPES: dict[str, tuple[str, str]] = {
    "g1_locomotion": ("sac_loco", "sac_cpu_loco"),
}

# tasks unilab-eval can measure (training.eval_interval runs it): the tracking metrics need a reference motion
EVALUATED_TASKS: tuple[str, ...] = ("g1_motion_tracking",)


def config_class(name: str) -> type:
    """The config dataclass of task ``name`` (ValueError for an unknown task)."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; known tasks: {sorted(TASKS)}")
    return getattr(import_module(f"unilab.tasks.{name}.config"), TASKS[name][0])


def task_config(name: str, values: Mapping[str, Any]) -> Any:
    """The typed, validated config of task ``name`` from a plain mapping (errors name the key)."""
    return build_dataclass(config_class(name), values, "task")


def make_env(name: str, cfg: Any, num_envs: int, pool_kwargs: dict | None = None, seed: int = 0) -> VecEnv:
    """Build the env of task ``name`` with its typed config."""
    env_class = getattr(import_module(f"unilab.tasks.{name}.env"), TASKS[name][1])
    return env_class(cfg, num_envs, pool_kwargs=pool_kwargs, seed=seed)

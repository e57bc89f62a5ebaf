"""Task name -> env constructor; the runtime builds envs only through here."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from unilab.tasks.base import VecEnv


def _pendulum() -> tuple[type, Callable[..., VecEnv]]:
    from unilab.tasks.pendulum.config import PendulumConfig  # noqa: PLC0415
    from unilab.tasks.pendulum.env import PendulumEnv  # noqa: PLC0415

    return PendulumConfig, PendulumEnv


def _g1() -> tuple[type, Callable[..., VecEnv]]:
    from unilab.tasks.g1_motion_tracking.config import G1TaskConfig  # noqa: PLC0415
    from unilab.tasks.g1_motion_tracking.env import G1MotionTrackingEnv  # noqa: PLC0415

    return G1TaskConfig, G1MotionTrackingEnv


# imported lazily: building a pendulum should not import the G1 stack
TASKS: dict[str, Callable[[], tuple[type, Callable[..., VecEnv]]]] = {
    "pendulum": _pendulum,
    "g1_motion_tracking": _g1,
}


def task_config(name: str, values: Mapping[str, Any]) -> Any:
    """The typed config of task ``name`` from a plain mapping (unknown keys raise)."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; known tasks: {sorted(TASKS)}")
    cls, _ = TASKS[name]()
    if hasattr(cls, "from_dict"):  # a config with nested sections parses itself
        return cls.from_dict(dict(values))
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"unknown keys for task {name!r}: {unknown}; known: {sorted(known)}")
    return cls(**dict(values))


def make_env(name: str, cfg: Any, num_envs: int, pool_kwargs: dict | None = None, seed: int = 0) -> VecEnv:
    """Build the env of task ``name`` with its typed config."""
    _, ctor = TASKS[name]()
    return ctor(cfg, num_envs, pool_kwargs=pool_kwargs, seed=seed)

"""Task name -> env constructor; the runtime builds envs only through here."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from unilab.dataclass_config import build_dataclass
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
    if hasattr(cls, "from_dict"):  # a config that validates itself after parsing
        return cls.from_dict(dict(values))
    return build_dataclass(cls, values, f"task {name!r}")


def make_env(name: str, cfg: Any, num_envs: int, pool_kwargs: dict | None = None, seed: int = 0) -> VecEnv:
    """Build the env of task ``name`` with its typed config."""
    _, ctor = TASKS[name]()
    return ctor(cfg, num_envs, pool_kwargs=pool_kwargs, seed=seed)

"""FastSAC: off-policy soft actor-critic for massively parallel envs. The names below are imported on first use, so
that ``unilab.algo.sac.config`` (what ``train --help`` and config validation need) loads without torch."""

from importlib import import_module
from typing import Any

_HOME = {
    "Actor": "networks", "CriticEnsemble": "networks", "project_distribution": "networks",
    "FastSAC": "agent", "ReplayBuffer": "replay", "RunningNormalizer": "normalizer",
    "SACConfig": "config", "resolve_device": "device",
}


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f".{_HOME[name]}", __name__), name)


__all__ = sorted(_HOME)

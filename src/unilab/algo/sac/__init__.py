"""FastSAC: off-policy soft actor-critic for massively parallel envs."""

from .agent import FastSAC
from .config import SACConfig
from .device import resolve_device
from .networks import Actor, CriticEnsemble, project_distribution
from .normalizer import RunningNormalizer
from .replay import ReplayBuffer

__all__ = [
    "Actor",
    "CriticEnsemble",
    "FastSAC",
    "ReplayBuffer",
    "RunningNormalizer",
    "SACConfig",
    "project_distribution",
    "resolve_device",
]

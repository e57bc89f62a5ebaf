"""What every task's evaluation shares: its options and report, the env rebuilt from the checkpoint's stored config
(as ``play`` does) without observation noise and, unless asked for, domain randomization, the checkpoint's mean action
and baselines that need no training. A task's own measurement is the ``evaluation`` module of its registry row."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from unilab.dataclass_config import build_dataclass
from unilab.runtime.checkpoint import apply_task_overrides, load_agent, load_checkpoint, stored_run_config
from unilab.runtime.config import SimConfig
from unilab.tasks.registry import DEFAULT_TASK, make_env, task_config

POLICY_KINDS = ("checkpoint", "zero", "reference", "random")
"""``--policy`` choices: the checkpoint's mean action, or a baseline of :func:`baseline_policy`."""
BASELINE_KINDS = POLICY_KINDS[1:]
START_MODES = ("clip", "random")
"""``--starts`` choices: each clip from frame 0 to its end, or training's random starts with auto-reset."""
PolicyFn = Callable[[dict[str, np.ndarray]], np.ndarray]
"""Observations (``{"obs", "critic_obs"}`` as ``env.reset``/``env.step`` return them) -> actions in [-1, 1]."""


class PolicySource(Protocol):
    """A policy from outside a checkpoint (e.g. ``unilab.eval.holosoma.OnnxSource``): the file, the run config its
    env is built from, and its policy on a built env."""

    @property
    def path(self) -> Path: ...

    raw: dict[str, Any]

    def make_policy(self, env: Any) -> PolicyFn: ...

    def describe(self) -> dict[str, Any]: ...


@dataclass
class EvalOptions:
    """What ``unilab-eval`` rolls out (the one place of its defaults)."""

    clips: list[str] | None = None
    """Clip names (file stems) or indices into the task's clip list; null: every clip."""
    max_frames: int | None = None
    """Evaluate only the first this many frames of each clip (quick checks); null: whole clips."""
    randomization: bool = False
    """Keep the checkpoint's domain randomization (task.randomization); false: every term off."""
    envs_per_clip: int = 1
    """Envs rolled out per clip (more only differ with randomization on)."""
    device: str = "cpu"
    """torch device of the policy."""
    threads: int | None = None
    """Physics pool and torch threads; null: the pool's default sizing rule (min(envs, usable CPUs)), 1 torch thread."""
    seed: int = 0
    """Seed of the env (randomization draws)."""
    progress: bool = True
    """Show a progress bar on stderr."""
    policy: str = "checkpoint"
    """One of :data:`POLICY_KINDS`; a baseline needs no checkpoint (then the task config is the defaults)."""
    starts: str = "clip"
    """One of :data:`START_MODES`."""
    episodes: int = 256
    """Random starts: episodes to measure (spread evenly over the envs, see :func:`random_start_metrics`)."""
    num_envs: int = 128
    """Random starts: envs stepped together."""
    start_stride: int | None = None
    """Clip starts: also start envs at frames K, 2K, ... (K = this; below each clip's last frame), each following
    its clip to the end; a clip's metrics are then the means over its starts (success_rate: the fraction that
    reach the end). null: frame 0 only."""
    task_overrides: dict[str, Any] | None = None
    """Task config changes (dotted keys below ``task``), applied on top of the checkpoint's or the default config."""

    def __post_init__(self) -> None:
        # named as unilab-eval's flags: these options are its command line
        if self.policy not in POLICY_KINDS:
            raise ValueError(f"--policy must be one of {', '.join(POLICY_KINDS)}, got {self.policy!r}")
        if self.starts not in START_MODES:
            raise ValueError(f"--starts must be one of {', '.join(START_MODES)}, got {self.starts!r}")
        for name, low, none_ok in (("episodes", 1, False), ("num_envs", 1, False), ("envs_per_clip", 1, False),
                                   ("max_frames", 2, True), ("threads", 1, True), ("start_stride", 1, True)):
            v = getattr(self, name)
            if (v is None and not none_ok) or (v is not None and v < low):
                why = " (frame 0 is the start state)" if name == "max_frames" else ""
                raise ValueError(f"--{name.replace('_', '-')} must be >= {low}{why}, got {v}")


@dataclass
class EvalResult:
    """Per-clip and overall metrics of one evaluation, plus the per-frame errors behind them."""

    checkpoint: Path | None
    """None: a baseline policy evaluated on the default task config."""
    iteration: int | None
    task: str
    config: dict[str, Any]
    """The checkpoint's stored run config."""
    options: EvalOptions
    clip_names: list[str]
    clip_files: list[str]
    summary: dict[str, dict]
    """``{"overall": {metric: v}, "clips": {name: {metric: v, "frames": T}}}``; random starts: the
    :func:`random_start_metrics` keys in ``overall`` and no clips."""
    env_clip: np.ndarray
    """Clip index of each env."""
    env_start: np.ndarray
    """Start frame of each env (0 unless ``start_stride``); ``errors`` and ``first_failure`` count from it."""
    errors: dict[str, np.ndarray] = field(repr=False)
    """``{error name: (envs, frames)}`` per-frame errors (NaN past an env's clip end)."""
    first_failure: np.ndarray = field(repr=False)
    """Per env: the first frame a termination fired, -1 for none."""
    first_failure_term: list[str] = field(repr=False)
    control_dt: float = 0.02
    randomization_bins: dict[str, list[dict[str, float]]] | None = None
    """With randomization on: the metrics per bin of each randomized quantity (:func:`.robustness.by_bins`)."""
    source: dict[str, Any] | None = None
    """A policy from outside a checkpoint: what its source records (``PolicySource.describe``)."""

    def frame0_starts(self, c: int) -> tuple[np.ndarray, int | None]:
        """The envs of clip ``c`` that start at frame 0, and the first frame a termination fired on one (or None)."""
        rows = np.flatnonzero((self.env_clip == c) & (self.env_start == 0))
        failed = self.first_failure[rows][self.first_failure[rows] >= 0]
        return rows, int(failed.min()) if failed.size else None

    def to_json(self) -> dict[str, Any]:
        """The JSON report (metric keys as in :data:`unilab.eval.metrics.METRIC_NAMES`)."""
        clips = {}
        for c, name in enumerate(self.clip_names if self.options.starts == "clip" else ()):
            entry = dict(self.summary["clips"][name])
            rows, entry["first_failure_frame"] = self.frame0_starts(c)
            entry["first_failure_terms"] = sorted({self.first_failure_term[e] for e in rows
                                                   if self.first_failure[e] >= 0})
            if self.options.start_stride:
                rows = np.flatnonzero(self.env_clip == c)
                entry["start_frames"] = self.env_start[rows].tolist()
                entry["failure_frames"] = [int(self.env_start[e] + self.first_failure[e])
                                           if self.first_failure[e] >= 0 else None for e in rows]
            entry["file"] = self.clip_files[c]
            clips[name] = entry
        opts = self.options
        return {"checkpoint": None if self.checkpoint is None else str(self.checkpoint), "iteration": self.iteration,
                "task": self.task, "policy": opts.policy, "starts": opts.starts, "overall": self.summary["overall"],
                "clips": clips, "eval": dataclasses.asdict(opts), "control_dt": self.control_dt, "config": self.config,
                **({} if self.randomization_bins is None else {"randomization_bins": self.randomization_bins}),
                **({} if self.source is None else {"source": self.source})}


_NOT_NOISE = ("joint_pos_limit_factor",)
"""Numeric fields of the noise configs that bound the noisy values rather than scale the noise (kept)."""


def zero_numbers(cfg: Any) -> Any:
    """A copy of dataclass ``cfg`` whose numeric fields (and lists of numbers) are 0, but :data:`_NOT_NOISE`."""
    changes = {}
    for f in dataclasses.fields(cfg):
        if f.name in _NOT_NOISE:
            continue
        v = getattr(cfg, f.name)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            changes[f.name] = 0.0
        elif isinstance(v, (list, tuple)) and all(isinstance(x, (int, float)) for x in v):
            changes[f.name] = [0.0] * len(v)
    return dataclasses.replace(cfg, **changes)


def disable_randomization(cfg: Any) -> Any:
    """Turn off every ``enabled`` flag inside ``cfg.randomization`` (nested dataclasses); a copy."""
    if not dataclasses.is_dataclass(cfg):
        return cfg
    changes = {}
    for f in dataclasses.fields(cfg):
        v = getattr(cfg, f.name)
        if f.name == "enabled" and isinstance(v, bool):
            changes[f.name] = False
        elif dataclasses.is_dataclass(v):
            changes[f.name] = disable_randomization(v)
    return dataclasses.replace(cfg, **changes)


def without_noise(cfg: Any, randomization: bool, **changes: Any) -> Any:
    """``cfg`` for evaluation: observation noise off, domain randomization off unless kept, ``changes`` applied."""
    changes["obs_noise"] = zero_numbers(cfg.obs_noise)
    if not randomization:
        changes["randomization"] = disable_randomization(cfg.randomization)
    return dataclasses.replace(cfg, **changes)


def policy_config(checkpoint: str | Path | None, policy: str, overrides: dict[str, Any] | None,
                  source: PolicySource | None = None, task: str | None = None
                  ) -> tuple[dict[str, Any], Any, dict[str, Any] | None, Path | None]:
    """``(run config, its typed task config, checkpoint payload or None, policy file or None)`` of an evaluation:
    ``source``'s config, the checkpoint's with ``overrides``, or (a baseline policy) the defaults of ``task`` (None:
    the default task) with them; ValueError when ``task`` is given and the config is another task's."""
    cfg = None  # built below unless the checkpoint reader built it
    if source is not None:
        raw, payload, path = source.raw, None, source.path
    elif checkpoint is not None:
        payload, path = load_checkpoint(checkpoint)
        raw, cfg = stored_run_config(payload, path, overrides)
    elif policy == "checkpoint":
        raise ValueError("policy 'checkpoint' needs RUN_DIR_OR_CHECKPOINT (a baseline policy, e.g. "
                         "--policy zero, runs without one)")
    else:
        raw, payload, path = {"task": apply_task_overrides({"name": task or DEFAULT_TASK}, overrides)}, None, None
    name = raw["task"].get("name")
    if task is not None and name != task:
        raise ValueError(f"--task {task}: the policy's task is {name!r}")
    return raw, cfg if cfg is not None else task_config(name, raw["task"]), payload, path


@contextmanager
def eval_env(raw: dict[str, Any], payload: dict[str, Any] | None, policy: str, cfg: Any, num_envs: int,
             device: str, threads: int | None, seed: int,
             source: PolicySource | None = None,
             baseline: Callable[[Any, str, int], PolicyFn] | None = None,
             path: Path | None = None) -> Iterator[tuple[Any, PolicyFn]]:
    """The env of an evaluation (closed on exit) and its policy, ``source``'s, ``payload``'s mean action or baseline
    ``policy`` (of ``baseline``, default :func:`baseline_policy`); physics takes ``raw``'s ``sim`` settings, torch
    ``threads`` (default 1) threads; ``path``: the checkpoint file ``payload`` came from, for messages."""
    kw = build_dataclass(SimConfig, raw.get("sim", {}), "sim").pool_kwargs()
    kw["cpu_ids"] = None  # a few envs: the default sizing rule, no pinning
    kw["nthread"] = threads
    # a policy batch of a few rows gains nothing from more threads, and they would compete with physics
    torch.set_num_threads(threads or 1)
    agent = load_agent(payload, path, device=device) if policy == "checkpoint" and source is None else None
    env = make_env(raw["task"]["name"], cfg, num_envs, pool_kwargs=kw, seed=seed)
    try:
        if source is not None:
            yield env, source.make_policy(env)
        else:
            yield env, agent_policy(agent) if agent is not None else (baseline or baseline_policy)(env, policy, seed)
    finally:
        env.close()


def agent_policy(agent: Any) -> PolicyFn:
    """The deterministic (mean) action of a FastSAC ``agent`` (or anything with ``act(obs, deterministic)``)."""

    def act(obs: dict[str, np.ndarray]) -> np.ndarray:
        with torch.no_grad():
            return agent.act(torch.from_numpy(obs["obs"]), deterministic=True).cpu().numpy()

    return act


def baseline_policy(env: Any, kind: str, seed: int = 0) -> PolicyFn:
    """A policy of ``env`` that needs no training: ``zero``, action 0 (PD targets = the default pose, held); ``random``,
    uniform actions in [-1, 1] (seeded by ``seed``). A task's evaluation adds its own (tracking: ``reference``)."""
    shape = (env.num_envs, env.action_dim)
    if kind == "zero":
        zero = np.zeros(shape, dtype=np.float32)
        return lambda obs: zero
    if kind == "random":
        rng = np.random.default_rng(seed)
        return lambda obs: rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)
    raise ValueError(f"baseline policy must be one of {', '.join(BASELINE_KINDS)}, got {kind!r}")

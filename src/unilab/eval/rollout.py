"""Deterministic evaluation rollouts of a checkpoint on every clip of its motion-tracking task.

The env is rebuilt from the checkpoint's stored config (as ``play`` does) with
no observation noise and, unless asked for, no domain randomization. Every env
starts exactly at frame 0 of its clip (``MotionTrackingEnv.start_at``, no reset
noise) and follows the clip to its last frame with the policy's mean action;
auto-reset is off, so an env that fails keeps running and its failure stays
recorded. Metrics: :mod:`unilab.eval.metrics`.
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from unilab.algo.sac.agent import FastSAC
from unilab.dataclass_config import build_dataclass
from unilab.eval.metrics import ERROR_NAMES, TrackingAccumulator, frame_errors, summarize
from unilab.runtime.checkpoint import load_checkpoint
from unilab.runtime.config import SimConfig
from unilab.tasks.registry import make_env, task_config


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

    def __post_init__(self) -> None:
        if self.max_frames is not None and self.max_frames < 2:
            raise ValueError(f"max_frames must be >= 2 (frame 0 is the start state), got {self.max_frames}")
        if self.envs_per_clip < 1:
            raise ValueError(f"envs_per_clip must be >= 1, got {self.envs_per_clip}")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"threads must be >= 1 or null, got {self.threads}")


@dataclass
class EvalResult:
    """Per-clip and overall metrics of one evaluation, plus the per-frame errors behind them."""

    checkpoint: Path
    iteration: int
    task: str
    config: dict[str, Any]
    """The checkpoint's stored run config."""
    options: EvalOptions
    clip_names: list[str]
    clip_files: list[str]
    summary: dict[str, dict]
    """``{"overall": {metric: v}, "clips": {name: {metric: v, "frames": T}}}``."""
    env_clip: np.ndarray
    """Clip index of each env."""
    errors: dict[str, np.ndarray] = field(repr=False)
    """``{error name: (envs, frames)}`` per-frame errors (NaN past an env's clip end)."""
    first_failure: np.ndarray = field(repr=False)
    """Per env: the first frame a termination fired, -1 for none."""
    first_failure_term: list[str] = field(repr=False)
    control_dt: float = 0.02

    def to_json(self) -> dict[str, Any]:
        """The JSON report (metric keys as in :data:`unilab.eval.metrics.METRIC_NAMES`)."""
        clips = {}
        for c, name in enumerate(self.clip_names):
            entry = dict(self.summary["clips"][name])
            rows = np.flatnonzero(self.env_clip == c)
            failed = [int(self.first_failure[e]) for e in rows if self.first_failure[e] >= 0]
            entry["first_failure_frame"] = min(failed) if failed else None
            entry["first_failure_terms"] = sorted({self.first_failure_term[e] for e in rows
                                                   if self.first_failure[e] >= 0})
            entry["file"] = self.clip_files[c]
            clips[name] = entry
        return {
            "checkpoint": str(self.checkpoint),
            "iteration": self.iteration,
            "task": self.task,
            "overall": self.summary["overall"],
            "clips": clips,
            "eval": dataclasses.asdict(self.options),
            "control_dt": self.control_dt,
            "config": self.config,
        }


def clip_names(files: list[Path]) -> list[str]:
    """Unique display names of clip files: the file stem, with ``#i`` appended when stems repeat."""
    stems = [Path(f).stem for f in files]
    return [s if stems.count(s) == 1 else f"{s}#{i}" for i, s in enumerate(stems)]


def select_clips(files: list[Path], wanted: list[str] | None) -> list[int]:
    """Indices of the clips ``wanted`` names (or indices, as strings or ints); ValueError naming valid ones."""
    names = clip_names(files)
    if not wanted:
        return list(range(len(files)))
    out = []
    for w in wanted:
        w = str(w)
        if w in names:
            out.append(names.index(w))
        elif w.lstrip("-").isdigit() and -len(files) <= int(w) < len(files):
            out.append(int(w) % len(files))
        else:
            listing = ", ".join(f"{i}: {n}" for i, n in enumerate(names))
            raise ValueError(f"unknown clip {w!r}; the task's clips are (index: name) {listing}")
    return list(dict.fromkeys(out))


def _zero_numbers(cfg: Any) -> Any:
    """A copy of dataclass ``cfg`` whose numeric fields (and lists of numbers) are 0."""
    changes = {}
    for f in dataclasses.fields(cfg):
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


def eval_task_config(task_raw: dict[str, Any], randomization: bool) -> Any:
    """The checkpoint's task config for evaluation: no observation or reset noise, randomization off unless kept."""
    name = task_raw.get("name")
    cfg = task_config(name, task_raw)
    if not hasattr(cfg, "tracked_bodies"):
        raise ValueError(f"unilab-eval measures motion tracking; this checkpoint's task is {name!r}")
    changes: dict[str, Any] = {}
    if dataclasses.is_dataclass(getattr(cfg, "obs_noise", None)):
        changes["obs_noise"] = _zero_numbers(cfg.obs_noise)
    if dataclasses.is_dataclass(getattr(cfg, "reset", None)):
        changes["reset"] = dataclasses.replace(cfg.reset, noise=_zero_numbers(cfg.reset.noise))
    if not randomization and dataclasses.is_dataclass(getattr(cfg, "randomization", None)):
        changes["randomization"] = disable_randomization(cfg.randomization)
    return dataclasses.replace(cfg, **changes)


def evaluate(checkpoint: str | Path, options: EvalOptions | None = None, **changes: Any) -> EvalResult:
    """Roll out ``checkpoint`` (file or run dir) deterministically on every selected clip; see module docs."""
    opts = dataclasses.replace(options or EvalOptions(), **changes)
    payload, path = load_checkpoint(checkpoint)
    raw = payload.get("config")
    if not isinstance(raw, dict) or not isinstance(raw.get("task"), dict):
        raise ValueError(f"checkpoint {path} stores no task config")
    task_name = raw["task"].get("name")
    cfg = eval_task_config(raw["task"], opts.randomization)
    from unilab.tasks.g1_motion_tracking.env import task_motion_files  # noqa: PLC0415 - lazy: the G1 stack

    files = task_motion_files(cfg)
    chosen = select_clips(files, opts.clips)
    names = [clip_names(files)[i] for i in chosen]
    files = [files[i] for i in chosen]
    cfg = dataclasses.replace(cfg, motion_files=[str(f) for f in files])

    sim = build_dataclass(SimConfig, raw.get("sim", {}), "sim")
    kw = sim.pool_kwargs()
    kw["cpu_ids"] = None  # a few envs: the default sizing rule, no pinning
    kw["nthread"] = opts.threads
    # a policy batch of a few rows gains nothing from more threads, and they would compete with physics
    torch.set_num_threads(opts.threads or 1)
    agent = FastSAC.from_checkpoint(payload["agent"], device=opts.device)

    n_clips, k = len(files), opts.envs_per_clip
    env = make_env(task_name, cfg, n_clips * k, pool_kwargs=kw, seed=opts.seed)
    try:
        env.auto_reset = False
        env_clip = np.repeat(np.arange(n_clips, dtype=np.int64), k)
        clip_frames = env.motion.num_frames.copy()
        if opts.max_frames is not None:
            clip_frames = np.minimum(clip_frames, opts.max_frames)
        acc = TrackingAccumulator(clip_frames[env_clip])
        obs = env.start_at(env_clip, np.zeros_like(env_clip))
        acc.add(0, _errors(env), np.zeros(env.num_envs, dtype=bool))
        from tqdm import tqdm  # noqa: PLC0415 - lazy: only a rollout shows progress

        with tqdm(total=acc.num_frames - 1, desc=f"eval {path.name}", unit="step", file=sys.stderr,
                  disable=not opts.progress, leave=False) as bar:
            for t in range(1, acc.num_frames):
                with torch.no_grad():
                    action = agent.act(torch.from_numpy(obs["obs"]), deterministic=True).cpu().numpy()
                obs, _, terminated, _, info = env.step(action)
                acc.add(t, _errors(env), terminated, info.get("termination_terms"))
                bar.update(1)
        control_dt = float(env.control_dt)
    finally:
        env.close()
    summary = summarize(acc.per_env(), env_clip, names, clip_frames)
    return EvalResult(
        checkpoint=path, iteration=int(payload["iteration"]), task=task_name, config=raw, options=opts,
        clip_names=names, clip_files=[str(f) for f in files], summary=summary, env_clip=env_clip,
        errors={name: acc.errors[name] for name in ERROR_NAMES}, first_failure=acc.first_failure,
        first_failure_term=acc.first_failure_term, control_dt=control_dt,
    )


def _errors(env: Any) -> dict[str, np.ndarray]:
    """Errors of every env's current state against its current reference frame."""
    lib, r = env.motion, env.ref_index
    return frame_errors(env.body_pos, env.body_quat, env.joint_pos, env.joint_vel, lib.body_pos_w[r],
                        lib.body_quat_w[r], lib.joint_pos[r], lib.joint_vel[r], env.anchor)

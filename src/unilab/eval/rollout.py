"""Deterministic evaluation rollouts of a policy on its motion-tracking task (``unilab-eval --help`` describes the
start modes and metrics).

The env is rebuilt from the checkpoint's stored config (as ``play`` does) without observation noise and, unless asked
for, domain randomization. ``clip`` (:func:`evaluate`): every env starts exactly at frame 0 of its clip and follows
it to its end with auto-reset off, so a failure stays recorded (``start_stride`` adds later starts: one unlearned
segment does not decide the whole measurement). ``random`` (:func:`random_start_metrics`): what training measures,
sampled starts with the start noise and auto-reset.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from tqdm import tqdm

from unilab.dataclass_config import build_dataclass
from unilab.eval.metrics import ERROR_NAMES, TrackingAccumulator, frame_errors, summarize
from unilab.eval.robustness import by_bins, randomized_values
from unilab.motion_io.clip_file import clip_frame_counts
from unilab.runtime.checkpoint import apply_task_overrides, load_agent, load_checkpoint, stored_run_config
from unilab.runtime.config import SimConfig
from unilab.tasks.g1_motion_tracking.env import task_motion_files
from unilab.tasks.registry import kind, make_env, task_config

POLICY_KINDS = ("checkpoint", "zero", "reference", "random")
"""``--policy`` choices: the checkpoint's mean action, or a baseline of :func:`baseline_policy`."""
BASELINE_KINDS = POLICY_KINDS[1:]
START_MODES = ("clip", "random")
"""``--starts`` choices: each clip from frame 0 to its end, or training's random starts with auto-reset."""
DEFAULT_TASK = "g1_motion_tracking"
"""The task of a baseline evaluated without a checkpoint."""
RANDOM_START_KEYS = ("episodes", "episode_length_mean", "episode_length_std", "failure_rate", "total_steps",
                     "measured_steps", *ERROR_NAMES, "action_abs_mean", "action_change_rms")
"""The keys of :func:`random_start_metrics` (errors named as in clip mode)."""

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


_NOT_NOISE = ("joint_pos_limit_factor",)
"""Numeric fields of the noise configs that bound the noisy values rather than scale the noise (kept)."""


def _zero_numbers(cfg: Any) -> Any:
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
    changes["obs_noise"] = _zero_numbers(cfg.obs_noise)
    if not randomization:
        changes["randomization"] = disable_randomization(cfg.randomization)
    return dataclasses.replace(cfg, **changes)


def eval_task_config(task_raw: dict[str, Any], randomization: bool, start_noise: bool = False) -> Any:
    """The checkpoint's motion-tracking config for evaluation (:func:`without_noise`); without ``start_noise`` the
    reset noise is off too, so envs start exactly on the reference."""
    name = task_raw.get("name")
    cfg = task_config(name, task_raw)
    if not hasattr(cfg, "tracked_bodies"):
        raise ValueError(f"this checkpoint's task is {name!r}: unilab-eval --task {name} measures it"
                         if kind(name) == "locomotion" else
                         f"unilab-eval measures motion tracking; this checkpoint's task is {name!r}")
    if start_noise:
        return without_noise(cfg, randomization)
    return without_noise(cfg, randomization, reset=dataclasses.replace(cfg.reset, noise=_zero_numbers(cfg.reset.noise)))


def load_policy_config(checkpoint: str | Path | None, policy: str, overrides: dict[str, Any] | None,
                       task: str = DEFAULT_TASK) -> tuple[dict[str, Any], dict[str, Any] | None, Path | None]:
    """``(run config, checkpoint payload or None, checkpoint path or None)`` of an evaluation: the checkpoint's config
    when one is given, else (a baseline policy) ``task``'s defaults; both with ``overrides``."""
    if checkpoint is not None:
        payload, path = load_checkpoint(checkpoint)
        return stored_run_config(payload, path, overrides), payload, path
    if policy == "checkpoint":
        raise ValueError("policy 'checkpoint' needs RUN_DIR_OR_CHECKPOINT (a baseline policy, e.g. "
                         "--policy zero, runs without one)")
    return {"task": apply_task_overrides({"name": task}, overrides)}, None, None


@contextmanager
def eval_env(raw: dict[str, Any], payload: dict[str, Any] | None, policy: str, cfg: Any, num_envs: int,
             device: str, threads: int | None, seed: int,
             source: PolicySource | None = None) -> Iterator[tuple[Any, PolicyFn]]:
    """The env of an evaluation (closed on exit) and its policy, ``source``'s, ``payload``'s mean action or baseline
    ``policy``; physics takes ``raw``'s ``sim`` settings, torch ``threads`` (default 1) threads."""
    kw = build_dataclass(SimConfig, raw.get("sim", {}), "sim").pool_kwargs()
    kw["cpu_ids"] = None  # a few envs: the default sizing rule, no pinning
    kw["nthread"] = threads
    # a policy batch of a few rows gains nothing from more threads, and they would compete with physics
    torch.set_num_threads(threads or 1)
    agent = load_agent(payload, device=device) if policy == "checkpoint" and source is None else None
    env = make_env(raw["task"]["name"], cfg, num_envs, pool_kwargs=kw, seed=seed)
    try:
        if source is not None:
            yield env, source.make_policy(env)
        else:
            yield env, agent_policy(agent) if agent is not None else baseline_policy(env, policy, seed=seed)
    finally:
        env.close()


def evaluate(checkpoint: str | Path | None, options: EvalOptions | None = None, source: PolicySource | None = None,
             **changes: Any) -> EvalResult:
    """Roll out ``options.policy`` on the task of ``checkpoint`` (file or run dir; None: a baseline on the defaults)
    from ``options.starts``; ``source``: roll out its policy on its config instead."""
    opts = dataclasses.replace(options or EvalOptions(), **changes)
    if source is not None:
        raw, payload, path = source.raw, None, source.path
    else:
        raw, payload, path = load_policy_config(checkpoint, opts.policy, opts.task_overrides)
    random_starts = opts.starts == "random"
    cfg = eval_task_config(raw["task"], opts.randomization, start_noise=random_starts)
    files = task_motion_files(cfg)
    chosen = select_clips(files, opts.clips)
    names = [clip_names(files)[i] for i in chosen]
    files = [files[i] for i in chosen]
    clip_files = [str(f) for f in files]
    cfg = dataclasses.replace(cfg, motion_files=list(clip_files))

    label = path.name if path is not None else opts.policy
    if random_starts:
        num_envs = opts.num_envs
    else:  # the clip starts size the env: each clip's frames are read before the env reads the clips
        clip_frames = clip_frame_counts(files, cfg.control_dt)
        if opts.max_frames is not None:
            clip_frames = np.minimum(clip_frames, opts.max_frames)
        firsts = [range(0, max(int(t) - 1, 1), opts.start_stride) if opts.start_stride else (0,) for t in clip_frames]
        starts = [(c, f) for c in range(len(files)) for f in firsts[c] for _ in range(opts.envs_per_clip)]
        env_clip, env_start = (np.array(column, dtype=np.int64) for column in zip(*starts))
        num_envs = len(starts)
    with eval_env(raw, payload, opts.policy, cfg, num_envs, opts.device, opts.threads, opts.seed,
                  source) as (env, policy):
        control_dt = float(env.control_dt)
        if random_starts:
            summary = {"overall": random_start_metrics(env, policy, opts.episodes, progress=opts.progress,
                                                       desc=f"eval {label} (random starts)"), "clips": {}}
            env_clip = env_start = first_failure = np.zeros(0, dtype=np.int64)
            errors, first_failure_term, bins = {}, [], None
        else:
            env.auto_reset = False
            acc = TrackingAccumulator(clip_frames[env_clip] - env_start)
            obs = env.start_at(env_clip, env_start)
            acc.add(0, _errors(env), np.zeros(env.num_envs, dtype=bool))
            with tqdm(total=acc.num_frames - 1, desc=f"eval {label}", unit="step", file=sys.stderr,
                      disable=not opts.progress, leave=False) as bar:
                for t in range(1, acc.num_frames):
                    obs, _, terminated, _, info = env.step(policy(obs))
                    acc.add(t, _errors(env), terminated, info.get("termination_terms"))
                    bar.update(1)
            summary = summarize(acc.per_env(), env_clip, names, clip_frames)
            errors, first_failure, first_failure_term = dict(acc.errors), acc.first_failure, acc.first_failure_term
            bins = by_bins(randomized_values(env), acc.per_env()) if opts.randomization else None
    return EvalResult(checkpoint=path, iteration=None if payload is None else int(payload["iteration"]),
                      task=raw["task"]["name"], config=raw, options=opts, clip_names=names, clip_files=clip_files,
                      summary=summary, env_clip=env_clip, env_start=env_start, errors=errors,
                      first_failure=first_failure, first_failure_term=first_failure_term, control_dt=control_dt,
                      randomization_bins=bins,
                      source=None if source is None else source.describe())


def agent_policy(agent: Any) -> PolicyFn:
    """The deterministic (mean) action of a FastSAC ``agent`` (or anything with ``act(obs, deterministic)``)."""

    def act(obs: dict[str, np.ndarray]) -> np.ndarray:
        with torch.no_grad():
            return agent.act(torch.from_numpy(obs["obs"]), deterministic=True).cpu().numpy()

    return act


def scored_rows(env: Any) -> np.ndarray:
    """Motion-library rows of the frames the last step's reward scored (one per env)."""
    return env.motion.flat_index(env.clip, env.frame)


def next_scored_rows(env: Any) -> np.ndarray:
    """Motion-library rows of the frames the next step's reward will score: ``step`` advances each env's frame by one
    before scoring (clamped at the clip's end). Not the observation's frame: it may lead the scored one."""
    return env.motion.flat_index(env.clip, env.frame + 1)


def reference_action(env: Any) -> np.ndarray:
    """Actions whose PD targets (``default + action_scale * a``) are the reference joint positions the next step is
    scored against, clipped to [-1, 1]."""
    target = env.motion.joint_pos[next_scored_rows(env)][:, env.act_joint]
    return np.clip((target - env.action_default) / env.action_scale, -1.0, 1.0)


def baseline_policy(env: Any, kind: str, seed: int = 0) -> PolicyFn:
    """A policy of ``env`` that needs no training; ``kind`` one of :data:`BASELINE_KINDS`:

    - ``zero``: action 0 every step (PD targets = the default joint positions: holds the default pose);
    - ``reference``: the reference joint positions as PD targets, open loop (:func:`reference_action`);
    - ``random``: uniform random actions in [-1, 1] (seeded by ``seed``).
    """
    shape = (env.num_envs, env.action_dim)
    if kind == "zero":
        zero = np.zeros(shape, dtype=np.float32)
        return lambda obs: zero
    if kind == "reference":
        return lambda obs: reference_action(env)
    if kind == "random":
        rng = np.random.default_rng(seed)
        return lambda obs: rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)
    raise ValueError(f"baseline policy must be one of {', '.join(BASELINE_KINDS)}, got {kind!r}")


def random_start_metrics(env: Any, policy: PolicyFn, episodes: int, progress: bool = False,
                         desc: str = "random starts") -> dict[str, float]:
    """Episode statistics of ``policy`` on ``env`` from training's random starts (start noise, auto-reset on).

    Each env's share of the ``episodes`` (its first ``ceil`` or ``floor(episodes / num_envs)``) is fixed before the
    rollout, so short episodes are not over-counted as they would be by stopping at the first ``episodes`` endings.
    A step that ends an episode is not in the errors: the auto-reset replaces its state before it can be read.

    Returns :data:`RANDOM_START_KEYS`: ``episode_length_mean`` / ``_std`` in steps (the ending step included, as
    training's ``length_mean``); ``failure_rate`` = terminated / ended; ``total_steps`` simulated;
    ``measured_steps``, the steps each error of :data:`ERROR_NAMES` is averaged over; ``action_abs_mean`` (mean
    |action|, [-1, 1] units) and ``action_change_rms`` (RMS change from the episode's previous action): a posture
    held away from the default pose shows a large first and a small second, jitter a large second.
    ``env.auto_reset`` is restored afterwards; the env is not closed.
    """
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    n = env.num_envs
    quota = np.full(n, episodes // n, dtype=np.int64)
    quota[: episodes % n] += 1
    ended = np.zeros(n, dtype=np.int64)
    length = np.zeros(n, dtype=np.int64)
    lengths: list[np.ndarray] = []
    failures = 0
    sums = dict.fromkeys(ERROR_NAMES, 0.0)
    measured = total = 0
    action_abs = action_sq = 0.0
    action_steps = change_steps = 0
    previous = None
    saved = env.auto_reset
    env.auto_reset = True

    try:
        obs = env.reset()
        with tqdm(total=episodes, desc=desc, unit="episode", file=sys.stderr, disable=not progress,
                  leave=False) as bar:
            while (ended < quota).any():
                counted = ended < quota  # the episode each env is in now is one of its share
                action = policy(obs)
                a = np.asarray(action, dtype=np.float64)
                action_abs += float(np.abs(a[counted]).mean(axis=1).sum())
                action_steps += int(counted.sum())
                if previous is not None:
                    within = counted & (length > 0)  # not an episode's first action
                    action_sq += float(np.square(a[within] - previous[within]).mean(axis=1).sum())
                    change_steps += int(within.sum())
                previous = a
                obs, _, terminated, truncated, _ = env.step(action)
                total += n
                length += 1
                done = np.asarray(terminated, dtype=bool) | np.asarray(truncated, dtype=bool)
                live = counted & ~done
                if live.any():
                    err = _errors(env)
                    for name in ERROR_NAMES:
                        sums[name] += float(np.sum(err[name][live]))
                    measured += int(live.sum())
                fin = counted & done
                if fin.any():
                    lengths.append(length[fin].copy())
                    failures += int(np.sum(np.asarray(terminated, dtype=bool)[fin]))
                    bar.update(int(fin.sum()))
                ended += done
                length[done] = 0
    finally:
        env.auto_reset = saved
    all_lengths = np.concatenate(lengths).astype(np.float64)
    return {"episodes": int(all_lengths.size), "episode_length_mean": float(all_lengths.mean()),
            "episode_length_std": float(all_lengths.std()), "failure_rate": failures / all_lengths.size,
            "total_steps": int(total), "measured_steps": int(measured),
            **{name: (sums[name] / measured if measured else math.nan) for name in ERROR_NAMES},
            "action_abs_mean": action_abs / action_steps,
            "action_change_rms": math.sqrt(action_sq / change_steps) if change_steps else math.nan}


def _errors(env: Any) -> dict[str, np.ndarray]:
    """Errors of every env's current state against the reference frame its last reward scored."""
    lib, r, st = env.motion, scored_rows(env), env.state
    return frame_errors(st.body_pos, st.body_quat, st.joint_pos, st.joint_vel, lib.body_pos_w[r],
                        lib.body_quat_w[r], lib.joint_pos[r], lib.joint_vel[r], env.anchor)

"""The motion-tracking task's evaluation (``unilab-eval --help``): ``clip`` starts (:func:`evaluate`: each env from
frame 0 of its clip to its end, auto-reset off, so a failure stays recorded; ``start_stride`` adds later starts) or
``random`` ones (:func:`random_start_metrics`: training's sampled starts, start noise and auto-reset); the tracking
errors against the reference frame each step scored; the ``reference`` baseline."""

from __future__ import annotations

import dataclasses
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from unilab.eval import rollout
from unilab.eval.metrics import ERROR_NAMES, TrackingAccumulator, frame_errors, summarize
from unilab.eval.robustness import by_bins, randomized_values
from unilab.eval.rollout import EvalOptions, EvalResult, PolicyFn, PolicySource, eval_env, without_noise, zero_numbers
from unilab.motion_io.clip import clip_frame_counts
from unilab.tasks.g1_motion_tracking.env import task_motion_files

HEADLINE = (("success", "success_rate", "{:.2f}"), ("mpjpe", "mpjpe_mm", "{:.1f} mm"),
            ("local", "mpjpe_local_mm", "{:.1f} mm"))
"""What training prints of each periodic evaluation: (label, overall metric, format)."""

RANDOM_START_KEYS = ("episodes", "episode_length_mean", "episode_length_std", "failure_rate", "total_steps",
                     "measured_steps", *ERROR_NAMES, "action_abs_mean", "action_change_rms")
"""The keys of :func:`random_start_metrics` (errors named as in clip mode)."""


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


def eval_task_config(cfg: Any, randomization: bool, start_noise: bool = False) -> Any:
    """The checkpoint's typed motion-tracking config ``cfg`` for evaluation (:func:`without_noise`); without
    ``start_noise`` the reset noise is off too, so envs start exactly on the reference."""
    if not hasattr(cfg, "tracked_bodies"):
        raise ValueError(f"this evaluation measures motion tracking; this checkpoint's task is {cfg.name!r}")
    if start_noise:
        return without_noise(cfg, randomization)
    return without_noise(cfg, randomization, reset=dataclasses.replace(cfg.reset, noise=zero_numbers(cfg.reset.noise)))


def evaluate(checkpoint: str | Path | None, options: EvalOptions | None = None, source: PolicySource | None = None,
             **changes: Any) -> EvalResult:
    """Roll out ``options.policy`` on the task of ``checkpoint`` (file or run dir; None: a baseline on the defaults)
    from ``options.starts``; ``source``: roll out its policy on its config instead."""
    opts = dataclasses.replace(options or EvalOptions(), **changes)
    raw, cfg, payload, path = rollout.policy_config(checkpoint, opts.policy, opts.task_overrides, source)
    random_starts = opts.starts == "random"
    cfg = eval_task_config(cfg, opts.randomization, start_noise=random_starts)
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
    with eval_env(raw, payload, opts.policy, cfg, num_envs, opts.device, opts.threads, opts.seed, source,
                  baseline_policy, path) as (env, policy):
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
    """:func:`unilab.eval.rollout.baseline_policy`, and ``reference``: the reference joint positions as PD targets,
    open loop (:func:`reference_action`)."""
    if kind == "reference":
        return lambda obs: reference_action(env)
    return rollout.baseline_policy(env, kind, seed)


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

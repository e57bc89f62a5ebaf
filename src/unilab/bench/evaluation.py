"""What a finished run achieved: its TensorBoard curves in the learning benchmarks' fixed keys, and the
``unilab-eval`` children that evaluate its checkpoints and the baseline policies."""

from __future__ import annotations

import argparse
import itertools
import json
import math
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from unilab.bench import children
from unilab.bench.training import announce
from unilab.eval.metrics import METRIC_NAMES
from unilab.tasks import registry

# scalar tag -> summary key prefix; every key is always present in the JSON (null when not logged)
CURVE_TAGS = {"episode/return_mean": "return", "episode/length_mean": "episode_length",
              "reward/mean": "reward_per_step", "perf/steps_per_sec": "steps_per_sec"}
CURVE_KEYS = (*(f"{key}_{stat}" for key in CURVE_TAGS.values() for stat in ("final", "max", "last10pct_mean")),
              "steps_per_sec_mean", "iterations", "env_steps", "num_envs", "train_wall_s", "points")
TIMING_TAGS = {"timing/learner_train_ms": "learner_train_ms", "timing/collector_env_step_ms": "collector_env_step_ms",
               "timing/collector_learner_action_wait_ms": "collector_action_wait_ms",
               "timing/learner_collector_wait_ms": "learner_collector_wait_ms"}
CHECKPOINTS = 20
"""Curves are sampled at env steps budget x k / CHECKPOINTS, k = 1..CHECKPOINTS."""
RANDOM_START_ENVS = 64
"""Envs of a random-start evaluation (at most its episode count)."""


def read_curves(run_dir: str | Path) -> dict[str, list[tuple[int, float, float]]]:
    """``{tag: [(step, wall_time, value), ...]}`` of every scalar in the run's event files."""
    from tensorboard.backend.event_processing import event_accumulator as ea  # heavy, only here

    acc = ea.EventAccumulator(str(run_dir), size_guidance={ea.SCALARS: 0})
    acc.Reload()
    return {tag: [(e.step, e.wall_time, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()[ea.SCALARS]}


def curve_summary(curves: dict[str, list[tuple[int, float, float]]], num_envs: int,
                  checkpoint: Path | None = None) -> dict[str, Any]:
    """The learning curve in the fixed keys of :data:`CURVE_KEYS` (None where a tag was never logged).

    ``*_last10pct_mean``: over the last tenth of the points (at least one); ``iterations`` / ``env_steps``: of the
    last logged point (steps are env steps = iterations x num_envs), or of ``checkpoint`` (``model_<iteration>.pt``)
    when given; ``train_wall_s``: between the first and the last logged point.
    """
    out: dict[str, Any] = dict.fromkeys(CURVE_KEYS)
    for tag, key in CURVE_TAGS.items():
        values = [v for _, _, v in curves.get(tag, []) if math.isfinite(v)]
        if not values:
            continue
        tail = values[-max(1, len(values) // 10):]
        out[f"{key}_final"] = values[-1]
        out[f"{key}_max"] = max(values)
        out[f"{key}_last10pct_mean"] = sum(tail) / len(tail)
        if key == "steps_per_sec":
            out["steps_per_sec_mean"] = sum(values) / len(values)
    points = [p for series in curves.values() for p in series]
    out["num_envs"] = num_envs
    out["points"] = len(curves.get("episode/return_mean", []))
    if points:
        last = max(s for s, _, _ in points)
        out["env_steps"] = int(last)
        out["iterations"] = int(last // num_envs) if num_envs else None
        walls = [w for _, w, _ in points]
        out["train_wall_s"] = max(walls) - min(walls)
    m = re.fullmatch(r"model_(\d+)\.pt", checkpoint.name) if checkpoint is not None else None
    if m:  # the run's last iteration (scalars are logged every log_interval iterations)
        out["iterations"] = int(m.group(1))
        out["env_steps"] = out["iterations"] * num_envs
    return out


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def timing_means(curves: dict[str, list[tuple[int, float, float]]]) -> dict[str, float | None]:
    """Mean per-iteration ms of the learner and collector phases over the points where the learner trained
    (before ``learning_starts`` it does not, which would dilute the means)."""
    train = curves.get("timing/learner_train_ms", [])
    steps = {s for s, _, v in train if v > 0} or {s for s, _, _ in train}
    return {key: _mean([v for s, _, v in curves.get(tag, []) if s in steps and math.isfinite(v)])
            for tag, key in TIMING_TAGS.items()}


def run_facts(run_dir: Path, checkpoint: Path | None, num_envs: int, num_updates: int) -> dict[str, Any]:
    """A finished run's TensorBoard scalars in the keys of :data:`RUN_KEYS` and of the GPU check: its curve summary,
    timing means, learner ms per update, overlap (learner train / collector env.step ms) and length/return series."""
    curves = read_curves(run_dir)
    curve = curve_summary(curves, num_envs, checkpoint)
    timing = timing_means(curves)
    train_ms, env_step_ms = timing["learner_train_ms"], timing["collector_env_step_ms"]
    length, ret = ([(int(s), v) for s, _, v in curves.get(t, []) if math.isfinite(v)]
                   for t in ("episode/length_mean", "episode/return_mean"))
    return {"run_dir": str(run_dir), "checkpoint": None if checkpoint is None else str(checkpoint), "curve": curve,
            "iterations": curve["iterations"], "env_steps": curve["env_steps"], "train_wall_s": curve["train_wall_s"],
            "steps_per_sec": curve["steps_per_sec_mean"], "steps_per_sec_final": curve["steps_per_sec_final"],
            **timing, "learner_ms_per_update": train_ms / num_updates if train_ms is not None and num_updates else None,
            "overlap": train_ms / env_step_ms if train_ms is not None and env_step_ms else None,
            "series": {"env_steps": [s for s, _ in length], "episode_length": [v for _, v in length],
                       "return_env_steps": [s for s, _ in ret], "return": [v for _, v in ret]}}


def value_at(series: Sequence[tuple[int, float]], step: float) -> float | None:
    """The last logged value at or before ``step`` (None before the first point)."""
    before = list(itertools.takewhile(lambda p: p[0] <= step, series))
    return before[-1][1] if before else None


def add_checkpoints(runs: list[dict[str, Any]], budget: int | None) -> list[int]:
    """Sample every run's curves at common env steps (of the budget, else of the shortest run); the steps."""
    ends = [r["env_steps"] for r in runs if r["env_steps"]]
    top = budget if budget is not None else (min(ends) if ends else 0)
    steps = [round(top * k / CHECKPOINTS) for k in range(1, CHECKPOINTS + 1)] if top else []
    for r in runs:
        s = r["series"] or {"env_steps": [], "episode_length": [], "return_env_steps": [], "return": []}
        length = list(zip(s["env_steps"], s["episode_length"]))
        ret = list(zip(s["return_env_steps"], s["return"]))
        r["at_checkpoints"] = {"env_steps": steps, "episode_length": [value_at(length, c) for c in steps],
                               "return": [value_at(ret, c) for c in steps]}
        end = r["env_steps"] or 0
        r["episode_length_last10pct"] = _mean([v for st, v in length if st >= 0.9 * end])
        r["return_last10pct"] = _mean([v for st, v in ret if st >= 0.9 * end])
    return steps


def eval_command(args: argparse.Namespace, checkpoint: Path, json_path: Path) -> list[str]:
    """The ``unilab-eval`` command of a final checkpoint's clip evaluation."""
    cmd = [sys.executable, "-m", "unilab.cli.eval", str(checkpoint), "--json", str(json_path)]
    if args.eval_max_frames:
        cmd += ["--max-frames", str(args.eval_max_frames)]
    if args.eval_start_stride:
        cmd += ["--start-stride", str(args.eval_start_stride)]
    return cmd


def eval_report(cmd: list[str], json_path: Path, cpus: Sequence[int] | None = None, tag: str = "",
                env: dict[str, str] | None = None) -> tuple[int, dict[str, Any] | None]:
    """Announce and run ``unilab-eval`` ``cmd`` (its table and progress go to the terminal), pinned to ``cpus`` when
    given; its return code and the JSON it wrote (None when it failed). Nothing runs after a stop signal."""
    if children.stopped() is not None:
        return 128 + children.stopped(), None
    announce(cmd, tag)
    rc = children.run(cmd, cpus, env=env)
    return rc, json.loads(json_path.read_text()) if rc == 0 and json_path.is_file() else None


def final_eval(cmd: list[str], checkpoint: Path, json_path: Path, episodes: int, cpus: Sequence[int] | None = None,
               tag: str = "", env: dict[str, str] | None = None) -> dict[str, Any]:
    """The clip evaluation ``cmd`` of a final ``checkpoint`` (writing ``json_path``) and, with ``episodes``, its
    random-start one: ``eval_returncode``, ``eval`` and ``eval_clips`` (when it succeeded), ``eval_random_starts``."""
    out: dict[str, Any] = {}
    out["eval_returncode"], evaluation = eval_report(cmd, json_path, cpus, tag, env)
    if evaluation is not None:
        out["eval"] = {k: evaluation.get("overall", {}).get(k) for k in METRIC_NAMES}
        out["eval_clips"] = evaluation.get("clips", {})
    if episodes:
        random_json = json_path.with_name("final_random.json")
        out["eval_random_starts"] = random_start_eval(checkpoint, "checkpoint", random_json, episodes, cpus, tag, env)
    return out


def locomotion_eval(task: str, checkpoint: str | Path, policy: str, json_path: Path,
                    cpus: Sequence[int] | None = None, tag: str = "", env: dict[str, str] | None = None,
                    pushes: bool = True) -> dict[str, Any] | None:
    """``unilab-eval --task <task>`` of a locomotion task (20 s episodes per command bin, with the task's pushes if
    ``pushes``) of ``policy`` with the task config of ``checkpoint``: its per-bin and overall metrics, None on
    failure."""
    cmd = [sys.executable, "-m", "unilab.cli.eval", str(checkpoint), "--task", task, "--policy", policy,
           "--json", str(json_path), "--no-progress", "--pushes", "on" if pushes else "off"]
    report = eval_report(cmd, json_path, cpus, tag, env)[1]
    return None if report is None else {k: report[k] for k in ("overall", "bins", "control_dt")}


def random_start_eval(checkpoint: str | Path, policy: str, json_path: Path, episodes: int,
                      cpus: Sequence[int] | None = None, tag: str = "",
                      env: dict[str, str] | None = None) -> dict[str, Any] | None:
    """``unilab-eval --starts random`` (training's random starts, auto-reset) of ``policy`` with the task
    config of ``checkpoint``: its ``overall`` metrics (episode_length_mean, failure_rate, ...), None on failure."""
    cmd = [sys.executable, "-m", "unilab.cli.eval", str(checkpoint), "--policy", policy, "--starts", "random",
           "--episodes", str(episodes), "--num-envs", str(min(episodes, RANDOM_START_ENVS)), "--json",
           str(json_path), "--no-plot", "--no-progress"]
    report = eval_report(cmd, json_path, cpus, tag, env)[1]
    return None if report is None else report.get("overall")


def baseline_episode_lengths(args: argparse.Namespace, runs: list[dict[str, Any]],
                             other_source: Sequence[str] = ()) -> dict[str, float | None]:
    """Random-start episode length of the zero-action and reference (open-loop) policies on the task config of the
    first run with a checkpoint on this source (not an arm of ``other_source``): the plot's lines (None: unknown)."""
    out: dict[str, Any] = {"zero": None, "reference": None}
    ckpt = next((r["checkpoint"] for r in runs if r["checkpoint"] and Path(r["checkpoint"]).is_file()
                 and r["arm"] not in other_source), None)
    if ckpt is not None and registry.kind(args.task) == "locomotion":  # the zero action's episode length, steps
        zero = locomotion_eval(args.task, ckpt, "zero", Path(ckpt).parent / "eval" / "baseline_zero_locomotion.json")
        if zero is not None:
            out["zero"] = zero["overall"]["episode_length_s"] / zero["control_dt"]
            out["zero_locomotion"] = zero
        return out
    if ckpt is None or not args.random_episodes or registry.kind(args.task) != "motion_tracking":
        return out
    for kind in out:
        overall = random_start_eval(ckpt, kind, Path(ckpt).parent / "eval" / f"baseline_{kind}_random.json",
                                    args.random_episodes)
        out[kind] = None if overall is None else overall.get("episode_length_mean")
    return out

"""Learning benchmark: a fixed-budget G1 tracking run, then ``unilab-eval`` on its final checkpoint.

Runs ``train`` (default: ``--algo sac_cpu`` for 20 minutes, ``training.time_limit_s``) as a subprocess, then
``unilab-eval``, and writes one JSON with keys fixed across commits: the learning-curve summary read back from the
run's TensorBoard scalars (episode return and length, steps/s, iterations, env steps, wall time) and the final tracking
metrics. Compare commits with the same flags on the same machine. A training's output is kept in a log file beside its
run directories; a stop signal stops the trainings with their final checkpoints and still writes the JSON
(:mod:`unilab.bench.children`).

Recipe comparison (``--arm``, ``--seeds``, ``--env-steps``, ``--parallel``): every arm x seed trains to the same env
steps (``algo.max_iterations`` = env steps / num_envs; ``--minutes`` stays a wall-time cap), optionally side by side on
disjoint CPU sets, then is evaluated; one JSON holds every run (curves at common env-step checkpoints, final metrics,
speed), one PNG shows episode length vs env steps of every run.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import os
import queue
import re
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from unilab.bench import children
from unilab.bench.report import format_table, write_json
from unilab.eval.metrics import METRIC_NAMES
from unilab.paths import check_writable
from unilab.sim.cpu import usable_cpus
from unilab.tasks import registry

# scalar tag -> summary key prefix; every key is always present in the JSON (null when not logged)
CURVE_TAGS = {"episode/return_mean": "return", "episode/length_mean": "episode_length",
              "reward/mean": "reward_per_step", "perf/steps_per_sec": "steps_per_sec"}
CURVE_KEYS = (*(f"{key}_{stat}" for key in CURVE_TAGS.values() for stat in ("final", "max", "last10pct_mean")),
              "steps_per_sec_mean", "iterations", "env_steps", "num_envs", "train_wall_s", "points")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="unilab-bench learn",
        description="Fixed-budget G1 motion-tracking training, then unilab-eval on the final checkpoint; one JSON "
                    "with the learning-curve summary and the tracking metrics (compare it across commits).",
    )
    p.add_argument("--algo", default=None, help="algorithm recipe (train --algo; default: the task's CPU recipe, "
                   f"{', '.join(f'{t} -> {registry.recipes(t)[1]}' for t in registry.TASKS)})")
    p.add_argument("--task", default=registry.DEFAULT_TASK, help=f"train --task (default: {registry.DEFAULT_TASK}); "
                   f"a locomotion task ({', '.join(registry.tasks_of_kind('locomotion'))}) is evaluated with "
                   "unilab-eval --task <task> (command bins, and the zero policy as the baseline)")
    p.add_argument("--minutes", type=float, default=20.0, help="training budget in minutes (training.time_limit_s; "
                   "default: 20); with --env-steps a wall-time cap that stops a run early (the JSON says which "
                   "budget ended it)")
    p.add_argument("--num-envs", type=int, default=None, help="algo.num_envs (default: the recipe's)")
    p.add_argument("--log-root", default="logs/bench_learn",
                   help="training.log_root of the run (default: logs/bench_learn)")
    p.add_argument("--out", default=None, help="JSON path (default: <log root>/learn_<algo>_<minutes>min.json; a "
                   "comparison: <log root>/learn_arms_<algo>_[<env steps>steps_]<minutes>min.json)")
    p.add_argument("--eval-max-frames", type=int, default=None, help="unilab-eval --max-frames (default: whole clips)")
    p.add_argument("--eval-start-stride", type=int, default=None, metavar="K",
                   help="unilab-eval --start-stride of the final evaluation: clip starts at frames 0, K, 2K, ...; "
                        "the JSON's eval_clips list where each start failed (default: frame 0 only)")
    g = p.add_argument_group(
        "recipe comparison", "any of these runs every arm x seed and writes one JSON (runs[]) and one PNG")
    g.add_argument("--arm", action="append", nargs=2, metavar=("NAME", "OVERRIDES"), default=[],
                   help='an arm: a name and the train overrides appended to the base command, one quoted '
                        'string of KEY=VALUE separated by spaces ("" for the base recipe); repeat for each arm, '
                        'e.g. --arm base "" --arm lr1e3 "algo.actor_lr=1e-3 algo.critic_lr=1e-3"')
    g.add_argument("--arm-src", action="append", nargs=2, metavar=("NAME", "DIR"), default=[],
                   help="run arm NAME (train and its evaluations) on the unilab source of another checkout DIR, "
                        "e.g. an earlier commit: git worktree add /tmp/old <commit>, then --arm old \"\" "
                        "--arm-src old /tmp/old (DIR/src goes first on PYTHONPATH of the arm's processes)")
    g.add_argument("--seeds", default=None,
                   help="comma-separated seeds, each run with algo.seed=S training.seed=S (default: 0)")
    g.add_argument("--env-steps", type=int, default=None,
                   help="env-step budget of every run: algo.max_iterations = ceil(N / the arm's num_envs), so "
                        "arms are compared at equal env steps (default: none, --minutes alone ends each run)")
    g.add_argument("--parallel", type=int, default=1, metavar="K",
                   help="runs at a time, each pinned to its own disjoint share of the usable CPUs (process "
                        "affinity, sim.cpu_ids, training.learner_threads); 1: one after another, unpinned (default: 1)")
    g.add_argument("--random-episodes", type=int, default=128, metavar="N",
                   help="episodes of the random-start evaluations (unilab-eval --starts random) of each final "
                        "checkpoint and of the zero/reference baselines, the plot's horizontal lines; 0: none "
                        "(default: 128; motion-tracking tasks only)")
    g.add_argument("--plot", default=None, help="PNG of episode length vs env steps (default: the JSON path with .png)")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="extra train overrides passed through (in a "
                   "comparison: to every arm, before the arm's own), e.g. algo.batch_size=512 task.sim_dt=0.004")
    return p


def train_command(args: argparse.Namespace, algo: str | None = None, name: str = "bench_learn",
                  sizes: Sequence[str] | None = None) -> list[str]:
    """The ``train`` command line of a benchmark run (also ``unilab-bench gpu``'s); ``sizes``: the overrides before
    ``args.overrides``, by default a time-limited run with ``--num-envs`` if given."""
    if sizes is None:  # the time limit ends the run
        sizes = ["algo.max_iterations=10000000", *([] if args.num_envs is None else [f"algo.num_envs={args.num_envs}"])]
    return [sys.executable, "-m", "unilab.cli.train", "--algo", algo or recipe(args), "--task", args.task,
            f"training.time_limit_s={args.minutes * 60:g}", "training.no_play=true",
            f"training.log_root={args.log_root}", f"training.experiment_name={name}", *sizes, *args.overrides]


_print_lock = threading.Lock()


def _announce(cmd: Sequence[str], tag: str = "") -> None:
    """Print ``cmd`` (after ``tag``) as one line, whole among parallel runs' output."""
    with _print_lock:
        print(f"unilab-bench learn: {tag}{' '.join(cmd)}", flush=True)


def training_log(cmd: Sequence[str]) -> Path:
    """Where a ``train`` command's output goes: ``<training.log_root>/<training.experiment_name>_<time>.log`` (the run
    directory is not known before the training makes it)."""
    keys = dict(a.split("=", 1) for a in cmd if a.startswith(("training.log_root=", "training.experiment_name=")))
    root = Path(keys.get("training.log_root", "logs"))
    name = keys.get("training.experiment_name", "train").replace("/", "_")
    root.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y-%m-%d_%H-%M-%S")
    for k in range(1000):
        path = root / (f"{name}_{stamp}.log" if k == 0 else f"{name}_{stamp}-{k}.log")
        with contextlib.suppress(FileExistsError):
            path.open("x").close()
            return path
    raise FileExistsError(f"no free training log name {name}_{stamp}-<k>.log in {root}")


def run_training(cmd: list[str], prefix: str = "", cpus: Sequence[int] | None = None,
                 env: dict[str, str] | None = None) -> tuple[int, Path | None, Path | None, float]:
    """Run ``train`` with its output in a log file (:func:`training_log`; :mod:`unilab.bench.children`: a killed
    benchmark leaves the training stopping cleanly), echoing each line of it after ``prefix`` (parallel runs stay
    readable); returns (rc, run dir, final checkpoint, wall s). After a stop signal nothing is started."""
    run_dir = checkpoint = None
    if children.stopped() is not None:
        return 128 + children.stopped(), None, None, 0.0
    log_path = training_log(cmd)
    t0 = time.monotonic()
    with open(log_path, "rb") as follow:
        partial = b""

        def echo() -> None:
            nonlocal run_dir, checkpoint, partial
            for raw in follow.readlines():
                if not raw.endswith(b"\n"):  # the training is still writing this line
                    partial += raw
                    continue
                line, partial = (partial + raw).decode(errors="replace"), b""
                with _print_lock:
                    sys.stdout.write(prefix + line)
                    sys.stdout.flush()
                if line.startswith("unilab: logging to "):
                    run_dir = Path(line.removeprefix("unilab: logging to ").strip())
                elif line.startswith("unilab: run directory ") and "; checkpoint " in line:
                    head, _, tail = line.partition("; checkpoint ")
                    run_dir = Path(head.removeprefix("unilab: run directory ").strip())
                    checkpoint = Path(tail.strip())

        with open(log_path, "ab") as log:
            rc = children.run(cmd, cpus, poll=echo, stdout=log, stderr=subprocess.STDOUT, env=env)
    with _print_lock:
        print(f"unilab-bench learn: {prefix}training output kept in {log_path}", flush=True)
    return rc, run_dir, checkpoint, time.monotonic() - t0


def eval_command(args: argparse.Namespace, checkpoint: Path, json_path: Path) -> list[str]:
    """The ``unilab-eval`` command of a final checkpoint's clip evaluation."""
    cmd = [sys.executable, "-m", "unilab.cli.eval", str(checkpoint), "--json", str(json_path)]
    if args.eval_max_frames:
        cmd += ["--max-frames", str(args.eval_max_frames)]
    if args.eval_start_stride:
        cmd += ["--start-stride", str(args.eval_start_stride)]
    return cmd


def run_eval(cmd: list[str], cpus: Sequence[int] | None = None, env: dict[str, str] | None = None) -> int:
    """Run ``unilab-eval`` (its table and progress go to the terminal), pinned to ``cpus`` when given."""
    return children.run(cmd, cpus, env=env)


def eval_report(cmd: list[str], json_path: Path, cpus: Sequence[int] | None = None, tag: str = "",
                env: dict[str, str] | None = None) -> tuple[int, dict[str, Any] | None]:
    """Announce and :func:`run_eval` ``cmd``; its return code and the JSON it wrote (None when it failed). Nothing
    runs after a stop signal."""
    if children.stopped() is not None:
        return 128 + children.stopped(), None
    _announce(cmd, tag)
    rc = run_eval(cmd, cpus, env)
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


def recipe(args: argparse.Namespace) -> str:
    """``--algo``, or the task's CPU recipe (:func:`registry.recipes`)."""
    return args.algo or registry.recipes(args.task)[1]


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.algo = recipe(args)
    compare = (args.arm or args.arm_src or args.seeds is not None or args.env_steps is not None
               or args.parallel != 1)
    # all refused before minutes of training
    bounds = [("--eval-start-stride", args.eval_start_stride, 1, False), ("--minutes", args.minutes, 0, True)]
    if compare:
        bounds += [("--env-steps", args.env_steps, 1, False), ("--parallel", args.parallel, 1, False),
                   ("--random-episodes", args.random_episodes, 0, False)]
    error = usage_error(args, bounds)
    if error:
        print(f"unilab-bench learn: error: {error}", file=sys.stderr)
        return 2
    with children.stop_signals():  # a stop signal: the trainings stop with a final checkpoint, the report is written
        rc = compare_main(args) if compare else single_main(args)
    return 128 + children.stopped() if children.stopped() else rc


def single_main(args: argparse.Namespace) -> int:
    """One training of the base recipe, then the evaluation of its final checkpoint; one JSON."""
    out = Path(args.out or Path(args.log_root) / f"learn_{args.algo}_{args.minutes:g}min.json")
    if (error := unwritable(out)) is not None:
        print(f"unilab-bench learn: error: {error}", file=sys.stderr)
        return 2
    cmd = train_command(args)
    _announce(cmd)
    rc, run_dir, checkpoint, wall_s = run_training(cmd)
    if run_dir is None or not (run_dir / "config.yaml").is_file():
        print(f"unilab-bench learn: error: training exited with rc {rc} before making a run directory", file=sys.stderr)
        return rc or 1
    num_envs = int(yaml.safe_load((run_dir / "config.yaml").read_text())["algo"]["num_envs"])
    curve = curve_summary(read_curves(run_dir), num_envs, checkpoint)
    evaluation, eval_rc, locomotion = {}, None, None
    if checkpoint is not None and checkpoint.is_file() and is_locomotion(args.task):
        locomotion = {kind: locomotion_eval(args.task, checkpoint, kind,
                                            run_dir / "eval" / f"final_locomotion_{kind}.json")
                      for kind in ("checkpoint", "zero")}
        # standing still survives pushes-free episodes too: this one tells "falls to pushes" from "cannot stand"
        locomotion["checkpoint_no_pushes"] = locomotion_eval(
            args.task, checkpoint, "checkpoint", run_dir / "eval" / "final_locomotion_no_pushes.json", pushes=False)
        eval_rc = 0 if all(locomotion.values()) else 1
    elif checkpoint is not None and checkpoint.is_file():
        eval_json = run_dir / "eval" / "final.json"
        eval_rc, evaluation = eval_report(eval_command(args, checkpoint, eval_json), eval_json)
        evaluation = evaluation or {}
    overall = evaluation.get("overall", {})
    # fixed keys, missing values null; eval_locomotion: unilab-eval --task <task> (per bin and overall)
    report = {"benchmark": "learn", "task": args.task, "algo": args.algo, "minutes": args.minutes,
              "num_envs": num_envs, "overrides": list(args.overrides), "command": cmd, "run_dir": str(run_dir),
              "checkpoint": None if checkpoint is None else str(checkpoint), "train_returncode": rc,
              "train_process_wall_s": wall_s, "curve": curve, "eval_returncode": eval_rc,
              "eval": {m: overall.get(m) for m in METRIC_NAMES}, "eval_clips": evaluation.get("clips", {}),
              "eval_locomotion": locomotion, "stop_signal": children.stopped()}
    rows = [(f"curve/{k}", v) for k, v in curve.items()] + [(f"eval/{k}", v) for k, v in report["eval"].items()]
    for kind, res in (locomotion or {}).items():
        rows += [(f"locomotion/{kind}/{k}", v) for k, v in ((res or {}).get("overall") or {}).items()]
    print(format_table(["metric", "value"], [(k, "-" if v is None else v) for k, v in rows]))
    print(f"unilab-bench learn: JSON written to {write_json(out, report)}")
    return 0 if rc == 0 and eval_rc == 0 else 1


# ---------------------------------------------------------------------------------------- recipe comparison
ARM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
RESERVED_KEYS = ("algo.max_iterations", "training.time_limit_s", "training.log_root", "training.experiment_name",
                 "algo.seed", "training.seed", "sim.cpu_ids")
"""Train keys the comparison sets itself (budget, seeds, run placement, pinning): an arm may not override them."""
RANDOM_START_ENVS = 64
"""Envs of a random-start evaluation (at most its episode count)."""
CHECKPOINTS = 20
"""Curves are sampled at env steps budget x k / CHECKPOINTS, k = 1..CHECKPOINTS."""
TABLE_FRACTIONS = (0.25, 0.5, 0.75, 1.0)
RUN_KEYS = ("arm", "seed", "overrides", "command", "cpu_ids", "run_dir", "checkpoint", "train_returncode",
            "eval_returncode", "stopped_by", "num_envs", "num_updates", "iterations", "env_steps",
            "env_steps_target", "train_process_wall_s", "train_wall_s", "steps_per_sec", "learner_train_ms",
            "learner_ms_per_update", "collector_env_step_ms", "episode_length_last10pct", "return_last10pct",
            "at_checkpoints", "series", "curve", "eval", "eval_clips", "eval_random_starts")
"""The keys of every entry of ``runs`` in the comparison JSON (null when unknown)."""
TIMING_TAGS = {"timing/learner_train_ms": "learner_train_ms", "timing/collector_env_step_ms": "collector_env_step_ms",
               "timing/collector_learner_action_wait_ms": "collector_action_wait_ms",
               "timing/learner_collector_wait_ms": "learner_collector_wait_ms"}


@dataclass(frozen=True)
class Arm:
    """A recipe variant: a name and the train overrides appended to the base command."""

    name: str
    overrides: tuple[str, ...]
    src: str | None = None
    """Another checkout whose ``src`` the arm's processes import unilab from (None: this one)."""

    def environment(self) -> dict[str, str] | None:
        """The environment of the arm's processes (None: inherit this one)."""
        if self.src is None:
            return None
        src = str(Path(self.src) / "src")
        return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (src, os.environ.get("PYTHONPATH"))))}


def with_sources(arms: list[Arm], pairs: Sequence[Sequence[str]]) -> list[Arm]:
    """``arms`` with each ``--arm-src NAME DIR`` attached; ValueError naming the arm or the directory."""
    by_name = {a.name: a for a in arms}
    for name, directory in pairs:
        if name not in by_name:
            raise ValueError(f"--arm-src {name}: no arm of that name (arms: {', '.join(by_name)})")
        if not (Path(directory) / "src" / "unilab" / "__init__.py").is_file():
            raise ValueError(f"--arm-src {name} {directory}: not a unilab checkout (no src/unilab/__init__.py)")
        by_name[name] = replace(by_name[name], src=str(Path(directory).resolve()))
    return [by_name[a.name] for a in arms]


def parse_arm(name: str, text: str) -> Arm:
    """``NAME`` and ``"KEY=VALUE KEY2=VALUE2"`` -> :class:`Arm`; ValueError naming the arm when malformed."""
    if not ARM_NAME.fullmatch(name):
        raise ValueError(f"--arm {name!r}: an arm name is letters, digits, '_', '.', '-' (it names run directories)")
    try:
        overrides = tuple(shlex.split(text))
    except ValueError as err:
        raise ValueError(f"--arm {name}: cannot split {text!r}: {err}") from None
    bad = [o for o in overrides if "=" not in o or o.startswith("--")]
    if bad:
        raise ValueError(f"--arm {name}: overrides must be KEY=VALUE, got {bad}")
    reserved = [o for o in overrides if o.split("=", 1)[0].lstrip("+~") in RESERVED_KEYS]
    if reserved:
        raise ValueError(f"--arm {name}: {reserved} set keys the benchmark owns ({', '.join(RESERVED_KEYS)}); "
                         "use --env-steps, --minutes, --seeds and --parallel instead")
    return Arm(name, overrides)


def parse_arms(pairs: Sequence[Sequence[str]]) -> list[Arm]:
    """Every ``--arm NAME OVERRIDES`` (none: one arm ``base`` without overrides); names must be unique."""
    arms = [parse_arm(name, text) for name, text in pairs] or [Arm("base", ())]
    names = [a.name for a in arms]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise ValueError(f"--arm {name}: the name is given twice; each arm needs its own name")
    return arms


def parse_seeds(text: str | None) -> list[int]:
    """``"0,1"`` -> [0, 1] (None: [0]); ValueError naming --seeds."""
    if text is None:
        return [0]
    try:
        seeds = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"--seeds {text!r}: expected comma-separated integers such as 0,1") from None
    if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise ValueError(f"--seeds {text!r}: expected distinct comma-separated integers >= 0 such as 0,1 "
                         "(each is algo.seed and training.seed)")
    return seeds


def cpu_slots(parallel: int, usable: Sequence[int]) -> list[list[int] | None]:
    """The CPU set of each of ``parallel`` concurrent runs: disjoint shares of ``usable`` (None: unpinned)."""
    from unilab.runtime.distributed import cpu_partition  # imports torch; only here

    if parallel == 1:
        return [None]
    if parallel > len(usable):
        raise ValueError(f"--parallel {parallel}: only {len(usable)} usable CPUs {list(usable)}; each run needs "
                         "at least one")
    return [cpu_partition(list(usable), i, parallel) for i in range(parallel)]


@dataclass
class Job:
    arm: Arm
    seed: int
    cmd: list[str]
    num_envs: int
    num_updates: int
    iterations: int | None
    """algo.max_iterations of the env-step budget; None: the time limit ends the run."""


def make_jobs(args: argparse.Namespace, arms: list[Arm], seeds: list[int]) -> list[Job]:
    """One train command per arm x seed, validated by composing its config (errors name the arm)."""
    from unilab.cli.config import choose_recipe, compose_config, split_argv, to_run_spec

    common = [c for c in train_command(args) if not c.startswith(("algo.max_iterations=", "training.experiment_name="))]
    jobs = []
    for arm, seed in itertools.product(arms, seeds):
        cmd = [*common, f"training.experiment_name={arm.name}_s{seed}", f"algo.seed={seed}", f"training.seed={seed}",
               *arm.overrides]
        try:  # the config's own errors (ConfigError is a ValueError)
            overrides, _ = split_argv(cmd[3:])  # after "python -m unilab.cli.train"
            cfg = compose_config(choose_recipe(overrides, cuda=False)[0])
            to_run_spec(cfg, check_paths=False)
        except ValueError as err:
            raise ValueError(f"--arm {arm.name}: {err}") from None
        num_envs, num_updates = int(cfg.algo.num_envs), int(cfg.algo.num_updates)
        iterations = None if args.env_steps is None else -(-args.env_steps // num_envs)
        cmd.append(f"algo.max_iterations={iterations if iterations is not None else 10_000_000}")
        jobs.append(Job(arm, seed, cmd, num_envs, num_updates, iterations))
    return jobs


def pinned_command(cmd: list[str], cpus: list[int] | None, arm: Arm) -> list[str]:
    """``cmd`` with the learner sized to ``cpus`` (unless the arm sizes it) and the pool pinned to the CPUs it
    leaves (one CPU: both on it); the process itself runs on all of ``cpus``."""
    if cpus is None:
        return list(cmd)
    from unilab.runtime.trainer import learner_threads, pool_threads  # imports torch; only here

    sized = [o.split("=", 1)[1] for o in arm.overrides if o.split("=", 1)[0] == "training.learner_threads"]
    setting = int(sized[-1]) if sized and sized[-1].isdigit() else None
    # the trainer's own split on a CPU learner, with the pool pinned to the CPUs the learner leaves
    pool = cpus[-pool_threads(len(cpus), setting, on_cuda=False):]
    extra = [f"sim.cpu_ids=[{','.join(map(str, pool))}]"]
    if not sized:
        extra.append(f"training.learner_threads={learner_threads(len(cpus), None, on_cuda=False)}")
    # before the arm's overrides (the last value of a key wins), after the base
    head = len(cmd) - len(arm.overrides) - 1
    return cmd[:head] + extra + cmd[head:]


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


def run_job(args: argparse.Namespace, job: Job, cpus: list[int] | None) -> dict[str, Any]:
    """Train and evaluate one arm x seed; its ``runs`` entry (keys of :data:`RUN_KEYS`)."""
    cmd = pinned_command(job.cmd, cpus, job.arm)
    tag = f"[{job.arm.name} s{job.seed}] "
    _announce(cmd, tag)
    env = job.arm.environment()
    rc, run_dir, checkpoint, wall_s = run_training(cmd, prefix=tag, cpus=cpus, env=env)
    run: dict[str, Any] = dict.fromkeys(RUN_KEYS)
    run.update(arm=job.arm.name, seed=job.seed, overrides=list(job.arm.overrides), command=cmd, cpu_ids=cpus,
               train_returncode=rc, num_envs=job.num_envs, num_updates=job.num_updates,
               env_steps_target=None if job.iterations is None else job.iterations * job.num_envs,
               train_process_wall_s=wall_s, eval=dict.fromkeys(METRIC_NAMES))
    if run_dir is None or not run_dir.is_dir():
        run["stopped_by"] = "signal" if children.stopped() else "error"
        return run
    facts = run_facts(run_dir, checkpoint, job.num_envs, job.num_updates)
    run.update({k: v for k, v in facts.items() if k in RUN_KEYS})
    reached = job.iterations is not None and run["iterations"] is not None and run["iterations"] >= job.iterations
    stopped = rc != 0 and children.stopped() is not None
    run["stopped_by"] = "signal" if stopped else "error" if rc != 0 else "env_steps" if reached else "time"
    if checkpoint is None or not checkpoint.is_file():
        return run
    if registry.kind(args.task) == "motion_tracking":
        eval_json = run_dir / "eval" / "final.json"
        ecmd = eval_command(args, checkpoint, eval_json) + ["--no-plot", "--no-progress"]
        run.update(final_eval(ecmd, checkpoint, eval_json, args.random_episodes, cpus, tag, env))
    if is_locomotion(args.task):
        run["eval_locomotion"] = locomotion_eval(args.task, checkpoint, "checkpoint",
                                                 run_dir / "eval" / "final_locomotion.json", cpus, tag, env)
    return run


def is_locomotion(task: str) -> bool:
    """Whether ``task`` is evaluated in command bins (``unilab-eval --task <task>``) rather than on clips."""
    return registry.kind(task) == "locomotion"


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
    if ckpt is not None and is_locomotion(args.task):  # the zero action's episode length, steps
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


def machine_facts() -> dict[str, Any]:
    """``lscpu``'s ``Model name`` (None where lscpu is missing), the CPU count and the usable CPUs."""
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        text = ""
    m = re.search(r"^Model name:\s*(.+)$", text, re.MULTILINE)
    return {"lscpu_model_name": m.group(1).strip() if m else None, "cpu_count": os.cpu_count(),
            "usable_cpus": usable_cpus()}


def plot_runs(report: dict[str, Any], path: Path) -> Path:
    """One PNG: episode length vs env steps of every arm (colour) and seed (line style), baselines dashed."""
    import matplotlib  # only when plotting

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5.5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    styles = ["-", "--", ":", "-."]
    arms = [a["name"] for a in report["arms"]]
    seeds = report["seeds"]
    for r in report["runs"]:
        s = r["series"]
        if not s or not s["env_steps"]:
            continue
        ax.plot(s["env_steps"], s["episode_length"], color=colors[arms.index(r["arm"]) % len(colors)],
                linestyle=styles[seeds.index(r["seed"]) % len(styles)], label=f"{r['arm']} seed {r['seed']}")
    lines = [(k, v) for k, v in report["baselines"].items() if isinstance(v, (int, float))]
    where = "command-bin episodes" if is_locomotion(report["task"]) else "random starts"
    for (kind, value), color in zip(lines, ("0.4", "0.7")):
        ax.axhline(value, color=color, linestyle="--", linewidth=1, label=f"{kind} policy ({where})")
    if report["env_steps_budget"]:
        ax.axvline(report["env_steps_budget"], color="0.8", linewidth=1)
    ax.set(xlabel="env steps", ylabel="train episode length (steps)",
           title=f"{report['task']} / {report['algo']}: episode length vs env steps")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def compare_table(report: dict[str, Any]) -> str:
    """arm, seed, env steps, speed, train episode length at 25/50/75/100 % of the budget and its last tenth,
    the first failure on the clips from frame 0 (the earliest over clips; "-" when none failed), eval metrics."""
    steps = report["checkpoint_env_steps"]
    picks = [round(f * CHECKPOINTS) - 1 for f in TABLE_FRACTIONS]
    headers = ["arm", "seed", "env_steps", "stop", "wall_s", "steps/s", "ms/update",
               *[f"len@{round(100 * f)}%" for f in TABLE_FRACTIONS], "len_last10%", "first_fail", *METRIC_NAMES]
    rows = []
    for r in report["runs"]:
        lengths = (r["at_checkpoints"] or {}).get("episode_length") or [None] * len(steps)
        at = [lengths[i] if i < len(lengths) else None for i in picks]
        fails = [c["first_failure_frame"] for c in (r.get("eval_clips") or {}).values()
                 if c.get("first_failure_frame") is not None]
        rows.append([r["arm"], r["seed"], r["env_steps"], r["stopped_by"], r["train_process_wall_s"],
                     r["steps_per_sec"], r["learner_ms_per_update"], *at, r["episode_length_last10pct"],
                     min(fails) if fails else None, *[r["eval"].get(k) for k in METRIC_NAMES]])
    return format_table(headers, [["-" if v is None else f"{v:.4g}" if isinstance(v, float) else v for v in row]
                                  for row in rows])


def unwritable(*paths: Path) -> str | None:
    """Why a report file cannot be written (checked before the trainings, not after them), or None."""
    try:
        for path in paths:
            check_writable(path, "report")
    except OSError as err:
        return str(err)
    return None


def usage_error(args: argparse.Namespace, bounds: Sequence[tuple[str, float | None, float, bool]]) -> str | None:
    """The first flag out of its range (``(flag, value, low, strict)``; a None value is unset) or a pass-through
    override that is not KEY=VALUE, as a message; None when all is well."""
    for flag, value, low, strict in bounds:
        if value is not None and not (value > low if strict else value >= low):  # NaN fails too
            return f"{flag} must be {'>' if strict else '>='} {low:g}, got {value}"
    bad = [o for o in args.overrides if "=" not in o]
    return f"overrides must be KEY=VALUE, got {bad}" if bad else None


def compare_main(args: argparse.Namespace) -> int:
    """``--arm`` / ``--seeds`` / ``--env-steps`` / ``--parallel``: every arm x seed, one JSON and one PNG."""
    try:
        arms = with_sources(parse_arms(args.arm), args.arm_src)
        seeds = parse_seeds(args.seeds)
        slots = cpu_slots(args.parallel, usable_cpus())
        jobs = make_jobs(args, arms, seeds)
    except ValueError as err:
        print(f"unilab-bench learn: error: {err}", file=sys.stderr)
        return 2
    for job in jobs:
        if job.iterations is not None and job.iterations * job.num_envs != args.env_steps:
            print(f"unilab-bench learn: note: arm {job.arm.name}: {args.env_steps} env steps is not a multiple of "
                  f"its {job.num_envs} envs; it trains {job.iterations * job.num_envs}", flush=True)
    budget_tag = f"{args.env_steps}steps_" if args.env_steps is not None else ""
    out = Path(args.out or Path(args.log_root) / f"learn_arms_{args.algo}_{budget_tag}{args.minutes:g}min.json")
    png = Path(args.plot) if args.plot else out.with_suffix(".png")
    if (error := unwritable(out, png)) is not None:
        print(f"unilab-bench learn: error: {error}", file=sys.stderr)
        return 2

    free: queue.Queue = queue.Queue()  # the CPU sets not in use
    for slot in slots:
        free.put(slot)

    def work(job: Job) -> dict[str, Any]:
        cpus = free.get()
        try:
            return run_job(args, job, cpus)
        finally:
            free.put(cpus)

    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=len(slots)) as pool:
        runs = list(pool.map(work, jobs))
    # in this order: wall_s before the baselines' evaluations
    report: dict[str, Any] = {
        "benchmark": "learn_arms", "task": args.task, "algo": args.algo, "minutes": args.minutes,
        "env_steps_budget": args.env_steps, "seeds": seeds, "parallel": args.parallel, "cpu_slots": slots,
        "arms": [{"name": a.name, "overrides": list(a.overrides), "src": a.src} for a in arms],
        "common_overrides": list(args.overrides), "machine": machine_facts(), "wall_s": time.monotonic() - t0,
        "baselines": baseline_episode_lengths(args, runs, [a.name for a in arms if a.src is not None]),
        "checkpoint_env_steps": add_checkpoints(runs, args.env_steps), "runs": runs, "plot": str(png),
        "stop_signal": children.stopped(),
    }
    plot_runs(report, png)
    print(compare_table(report))
    print(f"unilab-bench learn: JSON written to {write_json(out, report)}; plot {png}")
    ok = all(r["train_returncode"] == 0 and r["eval_returncode"] in (0, None) for r in runs)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""Learning benchmark: a fixed-budget G1 tracking run, then ``unilab-eval`` on its final checkpoint.

Runs ``train`` (default: the CPU recipe ``--algo sac_cpu`` for 20 minutes of
training, ``training.time_limit_s``) as a subprocess, then ``unilab-eval`` on
the final checkpoint, and writes one JSON whose keys stay the same across
commits: the learning curve's summary read back from the run's TensorBoard
scalars (episode return and length, steps/s, iterations, env steps, wall
time) and the final tracking metrics. Compare learning quality across commits
by running it with the same flags on the same machine.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from unilab.bench.report import format_table, write_json
from unilab.eval.metrics import METRIC_NAMES

TASK = "g1_motion_tracking"
# scalar tag -> summary key prefix; every key is always present in the JSON (null when not logged)
CURVE_TAGS = {
    "episode/return_mean": "return",
    "episode/length_mean": "episode_length",
    "reward/mean": "reward_per_step",
    "perf/steps_per_sec": "steps_per_sec",
}
CURVE_KEYS = (
    "return_final", "return_max", "return_last10pct_mean",
    "episode_length_final", "episode_length_max", "episode_length_last10pct_mean",
    "reward_per_step_final", "reward_per_step_max", "reward_per_step_last10pct_mean",
    "steps_per_sec_final", "steps_per_sec_max", "steps_per_sec_last10pct_mean", "steps_per_sec_mean",
    "iterations", "env_steps", "num_envs", "train_wall_s", "points",
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="unilab-bench learn",
        description="Fixed-budget G1 motion-tracking training, then unilab-eval on the final checkpoint; one JSON "
                    "with the learning-curve summary and the tracking metrics (compare it across commits).",
    )
    p.add_argument("--algo", default="sac_cpu", help="algorithm recipe (train --algo; default: sac_cpu)")
    p.add_argument("--minutes", type=float, default=20.0,
                   help="training budget in minutes (training.time_limit_s; default: 20)")
    p.add_argument("--num-envs", type=int, default=None, help="algo.num_envs (default: the recipe's)")
    p.add_argument("--log-root", default="logs/bench_learn",
                   help="training.log_root of the run (default: logs/bench_learn)")
    p.add_argument("--out", default=None,
                   help="JSON path (default: <log root>/learn_<algo>_<minutes>min.json)")
    p.add_argument("--eval-max-frames", type=int, default=None,
                   help="unilab-eval --max-frames (default: whole clips)")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                   help="extra train overrides passed through, e.g. algo.batch_size=512 task.sim_dt=0.004")
    return p


def train_command(args: argparse.Namespace) -> list[str]:
    """The ``train`` command line of the benchmark run."""
    cmd = [sys.executable, "-m", "unilab.cli.train", "--algo", args.algo, "--task", TASK,
           f"training.time_limit_s={args.minutes * 60:g}", "training.no_play=true",
           f"training.log_root={args.log_root}", "training.experiment_name=bench_learn",
           "algo.max_iterations=10000000"]  # the time limit ends the run
    if args.num_envs is not None:
        cmd.append(f"algo.num_envs={args.num_envs}")
    return cmd + list(args.overrides)


def run_training(cmd: list[str]) -> tuple[int, Path | None, Path | None, float]:
    """Run ``train``, echoing its output; returns (rc, run dir, final checkpoint, wall s)."""
    run_dir = checkpoint = None
    t0 = time.monotonic()
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1) as proc:
        for line in proc.stdout:
            sys.stdout.write(line)
            if line.startswith("unilab: logging to "):
                run_dir = Path(line.removeprefix("unilab: logging to ").strip())
            elif line.startswith("unilab: run directory ") and "; checkpoint " in line:
                head, _, tail = line.partition("; checkpoint ")
                run_dir = Path(head.removeprefix("unilab: run directory ").strip())
                checkpoint = Path(tail.strip())
        rc = proc.wait()
    return rc, run_dir, checkpoint, time.monotonic() - t0


def run_eval(cmd: list[str]) -> int:
    """Run ``unilab-eval`` (its table and progress go to the terminal); its return code."""
    return subprocess.run(cmd).returncode


def read_curves(run_dir: str | Path) -> dict[str, list[tuple[int, float, float]]]:
    """``{tag: [(step, wall_time, value), ...]}`` of every scalar in the run's event files."""
    from tensorboard.backend.event_processing import event_accumulator as ea  # noqa: PLC0415 - heavy, only here

    acc = ea.EventAccumulator(str(run_dir), size_guidance={ea.SCALARS: 0})
    acc.Reload()
    return {tag: [(e.step, e.wall_time, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()[ea.SCALARS]}


def curve_summary(curves: dict[str, list[tuple[int, float, float]]], num_envs: int) -> dict[str, Any]:
    """The learning curve in the fixed keys of :data:`CURVE_KEYS` (None where a tag was never logged).

    ``*_final``: the last logged value; ``*_last10pct_mean``: the mean over the
    last tenth of the points (at least one); ``iterations`` / ``env_steps``: of
    the last logged point (steps are env steps = iterations x num_envs; ``main``
    replaces them by the final checkpoint's);
    ``train_wall_s``: wall time between the first and the last logged point.
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
    sps = [v for _, _, v in curves.get("perf/steps_per_sec", []) if math.isfinite(v)]
    if sps:
        out["steps_per_sec_mean"] = sum(sps) / len(sps)
    points = [p for series in curves.values() for p in series]
    out["num_envs"] = num_envs
    out["points"] = len(curves.get("episode/return_mean", []))
    if points:
        last = max(s for s, _, _ in points)
        out["env_steps"] = int(last)
        out["iterations"] = int(last // num_envs) if num_envs else None
        walls = [w for _, w, _ in points]
        out["train_wall_s"] = max(walls) - min(walls)
    return out


def build_report(args: argparse.Namespace, cmd: list[str], rc: int, wall_s: float, run_dir: Path | None,
                 checkpoint: Path | None, curve: dict[str, Any], evaluation: dict[str, Any] | None,
                 eval_rc: int | None) -> dict[str, Any]:
    """The benchmark JSON (fixed keys; missing values are null)."""
    overall = (evaluation or {}).get("overall", {})
    return {
        "benchmark": "learn",
        "task": TASK,
        "algo": args.algo,
        "minutes": args.minutes,
        "num_envs": curve.get("num_envs"),
        "overrides": list(args.overrides),
        "command": cmd,
        "run_dir": None if run_dir is None else str(run_dir),
        "checkpoint": None if checkpoint is None else str(checkpoint),
        "train_returncode": rc,
        "train_process_wall_s": wall_s,
        "curve": curve,
        "eval_returncode": eval_rc,
        "eval": {m: overall.get(m) for m in METRIC_NAMES},
        "eval_clips": (evaluation or {}).get("clips", {}),
    }


def summary_table(report: dict[str, Any]) -> str:
    rows = [(f"curve/{k}", _cell(v)) for k, v in report["curve"].items()]
    rows += [(f"eval/{k}", _cell(v)) for k, v in report["eval"].items()]
    return format_table(["metric", "value"], rows)


def _cell(v: Any) -> Any:
    return "-" if v is None else v


def _num_envs(run_dir: Path) -> int:
    cfg = yaml.safe_load((run_dir / "config.yaml").read_text())
    return int(cfg["algo"]["num_envs"])


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    bad = [o for o in args.overrides if "=" not in o]
    if bad:
        print(f"unilab-bench learn: error: overrides must be KEY=VALUE, got {bad}", file=sys.stderr)
        return 2
    if not args.minutes > 0:
        print(f"unilab-bench learn: error: --minutes must be > 0, got {args.minutes}", file=sys.stderr)
        return 2
    out = Path(args.out or Path(args.log_root) / f"learn_{args.algo}_{args.minutes:g}min.json")
    cmd = train_command(args)
    print("unilab-bench learn: " + " ".join(cmd), flush=True)
    rc, run_dir, checkpoint, wall_s = run_training(cmd)
    if run_dir is None or not (run_dir / "config.yaml").is_file():
        print(f"unilab-bench learn: error: training exited with rc {rc} before making a run directory",
              file=sys.stderr)
        return rc or 1
    curve = curve_summary(read_curves(run_dir), _num_envs(run_dir))
    m = re.fullmatch(r"model_(\d+)\.pt", checkpoint.name) if checkpoint is not None else None
    if m:  # the run's last iteration (scalars are logged every log_interval iterations)
        curve["iterations"] = int(m.group(1))
        curve["env_steps"] = curve["iterations"] * curve["num_envs"]
    evaluation, eval_rc = None, None
    if checkpoint is not None and checkpoint.is_file():
        eval_json = run_dir / "eval" / "final.json"
        ecmd = [sys.executable, "-m", "unilab.cli.eval", str(checkpoint), "--json", str(eval_json)]
        if args.eval_max_frames:
            ecmd += ["--max-frames", str(args.eval_max_frames)]
        print("unilab-bench learn: " + " ".join(ecmd), flush=True)
        eval_rc = run_eval(ecmd)
        if eval_rc == 0:
            evaluation = json.loads(eval_json.read_text())
    report = build_report(args, cmd, rc, wall_s, run_dir, checkpoint, curve, evaluation, eval_rc)
    print(summary_table(report))
    print(f"unilab-bench learn: JSON written to {write_json(out, report)}")
    return 0 if rc == 0 and eval_rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

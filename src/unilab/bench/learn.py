"""Learning benchmark: a fixed-budget training run of a task, then ``unilab-eval`` on its final checkpoint.

Runs ``train`` (default: the task's CPU recipe for 20 minutes, ``training.time_limit_s``) as a subprocess, then
``unilab-eval``, and writes one JSON with keys fixed across commits: the learning-curve summary read back from the
run's TensorBoard scalars (episode return and length, steps/s, iterations, env steps, wall time) and the final metrics
(tracking, or per command bin against the zero policy for a locomotion task). Compare commits with the same flags on
the same machine. A training's output is kept in a log file beside its run directories; a stop signal stops the
trainings with their final checkpoints and still writes the JSON (:mod:`unilab.bench.children`).

Recipe comparison (``--arm``, ``--seeds``, ``--env-steps``, ``--parallel``): :mod:`unilab.bench.compare`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import yaml

from unilab.bench import children
from unilab.bench.compare import compare_main
from unilab.bench.evaluation import CURVE_KEYS, curve_summary, eval_command, final_eval, locomotion_eval, read_curves
from unilab.bench.options import unwritable, usage_error
from unilab.bench.report import format_table, write_json
from unilab.bench.training import announce, recipe, run_training, train_command
from unilab.eval.metrics import METRIC_NAMES
from unilab.tasks import registry


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="unilab-bench learn", description="Fixed-budget training of --task, then "
                                "unilab-eval on the final checkpoint; one JSON with the learning-curve summary and the "
                                "evaluation's metrics (compare it across commits).")
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


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.algo = recipe(args)
    compare = args.arm or args.arm_src or args.seeds is not None or args.env_steps is not None or args.parallel != 1
    # all refused before minutes of training
    bounds = [("--eval-start-stride", args.eval_start_stride, 1, False), ("--minutes", args.minutes, 0, True)]
    if compare:
        bounds += [("--env-steps", args.env_steps, 1, False), ("--parallel", args.parallel, 1, False),
                   ("--random-episodes", args.random_episodes, 0, False)]
    if error := usage_error(args, bounds):
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
    announce(cmd)
    rc, run_dir, checkpoint, wall_s = run_training(cmd)
    # fixed keys, missing values null; eval_locomotion: unilab-eval --task <task> (per bin and overall)
    evals = {"eval_returncode": None, "eval": dict.fromkeys(METRIC_NAMES), "eval_clips": {}, "eval_locomotion": None}
    if run_dir is None or not (run_dir / "config.yaml").is_file():  # stopped or failed during its start-up
        if not children.stopped():
            print(f"unilab-bench learn: error: training exited with rc {rc} before making a run directory",
                  file=sys.stderr)
        run_dir = checkpoint = num_envs = None
        curve: dict = dict.fromkeys(CURVE_KEYS)
    else:
        num_envs = int(yaml.safe_load((run_dir / "config.yaml").read_text())["algo"]["num_envs"])
        curve = curve_summary(read_curves(run_dir), num_envs, checkpoint)
    if checkpoint is not None and checkpoint.is_file() and registry.kind(args.task) == "locomotion":
        locomotion = {kind: locomotion_eval(args.task, checkpoint, kind,
                                            run_dir / "eval" / f"final_locomotion_{kind}.json")
                      for kind in ("checkpoint", "zero")}
        # standing still survives pushes-free episodes too: this one tells "falls to pushes" from "cannot stand"
        locomotion["checkpoint_no_pushes"] = locomotion_eval(
            args.task, checkpoint, "checkpoint", run_dir / "eval" / "final_locomotion_no_pushes.json", pushes=False)
        evals.update(eval_returncode=0 if all(locomotion.values()) else 1, eval_locomotion=locomotion)
    elif checkpoint is not None and checkpoint.is_file():
        eval_json = run_dir / "eval" / "final.json"
        evals.update(final_eval(eval_command(args, checkpoint, eval_json), checkpoint, eval_json, 0))
    report = {"benchmark": "learn", "task": args.task, "algo": args.algo, "minutes": args.minutes,
              "num_envs": num_envs, "overrides": list(args.overrides), "command": cmd,
              "run_dir": None if run_dir is None else str(run_dir),
              "checkpoint": None if checkpoint is None else str(checkpoint), "train_returncode": rc,
              "train_process_wall_s": wall_s, "curve": curve, **evals, "stop_signal": children.stopped()}
    rows = [(f"curve/{k}", v) for k, v in curve.items()] + [(f"eval/{k}", v) for k, v in report["eval"].items()]
    for kind, res in (report["eval_locomotion"] or {}).items():
        rows += [(f"locomotion/{kind}/{k}", v) for k, v in ((res or {}).get("overall") or {}).items()]
    print(format_table(["metric", "value"], [(k, "-" if v is None else v) for k, v in rows]))
    print(f"unilab-bench learn: JSON written to {write_json(out, report)}")
    return 0 if rc == 0 and report["eval_returncode"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

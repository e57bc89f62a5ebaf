"""Recipe comparison (``unilab-bench learn --arm/--seeds/--env-steps/--parallel``): every arm x seed trains to the same
env steps (``algo.max_iterations`` = env steps / num_envs; ``--minutes`` stays a wall-time cap), optionally side by
side on disjoint CPU sets, then is evaluated; one JSON holds every run (curves at common env-step checkpoints, final
metrics, speed), one PNG shows episode length vs env steps of every run."""

from __future__ import annotations

import argparse
import itertools
import os
import queue
import re
import shlex
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from unilab.bench import children, evaluation
from unilab.bench.options import unwritable
from unilab.bench.report import format_table, machine_facts, write_json
from unilab.bench.training import announce, run_training, train_command
from unilab.eval.metrics import METRIC_NAMES
from unilab.sim.cpu import usable_cpus
from unilab.tasks import registry

ARM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
RESERVED_KEYS = ("algo.max_iterations", "training.time_limit_s", "training.log_root", "training.experiment_name",
                 "algo.seed", "training.seed", "sim.cpu_ids")
"""Train keys the comparison sets itself (budget, seeds, run placement, pinning): an arm may not override them."""
TABLE_FRACTIONS = (0.25, 0.5, 0.75, 1.0)
RUN_KEYS = ("arm", "seed", "overrides", "command", "cpu_ids", "run_dir", "checkpoint", "train_returncode",
            "eval_returncode", "stopped_by", "num_envs", "num_updates", "iterations", "env_steps",
            "env_steps_target", "train_process_wall_s", "train_wall_s", "steps_per_sec", "learner_train_ms",
            "learner_ms_per_update", "collector_env_step_ms", "episode_length_last10pct", "return_last10pct",
            "at_checkpoints", "series", "curve", "eval", "eval_clips", "eval_random_starts")
"""The keys of every entry of ``runs`` in the comparison JSON (null when unknown)."""


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


def run_job(args: argparse.Namespace, job: Job, cpus: list[int] | None) -> dict[str, Any]:
    """Train and evaluate one arm x seed; its ``runs`` entry (keys of :data:`RUN_KEYS`)."""
    cmd = pinned_command(job.cmd, cpus, job.arm)
    tag = f"[{job.arm.name} s{job.seed}] "
    announce(cmd, tag)
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
    facts = evaluation.run_facts(run_dir, checkpoint, job.num_envs, job.num_updates)
    run.update({k: v for k, v in facts.items() if k in RUN_KEYS})
    reached = job.iterations is not None and run["iterations"] is not None and run["iterations"] >= job.iterations
    stopped = rc != 0 and children.stopped() is not None
    run["stopped_by"] = "signal" if stopped else "error" if rc != 0 else "env_steps" if reached else "time"
    if checkpoint is None or not checkpoint.is_file():
        return run
    if registry.kind(args.task) == "motion_tracking":
        eval_json = run_dir / "eval" / "final.json"
        ecmd = evaluation.eval_command(args, checkpoint, eval_json) + ["--no-plot", "--no-progress"]
        run.update(evaluation.final_eval(ecmd, checkpoint, eval_json, args.random_episodes, cpus, tag, env))
    if registry.kind(args.task) == "locomotion":
        run["eval_locomotion"] = evaluation.locomotion_eval(
            args.task, checkpoint, "checkpoint", run_dir / "eval" / "final_locomotion.json", cpus, tag, env)
    return run


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
    where = "command-bin episodes" if registry.kind(report["task"]) == "locomotion" else "random starts"
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
    picks = [round(f * evaluation.CHECKPOINTS) - 1 for f in TABLE_FRACTIONS]
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
        "baselines": evaluation.baseline_episode_lengths(args, runs, [a.name for a in arms if a.src is not None]),
        "checkpoint_env_steps": evaluation.add_checkpoints(runs, args.env_steps), "runs": runs, "plot": str(png),
        "stop_signal": children.stopped(),
    }
    plot_runs(report, png)
    print(compare_table(report))
    print(f"unilab-bench learn: JSON written to {write_json(out, report)}; plot {png}")
    ok = all(r["train_returncode"] == 0 and r["eval_returncode"] in (0, None) for r in runs)
    return 0 if ok else 1

"""GPU check: the flagship recipe (``--algo sac``, 4096 G1 envs) on a CUDA machine for a few minutes.

Trains ``train --algo sac --task T algo.num_envs=4096`` (T: ``--task``, default ``registry.DEFAULT_TASK``) for
``--minutes``, then evaluates the final checkpoint (``unilab-eval``, clip starts and random starts), and writes one
JSON: steps/s, learner ms per update, the collector/learner overlap and the eval metrics. The overlap is the
learner's train time over the collector's env.step time per iteration (``timing/learner_train_ms`` /
``timing/collector_env_step_ms``): the learner trains while the collector steps (it sends the next actions first,
then trains), so below 1 the training is hidden behind physics, above 1 the collector waits
(``collector_action_wait_ms``). ``--tiny`` (automatic without CUDA) runs the same code path with a few envs, small
nets and a few iterations on the CPU, so that CI covers it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from unilab.bench import children
from unilab.bench.evaluation import final_eval, run_facts
from unilab.bench.options import unwritable, usage_error
from unilab.bench.report import format_table, machine_facts, write_json
from unilab.bench.training import run_training, train_command
from unilab.eval.metrics import METRIC_NAMES
from unilab.tasks import registry

TINY_OVERRIDES = (
    "algo.num_envs=8", "algo.batch_size=64", "algo.buffer_size=64", "algo.learning_starts=2",
    "algo.num_updates=2", "algo.actor_hidden_dims=[16]", "algo.critic_hidden_dims=[16]", "algo.num_atoms=11",
    "algo.compile=false", "algo.device=cpu", "training.log_interval=2", "training.console_interval_s=1",
)
"""The sizes of ``--tiny``: seconds per run on a 2-core CPU, every phase of the real run still there."""
REPORT_KEYS = (
    "tiny", "cuda", "device_name", "torch", "task", "algo", "num_envs", "minutes", "command", "run_dir",
    "checkpoint", "train_returncode", "eval_returncode", "iterations", "env_steps", "train_wall_s",
    "train_process_wall_s", "steps_per_sec", "steps_per_sec_final", "num_updates", "learner_train_ms",
    "learner_ms_per_update", "collector_env_step_ms", "collector_action_wait_ms", "learner_collector_wait_ms",
    "overlap", "eval", "eval_random_starts", "machine",
)
"""The keys of the JSON (after ``environment`` and ``benchmark``; null when unknown)."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="unilab-bench gpu", description="Train the sac recipe (4096 G1 envs, learner "
                                "on the GPU) for --minutes, evaluate it, and write one JSON: steps/s, learner ms per "
                                "update, collector/learner overlap, eval metrics. Without CUDA (or with --tiny) the "
                                "same path runs at tiny sizes on the CPU.")
    p.add_argument("--minutes", type=float, default=10.0,
                   help="training budget in minutes (training.time_limit_s; default: 10)")
    p.add_argument("--num-envs", type=int, default=4096, help="algo.num_envs of the full run (default: 4096)")
    p.add_argument("--task", default=registry.DEFAULT_TASK, help=f"train --task (default: {registry.DEFAULT_TASK}); "
                   "unilab-eval runs only for motion-tracking tasks")
    p.add_argument("--tiny", action="store_true", help="tiny sizes on the CPU (8 envs, 16-unit nets, --iterations "
                   "iterations); automatic when no CUDA device is found")
    p.add_argument("--iterations", type=int, default=20, help="--tiny: algo.max_iterations (default: 20)")
    p.add_argument("--log-root", default="logs/bench_gpu", help="training.log_root (default: logs/bench_gpu)")
    p.add_argument("--out", default=None, help="JSON path (default: <log root>/gpu_check[_tiny].json)")
    p.add_argument("--eval-max-frames", type=int, default=None,
                   help="unilab-eval --max-frames (default: whole clips; --tiny: 10)")
    p.add_argument("--random-episodes", type=int, default=128, metavar="N", help="episodes of the random-start "
                   "evaluation (unilab-eval --starts random); 0: none (default: 128; --tiny: 8)")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="extra train overrides, appended last")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    error = usage_error(args, (("--minutes", args.minutes, 0, True), ("--num-envs", args.num_envs, 1, False),
                                     ("--iterations", args.iterations, 1, False),
                                     ("--random-episodes", args.random_episodes, 0, False)))
    if error:
        print(f"unilab-bench gpu: error: {error}", file=sys.stderr)
        return 2
    from unilab.cli.config import cuda_available  # probes without torch

    cuda = cuda_available()
    tiny = args.tiny or not cuda
    if tiny and not args.tiny:
        print("unilab-bench gpu: no CUDA device: running the tiny CPU check (--tiny)", flush=True)
    eval_frames = args.eval_max_frames or (10 if tiny else None)
    episodes = min(args.random_episodes, 8) if tiny else args.random_episodes
    out = Path(args.out or Path(args.log_root) / f"gpu_check{'_tiny' if tiny else ''}.json")
    if (error := unwritable(out)) is not None:
        print(f"unilab-bench gpu: error: {error}", file=sys.stderr)
        return 2
    with children.stop_signals():  # a stop signal: the training stops with a final checkpoint, the JSON is written
        rc = _run(args, tiny, cuda, eval_frames, episodes, out)
    return 128 + children.stopped() if children.stopped() else rc


def _run(args: argparse.Namespace, tiny: bool, cuda: bool, eval_frames: int | None, episodes: int, out: Path) -> int:
    """Train, evaluate, write the JSON; the return code."""
    sizes = ([*TINY_OVERRIDES, f"algo.max_iterations={args.iterations}"] if tiny  # else the time limit ends the run
             else [f"algo.num_envs={args.num_envs}", "algo.max_iterations=10000000"])
    cmd = train_command(args, "sac", "gpu_check", sizes)
    print("unilab-bench gpu: " + " ".join(cmd), flush=True)
    rc, run_dir, checkpoint, wall_s = run_training(cmd)
    import torch  # heavy, only here

    report: dict[str, Any] = dict.fromkeys(REPORT_KEYS)
    report.update(tiny=tiny, cuda=cuda, task=args.task, algo="sac", minutes=args.minutes, command=cmd,
                  train_returncode=rc, train_process_wall_s=wall_s, eval=dict.fromkeys(METRIC_NAMES),
                  machine=machine_facts(), torch=torch.__version__,  # not tiny: CUDA was found
                  device_name=torch.cuda.get_device_name(0) if not tiny and torch.cuda.is_available() else "cpu")
    if run_dir is not None and (run_dir / "config.yaml").is_file():
        import yaml

        algo = yaml.safe_load((run_dir / "config.yaml").read_text())["algo"]
        report["num_envs"], report["num_updates"] = int(algo["num_envs"]), int(algo["num_updates"])
        facts = run_facts(run_dir, checkpoint, report["num_envs"], report["num_updates"])
        report.update({k: v for k, v in facts.items() if k in REPORT_KEYS})
        if checkpoint is not None and checkpoint.is_file() and registry.kind(args.task) == "motion_tracking":
            eval_json = run_dir / "eval" / "final.json"
            ecmd = [sys.executable, "-m", "unilab.cli.eval", str(checkpoint), "--json", str(eval_json),
                    "--no-plot", "--no-progress", "--device", "cpu" if tiny else "cuda"]
            if eval_frames:
                ecmd += ["--max-frames", str(eval_frames)]
            final = final_eval(ecmd, checkpoint, eval_json, episodes)
            report.update({k: v for k, v in final.items() if k in REPORT_KEYS})
    rows = [(k, "-" if report[k] is None else report[k]) for k in REPORT_KEYS
            if k not in ("command", "eval", "eval_random_starts", "machine")]
    rows += [(f"eval/{k}", "-" if v is None else v) for k, v in report["eval"].items()]
    rows += [(f"eval_random_starts/{k}", v) for k, v in (report["eval_random_starts"] or {}).items()]
    print(format_table(["metric", "value"], rows))
    print(f"unilab-bench gpu: JSON written to {write_json(out, {'benchmark': 'gpu', **report})}")
    ok = rc == 0 and report["eval_returncode"] in (0, None) and checkpoint is not None
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

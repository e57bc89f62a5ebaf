"""`unilab-bench`: the benchmarks of scripts/benchmark/env/, the learning benchmark and the GPU check."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

from unilab.cli import run_cli

# subcommand -> (module with main(argv), what it measures)
BENCHMARKS = {
    "pool-threads": ("unilab.bench.pool_thread_scaling",
                     "physics steps/s of the MuJoCo pool by thread count, pinned or not"),
    "env-phases": ("unilab.bench.env_step_phase_cpu",
                   "env.step phases (backend/update_state/reset_done): ms and cores"),
    "collector": ("unilab.bench.offpolicy_collector_active",
                  "collector-only steps/s with a stub policy vs raw env steps/s"),
    "learn": ("unilab.bench.learn",
              "fixed-budget training of a task (its CPU recipe, 20 min) + unilab-eval: curve and the task's metrics; "
              "--arm/--seeds/--env-steps/--parallel compare recipes at equal env steps"),
    "learner": ("unilab.bench.learner",
                "one FastSAC update at a recipe's sizes (--algo, --task, --device): ms, split, ops and host syncs per "
                "update, against holosoma's own update in the same run"),
    "gpu": ("unilab.bench.gpu_check",
            "sac recipe at 4096 envs on CUDA for --minutes: steps/s, learner ms/update, overlap, eval "
            "(--tiny or no CUDA: tiny CPU run)"),
}


def usage() -> str:
    lines = ["usage: unilab-bench BENCHMARK [options]   (unilab-bench BENCHMARK --help for its options)", "",
             "benchmarks:"]
    lines += [f"  {name:<14} {doc}" for name, (_, doc) in BENCHMARKS.items()]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in BENCHMARKS:
        print(f"unilab-bench: unknown benchmark {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    rc = run_cli(f"unilab-bench {name}", importlib.import_module(BENCHMARKS[name][0]).main, rest)
    return rc if isinstance(rc, int) else 0


if __name__ == "__main__":
    sys.exit(main())

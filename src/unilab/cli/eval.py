"""`unilab-eval`: tracking metrics of a trained motion-tracking policy on every clip."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from unilab.gl_env import gl_disabled

DESCRIPTION = """\
Roll out a trained motion-tracking policy deterministically on every clip of its task, from the
clip's first frame to its last: the env starts exactly at the reference frame 0 (no reset noise),
the policy's mean action is applied, observation noise is off and nothing is reset on the way (a
failure is recorded and the rollout goes on). Reports per clip and overall: success_rate (no
termination fired), mpjpe_mm (tracked bodies, world frame), mpjpe_local_mm (each body in its anchor
body's frame), anchor_pos_err (m), anchor_ori_err (rad), joint_pos_err (rad) and joint_vel_err
(rad/s), as a table, a JSON file and one PNG per clip of the errors over its frames."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="unilab-eval", description=DESCRIPTION,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("checkpoint", metavar="RUN_DIR_OR_CHECKPOINT",
                   help="a run directory (its latest model_<iter>.pt) or a model_<iter>.pt file")
    p.add_argument("--json", metavar="PATH", default=None,
                   help="JSON report path; the PNGs go next to it (default: <run dir>/eval/eval_<iter>.json)")
    p.add_argument("--clips", nargs="+", metavar="CLIP", default=None,
                   help="clips to evaluate: names (file stems) or indices into the task's clip list "
                        "(default: every clip)")
    p.add_argument("--randomization", choices=("on", "off"), default="off",
                   help="on: keep the checkpoint's domain randomization (task.randomization); "
                        "off: every randomization term disabled (default: off)")
    p.add_argument("--max-frames", type=int, default=None, metavar="N",
                   help="evaluate only the first N frames of each clip, for quick checks (default: whole clips)")
    p.add_argument("--envs-per-clip", type=int, default=1, metavar="N",
                   help="envs rolled out per clip; only differ with --randomization on (default: 1)")
    p.add_argument("--device", default="cpu", help="torch device of the policy (default: cpu)")
    p.add_argument("--threads", type=int, default=None, metavar="N",
                   help="physics pool and torch threads (default: min(envs, usable CPUs) for physics, 1 for torch)")
    p.add_argument("--seed", type=int, default=0, help="seed of the env's randomization draws (default: 0)")
    p.add_argument("--no-plot", action="store_true", help="write no PNG")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.add_argument("--nice", type=int, default=0, metavar="N",
                   help="lower this process's CPU priority by N (Unix; training's periodic evaluations use 10)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    with gl_disabled():  # before mujoco is imported: evaluation never renders
        return _main(args)


def _main(args: argparse.Namespace) -> int:
    if args.nice > 0 and hasattr(os, "nice"):
        os.nice(args.nice)
    # lazy: --help and usage errors without torch or mujoco
    from unilab.eval.report import default_json_path, format_table, plot_errors, write_json  # noqa: PLC0415
    from unilab.eval.rollout import EvalOptions, evaluate  # noqa: PLC0415

    try:
        opts = EvalOptions(clips=args.clips, max_frames=args.max_frames, randomization=args.randomization == "on",
                           envs_per_clip=args.envs_per_clip, device=args.device, threads=args.threads,
                           seed=args.seed, progress=not args.no_progress)
        result = evaluate(args.checkpoint, opts)
    except (FileNotFoundError, ValueError, IndexError) as err:
        print(f"unilab-eval: error: {err}", file=sys.stderr)
        return 2
    print(f"unilab-eval: {result.checkpoint} (iteration {result.iteration}), {len(result.clip_names)} clip(s)")
    print(format_table(result.summary), flush=True)
    path = write_json(args.json or default_json_path(result), result.to_json())
    print(f"unilab-eval: JSON written to {path}")
    if not args.no_plot:
        for png in plot_errors(result, path):
            print(f"unilab-eval: plot written to {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

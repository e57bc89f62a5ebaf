"""`unilab-export`: a checkpoint's deterministic policy as one ONNX file with its deploy metadata."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from unilab.cli import run_cli, task_overrides


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="unilab-export",
        description="Export a trained unilab policy to ONNX: input 'obs' (batch, obs_dim) float32, output "
        "'action' (batch, action_dim) in [-1, 1] (observation normaliser + actor mean + tanh + clamp). "
        "The file's metadata_props (JSON strings) hold what a deploy stack needs without unilab: joint names "
        "in action order, default joint positions, action scale, kp/kd, effort limits, control/sim dt, the "
        "observation layout (pieces, offsets, widths, noise), the anchor/tracked bodies, termination "
        "thresholds, the MJCF and reference clips, the unilab version and the full run config. "
        "Check it with scripts/deploy/sim2sim.py. --format holosoma writes holosoma's deploy format instead, the "
        "file holosoma_inference's WholeBodyTrackingPolicy / LocomotionPolicy run unchanged: input 'obs' + "
        "'time_step' (tracking, the clip embedded) or 'actor_obs' (locomotion), holosoma's observation terms in "
        "sorted name order, output in holosoma's action units with metadata dof_names, kp, kd, action_scale, "
        "robot_urdf (see unilab.deploy.holosoma for the conventions).",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("checkpoint", metavar="RUN_DIR_OR_CHECKPOINT",
                   help="a run directory (its newest model_<iter>.pt) or a model_<iter>.pt file")
    p.add_argument("overrides", nargs="*", metavar="task.KEY=VALUE",
                   help="--format holosoma: " + task_overrides.HELP)
    p.add_argument("--out", default="policy.onnx", help="path of the ONNX file to write (replaced atomically)")
    p.add_argument("--format", choices=("unilab", "holosoma"), default="unilab",
                   help="unilab: unilab's contract (scripts/deploy/sim2sim.py); holosoma: holosoma_inference's")
    p.add_argument("--clip", default=None,
                   help="--format holosoma, tracking: the clip to embed, a name (file stem) or index of the run's "
                        "clips (default: the run's only clip)")
    p.add_argument("--urdf", default=None,
                   help="--format holosoma: the robot's URDF for holosoma_inference's forward kinematics (default: "
                        "a built-in robot's, G1 or T1, from the holosoma wheel)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_intermixed_args(argv)  # task.KEY=VALUE may come after an option
    if args.format == "unilab":
        given = [f for f, v in (("--clip", args.clip), ("--urdf", args.urdf),
                                ("task.KEY=VALUE", args.overrides or None)) if v]
        if given:
            parser.error(f"{', '.join(given)}: only with --format holosoma")
    return run_cli("unilab-export", _main, args)


def _main(args: argparse.Namespace) -> int:
    from unilab.deploy.export import export_policy  # lazy: --help and usage errors without torch
    from unilab.paths import check_writable

    try:
        check_writable(args.out, "ONNX file")  # before the checkpoint is read and traced
    except OSError as err:
        print(f"unilab-export: error: {err}", file=sys.stderr)
        return 2
    try:
        if args.format == "holosoma":
            from unilab.deploy.holosoma import export_holosoma

            overrides = dict(task_overrides.parse_override(tok) for tok in args.overrides)
            hres = export_holosoma(args.checkpoint, args.out, args.clip, args.urdf, overrides)
            print(f"unilab-export: {hres.checkpoint} -> {hres.path} (holosoma {hres.kind} format, terms "
                  f"{', '.join(hres.terms)}: obs {hres.obs_dim}, {len(hres.metadata)} metadata entries)", flush=True)
            return 0
        res = export_policy(args.checkpoint, args.out)
    except (FileNotFoundError, ValueError) as err:  # missing / corrupt / foreign checkpoint, bad task config
        print(f"unilab-export: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # the output cannot be written (disk full, ...)
        print(f"unilab-export: error: cannot write {args.out}: {err}", file=sys.stderr)
        return 1
    print(f"unilab-export: {res.checkpoint} -> {res.path} (obs {res.obs_dim} -> action {res.action_dim}, "
          f"{len(res.metadata)} metadata entries)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

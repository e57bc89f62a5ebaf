"""`play`: roll out a trained checkpoint and write a video."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from unilab.cli import run_cli, task_overrides
from unilab.render.video import GHOST_MODES, exit_on_sigterm
from unilab.runtime.config import PlayConfig


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Defaults in the help, except None: those options' help says what they default to."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        return action.help if action.default is None else super()._get_help_string(action)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="play",
        description="Run a trained unilab policy on a few envs and film env 0 as an mp4 "
        "(offscreen OpenGL: EGL, else OSMesa). For motion tracking the reference motion is drawn as a "
        "translucent ghost and each frame shows the clip, the reference frame and the mean tracked-body "
        "position error in mm.",
        formatter_class=_HelpFormatter,
    )
    p.add_argument("checkpoint", nargs="?", default=None,
                   help="a run directory (its latest model_<iter>.pt) or a model_<iter>.pt file (or --onnx)")
    p.add_argument("overrides", nargs="*", metavar="task.KEY=VALUE", help=task_overrides.HELP)
    d = PlayConfig()  # play's defaults, declared once
    p.add_argument("--num-envs", type=int, default=d.num_envs, help="envs stepped (env 0 is filmed)")
    p.add_argument("--steps", type=int, default=d.steps, help="control steps to roll out")
    p.add_argument("--out", default=d.out, help="mp4 path (default: <run dir>/videos/play_<iter>.mp4)")
    p.add_argument("--no-video", action="store_true", help="only print the rollout numbers")
    p.add_argument("--device", default=d.device, help="torch device of the policy (default: cpu)")
    p.add_argument("--seed", type=int, default=d.seed, help="seed of the env resets")
    p.add_argument("--width", type=int, default=d.width, help="video width in pixels (even)")
    p.add_argument("--height", type=int, default=d.height, help="video height in pixels (even)")
    p.add_argument("--ghost", choices=GHOST_MODES, default=d.ghost,
                   help="the reference motion as a translucent ghost: overlay (where the reference is, on the "
                   "robot when it tracks well), side (shifted to the robot's right on screen), off; tasks "
                   "without a reference (pendulum) draw none")
    p.add_argument("--onnx", metavar="FILE", default=None,
                   help="play a holosoma-format ONNX policy instead of a checkpoint: a file or a published name "
                   "(unilab-eval --help, --onnx); a tracking file follows its embedded clip from frame 0")
    p.add_argument("--no-text", action="store_true",
                   help="leave the task's text (motion tracking: clip, frame, body error in mm) off the frames")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_intermixed_args(argv)  # task.KEY=VALUE may come after an option
    if (args.checkpoint is None) == (args.onnx is None):
        parser.error("give a checkpoint or --onnx FILE (one of them)")
    exit_on_sigterm()  # SIGTERM stops the rollout or the rendering worker like Ctrl-C: no partial video left
    return run_cli("play", _main, args)


def _main(args: argparse.Namespace) -> int:
    from unilab.runtime.play import play  # lazy: --help and usage errors without torch

    try:
        overrides = dict(task_overrides.parse_override(tok) for tok in args.overrides)
        source = None
        if args.onnx is not None:
            from unilab.eval.holosoma import prepare

            source = prepare(args.onnx, overrides=overrides)
        options = PlayConfig(task_overrides=overrides, num_envs=args.num_envs, steps=args.steps, seed=args.seed,
                             video=not args.no_video, out=args.out, device=args.device, width=args.width,
                             height=args.height, ghost=args.ghost, text=not args.no_text)
        play(args.checkpoint, options, source=source)
    # OSError: a missing checkpoint, or a video path that cannot be written; RuntimeError: published policies that
    # cannot be fetched (the message says how)
    except (ValueError, OSError, RuntimeError) as err:
        print(f"play: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

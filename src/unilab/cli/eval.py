"""`unilab-eval`: a trained policy measured by its task's evaluation (the one its registry row names)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from unilab.cli import run_cli, task_overrides
from unilab.tasks import registry

EVALUATED = tuple(name for name, row in registry.TASKS.items() if row.evaluation)
"""The tasks unilab-eval measures: those whose registry row names an evaluation."""
DESCRIPTION = f"""\
Measure a trained policy on its checkpoint's task (--task names one without a checkpoint). Motion
tracking: roll out the policy deterministically on every clip of its task, from the clip's first frame
to its last: the env starts exactly at the reference frame 0 (no reset noise), the policy's mean action
is applied, observation noise is off and nothing is reset on the way (a failure is recorded and the
rollout goes on). Reports per clip and overall: success_rate (no termination fired), mpjpe_mm (tracked
bodies, world frame), mpjpe_local_mm (each body in its anchor body's frame), anchor_pos_err (m),
anchor_ori_err (rad), joint_pos_err (rad) and joint_vel_err (rad/s), as a table, a JSON file and one PNG
per clip of the errors over its frames.

Baselines (--policy zero|reference|random) need no checkpoint: zero holds the default pose (action
0), reference sets the clip's joint positions as PD targets open loop, random draws uniform actions
in [-1, 1]. Without a checkpoint the task is {registry.DEFAULT_TASK} with its default config; change it
with task.KEY=VALUE arguments (e.g. task.max_episode_length_s=5).

--start-stride K starts more envs exactly on the reference at frames K, 2K, ... of every clip, each
following its clip to the end: a clip's metrics are then means over its starts (success_rate: the
fraction of starts that reach the clip's end), the table adds each start's failure frame, and the
JSON lists them (start_frames, failure_frames). One start at frame 0 asks whether the clip's first
segment has been learned; the sweep asks it of every segment. A late start has few frames left to
fail in, so compare sweeps of one stride.

--starts random measures what training measures instead: --num-envs envs start at sampled clip
frames with the training start noise and restart on their own when an episode ends, until
--episodes episodes have ended; it reports the mean episode length (steps) and its std, the failure
fraction (terminated / ended), the same tracking errors averaged over the steps, and the steps run.
Observation noise stays off and --randomization applies in both start modes.

--onnx FILE evaluates a policy in holosoma's deploy format (holosoma_inference's ONNX; FILE may name a
published one, e.g. fastsac_g1_29dof_dancing, fetched once into $UNILAB_CACHE) in the task of its kind
whose robot has the file's joints (dof_names; --task names one, of {', '.join(EVALUATED)}). A tracking file
runs on its embedded clip (or --clip), a locomotion file per command bin, with the file's gains, term order and
scales and its action mapping. With
--randomization on, the report adds the metrics per quantile bin of each randomized quantity (friction,
centre-of-mass offset, PD-gain scales, action delay, masses): a batch sim2sim robustness report."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="unilab-eval", description=DESCRIPTION,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("targets", nargs="*", metavar="RUN_DIR_OR_CHECKPOINT|task.KEY=VALUE",
                   help="a run directory (its latest model_<iter>.pt) or a model_<iter>.pt file (optional for a "
                        "baseline --policy), then " + task_overrides.HELP)
    p.add_argument("--policy", choices=("checkpoint", "zero", "reference", "random"), default="checkpoint",
                   help="checkpoint: the checkpoint's mean action; zero: action 0 (the default pose); reference: "
                        "the reference joint positions as PD targets, open loop; random: uniform actions in "
                        "[-1, 1] (default: checkpoint)")
    p.add_argument("--starts", choices=("clip", "random"), default="clip",
                   help="clip: every clip from its first frame to its last, no resets; random: training's "
                        "random start frames and start noise with auto-reset, for --episodes episodes "
                        "(default: clip)")
    p.add_argument("--episodes", type=int, default=256, metavar="N",
                   help="--starts random: episodes to measure, spread evenly over the envs (default: 256)")
    p.add_argument("--num-envs", type=int, default=128, metavar="N",
                   help="--starts random: envs stepped together (default: 128)")
    p.add_argument("--json", metavar="PATH", default=None,
                   help="JSON report path, checked writable before the rollout; the PNGs go next to it (default: "
                        "<run dir>/eval/eval_<iter>.json; a baseline eval_<policy>.json, in ./eval without a "
                        "checkpoint; random starts add _random)")
    p.add_argument("--clips", nargs="+", metavar="CLIP", default=None,
                   help="clips to evaluate: names (file stems) or indices into the task's clip list "
                        "(default: every clip)")
    p.add_argument("--randomization", choices=("on", "off"), default="off",
                   help="on: keep the checkpoint's domain randomization (task.randomization); "
                        "off: every randomization term disabled (default: off)")
    p.add_argument("--max-frames", type=int, default=None, metavar="N",
                   help="evaluate only the first N frames of each clip, for quick checks (default: whole clips)")
    p.add_argument("--start-stride", type=int, default=None, metavar="K",
                   help="clip starts: also start envs at every K-th frame of each clip, each running to the clip's "
                        "end; metrics are means over the starts, the JSON lists where each start failed "
                        "(default: frame 0 only)")
    p.add_argument("--envs-per-clip", type=int, default=1, metavar="N",
                   help="envs rolled out per clip; only differ with --randomization on (default: 1)")
    g = p.add_argument_group(f"locomotion (--task {', '.join(registry.tasks_of_kind('locomotion'))})")
    g.add_argument("--task", default=None, choices=EVALUATED,
                   help="the task measured: motion tracking (the options above) or velocity-command locomotion: "
                        "one 20 s episode per env, envs split over the command bins standing, forward, lateral "
                        "and turning; survival, velocity and yaw-rate errors, tracking reward terms per bin "
                        f"(--policy checkpoint or zero; default: the checkpoint's task, {registry.DEFAULT_TASK} "
                        "without one)")
    g.add_argument("--speed", type=float, default=0.5, metavar="V",
                   help="locomotion: the bins' command (m/s forward and lateral, rad/s turning; default: 0.5)")
    g.add_argument("--envs-per-bin", type=int, default=16, metavar="N",
                   help="locomotion: episodes per command bin (default: 16)")
    g.add_argument("--pushes", choices=("on", "off"), default="on",
                   help="locomotion: the task's random pushes during the episodes (default: on)")
    h = p.add_argument_group("holosoma policies (--onnx)")
    h.add_argument("--onnx", metavar="FILE", default=None,
                   help="evaluate this holosoma-format ONNX policy instead of a checkpoint: a file, or the name of "
                        "a published one (unilab-assets path --policies lists them; fetched on first use). The task "
                        "is the one of the file's kind whose robot has the file's dof_names (or --task, checked)")
    h.add_argument("--clip", metavar="NPZ", default=None,
                   help="--onnx tracking policy: evaluate on this clip instead of the one embedded in the file")
    h.add_argument("--action-clip", choices=("holosoma", "env"), default="holosoma",
                   help="--onnx: holosoma: only holosoma's clip of the output at +-100 acts (the env's action range "
                        "is widened past it); env: the task's own bound clips the PD targets too, and the report "
                        "counts the entries it cut (default: holosoma)")
    p.add_argument("--device", default="cpu", help="torch device of the policy (default: cpu)")
    p.add_argument("--threads", type=int, default=None, metavar="N",
                   help="physics pool and torch threads (default: min(envs, usable CPUs) for physics, 1 for torch)")
    p.add_argument("--seed", type=int, default=0, help="seed of the env's randomization draws (default: 0)")
    p.add_argument("--no-plot", action="store_true", help="write no PNG")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.add_argument("--nice", type=int, default=0, metavar="N",
                   help="lower this process's CPU priority by N (Unix; training's periodic evaluations use 10)")
    return p


# options that only one kind of task reads: given with another they would be ignored without a word
TASK_ONLY_OPTIONS = {
    "locomotion": ("speed", "envs_per_bin", "pushes"),
    "motion_tracking": ("starts", "episodes", "num_envs", "clips", "max_frames", "start_stride", "envs_per_clip"),
}


MAX_SPEED = 10.0
"""The largest --speed (m/s, rad/s): far past what a humanoid walks; a larger one is a typo or another unit."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_intermixed_args(argv)  # task.KEY=VALUE may come after an option
    given_task = args.task
    if args.clip is not None and args.onnx is None:
        parser.error("--clip: only with --onnx (a checkpoint's clips are task.motion_files)")
    if args.action_clip != parser.get_default("action_clip") and args.onnx is None:
        parser.error("--action-clip: only with --onnx")
    if args.onnx is not None:
        if args.policy != "checkpoint":
            parser.error("--onnx evaluates the file's policy: no --policy")
        args.source = _onnx_source(args, parser, given_task)  # reads the file: its task decides which options apply
        args.task = args.source.task
    elif given_task is None:
        args.task = _checkpoint_task(args.targets)
    for kind, dests in TASK_ONLY_OPTIONS.items():
        given = [f"--{d.replace('_', '-')}" for d in dests if getattr(args, d) != parser.get_default(d)]
        if given and registry.kind(args.task) != kind:
            parser.error(f"{', '.join(given)}: {kind} option(s), not read with --task {args.task}")
    if not 0 < args.speed <= MAX_SPEED:  # NaN fails too
        parser.error(f"--speed {args.speed}: expected a number in (0, {MAX_SPEED:g}] (m/s forward and lateral, rad/s "
                     "turning; each bin's direction is fixed)")
    if args.envs_per_bin < 1:  # the motion-tracking numbers are EvalOptions' to check
        parser.error(f"--envs-per-bin must be >= 1, got {args.envs_per_bin}")
    return run_cli("unilab-eval", _main, args)


def _onnx_source(args: argparse.Namespace, parser: argparse.ArgumentParser, task: str | None):
    """The --onnx file ready to run in ``task`` (None: the one its joints choose); exit 2 naming the problem."""
    from unilab.eval.holosoma import prepare
    from unilab.interop.holosoma_onnx import HolosomaFormatError

    try:
        checkpoint, overrides = task_overrides.split_targets(args.targets)
        if checkpoint is not None:
            raise ValueError(f"--onnx evaluates the file's policy: no RUN_DIR_OR_CHECKPOINT (got {checkpoint})")
        return prepare(args.onnx, task, args.clip, overrides, args.threads, args.action_clip)
    # RuntimeError: AssetError, the published policies cannot be fetched (the message says how)
    except (FileNotFoundError, ValueError, HolosomaFormatError, RuntimeError) as err:
        parser.exit(2, f"unilab-eval: error: {err}\n")


def _checkpoint_task(targets: list[str]) -> str:
    """The task of the checkpoint among ``targets``; :data:`registry.DEFAULT_TASK` without one, and for one that
    cannot be read or whose task is not evaluated (the evaluation reports it, exit 2)."""
    from unilab.runtime.checkpoint import load_checkpoint, stored_run_config

    try:
        checkpoint, overrides = task_overrides.split_targets(targets)
        name = checkpoint and stored_run_config(*load_checkpoint(checkpoint), overrides)[0]["task"]["name"]
    except (FileNotFoundError, ValueError):
        name = None
    return name if name in EVALUATED else registry.DEFAULT_TASK


def _main(args: argparse.Namespace) -> int:
    if args.nice > 0 and hasattr(os, "nice"):
        os.nice(args.nice)
    # lazy: --help and usage errors without torch or mujoco
    from unilab.eval import report
    from unilab.eval.rollout import EvalOptions
    from unilab.paths import check_writable, write_json
    from unilab.runtime.checkpoint import resolve_checkpoint

    onnx = getattr(args, "source", None)
    loco = registry.kind(args.task) == "locomotion"
    evaluation = registry.evaluation(args.task)
    try:
        checkpoint, overrides = task_overrides.split_targets(args.targets)
        if not loco:
            opts = EvalOptions(clips=args.clips, max_frames=args.max_frames, randomization=args.randomization == "on",
                               envs_per_clip=args.envs_per_clip, device=args.device, threads=args.threads,
                               seed=args.seed, progress=not args.no_progress, policy=args.policy, starts=args.starts,
                               episodes=args.episodes, num_envs=args.num_envs, start_stride=args.start_stride,
                               task_overrides=overrides)
        if checkpoint is None and args.policy == "checkpoint" and onnx is None:
            raise ValueError("RUN_DIR_OR_CHECKPOINT is required with --policy checkpoint " +
                             ("(--policy zero runs without one)" if loco
                              else "(a baseline, e.g. --policy zero, runs without one)"))
        ckpt = None if checkpoint is None else resolve_checkpoint(checkpoint)
    except (FileNotFoundError, ValueError) as err:
        print(f"unilab-eval: error: {err}", file=sys.stderr)
        return 2
    # the report path fails now, not after a rollout of many minutes
    json_path = (Path(args.json) if args.json else
                 Path("eval") / f"eval_{onnx.path.stem}{'_random' if args.starts == 'random' else ''}.json"
                 if onnx is not None else report.default_json_path(ckpt, args.policy, args.starts, loco))
    try:
        check_writable(json_path, "report")
    except OSError as err:
        print(f"unilab-eval: error: {'' if loco else '--json: '}{err}", file=sys.stderr)
        return 2
    caught = (FileNotFoundError, ValueError, OSError if loco else IndexError)
    try:
        if loco:
            result = evaluation.run(args.task, ckpt, args.policy, args.speed, args.envs_per_bin, args.pushes == "on",
                                    args.seed, args.device, args.threads, overrides, not args.no_progress,
                                    args.randomization == "on", onnx)
        else:
            result = evaluation.evaluate(ckpt, opts, onnx)
    except caught as err:
        print(f"unilab-eval: error: {err}", file=sys.stderr)
        return 2
    policy = args.policy if onnx is None else f"{onnx.path.name} (holosoma format)"
    if loco:
        print(f"unilab-eval: {args.task}, policy {policy}, pushes {args.pushes}, {result['episode_s']:.0f} s "
              f"episodes, {args.envs_per_bin} per bin")
        print(evaluation.format_locomotion(result), flush=True)
        _print_robustness(result.get("randomization_bins"), loco)
        print(f"unilab-eval: JSON written to {write_json(json_path, result)}")
        return 0
    source = ("defaults" if result.checkpoint is None else str(result.checkpoint) if onnx is not None
              else f"{result.checkpoint} (iteration {result.iteration})")
    out = result.to_json()
    if args.starts == "random":
        overall = result.summary["overall"]
        print(f"unilab-eval: policy {policy}, random starts, {source}: {overall['episodes']} episodes "
              f"on {args.num_envs} envs")
        print(report.format_random_starts(overall), flush=True)
    else:
        print(f"unilab-eval: policy {policy}, clip starts, {source}, {len(result.clip_names)} clip(s)")
        print(report.format_table(result.summary), flush=True)
        if args.start_stride:
            print(report.format_start_failures(out["clips"]), flush=True)
        _print_robustness(out.get("randomization_bins"), loco)
    path = write_json(json_path, out)
    print(f"unilab-eval: JSON written to {path}")
    if not args.no_plot and args.starts == "clip":
        for png in report.plot_errors(result, path):
            print(f"unilab-eval: plot written to {png}")
    return 0


def _print_robustness(bins: dict | None, loco: bool) -> None:
    """The per-randomization-bin tables (--randomization on), one per command bin for locomotion."""
    if not bins:
        return
    from unilab.eval.robustness import format_bins

    if loco:
        for name, table in bins.items():
            print(f"unilab-eval: command bin {name}, per randomization bin")
            print(format_bins(table, ("survived", "episode_length_s", "lin_vel_x_error", "yaw_rate_error")))
    else:
        print("unilab-eval: per randomization bin")
        print(format_bins(bins, ("success_rate", "mpjpe_local_mm", "joint_pos_err")), flush=True)


if __name__ == "__main__":
    sys.exit(main())

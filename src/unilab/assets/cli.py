"""``unilab-assets``: fetch, verify or locate the cached robot models (G1, T1), motion clips and holosoma's published
policies; convert clips between formats."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from unilab.assets import holosoma, holosoma_inference
from unilab.cache import CACHE_ENV_VAR
from unilab.motion_io.formats import FORMATS, POLICY_FPS, REF_BODY


def _build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="unilab-assets",
        description=f"Manage the G1 and T1 29-DoF models and the motion clips unilab unpacks from the holosoma=="
                    f"{holosoma.HOLOSOMA_VERSION} wheel (downloaded with your pip, never installed). "
                    f"Cache: ${CACHE_ENV_VAR} or ~/.cache/unilab.",
        epilog=f"Offline: put {holosoma.WHEEL_NAME} into <cache>/downloads/ or set "
               f"{holosoma.WHEEL_ENV_VAR}=/path/to/the.whl, then run `unilab-assets fetch`.")
    p.add_argument("--cache-dir", type=Path, default=None,
                   help=f"cache root (default: ${CACHE_ENV_VAR} or ~/.cache/unilab)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    f = sub.add_parser("fetch", help="download and unpack the assets (no-op if the cache is intact)")
    f.add_argument("--force", action="store_true", help="rebuild the cache even if it checks out")
    f.add_argument("--wheel", type=Path, default=None, help=f"use this local {holosoma.WHEEL_NAME} instead of pip")
    f.add_argument("--quiet", action="store_true", help="no progress output")
    f.add_argument("--policies", action="store_true",
                   help=f"also holosoma's published policies (ONNX) from {holosoma_inference.PACKAGE}=="
                        f"{holosoma_inference.VERSION} (offline: put {holosoma_inference.WHEEL_NAME} into "
                        f"<cache>/downloads/ or set {holosoma_inference.WHEEL_ENV_VAR})")

    sub.add_parser("verify", help="re-hash every cached file against the manifest (exit 1 on any problem)")

    pa = sub.add_parser("path", help="print where the assets live (fetching them if needed)")
    what = pa.add_mutually_exclusive_group()
    what.add_argument("--scene", action="store_true", help="print the G1 scene MJCF path")
    what.add_argument("--motions", action="store_true", help="print the motion clip paths, one per line")
    what.add_argument("--policies", action="store_true",
                      help="print holosoma's published policies, one 'NAME PATH' per line (unilab-eval --onnx NAME)")

    formats = "; ".join(f"{f.suffix}: {f.what}" for f in FORMATS)
    im = sub.add_parser(
        "import-clip", help="convert a clip (.onnx, .npz, .csv) into our clip format (npz) for task.motion_files",
        description=f"Write our clip format (holosoma's npz layout, {POLICY_FPS:g} fps by default) from {formats}. "
                    "The source is checked against the robot model first (finite numbers, unit root quaternions, "
                    "joint angles within 1 rad of their limits, root within 1 km, rates under 1000/s); a bad cell is "
                    "one line naming the file, row and column (exit 2). Positions are resampled linearly, the root "
                    "quaternion by slerp; velocities the source lacks come from finite differences.",
        epilog="example: unilab-assets import-clip fastsac_g1_29dof_dancing.onnx --out dance.npz && "
               "train task.motion_files=[dance.npz]")
    _clip_arguments(im, out_help="the npz to write (our clip format)")
    ex = sub.add_parser(
        "export-clip", help="write a clip (.npz, or any importable source) as .csv, .npz or .onnx",
        description=f"Write a clip in another format: {formats}. The CSV holds root x, y, z, root quaternion x, y, "
                    "z, w and the joints in the model's order, one row per frame, no header; the ONNX file holds "
                    "the clip as holosoma's WBT files embed it (tables indexed by the clamped input time_step, the "
                    "reference body's pose), without a policy.")
    _clip_arguments(ex, out_help="the file to write; its suffix (.csv, .npz, .onnx) picks the format")
    return p


def _clip_arguments(p: argparse.ArgumentParser, out_help: str) -> None:
    fps_defaults = ", ".join(f"{f.suffix} {f.source_fps:g}" for f in FORMATS if f.source_fps is not None)
    out_defaults = ", ".join(f"{f.suffix} {f.target_fps:g}" for f in FORMATS)
    p.add_argument("source", type=Path, metavar="SOURCE", help="the clip to read (.onnx, .npz or .csv)")
    p.add_argument("--out", type=Path, required=True, help=out_help)
    p.add_argument("--format", choices=[f.name for f in FORMATS], default=None,
                   help="the source's format when its suffix does not say (default: from the suffix)")
    p.add_argument("--fps", type=float, default=None,
                   help=f"the source's frame rate, for formats that do not store it (default: {fps_defaults}); an "
                        "npz stores its own (give --fps only for one without 'fps')")
    p.add_argument("--out-fps", type=float, default=None,
                   help=f"the frame rate to write (default by target: {out_defaults})")
    p.add_argument("--model", type=Path, default=None,
                   help="the robot's MJCF whose joints, limits and kinematics the clip is checked and converted on "
                        "(default: the G1 29-DoF scene from the asset cache, fetched if needed)")
    p.add_argument("--ref-body", default=REF_BODY,
                   help=f"ONNX only: the body whose pose the embedded clip holds (default: {REF_BODY}, as in "
                        "holosoma's G1 files); the root is recovered from it by forward kinematics")
    p.add_argument("--force", action="store_true", help="replace --out if it exists")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")


def _convert(args: argparse.Namespace) -> int:
    """``import-clip`` / ``export-clip``: refuse bad arguments before loading anything, then convert."""
    # late: mujoco, Numba and the motion loader load only for the clip commands
    import mujoco  # noqa: PLC0415

    from unilab.motion_io.clip import (  # noqa: PLC0415
        ClipError,
        MotionFileError,
        model_joint_layout,
    )
    from unilab.motion_io.convert import check_target, convert, format_of  # noqa: PLC0415

    try:
        out_fmt = format_of(args.out)
        if args.command == "import-clip" and out_fmt.name != "npz":
            raise ClipError(f"--out {args.out}: import-clip writes our npz format; export-clip writes "
                            f"{out_fmt.suffix}")
        if not args.source.is_file():
            raise ClipError(f"{args.source}: file does not exist")
        format_of(args.source, args.format)
        check_target(args.out, args.force)
        if args.model is None:
            from unilab.assets import g1  # noqa: PLC0415 - lazy: fetch and verify need no mujoco

            model = g1.load_model(args.cache_dir)
        elif not args.model.is_file():
            raise ClipError(f"--model {args.model}: file does not exist")
        else:
            try:
                model = mujoco.MjModel.from_xml_path(str(args.model))
            except ValueError as exc:
                raise ClipError(f"--model {args.model}: not a loadable MJCF ({exc})") from exc
        try:
            model_joint_layout(model)
        except ValueError as exc:
            raise ClipError(f"--model {args.model or 'G1'}: {exc}") from exc
        say = None if args.quiet else (lambda msg: print(f"unilab-assets: {msg}", file=sys.stderr, flush=True))
        clip = convert(args.source, args.out, model, source_format=args.format, fps=args.fps,
                       out_fps=args.out_fps, ref_body=args.ref_body, force=args.force, progress=say)
    except MotionFileError as exc:  # ClipError is one
        print(f"unilab-assets: error: {exc}", file=sys.stderr)
        return 2
    print(f"{args.out}: {clip.num_frames} frames at {clip.fps:g} fps, {len(clip.joint_names)} joints")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``unilab-assets``; returns the process exit code."""
    args = _build_parser().parse_args(argv)
    try:
        if args.command in ("import-clip", "export-clip"):
            return _convert(args)
        if args.command == "fetch":
            res = holosoma.ensure_assets(args.cache_dir, force=args.force, wheel_path=args.wheel,
                                         progress=not args.quiet)
            print(f"{res.root} ({'rebuilt' if res.rebuilt else 'already cached'})")
            if args.policies:
                print(holosoma_inference.ensure_policies(args.cache_dir, force=args.force, progress=not args.quiet))
            return 0
        if args.command == "verify":
            root = holosoma.assets_dir(args.cache_dir)
            problems = holosoma.verify_assets(args.cache_dir)
            if problems:
                print(f"{root}: {len(problems)} problem(s):", *(f"  {line}" for line in problems),
                      "run `unilab-assets fetch --force` to rebuild", sep="\n", file=sys.stderr)
                return 1
            print(f"{root}: OK ({len(holosoma.read_manifest(root) or {})} files)")
            return 0
        if args.policies:  # the "path" command
            root = holosoma_inference.ensure_policies(args.cache_dir)
            for name, rel in holosoma_inference.PUBLISHED.items():
                print(name, root / rel)
            return 0
        from unilab.assets import g1  # noqa: PLC0415 - lazy: fetch and verify need no mujoco

        if args.scene:  # the "path" command
            print(g1.scene_xml_path(args.cache_dir))
        elif args.motions:
            for p in g1.motion_paths(args.cache_dir):
                print(p)
        else:
            print(g1.assets_root(args.cache_dir))
        return 0
    except holosoma.AssetError as exc:
        print(f"unilab-assets: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

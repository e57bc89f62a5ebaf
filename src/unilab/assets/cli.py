"""``unilab-assets``: fetch, verify or locate the cached robot models (G1, T1) and motion clips."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from unilab.assets import holosoma
from unilab.cache import CACHE_ENV_VAR


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

    sub.add_parser("verify", help="re-hash every cached file against the manifest (exit 1 on any problem)")

    pa = sub.add_parser("path", help="print where the assets live (fetching them if needed)")
    what = pa.add_mutually_exclusive_group()
    what.add_argument("--scene", action="store_true", help="print the G1 scene MJCF path")
    what.add_argument("--motions", action="store_true", help="print the motion clip paths, one per line")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``unilab-assets``; returns the process exit code."""
    args = _build_parser().parse_args(argv)
    try:
        if args.command == "fetch":
            res = holosoma.ensure_assets(args.cache_dir, force=args.force, wheel_path=args.wheel,
                                         progress=not args.quiet)
            print(f"{res.root} ({'rebuilt' if res.rebuilt else 'already cached'})")
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

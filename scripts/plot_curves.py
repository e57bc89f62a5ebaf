#!/usr/bin/env python
"""Plot scalar curves of unilab runs from their TensorBoard event files.

    python scripts/plot_curves.py logs/fast_sac/<Experiment>/<run> --out curves.png
    python scripts/plot_curves.py RUN_DIR --tags perf/steps_per_sec,cpu/process_cores --out perf.png
    python scripts/plot_curves.py RUN_A RUN_B --labels "DR on,DR off" --out compare.png   # one line per run

Default tags: every tag containing "episode" or "reward" (episode length mean,
reward terms) plus perf/steps_per_sec when present.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless: never needs a display
import matplotlib.pyplot as plt

from unilab.telemetry.scalars import read_scalars

DEFAULT_SUBSTRINGS = ("episode", "reward")
DEFAULT_EXTRA_TAGS = ("perf/steps_per_sec",)
MAX_COLUMNS = 3


def default_tags(available: list[str]) -> list[str]:
    """Tags plotted when none are asked for, in a stable order."""
    picked = sorted(t for t in available if any(s in t.lower() for s in DEFAULT_SUBSTRINGS))
    picked += [t for t in DEFAULT_EXTRA_TAGS if t in available and t not in picked]
    return picked


def plot_curves(runs: dict[str, dict[str, list[tuple[int, float]]]], tags: list[str], out: str | Path) -> Path:
    """Draw one subplot per tag (value over step; one line per run, ``runs`` = label -> scalars) and save it."""
    if not tags:
        raise ValueError("no tags to plot")
    for label, scalars in runs.items():
        missing = [t for t in tags if t not in scalars]
        if missing:
            raise ValueError(f"tags not in the log of {label}: {missing}; available: {sorted(scalars)}")
    ncols = min(MAX_COLUMNS, len(tags))
    nrows = math.ceil(len(tags) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5 * ncols, 3.2 * nrows), squeeze=False)
    for ax, tag in zip(axes.flat, tags):
        for label, scalars in runs.items():
            # NaN/inf points are left out of the line; the gap shows where they were
            pts = [(s, v) for s, v in scalars[tag] if math.isfinite(v)]
            if pts:
                steps, values = zip(*pts)
                ax.plot(steps, values, linewidth=1.2, label=label)
        ax.set_title(tag, fontsize=10)
        ax.set_xlabel("step")
        ax.ticklabel_format(axis="x", style="sci", scilimits=(-3, 4))  # 7-digit step counts would overlap
        ax.grid(True, alpha=0.3)
        if len(runs) > 1:
            ax.legend(fontsize=8)
    for ax in list(axes.flat)[len(tags) :]:
        ax.axis("off")
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def main(argv: list[str] | None = None) -> int:
    """Command line entry point; returns the exit code."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("log_dirs", nargs="+", metavar="log_dir",
                   help="directory holding a run's events.out.tfevents.* files; several: one line per run")
    p.add_argument("--labels", default=None, help="comma-separated legend labels, one per log_dir (default: the dirs)")
    p.add_argument("--tags", default=None,
                   help="comma-separated tags (default: episode/reward tags + perf/steps_per_sec)")
    p.add_argument("--out", default="curves.png", help="output PNG path")
    a = p.parse_args(argv)
    labels = [x.strip() for x in a.labels.split(",")] if a.labels else list(a.log_dirs)
    if len(labels) != len(a.log_dirs):
        print(f"error: --labels has {len(labels)} labels for {len(a.log_dirs)} log dirs", file=sys.stderr)
        return 2
    try:
        runs = {label: read_scalars(d) for label, d in zip(labels, a.log_dirs)}
    except FileNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    first = next(iter(runs.values()))
    tags = [t.strip() for t in a.tags.split(",") if t.strip()] if a.tags else default_tags(list(first))
    if not tags:
        print(f"error: no episode/reward tags in {a.log_dirs[0]}; pass --tags (available: {sorted(first)})",
              file=sys.stderr)
        return 2
    try:
        out = plot_curves(runs, tags, a.out)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {out} ({len(tags)} curves, {len(runs)} run{'s' if len(runs) > 1 else ''})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The evaluation's outputs: a table on stdout, the JSON report and a PNG of errors over each clip."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from unilab.eval.metrics import ERROR_NAMES, METRIC_NAMES, UNITS
from unilab.eval.rollout import EvalResult


def default_json_path(checkpoint: Path | None, policy: str = "checkpoint", starts: str = "clip",
                      locomotion: bool = False) -> Path:
    """``<run dir>/eval/eval_<iteration>.json`` (the iteration of a ``model_<iter>.pt`` name, else the file's stem);
    a baseline's ``eval_<policy>``, in ``./eval`` without a checkpoint; random starts append ``_random``;
    ``locomotion``: ``eval_locomotion_<iteration>``, without a checkpoint ``eval_locomotion_<policy>``."""
    folder, iteration = Path("eval"), None
    if checkpoint is not None:
        match = re.fullmatch(r"model_(\d+)\.pt", checkpoint.name)
        folder, iteration = checkpoint.parent / "eval", int(match.group(1)) if match else checkpoint.stem
    if locomotion:
        stem = f"eval_locomotion_{policy if checkpoint is None else iteration}"
    else:
        stem = f"eval_{iteration}" if policy == "checkpoint" else f"eval_{policy}"
    if starts != "clip":
        stem += f"_{starts}"
    return folder / f"{stem}.json"


def format_random_starts(overall: Mapping[str, float]) -> str:
    """Random-start metrics, one ``name (unit) | value`` line each."""
    units = {**UNITS, "episode_length_mean": "steps", "episode_length_std": "steps"}
    rows = [(f"{k} ({units[k]})" if units.get(k) else k, _num(float(v))) for k, v in overall.items()]
    width = max(len(r[0]) for r in rows)
    return "\n".join(f"{name.ljust(width)} | {value}" for name, value in rows)


def format_table(summary: Mapping[str, dict]) -> str:
    """One row per clip and an ``overall`` row, one column per metric."""
    headers = ["clip", "frames", *(f"{m} ({UNITS[m]})" if UNITS[m] else m for m in METRIC_NAMES)]
    rows = [[name, str(v["frames"]), *(_num(v[m]) for m in METRIC_NAMES)] for name, v in summary["clips"].items()]
    total = sum(v["frames"] for v in summary["clips"].values())
    rows.append(["overall", str(total), *(_num(summary["overall"][m]) for m in METRIC_NAMES)])
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    lines = [" | ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
             for r in [headers, *rows]]
    return "\n".join([lines[0], "-+-".join("-" * w for w in widths), *lines[1:]])


def format_start_failures(clips: Mapping[str, dict]) -> str:
    """Per clip (``EvalResult.to_json()["clips"]`` of a start sweep): ``start -> failure frame`` of each start,
    ``end`` where the env reached the clip's end."""
    lines = []
    for name, entry in clips.items():
        pairs = [f"{s}->{'end' if f is None else f}" for s, f in zip(entry["start_frames"], entry["failure_frames"])]
        lines.append(f"{name}: start->failure frame: {' '.join(pairs)}")
    return "\n".join(lines)


def _num(v: float) -> str:
    return f"{v:.4g}" if abs(v) < 1000 else f"{v:.1f}"


def plot_errors(result: EvalResult, json_path: str | os.PathLike) -> list[Path]:
    """One PNG per clip next to ``json_path`` (``<stem>_<clip>.png``): each error over the clip's frames of the envs
    starting at frame 0 (several as thin lines around their mean), a dashed red line at the first termination."""
    import matplotlib  # noqa: PLC0415 - lazy: only plotting needs it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415 - after the backend is chosen

    json_path = Path(json_path)
    written = []
    for c, name in enumerate(result.clip_names):
        rows, failed = result.frame0_starts(c)
        frames = int(result.summary["clips"][name]["frames"])
        t = np.arange(frames)
        fig, axes = plt.subplots(2, 3, figsize=(12, 6), sharex=True)
        for ax, metric in zip(axes.ravel(), ERROR_NAMES):
            err = result.errors[metric][rows, :frames]
            if len(rows) > 1:
                ax.plot(t, err.T, color="0.75", linewidth=0.6)
            ax.plot(t, err.mean(axis=0), color="C0", linewidth=1.2)
            if failed is not None:
                ax.axvline(failed, color="red", linestyle="--", linewidth=1.0)
            ax.set_title(f"{metric} ({UNITS[metric]})", fontsize=10)
            ax.grid(alpha=0.3)
        for ax in axes[-1]:
            ax.set_xlabel(f"frame ({result.control_dt * 1000:g} ms)")
        ok = result.summary["clips"][name]["success_rate"]
        note = f" (dashed red: first termination, frame {failed})" if failed is not None else ""
        fig.suptitle(f"{name}: iteration {result.iteration}, success {ok:.2f}{note}", fontsize=11)
        fig.tight_layout()
        target = json_path.with_name(f"{json_path.stem}_{re.sub(r'[^A-Za-z0-9._-]+', '_', name)}.png")
        target.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(target, dpi=80)
        plt.close(fig)
        written.append(target)
    return written


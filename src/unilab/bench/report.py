"""Benchmark output: an aligned text table on stdout and a JSON file beside it."""

from __future__ import annotations

import os
import platform
import re
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import mujoco

from unilab import paths
from unilab.sim.cpu import cpu_model_name, usable_cpus


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Right-aligned columns; floats with 3 significant decimals."""

    def cell(v: object) -> str:
        if isinstance(v, float):
            return f"{v:,.3f}" if abs(v) < 100 else f"{v:,.1f}"
        return str(v)

    cells = [[cell(v) for v in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    line = " | ".join(h.rjust(w) for h, w in zip(headers, widths))
    sep = "-+-".join("-" * w for w in widths)
    body = [" | ".join(c.rjust(w) for c, w in zip(r, widths)) for r in cells]
    return "\n".join([line, sep, *body])


def environment() -> dict:
    """Facts that make results comparable across machines and commits."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5,
                                cwd=Path(__file__).resolve().parent).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        commit = None
    return {"time": stamp, "commit": commit, "python": platform.python_version(), "mujoco": mujoco.__version__,
            "usable_cpus": usable_cpus(), "cpu_model": cpu_model_name(), "hostname": platform.node()}


def write_json(path: str | os.PathLike | None, payload: dict) -> Path | None:
    """Write ``payload`` plus the environment facts to ``path`` atomically; nothing without a path."""
    return paths.write_json(path, {"environment": environment(), **payload}) if path else None


def machine_facts() -> dict:
    """``lscpu``'s ``Model name`` (None where lscpu is missing), the CPU count and the usable CPUs."""
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        text = ""
    m = re.search(r"^Model name:\s*(.+)$", text, re.MULTILINE)
    return {"lscpu_model_name": m.group(1).strip() if m else None, "cpu_count": os.cpu_count(),
            "usable_cpus": usable_cpus()}

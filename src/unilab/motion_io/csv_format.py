"""The Unitree LAFAN1-retargeted CSV layout: one row per frame, ``root x, y, z, root quaternion x, y, z, w, J joint
angles`` (rad) in the model's joint order, comma-separated, no header, 30 fps (the rate is not in the file).

The reader accepts one header line (a first line without a single number in it) and skips blank lines; rows (lines)
and columns in its messages are 1-based, as an editor shows them.
"""

from __future__ import annotations

import csv
from pathlib import Path

import mujoco
import numpy as np

from unilab.motion_io import clip as checks
from unilab.motion_io.clip import Clip, ClipError, Source, SourceTables, model_joint_layout
from unilab.motion_io.formats import LAFAN1_FPS
from unilab.sim.quat import quat_normalize

ROOT_COLUMNS = ("root x", "root y", "root z", "root qx", "root qy", "root qz", "root qw")
NUMBER_FORMAT = "%.10g"  # 10 significant digits: 1e-10 relative, well under a round trip's 1e-6


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def column_names(model: mujoco.MjModel) -> list[str]:
    """``column N (what)`` of each column, 1-based."""
    names, _, _ = model_joint_layout(model)
    return [f"column {c} ({what})" for c, what in enumerate([*ROOT_COLUMNS, *names], start=1)]


def read_csv(path: Path, model: mujoco.MjModel, fps: float = LAFAN1_FPS) -> Clip:
    """The CSV ``path`` recorded at ``fps`` as a :class:`Clip` on ``model`` (no velocities: they come from finite
    differences after resampling)."""
    fps = checks.check_fps(fps, "--fps")
    names, _, _ = model_joint_layout(model)
    cols = column_names(model)
    if not path.is_file():
        raise ClipError(f"{path}: file does not exist")
    rows, lines = [], []
    try:
        with open(path, newline="") as f:
            for line, cells in enumerate(csv.reader(f), start=1):
                if all(not c.strip() for c in cells):
                    continue
                if line == 1 and not any(_is_number(c) for c in cells):
                    continue  # a header
                if len(cells) != len(cols):
                    raise ClipError(f"{path}: row {line} has {len(cells)} columns, expected {len(cols)} (root x, y, "
                                    f"z, quaternion x, y, z, w and the model's {len(names)} joints)")
                try:
                    rows.append([float(c) for c in cells])
                except ValueError:
                    col = next(i for i, c in enumerate(cells) if not _is_number(c))
                    raise ClipError(f"{path}: row {line}, {cols[col]}: {cells[col]!r} is not a number") from None
                lines.append(line)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ClipError(f"{path}: unreadable CSV ({type(exc).__name__}: {exc})") from exc
    if not rows:
        raise ClipError(f"{path}: no rows")
    table = np.asarray(rows)
    src = Source(path, "row", tuple(lines))
    tables = SourceTables(names, table[:, 0:3], cols[0:3], table[:, [6, 3, 4, 5]],
                          "columns 4-7 (root quaternion x, y, z, w)", table[:, 7:], cols[7:])
    checks.check_source(src, tables, model)
    joint_pos = np.concatenate([tables.pos, quat_normalize(tables.quat), tables.joints], axis=1)
    return Clip(fps, tuple(names), joint_pos, None)


def write_csv(path: Path, clip: Clip) -> None:
    """``clip``'s frames as CSV rows at its own rate (the caller resamples); written to ``path`` as is."""
    jp = clip.joint_pos
    np.savetxt(path, np.concatenate([jp[:, 0:3], jp[:, [4, 5, 6, 3]], jp[:, 7:]], axis=1), fmt=NUMBER_FORMAT,
               delimiter=",")

"""A clip between formats, and the checks that refuse bad input naming the file, row and column.

A :class:`Clip` is our npz layout in memory (see :mod:`unilab.motion_io.clip_file`): ``joint_pos`` (T, 7 + J)
= root position, root quaternion (w, x, y, z), J joint angles; ``joint_vel`` (T, 6 + J) = root linear and angular
velocity (world frame) and joint rates; joints in the model's order. Readers check a source's own tables with the
functions here before converting them (so a message names the source's row and column); the thresholds are the
motion loader's, so whatever passes here also loads for training.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import mujoco
import numpy as np

from unilab.motion_io.clip_file import (
    FPS_RANGE,
    JOINT_RANGE_SLACK,
    MAX_RATE,
    MAX_ROOT_DISTANCE,
    MotionFileError,
    joint_range_excess,
    model_joint_layout,
)

QUAT_NORM_TOL = 0.01  # |norm - 1| a stored unit quaternion may show (rounding); beyond it the columns are not one


class ClipError(MotionFileError):
    """A clip source or target that cannot be converted (the message names the file, and row and column)."""


@dataclass(frozen=True)
class Clip:
    """One clip in our layout, joints in the model's order."""

    fps: float  # frames per second
    joint_names: tuple[str, ...]  # (J,) the model's joint order
    joint_pos: np.ndarray  # (T, 7 + J) root position (m), root quaternion w, x, y, z (unit), joint angles (rad)
    joint_vel: np.ndarray | None  # (T, 6 + J) root linear, angular velocity (world), joint rates; None: not known

    @property
    def num_frames(self) -> int:
        return int(self.joint_pos.shape[0])


@dataclass(frozen=True)
class Source:
    """A source file and how its rows are called in messages (``row`` for 1-based lines, ``frame``, ``time_step``)."""

    path: Path
    row_word: str = "frame"
    row_numbers: Sequence[int] = ()  # each frame's row number; empty: frame k is row k

    def where(self, frame: int, column: str) -> str:
        row = self.row_numbers[frame] if self.row_numbers else frame
        return f"{self.path}: {self.row_word} {row}, {column}"

    def error(self, message: str) -> ClipError:
        return ClipError(f"{self.path}: {message}")


def check_fps(fps: float, what: str) -> float:
    """``fps`` as a float if it is a frame rate a recording can have, else a ClipError naming ``what``."""
    try:
        value = float(fps)
    except (TypeError, ValueError):
        value = float("nan")
    if not FPS_RANGE[0] <= value <= FPS_RANGE[1]:
        raise ClipError(f"{what}: frame rate {fps} is not a number in [{FPS_RANGE[0]:g}, {FPS_RANGE[1]:g}] fps")
    return value


def check_frames(src: Source, num_frames: int) -> None:
    if num_frames < 2:
        raise src.error(f"a clip needs at least 2 frames, got {num_frames}")


def check_finite(src: Source, table: np.ndarray, columns: Sequence[str]) -> None:
    """Refuse the first NaN/inf cell of ``table`` (T, k)."""
    bad = ~np.isfinite(table)
    if bad.any():
        frame, col = np.unravel_index(int(np.argmax(bad)), bad.shape)
        raise ClipError(f"{src.where(frame, columns[col])}: {table[frame, col]} is not a finite number")


def check_root_position(src: Source, pos: np.ndarray, columns: Sequence[str]) -> None:
    far = np.abs(pos) > MAX_ROOT_DISTANCE
    if far.any():
        frame, col = np.unravel_index(int(np.argmax(far)), far.shape)
        raise ClipError(f"{src.where(frame, columns[col])}: root position {pos[frame, col]:.6g} is over "
                        f"{MAX_ROOT_DISTANCE:g} m from the origin (positions must be in metres)")


def check_unit_quaternions(src: Source, quat: np.ndarray, columns: str) -> None:
    """Refuse rows of ``quat`` (T, 4) that are not unit quaternions to :data:`QUAT_NORM_TOL`."""
    norm = np.linalg.norm(quat, axis=1)
    bad = np.abs(norm - 1.0) > QUAT_NORM_TOL
    if bad.any():
        frame = int(np.argmax(bad))
        raise ClipError(f"{src.where(frame, columns)}: quaternion {quat[frame].tolist()} has norm {norm[frame]:.6g}, "
                        f"not 1 (+-{QUAT_NORM_TOL:g}): the columns are shifted or are not a unit quaternion")


def check_joint_ranges(src: Source, joints: np.ndarray, model: mujoco.MjModel, names: Sequence[str],
                       columns: Sequence[str]) -> None:
    """Refuse angles more than the motion loader's slack outside their joint's range (other units or order)."""
    excess, lo, hi = joint_range_excess(joints, model, names)
    if (excess > JOINT_RANGE_SLACK).any():
        frame, j = np.unravel_index(int(np.argmax(excess)), excess.shape)
        raise ClipError(f"{src.where(frame, columns[j])}: {names[j]} = {joints[frame, j]:.6g} rad is "
                        f"{excess[frame, j]:.3g} rad outside its range [{lo[j]:.3g}, {hi[j]:.3g}] (more than "
                        f"{JOINT_RANGE_SLACK:g} rad: angles must be radians, joints in the expected order)")


def check_rates(src: Source, rates: np.ndarray, columns: Sequence[str]) -> None:
    fast = np.abs(rates) > MAX_RATE
    if fast.any():
        frame, col = np.unravel_index(int(np.argmax(fast)), fast.shape)
        raise ClipError(f"{src.where(frame, columns[col])}: rate {rates[frame, col]:.6g} is over {MAX_RATE:g} "
                        "(m/s and rad/s expected)")


def model_order(src: Source, names: Sequence[str], model_names: Sequence[str]) -> np.ndarray:
    """Index into ``names`` (the source's joints) of each model joint; a ClipError listing every mismatch."""
    names = list(names)
    problems = (("model joints missing", [n for n in model_names if n not in names]),
                ("joints not in the model", [n for n in names if n not in model_names]),
                ("repeated", sorted({n for n in names if names.count(n) > 1})))
    found = [f"{kind}: {bad}" for kind, bad in problems if bad]
    if found:
        raise src.error("the joint names do not match the model's joints; " + "; ".join(found))
    return np.array([names.index(n) for n in model_names], dtype=np.int64)


@dataclass(frozen=True)
class SourceTables:
    """A source's own tables before conversion, each with the names its cells have in messages."""

    names: Sequence[str]  # the source's joints, in its column order
    pos: np.ndarray  # (T, 3) a body's world position (the root's, or the reference body's)
    pos_cols: Sequence[str]
    quat: np.ndarray  # (T, 4) that body's orientation, w, x, y, z
    quat_cols: str  # the quaternion's columns, as one phrase
    joints: np.ndarray  # (T, J) joint angles, source order
    joint_cols: Sequence[str]
    rates: np.ndarray | None = None  # (T, k) whatever velocities the source holds
    rate_cols: Sequence[str] = field(default_factory=tuple)


def check_source(src: Source, tables: SourceTables, model: mujoco.MjModel) -> np.ndarray:
    """Every check on a source's tables; returns the index into its joints of each model joint."""
    model_names, _, _ = model_joint_layout(model)
    check_frames(src, tables.joints.shape[0])
    check_finite(src, tables.pos, tables.pos_cols)
    check_finite(src, tables.quat, [tables.quat_cols] * 4)
    check_finite(src, tables.joints, tables.joint_cols)
    if tables.rates is not None:
        check_finite(src, tables.rates, tables.rate_cols)
        check_rates(src, tables.rates, tables.rate_cols)
    check_root_position(src, tables.pos, tables.pos_cols)
    check_unit_quaternions(src, tables.quat, tables.quat_cols)
    perm = model_order(src, tables.names, model_names)
    check_joint_ranges(src, tables.joints[:, perm], model, model_names, [tables.joint_cols[i] for i in perm])
    return perm

"""Our clip file (holosoma's npz layout) and a clip between formats, with the checks that refuse bad input.

A clip npz holds ``fps`` (1,), ``joint_pos`` (T, 7 + J) = root position, root quaternion (w, x, y, z) and J joint
angles, ``joint_vel`` (T, 6 + J) = root linear and angular velocity (both world frame) and J joint rates, and
``joint_names`` (J,). Its ``body_*`` arrays describe the recording robot's body set, which differs from a task's, so a
reader recomputes body poses and velocities by forward kinematics of ``joint_pos`` on its own model
(:func:`forward_kinematics`). A :class:`Clip` is that layout in memory, joints in the model's order. Readers of other
formats check a source's own tables here before converting them (a message names the source's row and column); the
thresholds are the file's, so whatever passes here also loads for training."""

from __future__ import annotations

import os
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import mujoco
import numpy as np

from unilab.sim.physics import BODY_STATE, make_pool

REQUIRED_KEYS = ("fps", "joint_pos", "joint_vel", "joint_names")
FPS_RANGE = (1.0, 10_000.0)  # a recorded clip's frame rate; outside it the file is mislabelled
JOINT_RANGE_SLACK = 1.0  # rad past a joint's limit a clip may go (retargeting error) before it is refused
MAX_UNLIMITED_ANGLE = 100.0  # rad (16 turns) for a joint without limits: beyond it the units are wrong
MAX_ROOT_DISTANCE = 1_000.0  # m from the origin: beyond it the clip is in other units or corrupt
MAX_RATE = 1_000.0  # m/s or rad/s in joint_vel: beyond it the clip is in other units or corrupt
_FK_CHUNK = 4096  # frames per forward-kinematics batch (bounds memory on long clips)


class MotionFileError(ValueError):
    """A motion file is unreadable or does not follow the expected layout."""


def model_joint_layout(model: mujoco.MjModel) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Names, qpos addresses and dof addresses of the model's hinge/slide joints (after the free base joint)."""
    types = np.asarray(model.jnt_type).astype(np.int64)
    free = np.flatnonzero(types == int(mujoco.mjtJoint.mjJNT_FREE))
    if free.size != 1 or free[0] != 0 or model.jnt_qposadr[0] != 0:
        raise ValueError("motion tracking needs a model whose first (and only) free joint is the floating base")
    hinge_or_slide = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
    ids = [j for j in range(model.njnt) if types[j] in hinge_or_slide]
    if len(ids) != model.njnt - 1:
        raise ValueError("motion tracking supports free + hinge/slide joints only (no ball joints)")
    names = [model.joint(j).name for j in ids]
    return names, np.asarray(model.jnt_qposadr[ids]), np.asarray(model.jnt_dofadr[ids])


def _load_npz(path: Path) -> dict[str, np.ndarray]:
    """Read and validate one clip; every problem becomes a MotionFileError naming the file."""
    if not path.is_file():
        what = "a directory, not an npz clip" if path.is_dir() else "motion file does not exist"
        raise MotionFileError(f"{path}: {what}")
    try:
        with np.load(path, allow_pickle=False) as npz:
            missing = [k for k in REQUIRED_KEYS if k not in npz.files]
            if missing:
                raise MotionFileError(f"{path}: missing key(s) {missing}; found {sorted(npz.files)}")
            data = {k: np.asarray(npz[k]) for k in REQUIRED_KEYS}
    except MotionFileError:
        raise
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, KeyError) as exc:
        raise MotionFileError(f"{path}: unreadable or truncated npz ({type(exc).__name__}: {exc})") from exc

    fps = data["fps"].reshape(-1)
    if fps.size != 1 or not FPS_RANGE[0] <= fps[0] <= FPS_RANGE[1]:
        raise MotionFileError(
            f"{path}: 'fps' must be one number in [{FPS_RANGE[0]:g}, {FPS_RANGE[1]:g}], got {data['fps']!r}")
    names = data["joint_names"]
    if names.ndim != 1 or names.dtype.kind not in "US":
        raise MotionFileError(f"{path}: 'joint_names' must be a 1-D string array, got {names.dtype} {names.shape}")
    nj = names.shape[0]
    jp, jv = data["joint_pos"], data["joint_vel"]
    if jp.ndim != 2 or jp.shape[1] != 7 + nj:
        raise MotionFileError(f"{path}: 'joint_pos' must be (T, {7 + nj}) for {nj} joints, got {jp.shape}")
    if jv.ndim != 2 or jv.shape != (jp.shape[0], 6 + nj):
        raise MotionFileError(f"{path}: 'joint_vel' must be ({jp.shape[0]}, {6 + nj}), got {jv.shape}")
    if jp.shape[0] < 2:
        raise MotionFileError(f"{path}: a clip needs at least 2 frames, got {jp.shape[0]}")
    for key in ("joint_pos", "joint_vel"):
        bad = ~np.isfinite(data[key]).all(axis=1)
        if bad.any():
            raise MotionFileError(f"{path}: '{key}' has NaN/inf values (first at frame {int(np.argmax(bad))})")
    far = np.abs(jp[:, :3]).max(axis=1) > MAX_ROOT_DISTANCE
    if far.any():
        frame = int(np.argmax(far))
        raise MotionFileError(f"{path}: root position {jp[frame, :3].tolist()} at frame {frame} is over "
                              f"{MAX_ROOT_DISTANCE:g} m from the origin (positions must be in metres)")
    rate = np.abs(jv).max(axis=1)
    if (rate > MAX_RATE).any():
        frame = int(np.argmax(rate > MAX_RATE))
        raise MotionFileError(f"{path}: 'joint_vel' reaches {rate[frame]:.4g} at frame {frame}, over "
                              f"{MAX_RATE:g} (m/s and rad/s expected)")
    qn = np.linalg.norm(jp[:, 3:7], axis=1)
    if (qn < 1e-6).any():
        raise MotionFileError(f"{path}: root quaternion has zero norm at frame {int(np.argmax(qn < 1e-6))}")
    data["fps"] = np.asarray(float(fps[0]))
    data["joint_names"] = np.asarray([str(n) for n in names])
    return data


def joint_range_excess(joints: np.ndarray, model: mujoco.MjModel, names: Sequence[str]
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(excess, lo, hi)``: how far (rad) each angle of ``joints`` (T, J), columns ``names``, lies outside its joint's
    range (negative inside), and the ranges used (a joint without limits: +-MAX_UNLIMITED_ANGLE)."""
    ids = [model.joint(n).id for n in names]
    limited = np.asarray(model.jnt_limited)[ids].astype(bool)
    lo, hi = np.asarray(model.jnt_range)[ids].T
    lo = np.where(limited, lo, -MAX_UNLIMITED_ANGLE)
    hi = np.where(limited, hi, MAX_UNLIMITED_ANGLE)
    return np.maximum(joints - hi, lo - joints), lo, hi


def read_clip(path: Path, model: mujoco.MjModel, names: Sequence[str]) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The checked contents of clip file ``path`` on ``model`` (joints ``names``, model order) and the index into the
    clip's joints of each model joint; a MotionFileError naming the file for anything wrong."""
    data = _load_npz(path)
    perm = model_order(Source(path), list(data["joint_names"]), names)
    check_joint_ranges(Source(path), data["joint_pos"][:, 7:][:, perm], model, names, names)
    return data, perm


def resample_indices(num_frames: int, fps: float, control_dt: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(i0, i1, alpha)``: output frame k, at ``k * control_dt`` s, interpolates source frames i0[k] and i1[k] with
    weight alpha[k] on i1; the clip's last frame is never passed."""
    duration = (num_frames - 1) / fps
    n_out = int(np.floor(duration / control_dt + 1e-9)) + 1
    phase = np.arange(n_out) * (control_dt * fps)
    i0 = np.clip(np.floor(phase + 1e-9).astype(np.int64), 0, num_frames - 1)
    alpha = np.clip(phase - i0, 0.0, 1.0)
    alpha[alpha < 1e-9] = 0.0
    i1 = np.minimum(i0 + 1, num_frames - 1)
    return i0, i1, alpha


def clip_frame_counts(files: Sequence[str | os.PathLike], control_dt: float) -> np.ndarray:
    """Frames of each clip sampled every ``control_dt`` (what the task's motion library holds), without building it."""
    clips = (_load_npz(Path(path)) for path in files)
    return np.array([resample_indices(d["joint_pos"].shape[0], float(d["fps"]), control_dt)[0].size for d in clips],
                    dtype=np.int64)


def forward_kinematics(model: mujoco.MjModel, qpos: np.ndarray, qvel: np.ndarray, body_ids: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """World ``(pos, quat, lin_vel, ang_vel)`` of ``body_ids`` (origin velocity) for each (qpos, qvel) row: the
    physics pool's body state after ``forward``, so the reference and the simulated robot are measured alike."""
    n = qpos.shape[0]
    outs = tuple(np.empty((n, len(body_ids), k)) for k in (3, 4, 3, 3))
    for start in range(0, n, _FK_CHUNK):
        stop = min(n, start + _FK_CHUNK)
        # one thread: library set-up is short, and the pool's threads are sized by the env's sim config;
        # contacts off and no velocity check: nothing is stepped, and clips may move fast
        pool = make_pool(model, stop - start, nthread=1, outputs=BODY_STATE, contacts=False, max_qvel=None)
        pool.qpos[...] = qpos[start:stop]
        pool.qvel[...] = qvel[start:stop]
        pool.forward()
        for out, name in zip(outs, BODY_STATE, strict=True):
            out[start:stop] = getattr(pool, name)[:, body_ids]
        pool.close()
    return outs


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

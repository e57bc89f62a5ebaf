"""holosoma / BeyondMimic npz clips: read both layouts, write holosoma's (our own clip format).

holosoma's layout (what ``unilab.motion_io.clip`` reads, and holosoma's ``MotionLoader``): ``fps``
(1,), ``joint_pos`` (T, 7 + J) = root position, root quaternion w, x, y, z, joints; ``joint_vel`` (T, 6 + J) = root
linear and angular velocity (world), joint rates; ``joint_names`` (J,); ``body_names`` (B,), ``body_pos_w`` (T, B, 3),
``body_quat_w`` (T, B, 4, w first), ``body_lin_vel_w``, ``body_ang_vel_w`` (T, B, 3) of the recording robot's bodies.

BeyondMimic's original layout (``whole_body_tracking/scripts/csv_to_npz.py``) has no names: ``joint_pos`` and
``joint_vel`` are (T, J) in IsaacLab's joint order (breadth first through the robot's tree) and the root is body 0 of
``body_pos_w`` / ``body_quat_w``. Its root velocities are recomputed by finite differences: IsaacLab's
``body_lin_vel_w`` is the velocity of the centre of mass, not of the root's origin that our layout stores.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import mujoco
import numpy as np

from unilab.motion_io import clip as checks
from unilab.motion_io.clip import Clip, ClipError, Source, SourceTables, model_joint_layout
from unilab.motion_io.kinematics import body_state, root_velocities
from unilab.sim.quat import quat_normalize

ROOT_POS_COLUMNS = ("root x", "root y", "root z")
ROOT_QUAT_COLUMNS = ("root qw", "root qx", "root qy", "root qz")
ROOT_VEL_COLUMNS = ("root vx", "root vy", "root vz", "root wx", "root wy", "root wz")


def isaaclab_joint_order(model: mujoco.MjModel) -> list[str]:
    """The model's hinge/slide joints breadth first through its body tree, siblings in model order: IsaacLab's
    articulation order, which BeyondMimic's unnamed npz files use (IsaacLab orders siblings as it parses the robot;
    for the G1 that is the model's order, checked against BeyondMimic's G1 joint list in the tests)."""
    names, _, _ = model_joint_layout(model)
    depth = np.zeros(model.nbody, dtype=np.int64)
    for b in range(1, model.nbody):  # a parent's id is below its child's
        depth[b] = depth[model.body_parentid[b]] + 1
    ids = [model.joint(n).id for n in names]
    # MuJoCo numbers joints depth first; a stable sort by depth keeps that order within a level, which is BFS order
    return [names[i] for i in sorted(range(len(ids)), key=lambda i: depth[model.jnt_bodyid[ids[i]]])]


def _load(path: Path) -> dict[str, np.ndarray]:
    if not path.is_file():
        raise ClipError(f"{path}: file does not exist")
    try:
        with np.load(path, allow_pickle=False) as npz:
            return {k: np.asarray(npz[k]) for k in npz.files}
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, KeyError) as exc:
        raise ClipError(f"{path}: unreadable or truncated npz ({type(exc).__name__}: {exc})") from exc


def _fps(src: Source, data: dict[str, np.ndarray], fps: float | None) -> float:
    if "fps" not in data:
        if fps is None:
            raise src.error("the frame rate is unknown: the file has no 'fps'; give it with --fps")
        return checks.check_fps(fps, "--fps")
    stored = data["fps"].reshape(-1)
    if stored.size != 1 or stored.dtype.kind not in "iuf":
        raise src.error(f"'fps' must be one number, got {data['fps']!r}")
    value = checks.check_fps(stored[0], f"{src.path}: 'fps'")
    if fps is not None and checks.check_fps(fps, "--fps") != value:
        raise src.error(f"the file's 'fps' is {value:g}, --fps says {fps:g} (--fps is for files without a rate)")
    return value


def _table(src: Source, data: dict[str, np.ndarray], key: str, shape: tuple[int | None, ...]) -> np.ndarray:
    table = data[key]
    if table.ndim != len(shape) or any(s is not None and s != t for s, t in zip(shape, table.shape)):
        want = ", ".join("T" if s is None else str(s) for s in shape)
        raise src.error(f"{key!r} must be ({want}), got {table.shape}")
    if table.dtype.kind not in "iuf":
        raise src.error(f"{key!r} must hold numbers, got dtype {table.dtype}")
    return table.astype(np.float64)


def _holosoma_tables(src: Source, data: dict[str, np.ndarray]) -> SourceTables:
    names = data["joint_names"]
    if names.ndim != 1 or names.dtype.kind not in "US":
        raise src.error(f"'joint_names' must be a 1-D string array, got {names.dtype} {names.shape}")
    names = [str(n) for n in names]
    pos = _table(src, data, "joint_pos", (None, 7 + len(names)))
    cols = [f"joint_pos[:, {c}] ({n})" for c, n in enumerate([*ROOT_POS_COLUMNS, *ROOT_QUAT_COLUMNS, *names])]
    has_vel = "joint_vel" in data
    return SourceTables(
        names, pos[:, 0:3], cols[0:3], pos[:, 3:7], "joint_pos[:, 3:7] (root quaternion w, x, y, z)", pos[:, 7:],
        cols[7:], _table(src, data, "joint_vel", (pos.shape[0], 6 + len(names))) if has_vel else None,
        [f"joint_vel[:, {c}] ({n})" for c, n in enumerate([*ROOT_VEL_COLUMNS, *names])] if has_vel else ())


def _beyondmimic_tables(src: Source, data: dict[str, np.ndarray], model: mujoco.MjModel) -> SourceTables:
    if not {"body_pos_w", "body_quat_w"} <= set(data):
        raise src.error(f"no 'joint_names' and no 'body_pos_w' / 'body_quat_w' (found {sorted(data)}): neither "
                        "holosoma's layout nor BeyondMimic's")
    names = isaaclab_joint_order(model)
    joints = _table(src, data, "joint_pos", (None, len(names)))
    body_pos = _table(src, data, "body_pos_w", (joints.shape[0], None, 3))
    body_quat = _table(src, data, "body_quat_w", (joints.shape[0], body_pos.shape[1], 4))
    has_vel = "joint_vel" in data
    return SourceTables(
        names, body_pos[:, 0], [f"body_pos_w[:, 0, {k}] (root)" for k in range(3)], body_quat[:, 0],
        "body_quat_w[:, 0] (root quaternion w, x, y, z)", joints,
        [f"joint_pos[:, {c}] ({n}, IsaacLab order)" for c, n in enumerate(names)],
        _table(src, data, "joint_vel", (joints.shape[0], len(names))) if has_vel else None,
        [f"joint_vel[:, {c}] ({n}, IsaacLab order)" for c, n in enumerate(names)] if has_vel else ())


def read_npz(path: Path, model: mujoco.MjModel, fps: float | None = None) -> Clip:
    """A holosoma- or BeyondMimic-layout npz as a :class:`Clip` on ``model`` (joints reordered by name, or from
    IsaacLab's order when unnamed); ``fps`` only for a file without one."""
    src = Source(path, "frame")
    data = _load(path)
    if "joint_pos" not in data:
        raise src.error(f"no 'joint_pos' (found {sorted(data)}): not a holosoma / BeyondMimic clip")
    rate = _fps(src, data, fps)
    named = "joint_names" in data
    tables = _holosoma_tables(src, data) if named else _beyondmimic_tables(src, data, model)
    perm = checks.check_source(src, tables, model)
    quat = quat_normalize(tables.quat)
    joint_pos = np.concatenate([tables.pos, quat, tables.joints[:, perm]], axis=1)
    if tables.rates is None:
        joint_vel = None
    elif named:
        joint_vel = np.concatenate([tables.rates[:, :6], tables.rates[:, 6:][:, perm]], axis=1)
    else:  # BeyondMimic: joint rates given, the root's derived
        joint_vel = np.concatenate([root_velocities(tables.pos, quat, rate), tables.rates[:, perm]], axis=1)
    return Clip(rate, tuple(model_joint_layout(model)[0]), joint_pos, joint_vel)


def write_npz(path: Path, clip: Clip, model: mujoco.MjModel) -> None:
    """``clip`` (with velocities) in holosoma's layout, the body arrays of every model body by forward kinematics
    (float32, as holosoma reads them); written to ``path`` as is (the caller makes it atomic)."""
    if clip.joint_vel is None:
        raise ValueError("write_npz needs a clip with velocities")
    bodies = np.arange(1, model.nbody)  # all but the world
    pos, quat, lin, ang = (a.astype(np.float32) for a in body_state(model, clip, bodies))
    with open(path, "wb") as f:
        np.savez(f, fps=np.array([clip.fps]), joint_pos=clip.joint_pos, joint_vel=clip.joint_vel,
                 joint_names=np.array(clip.joint_names), body_names=np.array([model.body(b).name for b in bodies]),
                 body_pos_w=pos, body_quat_w=quat, body_lin_vel_w=lin, body_ang_vel_w=ang)

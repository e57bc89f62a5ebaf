"""Motion library: reference clips (BeyondMimic npz layout) resampled and re-kinematised on our model.

A clip npz holds ``fps`` (1,), ``joint_pos`` (T, 7 + J) = root position, root quaternion (w, x, y, z) and J joint
angles, ``joint_vel`` (T, 6 + J) = root linear and angular velocity (both world frame) and J joint rates, and
``joint_names`` (J,). Its ``body_*`` arrays describe the recording robot's body set, which differs from ours, so
reference body poses and velocities are recomputed by forward kinematics of ``joint_pos`` on the task's MjModel.
All clips are stored concatenated, ``(total_frames, ...)`` arrays with per-clip offsets.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path

import mujoco
import numpy as np
from numba import njit

from unilab.sim.physics import BODY_STATE, make_pool
from unilab.sim.quat import quat_normalize, quat_rotate_inv, quat_slerp

REQUIRED_KEYS = ("fps", "joint_pos", "joint_vel", "joint_names")
FPS_RANGE = (1.0, 10_000.0)  # a recorded clip's frame rate; outside it the file is mislabelled
JOINT_RANGE_SLACK = 1.0  # rad past a joint's limit a clip may go (retargeting error) before it is refused
MAX_UNLIMITED_ANGLE = 100.0  # rad (16 turns) for a joint without limits: beyond it the units are wrong
MAX_ROOT_DISTANCE = 1_000.0  # m from the origin: beyond it the clip is in other units or corrupt
MAX_RATE = 1_000.0  # m/s or rad/s in joint_vel: beyond it the clip is in other units or corrupt
_FK_CHUNK = 4096  # frames per forward-kinematics batch (bounds memory on long clips)


class MotionFileError(ValueError):
    """A motion file is unreadable or does not follow the expected layout."""


@dataclass
class MotionFrames:
    """Reference state of ``n`` (clip, frame) pairs, all arrays ``(n, ...)``."""

    qpos: np.ndarray  # (n, nq) model qpos (root pos, root quat wxyz, joints)
    qvel: np.ndarray  # (n, nv) model qvel (free-joint angular velocity in the body frame)
    joint_pos: np.ndarray  # (n, J) actuated joints, model order
    joint_vel: np.ndarray  # (n, J)
    body_pos_w: np.ndarray  # (n, B, 3) tracked bodies, world frame
    body_quat_w: np.ndarray  # (n, B, 4)
    body_lin_vel_w: np.ndarray  # (n, B, 3) velocity of each body origin, world frame
    body_ang_vel_w: np.ndarray  # (n, B, 3) world frame


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


def _joint_permutation(path: Path, clip_names: Sequence[str], model_names: Sequence[str]) -> np.ndarray:
    """Index into the clip's joints for each model joint; error listing any mismatch."""
    problems = (("model joints missing from the clip", [n for n in model_names if n not in clip_names]),
                ("clip joints not in the model", [n for n in clip_names if n not in model_names]),
                ("duplicated clip joints", sorted({n for n in clip_names if list(clip_names).count(n) > 1})))
    parts = [f"{what}: {names}" for what, names in problems if names]
    if parts:
        raise MotionFileError(f"{path}: joint names do not match the model; " + "; ".join(parts))
    index = {n: i for i, n in enumerate(clip_names)}
    return np.array([index[n] for n in model_names], dtype=np.int64)


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


def _check_joint_ranges(path: Path, joints: np.ndarray, model: mujoco.MjModel, names: Sequence[str]) -> None:
    """Refuse a clip whose joint angles leave a joint's range by more than the slack (wrong units)."""
    excess, lo, hi = joint_range_excess(joints, model, names)
    if (excess > JOINT_RANGE_SLACK).any():
        frame, j = np.unravel_index(int(np.argmax(excess)), excess.shape)
        raise MotionFileError(
            f"{path}: joint {names[j]} is at {joints[frame, j]:.4g} rad at frame {frame}, more than "
            f"{JOINT_RANGE_SLACK:g} rad outside its range [{lo[j]:.3g}, {hi[j]:.3g}] (angles must be in radians)")


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
    """Frames of each clip sampled every ``control_dt`` (what :class:`MotionLibrary` holds), without building it."""
    clips = (_load_npz(Path(path)) for path in files)
    return np.array([resample_indices(d["joint_pos"].shape[0], float(d["fps"]), control_dt)[0].size for d in clips],
                    dtype=np.int64)


def _resample(data: dict[str, np.ndarray], perm: np.ndarray, control_dt: float, model: mujoco.MjModel,
              qadr: np.ndarray, dadr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Model-layout (qpos, qvel) of the clip at the control rate."""
    jp, jv = data["joint_pos"], data["joint_vel"]
    i0, i1, a = resample_indices(jp.shape[0], float(data["fps"]), control_dt)
    a1 = a[:, None]
    root_quat = quat_slerp(quat_normalize(jp[i0, 3:7]), quat_normalize(jp[i1, 3:7]), a)
    joints = ((1 - a1) * jp[i0, 7:] + a1 * jp[i1, 7:])[:, perm]
    vel = (1 - a1) * jv[i0] + a1 * jv[i1]
    qpos = np.tile(model.qpos0, (len(i0), 1))
    qpos[:, 0:3] = (1 - a1) * jp[i0, :3] + a1 * jp[i1, :3]
    qpos[:, 3:7] = root_quat
    qpos[:, qadr] = joints
    qvel = np.zeros((len(i0), model.nv))
    qvel[:, 0:3] = vel[:, 0:3]  # MuJoCo free joint: linear velocity in the world frame
    qvel[:, 3:6] = quat_rotate_inv(root_quat, vel[:, 3:6])  # angular velocity in the body frame
    qvel[:, dadr] = vel[:, 6:][:, perm]
    return qpos, qvel


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


class MotionLibrary:
    """Reference motions of ``files`` on ``model`` (the task's MjModel), resampled to the policy step
    ``control_dt`` (s), with the poses and velocities of ``tracked_bodies``; batched lookups."""

    def __init__(self, model: mujoco.MjModel, files: Sequence[str | os.PathLike] | str | os.PathLike,
                 control_dt: float, tracked_bodies: Sequence[str], anchor_body: str = "torso_link"):
        if isinstance(files, (str, os.PathLike)):
            files = [files]
        files = [Path(f) for f in files]
        if not files:
            raise ValueError("MotionLibrary needs at least one motion file")
        if not control_dt > 0:
            raise ValueError(f"control_dt must be > 0, got {control_dt}")
        tracked_bodies = list(tracked_bodies)
        if not tracked_bodies:
            raise ValueError("tracked_bodies must name at least one body")
        unknown = [b for b in tracked_bodies if mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, b) < 0]
        if unknown:
            raise ValueError(f"tracked bodies not in the model: {unknown}")
        if anchor_body not in tracked_bodies:
            raise ValueError(f"anchor_body {anchor_body!r} must be one of tracked_bodies {tracked_bodies}")

        self.control_dt = float(control_dt)
        self.files = files
        self.body_ids = np.array([mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, b) for b in tracked_bodies])
        self.anchor_index = tracked_bodies.index(anchor_body)
        self.joint_names, self.joint_qposadr, self.joint_dofadr = model_joint_layout(model)

        clips = []  # (qpos (T, nq), qvel (T, nv)) of each clip, resampled
        for path in files:
            data = _load_npz(path)
            perm = _joint_permutation(path, list(data["joint_names"]), self.joint_names)
            _check_joint_ranges(path, data["joint_pos"][:, 7:][:, perm], model, self.joint_names)
            clips.append(_resample(data, perm, self.control_dt, model, self.joint_qposadr, self.joint_dofadr))

        self.num_frames = np.array([qpos.shape[0] for qpos, _ in clips], dtype=np.int64)
        self.clip_offsets = np.concatenate([[0], np.cumsum(self.num_frames)[:-1]]).astype(np.int64)
        self.qpos = np.concatenate([qpos for qpos, _ in clips])
        self.qvel = np.concatenate([qvel for _, qvel in clips])
        self.joint_pos = np.ascontiguousarray(self.qpos[:, self.joint_qposadr])
        self.joint_vel = np.ascontiguousarray(self.qvel[:, self.joint_dofadr])
        self.body_pos_w, self.body_quat_w, self.body_lin_vel_w, self.body_ang_vel_w = forward_kinematics(
            model, self.qpos, self.qvel, self.body_ids)

    @property
    def num_clips(self) -> int:
        return int(self.num_frames.size)

    def flat_index(self, clip_ids: np.ndarray, frame_ids: np.ndarray) -> np.ndarray:
        """Row of (clip, frame) in the flat arrays; frames are clamped into the clip."""
        clip_ids = np.asarray(clip_ids, dtype=np.int64)
        frame_ids = np.asarray(frame_ids, dtype=np.int64)
        if clip_ids.size and (clip_ids.min() < 0 or clip_ids.max() >= self.num_clips):
            raise IndexError(f"clip ids must be in [0, {self.num_clips})")
        return self.clip_offsets[clip_ids] + np.clip(frame_ids, 0, self.num_frames[clip_ids] - 1)

    def lookup(self, clip_ids: np.ndarray, frame_ids: np.ndarray) -> MotionFrames:
        """Reference state of each (clip, frame) pair, ``(n, ...)`` arrays (copies)."""
        idx = self.flat_index(clip_ids, frame_ids)
        return MotionFrames(*(getattr(self, f.name)[idx] for f in fields(MotionFrames)))


@njit(cache=True, fastmath=False, inline="always")
def library_row(clip_offsets, num_frames, clip, frame):
    """:meth:`MotionLibrary.flat_index` of one (clip, frame) in a per-env driver: the frame clamped into the clip."""
    return clip_offsets[clip] + min(max(frame, 0), num_frames[clip] - 1)

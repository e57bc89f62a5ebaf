"""Motion library: reference clips (:mod:`unilab.motion_io.clip`) resampled to the policy step, body poses and
velocities by forward kinematics of their ``joint_pos`` on the task's MjModel; all clips concatenated, ``(total_frames,
...)`` arrays with per-clip offsets."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path

import mujoco
import numpy as np
from numba import njit

from unilab.motion_io.clip import forward_kinematics, model_joint_layout, read_clip, resample_indices
from unilab.sim.quat import quat_normalize, quat_rotate_inv, quat_slerp


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
            data, perm = read_clip(path, model, self.joint_names)
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

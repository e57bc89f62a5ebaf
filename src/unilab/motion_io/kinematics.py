"""Resampling, finite-difference velocities, and root <-> body poses by forward kinematics on our model.

Velocities follow BeyondMimic's ``csv_to_npz.py`` (the converter behind the npz layout holosoma trains on): positions
and joint angles by ``torch.gradient`` (central differences inside, one-sided at the two ends), the root's world-frame
angular velocity by the central rotation difference ``log(q[k+1] q[k-1]^-1) / (2 dt)`` with the first and last
values repeated at the ends. Resampling is the motion loader's: the same output times (``resample_indices``), positions
linear, quaternions by slerp.
"""

from __future__ import annotations

import mujoco
import numpy as np

from unilab.motion_io.clip import Clip, forward_kinematics, model_joint_layout, resample_indices
from unilab.sim.quat import quat_conj, quat_mul, quat_rotate, quat_rotate_inv, quat_slerp

_SMALL_ANGLE = 1e-8  # rad: below it log(q) uses its first-order expansion


def rotation_vector(q: np.ndarray) -> np.ndarray:
    """Axis * angle (rad, angle in [0, pi]) of unit quaternions ``q`` (..., 4), w first; q and -q give the same."""
    q = np.where(q[..., :1] < 0, -q, q)
    sin_half = np.linalg.norm(q[..., 1:], axis=-1, keepdims=True)
    angle = 2.0 * np.arctan2(sin_half, q[..., :1])
    scale = np.where(angle > _SMALL_ANGLE, angle / np.where(sin_half > 0, sin_half, 1.0), 2.0)
    return q[..., 1:] * scale


def world_angular_velocity(quat: np.ndarray, fps: float) -> np.ndarray:
    """World-frame angular velocity (rad/s) of the orientations ``quat`` (T, 4) sampled at ``fps``."""
    dt = 1.0 / fps
    if quat.shape[0] < 3:  # no centre frame: the one difference there is, for both frames
        omega = rotation_vector(quat_mul(quat[1:], quat_conj(quat[:-1]))) / dt
        return np.repeat(omega, quat.shape[0], axis=0)
    inner = rotation_vector(quat_mul(quat[2:], quat_conj(quat[:-2]))) / (2.0 * dt)
    return np.concatenate([inner[:1], inner, inner[-1:]])


def root_velocities(pos: np.ndarray, quat: np.ndarray, fps: float) -> np.ndarray:
    """World-frame linear and angular velocity (T, 6) of the poses ``pos`` (T, 3), ``quat`` (T, 4) at ``fps``."""
    return np.concatenate([np.gradient(pos, 1.0 / fps, axis=0), world_angular_velocity(quat, fps)], axis=1)


def finite_difference_velocities(joint_pos: np.ndarray, fps: float) -> np.ndarray:
    """``joint_vel`` (T, 6 + J) of a clip's ``joint_pos`` (T, 7 + J) sampled at ``fps``."""
    return np.concatenate([root_velocities(joint_pos[:, 0:3], joint_pos[:, 3:7], fps),
                           np.gradient(joint_pos[:, 7:], 1.0 / fps, axis=0)], axis=1)


def with_velocities(clip: Clip) -> Clip:
    """``clip``, its velocities by finite differences if it has none."""
    if clip.joint_vel is not None:
        return clip
    return Clip(clip.fps, clip.joint_names, clip.joint_pos, finite_difference_velocities(clip.joint_pos, clip.fps))


def resample(clip: Clip, fps: float) -> Clip:
    """``clip`` at ``fps`` (unchanged at its own rate): the motion loader's sample times, positions, joint angles and
    velocities linear, the root quaternion by slerp."""
    if fps == clip.fps:
        return clip
    i0, i1, alpha = resample_indices(clip.num_frames, clip.fps, 1.0 / fps)
    a = alpha[:, None]
    pos = (1 - a) * clip.joint_pos[i0] + a * clip.joint_pos[i1]
    pos[:, 3:7] = quat_slerp(clip.joint_pos[i0, 3:7], clip.joint_pos[i1, 3:7], alpha)
    vel = None if clip.joint_vel is None else (1 - a) * clip.joint_vel[i0] + a * clip.joint_vel[i1]
    return Clip(float(fps), clip.joint_names, pos, vel)


def model_state(model: mujoco.MjModel, clip: Clip) -> tuple[np.ndarray, np.ndarray]:
    """The clip as model ``(qpos (T, nq), qvel (T, nv))`` (zero velocity where the clip has none)."""
    names, qadr, dadr = model_joint_layout(model)
    if tuple(names) != clip.joint_names:
        raise ValueError(f"the clip's joints {clip.joint_names} are not the model's {tuple(names)}")
    qpos = np.tile(model.qpos0, (clip.num_frames, 1))
    qpos[:, 0:7] = clip.joint_pos[:, 0:7]
    qpos[:, qadr] = clip.joint_pos[:, 7:]
    qvel = np.zeros((clip.num_frames, model.nv))
    if clip.joint_vel is not None:
        qvel[:, 0:3] = clip.joint_vel[:, 0:3]  # MuJoCo's free joint: linear velocity in the world frame
        qvel[:, 3:6] = quat_rotate_inv(clip.joint_pos[:, 3:7], clip.joint_vel[:, 3:6])  # angular: body frame
        qvel[:, dadr] = clip.joint_vel[:, 6:]
    return qpos, qvel


def body_state(model: mujoco.MjModel, clip: Clip, body_ids: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """World ``(pos, quat wxyz, origin lin vel, ang vel)`` of ``body_ids`` in every frame, ``(T, B, k)``."""
    return forward_kinematics(model, *model_state(model, clip), np.asarray(body_ids))


def root_from_body(model: mujoco.MjModel, joints: np.ndarray, body_id: int, body_pos: np.ndarray,
                   body_quat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Root ``(pos (T, 3), quat wxyz (T, 4))`` that puts body ``body_id`` at ``body_pos`` / ``body_quat`` (world)
    with the model's joints at ``joints`` (T, J), model order: the body's pose in the root frame by forward
    kinematics, then inverted."""
    _, qadr, _ = model_joint_layout(model)
    qpos = np.tile(model.qpos0, (joints.shape[0], 1))
    qpos[:, 0:7] = (0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0)
    qpos[:, qadr] = joints
    rel_pos, rel_quat, _, _ = forward_kinematics(model, qpos, np.zeros((joints.shape[0], model.nv)),
                                                 np.array([body_id]))
    root_quat = quat_mul(body_quat, quat_conj(rel_quat[:, 0]))
    return body_pos - quat_rotate(root_quat, rel_pos[:, 0]), root_quat

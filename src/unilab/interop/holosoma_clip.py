"""A WBT file's embedded clip as a unilab clip (BeyondMimic npz layout, :mod:`unilab.tasks.g1_motion_tracking.motion`).

The file holds the reference body's (the torso link's) world pose per frame, unilab's clips the floating base's (the
pelvis'): the base pose is recovered by forward kinematics on the robot model, ``T_base = T_ref * T_ref_in_base(q)^-1``
with ``T_ref_in_base`` the reference body's pose in the base frame at the frame's joint angles (for the G1 it depends
on the three waist joints only). The base's world velocities are central differences of its poses (one-sided at the
ends), as the file carries none.
"""

from __future__ import annotations

import os
from pathlib import Path

import mujoco
import numpy as np

from unilab.interop.holosoma_onnx import EmbeddedClip
from unilab.sim.quat import quat_conj, quat_mul, quat_normalize, quat_rotate


def base_poses(clip: EmbeddedClip, model: mujoco.MjModel, ref_body: str) -> tuple[np.ndarray, np.ndarray]:
    """``(pos (T, 3), quat (T, 4) wxyz)`` of the model's floating base whose ``ref_body`` has the clip's poses."""
    body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, ref_body)
    if body < 0:
        raise ValueError(f"the clip's reference body {ref_body!r} is not a body of the model")
    if model.njnt < 1 or model.jnt_type[0] != mujoco.mjtJoint.mjJNT_FREE:
        raise ValueError("recovering the base pose needs a model whose first joint is the base's free joint")
    qadr = np.empty(len(clip.joint_names), dtype=np.int64)
    for j, name in enumerate(clip.joint_names):
        jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name)
        if jid < 0:
            raise ValueError(f"the clip's joint {name!r} is not a joint of the model")
        qadr[j] = model.jnt_qposadr[jid]
    data = mujoco.MjData(model)
    n = clip.joint_pos.shape[0]
    rel_pos, rel_quat = np.empty((n, 3)), np.empty((n, 4))
    qpos = model.qpos0.copy()
    qpos[:7] = (0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0)  # the base at the origin: xpos/xquat are base-frame poses
    for t in range(n):
        qpos[qadr] = clip.joint_pos[t]
        data.qpos[:] = qpos
        mujoco.mj_kinematics(model, data)
        rel_pos[t], rel_quat[t] = data.xpos[body], data.xquat[body]
    quat = quat_normalize(quat_mul(clip.ref_quat_wxyz, quat_conj(rel_quat)))
    quat[np.cumsum(np.r_[0, np.sum(quat[1:] * quat[:-1], axis=1) < 0]) % 2 == 1] *= -1.0  # one hemisphere
    pos = clip.ref_pos - quat_rotate(quat, rel_pos)
    return pos, quat


def base_velocities(pos: np.ndarray, quat: np.ndarray, fps: float) -> tuple[np.ndarray, np.ndarray]:
    """World-frame linear and angular velocity of poses sampled at ``fps`` (central differences):
    ``omega = 2 (dq/dt) q^-1`` (vector part)."""
    lin = np.gradient(pos, 1.0 / fps, axis=0)
    dq = np.gradient(quat, 1.0 / fps, axis=0)
    ang = 2.0 * quat_mul(dq, quat_conj(quat))[:, 1:]
    return lin, ang


def clip_arrays(clip: EmbeddedClip, model: mujoco.MjModel, ref_body: str) -> dict[str, np.ndarray]:
    """The npz arrays of the clip with its base recovered on ``model`` (``ref_body``: the body the file's
    ``ref_pos_xyz`` / ``ref_quat_xyzw`` describe)."""
    pos, quat = base_poses(clip, model, ref_body)
    lin, ang = base_velocities(pos, quat, clip.fps)
    return {"fps": np.array([clip.fps]), "joint_pos": np.concatenate([pos, quat, clip.joint_pos], axis=1),
            "joint_vel": np.concatenate([lin, ang, clip.joint_vel], axis=1),
            "joint_names": np.array(clip.joint_names)}


def write_clip(clip: EmbeddedClip, model: mujoco.MjModel, ref_body: str, out: str | os.PathLike) -> Path:
    """:func:`clip_arrays` written to ``out`` (npz, replaced atomically)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.stem}.{os.getpid()}.tmp.npz")
    try:
        np.savez(tmp, **clip_arrays(clip, model, ref_body))
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return out

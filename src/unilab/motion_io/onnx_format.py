"""Clips in holosoma's WBT ONNX layout: the clip a policy file embeds (tables: :mod:`unilab.motion_io.onnx_tables`).

The file holds the joints and the pose of one reference body (the G1's ``torso_link``), not the root: the reader puts
the root (the pelvis) where forward kinematics of our model, with the frame's joint angles, puts the reference body at
its stored pose; the root's velocities then come from finite differences, the joint rates from the file. The writer
does the reverse (the reference body's pose by forward kinematics of the clip).
"""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np

from unilab.motion_io import clip as checks
from unilab.motion_io.clip import Clip, ClipError, Source, SourceTables, model_joint_layout
from unilab.motion_io.formats import HOLOSOMA_POLICY_FPS, REF_BODY
from unilab.motion_io.kinematics import body_state, root_from_body, root_velocities
from unilab.motion_io.onnx_tables import ClipTables, embedded_clip, write_clip_model
from unilab.sim.quat import quat_normalize


def reference_body_id(model: mujoco.MjModel, ref_body: str) -> int:
    """Id of ``ref_body``, which must move with the model's floating base."""
    body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, ref_body)
    base = int(model.jnt_bodyid[0])
    if body < 0:
        bodies = [model.body(b).name for b in range(1, model.nbody)]
        raise ClipError(f"--ref-body {ref_body!r} is not a body of the model (bodies: {bodies})")
    if body == 0 or model.body_rootid[body] != model.body_rootid[base]:
        raise ClipError(f"--ref-body {ref_body!r} does not move with the floating base {model.body(base).name!r}")
    return body


def read_onnx(path: Path, model: mujoco.MjModel, fps: float = HOLOSOMA_POLICY_FPS, ref_body: str = REF_BODY
              ) -> Clip:
    """The clip embedded in the holosoma WBT ONNX file ``path`` as a :class:`Clip` on ``model``: the root recovered
    from ``ref_body``'s pose, joints by the metadata ``dof_names`` (the model's order when the file has none)."""
    fps = checks.check_fps(fps, "--fps")
    body = reference_body_id(model, ref_body)
    emb = embedded_clip(path)
    model_names, _, _ = model_joint_layout(model)
    names = list(emb.dof_names) if emb.dof_names is not None else model_names
    src = Source(path, "time_step")
    if len(names) != emb.joint_pos.shape[1]:
        raise src.error(f"joint_pos has {emb.joint_pos.shape[1]} columns and no dof_names metadata; the model has "
                        f"{len(names)} joints")
    tables = SourceTables(
        names, emb.ref_pos_xyz, [f"ref_pos_xyz[{k}]" for k in range(3)], emb.ref_quat_xyzw[:, [3, 0, 1, 2]],
        "ref_quat_xyzw", emb.joint_pos, [f"joint_pos[{j}] ({n})" for j, n in enumerate(names)],
        emb.joint_vel, [f"joint_vel[{j}] ({n})" for j, n in enumerate(names)])
    perm = checks.check_source(src, tables, model)
    joints = emb.joint_pos[:, perm]
    root_pos, root_quat = root_from_body(model, joints, body, tables.pos, quat_normalize(tables.quat))
    joint_vel = np.concatenate([root_velocities(root_pos, root_quat, fps), emb.joint_vel[:, perm]], axis=1)
    return Clip(fps, tuple(model_names), np.concatenate([root_pos, root_quat, joints], axis=1), joint_vel)


def write_onnx(path: Path, clip: Clip, model: mujoco.MjModel, ref_body: str = REF_BODY) -> None:
    """``clip`` (with velocities, at the policy rate: the caller resamples) as a holosoma embedded-clip graph, the
    pose of ``ref_body`` by forward kinematics; written to ``path`` as is."""
    if clip.joint_vel is None:
        raise ValueError("write_onnx needs a clip with velocities")
    pos, quat, _, _ = body_state(model, clip, np.array([reference_body_id(model, ref_body)]))
    write_clip_model(path, ClipTables(joint_pos=clip.joint_pos[:, 7:], joint_vel=clip.joint_vel[:, 6:],
                                      ref_pos_xyz=pos[:, 0], ref_quat_xyzw=quat[:, 0][:, [1, 2, 3, 0]],
                                      dof_names=clip.joint_names))

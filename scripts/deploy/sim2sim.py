#!/usr/bin/env python3
"""Run an exported unilab policy in plain MuJoCo from its ONNX metadata alone, and report its metrics.

    python scripts/deploy/sim2sim.py policy.onnx [--clip NPZ] [--model MJCF] [--steps N] [--json PATH]
    python scripts/deploy/sim2sim.py loco.onnx [--command VX VY WZ] [--model MJCF] [--steps N] [--json PATH]

A motion-tracking policy (metadata task_kind motion_tracking) tracks a clip, as below. A locomotion policy
(task_kind locomotion: g1_locomotion, t1_locomotion) starts upright at the metadata's base_height with its joints
at the defaults and walks at ``--command`` (forward, lateral m/s, yaw rate rad/s; default 0.5 0 0) with the
evaluation gait clock (legs at phases 0 and -pi, advancing 2 pi control_dt / gait_period_s per step, both at pi
while the command is zero); it reports whether it survived (no termination body's net contact force above
termination_force), the episode length and the mean absolute forward, lateral and yaw-rate errors in the base frame
(the definitions of ``unilab-eval --task <task>``).

This is the proof that the exported contract is complete: it imports only
mujoco, numpy and onnxruntime (no unilab), reads every number it needs from
the file's ``metadata_props`` (JSON strings written by ``unilab-export``),
and runs one robot in one ``MjData``, as a deploy stack would:

- model: the MJCF the metadata names (``--model`` overrides), with the
  metadata's ``sim_dt`` and ``integrator``. Its motor actuators become PD
  position servos exactly as unilab's task does (gain kp, bias -kp q - kd
  qdot, force clamped to the effort limit). Editing the actuators, rather
  than applying tau = kp (q* - q) - kd qdot ourselves at each substep, keeps
  the damping inside MuJoCo's implicit integrator (implicitfast integrates
  the actuator's velocity term implicitly), so the physics is the trainer's
  and not an approximation of it;
- reference: the clip the metadata names (``--clip`` overrides), resampled to
  ``control_dt`` (linear joints, slerp root) and re-kinematised on the model
  (``mj_kinematics``), as unilab's motion library does;
- start: the clip's first frame (reference qpos/qvel), no noise;
- each control step: observation pieces in the metadata's order (each piece
  name below is the contract; an unknown name is an error; the reference
  pieces show the frame the coming step is scored against, the last action
  is ``action_bound * action``), action = policy, ctrl = default + scale *
  action, ``decimation`` physics substeps;
- metrics (the definitions of ``unilab-eval``, src/unilab/eval/metrics.py;
  keep both in step): frames t = 0 .. N, frame 0 the start state and frame
  t the state after the t-th control step, each against the reference at
  frame t; ``mpjpe_mm`` (world frame) and ``mpjpe_local_mm`` (each body in
  its own anchor's frame) x1000, ``anchor_pos_err`` (m), ``anchor_ori_err``
  (rad, 2 acos |<q, q_ref>|), ``joint_pos_err`` (rad), ``joint_vel_err``
  (rad/s): means over frames (and bodies / joints); ``success_rate``: 1 if
  no termination condition (the metadata's thresholds) fired at any frame,
  else 0; the rollout goes on after a failure (no reset).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

import mujoco
import numpy as np
import onnxruntime as ort

METRIC_KEYS = ("success_rate", "mpjpe_mm", "mpjpe_local_mm", "anchor_pos_err", "anchor_ori_err", "joint_pos_err",
               "joint_vel_err")
_INTEGRATORS = {
    "euler": mujoco.mjtIntegrator.mjINT_EULER,
    "implicit": mujoco.mjtIntegrator.mjINT_IMPLICIT,
    "implicitfast": mujoco.mjtIntegrator.mjINT_IMPLICITFAST,
    "rk4": mujoco.mjtIntegrator.mjINT_RK4,
}
LOCO_METRIC_KEYS = ("survived", "episode_length_s", "lin_vel_x_error", "lin_vel_y_error", "yaw_rate_error")
_REQUIRED = ("obs_dim", "action_dim", "joint_names", "obs_joint_names", "default_joint_pos", "action_scale",
             "action_bound", "kp", "kd", "effort_limit", "control_dt", "sim_dt", "decimation", "self_collisions",
             "obs_layout", "model_xml")
_TASK_REQUIRED = {  # by the metadata's task_kind (motion_tracking where an older file has none)
    "motion_tracking": ("anchor_body", "tracked_bodies", "end_effector_bodies", "termination_thresholds",
                           "motion_files"),
    "locomotion": ("base_body", "base_height", "termination_bodies", "termination_force", "gait_period_s"),
}


class Sim2SimError(RuntimeError):
    """Bad input: the message names the file, key or piece."""


# ------------------------------------------------------------------ quaternions (w, x, y, z)
def quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    aw, ax, ay, az = np.moveaxis(a, -1, 0)
    bw, bx, by, bz = np.moveaxis(b, -1, 0)
    return np.stack([aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw], axis=-1)


def quat_conj(q: np.ndarray) -> np.ndarray:
    return q * np.array([1.0, -1.0, -1.0, -1.0])


def quat_to_mat(q: np.ndarray) -> np.ndarray:
    w, x, y, z = np.moveaxis(q, -1, 0)
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], axis=-1),
        np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], axis=-1),
        np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], axis=-1),
    ], axis=-2)


def rotate_inv(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """R(q)^T v."""
    return np.einsum("...ji,...j->...i", quat_to_mat(q), v)


def quat_normalize(q: np.ndarray) -> np.ndarray:
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def quat_slerp(a: np.ndarray, b: np.ndarray, t: np.ndarray) -> np.ndarray:
    t = t[..., None]
    d = np.sum(a * b, axis=-1, keepdims=True)
    b = np.where(d < 0, -b, b)
    theta = np.arccos(np.clip(np.abs(d), -1.0, 1.0))
    s = np.sin(theta)
    small = s < 1e-8
    safe = np.where(small, 1.0, s)
    wa = np.where(small, 1.0 - t, np.sin((1.0 - t) * theta) / safe)
    wb = np.where(small, t, np.sin(t * theta) / safe)
    return quat_normalize(wa * a + wb * b)


# ------------------------------------------------------------------ metadata, model, clip
def read_policy(path: Path) -> tuple[ort.InferenceSession, dict]:
    if not path.is_file():
        raise Sim2SimError(f"{path}: no such ONNX file")
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1  # one robot: a thread pool only adds latency
    try:
        sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    except Exception as err:  # onnxruntime raises its own exception types for a bad file
        raise Sim2SimError(f"{path}: not a readable ONNX model ({type(err).__name__}: {err})") from err
    raw = sess.get_modelmeta().custom_metadata_map
    meta = {}
    for key, value in raw.items():
        try:
            meta[key] = json.loads(value)
        except json.JSONDecodeError as err:
            raise Sim2SimError(f"{path}: metadata {key!r} is not JSON ({err})") from err
        except RecursionError:  # a hostile file: nesting past Python's recursion limit
            raise Sim2SimError(f"{path}: metadata {key!r} nests too deep to be read") from None
    task = meta.get("task_kind", "motion_tracking")
    if task not in _TASK_REQUIRED:
        raise Sim2SimError(f"{path}: metadata task_kind {task!r}: sim2sim runs {sorted(_TASK_REQUIRED)}")
    missing = [k for k in (*_REQUIRED, *_TASK_REQUIRED[task]) if k not in meta]
    if missing:
        raise Sim2SimError(f"{path}: metadata lacks {missing} (export it with unilab-export from a "
                           f"{task} run)")
    try:
        check_metadata(meta)
    except Sim2SimError as err:
        raise Sim2SimError(f"{path}: {err}") from None
    return sess, meta


THRESHOLDS = ("anchor_height", "anchor_orientation", "end_effector_height")


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value)


def check_metadata(meta: dict) -> None:
    """Every metadata value sim2sim reads has its type, length and range (Sim2SimError naming the key).

    The file is input like any other: a hand-edited or foreign ONNX must fail here with the key's
    name, not as a numpy or MuJoCo error halfway through building the model.
    """
    def bad(key: str, expected: str) -> Sim2SimError:
        return Sim2SimError(f"metadata {key}={json.dumps(meta.get(key))[:120]}: expected {expected}")

    for key in ("obs_dim", "action_dim", "decimation"):
        v = meta[key]
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise bad(key, "an integer >= 1")
    for key in ("sim_dt", "control_dt"):
        if not (_number(meta[key]) and 0 < meta[key] < math.inf):
            raise bad(key, "a finite number of seconds > 0")
    tracking = meta.get("task_kind", "motion_tracking") == "motion_tracking"
    names = ("tracked_bodies", "end_effector_bodies") if tracking else ("termination_bodies",)
    for key in ("joint_names", "obs_joint_names", *names):
        v, may_be_empty = meta[key], key == "end_effector_bodies"
        if not isinstance(v, list) or not all(isinstance(n, str) for n in v) or not (v or may_be_empty):
            raise bad(key, "a list of names" + ("" if may_be_empty else " (not empty)"))
    n = len(meta["joint_names"])
    if n != meta["action_dim"]:
        raise bad("joint_names", f"action_dim={meta['action_dim']} names")
    for key in ("default_joint_pos", "action_scale", "action_bound", "kp", "kd"):
        v = meta[key]
        if not isinstance(v, list) or len(v) != n or not all(_number(x) and math.isfinite(x) for x in v):
            raise bad(key, f"a list of {n} finite numbers (one per joint_names entry)")
    for key in ("kp", "kd"):
        if any(x < 0 for x in meta[key]):
            raise bad(key, "gains >= 0")
    v = meta["effort_limit"]
    if not isinstance(v, list) or len(v) != n or not all(x is None or (_number(x) and x > 0) for x in v):
        raise bad("effort_limit", f"a list of {n} numbers > 0 or null (no limit)")
    v = meta.get("pd_target_range")
    if v is not None and not (isinstance(v, list) and len(v) == n and all(
            isinstance(r, list) and len(r) == 2 and all(_number(x) for x in r) and r[0] <= r[1] for r in v)):
        raise bad("pd_target_range", f"null or a list of {n} [low, high] pairs")
    if not isinstance(meta["self_collisions"], bool):
        raise bad("self_collisions", "true or false")
    v = meta["obs_layout"]
    if not isinstance(v, list) or not v:
        raise bad("obs_layout", "a non-empty list of pieces {name, offset, width}")
    for i, piece in enumerate(v):
        if not isinstance(piece, dict):
            raise Sim2SimError(f"metadata obs_layout[{i}]={json.dumps(piece)[:120]}: expected {{name, offset, width}}")
        for field, ok in (("name", lambda x: isinstance(x, str)),
                          ("offset", lambda x: isinstance(x, int) and not isinstance(x, bool) and x >= 0),
                          ("width", lambda x: isinstance(x, int) and not isinstance(x, bool) and x >= 1)):
            if field not in piece or not ok(piece[field]):
                expected = "a name" if field == "name" else f"an integer >= {0 if field == 'offset' else 1}"
                raise Sim2SimError(f"metadata obs_layout[{i}] ({piece.get('name', '?')}): {field}="
                                   f"{json.dumps(piece.get(field))}: expected {expected}")
        if not (_number(piece.get("scale", 1.0)) and math.isfinite(piece.get("scale", 1.0))):
            raise Sim2SimError(f"metadata obs_layout[{i}] ({piece['name']}): scale={json.dumps(piece['scale'])}: "
                               "expected a finite number")
    if meta.get("obs_clip") is not None and not (_number(meta["obs_clip"]) and meta["obs_clip"] > 0):
        raise bad("obs_clip", "a number > 0 or null")
    if meta.get("integrator") is not None and meta["integrator"] not in _INTEGRATORS:
        raise bad("integrator", f"one of {sorted(_INTEGRATORS)} or null")
    if not isinstance(meta["model_xml"], str):
        raise bad("model_xml", "a path")
    if not isinstance(meta.get("input_name", "obs"), str):
        raise bad("input_name", "the name of the policy's input")
    if not tracking:
        if not isinstance(meta["base_body"], str):
            raise bad("base_body", "a body name")
        for key in ("base_height", "termination_force", "gait_period_s"):
            if not (_number(meta[key]) and math.isfinite(meta[key]) and meta[key] >= 0):
                raise bad(key, "a finite number >= 0")
        if not meta["gait_period_s"] > 0:
            raise bad("gait_period_s", "seconds > 0")
        return
    if meta["anchor_body"] not in meta["tracked_bodies"]:
        raise bad("anchor_body", f"one of tracked_bodies {meta['tracked_bodies']}")
    unknown = [b for b in meta["end_effector_bodies"] if b not in meta["tracked_bodies"]]
    if unknown:
        raise bad("end_effector_bodies", f"names in tracked_bodies (not {unknown})")
    v = meta["termination_thresholds"]
    if not isinstance(v, dict) or any(k not in v or not (_number(v[k]) and v[k] >= 0) for k in THRESHOLDS):
        raise bad("termination_thresholds", f"numbers >= 0 for {', '.join(THRESHOLDS)}")
    v = meta["motion_files"]
    if not isinstance(v, list) or not all(isinstance(f, str) for f in v):
        raise bad("motion_files", "a list of paths")


def check_file(path: Path, what: str, option: str) -> None:
    """``path`` is a file; else Sim2SimError saying that it does not exist or is a directory (as unilab says of a
    file its config names) and which ``option`` gives another."""
    if not path.is_file():
        state = "is a directory, not a file" if path.is_dir() else "does not exist"
        raise Sim2SimError(f"{what} {path} {state} (pass {option})")


def load_pd_model(path: Path, meta: dict) -> tuple[mujoco.MjModel, np.ndarray]:
    """The MJCF with PD position servos; returns the model and, per actuator, its index in the action."""
    check_file(path, "model", "--model MJCF")
    try:
        model = mujoco.MjModel.from_xml_path(str(path))
    except ValueError as err:  # MuJoCo's parse and compile errors
        why = " ".join(str(err).split())[:200] or type(err).__name__
        raise Sim2SimError(f"model {path}: MuJoCo cannot load it ({why})") from err
    model.opt.timestep = float(meta["sim_dt"])
    if meta.get("integrator") is not None:
        if meta["integrator"] not in _INTEGRATORS:
            raise Sim2SimError(f"metadata integrator {meta['integrator']!r} is not one of {sorted(_INTEGRATORS)}")
        model.opt.integrator = _INTEGRATORS[meta["integrator"]]
    if not meta["self_collisions"]:  # as in training: robot geoms of conaffinity 1 get 2 (environment only)
        key = "anchor_body" if "anchor_body" in meta else "base_body"
        anchor = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, meta[key])
        if anchor < 0:
            raise Sim2SimError(f"metadata {key} {meta[key]!r} is not a body of {path}")
        robot = np.flatnonzero(np.asarray(model.body_rootid) == model.body_rootid[anchor])
        geoms = np.flatnonzero(np.isin(np.asarray(model.geom_bodyid), robot))
        geoms = geoms[(model.geom_contype[geoms] == 1) & (model.geom_conaffinity[geoms] == 1)]
        model.geom_conaffinity[geoms] = 2
    names = list(meta["joint_names"])
    if model.nu != len(names):
        raise Sim2SimError(f"model {path} has {model.nu} actuators, the policy drives {len(names)} joints")
    action_index = np.empty(model.nu, dtype=np.int64)
    kp, kd = np.asarray(meta["kp"], float), np.asarray(meta["kd"], float)
    effort = np.array([math.inf if e is None else e for e in meta["effort_limit"]], dtype=float)
    target_range = meta.get("pd_target_range")
    for a in range(model.nu):
        if model.actuator_trntype[a] != mujoco.mjtTrn.mjTRN_JOINT:
            raise Sim2SimError(f"actuator {model.actuator(a).name!r} of {path} does not drive a joint")
        joint = model.joint(int(model.actuator_trnid[a, 0])).name
        if joint not in names:
            raise Sim2SimError(f"actuator {model.actuator(a).name!r} drives {joint!r}, not in metadata joint_names")
        i = action_index[a] = names.index(joint)
        # force = kp (ctrl - q) - kd qdot, clamped to +-effort: unilab's PD servo (tasks/core/actuation.py)
        model.actuator_dyntype[a] = mujoco.mjtDyn.mjDYN_NONE
        model.actuator_dynprm[a] = 0.0
        model.actuator_gear[a] = 0.0
        model.actuator_gear[a, 0] = 1.0
        model.actuator_gaintype[a] = mujoco.mjtGain.mjGAIN_FIXED
        model.actuator_gainprm[a] = 0.0
        model.actuator_gainprm[a, 0] = kp[i]
        model.actuator_biastype[a] = mujoco.mjtBias.mjBIAS_AFFINE
        model.actuator_biasprm[a] = 0.0
        model.actuator_biasprm[a, 1] = -kp[i]
        model.actuator_biasprm[a, 2] = -kd[i]
        model.actuator_forcelimited[a] = int(math.isfinite(effort[i]))
        if math.isfinite(effort[i]):
            model.actuator_forcerange[a] = (-effort[i], effort[i])
        model.actuator_ctrllimited[a] = int(target_range is not None)
        if target_range is not None:
            model.actuator_ctrlrange[a] = target_range[i]
    return model, action_index


def joint_addresses(model: mujoco.MjModel, names: list[str], what: str) -> tuple[np.ndarray, np.ndarray]:
    ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, n) for n in names]
    missing = [n for n, i in zip(names, ids) if i < 0]
    if missing:
        raise Sim2SimError(f"{what}: joints {missing} are not in the model")
    return np.asarray(model.jnt_qposadr[ids]), np.asarray(model.jnt_dofadr[ids])


def body_ids(model: mujoco.MjModel, names: list[str]) -> np.ndarray:
    ids = np.array([mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, n) for n in names])
    if (ids < 0).any():
        raise Sim2SimError(f"bodies {[n for n, i in zip(names, ids) if i < 0]} are not in the model")
    return ids


def load_reference(path: Path, model: mujoco.MjModel, control_dt: float, bodies: np.ndarray) -> dict:
    """The clip at the control rate: model qpos/qvel rows and the bodies' world poses (forward kinematics)."""
    check_file(path, "clip", "--clip NPZ")
    try:
        with np.load(path, allow_pickle=False) as npz:
            fps = float(np.asarray(npz["fps"]).reshape(-1)[0])
            jp, jv = np.asarray(npz["joint_pos"], float), np.asarray(npz["joint_vel"], float)
            clip_names = [str(n) for n in npz["joint_names"]]
    except (OSError, KeyError, ValueError, IndexError) as err:
        raise Sim2SimError(f"clip {path}: unreadable ({type(err).__name__}: {err})") from err
    check_clip(path, fps, jp, jv, len(clip_names))
    # every hinge/slide joint of the model, by name (the free joint is the root)
    jnames = [model.joint(j).name for j in range(model.njnt) if model.jnt_type[j] != mujoco.mjtJoint.mjJNT_FREE]
    missing = [n for n in jnames if n not in clip_names]
    if missing:
        raise Sim2SimError(f"clip {path}: model joints {missing} are not in the clip")
    perm = np.array([clip_names.index(n) for n in jnames])
    qadr, dadr = joint_addresses(model, jnames, f"clip {path}")
    # resample every control_dt (unilab's motion library: linear, slerp for the root; never past the end)
    n_src = jp.shape[0]
    n_out = int(np.floor((n_src - 1) / fps / control_dt + 1e-9)) + 1
    phase = np.arange(n_out) * (control_dt * fps)
    i0 = np.clip(np.floor(phase + 1e-9).astype(np.int64), 0, n_src - 1)
    a = np.clip(phase - i0, 0.0, 1.0)
    a[a < 1e-9] = 0.0
    i1 = np.minimum(i0 + 1, n_src - 1)
    a1 = a[:, None]
    root_quat = quat_slerp(quat_normalize(jp[i0, 3:7]), quat_normalize(jp[i1, 3:7]), a)
    vel = (1 - a1) * jv[i0] + a1 * jv[i1]
    qpos = np.tile(model.qpos0, (n_out, 1))
    qpos[:, 0:3] = (1 - a1) * jp[i0, :3] + a1 * jp[i1, :3]
    qpos[:, 3:7] = root_quat
    qpos[:, qadr] = ((1 - a1) * jp[i0, 7:] + a1 * jp[i1, 7:])[:, perm]
    qvel = np.zeros((n_out, model.nv))
    qvel[:, 0:3] = vel[:, 0:3]
    qvel[:, 3:6] = rotate_inv(root_quat, vel[:, 3:6])  # MuJoCo's free joint: angular velocity in the body frame
    qvel[:, dadr] = vel[:, 6:][:, perm]
    data = mujoco.MjData(model)
    pos = np.empty((n_out, len(bodies), 3))
    quat = np.empty((n_out, len(bodies), 4))
    for t in range(n_out):
        data.qpos[:] = qpos[t]
        mujoco.mj_kinematics(model, data)
        pos[t] = data.xpos[bodies]
        quat[t] = data.xquat[bodies]
    return {"qpos": qpos, "qvel": qvel, "body_pos": pos, "body_quat": quat, "num_frames": n_out}


FPS_RANGE = (1.0, 10_000.0)


def check_clip(path: Path, fps: float, jp: np.ndarray, jv: np.ndarray, num_joints: int) -> None:
    """The checks unilab's motion library makes of a clip it reads (Sim2SimError naming the file and the frame): a
    frame rate in FPS_RANGE, joint_pos (T, 7 + J) and joint_vel (T, 6 + J) with T >= 2, every value finite, and root
    quaternions that can be normalised."""
    if not FPS_RANGE[0] <= fps <= FPS_RANGE[1]:
        raise Sim2SimError(f"clip {path}: fps {fps} is outside [{FPS_RANGE[0]:g}, {FPS_RANGE[1]:g}]")
    if jp.ndim != 2 or jp.shape[1] != 7 + num_joints or jp.shape[0] < 2 or jv.shape != (jp.shape[0], 6 + num_joints):
        raise Sim2SimError(f"clip {path}: joint_pos {jp.shape} / joint_vel {jv.shape} are not (T, {7 + num_joints}) / "
                           f"(T, {6 + num_joints}) with T >= 2 for its {num_joints} joints")
    for key, values in (("joint_pos", jp), ("joint_vel", jv)):
        bad = ~np.isfinite(values).all(axis=1)
        if bad.any():
            raise Sim2SimError(f"clip {path}: {key} has NaN/inf values (first at frame {int(np.argmax(bad))})")
    small = np.linalg.norm(jp[:, 3:7], axis=1) < 1e-6
    if small.any():
        raise Sim2SimError(f"clip {path}: root quaternion has zero norm at frame {int(np.argmax(small))}")


# ------------------------------------------------------------------ observation pieces
def _rot6(q: np.ndarray) -> np.ndarray:
    """First two columns of R(q), row by row (continuous, unlike a quaternion)."""
    return quat_to_mat(q)[..., :2].reshape(-1)


class State:
    """What the pieces read at one control step: the robot now and the reference frame it should be at."""

    def __init__(self, ctx: dict, data: mujoco.MjData, ref: dict, t: int, last_action: np.ndarray):
        self.ctx, self.data, self.ref, self.t, self.last_action = ctx, data, ref, t, last_action

    @property
    def anchor(self) -> tuple[np.ndarray, np.ndarray]:
        a = self.ctx["anchor_id"]
        return self.data.xpos[a], self.data.xquat[a]

    @property
    def ref_anchor(self) -> tuple[np.ndarray, np.ndarray]:
        i = self.ctx["anchor_index"]
        return self.ref["body_pos"][self.t, i], self.ref["body_quat"][self.t, i]


def piece_ref_joint_pos(s: State) -> np.ndarray:
    return s.ref["qpos"][s.t, s.ctx["obs_qadr"]]


def piece_ref_joint_vel(s: State) -> np.ndarray:
    return s.ref["qvel"][s.t, s.ctx["obs_dadr"]]


def piece_anchor_pos_b(s: State) -> np.ndarray:
    (p, q), (rp, _) = s.anchor, s.ref_anchor
    return rotate_inv(q, rp - p)


def piece_anchor_ori_b(s: State) -> np.ndarray:
    (_, q), (_, rq) = s.anchor, s.ref_anchor
    return _rot6(quat_mul(quat_conj(q), rq))


def piece_base_lin_vel(s: State) -> np.ndarray:
    return rotate_inv(s.data.qpos[3:7], s.data.qvel[0:3])  # free joint: world linear velocity


def piece_base_ang_vel(s: State) -> np.ndarray:
    return s.data.qvel[3:6].copy()  # free joint: already in the base frame


def piece_joint_pos_rel(s: State) -> np.ndarray:
    return s.data.qpos[s.ctx["obs_qadr"]] - s.ctx["obs_default"]


def piece_joint_vel(s: State) -> np.ndarray:
    return s.data.qvel[s.ctx["obs_dadr"]].copy()


def piece_last_action(s: State) -> np.ndarray:
    # the observation shows the action in the recipe's units: b_j x the [-1, 1] action
    return (s.ctx["action_bound"] * s.last_action)[s.ctx["obs_from_action"]]


class LocoState:
    """What the locomotion pieces read at one control step: the robot, the command and the gait phase."""

    def __init__(self, ctx: dict, data: mujoco.MjData, last_action: np.ndarray, command: np.ndarray,
                 phase: np.ndarray):
        self.ctx, self.data, self.last_action, self.command, self.phase = ctx, data, last_action, command, phase


def piece_projected_gravity(s: LocoState) -> np.ndarray:
    return rotate_inv(s.data.qpos[3:7], np.array([0.0, 0.0, -1.0]))


def piece_command_lin_vel(s: LocoState) -> np.ndarray:
    return s.command[:2].copy()


def piece_command_ang_vel(s: LocoState) -> np.ndarray:
    return s.command[2:3].copy()


def piece_sin_phase(s: LocoState) -> np.ndarray:
    return np.sin(s.phase)


def piece_cos_phase(s: LocoState) -> np.ndarray:
    return np.cos(s.phase)


# the contract: piece name -> its unscaled values (width checked against the metadata; x the piece's scale)
PIECES = {
    "ref_joint_pos": piece_ref_joint_pos,
    "ref_joint_vel": piece_ref_joint_vel,
    "anchor_pos_b": piece_anchor_pos_b,
    "anchor_ori_b": piece_anchor_ori_b,
    "base_lin_vel": piece_base_lin_vel,
    "base_ang_vel": piece_base_ang_vel,
    "joint_pos_rel": piece_joint_pos_rel,
    "joint_vel": piece_joint_vel,
    "last_action": piece_last_action,
    # locomotion (g1_locomotion)
    "projected_gravity": piece_projected_gravity,
    "command_lin_vel": piece_command_lin_vel,
    "command_ang_vel": piece_command_ang_vel,
    "joint_pos": piece_joint_pos_rel,
    "actions": piece_last_action,
    "sin_phase": piece_sin_phase,
    "cos_phase": piece_cos_phase,
}


def check_layout(meta: dict) -> list[tuple[str, int, int, float]]:
    out, offset = [], 0
    for piece in meta["obs_layout"]:
        name, off, width = piece["name"], int(piece["offset"]), int(piece["width"])
        scale = float(piece.get("scale", 1.0))
        if name not in PIECES:
            raise Sim2SimError(f"observation piece {name!r} is unknown to sim2sim (known: {sorted(PIECES)})")
        if off != offset:
            raise Sim2SimError(f"observation piece {name!r} starts at {off}, expected {offset}")
        out.append((name, off, width, scale))
        offset += width
    if offset != int(meta["obs_dim"]):
        raise Sim2SimError(f"observation pieces cover {offset} entries, the policy takes {meta['obs_dim']}")
    return out


def observe(layout: list[tuple[str, int, int, float]], s: State | LocoState, out: np.ndarray,
            clip: float | None = None) -> np.ndarray:
    for name, off, width, scale in layout:
        v = PIECES[name](s)
        if v.shape != (width,):
            raise Sim2SimError(f"observation piece {name!r} has {v.shape[0]} values, the metadata says {width}")
        out[off:off + width] = v * scale if scale != 1.0 else v
    if clip is not None:
        np.clip(out, -clip, clip, out=out)
    return out


# ------------------------------------------------------------------ rollout and metrics
def _gravity_z(q: np.ndarray) -> np.ndarray:
    return 1.0 - 2.0 * (q[..., 1] ** 2 + q[..., 2] ** 2)


def run(policy: Path, clip: Path | None = None, model_xml: Path | None = None, steps: int | None = None) -> dict:
    """Roll the policy out on one clip from its first frame; the metrics (and per-step errors) as a dict."""
    sess, meta = read_policy(policy)
    model, action_index = load_pd_model(Path(model_xml or meta["model_xml"]).expanduser(), meta)
    files = meta["motion_files"]
    if clip is None and not files:
        raise Sim2SimError(f"{policy}: metadata names no reference clip (pass --clip NPZ)")
    clip = Path(clip or files[0]).expanduser()
    tracked = list(meta["tracked_bodies"])
    bodies = body_ids(model, tracked)
    ref = load_reference(clip, model, float(meta["control_dt"]), bodies)
    ctx, obs_qadr, obs_dadr = _policy_setup(meta, model)
    ctx.update(anchor_id=int(bodies[tracked.index(meta["anchor_body"])]),
               anchor_index=tracked.index(meta["anchor_body"]))
    default = np.asarray(meta["default_joint_pos"], float)
    act_names = list(meta["joint_names"])
    layout = check_layout(meta)
    ee = np.array([tracked.index(b) for b in meta["end_effector_bodies"]], dtype=np.int64)
    thr = meta["termination_thresholds"]
    scale = np.asarray(meta["action_scale"], float)
    decimation = int(meta["decimation"])
    last = ref["num_frames"] - 1
    n_steps = last if steps is None else min(int(steps), last)
    if n_steps < 1:
        raise Sim2SimError(f"clip {clip} has {ref['num_frames']} frames at control_dt; nothing to roll out")
    data = mujoco.MjData(model)
    data.qpos[:] = ref["qpos"][0]
    data.qvel[:] = ref["qvel"][0]
    mujoco.mj_forward(model, data)
    obs = np.zeros((1, int(meta["obs_dim"])), dtype=np.float32)
    obs64 = np.zeros(int(meta["obs_dim"]))
    last_action = np.zeros(len(act_names))
    input_name = meta.get("input_name", "obs")
    # frames 0 .. n_steps: frame 0 is the start state, frame t the state after the t-th step
    errors = {k: np.zeros(n_steps + 1) for k in METRIC_KEYS if k != "success_rate"}
    a = ctx["anchor_index"]
    failed_at = None
    for t in range(n_steps + 1):
        if t > 0:
            # the observation shows the reference frame the coming step is scored against (t), as the trainer's
            observe(layout, State(ctx, data, ref, t, last_action), obs64, meta.get("obs_clip"))
            obs[0] = obs64  # float32, as the trainer's observation buffers
            action = np.clip(sess.run(None, {input_name: obs})[0][0].astype(np.float64), -1.0, 1.0)
            data.ctrl[:] = (default + scale * action)[action_index]
            for _ in range(decimation):
                mujoco.mj_step(model, data)
            mujoco.mj_kinematics(model, data)  # body poses of the state after the step
            last_action = action
        pos, quat = data.xpos[bodies], data.xquat[bodies]
        rpos, rquat = ref["body_pos"][t], ref["body_quat"][t]
        errors["mpjpe_mm"][t] = 1000.0 * np.linalg.norm(pos - rpos, axis=-1).mean()
        local = rotate_inv(quat[a], pos - pos[a])
        rlocal = rotate_inv(rquat[a], rpos - rpos[a])
        errors["mpjpe_local_mm"][t] = 1000.0 * np.linalg.norm(local - rlocal, axis=-1).mean()
        errors["anchor_pos_err"][t] = np.linalg.norm(pos[a] - rpos[a])
        errors["anchor_ori_err"][t] = 2.0 * math.acos(min(1.0, abs(float(np.dot(quat[a], rquat[a])))))
        errors["joint_pos_err"][t] = np.abs(data.qpos[obs_qadr] - ref["qpos"][t, obs_qadr]).mean()
        errors["joint_vel_err"][t] = np.abs(data.qvel[obs_dadr] - ref["qvel"][t, obs_dadr]).mean()
        # unilab's termination conditions (a non-finite state fails the anchor height test)
        fired = (
            not abs(rpos[a, 2] - pos[a, 2]) <= thr["anchor_height"]
            or abs(_gravity_z(rquat[a]) - _gravity_z(quat[a])) > thr["anchor_orientation"]
            or (ee.size > 0 and np.abs(rpos[ee, 2] - pos[ee, 2]).max() > thr["end_effector_height"])
        )
        if fired and failed_at is None:
            failed_at = t
    result = {"policy": str(policy), "clip": str(clip), "model": str(model_xml or meta["model_xml"]),
              "steps": n_steps, "frames": n_steps + 1, "clip_frames": ref["num_frames"], "failed_at_frame": failed_at,
              "success_rate": 1.0 if failed_at is None else 0.0}
    result.update({key: float(v.mean()) for key, v in errors.items()})
    result["per_step"] = {key: v.tolist() for key, v in errors.items()}
    return result


def _policy_setup(meta: dict, model: mujoco.MjModel) -> tuple[dict, np.ndarray, np.ndarray]:
    """The pieces' context (joint addresses, defaults, action order and bounds), the observed joints' qpos and
    dof addresses."""
    obs_names = list(meta["obs_joint_names"])
    act_names = list(meta["joint_names"])
    obs_qadr, obs_dadr = joint_addresses(model, obs_names, "metadata obs_joint_names")
    default = np.asarray(meta["default_joint_pos"], float)
    missing = [n for n in obs_names if n not in act_names]
    if missing:
        raise Sim2SimError(f"observed joints {missing} have no action entry")
    obs_from_action = np.array([act_names.index(n) for n in obs_names])
    ctx = {"obs_qadr": obs_qadr, "obs_dadr": obs_dadr, "obs_default": default[obs_from_action],
           "obs_from_action": obs_from_action, "action_bound": np.asarray(meta["action_bound"], float)}
    return ctx, obs_qadr, obs_dadr


def run_locomotion(policy: Path, model_xml: Path | None = None, steps: int | None = None,
                   command: tuple[float, float, float] = (0.5, 0.0, 0.0)) -> dict:
    """Walk the policy at ``command`` from the start pose for ``steps`` control steps (default: 20 s), stopping at
    a termination; the metrics (and the per-step base velocities) as a dict."""
    sess, meta = read_policy(policy)
    model, action_index = load_pd_model(Path(model_xml or meta["model_xml"]).expanduser(), meta)
    if model.njnt < 1 or model.jnt_type[0] != mujoco.mjtJoint.mjJNT_FREE:
        raise Sim2SimError(f"model {model_xml or meta['model_xml']}: the first joint must be the base's free joint")
    ctx, obs_qadr, _ = _policy_setup(meta, model)
    layout = check_layout(meta)
    term_bodies = body_ids(model, list(meta["termination_bodies"]))
    dt = float(meta["control_dt"])
    n_steps = int(round(20.0 / dt)) if steps is None else int(steps)
    default = np.asarray(meta["default_joint_pos"], float)
    scale = np.asarray(meta["action_scale"], float)
    decimation = int(meta["decimation"])
    command = np.asarray(command, dtype=float)
    stand = math.hypot(command[0], command[1]) < 0.01 and abs(command[2]) < 0.01
    offset, dphi = np.array([0.0, -math.pi]), 2.0 * math.pi * dt / float(meta["gait_period_s"])

    def phase(length: int) -> np.ndarray:
        if length > 0 and stand:  # from the first step on, as the trainer's gait clock
            return np.full(2, math.pi)
        return np.fmod(length * dphi + offset + math.pi, 2.0 * math.pi) - math.pi

    data = mujoco.MjData(model)
    data.qpos[:] = 0.0
    data.qpos[2] = float(meta["base_height"])
    data.qpos[3] = 1.0
    data.qpos[obs_qadr] = ctx["obs_default"]
    mujoco.mj_forward(model, data)
    obs = np.zeros((1, int(meta["obs_dim"])), dtype=np.float32)
    obs64 = np.zeros(int(meta["obs_dim"]))
    last_action = np.zeros(len(meta["joint_names"]))
    input_name = meta.get("input_name", "obs")
    vel = np.zeros((n_steps, 3))
    fell_at = None
    for t in range(n_steps):
        observe(layout, LocoState(ctx, data, last_action, command, phase(t)), obs64, meta.get("obs_clip"))
        obs[0] = obs64
        action = np.clip(sess.run(None, {input_name: obs})[0][0].astype(np.float64), -1.0, 1.0)
        data.ctrl[:] = (default + scale * action)[action_index]
        for _ in range(decimation):
            mujoco.mj_step(model, data)
        last_action = action
        vel[t, :2] = rotate_inv(data.qpos[3:7], data.qvel[0:3])[:2]
        vel[t, 2] = data.qvel[5]
        force = np.linalg.norm(data.cfrc_ext[term_bodies, 3:6], axis=1).max()
        if not force <= float(meta["termination_force"]):  # a non-finite state ends it too
            fell_at = t + 1
            break
    length = n_steps if fell_at is None else fell_at
    err = np.abs(vel[:length] - command).mean(axis=0) if length else np.zeros(3)
    return {"policy": str(policy), "model": str(model_xml or meta["model_xml"]), "command": command.tolist(),
            "steps": n_steps, "fell_at_step": fell_at, "survived": 1.0 if fell_at is None else 0.0,
            "episode_length_s": length * dt, "lin_vel_x_error": float(err[0]), "lin_vel_y_error": float(err[1]),
            "yaw_rate_error": float(err[2]), "per_step": {"base_velocity": vel[:length].tolist()}}


def check_writable(path: Path) -> None:
    """Make ``path``'s folder and write a scratch file in it (OSError naming ``path`` when impossible)."""
    if path.is_dir():
        raise IsADirectoryError(f"cannot write {path}: it is a directory")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        probe = path.with_name(f".{path.name}.{os.getpid()}.probe")
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        raise OSError(f"cannot write {path} ({type(err).__name__}: {err.strerror or err})") from err


DEFAULT_COMMAND = (0.5, 0.0, 0.0)
MAX_COMMAND = 10.0  # m/s, rad/s: far past what a humanoid walks; a larger one is a typo or another unit


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="sim2sim.py",
        description="Roll an exported unilab policy (ONNX) out in plain MuJoCo, building observations, PD "
        "control and the reference from the file's metadata alone, and print tracking metrics "
        "(the definitions of unilab-eval).",
    )
    p.add_argument("policy", type=Path, help="ONNX file written by unilab-export")
    p.add_argument("--clip", type=Path, default=None,
                   help="reference clip (npz, BeyondMimic layout); default: the first clip the metadata names")
    p.add_argument("--model", type=Path, default=None, help="MJCF of the robot; default: the one the metadata names")
    p.add_argument("--steps", type=int, default=None,
                   help="control steps to run: frames 0..N are measured (unilab-eval --max-frames N+1); "
                   "default: the whole clip, from its first frame to its last")
    p.add_argument("--command", type=float, nargs=3, default=None, metavar=("VX", "VY", "WZ"),
                   help="locomotion policies: the velocity command, forward and lateral m/s, yaw rate rad/s "
                   "(default: 0.5 0 0); --steps default: 20 s")
    p.add_argument("--json", type=Path, default=None, help="also write the metrics (and per-step errors) here")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.steps is not None and args.steps < 1:
        print("sim2sim: error: --steps must be >= 1", file=sys.stderr)
        return 2
    if args.json is not None:
        try:  # the report path fails now, not after the rollout
            check_writable(args.json)
        except OSError as err:
            print(f"sim2sim: error: --json: {err}", file=sys.stderr)
            return 2
    if args.command is not None and not all(abs(v) <= MAX_COMMAND for v in args.command):  # NaN fails too
        print(f"sim2sim: error: --command {' '.join(map(str, args.command))}: expected finite numbers within "
              f"+-{MAX_COMMAND:g} (m/s, rad/s)", file=sys.stderr)
        return 2
    try:
        _, meta = read_policy(args.policy)
        loco = meta.get("task_kind") == "locomotion"
        unread = "--clip" if loco and args.clip is not None else "--command" if not loco and args.command else None
        if unread is not None:  # an option the policy's task does not read would be ignored without a word
            raise Sim2SimError(f"{unread} is not read for a {meta.get('task_kind', 'motion_tracking')} policy "
                               f"({'--command' if loco else '--clip'} is its option)")
        if loco:
            res = run_locomotion(args.policy, args.model, args.steps, tuple(args.command or DEFAULT_COMMAND))
        else:
            res = run(args.policy, args.clip, args.model, args.steps)
    except Sim2SimError as err:
        print(f"sim2sim: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\nsim2sim: interrupted", file=sys.stderr)
        return 130
    if "clip" in res:
        print(f"sim2sim: {Path(res['clip']).name}: frames 0..{res['steps']} of {res['clip_frames']}"
              + (f", first failure at frame {res['failed_at_frame']}" if res["failed_at_frame"] is not None else ""))
    else:
        print(f"sim2sim: command {res['command']}: {res['steps']} steps"
              + (f", fell at step {res['fell_at_step']}" if res["fell_at_step"] is not None else ""))
    for key in METRIC_KEYS if "clip" in res else LOCO_METRIC_KEYS:
        print(f"  {key:16s} {res[key]:.4f}")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(res, indent=2) + "\n")
        print(f"sim2sim: metrics written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

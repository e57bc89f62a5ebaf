"""holosoma's deploy format: what an ONNX policy file that ``holosoma_inference`` runs holds, read without it.

Two kinds (holosoma_inference 0.1.3, ``policies/locomotion.py`` and ``policies/wbt.py``):

- ``loco``: input ``actor_obs`` (1, D) -> output ``action`` (1, J) (the first output);
- ``wbt`` (whole-body tracking): inputs ``obs`` (1, D) and ``time_step`` (1, 1) -> outputs ``actions`` (1, J) and the
  clip embedded as graph constants indexed by ``clamp(time_step, max=T-1)``: ``joint_pos`` / ``joint_vel`` (1, J),
  ``ref_pos_xyz`` (1, 3) and ``ref_quat_xyzw`` (1, 4), the world pose of the reference body (the torso link); read by
  :func:`unilab.motion_io.onnx_tables.embedded_clip`.

``metadata_props`` are JSON strings: ``dof_names`` (joint order of actions, dof_pos, dof_vel), ``kp``, ``kd``,
``robot_urdf`` (WBT: pinocchio computes the torso orientation from it), and in newer exports ``action_scale``
(scalar or per joint: ``q* = default + action_scale * action``) and ``observation_layout`` (one entry per term in
concatenation order: ``name``, ``dim``, ``history_length``, ``scale``); holosoma's PPO exports add
``experiment_config`` (the training config). The observation is each term (scaled) concatenated in **sorted name
order** (``BasePolicy._initialize_history_state``), a term's history oldest first, zeros before the first step.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort

from unilab.motion_io.formats import HOLOSOMA_POLICY_FPS
from unilab.motion_io.onnx_tables import CLIP_OUTPUTS, TIME_STEP_INPUT

TASK_KINDS = {"wbt": "motion_tracking", "loco": "locomotion"}
"""Each file kind and the kind of unilab task (``unilab.tasks.registry.Task.kind``) that runs it."""
WBT_INPUTS = ("obs", TIME_STEP_INPUT)
WBT_OUTPUTS = ("actions", *CLIP_OUTPUTS)
LOCO_INPUT = "actor_obs"


class HolosomaFormatError(ValueError):
    """The file is not a holosoma-format policy (the message names the file and what is wrong)."""


@dataclass(frozen=True)
class ObsTerm:
    """One observation term: holosoma's ``name``, entries per frame, frames of history, and the file's scale
    (None: not recorded in the file; the evaluating task's scale of the piece is assumed)."""

    name: str
    dim: int
    history: int = 1
    scale: float | None = None

    @property
    def width(self) -> int:
        return self.dim * self.history


@dataclass
class PolicyFile:
    """A holosoma-format ONNX policy: its kind, inputs, metadata and observation terms."""

    path: Path
    kind: str
    obs_name: str
    obs_dim: int
    action_dim: int
    dof_names: list[str]
    metadata: dict[str, Any] = field(repr=False)
    """Every metadata_props entry, JSON-decoded (a value that is not JSON stays a string)."""
    tanh_bounded: bool
    """The graph ends in ``tanh(x) * action_scale (+ bias)`` (holosoma's FastSAC actor): its output is bounded."""

    @property
    def kp(self) -> np.ndarray | None:
        return None if "kp" not in self.metadata else np.asarray(self.metadata["kp"], dtype=np.float64)

    @property
    def kd(self) -> np.ndarray | None:
        return None if "kd" not in self.metadata else np.asarray(self.metadata["kd"], dtype=np.float64)

    @property
    def reference_body(self) -> str | None:
        """A tracking file's reference body: metadata ``reference_body`` (``unilab-export --format holosoma``), else
        the ``experiment_config``'s motion command ``body_name_ref``; None when the file names none."""
        if isinstance(self.metadata.get("reference_body"), str):
            return self.metadata["reference_body"]
        ref = self.experiment("command", "setup_terms", "motion_command", "params", "motion_config", "body_name_ref")
        return ref[0] if isinstance(ref, list) and ref else None

    @property
    def policy_fps(self) -> float:
        """Policy steps per second, the embedded clip's frame rate: ``1 / control_dt`` of the metadata, else holosoma's
        50 Hz (holosoma_inference advances ``time_step`` by one per step at ``rl_rate`` 50)."""
        dt = self.metadata.get("control_dt")
        return 1.0 / float(dt) if isinstance(dt, (int, float)) and dt > 0 else HOLOSOMA_POLICY_FPS

    def experiment(self, *keys: str) -> Any:
        """``experiment_config[k0][k1]...`` or None when the file has no such entry."""
        node: Any = self.metadata.get("experiment_config")
        for k in keys:
            if not isinstance(node, dict) or k not in node:
                return None
            node = node[k]
        return node


def _decode(value: str) -> Any:
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def _dims(value_info: onnx.ValueInfoProto) -> list[int | str]:
    return [d.dim_value if d.HasField("dim_value") else d.dim_param for d in value_info.type.tensor_type.shape.dim]


def read_policy_file(path: str | os.PathLike) -> PolicyFile:
    """The kind, shapes and metadata of a holosoma-format ONNX file; HolosomaFormatError naming the file if it is not
    one (no ``actor_obs`` input for a locomotion file, no ``obs`` + ``time_step`` inputs and the five outputs for a
    tracking one, no ``dof_names`` of the action's length)."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise HolosomaFormatError(f"{path}: no such ONNX file")
    try:
        model = onnx.load(str(path))
    except Exception as err:  # onnx raises protobuf's DecodeError and others for a file that is not ONNX
        raise HolosomaFormatError(f"{path}: not a readable ONNX model ({type(err).__name__}: {err})") from err
    inputs = {i.name: _dims(i) for i in model.graph.input}
    outputs = [o.name for o in model.graph.output]
    if set(WBT_INPUTS) <= set(inputs):
        kind, obs_name = "wbt", "obs"
        missing = [o for o in WBT_OUTPUTS if o not in outputs]
        if missing:
            raise HolosomaFormatError(f"{path}: a tracking policy (inputs obs, time_step) needs outputs "
                                      f"{list(WBT_OUTPUTS)}; missing {missing}")
    elif LOCO_INPUT in inputs:
        kind, obs_name = "loco", LOCO_INPUT
    else:
        raise HolosomaFormatError(f"{path}: inputs {sorted(inputs)} are neither holosoma's tracking (obs, time_step) "
                                  f"nor its locomotion ({LOCO_INPUT}) policy's")
    obs_dim = inputs[obs_name][-1]
    if not isinstance(obs_dim, int) or obs_dim < 1:
        raise HolosomaFormatError(f"{path}: input {obs_name!r} has no fixed width ({inputs[obs_name]})")
    out_dims = {o.name: _dims(o) for o in model.graph.output}
    action_dim = out_dims[outputs[0] if kind == "loco" else "actions"][-1]
    meta = {p.key: _decode(p.value) for p in model.metadata_props}
    names = meta.get("dof_names")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise HolosomaFormatError(f"{path}: metadata dof_names (the joint names in action order) missing or not a "
                                  "list of names")
    if not isinstance(action_dim, int) or action_dim != len(names):
        raise HolosomaFormatError(f"{path}: the action has {action_dim} entries, dof_names {len(names)}")
    for key in ("kp", "kd"):
        v = meta.get(key)
        if v is not None and (not isinstance(v, list) or len(v) != len(names)):
            raise HolosomaFormatError(f"{path}: metadata {key} must list {len(names)} gains, got {str(v)[:80]}")
    ops = {n.op_type for n in model.graph.node}
    bounded = "Tanh" in ops and any(i.name.endswith("action_scale") for i in model.graph.initializer)
    return PolicyFile(path=path, kind=kind, obs_name=obs_name, obs_dim=int(obs_dim), action_dim=int(action_dim),
                      dof_names=list(names), metadata=meta, tanh_bounded=bounded)


def session(path: str | os.PathLike, threads: int = 1) -> ort.InferenceSession:
    """An onnxruntime session of the file with every input's and output's first dimension made a free batch
    dimension (holosoma's files fix it at 1), so one call runs many envs."""
    model = onnx.load(str(path))
    for value in (*model.graph.input, *model.graph.output):
        dims = value.type.tensor_type.shape.dim
        if dims:
            dims[0].dim_param = "batch"
    del model.graph.value_info[:]  # intermediate shapes recorded at batch 1; onnxruntime infers them again
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = int(threads)
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])

"""The tables of the reference clip a holosoma whole-body-tracking (WBT) ONNX file carries: read them, write them.

holosoma's WBT export (``holosoma.utils.inference_helpers._OnnxMotionPolicyExporter``, holosoma 0.0.3) stores the
reference motion as graph constants indexed by the ``time_step`` input, clamped to the last frame::

    time_step (1, 1) float32 -> Cast int64 -> Squeeze -> Clip(max=T-1) -> Gather(axis 0) of each table -> (1, k)
    joint_pos (T, J), joint_vel (T, J)          joint angles and rates, in the order of the metadata ``dof_names``
    ref_pos_xyz (T, 3), ref_quat_xyzw (T, 4)    world pose of the reference body (the G1's torso_link), x, y, z, w

``holosoma_inference``'s ``WholeBodyTrackingPolicy`` reads ``joint_pos``, ``joint_vel`` and ``ref_quat_xyzw`` each
policy step. The tables are at the policy rate (50 Hz for holosoma's G1 files); the file does not store it. Metadata
values are JSON strings (``dof_names``: a list of joint names; ``reference_lead_frames``: k when row t holds frame
t + k, as ``unilab-export --format holosoma`` writes for holosoma_inference's reference timing).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from unilab.motion_io.clip import ClipError

TIME_STEP_INPUT = "time_step"
CLIP_OUTPUTS = ("joint_pos", "joint_vel", "ref_pos_xyz", "ref_quat_xyzw")
DOF_NAMES_KEY = "dof_names"
LEAD_KEY = "reference_lead_frames"
OPSET = 13  # holosoma's WBT export uses 13; Clip takes int64 bounds from 12 on
_PROBE_PAST_END = 5  # frames past the end at which the reader checks the graph clamps the index


@dataclass(frozen=True)
class ClipTables:
    """The tables of an embedded clip, float64, one row per frame."""

    joint_pos: np.ndarray  # (T, J) rad, in dof_names order
    joint_vel: np.ndarray  # (T, J) rad/s
    ref_pos_xyz: np.ndarray  # (T, 3) m, world position of the reference body
    ref_quat_xyzw: np.ndarray  # (T, 4) world orientation of the reference body, x, y, z, w
    dof_names: tuple[str, ...] | None  # from the metadata; None when the file has no dof_names

    @property
    def num_frames(self) -> int:
        return int(self.joint_pos.shape[0])

    def rows(self, index: np.ndarray) -> ClipTables:
        """The tables' rows ``index``, in that order."""
        return ClipTables(*(getattr(self, name)[index] for name in CLIP_OUTPUTS), dof_names=self.dof_names)

    def leading(self, frames: int) -> ClipTables:
        """Row t holding frame ``min(t + frames, T - 1)`` (the metadata :data:`LEAD_KEY` says ``frames``)."""
        return self.rows(np.minimum(np.arange(self.num_frames) + frames, self.num_frames - 1))


def _constant_tables(path: Path, graph: onnx.GraphProto) -> dict[str, np.ndarray]:
    """Each clip output's table: the constant data input of the Gather(axis 0) that produces it."""
    consts = {init.name: init for init in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant":
            attr = {a.name: a for a in node.attribute}
            if "value" in attr:
                consts[node.output[0]] = attr["value"].t
    producer = {out: node for node in graph.node for out in node.output}
    tables = {}
    for name in CLIP_OUTPUTS:
        node = producer.get(name)
        axis = next((helper.get_attribute_value(a) for a in node.attribute if a.name == "axis"), 0) if node else None
        if node is None or node.op_type != "Gather" or axis != 0 or node.input[0] not in consts:
            found = sorted(o.name for o in graph.output)
            raise ClipError(f"{path}: output {name!r} is not a Gather (axis 0) of a constant table, so the "
                                    f"file has no embedded clip in holosoma's WBT layout (outputs: {found})")
        table = numpy_helper.to_array(consts[node.input[0]])
        if table.ndim != 2:
            raise ClipError(f"{path}: the {name!r} table has shape {table.shape}, expected (frames, width)")
        tables[name] = table.astype(np.float64)
    return tables


def _dof_names(path: Path, model: onnx.ModelProto, num_joints: int) -> tuple[str, ...] | None:
    meta = {p.key: p.value for p in model.metadata_props}
    if DOF_NAMES_KEY not in meta:
        return None
    try:
        names = json.loads(meta[DOF_NAMES_KEY])
    except ValueError as exc:
        raise ClipError(f"{path}: metadata {DOF_NAMES_KEY!r} is not JSON: {exc}") from exc
    if not (isinstance(names, list) and len(names) == num_joints and all(isinstance(n, str) for n in names)):
        raise ClipError(f"{path}: metadata {DOF_NAMES_KEY!r} must be a JSON list of {num_joints} joint names "
                                f"(the width of joint_pos), got {meta[DOF_NAMES_KEY][:200]!r}")
    return tuple(names)


def _lead_frames(path: Path, model: onnx.ModelProto) -> int:
    meta = {p.key: p.value for p in model.metadata_props}
    try:
        lead = json.loads(meta.get(LEAD_KEY, "0"))
    except ValueError as exc:
        raise ClipError(f"{path}: metadata {LEAD_KEY!r} is not JSON: {exc}") from exc
    if not isinstance(lead, int) or lead < 0:
        raise ClipError(f"{path}: metadata {LEAD_KEY!r} must be a whole number of frames >= 0, got {lead!r}")
    return lead


def _check_indexing(path: Path, model: onnx.ModelProto, tables: dict[str, np.ndarray]) -> None:
    """Run the graph at the first, last and past-the-end time steps: each output must be that (clamped) table row,
    so the tables read statically are what holosoma_inference sees."""
    import onnxruntime as ort  # noqa: PLC0415 - only this check runs a graph; reading the tables needs onnx only

    try:
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception as exc:
        raise ClipError(f"{path}: onnxruntime cannot load the graph: {exc}") from exc
    inputs = {i.name: i for i in sess.get_inputs()}
    if TIME_STEP_INPUT not in inputs:
        raise ClipError(f"{path}: no {TIME_STEP_INPUT!r} input (inputs: {sorted(inputs)})")
    last = next(iter(tables.values())).shape[0] - 1
    for step, row in ((0, 0), (last, last), (last + _PROBE_PAST_END, last)):
        feed = {}
        for name, info in inputs.items():
            shape = [d if isinstance(d, int) else 1 for d in info.shape]
            dtype = np.float32 if info.type == "tensor(float)" else np.int64
            feed[name] = np.full(shape, step, dtype) if name == TIME_STEP_INPUT else np.zeros(shape, dtype)
        got = dict(zip(CLIP_OUTPUTS, sess.run(list(CLIP_OUTPUTS), feed), strict=True))
        for name, table in tables.items():
            if not np.array_equal(np.asarray(got[name], np.float64).reshape(-1), table[row]):
                raise ClipError(f"{path}: at {TIME_STEP_INPUT}={step} output {name!r} is not row {row} of "
                                        "its table: the clip is not indexed by the clamped time step as in holosoma's "
                                        "WBT files")


def embedded_clip(path: str | os.PathLike) -> ClipTables:
    """The clip embedded in the holosoma WBT ONNX file ``path`` (a policy, or a clip-only graph as
    :func:`write_clip_model` writes): the tables read from the graph, their indexing by ``time_step`` checked by
    running it, frames in place (a file whose tables lead by k frames, :data:`LEAD_KEY`, gives frame t at row t, the
    first k rows repeating frame k). Raises :class:`ClipError` naming the file."""
    path = Path(path)
    if not path.is_file():
        raise ClipError(f"{path}: file does not exist")
    try:
        model = onnx.load(str(path))
    except Exception as exc:
        raise ClipError(f"{path}: not a readable ONNX model ({type(exc).__name__}: {exc})") from exc
    tables = _constant_tables(path, model.graph)
    frames = {name: t.shape[0] for name, t in tables.items()}
    widths = {name: t.shape[1] for name, t in tables.items()}
    if len(set(frames.values())) != 1 or min(frames.values()) < 1:
        raise ClipError(f"{path}: the clip tables have different frame counts {frames}")
    if widths["ref_pos_xyz"] != 3 or widths["ref_quat_xyzw"] != 4 or widths["joint_pos"] != widths["joint_vel"]:
        raise ClipError(f"{path}: clip table widths {widths}: expected ref_pos_xyz 3, ref_quat_xyzw 4 and "
                                "joint_pos as wide as joint_vel")
    _check_indexing(path, model, tables)
    clip = ClipTables(**tables, dof_names=_dof_names(path, model, widths["joint_pos"]))
    lead = _lead_frames(path, model)
    return clip.rows(np.maximum(np.arange(clip.num_frames) - lead, 0)) if lead else clip


def clip_graph_parts(clip: ClipTables) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
    """Nodes and float32 initializers that map the graph input ``time_step`` (1, 1) float32 to the four clip outputs
    ``(1, k)`` (holosoma's layout, the index clamped to [0, T-1]); a policy graph adds them to its own."""
    last = clip.num_frames - 1
    inits = [numpy_helper.from_array(np.array([-1], np.int64), "clip_squeeze_axes"),
             numpy_helper.from_array(np.array(0, np.int64), "clip_min_frame"),
             numpy_helper.from_array(np.array(last, np.int64), "clip_last_frame")]
    nodes = [helper.make_node("Cast", [TIME_STEP_INPUT], ["clip_step_i64"], to=TensorProto.INT64),
             helper.make_node("Squeeze", ["clip_step_i64", "clip_squeeze_axes"], ["clip_step_flat"]),
             helper.make_node("Clip", ["clip_step_flat", "clip_min_frame", "clip_last_frame"], ["clip_frame"])]
    for name in CLIP_OUTPUTS:
        table = getattr(clip, name)
        inits.append(numpy_helper.from_array(np.ascontiguousarray(table, np.float32), f"clip_table_{name}"))
        nodes.append(helper.make_node("Gather", [f"clip_table_{name}", "clip_frame"], [name], axis=0))
    return nodes, inits


def write_clip_model(path: str | os.PathLike, clip: ClipTables) -> None:
    """A graph holding only the embedded clip: input ``time_step`` (1, 1) float32, the four clip outputs, the
    metadata ``dof_names`` (when the clip has names). Tables are stored as float32, as holosoma's are."""
    nodes, inits = clip_graph_parts(clip)
    widths = {name: getattr(clip, name).shape[1] for name in CLIP_OUTPUTS}
    graph = helper.make_graph(
        nodes, "embedded_clip", [helper.make_tensor_value_info(TIME_STEP_INPUT, TensorProto.FLOAT, [1, 1])],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, widths[name]]) for name in CLIP_OUTPUTS], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="unilab")
    if clip.dof_names is not None:
        helper.set_model_props(model, {DOF_NAMES_KEY: json.dumps(list(clip.dof_names))})
    onnx.checker.check_model(model)
    onnx.save(model, str(path))

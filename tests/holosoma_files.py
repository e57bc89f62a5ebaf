"""Small holosoma-format ONNX files made by the tests (no download): a locomotion and a tracking policy of a linear
map, with the metadata holosoma's exports write."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def _save(graph: onnx.GraphProto, path: Path, metadata: dict) -> Path:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    for key, value in metadata.items():
        model.metadata_props.add(key=key, value=json.dumps(value))
    onnx.save(model, str(path))
    return path


def loco_file(path: Path, weight: np.ndarray, metadata: dict, tanh_scale: np.ndarray | None = None) -> Path:
    """``action = obs @ weight`` (``tanh(.) * tanh_scale`` with it, as holosoma's FastSAC actor)."""
    d, j = weight.shape
    inits = [numpy_helper.from_array(weight.astype(np.float32), "W")]
    nodes = [helper.make_node("MatMul", ["actor_obs", "W"], ["lin" if tanh_scale is not None else "action"])]
    if tanh_scale is not None:
        inits.append(numpy_helper.from_array(tanh_scale.astype(np.float32), "actor.action_scale"))
        nodes += [helper.make_node("Tanh", ["lin"], ["t"]), helper.make_node("Mul", ["t", "actor.action_scale"],
                                                                            ["action"])]
    graph = helper.make_graph(nodes, "loco", [helper.make_tensor_value_info("actor_obs", TensorProto.FLOAT, [1, d])],
                              [helper.make_tensor_value_info("action", TensorProto.FLOAT, [1, j])], inits)
    return _save(graph, path, metadata)


def wbt_file(path: Path, weight: np.ndarray, joint_pos: np.ndarray, joint_vel: np.ndarray, ref_pos: np.ndarray,
             ref_quat_xyzw: np.ndarray, metadata: dict) -> Path:
    """holosoma's tracking export (``_OnnxMotionPolicyExporter``): ``actions = obs @ weight`` and the clip tables
    looked up at ``clamp(time_step, max=T-1)``."""
    d, j = weight.shape
    t = joint_pos.shape[0]
    inits = [numpy_helper.from_array(weight.astype(np.float32), "W"),
             numpy_helper.from_array(np.array(t - 1, dtype=np.int64), "last"),
             numpy_helper.from_array(np.array([1], dtype=np.int64), "axis")]
    nodes = [helper.make_node("MatMul", ["obs", "W"], ["actions"]),
             helper.make_node("Cast", ["time_step"], ["ts_long"], to=TensorProto.INT64),
             helper.make_node("Squeeze", ["ts_long", "axis"], ["ts"]),
             helper.make_node("Min", ["ts", "last"], ["idx"])]
    outputs = [helper.make_tensor_value_info("actions", TensorProto.FLOAT, [1, j])]
    for name, table in (("joint_pos", joint_pos), ("joint_vel", joint_vel), ("ref_pos_xyz", ref_pos),
                        ("ref_quat_xyzw", ref_quat_xyzw)):
        inits.append(numpy_helper.from_array(np.asarray(table, dtype=np.float32), f"{name}_table"))
        nodes.append(helper.make_node("Gather", [f"{name}_table", "idx"], [name], axis=0))
        outputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, table.shape[1]]))
    graph = helper.make_graph(nodes, "wbt", [helper.make_tensor_value_info("obs", TensorProto.FLOAT, [1, d]),
                                             helper.make_tensor_value_info("time_step", TensorProto.FLOAT, [1, 1])],
                              outputs, inits)
    return _save(graph, path, metadata)

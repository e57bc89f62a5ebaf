"""``unilab-export RUN --format holosoma``: a checkpoint's policy as a file holosoma_inference's own
``WholeBodyTrackingPolicy`` / ``LocomotionPolicy`` run unchanged (holosoma's deploy format, :mod:`unilab.interop`).

The file's input is holosoma's observation: the task's policy pieces grouped into holosoma's terms (the task's
``HOLOSOMA_TERMS``), the terms concatenated in sorted name order, joints in ``dof_names`` order (the env's, which must
be its actuator order). The graph gathers them back into the policy's order, then runs the normaliser, actor mean,
tanh and clamp of ``unilab-export`` and outputs ``u = (scale_j / s_j) * a`` for holosoma's ``q* = default + s_j * u``:

- tracking (``obs``, ``time_step`` -> ``actions``, ``joint_pos``, ``joint_vel``, ``ref_pos_xyz``, ``ref_quat_xyzw``):
  ``s_j = scale_j / bound_j`` in metadata ``action_scale`` (WholeBodyTrackingPolicy reads it), so ``u = bound_j * a``,
  the recipe's units, which is what the ``actions`` piece shows; one clip embedded as constant tables looked up at
  ``clamp(time_step, 0, T-1)`` (:mod:`unilab.motion_io.onnx_tables`), the reference body's (the task's anchor's)
  world pose, quaternion xyzw;
- locomotion (``actor_obs`` -> ``action``): ``s_j`` is holosoma_inference's locomotion ``policy_action_scale`` 0.25
  (LocomotionPolicy reads no metadata scale); with unilab's radians mode and joint-range bound ``u = bound_j * a``.

Where the ``actions`` piece (``bound * a``) is not ``u``, the graph multiplies that input by ``bound_j s_j / scale_j``.

Conventions holosoma_inference's loop imposes (its observation at step n, unilab's env's; both documented where the
import meets them, :mod:`unilab.eval.holosoma`):

- reference timing: holosoma_inference shows at decision n the motion its previous inference returned (``time_step``
  n - 1; the setup call's ``time_step`` 0 at decision 0), unilab's env the frame n + 1: the tables hold frame
  ``t + 2`` at ``t`` (:data:`REFERENCE_LEAD`, metadata ``reference_lead_frames``), so decisions n >= 1 see unilab's
  frame and decision 0 sees frame 2 instead of 1;
- start yaw: holosoma_inference removes the robot's yaw at the start and the table's at ``time_step`` 0 (frame 2):
  equal to unilab's observation when the robot starts on the clip's first frame and its yaw is frame 2's.

Both differences vanish for a clip whose first three frames are one pose (a still start): then the file commands what
``unilab-eval`` commands for the same robot state, to float32 rounding.
"""

from __future__ import annotations

import io
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper
from torch import nn

import unilab
from unilab.algo.sac.agent import FastSAC
from unilab.deploy.export import DeterministicPolicy, ExportError, save_with_metadata
from unilab.interop.holosoma_actions import FALLBACK_SCALE
from unilab.interop.holosoma_onnx import LOCO_INPUT
from unilab.interop.holosoma_terms import ACTIONS, task_terms
from unilab.motion_io.onnx_tables import CLIP_OUTPUTS, LEAD_KEY, TIME_STEP_INPUT, ClipTables, clip_graph_parts
from unilab.runtime.checkpoint import apply_task_overrides, load_checkpoint
from unilab.tasks import registry
from unilab.tasks.registry import make_env, task_config

OPSET = 17
REFERENCE_LEAD = 2
"""Frames the embedded tables lead ``time_step`` by (module doc: holosoma_inference's reference timing)."""
MOTION_TERM = "motion_command"
"""The term only holosoma's tracking policy class supplies: its presence makes a tracking file."""


@dataclass
class HolosomaExport:
    path: Path
    checkpoint: Path
    kind: str
    terms: list[str]
    obs_dim: int
    metadata: dict[str, Any]


class HolosomaGraph(nn.Module):
    """holosoma's observation -> the policy's (gather, factor) -> deterministic action -> holosoma's output."""

    def __init__(self, agent: FastSAC, source: np.ndarray, factor: np.ndarray, out_scale: np.ndarray):
        super().__init__()
        self.policy = DeterministicPolicy(agent)
        self.register_buffer("source", torch.as_tensor(source, dtype=torch.int64))
        self.register_buffer("factor", torch.as_tensor(factor, dtype=torch.float32))
        self.register_buffer("out_scale", torch.as_tensor(out_scale, dtype=torch.float32))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.policy(obs.index_select(1, self.source) * self.factor) * self.out_scale


def _layout(env: Any, table: dict[str, tuple[str, ...]]) -> tuple[list[str], dict[str, int]]:
    """holosoma's terms of the policy's pieces (sorted) and each piece's offset in holosoma's observation."""
    pieces = env.layout.policy_slices
    term_of = {p: term for term, ps in table.items() for p in ps}
    missing = [p for p in pieces if p not in term_of]
    if missing:
        raise ExportError(f"the policy observes {missing}, which have no holosoma term (the task's HOLOSOMA_TERMS)")
    terms = sorted({term_of[p] for p in pieces})
    split = {t: [p for p in table[t] if p not in pieces] for t in terms}
    split = {t: ps for t, ps in split.items() if ps}
    if split:
        raise ExportError(f"holosoma terms {sorted(split)} need pieces the policy does not observe: {split}")
    offset, at = {}, 0
    for term in terms:
        for p in table[term]:
            offset[p] = at
            at += pieces[p].stop - pieces[p].start
    return terms, offset


def _clip_tables(env: Any, clip: str | None) -> tuple[str, ClipTables]:
    """The embedded clip: the name and tables of ``clip`` (a name or index; None: the run's only clip), the reference
    body the env's anchor, frames leading by :data:`REFERENCE_LEAD`."""
    lib = env.motion
    names = [Path(f).stem for f in lib.files]
    if clip is None:
        if len(names) != 1:
            raise ExportError(f"the run tracks {len(names)} clips {names}: a holosoma file embeds one, pass --clip")
        c = 0
    elif clip in names:
        c = names.index(clip)
    elif clip.isdigit() and int(clip) < len(names):
        c = int(clip)
    else:
        raise ExportError(f"--clip {clip!r}: not one of the run's clips {names}")
    rows = lib.clip_offsets[c] + np.arange(int(lib.num_frames[c]))
    tables = ClipTables(joint_pos=lib.joint_pos[rows], joint_vel=lib.joint_vel[rows],
                        ref_pos_xyz=lib.body_pos_w[rows, env.anchor],
                        ref_quat_xyzw=lib.body_quat_w[rows, env.anchor][:, [1, 2, 3, 0]],
                        dof_names=tuple(env.joint_names))
    return names[c], tables.leading(REFERENCE_LEAD)


def _urdf(cfg: Any, urdf: str | None, kind: str) -> str | None:
    if urdf is not None:
        path = Path(urdf).expanduser()
        if not path.is_file():
            raise ExportError(f"--urdf {urdf}: no such file")
        return path.read_text()
    if cfg.robot.model_xml is None:  # a built-in robot
        from unilab.assets.holosoma import URDFS, read_wheel_member  # noqa: PLC0415 - only for a built-in robot

        return read_wheel_member(URDFS[cfg.robot.asset]).decode()
    if kind == "wbt":
        raise ExportError("a tracking file needs the robot's URDF (holosoma_inference computes the torso "
                          "orientation from it): pass --urdf")
    return None


def export_holosoma(checkpoint: str | os.PathLike, out: str | os.PathLike, clip: str | None = None,
                    urdf: str | None = None, overrides: dict[str, Any] | None = None) -> HolosomaExport:
    """Write ``checkpoint``'s policy in holosoma's deploy format to ``out`` (module doc); ``clip``: the clip a
    tracking file embeds; ``urdf``: the robot's URDF (default: a built-in robot's, from the holosoma wheel);
    ``overrides``: ``task.KEY=VALUE`` changes to the stored task config (e.g. other clips). ExportError names what does
    not fit."""
    payload, ckpt = load_checkpoint(checkpoint)
    raw = payload.get("config")
    if not isinstance(raw, dict) or "task" not in raw:
        raise ExportError(f"checkpoint {ckpt} holds no run config: cannot describe its task")
    task_raw = apply_task_overrides(raw["task"], overrides)
    task = task_raw.get("name")
    table = task_terms(task)
    if table is None:
        raise ExportError(f"task {task!r} declares no holosoma observation terms (HOLOSOMA_TERMS)")
    agent = FastSAC.from_checkpoint(payload["agent"], device="cpu")
    cfg = task_config(task, task_raw)
    env = make_env(task, cfg, 1, pool_kwargs={"nthread": 1})
    try:
        terms, offset = _layout(env, table)
        kind = "wbt" if MOTION_TERM in terms else "loco"
        joints = list(env.joint_names)
        if [joints[j] for j in np.asarray(env.act_joint)] != joints:
            raise ExportError("holosoma's format has one joint order (dof_names) for actions and joint terms; the "
                              "task's actuators are not its joints in order")
        if env.obs_dim != agent.obs_dim or env.action_dim != agent.action_dim:
            raise ExportError(f"checkpoint {ckpt}: the agent takes obs {agent.obs_dim} -> action {agent.action_dim}, "
                              f"the task config builds {env.obs_dim} -> {env.action_dim}")
        scale, bound = np.asarray(env.action_scale, np.float64), np.asarray(env.action_bound, np.float64)
        s = scale / bound if kind == "wbt" else np.full(len(joints), FALLBACK_SCALE)
        source = np.empty(env.obs_dim, dtype=np.int64)
        factor = np.ones(env.obs_dim)
        scales = getattr(env, "obs_scales", {})
        layout = []
        for p, sl in env.layout.policy_slices.items():
            source[sl] = offset[p] + np.arange(sl.stop - sl.start)
            if p in table.get(ACTIONS, ()):
                factor[sl] = bound * s / scale
        for term in terms:
            first = table[term][0]
            width = sum(env.layout.policy_slices[p].stop - env.layout.policy_slices[p].start for p in table[term])
            layout.append({"group": "actor_obs", "name": term, "dim": width, "history_length": 1,
                           "scale": float(scales.get(first, 1.0))})
        clip_name, tables = _clip_tables(env, clip) if kind == "wbt" else (None, None)
        robot_urdf = _urdf(cfg, urdf, kind)
        c = getattr(cfg, "commands", None)
        meta: dict[str, Any] = {
            "dof_names": joints, "kp": [float(v) for v in env.kp], "kd": [float(v) for v in env.kd],
            "action_scale": [float(v) for v in s],
            "command_ranges": None if c is None else {"lin_vel_x": list(c.lin_vel_x), "lin_vel_y": list(c.lin_vel_y),
                                                      "ang_vel_yaw": list(c.ang_vel_yaw)},
            "observation_layout": layout, "observation_clip": None if cfg.obs_clip is None else float(cfg.obs_clip),
            "default_joint_pos": [float(v) for v in env.action_default], "control_dt": float(env.control_dt),
            "unilab_version": unilab.__version__, "task": task, "task_kind": registry.kind(task),
            "checkpoint": str(ckpt.resolve()), "iteration": int(payload["iteration"]),
        }
        if robot_urdf is not None:
            meta["robot_urdf"] = robot_urdf
        if kind == "wbt":
            meta.update({"clip": clip_name, "reference_body": cfg.anchor_body, LEAD_KEY: REFERENCE_LEAD})
    finally:
        env.close()
    graph = _onnx(HolosomaGraph(agent, source, factor, scale / s).eval(), kind, env.obs_dim)
    if tables is not None:
        graph = _with_clip(graph, tables)
    out = save_with_metadata(graph, meta, out)
    return HolosomaExport(out, ckpt, kind, terms, int(source.size), meta)


def _onnx(module: nn.Module, kind: str, obs_dim: int) -> onnx.ModelProto:
    """The policy graph: ``obs`` -> ``actions`` (tracking) or ``actor_obs`` -> ``action`` (locomotion)."""
    buf = io.BytesIO()
    inputs, outputs = (["obs"], ["actions"]) if kind == "wbt" else ([LOCO_INPUT], ["action"])
    axes = {name: {0: "batch"} for name in (*inputs, *outputs)}
    with warnings.catch_warnings(), torch.no_grad():  # TorchScript exporter: see unilab.deploy.export._onnx_graph
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", FutureWarning)
        torch.onnx.export(module, (torch.zeros(1, obs_dim),), buf, dynamo=False, opset_version=OPSET,
                          input_names=inputs, output_names=outputs, dynamic_axes=axes)
    return onnx.load_model_from_string(buf.getvalue())


def _with_clip(model: onnx.ModelProto, tables: ClipTables) -> onnx.ModelProto:
    """``model`` with input ``time_step`` and the clip outputs of holosoma's tracking files
    (:func:`unilab.motion_io.onnx_tables.clip_graph_parts`)."""
    nodes, inits = clip_graph_parts(tables)
    graph = model.graph
    graph.node.extend(nodes)
    graph.initializer.extend(inits)
    graph.input.append(helper.make_tensor_value_info(TIME_STEP_INPUT, TensorProto.FLOAT, ["batch", 1]))
    graph.output.extend(helper.make_tensor_value_info(
        name, TensorProto.FLOAT, ["batch", getattr(tables, name).shape[1]]) for name in CLIP_OUTPUTS)
    onnx.checker.check_model(model)
    return model

"""Export a checkpoint's deterministic policy to one ONNX graph with the deploy contract as metadata.

The graph is ``obs (batch, obs_dim) float32 -> action (batch, action_dim) float32``: observation normaliser, actor
trunk and mean head, tanh, clamp to [-1, 1] (``FastSAC.act(obs, deterministic=True)``). ``metadata_props`` hold JSON
strings (:data:`METADATA_KEYS` and a task's keys): everything a deploy stack needs to build the observation and apply
the action without unilab; ``scripts/deploy/sim2sim.py`` is a consumer that uses nothing else.
"""

from __future__ import annotations

import io
import json
import math
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import torch
from torch import nn

import unilab
from unilab.algo.sac.agent import FastSAC
from unilab.runtime.checkpoint import load_agent, load_checkpoint
from unilab.tasks.core.model import model_path
from unilab.tasks.registry import kind, make_env, task_config

INPUT_NAME = "obs"
OUTPUT_NAME = "action"
OPSET = 17  # LayerNormalization is a native op from 17 on; onnxruntime >= 1.20 runs it
# keys every export carries; a joint-target task's adds ROBOT_KEYS and its env's deploy_metadata()
METADATA_KEYS = ("unilab_version", "task", "task_kind", "checkpoint", "iteration", "config", "obs_dim", "action_dim",
                 "input_name", "output_name", "action_clip", "control_dt")
ROBOT_KEYS = ("joint_names", "obs_joint_names", "default_joint_pos", "action_scale", "action_bound", "kp", "kd",
              "effort_limit", "pd_target_range", "sim_dt", "decimation", "integrator", "self_collisions", "obs_layout",
              "obs_clip", "model_xml")
"""What every joint-target task's export adds: the robot, its PD servos, timing and the observation pieces."""


class ExportError(ValueError):
    """The checkpoint or its task cannot be exported (the message names the file or key)."""


class DeterministicPolicy(nn.Module):
    """Normaliser + actor mean + tanh + clamp, with float32 constants only (a clean ONNX graph).

    The normaliser's float64 statistics are folded into float32 ``mean`` and ``scale`` as ``RunningNormalizer.forward``
    casts them for float32 input, so the result matches ``FastSAC.act`` to float32 rounding.
    """

    def __init__(self, agent: FastSAC) -> None:
        super().__init__()
        norm = agent.obs_normalizer
        if norm.enabled:
            mean = norm.mean.detach().cpu().to(torch.float32)
            scale = (norm.var.detach().cpu().sqrt() + norm.eps).to(torch.float32)
        else:
            mean, scale = torch.zeros(agent.obs_dim), torch.ones(agent.obs_dim)
        self.register_buffer("obs_mean", mean)
        self.register_buffer("obs_scale", scale)
        # only the mean branch: the log-std head plays no part in the deterministic action
        self.trunk = agent.actor.trunk
        self.mean_head = agent.actor.mean_head

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = (obs - self.obs_mean) / self.obs_scale
        return torch.tanh(self.mean_head(self.trunk(x))).clamp(-1.0, 1.0)


@dataclass
class ExportResult:
    path: Path
    checkpoint: Path
    obs_dim: int
    action_dim: int
    metadata: dict[str, Any]
    """The metadata as Python values (the file holds them as JSON strings)."""


def robot_metadata(env: Any) -> dict[str, Any]:
    """The deploy contract every joint-target task shares, read from an env built from the run's config (the one
    place that resolves joint patterns, action scales, the observation layout and asset paths): joints, PD servos,
    timing, the policy's observation pieces in order (name, offset, width, noise, scale: a piece's value is
    ``scale x quantity``, its noise drawn before the scale) and the MJCF."""
    cfg = env.cfg
    joint_names = [env.joint_names[j] for j in np.asarray(env.act_joint)]
    noise = np.asarray(env.noise_scale, dtype=np.float64)
    scales = getattr(env, "obs_scales", {})
    layout = []
    for name, sl in env.layout.policy_slices.items():
        scale = float(scales.get(name, 1.0))
        piece_noise = noise[sl.start:sl.stop] / scale
        layout.append({"name": name, "offset": int(sl.start), "width": int(sl.stop - sl.start),
                       "noise": float(piece_noise.max()) if piece_noise.size else 0.0, "scale": scale})
    if not layout or layout[-1]["offset"] + layout[-1]["width"] != env.obs_dim:
        raise ExportError(f"the task's observation layout {[p['name'] for p in layout]} does not cover "
                          f"obs_dim={env.obs_dim}")
    model = env.model
    limited = np.asarray(model.actuator_ctrllimited, dtype=bool)
    target_range = np.asarray(model.actuator_ctrlrange, dtype=np.float64).tolist() if limited.all() else None
    model_xml = model_path(cfg.robot).resolve()
    return {
        "joint_names": joint_names, "obs_joint_names": list(env.joint_names),
        "default_joint_pos": [float(v) for v in env.action_default],
        "action_scale": [float(v) for v in env.action_scale], "action_bound": [float(v) for v in env.action_bound],
        "kp": [float(v) for v in env.kp], "kd": [float(v) for v in env.kd],
        "effort_limit": [float(v) if math.isfinite(v) else None for v in np.asarray(env.effort, dtype=np.float64)],
        "pd_target_range": target_range, "sim_dt": float(cfg.sim_dt), "decimation": int(cfg.decimation),
        "integrator": cfg.integrator, "self_collisions": bool(cfg.self_collisions), "obs_layout": layout,
        "obs_clip": None if cfg.obs_clip is None else float(cfg.obs_clip), "model_xml": str(model_xml),
    }


def export_policy(checkpoint: str | os.PathLike, out: str | os.PathLike) -> ExportResult:
    """Write the ONNX policy of ``checkpoint`` (a file, or a run directory's newest) to ``out``.

    Raises FileNotFoundError (missing checkpoint), ValueError (corrupt or foreign checkpoint; :class:`ExportError` for
    a task that cannot be exported), each naming the file or key.
    """
    payload, ckpt = load_checkpoint(checkpoint)
    raw = payload.get("config")
    task = payload.get("task") or (raw or {}).get("task", {}).get("name")
    if not isinstance(raw, dict) or task is None:
        raise ExportError(f"checkpoint {ckpt} holds no run config (config/task): cannot describe its task")
    agent = load_agent(payload, ckpt)
    task_cfg = task_config(task, raw["task"])

    meta: dict[str, Any] = {
        "unilab_version": unilab.__version__, "task": task, "task_kind": kind(task), "checkpoint": str(ckpt.resolve()),
        "iteration": int(payload["iteration"]), "config": raw, "obs_dim": agent.obs_dim, "action_dim": agent.action_dim,
        "input_name": INPUT_NAME, "output_name": OUTPUT_NAME, "action_clip": [-1.0, 1.0],
    }
    # one simulation of the run's task: its control dt and, for a joint-target task (its env describes what it adds to
    # the robot's), the whole contract
    env = make_env(task, task_cfg, 1, pool_kwargs={"nthread": 1})
    try:
        meta["control_dt"] = float(env.control_dt)
        if hasattr(env, "deploy_metadata"):
            meta.update(robot_metadata(env), **env.deploy_metadata())
            widths = sum(p["width"] for p in meta["obs_layout"])
            if widths != agent.obs_dim or len(meta["joint_names"]) != agent.action_dim:
                raise ExportError(
                    f"checkpoint {ckpt}: the agent takes obs_dim={agent.obs_dim}, action_dim={agent.action_dim} but "
                    f"its task config now builds {widths} / {len(meta['joint_names'])} (was the observation preset "
                    "changed since it was trained?)")
    finally:
        env.close()

    out = save_with_metadata(_onnx_graph(DeterministicPolicy(agent).eval(), agent.obs_dim), meta, out)
    return ExportResult(out, ckpt, agent.obs_dim, agent.action_dim, meta)


def save_with_metadata(graph: onnx.ModelProto, meta: dict[str, Any], out: str | os.PathLike) -> Path:
    """``graph`` with ``meta`` as JSON-string metadata_props, checked and written to ``out`` (replaced atomically)."""
    for key, value in meta.items():
        graph.metadata_props.add(key=key, value=json.dumps(value))
    graph.producer_name = "unilab"
    graph.producer_version = unilab.__version__
    onnx.checker.check_model(graph)
    out = Path(out).expanduser()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        onnx.save(graph, str(tmp))
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return out


def _onnx_graph(policy: nn.Module, obs_dim: int) -> onnx.ModelProto:
    # The TorchScript exporter (dynamo=False) exports this plain MLP exactly and needs only onnx; dynamo=True would add
    # onnxscript (and onnx-ir) as dependencies for no gain. torch 2.13 marks it deprecated: nothing a user can act on.
    buf = io.BytesIO()
    example = torch.zeros(2, obs_dim, dtype=torch.float32)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", FutureWarning)
        torch.onnx.export(
            policy, (example,), buf, dynamo=False, opset_version=OPSET, input_names=[INPUT_NAME],
            output_names=[OUTPUT_NAME], dynamic_axes={INPUT_NAME: {0: "batch"}, OUTPUT_NAME: {0: "batch"}})
    return onnx.load_model_from_string(buf.getvalue())


def read_metadata(path: str | os.PathLike) -> dict[str, Any]:
    """The metadata of an exported policy as Python values."""
    graph = onnx.load(str(path), load_external_data=False)
    return {p.key: json.loads(p.value) for p in graph.metadata_props}

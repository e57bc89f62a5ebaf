"""holosoma's action mapping against a unilab env's.

holosoma_inference commands ``q* = default + s_j * clip(u_j, -100, 100)`` for a file output ``u`` (``rl_inference``
in ``policies/base.py`` and ``policies/wbt.py``); a unilab env ``q* = default + scale_j * clip(a_j, -1, 1)``. So
``a_j = s_j u_j / scale_j``, and the env's clip at its bound (``|a| = 1``, a target ``scale_j`` from the default)
binds where holosoma's would not.

``s`` per joint, in this order of precedence (:func:`action_scale`):

1. metadata ``action_scale`` (a number, a per-joint list, or holosoma's comma-separated string): what newer holosoma
   exports and ``unilab-export --format holosoma`` write;
2. the ``experiment_config``'s ``robot.control`` (holosoma's PPO exports): ``action_scale``, times ``effort_j / kp_j``
   with ``action_scales_by_effort_limit_over_p_gain`` (effort from ``dof_effort_limit_list``, kp from metadata);
3. by file kind, for files recording neither (holosoma's published ones):
   - tracking, FastSAC actor (``tanh(x) * action_scale``): 1, the output is already the PD-target offset in rad
     (the published dance file's actor bakes ``reach_j = max |limit_j - default_j|`` into its tanh bound);
   - tracking, other actors (PPO): ``0.25 * effort_j / kp_j``, holosoma_inference's G1 WBT fallback
     (``default_per_joint_action_scale``), effort from the env's model;
   - locomotion: 0.25, holosoma_inference's locomotion ``policy_action_scale`` (its LocomotionPolicy reads no
     metadata scale).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from unilab.interop.holosoma_onnx import HolosomaFormatError, PolicyFile

ACTION_CLIP = 100.0
"""holosoma_inference's clip of a file's output before the scale (``np.clip(action, -100, 100)``)."""
FALLBACK_SCALE = 0.25
"""holosoma's action_scale of its G1 recipes (locomotion: radians; WBT: times effort / kp)."""


def parse_scale(value: object, n: int, where: str) -> np.ndarray:
    """A metadata ``action_scale`` as ``(n,)`` (a number, a list, or a comma-separated string, as holosoma_inference's
    ``_parse_action_scale_metadata``)."""
    if isinstance(value, str):
        value = [float(tok) for tok in value.split(",") if tok.strip()]
    arr = np.asarray(value, dtype=np.float64).reshape(-1)
    if arr.size == 1:
        arr = np.full(n, float(arr[0]))
    if arr.size != n or not np.isfinite(arr).all():
        raise HolosomaFormatError(f"{where}: action_scale must be one number or {n} finite numbers, got {value!r}")
    return arr


def action_scale(policy: PolicyFile, effort: np.ndarray) -> tuple[np.ndarray, str]:
    """``(s per file joint, where it came from)``; ``effort``: the env's torque limit per file joint (N m)."""
    n = len(policy.dof_names)
    if "action_scale" in policy.metadata:
        return parse_scale(policy.metadata["action_scale"], n, str(policy.path)), "metadata action_scale"
    control = policy.experiment("robot", "control")
    if isinstance(control, dict) and "action_scale" in control:
        s = np.full(n, float(control["action_scale"]))
        if control.get("action_scales_by_effort_limit_over_p_gain"):
            names = policy.experiment("robot", "dof_names")
            limits = policy.experiment("robot", "dof_effort_limit_list")
            if policy.kp is None or not names or not limits:
                raise HolosomaFormatError(f"{policy.path}: experiment_config scales actions by effort / kp but "
                                          "records no kp or effort limits")
            by_name = dict(zip(names, limits, strict=True))
            s = s * np.array([by_name[j] for j in policy.dof_names]) / policy.kp
            return s, "experiment_config robot.control: action_scale x effort / kp"
        return s, "experiment_config robot.control: action_scale"
    if policy.kind == "wbt" and policy.tanh_bounded:
        return np.ones(n), "default for a tracking file with a tanh-bounded (FastSAC) actor: 1 (output in rad)"
    if policy.kind == "wbt":
        if policy.kp is None:
            raise HolosomaFormatError(f"{policy.path}: no action_scale and no kp in its metadata")
        return FALLBACK_SCALE * effort / policy.kp, "default for a tracking file: 0.25 x effort / kp"
    return np.full(n, FALLBACK_SCALE), "default for a locomotion file: 0.25"


@dataclass
class HolosomaActions:
    """A file's output ``u`` (its ``dof_names`` order) against an env's [-1, 1] action (actuator order)."""

    scale: np.ndarray
    """``s``: holosoma's PD-target change per unit of output, per file joint."""
    source: str
    env_index: np.ndarray
    """The env actuator of each file joint."""
    env_scale: np.ndarray
    """The env's ``action_scale`` of each file joint."""
    env_bound: np.ndarray
    """The env's ``action_bound`` of each file joint (its ``actions`` piece is ``bound * a``)."""

    @classmethod
    def for_env(cls, policy: PolicyFile, env, scale: np.ndarray | None = None) -> HolosomaActions:
        """The mapping of ``policy`` in ``env`` (``scale``: override of :func:`action_scale`)."""
        actuators = [env.joint_names[j] for j in np.asarray(env.act_joint)]
        missing = [n for n in policy.dof_names if n not in actuators]
        if missing or len(actuators) != len(policy.dof_names):
            raise HolosomaFormatError(f"{policy.path}: dof_names {missing or policy.dof_names} do not match the "
                                      f"env's actuated joints {actuators}")
        index = np.array([actuators.index(n) for n in policy.dof_names], dtype=np.int64)
        effort = np.asarray(env.effort, dtype=np.float64)[index]
        s, source = (action_scale(policy, effort) if scale is None
                     else (np.asarray(scale, dtype=np.float64), "given"))
        return cls(s, source, index, np.asarray(env.action_scale, dtype=np.float64)[index],
                   np.asarray(env.action_bound, dtype=np.float64)[index])

    def to_env(self, output: np.ndarray) -> np.ndarray:
        """The env action ``(n, A)`` that commands holosoma's PD targets for ``output`` ``(n, J)`` (before the env's
        own clip at 1)."""
        u = np.clip(np.asarray(output, dtype=np.float64), -ACTION_CLIP, ACTION_CLIP)
        a = np.empty_like(u)
        a[:, self.env_index] = u * (self.scale / self.env_scale)
        return a

    def piece_to_output(self) -> np.ndarray:
        """Per file joint, the factor from the env's ``actions`` piece (``bound * a``) to the output ``u``."""
        return self.env_scale / self.env_bound / self.scale

    def beyond_bound(self, output: np.ndarray) -> np.ndarray:
        """``(n, J)`` bool: entries the env clips (their target lies past the env's bound)."""
        u = np.clip(np.asarray(output, dtype=np.float64), -ACTION_CLIP, ACTION_CLIP)
        return np.abs(u * self.scale) > self.env_scale


def reach(default: Sequence[float], lo: Sequence[float], hi: Sequence[float]) -> np.ndarray:
    """``max(|lo - default|, |hi - default|)`` per joint: the largest PD-target offset inside the joint range."""
    d, lo_, hi_ = (np.asarray(x, dtype=np.float64) for x in (default, lo, hi))
    return np.maximum(np.abs(lo_ - d), np.abs(hi_ - d))

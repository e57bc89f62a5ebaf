"""Tracking metrics of motion-tracking rollouts: pure NumPy, batched over envs.

The definitions (shared with ``scripts/deploy/sim2sim.py``, which recomputes them without unilab; keep both in step):

- a clip of ``T`` frames is measured at frames ``t = 0 .. T-1``: frame 0 is the start state (the reference at frame
  0), frame ``t >= 1`` the state after the ``t``-th control step, each compared with the reference at the same frame;
- ``mpjpe_mm``: mean over frames and tracked bodies of ``||p_robot - p_ref||`` (world frame), x1000;
- ``mpjpe_local_mm``: the same after expressing every body position in its own anchor body's frame,
  ``R_anchor^T (p_body - p_anchor)`` (robot and reference each with their own anchor), x1000;
- ``anchor_pos_err`` (m): mean ``||anchor_robot - anchor_ref||``; ``anchor_ori_err`` (rad): mean
  ``2 acos(|<q_robot, q_ref>|)`` (unit quaternions);
- ``joint_pos_err`` (rad) / ``joint_vel_err`` (rad/s): mean over frames and joints of ``|q - q_ref|`` /
  ``|qd - qd_ref|``;
- ``success_rate``: 1 for an env on which no termination condition fired at any frame, else 0 (the rollout goes on
  after a failure: the errors above cover every frame).

Per clip a metric is the mean over its envs; overall, the mean of the per-clip values (each clip weighs the same,
whatever its length).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

METRIC_NAMES = ("success_rate", "mpjpe_mm", "mpjpe_local_mm", "anchor_pos_err", "anchor_ori_err",
                "joint_pos_err", "joint_vel_err")
"""The metric keys of every report (JSON and TensorBoard ``eval/<name>``), in table order."""
ERROR_NAMES = METRIC_NAMES[1:]
"""The per-frame errors (every metric but ``success_rate``)."""
UNITS = {"success_rate": "", "mpjpe_mm": "mm", "mpjpe_local_mm": "mm", "anchor_pos_err": "m",
         "anchor_ori_err": "rad", "joint_pos_err": "rad", "joint_vel_err": "rad/s"}


def rotate_inv(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``R(q)^T v`` for unit quaternions ``q`` (..., 4) wxyz and vectors ``v`` (..., 3) (broadcast)."""
    w = q[..., :1]
    u = -q[..., 1:]  # the conjugate rotates by R^T
    t = 2.0 * np.cross(u, v)
    return v + w * t + np.cross(u, t)


def frame_errors(body_pos: np.ndarray, body_quat: np.ndarray, joint_pos: np.ndarray, joint_vel: np.ndarray,
                 ref_body_pos: np.ndarray, ref_body_quat: np.ndarray, ref_joint_pos: np.ndarray,
                 ref_joint_vel: np.ndarray, anchor: int) -> dict[str, np.ndarray]:
    """One frame's errors of ``n`` envs, ``{name: (n,)}`` for :data:`ERROR_NAMES`, from ``(n, B, 3)`` world-frame
    positions (m) and ``(n, B, 4)`` wxyz orientations of the ``B`` tracked bodies (only the ``anchor``-th one's is
    used) and ``(n, J)`` joint angles (rad) and rates (rad/s)."""
    q, q_ref = body_quat[:, anchor], ref_body_quat[:, anchor]
    a, a_ref = body_pos[:, anchor], ref_body_pos[:, anchor]
    local = rotate_inv(q[:, None, :], body_pos - a[:, None, :])
    local_ref = rotate_inv(q_ref[:, None, :], ref_body_pos - a_ref[:, None, :])
    dot = np.minimum(np.abs(np.sum(q * q_ref, axis=-1)), 1.0)
    return {
        "mpjpe_mm": 1000.0 * np.linalg.norm(body_pos - ref_body_pos, axis=-1).mean(axis=-1),
        "mpjpe_local_mm": 1000.0 * np.linalg.norm(local - local_ref, axis=-1).mean(axis=-1),
        "anchor_pos_err": np.linalg.norm(a - a_ref, axis=-1),
        "anchor_ori_err": 2.0 * np.arccos(dot),
        "joint_pos_err": np.abs(joint_pos - ref_joint_pos).mean(axis=-1),
        "joint_vel_err": np.abs(joint_vel - ref_joint_vel).mean(axis=-1),
    }


class TrackingAccumulator:
    """Per-frame errors and first failures of ``n`` envs, env ``e`` measured at frames ``0 .. frames[e]-1``; ``add``
    the frames in order, rows past their env's last frame ignored."""

    def __init__(self, frames: Sequence[int] | np.ndarray):
        self.frames = np.asarray(frames, dtype=np.int64)
        if self.frames.ndim != 1 or (self.frames < 1).any():
            raise ValueError(f"frames must be a 1-D array of counts >= 1, got {self.frames!r}")
        n, t_max = self.frames.shape[0], int(self.frames.max())
        self.errors = {name: np.full((n, t_max), np.nan) for name in ERROR_NAMES}
        """``{name: (n, T_max)}`` per-frame errors; NaN past an env's last frame."""
        self.first_failure = np.full(n, -1, dtype=np.int64)
        """First frame at which a termination condition fired, -1 for none."""
        self.first_failure_term = [""] * n
        """Name of the condition that fired first ("" for none or when not given)."""

    @property
    def num_frames(self) -> int:
        """Frames of the longest env (the rollout length)."""
        return int(self.errors[ERROR_NAMES[0]].shape[1])

    def add(self, t: int, errors: Mapping[str, np.ndarray], terminated: np.ndarray,
            conditions: Mapping[str, np.ndarray] | None = None) -> None:
        """Record frame ``t``: ``errors`` of :func:`frame_errors`, ``terminated`` (n,) bool, per-condition masks."""
        live = t < self.frames
        for name in ERROR_NAMES:
            self.errors[name][live, t] = np.asarray(errors[name])[live]
        new = live & np.asarray(terminated, dtype=bool) & (self.first_failure < 0)
        self.first_failure[new] = t
        for e in np.flatnonzero(new):  # a few envs, once each
            fired = [name for name, mask in (conditions or {}).items() if mask[e]]
            self.first_failure_term[e] = ",".join(fired) or "diverged"

    def per_env(self) -> dict[str, np.ndarray]:
        """``{metric: (n,)}`` for every name of :data:`METRIC_NAMES` (means over each env's frames)."""
        valid = np.arange(self.num_frames)[None, :] < self.frames[:, None]
        out = {"success_rate": (self.first_failure < 0).astype(np.float64)}
        for name in ERROR_NAMES:
            # a frame inside the rollout that is NaN (a diverged state) stays NaN in the mean
            out[name] = np.where(valid, self.errors[name], 0.0).sum(axis=1) / self.frames
        return out


def summarize(per_env: Mapping[str, np.ndarray], env_clip: np.ndarray, clip_names: Sequence[str],
              clip_frames: Sequence[int]) -> dict[str, dict]:
    """``{"overall": {metric: v}, "clips": {name: {metric: v, "frames": T}}}`` from :meth:`TrackingAccumulator.per_env`:
    a clip's values the means over its envs, the overall values the means over clips."""
    env_clip = np.asarray(env_clip)
    clips: dict[str, dict] = {}
    for c, name in enumerate(clip_names):
        rows = env_clip == c
        if not rows.any():
            raise ValueError(f"clip {name!r} has no env")
        clips[name] = {**{m: float(np.mean(per_env[m][rows])) for m in METRIC_NAMES}, "frames": int(clip_frames[c])}
    overall = {m: float(np.mean([clips[n][m] for n in clip_names])) for m in METRIC_NAMES}
    return {"overall": overall, "clips": clips}

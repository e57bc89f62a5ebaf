"""The left/right mirror of a robot's state and joint-space actions, derived from its MjModel (for symmetry
augmentation: a mirrored transition is another valid transition of a mirror-symmetric task).

The mirror is the reflection ``M = diag(1, -1, 1)`` through the world's x-z plane, the robot's sagittal plane at
its default pose (facing +x, as MuJoCo robots are built). For a robot whose two sides are mirror images:

- a polar vector (position, linear velocity, gravity) maps to ``M v``;
- an axial vector (angular velocity) to ``-M w``, a rotation quaternion ``(w, x, y, z)`` to ``(w, -x, y, -z)``
  (``M R M`` is the rotation by the same angle about ``-M a``);
- hinge joint ``j`` maps to its partner ``p`` (``left`` and ``right`` swapped in its name; a mid-plane joint is
  its own partner) with a sign: rotating ``j`` by ``q`` and mirroring is rotating ``p`` by ``s_j q``, where
  ``s_j = a_p . (-M a_j)`` for the joints' world axes ``a`` at the default pose (+1 for pitch joints, -1 for roll
  and yaw joints).

The map is derived, not listed, so another robot gets its own from its MJCF; partner joints whose axes are not
mirror images are refused, by name.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import mujoco
import numpy as np

REFLECT = np.array([1.0, -1.0, 1.0])  # diag(M): the reflection through the x-z plane
AXIAL = -REFLECT  # how an axial vector (angular velocity) maps: -M w
ROT6 = np.array([1.0, -1.0, -1.0, 1.0, 1.0, -1.0])
"""How the first two columns of a rotation matrix map, row by row (``R00 R01 R10 R11 R20 R21``): ``M R M``
flips the entries whose row and column differ in parity of the y axis."""
AXIS_TOLERANCE = 1e-3  # largest 1 - |s_j| accepted for a joint pair (axes as MJCF files round them)

_HINGE, _SLIDE = int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE)
_SIDE = re.compile(r"(?<![a-z])(left|right|l|r)(?![a-z])", re.IGNORECASE)
_SWAP = {"left": "right", "right": "left", "l": "r", "r": "l"}


def partner_name(name: str) -> str:
    """``name`` with its side swapped (``left_knee_joint`` <-> ``right_knee_joint``, ``l_hip`` <-> ``r_hip``):
    whole ``_``-separated words only; a name without a side is its own partner."""
    def swap(m: re.Match) -> str:
        word = m.group(0)
        out = _SWAP[word.lower()]
        return out.upper() if word.isupper() else out.capitalize() if word[0].isupper() else out

    return _SIDE.sub(swap, name)


@dataclass(frozen=True)
class JointMirror:
    """The mirror of a vector of joint values: ``out[..., j] = sign[j] * x[..., perm[j]]``."""

    names: tuple[str, ...]
    perm: np.ndarray  # (J,) index of each joint's partner
    sign: np.ndarray  # (J,) +1 or -1 (see the module doc)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return x[..., self.perm] * self.sign


def joint_mirror(model: mujoco.MjModel, joint_ids: Sequence[int]) -> JointMirror:
    """The mirror of the hinge or slide joints ``joint_ids`` (in that order) from their names and world axes at
    ``qpos0``; ValueError for another joint type, a partner missing from ``joint_ids``, or partner axes that are
    not mirror images (naming the joints and their axes)."""
    ids = [int(j) for j in joint_ids]
    names = tuple(model.joint(j).name for j in ids)
    for j, name in zip(ids, names, strict=True):
        if int(model.jnt_type[j]) not in (_HINGE, _SLIDE):
            raise ValueError(f"mirror: joint {name!r} is not a hinge or slide joint")
    perm = partner_indices(names, "joint")  # joint k takes its value from its partner: out[k] = s * x[perm[k]]
    data = mujoco.MjData(model)
    mujoco.mj_kinematics(model, data)
    sign = np.empty(len(ids))
    for k, (j, p) in enumerate(zip(ids, perm, strict=True)):
        mirrored_axis = (AXIAL if int(model.jnt_type[j]) == _HINGE else REFLECT) * data.xaxis[j]
        s = float(np.dot(data.xaxis[ids[p]], mirrored_axis))
        if abs(abs(s) - 1.0) > AXIS_TOLERANCE:
            raise ValueError(f"mirror: the axes of {names[k]!r} {np.round(data.xaxis[j], 4).tolist()} and "
                             f"{names[p]!r} {np.round(data.xaxis[ids[p]], 4).tolist()} are not mirror images "
                             f"(s = {s:.4f})")
        sign[k] = np.sign(s)
    return JointMirror(names, perm, sign)


def partner_indices(names: Sequence[str], what: str) -> np.ndarray:
    """Index of each name's partner among ``names``; ValueError naming ``what`` and the name without one."""
    index = {n: k for k, n in enumerate(names)}
    for n in names:
        if partner_name(n) not in index:
            raise ValueError(f"mirror: {what} {n!r} has no partner {partner_name(n)!r} among {list(names)}")
    return np.array([index[partner_name(n)] for n in names], np.int64)


PIECE_SIGNS = {"vector": REFLECT, "axial": AXIAL, "rot6": ROT6, "planar": REFLECT[:2], "yaw": AXIAL[2:]}
"""Observation pieces of a fixed width and how their entries map (:func:`piece_mirror`): ``planar`` is the
x, y of a polar vector (a velocity command), ``yaw`` the z of an axial one (a yaw-rate command)."""


def piece_mirror(kind: str, joints: JointMirror, actions: JointMirror, bodies: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray]:
    """The signed permutation ``(perm, sign)`` of one observation piece, local to it.

    ``kind``: ``joints`` / ``actions`` (one value per joint or actuator, mapped by ``joints`` / ``actions``),
    ``vector`` / ``axial`` / ``rot6`` (one 3-D polar vector, axial vector or two rotation-matrix columns),
    ``bodies_vector`` / ``bodies_rot6`` (one of those per body, bodies in the order whose partners are
    ``bodies``), ``planar`` / ``yaw`` (see :data:`PIECE_SIGNS`), ``sides`` (a left and a right value, swapped:
    the gait phase of each leg).
    """
    if kind == "sides":
        return np.array([1, 0]), np.ones(2)
    if kind in ("joints", "actions"):
        m = joints if kind == "joints" else actions
        return m.perm, m.sign
    signs = PIECE_SIGNS.get(kind.removeprefix("bodies_"))
    if signs is None:
        raise ValueError(f"mirror: unknown observation piece kind {kind!r}")
    w = len(signs)
    if not kind.startswith("bodies_"):
        return np.arange(w), signs
    return (w * bodies[:, None] + np.arange(w)).reshape(-1), np.tile(signs, len(bodies))

"""Quaternion and rigid-transform helpers (MuJoCo convention: w, x, y, z).

Two flavours: NumPy functions over ``(..., 4)`` / ``(..., 3)`` arrays for set-up code and tests, and Numba scalar
helpers on tuples (``qmul``, ``qrot``, ``qangle_sq``) that the per-env term functions of a task inline.
"""

from __future__ import annotations

import numpy as np
from numba import njit


def quat_normalize(q: np.ndarray) -> np.ndarray:
    """Unit quaternions (zero quaternions become identity)."""
    n = np.linalg.norm(q, axis=-1, keepdims=True)
    out = np.where(n > 0, q / np.where(n > 0, n, 1.0), 0.0)
    out[..., 0] = np.where(n[..., 0] > 0, out[..., 0], 1.0)
    return out


def quat_conj(q: np.ndarray) -> np.ndarray:
    """Conjugate (inverse of a unit quaternion)."""
    out = q.copy()
    out[..., 1:] *= -1.0
    return out


def quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product ``a * b``."""
    aw, ax, ay, az = np.moveaxis(a, -1, 0)
    bw, bx, by, bz = np.moveaxis(b, -1, 0)
    return np.stack([aw * bw - ax * bx - ay * by - az * bz,
                     aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw], axis=-1)


def quat_rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Rotate vectors ``v`` by unit quaternions ``q``."""
    w, u = q[..., :1], q[..., 1:]
    t = 2.0 * np.cross(u, v)
    return v + w * t + np.cross(u, t)


def quat_rotate_inv(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Rotate vectors ``v`` by the inverse of unit quaternions ``q``."""
    return quat_rotate(quat_conj(q), v)


def quat_slerp(a: np.ndarray, b: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Spherical interpolation from ``a`` (t=0) to ``b`` (t=1), shortest path."""
    t = np.asarray(t, dtype=np.float64)[..., None]
    d = np.sum(a * b, axis=-1, keepdims=True)
    b = np.where(d < 0, -b, b)
    theta = np.arccos(np.clip(np.abs(d), -1.0, 1.0))
    s = np.sin(theta)
    small = s < 1e-8
    safe = np.where(small, 1.0, s)
    wa = np.where(small, 1.0 - t, np.sin((1.0 - t) * theta) / safe)
    wb = np.where(small, t, np.sin(t * theta) / safe)
    return quat_normalize(wa * a + wb * b)


# scalar helpers on tuples (no scratch arrays: a term may not allocate per env), with the same expressions in the same
# order as the array helpers above (bit-identical results)

@njit(cache=True, fastmath=False, inline="always")
def qmul(aw, ax, ay, az, bw, bx, by, bz):
    """Hamilton product as a 4-tuple."""
    return (aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw)


@njit(cache=True, fastmath=False, inline="always")
def qrot(w, ux, uy, uz, v0, v1, v2, inverse):
    """R(q) v, or R(q)^T v when ``inverse``, as a 3-tuple."""
    if inverse:
        ux, uy, uz = -ux, -uy, -uz
    tx = 2.0 * (uy * v2 - uz * v1)
    ty = 2.0 * (uz * v0 - ux * v2)
    tz = 2.0 * (ux * v1 - uy * v0)
    return (v0 + w * tx + (uy * tz - uz * ty),
            v1 + w * ty + (uz * tx - ux * tz),
            v2 + w * tz + (ux * ty - uy * tx))


@njit(cache=True, fastmath=False, inline="always")
def qangle_sq(aw, ax, ay, az, bw, bx, by, bz):
    """Squared rotation angle between unit quaternions."""
    d = abs(aw * bw + ax * bx + ay * by + az * bz)
    if d > 1.0:
        d = 1.0
    ang = 2.0 * np.arccos(d)
    return ang * ang


"""Quaternion and rigid-transform helpers (MuJoCo convention: w, x, y, z).

Two flavours: NumPy functions over ``(..., 4)`` / ``(..., 3)`` arrays for
set-up code and tests, and Numba scalar kernels (``*_nb``) that the hot-path
kernels in observations/rewards/terminations inline per env and body.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# ---------------------------------------------------------------------------
# NumPy, batched over leading axes


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
    return np.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        axis=-1,
    )


def quat_rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Rotate vectors ``v`` by unit quaternions ``q``."""
    w = q[..., :1]
    u = q[..., 1:]
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
    d = np.abs(d)
    theta = np.arccos(np.clip(d, -1.0, 1.0))
    s = np.sin(theta)
    small = s < 1e-8
    safe = np.where(small, 1.0, s)
    wa = np.where(small, 1.0 - t, np.sin((1.0 - t) * theta) / safe)
    wb = np.where(small, t, np.sin(t * theta) / safe)
    return quat_normalize(wa * a + wb * b)


def quat_error_angle(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Rotation angle (rad, in [0, pi]) between unit quaternions ``a`` and ``b``."""
    d = np.abs(np.sum(a * b, axis=-1))
    return 2.0 * np.arccos(np.clip(d, 0.0, 1.0))


def yaw_quat(q: np.ndarray) -> np.ndarray:
    """The heading-only part (rotation about world z) of ``q``."""
    w, x, y, z = np.moveaxis(q, -1, 0)
    yaw = np.arctan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))
    out = np.zeros(q.shape, dtype=np.float64)
    out[..., 0] = np.cos(0.5 * yaw)
    out[..., 3] = np.sin(0.5 * yaw)
    return out


def quat_to_rot6(q: np.ndarray) -> np.ndarray:
    """First two columns of the rotation matrix, flattened row-major ``(..., 6)``."""
    w, x, y, z = np.moveaxis(q, -1, 0)
    c0 = np.stack([1 - 2 * (y * y + z * z), 2 * (x * y + w * z), 2 * (x * z - w * y)], axis=-1)
    c1 = np.stack([2 * (x * y - w * z), 1 - 2 * (x * x + z * z), 2 * (y * z + w * x)], axis=-1)
    return np.stack([c0, c1], axis=-1).reshape(*q.shape[:-1], 6)


# ---------------------------------------------------------------------------
# Numba scalar kernels: q is a length-4 view, out a preallocated view


@njit(cache=True, fastmath=False, inline="always")
def quat_mul_nb(a, b, out):
    aw, ax, ay, az = a[0], a[1], a[2], a[3]
    bw, bx, by, bz = b[0], b[1], b[2], b[3]
    out[0] = aw * bw - ax * bx - ay * by - az * bz
    out[1] = aw * bx + ax * bw + ay * bz - az * by
    out[2] = aw * by - ax * bz + ay * bw + az * bx
    out[3] = aw * bz + ax * by - ay * bx + az * bw


@njit(cache=True, fastmath=False, inline="always")
def quat_rotate_nb(q, v, out, inverse):
    """out = R(q) v, or R(q)^T v when ``inverse``; ``out`` may not alias ``v``."""
    w = q[0]
    ux, uy, uz = q[1], q[2], q[3]
    if inverse:
        ux, uy, uz = -ux, -uy, -uz
    tx = 2.0 * (uy * v[2] - uz * v[1])
    ty = 2.0 * (uz * v[0] - ux * v[2])
    tz = 2.0 * (ux * v[1] - uy * v[0])
    out[0] = v[0] + w * tx + (uy * tz - uz * ty)
    out[1] = v[1] + w * ty + (uz * tx - ux * tz)
    out[2] = v[2] + w * tz + (ux * ty - uy * tx)


@njit(cache=True, fastmath=False, inline="always")
def quat_angle_sq_nb(a, b):
    """Squared rotation angle between unit quaternions ``a`` and ``b``."""
    d = abs(a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3])
    if d > 1.0:
        d = 1.0
    ang = 2.0 * np.arccos(d)
    return ang * ang


@njit(cache=True, fastmath=False, inline="always")
def yaw_of_nb(q):
    """Heading angle (rad) of ``q``."""
    w, x, y, z = q[0], q[1], q[2], q[3]
    return np.arctan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))

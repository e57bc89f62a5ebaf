"""Per-body contact forces a term reads (the pool's ``CONTACT_FORCE``) and the model MuJoCo computes them for."""

from __future__ import annotations

import mujoco
import numpy as np
from numba import njit

# sensors for which MuJoCo's step computes cfrc_ext (mj_rnePostConstraint)
_CFRC_EXT_SENSORS = frozenset(int(t) for t in (
    mujoco.mjtSensor.mjSENS_ACCELEROMETER, mujoco.mjtSensor.mjSENS_FORCE, mujoco.mjtSensor.mjSENS_TORQUE,
    mujoco.mjtSensor.mjSENS_FRAMELINACC, mujoco.mjtSensor.mjSENS_FRAMEANGACC))


def require_contact_forces(model: mujoco.MjModel, key: str) -> None:
    """Raise ValueError naming ``key`` unless MuJoCo's step computes ``model``'s net body contact forces (cfrc_ext):
    only with one of the sensors above (the G1 MJCF has an accelerometer)."""
    if not any(int(t) in _CFRC_EXT_SENSORS for t in model.sensor_type):
        raise ValueError(f"{key} reads contact forces (cfrc_ext), which MuJoCo computes only for a model with an "
                         "accelerometer, force, torque or frame acceleration sensor; add one to the MJCF")


@njit(cache=True, fastmath=False, inline="always")
def force_norm(force, e, b):
    """Length of the net contact force on body ``b`` in env ``e`` (``force``: the pool's ``CONTACT_FORCE``)."""
    return np.sqrt(force[e, b, 0] * force[e, b, 0] + force[e, b, 1] * force[e, b, 1]
                   + force[e, b, 2] * force[e, b, 2])

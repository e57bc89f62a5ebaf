"""Per-body contact forces a term reads: MuJoCo's ``cfrc_ext`` and the model it needs."""

from __future__ import annotations

import mujoco

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

"""Contacts in MuJoCo pools: forward passes without collision and constraints, for pools whose task reads no
contacts, and when MuJoCo computes the net body forces a pool's ``CONTACT_FORCE`` views."""

from __future__ import annotations

import mujoco
import numpy as np
from mujoco import batch as mjbatch

# sensors for which MuJoCo's step computes cfrc_ext (mj_rnePostConstraint)
_CFRC_EXT_SENSORS = frozenset(int(t) for t in (
    mujoco.mjtSensor.mjSENS_ACCELEROMETER, mujoco.mjtSensor.mjSENS_FORCE, mujoco.mjtSensor.mjSENS_TORQUE,
    mujoco.mjtSensor.mjSENS_FRAMELINACC, mujoco.mjtSensor.mjSENS_FRAMEANGACC))


def computes_body_forces(model: mujoco.MjModel) -> bool:
    """Whether MuJoCo's step computes ``model``'s net body forces (cfrc_ext): only with one of the sensors above
    (the G1 MJCF has an accelerometer)."""
    return any(int(t) in _CFRC_EXT_SENSORS for t in model.sensor_type)


# disable bits of the stage a contacts=False pool computes after a step or reset: no collision, no constraints
NO_CONTACT = int(mujoco.mjtDisableBit.mjDSBL_CONSTRAINT) | int(mujoco.mjtDisableBit.mjDSBL_CONTACT)


def forward_without_contacts(batch: mjbatch.Batch, flags: np.ndarray, ids: np.ndarray | None, stage: int) -> None:
    """``batch.forward(ids, stage)`` with :data:`NO_CONTACT` raised in ``flags[ids]`` (all when None; ``flags``: the
    batch's expanded ``opt.disableflags``) for the call; each env's own bits come back, errors included.

    NumPy, not a prange region: a few microseconds for a restart's rows, less than one region's fork/join (which on a
    VM includes waking a parked vCPU).
    """
    sel = slice(None) if ids is None else ids
    kept = flags[sel].copy()
    flags[sel] = kept | NO_CONTACT
    try:
        batch.forward(ids, stage)
    finally:
        flags[sel] = kept

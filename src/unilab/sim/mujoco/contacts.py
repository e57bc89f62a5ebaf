"""Forward passes without collision and constraints, for pools whose task reads no contacts."""

from __future__ import annotations

import mujoco
import numpy as np
from mujoco import batch as mjbatch

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

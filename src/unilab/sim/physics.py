"""The physics seam: what a task may use of a batched physics pool, and the one place a pool is built.

A task builds its model, then asks :func:`make_pool` for ``num_envs`` simulations of it; ``sim.backend`` (``--sim``)
picks the implementation. Tasks see only :class:`PhysicsPool`: the live ``(num_envs, ...)`` state arrays, the step,
reset and forward calls, per-env model fields for domain randomization, and the derived ``outputs`` they ask for:
:data:`BODY_STATE` and, from a pool that computes contacts, :data:`CONTACT_FORCE`.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import import_module
from typing import Any, Protocol

import numpy as np

BODY_STATE = ("body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w")
"""Outputs ``(num_envs, nbody, 3 | 4)``: each body's world-frame position, quaternion (w, x, y, z), and the
linear and angular velocity of its origin, after every step, reset and forward."""
CONTACT_FORCE = "body_contact_force_w"
"""Output ``(num_envs, nbody, 3)``: the net external force on each body, world frame, of the step's last substep
(contacts plus any applied force; a pool with ``contacts=False``, or one whose model does not give it, refuses it
with :class:`OutputUnavailable`)."""

SUBPHASES = ("physics", "check_health")
"""What a pool's ``step`` times in its ``timer``: the physics steps, then the health check (which computes the
derived outputs)."""


class OutputUnavailable(ValueError):
    """A pool cannot give an output it was asked for (the message says why)."""


# backend name -> "module:class"; imported on use, so a backend's library loads only when it is chosen
BACKENDS: dict[str, str] = {"mujoco": "unilab.sim.mujoco.pool:BatchEnvPool"}


class PhysicsPool(Protocol):
    """``num_envs`` simulations of one model stepped together (see ``unilab.sim.mujoco.pool.BatchEnvPool``)."""

    model: Any
    num_envs: int
    nthread: int
    """Threads the pool steps on (the task's host kernels use as many)."""
    cpu_ids: list[int] | None
    """The CPUs those threads are pinned to; None: not pinned."""
    pool_tids: list[int]
    """Native ids of the pool's own threads (the caller's is not among them)."""
    persistent: bool
    """Whether each env keeps its own solver data between calls."""
    qpos: np.ndarray
    qvel: np.ndarray
    ctrl: np.ndarray
    bad_envs: np.ndarray
    """(num_envs,) bool: envs whose last step diverged (non-finite, too fast, or a solver warning)."""
    bad_reasons: dict[int, str]
    """Why some of the bad envs went bad (for people: a few), until their reset."""
    timer: Any

    @property
    def contacts(self) -> bool:
        """Whether steps compute contacts (a task that reads none asks for a pool without them)."""

    def step(self, ctrl: np.ndarray | None, substeps: int = 1) -> np.ndarray:
        """Advance every env ``substeps`` physics steps with ``ctrl`` (None: the live ``ctrl``); the bad mask."""

    def reset(self, ids: np.ndarray, qpos: np.ndarray, qvel: np.ndarray) -> None:
        """Put envs ``ids`` (distinct, increasing) at ``(qpos, qvel)`` with fresh solver state and zero controls,
        clear their bad flags; derived fields follow. ValueError for bad ids, shapes or non-finite states."""

    def forward(self, ids: np.ndarray | None = None) -> None:
        """Recompute the derived fields of envs ``ids`` (None: all) from their state."""

    def bind(self, name: str) -> np.ndarray:
        """Live ``(num_envs, ...)`` array of a state or derived field."""

    def expand(self, name: str) -> np.ndarray:
        """Live ``(num_envs, ...)`` per-env values of a model field (domain randomization writes them)."""

    def set_const(self) -> None:
        """Recompute the model constants derived from fields written through :meth:`expand`."""

    def close(self) -> None: ...

    @staticmethod
    def silence_warnings() -> None:
        """Stop the backend's library printing a line per diverged env, process-wide (pools still count them)."""


def pool_class(backend: str = "mujoco") -> type:
    """The pool class of ``backend`` (``sim.backend``), imported on use."""
    if backend not in BACKENDS:
        raise ValueError(f"sim.backend={backend}: unknown physics backend; unilab has: {', '.join(BACKENDS)}")
    module, _, cls = BACKENDS[backend].partition(":")
    return getattr(import_module(module), cls)


def make_pool(model: Any, num_envs: int, *, backend: str = "mujoco", outputs: Sequence[str] | None = None,
              **options: Any) -> PhysicsPool:
    """``num_envs`` simulations of ``model`` on ``backend`` (``sim.backend``), with ``options`` (``sim.*``:
    nthread, cpu_ids, persistent, max_qvel; the task's substeps and contacts) and the derived ``outputs``."""
    if outputs is not None:
        options["outputs"] = tuple(outputs)
    return pool_class(backend)(model, num_envs, **options)

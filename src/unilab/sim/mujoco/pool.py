"""BatchEnvPool: ``num_envs`` simulations of one MjModel on ``mujoco.batch.Batch``.

The pool owns thread sizing (``unilab.sim.cpu``), optional pinning and the per-env health check; a task reads the
bound arrays and writes controls and reset states. Its per-env host work (controls copy, origin velocities, health
check, reset rows) runs in parallel Numba kernels over claimed chunks of envs (:mod:`unilab.sim.work_claims`; per-env
writes: the same results at any thread count) on workers that follow the pool's threads and CPUs
(:mod:`unilab.sim.numba_threads`): a serial pass over every env would cap the step's speed-up on many cores
(CONTRIBUTING.md, "Add a host kernel").
"""

from __future__ import annotations

from collections.abc import Sequence

import mujoco
import numpy as np
from mujoco import batch as mjbatch
from numba import njit, prange

from unilab.sim import cpu, numba_threads
from unilab.sim.mujoco.autotune import autotune
from unilab.sim.mujoco.body_state import origin_velocities, origin_velocity_env
from unilab.sim.mujoco.contacts import computes_body_forces, forward_without_contacts
from unilab.sim.physics import BODY_STATE, CONTACT_FORCE, OutputUnavailable
from unilab.sim.work_claims import LEAST_BYTES, LEAST_ROWS, chunk_size, claimed, copy_rows_at, new_counter, num_chunks
from unilab.telemetry.phase_timer import PhaseTimer

# Warnings that mean the state diverged (MuJoCo may even have reset the sim on BADQACC): the task must restart the env
_DIVERGENCE_WARNINGS = (mujoco.mjtWarning.mjWARN_BADQPOS, mujoco.mjtWarning.mjWARN_BADQVEL,
                        mujoco.mjtWarning.mjWARN_BADQACC, mujoco.mjtWarning.mjWARN_BADCTRL)

_DEFAULT_OUTPUTS = ("xpos", "xquat", "cvel", "sensordata")

# |qvel| (rad/s or m/s) past which a state counts as exploded: a humanoid's joints stay below ~40 even under random
# actions, while an unstable integration (e.g. too large a timestep) reaches 1e3-1e8 long before MuJoCo's own 1e10 check
DEFAULT_MAX_QVEL = 100.0

# the backend-neutral outputs (every body's world-frame state at its origin); the velocities are computed here
_BODY_FIELDS = dict(zip(BODY_STATE[:2], ("xpos", "xquat")))
_BODY_VELOCITIES = BODY_STATE[2:]

# bits of the per-env health flags, in the order the reasons are recorded
NONFINITE, FAST, WARNED = 1, 2, 4
_STAGE_NONE = int(mujoco.mjtStage.mjSTAGE_NONE)
# MjData fields a contacts=False pool does not compute after a step (acceleration stage, contacts, constraints)
_NOT_THIN = frozenset({
    "qacc", "qacc_smooth", "qfrc_actuator", "actuator_force", "qfrc_smooth", "qfrc_constraint", "qfrc_inverse",
    "cacc", "cfrc_int", "cfrc_ext", "contact", "ncon", "nefc", "efc_force", "efc_J", "efc_pos", "efc_vel",
    CONTACT_FORCE,
})


def bytes_per_env(model: mujoco.MjModel) -> int:
    """The memory one env of a pool takes at least: its state row and the per-body fields bound and computed for it
    (xpos 3, xquat 4, cvel 6, subtree_com 3, cfrc_ext 6, origin velocities 6), sensordata and the controls, doubles.
    MuJoCo's batch holds the state and the bound fields per simulation (the G1 with four bound fields: 7987 bytes per
    env measured, their sum 7968)."""
    nstate = mujoco.mj_stateSize(model, mujoco.mjtState.mjSTATE_INTEGRATION)
    return 8 * (nstate + 28 * model.nbody + model.nsensordata + model.nu)


def check_memory(model: mujoco.MjModel, num_envs: int) -> None:
    """MemoryError naming the GiB when ``num_envs`` envs cannot fit in the available memory: MuJoCo's allocation
    failure names no size ("std::bad_alloc", "Caught an unknown exception!"), and where the kernel overcommits, the
    out-of-memory killer ends the process with no message at all."""
    import psutil  # noqa: PLC0415 - lazy: only the pool's construction needs it

    need, free = num_envs * bytes_per_env(model), psutil.virtual_memory().available
    if need > free:
        raise MemoryError(f"{num_envs} simulations need at least {need / 2**30:.1f} GiB ({bytes_per_env(model)} bytes "
                          f"each) but only {free / 2**30:.1f} GiB is available")


class BatchEnvPool:
    """Batched MuJoCo backend: ``(num_envs, ...)`` arrays, one call per step.

    Args:
      model: the MjModel every env runs (edit it before building the pool).
      nthread: ``None``: the sizing rule ``min(num_envs, usable CPUs)``; an int >= 1: as given; ``"auto"``: measure
        candidates once per (model, num_envs, substeps, CPU set, CPU model, MuJoCo version) and cache the winner on
        disk (``unilab.sim.mujoco.autotune``).
      cpu_ids: pin pool thread ``i`` (the caller's is thread 0) to ``cpu_ids[i]``; sets ``nthread = len(cpu_ids)``.
        Linux only.
      persistent: keep one MjData per env (slower here; needed for sleep/IPC). Ignored when ``nthread="auto"``.
      substeps: the substeps per ``step`` the caller will use; only autotune reads it.
      outputs: derived fields bound up front and refreshed after every call: MjData field names, or the
        backend-neutral ``unilab.sim.physics.BODY_STATE`` (``body_pos_w``, ``body_quat_w``, ``body_lin_vel_w``,
        ``body_ang_vel_w``: ``(num_envs, nbody, 3 | 4)``, each body's world-frame state at its origin) and
        ``CONTACT_FORCE`` (``body_contact_force_w``: a view of ``cfrc_ext``'s force half).
      max_qvel: an env whose ``|qvel|`` exceeds this after a step is bad (exploded); ``None`` checks only finiteness
        and MuJoCo's warnings.
      contacts: whether the caller reads contact or constraint fields (``contact``, ``ncon``, ``efc_*``) of the state a
        step, reset or forward leaves. ``False`` computes that state's position and velocity stages without collision
        and constraints: kinematics, com, velocities and position/velocity sensors are bit-identical (tests check),
        contact fields are empty, and the physics is unchanged (each non-persistent step starts afresh from the
        integration state). For the G1 that stage costs about a third (collision and constraints are most of it): an
        auto-reset's forward ~2.5x cheaper, a 4-substep step several percent cheaper. Acceleration-stage outputs
        (``qacc``, ``actuator_force``, ``cfrc_ext``, accelerometer, touch) would hold scratch values, the thin stage
        being its own call after the substeps (with ``True``: the env's, from before its last substep), so they are
        refused. A persistent batch continues from that stage, so it always computes it in full.
    """

    def __init__(self, model: mujoco.MjModel, num_envs: int, *, nthread: int | str | None = None,
                 cpu_ids: Sequence[int] | str | None = None, persistent: bool = False, substeps: int = 1,
                 outputs: Sequence[str] = _DEFAULT_OUTPUTS, max_qvel: float | None = DEFAULT_MAX_QVEL,
                 contacts: bool = True):
        if isinstance(num_envs, bool) or not isinstance(num_envs, (int, np.integer)) or num_envs < 1:
            raise ValueError(f"num_envs must be an int >= 1, got {num_envs!r}")
        num_envs = int(num_envs)
        if max_qvel is not None and not float(max_qvel) > 0:
            raise ValueError(f"max_qvel must be > 0 or None, got {max_qvel!r}")
        self.max_qvel = None if max_qvel is None else float(max_qvel)
        if CONTACT_FORCE in outputs and not computes_body_forces(model):
            raise OutputUnavailable("MuJoCo computes contact forces (cfrc_ext) only for a model with an "
                                    "accelerometer, force, torque or frame acceleration sensor; add one to the MJCF")
        self.cpu_ids: list[int] | None = cpu.parse_cpu_ids(cpu_ids)  # validated by resolve_nthread
        self._caller_affinity: set[int] | None = None
        self.autotune_result = None
        if nthread == "auto":
            if self.cpu_ids is not None:
                raise ValueError("nthread='auto' and cpu_ids are exclusive: pinning fixes one thread per cpu id")
            self.autotune_result = autotune(model, num_envs, substeps, contacts=contacts)
            nthread, persistent = self.autotune_result.nthread, self.autotune_result.persistent
        n = cpu.resolve_nthread(num_envs, nthread, self.cpu_ids)
        self._contacts = bool(contacts) or bool(persistent)
        stale = [] if self._contacts else [name for name in outputs if name in _NOT_THIN]
        if stale:
            raise OutputUnavailable(f"outputs {stale} are acceleration-stage or contact fields, which a pool with "
                                    "contacts=False does not compute after a step; use contacts=True")
        check_memory(model, num_envs)

        self.model = model
        self.num_envs = num_envs
        numba_threads.launch()  # before the pool's threads start, so they are told apart from Numba's
        before = cpu.thread_ids()
        self._batch = mjbatch.Batch(model, num_envs, n, persistent)
        self.pool_tids = sorted(cpu.thread_ids() - before)
        # a fresh row (the model's defaults): what Batch.reset(stage=NONE) writes into a row's state
        self._fresh_state = np.array(self._batch.state[0], copy=True)
        self.nthread = self._batch.nthread
        self.persistent = bool(persistent)
        if self.cpu_ids is not None:
            if len(self.pool_tids) != self.nthread - 1:
                raise RuntimeError(f"expected {self.nthread - 1} new pool threads, saw {len(self.pool_tids)} (another "
                                   "library started threads while the pool was built); cannot pin reliably")
            cpu.pin_threads(self.pool_tids, self.cpu_ids[1:])
            self._caller_affinity = cpu.pin_caller(self.cpu_ids[0])
        # the pool's own kernels (and the task's) run on as many Numba workers, on the same CPUs
        self.host_thread_ids = numba_threads.configure(self.nthread, self.cpu_ids)

        b = self._batch
        self.qpos = b.bind("qpos")
        self.qvel = b.bind("qvel")
        self.ctrl = b.bind("ctrl")
        for name in outputs:
            if name == CONTACT_FORCE:  # cfrc_ext's force half (the first three are a torque about the subtree com)
                self.body_contact_force_w = b.bind("cfrc_ext")[:, :, 3:]
            elif name not in _BODY_VELOCITIES:
                setattr(self, name, b.bind(_BODY_FIELDS.get(name, name)))
        # body velocities at the body origin: MuJoCo's cvel shifted (unilab.sim.mujoco.body_state) after every
        # step, reset and forward (zero-size arrays when no body velocity is asked for: the kernels skip the shift)
        nvel = model.nbody if any(name in _BODY_VELOCITIES for name in outputs) else 0
        self.body_lin_vel_w = np.zeros((num_envs, nvel, 3))
        self.body_ang_vel_w = np.zeros((num_envs, nvel, 3))
        self._velocities = (b.bind("xpos"), b.bind("cvel"), b.bind("subtree_com"),
                            np.asarray(model.body_rootid, dtype=np.int64), self.body_lin_vel_w, self.body_ang_vel_w)
        self._all_ids = np.arange(num_envs, dtype=np.int64)
        # mjWarningStat is (lastinfo, number): column 1 counts
        self._warning_count = b.warning[:, :, 1]
        self._warn_cols = np.array([int(w) for w in _DIVERGENCE_WARNINGS])
        self._warn_seen = self._warning_count[:, self._warn_cols].copy()
        self.bad_envs = np.zeros(num_envs, dtype=bool)
        self.bad_reasons: dict[int, str] = {}
        self._health = np.zeros(num_envs, dtype=np.uint8)  # per-env NONFINITE | FAST | WARNED of the last check
        self.timer = PhaseTimer(enabled=False)
        """Times ``step``'s ``physics.SUBPHASES`` when enabled; a task may hand in its own timer (its phases
        nest them)."""
        # derived fields must describe the post-step state the task observes
        self._stage = int(mujoco.mjtStage.mjSTAGE_VEL)
        if not self._contacts:
            # per-env disable flags (a live (num_envs,) view), raised around the stage computation only
            self._flags = b.expand("opt.disableflags")
        b.forward()
        self._refresh_velocities(self._all_ids)

    @staticmethod
    def silence_warnings() -> None:
        """Stop MuJoCo printing (and logging to MUJOCO_LOG.TXT) one line per diverged env, process-wide.

        The pool still sees every divergence: MuJoCo counts warnings in each env's ``warning`` stats regardless.
        """
        mujoco.set_mju_user_warning(lambda _: None)

    @property
    def contacts(self) -> bool:
        """Whether steps, resets and forwards compute contacts and constraints (see the class doc)."""
        return self._contacts

    @property
    def nq(self) -> int:
        return self.model.nq

    @property
    def nv(self) -> int:
        return self.model.nv

    def bind(self, name: str) -> np.ndarray:
        """Live ``(num_envs, ...)`` array of any MjData field (outputs read-only)."""
        return self._batch.bind(name)

    def expand(self, name: str) -> np.ndarray:
        """Live ``(num_envs, ...)`` per-env values of MjModel field ``name`` (``opt.<name>`` for options)."""
        return self._batch.expand(name)

    def set_const(self) -> None:
        """``mj_setConst`` per env: call after writing fields it reads (e.g. ``body_ipos``) through expand."""
        self._batch.set_const()

    def step(self, ctrl: np.ndarray | None, substeps: int = 1) -> np.ndarray:
        """Apply ``ctrl`` ``(num_envs, nu)`` (None keeps the current one) and advance ``substeps``; returns the
        ``(num_envs,)`` bool mask of envs that raised a MuJoCo error, hold non-finite state or a ``|qvel|`` over
        ``max_qvel``, or raised a divergence warning since their last reset (the reset state's own included)."""
        if substeps < 1:
            raise ValueError(f"substeps must be >= 1, got {substeps}")
        if ctrl is not None:
            if ctrl.shape != self.ctrl.shape:
                raise ValueError(f"ctrl has shape {ctrl.shape}, expected {self.ctrl.shape}")
            copy_rows_at(self._all_ids, ctrl, self.ctrl)
        with self.timer.phase("physics"):
            try:
                # contacts=False: the substeps as always, then the post-step stage without collision
                self._batch.step(None, substeps, self._stage if self._contacts else _STAGE_NONE)
            except mjbatch.SimulationError as err:
                self._mark(np.asarray(err.ids), "mujoco error")
            if not self._contacts:
                self._forward_stage(None)
        with self.timer.phase("check_health"):  # and the bodies' origin velocities, in the same region
            self._check_health()
        return self.bad_envs

    def forward(self, ids: np.ndarray | None = None) -> None:
        """Recompute position- and velocity-dependent fields for ``ids`` (all when None): the stage ``step`` leaves
        (the next step computes accelerations anyway), without collision and constraints unless ``contacts``."""
        if ids is not None:
            ids = np.asarray(ids)
            ids = np.flatnonzero(ids) if ids.dtype == bool else ids.astype(np.int64, copy=False)
        self._forward_stage(ids)
        self._refresh_velocities(self._all_ids if ids is None else ids)

    def _forward_stage(self, ids: np.ndarray | None) -> None:
        try:
            if self._contacts:
                self._batch.forward(ids, self._stage)
            else:
                forward_without_contacts(self._batch, self._flags, ids, self._stage)
        except mjbatch.SimulationError as err:
            self._mark(np.asarray(err.ids), "mujoco error")

    def _refresh_velocities(self, ids: np.ndarray) -> None:
        if self.body_lin_vel_w.shape[1]:
            origin_velocities(ids, *self._velocities)

    def _mark(self, ids: np.ndarray, reason: str) -> None:
        new = ids[~self.bad_envs[ids]]
        self.bad_envs[ids] = True
        for i in new[: max(0, 64 - len(self.bad_reasons))]:  # for humans: keep a few
            msg = self._batch.error(int(i)) if reason == "mujoco error" else ""
            self.bad_reasons[int(i)] = f"{reason}: {msg}" if msg else reason

    def _check_health(self) -> None:
        limit = np.inf if self.max_qvel is None else self.max_qvel
        flagged = _health_kernel(self.qpos, self.qvel, limit, self._warning_count, self._warn_cols,
                                 self._warn_seen, self._health, self._velocities)
        if flagged:  # rare: the reasons (a few Python calls) only for the flagged envs
            for bit, reason in ((NONFINITE, "non-finite state"),
                                (FAST, f"|qvel| over max_qvel={limit:g}"),
                                (WARNED, "divergence warning")):
                ids = np.flatnonzero(self._health & bit)
                if ids.size:
                    self._mark(ids, reason)

    def reset(self, ids: np.ndarray, qpos: np.ndarray, qvel: np.ndarray) -> None:
        """Give envs ``ids`` (distinct, increasing) the state ``(qpos, qvel)``, zero their controls, activations and
        solver warm starts, clear their bad flag and recompute only them."""
        ids = np.asarray(ids, dtype=np.int64)
        if ids.size == 0:
            return
        if ids.ndim != 1 or ids.min() < 0 or ids.max() >= self.num_envs:
            raise ValueError(f"reset ids must be a 1-D array of env ids in [0, {self.num_envs})")
        n = ids.size
        qpos = np.asarray(qpos, dtype=np.float64)
        qvel = np.asarray(qvel, dtype=np.float64)
        if qpos.shape != (n, self.nq) or qvel.shape != (n, self.nv):
            raise ValueError(f"reset of {n} envs needs qpos {(n, self.nq)} and qvel {(n, self.nv)}, "
                             f"got {qpos.shape} and {qvel.shape}")
        if not (np.isfinite(qpos).all() and np.isfinite(qvel).all()):
            raise ValueError("reset states must be finite")
        # parallel row writes (one writer per env) and Batch.forward need sorted unique ids: checked before any row
        # changes, as strictly increasing (3 us at 585 ids; np.unique took ~90 us)
        if n > 1 and not (ids[1:] > ids[:-1]).all():
            k = int(np.flatnonzero(ids[1:] <= ids[:-1])[0])
            raise ValueError(f"reset ids must be distinct and increasing (as np.flatnonzero gives them), "
                             f"got {ids[k]} before {ids[k + 1]}")
        # a fresh row (defaults, warnings cleared), then our state, then forward. Persistent: Batch.reset resets each
        # env's MjData. Non-persistent: row copies giving what Batch.reset(stage=NONE) leaves (tests/test_pool.py
        # checks), as its mj_resetData per env (~30 us each for the G1) was half an auto-reset's time. Warnings count
        # from the fresh row: one raised by the reset state's own forward marks the env at the next check.
        if self.persistent:
            self._batch.reset(ids, stage=_STAGE_NONE)
        _reset_rows(ids, not self.persistent, self._fresh_state, self._batch.state, self._batch.warning, qpos,
                    qvel, self.qpos, self.qvel, self.bad_envs, self._warning_count, self._warn_cols, self._warn_seen)
        for i in [i for i in self.bad_reasons if not self.bad_envs[i]]:
            del self.bad_reasons[i]
        self.forward(ids)

    def close(self) -> None:
        """Release the MuJoCo thread pool and give the caller's thread its old CPU set."""
        if self._caller_affinity is not None:
            cpu.unpin_caller(self._caller_affinity)
            self._caller_affinity = None
            numba_threads.release()
        self._batch = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (f"BatchEnvPool(num_envs={self.num_envs}, nthread={self.nthread}, persistent={self.persistent}, "
                f"cpu_ids={self.cpu_ids})")


@njit(cache=True, parallel=True, fastmath=False)
def _health_kernel(qpos, qvel, max_qvel, warning_count, warn_cols, warn_seen, flags, velocities):
    """Each env's health bits into ``flags`` and its bodies' origin velocities (``velocities``: the arguments of
    :func:`origin_velocity_env` after ``e``); returns how many envs have any bit.

    NONFINITE: a non-finite qpos or qvel entry; FAST: no NaN in qvel and ``max |qvel| > max_qvel`` (an inf counts, as in
    ``np.abs(qvel).max() > max_qvel``, where a NaN makes the max NaN); WARNED: a divergence warning counter rose since
    ``warn_seen``, which then takes the new counts.
    """
    n = qpos.shape[0]
    xpos, cvel, subtree_com, rootid, lin, ang = velocities
    # flagged envs per chunk, zeroed and summed with loops (not parallel array ops); a scalar ``flagged += 1``
    # inside the claim loop is not seen as a reduction by Numba 0.68: it returned 0
    counts = np.empty(num_chunks(n, LEAST_BYTES), np.int64)
    for c in range(counts.shape[0]):
        counts[c] = 0
    counter = new_counter()
    for _ in prange(num_chunks(n, LEAST_BYTES)):
        for e in claimed(counter, n, LEAST_BYTES):
            origin_velocity_env(e, xpos, cvel, subtree_com, rootid, lin, ang)
            f = 0
            for i in range(qpos.shape[1]):
                if not np.isfinite(qpos[e, i]):
                    f = NONFINITE
            vmax = 0.0
            nan = False
            for i in range(qvel.shape[1]):
                v = abs(qvel[e, i])
                if np.isnan(v):
                    nan = True
                elif v > vmax:
                    vmax = v
            if nan or np.isinf(vmax):
                f |= NONFINITE
            if not nan and vmax > max_qvel:
                f |= FAST
            rose = False
            for k in range(warn_cols.shape[0]):
                if warning_count[e, warn_cols[k]] > warn_seen[e, k]:
                    rose = True
            if rose:
                f |= WARNED
                for k in range(warn_cols.shape[0]):
                    warn_seen[e, k] = warning_count[e, warn_cols[k]]
            flags[e] = f
            if f:
                counts[e // chunk_size(n, LEAST_BYTES)] += 1  # e's chunk, which only this thread runs
    flagged = 0
    for c in range(counts.shape[0]):
        flagged += counts[c]
    return flagged


@njit(cache=True, parallel=True, fastmath=False)
def _reset_rows(ids, fresh_row, fresh, state, warning, qpos, qvel, qpos_out, qvel_out, bad, warning_count,
                warn_cols, warn_seen):
    """Rows ``ids``: state := ``fresh`` and warnings := 0 (when ``fresh_row``), then ``qpos``/``qvel`` (row ``k`` for
    env ``ids[k]``; ``qpos_out``/``qvel_out`` are views of ``state``), bad flag cleared, ``warn_seen`` := the rows'
    divergence-warning counts. Chunks of LEAST_ROWS: a restart's envs are a few scattered rows (their bad flags share
    few cache lines), and small chunks let a worker that wakes late take a share."""
    n = ids.shape[0]
    counter = new_counter()
    for _ in prange(num_chunks(n, LEAST_ROWS)):
        for k in claimed(counter, n, LEAST_ROWS):
            e = ids[k]
            if fresh_row:
                for i in range(fresh.shape[0]):
                    state[e, i] = fresh[i]
                for w in range(warning.shape[1]):
                    for c in range(warning.shape[2]):
                        warning[e, w, c] = 0
            for i in range(qpos.shape[1]):
                qpos_out[e, i] = qpos[k, i]
            for i in range(qvel.shape[1]):
                qvel_out[e, i] = qvel[k, i]
            bad[e] = False
            for c in range(warn_cols.shape[0]):
                warn_seen[e, c] = warning_count[e, warn_cols[c]]

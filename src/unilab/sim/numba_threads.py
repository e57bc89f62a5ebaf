"""Numba's worker threads for the host phases: layer, count and CPUs follow the physics pool.

Threading layer: ``omp`` (GNU OpenMP) with ``OMP_WAIT_POLICY=passive``, chosen by measurement (unless the user set
``NUMBA_THREADING_LAYER``); ``workqueue`` where no OpenMP runtime loads. Host phases run between ``pool.step`` calls on
MuJoCo's CPUs, so after a region Numba's workers must sleep at once, not spin and steal cycles from the physics:
libgomp's default policy spins a while (GOMP_SPINCOUNT), passive blocks at once (0.000 cores busy while the caller
sleeps; tests check it). Of the non-spinning choices omp is much the faster, as its calling thread does a share of each
region while workqueue's waits for all workers: the update_state drivers in a row took 6.3-6.5 ms at 1.7-1.8 cores
(omp, passive) vs 9.0-9.8 ms at 1.2 cores (workqueue), 4096 envs on 2 cores. ``tbb`` is not a dependency, and its arena
threads spin-wait briefly. omp splits a ``prange`` statically, so a late worker holds up the region: the per-env kernels
claim chunks from an atomic counter instead (:mod:`unilab.sim.work_claims`).
The passive policy is set only while Numba loads the system libgomp (read once, at load), then the old value is put
back, so other OpenMP runtimes (e.g. PyTorch's bundled copy) keep theirs and a user's ``OMP_WAIT_POLICY`` is respected.
It holds only where Numba loads libgomp first: PyTorch's import loads its own ``libgomp.so.1``, which Numba then shares
with the default (spinning) policy. The training collector never imports torch; in-process users that import torch
first (play, eval) spin a few ms after each host phase (measured: ~0.03 cores of one worker while idle). libgomp is not
fork-safe: processes that use the env are spawned, never forked, after a parallel call (Numba refuses otherwise).

The count equals the pool's thread count (``numba.set_num_threads``). Workers start on the first parallel region and
inherit that thread's CPU set, and the pool pins the caller to ``cpu_ids[0]``: :func:`launch` therefore starts them
itself (one small region at the full team size, in which each worker reports its kernel thread id) and
:func:`configure`, with ``cpu_ids``, gives each the pool's CPU set (Linux). OpenMP keeps one team per launching thread:
the thread that builds the env must be the one that steps it (as everywhere in unilab).
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Sequence

import numba
import numpy as np

from unilab.sim import cpu

LAYER = "omp"
FALLBACK_LAYER = "workqueue"
_USER_LAYER = "NUMBA_THREADING_LAYER" in os.environ
if not _USER_LAYER:
    numba.config.THREADING_LAYER = LAYER

_lock = threading.Lock()
_worker_tids: list[int] | None = None  # Numba's workers, once this module started them


def launch() -> list[int]:
    """Start Numba's worker threads (once per process); return their thread ids (empty if unknown)."""
    global _worker_tids
    with _lock:
        if _worker_tids is None:
            from numba.np.ufunc import parallel  # noqa: PLC0415

            if not getattr(parallel, "_is_initialized", False):
                _start_layer(parallel)
            _worker_tids = _ask_workers_their_ids()
        return list(_worker_tids)


def _start_layer(parallel) -> None:
    """Load the threading layer (OpenMP: passive waits) and create its workers at the full team size."""
    global LAYER
    saved = os.environ.get("OMP_WAIT_POLICY")
    if saved is None:
        os.environ["OMP_WAIT_POLICY"] = "passive"  # read by libgomp once, when it loads just below
    try:
        try:
            parallel._launch_threads()  # noqa: SLF001 - Numba has no public call that starts its workers
        except ValueError:  # no OpenMP runtime loads here
            if _USER_LAYER:
                raise
            numba.config.THREADING_LAYER = LAYER = FALLBACK_LAYER
            parallel._launch_threads()  # noqa: SLF001 - as above
    finally:
        if saved is None:
            os.environ.pop("OMP_WAIT_POLICY", None)


def _has_gettid() -> bool:
    """libc has ``gettid`` (glibc >= 2.30; Linux only)."""
    try:
        return hasattr(ctypes.CDLL(None), "gettid")
    except OSError:
        return False


def _ask_workers_their_ids(tries: int = 20) -> list[int]:
    """The kernel ids of Numba's workers, each read by the worker itself inside a parallel region.

    A region at the full team size also makes OpenMP create its (lazily started) workers. Asking them is exact; diffing
    /proc/self/task would also catch threads other libraries start meanwhile. A prange of team-size iterations gives
    each thread one chunk; a thread that got none (a scheduler's whim) is asked again.
    """
    if not _has_gettid() or not cpu.thread_ids():
        return []
    saved = numba.get_num_threads()
    team = numba.config.NUMBA_NUM_THREADS
    numba.set_num_threads(team)
    try:
        seen = np.zeros(team, dtype=np.int64)
        for _ in range(tries):
            _tid_region(seen)
            if np.all(seen > 0):
                break
    finally:
        numba.set_num_threads(saved)
    caller = threading.get_native_id()
    return sorted({int(t) for t in seen if t > 0 and t != caller})


_gettid = numba.types.ExternalFunction("gettid", numba.types.int32())  # resolved when compiled: cacheable


@numba.njit(parallel=True, cache=True)
def _tid_region(seen):
    """Each thread writes its kernel id at its Numba thread index."""
    for i in numba.prange(seen.shape[0]):
        seen[numba.get_thread_id()] = _gettid()
        x = 0.0
        for k in range(20000):  # a little work, so that one thread does not take every chunk
            x += k * 1e-12
        if x < 0.0:
            seen[i] = -1


def configure(nthread: int, cpu_ids: Sequence[int] | None = None) -> list[int]:
    """Numba uses ``nthread`` workers (at most its pool size), each on the whole ``cpu_ids`` set (else every usable
    CPU; set in both cases: workers started while the caller was pinned inherited one CPU); returns their ids."""
    tids = launch()
    numba.set_num_threads(max(1, min(int(nthread), numba.config.NUMBA_NUM_THREADS)))
    _pin(tids, cpu_ids)
    return tids


def release() -> None:
    """Give the workers every usable CPU again (undoes a pinned :func:`configure`)."""
    _pin(worker_tids(), None)


def worker_tids() -> list[int]:
    """Numba's worker thread ids known to this module (empty before :func:`launch`)."""
    return list(_worker_tids or [])


def _pin(tids: Sequence[int], cpu_ids: Sequence[int] | None) -> None:
    if not cpu.affinity_supported():
        return
    target = set(cpu_ids) if cpu_ids is not None else set(cpu.usable_cpus())
    for tid in tids:
        try:
            os.sched_setaffinity(tid, target)
        except OSError:  # the thread is gone
            pass

"""Numba's worker threads for the host phases: layer, count and CPUs follow the physics pool.

Threading layer: ``omp`` (GNU OpenMP) with ``OMP_WAIT_POLICY=passive``, chosen on purpose by measurement (unless the
user set ``NUMBA_THREADING_LAYER``); ``workqueue`` where no OpenMP runtime loads. Host phases run between
``pool.step`` calls, on the same CPUs as MuJoCo's threads, so after a parallel region Numba's workers must sleep at
once, not spin and steal cycles from the physics that follows: libgomp's default policy spins a while after each
region (GOMP_SPINCOUNT), the passive policy blocks at once (0.000 cores busy while the caller sleeps; tests check it).
Among the non-spinning choices omp is much the faster here: the calling thread does a share of each region and wakes
only the other workers, while workqueue's caller waits for all of them; the update_state drivers in a row took 6.3-6.5
ms at 1.7-1.8 cores (omp, passive) vs 9.0-9.8 ms at 1.2 cores (workqueue) at 4096 envs on 2 cores. ``tbb`` is not a
dependency, and its arena threads spin-wait briefly.
omp splits a ``prange`` statically, so a worker that wakes late holds up the region; unilab's per-env kernels
therefore hand out chunks from an atomic counter inside the region (:mod:`unilab.sim.work_claims`).
The passive policy is set only while Numba loads its OpenMP runtime (the system libgomp, read once when it loads) and
the previous value is put back, so other OpenMP runtimes (e.g. PyTorch's own bundled copy) keep theirs; a user's
``OMP_WAIT_POLICY`` is respected. The policy holds only where Numba is the first to load libgomp: PyTorch's import
loads its own ``libgomp.so.1``, which Numba then shares, with the default (spinning) policy. The collector process,
which steps the envs in training, never imports torch; in-process users of the env that import torch first (play,
eval) spin a few milliseconds after each host phase (measured: ~0.03 cores of one worker while idle). libgomp is not
fork-safe: processes that use the env are spawned, never forked, after a parallel call (Numba refuses otherwise).

The count equals the pool's thread count (``numba.set_num_threads``). The workers start on the first parallel region
and inherit that thread's CPU set; the pool pins the caller to ``cpu_ids[0]``, so workers would all share one CPU.
:func:`launch` therefore starts them itself (one small parallel region at the full team size, in which each worker
reports its own kernel thread id) and :func:`configure`, with ``cpu_ids``, gives each the pool's CPU set explicitly
(Linux). OpenMP keeps one team per launching thread: the thread that builds the env must be the one that steps it (as
everywhere in unilab).
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

    A region at the full team size also makes OpenMP create its workers (it does so lazily). Asking the workers is
    exact; diffing /proc/self/task around the start would also catch threads that other libraries start meanwhile.
    Numba splits a prange of n = team size iterations into one chunk per thread; a thread that got none (a scheduler's
    whim) is asked again.
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
    """Numba uses ``nthread`` workers (at most its pool size), on ``cpu_ids`` (else every usable CPU).

    Returns the worker thread ids. Workers get the whole ``cpu_ids`` set (which worker takes which chunk is Numba's
    business). Set explicitly in both cases: workers started while the caller was pinned inherited one CPU.
    """
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

"""Numba's worker threads for the host phases: layer, count and CPUs follow the physics pool.

Threading layer: ``workqueue``, chosen on purpose (unless the user set
``NUMBA_THREADING_LAYER``). Host phases run between ``pool.step`` calls, on the
same CPUs as MuJoCo's threads, so after a parallel region Numba's workers must
sleep at once, not spin: the workqueue layer's workers block on a condition
variable between jobs, while libgomp (the ``omp`` layer, available here) spins
for a while after each region (its default GOMP_SPINCOUNT) and steals those
cycles from the physics that follows; ``tbb`` is not installed here and its
arena threads also spin-wait briefly. workqueue is always available, and the
host drivers need none of what it lacks (nested parallelism, launches from
several threads at once: only the env-owning thread launches).

The count equals the pool's thread count (``numba.set_num_threads``). Numba
starts its workers on the first parallel call and they inherit that thread's
CPU set; the pool pins the caller to ``cpu_ids[0]``, so workers started later
would all share one CPU. :func:`configure` therefore starts them itself
(seeing their thread ids appear in /proc/self/task) and, with ``cpu_ids``,
gives each the pool's CPU set explicitly (Linux).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence

import numba

from unilab.sim import cpu

LAYER = "workqueue"
if "NUMBA_THREADING_LAYER" not in os.environ:
    numba.config.THREADING_LAYER = LAYER

_lock = threading.Lock()
_worker_tids: list[int] | None = None  # Numba's workers, once this module started them


def launch() -> list[int]:
    """Start Numba's worker threads (once per process); return their thread ids (empty if unknown)."""
    global _worker_tids
    with _lock:
        if _worker_tids is None:

            from numba.np.ufunc import parallel  # noqa: PLC0415

            before = cpu.thread_ids()
            already = bool(getattr(parallel, "_is_initialized", False))
            parallel._launch_threads()  # noqa: SLF001 - Numba has no public call that starts its workers
            # threads started by Numba before us cannot be told apart from others: leave them
            _worker_tids = [] if already else sorted(cpu.thread_ids() - before)
        return list(_worker_tids)


def configure(nthread: int, cpu_ids: Sequence[int] | None = None) -> list[int]:
    """Numba uses ``nthread`` workers (at most its pool size), on ``cpu_ids`` (else every usable CPU).

    Returns the worker thread ids. Workers get the whole ``cpu_ids`` set
    (which worker takes which chunk is Numba's business). Set explicitly in
    both cases: workers started while the caller was pinned inherited one CPU.
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

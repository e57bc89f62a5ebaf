"""Usable-CPU discovery, the worker-thread sizing rule, and thread pinning.

The sizing rule exists because a pool sized past the usable CPUs (for example ``2 x os.cpu_count()``) oversubscribes
them and steps physics 10-25 % slower. "Usable" respects taskset and cgroup cpusets, which ``os.cpu_count()`` and
MuJoCo's ``nthread=0`` ignore.
"""

from __future__ import annotations

import os
import platform
import re
import threading
from collections.abc import Iterable, Sequence


def affinity_supported() -> bool:
    """True where threads can be pinned (Linux: ``os.sched_setaffinity``)."""
    return hasattr(os, "sched_setaffinity") and hasattr(os, "sched_getaffinity")


# CPU sets that threads had before a pool pinned them (native tid -> set): a pinned caller must still see the usable set
_unpinned_affinity: dict[int, set[int]] = {}


def usable_cpus() -> list[int]:
    """Sorted ids of the CPUs this process may run on: ``os.sched_getaffinity(0)`` where it exists (respects taskset
    and cgroup cpusets), else ``range(os.cpu_count())`` (macOS, Windows); a pinned thread gets its set from before."""
    if hasattr(os, "sched_getaffinity"):
        before = _unpinned_affinity.get(threading.get_native_id())
        return sorted(before if before is not None else os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def usable_cpu_count() -> int:
    """Number of usable CPUs (see :func:`usable_cpus`)."""
    return len(usable_cpus())


def parse_cpu_ids(spec: str | int | Iterable[int] | None) -> list[int] | None:
    """Parse ``"0-3,8,10-11"``, an int, or a sequence into a list of cpu ids (``None``, ``""``: no explicit list).

    Order is kept as given so that thread ``i`` is pinned to ``cpu_ids[i]``.
    """
    if spec is None:
        return None
    if isinstance(spec, bool):
        raise ValueError(f"cpu_ids must be ids, got {spec!r}")
    if isinstance(spec, int):
        return [spec]
    if isinstance(spec, str):
        spec = spec.strip()
        if not spec:
            return None
        ids: list[int] = []
        for part in spec.split(","):
            part = part.strip()
            rng = re.fullmatch(r"(\d+)\s*-\s*(\d+)", part)
            if rng:
                lo, hi = int(rng.group(1)), int(rng.group(2))
                if hi < lo:
                    raise ValueError(f"bad cpu id list {spec!r}: range {part!r} is descending")
                ids.extend(range(lo, hi + 1))
            elif re.fullmatch(r"-?\d+", part):
                ids.append(int(part))
            else:
                raise ValueError(f"bad cpu id list {spec!r}: {part!r} is not an id or a lo-hi range")
        return ids
    out = []
    for c in spec:
        if isinstance(c, bool) or not hasattr(c, "__index__"):
            raise ValueError(f"cpu id {c!r} is not an integer")
        out.append(int(c))
    return out


def validate_cpu_ids(cpu_ids: Sequence[int]) -> list[int]:
    """Check an explicit cpu list: non-empty, non-negative, unique, usable; a ValueError names the offending ids (or
    the platform, when it cannot pin threads at all)."""
    ids = list(cpu_ids)
    if not ids:
        raise ValueError("cpu_ids is empty: give at least one cpu id or None")
    negative = [c for c in ids if c < 0]
    if negative:
        raise ValueError(f"cpu_ids has negative ids {negative}")
    dupes = sorted({c for c in ids if ids.count(c) > 1})
    if dupes:
        raise ValueError(f"cpu_ids has duplicate ids {dupes}")
    if not affinity_supported():
        raise ValueError(f"cpu_ids={ids} asks for pinning, but {platform.system()} has no thread affinity API "
                         "(os.sched_setaffinity); pass cpu_ids=None")
    usable = set(usable_cpus())
    outside = [c for c in ids if c not in usable]
    if outside:
        raise ValueError(f"cpu_ids {outside} are outside the usable CPU set {sorted(usable)} (see taskset / cgroup "
                         "cpuset)")
    return ids


def resolve_nthread(num_envs: int, nthread: int | None = None, cpu_ids: Sequence[int] | None = None) -> int:
    """The sizing rule: how many threads a pool of ``num_envs`` sims gets: ``len(cpu_ids)`` when given, else
    ``nthread`` when given (validated >= 1), else ``min(num_envs, usable_cpu_count())``.

    Never 0: MuJoCo reads 0 as "all logical CPUs", ignoring affinity.
    """
    if num_envs < 1:
        raise ValueError(f"num_envs must be >= 1, got {num_envs}")
    if nthread is not None:
        if isinstance(nthread, bool) or not isinstance(nthread, int):
            raise ValueError(f"nthread must be an int >= 1, 'auto' or None, got {nthread!r}")
        if nthread < 1:
            raise ValueError(f"nthread must be >= 1, got {nthread} (MuJoCo's 0 means all logical CPUs, "
                             "ignoring affinity)")
    if cpu_ids is not None:
        ids = validate_cpu_ids(cpu_ids)
        if nthread is not None and nthread != len(ids):
            raise ValueError(f"nthread={nthread} disagrees with cpu_ids={ids}: pinning uses one thread per cpu id")
        if len(ids) > num_envs:
            raise ValueError(f"cpu_ids lists {len(ids)} cpus but the pool has only {num_envs} envs")
        return len(ids)
    return min(num_envs, usable_cpu_count()) if nthread is None else nthread


def thread_ids() -> set[int]:
    """Kernel thread ids of this process (Linux: /proc/self/task)."""
    try:
        return {int(t) for t in os.listdir("/proc/self/task")}
    except FileNotFoundError:
        return set()


def pin_threads(tids: Sequence[int], cpu_ids: Sequence[int]) -> None:
    """Pin thread ``tids[i]`` to cpu ``cpu_ids[i]`` (Linux only)."""
    if len(tids) != len(cpu_ids):
        raise ValueError(f"{len(tids)} threads for {len(cpu_ids)} cpu ids")
    for tid, cpu_id in zip(tids, cpu_ids):
        os.sched_setaffinity(tid, {cpu_id})


def pin_caller(cpu_id: int) -> set[int]:
    """Pin the calling thread to ``cpu_id``; return the set to restore with :func:`unpin_caller`."""
    tid = threading.get_native_id()
    before = _unpinned_affinity.get(tid) or set(os.sched_getaffinity(0))
    _unpinned_affinity[tid] = before
    os.sched_setaffinity(0, {cpu_id})
    return before


def unpin_caller(cpus: set[int]) -> None:
    """Give the calling thread ``cpus`` back (undoes :func:`pin_caller`)."""
    _unpinned_affinity.pop(threading.get_native_id(), None)
    os.sched_setaffinity(0, cpus)


def current_tid() -> int:
    """Kernel thread id of the calling thread."""
    return threading.get_native_id()


def thread_cpu_seconds(tid: int) -> float:
    """CPU time a thread of this process has run (Linux: /proc schedstat, ns; else stat, clock ticks)."""
    try:
        with open(f"/proc/self/task/{tid}/schedstat") as f:
            return int(f.read().split()[0]) * 1e-9
    except FileNotFoundError:
        with open(f"/proc/self/task/{tid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def cpu_model_name() -> str:
    """The CPU model string (Linux /proc/cpuinfo, else platform.processor())."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()

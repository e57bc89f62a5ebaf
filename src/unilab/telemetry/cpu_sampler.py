"""Cores used by a set of processes, and machine CPU load, between samples.

``cpu/process_cores`` = sum over the watched processes (all their threads) of CPU-time delta / wall-time delta since the
previous sample: 2.0 means two cores busy the whole interval. ``cpu/machine_percent`` = busy share of all the machine's
CPUs over the same interval, 0-100, as ``psutil.cpu_percent`` computes it, but with each sampler's own previous totals
(``psutil.cpu_percent(interval=None)`` shares its state between callers).
"""

from __future__ import annotations

import time

import psutil

PROCESS_CORES = "cpu/process_cores"
MACHINE_PERCENT = "cpu/machine_percent"


def _machine_busy_total() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot."""
    t = psutil.cpu_times()
    total = sum(t)
    # the same idle set psutil.cpu_percent uses; guest time is already counted inside user/nice on Linux
    idle = t.idle + getattr(t, "iowait", 0.0)
    total -= getattr(t, "guest", 0.0) + getattr(t, "guest_nice", 0.0)
    return total - idle, total


class CpuSampler:
    """Samples CPU use of ``pids`` (and the machine) since the previous sample (the first: since construction).

    A pid that has exited (or cannot be read) is dropped at the next sample; it never raises.
    """

    def __init__(self, pids: list[int]):
        if isinstance(pids, int):
            raise ValueError("pids must be a list of process ids, got a single int")
        self._procs: dict[int, psutil.Process] = {}
        self._last_cpu: dict[int, float] = {}
        for pid in pids:
            if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
                raise ValueError(f"process id must be a positive int, got {pid!r}")
            try:
                proc = psutil.Process(pid)
                self._last_cpu[pid] = self._cpu_seconds(proc)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            self._procs[pid] = proc
        self._last_wall = time.monotonic()
        self._last_busy, self._last_total = _machine_busy_total()

    @property
    def pids(self) -> list[int]:
        """Processes still being watched."""
        return list(self._procs)

    @staticmethod
    def _cpu_seconds(proc: psutil.Process) -> float:
        t = proc.cpu_times()
        return t.user + t.system

    def sample(self) -> dict[str, float]:
        """``{cpu/process_cores, cpu/machine_percent}`` since the previous call."""
        now = time.monotonic()
        wall = now - self._last_wall
        cpu_delta = 0.0
        for pid, proc in list(self._procs.items()):
            try:
                # is_running also catches a pid reused by a new process
                if not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE:
                    raise psutil.NoSuchProcess(pid)
                cpu = self._cpu_seconds(proc)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                del self._procs[pid]
                del self._last_cpu[pid]
                continue
            cpu_delta += max(cpu - self._last_cpu[pid], 0.0)
            self._last_cpu[pid] = cpu
        busy, total = _machine_busy_total()
        d_total = total - self._last_total
        machine = 100.0 * (busy - self._last_busy) / d_total if d_total > 0 else 0.0
        self._last_wall, self._last_busy, self._last_total = now, busy, total
        return {PROCESS_CORES: cpu_delta / wall if wall > 0 else 0.0, MACHINE_PERCENT: min(max(machine, 0.0), 100.0)}

"""Per-phase wall time and cores used, cheap enough to leave on.

"Cores used" of a phase = process CPU-time delta (every thread's, so a phase that fans out to the MuJoCo pool shows its
parallelism) / wall-time delta: 1.0 is one core busy for the whole phase, 0.1 mostly waiting.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from unilab.telemetry.trace import TraceRecorder


@dataclass
class PhaseStats:
    """Accumulated totals of one phase since the last reset."""

    wall_ms_total: float = 0.0
    cpu_ms_total: float = 0.0
    count: int = 0

    @property
    def mean_ms(self) -> float:
        """Mean wall ms per occurrence."""
        return self.wall_ms_total / self.count if self.count else 0.0

    @property
    def cores(self) -> float:
        """Process CPU time / wall time over all occurrences."""
        return self.cpu_ms_total / self.wall_ms_total if self.wall_ms_total > 0 else 0.0


class PhaseTimer:
    """Times named phases; phases may nest (each is measured on its own)."""

    def __init__(self, enabled: bool = True, trace: TraceRecorder | None = None):
        self.enabled = enabled
        self.trace = trace
        self._stats: dict[str, PhaseStats] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Context manager that adds the enclosed wall and CPU time to ``name``."""
        if not self.enabled:
            yield
            return
        w0, c0 = time.perf_counter_ns(), time.process_time_ns()
        try:
            yield
        finally:
            w1, c1 = time.perf_counter_ns(), time.process_time_ns()
            self.add(name, (w1 - w0) * 1e-6, (c1 - c0) * 1e-6)
            if self.trace is not None:
                self.trace.complete(name, w0, w1 - w0)

    def add(self, name: str, wall_ms: float, cpu_ms: float) -> None:
        """Record one occurrence measured elsewhere."""
        s = self._stats.get(name)
        if s is None:
            s = self._stats[name] = PhaseStats()
        s.wall_ms_total += wall_ms
        s.cpu_ms_total += cpu_ms
        s.count += 1

    def summary(self) -> dict[str, PhaseStats]:
        """Snapshot of every phase's totals."""
        return {k: PhaseStats(v.wall_ms_total, v.cpu_ms_total, v.count) for k, v in self._stats.items()}

    def reset(self) -> None:
        """Forget all totals (call between logging intervals)."""
        self._stats.clear()

    def pop_summary(self) -> dict[str, PhaseStats]:
        """``summary()`` then ``reset()``."""
        out, self._stats = self._stats, {}
        return out

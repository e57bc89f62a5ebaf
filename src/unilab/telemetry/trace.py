"""Chrome/Perfetto trace recording (the JSON "traceEvents" format).

Each process records complete events ("ph": "X") into a bounded list and writes them out as one JSON file;
``merge_traces`` joins several processes' files into one that chrome://tracing or ui.perfetto.dev opens.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from unilab.paths import write_json

# perf_counter_ns has an arbitrary origin per process: anchored to the wall clock, processes' events line up
_EPOCH_OFFSET_NS = time.time_ns() - time.perf_counter_ns()


class TraceRecorder:
    """Collects complete events of this process; keeps at most ``max_events``."""

    def __init__(self, process_name: str, max_events: int = 1_000_000):
        self.process_name = process_name
        self.max_events = max_events
        self.pid = os.getpid()
        self.events: list[dict] = []
        self.dropped = 0

    def complete(self, name: str, start_perf_ns: int, dur_ns: int) -> None:
        """Add an event that started at ``perf_counter_ns() == start_perf_ns``."""
        if len(self.events) >= self.max_events:
            self.dropped += 1
            return
        self.events.append({"name": name, "ph": "X", "ts": (start_perf_ns + _EPOCH_OFFSET_NS) / 1000.0,
                            "dur": dur_ns / 1000.0, "pid": self.pid, "tid": threading.get_native_id()})

    def to_json(self) -> dict:
        """The trace as a ``{"traceEvents": [...]}`` document."""
        meta = {"name": "process_name", "ph": "M", "pid": self.pid, "args": {"name": self.process_name}}
        return {"traceEvents": [meta, *self.events], "otherData": {"dropped_events": self.dropped}}

    def save(self, path: str | Path) -> Path:
        """Write the trace atomically to ``path``."""
        return write_json(path, self.to_json(), indent=None)


def merge_traces(paths: list[Path], out: str | Path) -> Path:
    """Join per-process trace files into one trace file."""
    events: list[dict] = []
    for p in paths:
        if Path(p).exists():
            events.extend(json.loads(Path(p).read_text())["traceEvents"])
    return write_json(out, {"traceEvents": events}, indent=None)

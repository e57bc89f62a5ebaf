"""TensorBoard scalar logging and reading back.

``ScalarWriter`` writes TensorBoard event files with tensorboard's own event
writer (no torch import, so a collector process stays light). A background
thread flushes every ``flush_secs``: a crash loses at most that much.
``read_scalars`` loads every scalar of a run directory back, for tests and
``scripts/plot_curves.py``.
"""

from __future__ import annotations

import math
import numbers
import time
import weakref
from collections.abc import Mapping
from pathlib import Path

from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.summary.writer.event_file_writer import EventFileWriter

EVENT_FILE_GLOB = "events.out.tfevents.*"


class ScalarWriter:
    """Appends scalars to one TensorBoard event file under ``log_dir``.

    NaN and inf values are written as they are (TensorBoard shows them), and
    counted in ``nonfinite_count`` / ``nonfinite_tags`` so a caller can report
    them.

    >>> w = ScalarWriter(tmp_dir)            # doctest: +SKIP
    >>> w.add("perf/steps_per_sec", 1.5e5, step=10)  # doctest: +SKIP
    >>> w.close()                            # doctest: +SKIP
    """

    def __init__(self, log_dir: str | Path, flush_secs: float = 10.0, max_queue: int = 1000):
        if flush_secs <= 0:
            raise ValueError(f"flush_secs must be > 0, got {flush_secs}")
        if max_queue < 1:
            raise ValueError(f"max_queue must be >= 1, got {max_queue}")
        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.flush_secs = flush_secs
        # the writer's own thread drains the queue into the file and flushes
        # the file every flush_secs
        self._writer = EventFileWriter(str(self.log_dir), max_queue_size=max_queue, flush_secs=flush_secs)
        # closes (and so flushes) at garbage collection or interpreter exit
        # too, for callers that never reach close()
        self._finalizer = weakref.finalize(self, self._writer.close)
        self._closed = False
        self.nonfinite_count = 0
        self.nonfinite_tags: set[str] = set()

    def add(self, tag: str, value: float, step: int, wall_time: float | None = None) -> None:
        """Write one scalar ``value`` of ``tag`` at ``step``."""
        self.add_dict({tag: value}, step, wall_time)

    def add_dict(self, values: Mapping[str, float], step: int, wall_time: float | None = None) -> None:
        """Write several scalars of one step as one event."""
        if self._closed:
            raise RuntimeError(f"ScalarWriter for {self.log_dir} is closed")
        if isinstance(step, bool) or not isinstance(step, numbers.Integral):
            raise ValueError(f"step must be an integer, got {step!r}")
        if step < 0:
            raise ValueError(f"step must be >= 0, got {step}")
        summary_values = []
        for tag, value in values.items():
            if not isinstance(tag, str) or not tag:
                raise ValueError(f"scalar tag must be a non-empty string, got {tag!r}")
            try:
                v = float(value)
            except (TypeError, ValueError) as e:
                raise ValueError(f"scalar {tag!r} is not a number: {value!r}") from e
            if not math.isfinite(v):
                self.nonfinite_count += 1
                self.nonfinite_tags.add(tag)
            summary_values.append(Summary.Value(tag=tag, simple_value=v))
        if not summary_values:
            return
        event = Event(
            wall_time=time.time() if wall_time is None else wall_time,
            step=int(step),
            summary=Summary(value=summary_values),
        )
        self._writer.add_event(event)

    def flush(self) -> None:
        """Write everything queued so far to disk."""
        if not self._closed:
            self._writer.flush()

    def close(self) -> None:
        """Flush and close the event file; later ``add`` calls raise."""
        if not self._closed:
            self._finalizer()
            self._closed = True

    def __enter__(self) -> ScalarWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_scalars(log_dir: str | Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar in the event files directly inside ``log_dir``.

    Returns ``{tag: [(step, value), ...]}`` in file order. Several event files
    in one directory (e.g. a resumed run) are read in name order; as in
    TensorBoard, events orphaned by a restart at an earlier step are dropped.
    """
    # imported here: the event accumulator pulls in much of tensorboard's
    # backend, which a writing process never needs
    from tensorboard.backend.event_processing import event_accumulator as ea

    log_dir = Path(log_dir)
    if not log_dir.is_dir():
        raise FileNotFoundError(f"log directory {log_dir} does not exist")
    if not any(log_dir.glob(EVENT_FILE_GLOB)):
        raise FileNotFoundError(f"no TensorBoard event files ({EVENT_FILE_GLOB}) in {log_dir}")
    acc = ea.EventAccumulator(str(log_dir), size_guidance={ea.SCALARS: 0})  # 0: keep every event
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()[ea.SCALARS]}

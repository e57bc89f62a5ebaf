"""TensorBoard scalar logging and reading back.

``ScalarWriter`` uses tensorboard's own record and async writers (no torch import: a collector process stays light); a
background thread flushes every ``flush_secs``, so a crash loses at most that much. Scalars are a side product: on a
full disk or unwritable directory the writer warns once and drops everything, so the run keeps going.
"""

from __future__ import annotations

import itertools
import numbers
import os
import socket
import sys
import threading
import time
import weakref
from collections.abc import Mapping
from pathlib import Path

from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.summary.writer.event_file_writer import _AsyncWriter
from tensorboard.summary.writer.record_writer import RecordWriter

EVENT_FILE_GLOB = "events.out.tfevents.*"
_file_uid = itertools.count()


class _GuardedFile:
    """A binary file whose OSErrors are recorded in ``error`` (after which every call is a no-op) instead of raised:
    tensorboard's writer thread would die with a traceback on the first failed write."""

    def __init__(self, path: Path):
        self.error: OSError | None = None
        self._lock = threading.Lock()
        self._f = open(path, "wb")  # noqa: SIM115 - closed by close()

    def _call(self, name: str, *args) -> None:
        with self._lock:
            if self.error is not None or self._f.closed:
                return
            try:
                getattr(self._f, name)(*args)
            except OSError as err:
                self.error = err
                try:
                    self._f.close()  # may fail again flushing the same bytes
                except OSError:
                    pass

    def write(self, data: bytes) -> None:
        self._call("write", data)

    def flush(self) -> None:
        self._call("flush")

    def close(self) -> None:
        self._call("close")

    @property
    def closed(self) -> bool:
        return self._f.closed


class ScalarWriter:
    """Appends scalars (NaN and inf as they are) to one TensorBoard event file under ``log_dir``.

    An OSError of the event file (disk full, read-only directory) is never raised: the first one prints one warning on
    stderr naming ``log_dir`` and the errno, ``failed`` turns True, and from then on scalars are dropped.
    """

    def __init__(self, log_dir: str | Path, flush_secs: float = 10.0, max_queue: int = 1000):
        if flush_secs <= 0:
            raise ValueError(f"flush_secs must be > 0, got {flush_secs}")
        if max_queue < 1:
            raise ValueError(f"max_queue must be >= 1, got {max_queue}")
        self.log_dir = Path(log_dir)
        self.flush_secs = flush_secs
        self._closed = False
        self._failed = False
        self._file: _GuardedFile | None = None
        self._writer: _AsyncWriter | None = None
        self._finalizer = None
        # the same name as tensorboard's EventFileWriter gives its files
        name = f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}.{os.getpid()}.{next(_file_uid)}"
        try:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            self._file = _GuardedFile(self.log_dir / name)
        except OSError as err:
            self._fail(err)
            return
        # the writer's own thread drains the queue into the file and flushes the file every flush_secs
        self._writer = _AsyncWriter(RecordWriter(self._file), max_queue, flush_secs)
        # closes (and so flushes) at garbage collection or interpreter exit too, for callers that never reach close()
        self._finalizer = weakref.finalize(self, self._writer.close)
        header = Event(wall_time=time.time(), file_version="brain.Event:2")
        header.source_metadata.writer = "tensorboard.summary.writer.event_file_writer"
        self._writer.write(header.SerializeToString())
        self.flush()

    @property
    def failed(self) -> bool:
        """True once writing failed (see the class docs); later scalars are dropped."""
        return self._failed

    def _check(self) -> bool:
        """Turn a write error recorded by the file into the one warning; True while healthy."""
        if not self._failed and self._file.error is not None:  # a healthy writer has its file
            self._fail(self._file.error)
        return not self._failed

    def _fail(self, err: OSError) -> None:
        self._failed = True
        reason = (f"[Errno {err.errno}] {err.strerror or os.strerror(err.errno)}" if err.errno is not None
                  else str(err) or type(err).__name__)
        print(f"unilab: warning: TensorBoard scalars to {self.log_dir} failed ({reason}); "
              "training continues without scalars", file=sys.stderr, flush=True)
        if self._finalizer is not None:
            self._finalizer()  # stops the thread; the guarded file raises nothing

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
            summary_values.append(Summary.Value(tag=tag, simple_value=v))
        if not summary_values or not self._check():
            return
        event = Event(wall_time=time.time() if wall_time is None else wall_time, step=int(step),
                      summary=Summary(value=summary_values))
        self._writer.write(event.SerializeToString())
        self._check()

    def flush(self) -> None:
        """Write everything queued so far to disk."""
        if not self._closed and self._check():
            self._writer.flush()
            self._check()

    def close(self) -> None:
        """Flush and close the event file; later ``add`` calls raise."""
        if not self._closed:
            if self._check():
                self._finalizer()
                self._check()
            self._closed = True

    def __enter__(self) -> ScalarWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_scalars(log_dir: str | Path) -> dict[str, list[tuple[int, float]]]:
    """``{tag: [(step, value), ...]}`` of the event files directly inside ``log_dir``, in file order (for tests and
    ``scripts/plot_curves.py``). Several files (e.g. a resumed run) are read in name order; as in TensorBoard, events
    orphaned by a restart at an earlier step are dropped."""
    # imported here: the event accumulator pulls in much of tensorboard's backend, which a writing process never needs
    from tensorboard.backend.event_processing import event_accumulator as ea  # noqa: PLC0415

    log_dir = Path(log_dir)
    if not log_dir.is_dir():
        raise FileNotFoundError(f"log directory {log_dir} does not exist")
    if not any(log_dir.glob(EVENT_FILE_GLOB)):
        raise FileNotFoundError(f"no TensorBoard event files ({EVENT_FILE_GLOB}) in {log_dir}")
    acc = ea.EventAccumulator(str(log_dir), size_guidance={ea.SCALARS: 0})  # 0: keep every event
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()[ea.SCALARS]}

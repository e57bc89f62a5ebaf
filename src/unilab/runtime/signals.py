"""Stop signals of the training process: Ctrl-C, SIGTERM and SIGHUP (a closed terminal) each raise
:class:`StopRequested` (a KeyboardInterrupt) in the main thread, so the trainer leaves its loop, writes a final
checkpoint and exits with ``128 + signum``. Inside :meth:`StopSignals.deferred` (a checkpoint being written) a signal is
only recorded, and raised when the block ends: an exception inside ``torch.save`` would abandon the file. Once stopping,
later signals are reported and ignored, so a second Ctrl-C cannot abandon the final checkpoint (``kill -9`` can).

After SIGHUP the terminal is gone and every write to it fails with EIO, which would end the shutdown before the final
checkpoint: stdout/stderr that point at a terminal are redirected to /dev/null first.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import sys
import threading
from collections.abc import Iterator
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM) + ((signal.SIGHUP,) if hasattr(signal, "SIGHUP") else ())


class StopRequested(KeyboardInterrupt):
    """SIGINT, SIGTERM or SIGHUP arrived; ``signum`` says which."""

    def __init__(self, signum: int):
        super().__init__(f"signal {signum}")
        self.signum = int(signum)


class StopSignals:
    """SIGINT/SIGTERM/SIGHUP handlers for the duration of a ``with`` block (main thread only)."""

    def __init__(self) -> None:
        self.received: int | None = None
        self.saves = False
        """Whether a stop now ends with a final checkpoint (the learner exists); before, nothing is saved."""
        self._stopping = False
        self._depth = 0
        self._pending: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        for sig in STOP_SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.received is not None:
            # a stop is under way: later signals stay reported and ignored until the process exits
            # (a restored handler would let a second Ctrl-C kill the shutdown after this block)
            return
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def stopping(self) -> None:
        """From now on signals are reported and ignored (the run is already ending)."""
        self._stopping = True

    def _handle(self, signum: int, frame: object) -> None:
        if signum == getattr(signal, "SIGHUP", None):
            detach_from_terminal()
        if self.received is not None or self._stopping:
            doing = ("writing the final checkpoint); kill -9 abandons it" if self.saves
                     else "training had not started: nothing to save)")
            print(f"unilab: {signal.Signals(signum).name} ignored: already stopping ({doing}", file=sys.stderr,
                  flush=True)
            return
        self.received = signum
        if self._depth:
            self._pending = signum
            print(f"unilab: {signal.Signals(signum).name}: stopping once the checkpoint being written is complete",
                  file=sys.stderr, flush=True)
            return
        raise StopRequested(signum)

    @contextlib.contextmanager
    def deferred(self) -> Iterator[None]:
        """Hold stop signals until the block ends, then raise StopRequested if one came."""
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
        if self._depth == 0 and self._pending is not None:
            signum, self._pending = self._pending, None
            raise StopRequested(signum)


def detach_from_terminal() -> None:
    """Point stdout/stderr at /dev/null where they are a terminal (a hung-up one fails every write)."""
    for stream, fd in ((sys.stdout, 1), (sys.stderr, 2)):
        try:
            if not stat.S_ISCHR(os.fstat(fd).st_mode):
                continue  # a pipe or a file (nohup, a scheduler's log) still works
            null = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(null, fd)
            finally:
                os.close(null)
            stream.flush()  # what was buffered for the closed terminal goes to /dev/null too
        except (OSError, ValueError, RuntimeError):  # RuntimeError: the signal came in the middle of a print
            continue


@contextlib.contextmanager
def hangups_blocked() -> Iterator[None]:
    """Block SIGHUP in this thread for the block, so processes started inside inherit it blocked: a closed terminal
    signals the whole process group, and the collector and multiprocessing's resource tracker must outlive it so the
    learner can stop them and release the shared memory (a dead tracker leaks it). One that comes meanwhile is delivered
    to this process when the block ends."""
    if not hasattr(signal, "SIGHUP") or not hasattr(signal, "pthread_sigmask"):
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGHUP})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


@contextlib.contextmanager
def stops_held() -> Iterator[None]:
    """Hold stop signals for the block (main thread) and deliver the first when the block ends: a process start cut
    short leaves a semaphore in /dev/shm or a child without its start-up data (a traceback). A child started inside
    begins with their default actions (exec resets a caught signal)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, _frame: held.append(signum)) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if held:
            signal.raise_signal(held[0])

"""The trainings and evaluations a benchmark runs, and how they stop with it.

Each child runs in a session of its own, so a Ctrl-C at the terminal, a SIGTERM (``timeout``, a scheduler) or a closed
terminal reaches the benchmark only: it passes the signal on to every running child (a training writes its final
checkpoint and stops), starts no more, writes its report with what finished and exits ``128 + signal``
(:func:`stop_signals`). A training's output goes to a log file, not through a pipe to the benchmark, so a benchmark
that dies cannot take its trainings' output (and with it the trainings) along; on Linux a child is also sent SIGTERM
when the benchmark dies without a word (``kill -9``), and so still stops cleanly with its final checkpoint.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from unilab.runtime.signals import STOP_SIGNALS

PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when the thread that started it dies


class _Children:
    def __init__(self) -> None:
        self.running: set[subprocess.Popen] = set()
        self.signum: int | None = None
        """The signal that stopped the benchmark (None: none came)."""
        self.lock = threading.RLock()
        """Held while a child starts: the handler may interrupt that in the main thread, which then holds it."""

    def handle(self, signum: int, frame: object) -> None:
        with self.lock:  # a child starting in the main thread gets the signal from :func:`run`, once it is running
            first = self.signum is None
            self.signum = signum
            procs = list(self.running)
        if first:
            print(f"\nunilab-bench: {signal.Signals(signum).name}: stopping the running trainings (each writes a final "
                  "checkpoint) and evaluations; the report keeps what finished", file=sys.stderr, flush=True)
        for proc in procs:
            with contextlib.suppress(OSError):
                proc.send_signal(signum)


CHILDREN = _Children()


def stopped() -> int | None:
    """The signal that stops the benchmark, or None."""
    return CHILDREN.signum


@contextlib.contextmanager
def stop_signals() -> Iterator[None]:
    """Within the block, SIGINT/SIGTERM/SIGHUP stop the benchmark's children instead of killing it (main thread)."""
    previous = {sig: signal.signal(sig, CHILDREN.handle) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def command(cmd: Sequence[str], cpus: Sequence[int] | None = None) -> list[str]:
    """``cmd`` started by a Python trampoline that pins it (and its threads and children) to ``cpus`` when given, and
    on Linux asks for SIGTERM when this process dies (``preexec_fn`` is unsafe while other threads run: parallel runs
    start from threads; ``taskset`` is not everywhere)."""
    lines = ["import os, sys"]
    if cpus is not None:
        lines.append(f"os.sched_setaffinity(0, {sorted(set(cpus))})")
    if sys.platform.startswith("linux"):
        lines += ["import ctypes, signal",
                  f"ctypes.CDLL(None).prctl({PR_SET_PDEATHSIG}, signal.SIGTERM)",
                  f"os.getppid() == {os.getpid()} or os.kill(os.getpid(), signal.SIGTERM)"]  # died before prctl
    if len(lines) == 1:
        return list(cmd)
    lines.append("os.execvp(sys.argv[1], sys.argv[1:])")
    return [sys.executable, "-c", "; ".join(lines), *cmd]


def run(cmd: Sequence[str], cpus: Sequence[int] | None = None, poll: Callable[[], None] | None = None,
        **popen: Any) -> int:
    """Run ``cmd`` as a child (:func:`command`, its own session) to its end, calling ``poll`` every 0.2 s meanwhile
    and once at the end; its return code. After a stop signal nothing is started (return code 128 + that signal)."""
    with CHILDREN.lock:
        if CHILDREN.signum is not None:
            return 128 + CHILDREN.signum
        proc = subprocess.Popen(command(cmd, cpus), start_new_session=True, **popen)
        CHILDREN.running.add(proc)
        if CHILDREN.signum is not None:  # it came while the child started (main thread): not passed on yet
            with contextlib.suppress(OSError):
                proc.send_signal(CHILDREN.signum)
    try:
        while True:
            with contextlib.suppress(subprocess.TimeoutExpired):
                rc = proc.wait(timeout=0.2)
                break
            if poll is not None:
                poll()
        if poll is not None:
            poll()
        return rc
    finally:
        with CHILDREN.lock:
            CHILDREN.running.discard(proc)

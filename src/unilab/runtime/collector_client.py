"""The learner's handle on a collector process: start, hand actions, take steps, stop.

Every blocking wait polls the collector's liveness, so a dead collector turns into :class:`CollectorDied` (naming its
pid and exit code, with its traceback) within a fraction of a second instead of a hang.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from unilab.runtime.collector import POLL_S, CollectorArgs, CollectorChannels, run_collector
from unilab.runtime.shm import SharedArrays, step_slot, transport_spec
from unilab.runtime.signals import hangups_blocked, stops_held
from unilab.runtime.stats import counter_names
from unilab.sim.spec import EnvSpec


class CollectorDied(RuntimeError):
    """The collector process exited (or hung) while the learner needed it."""


class CollectorStartupError(CollectorDied):
    """The collector could not build its env (a config or asset problem, not a crash); the message is the one clear
    line to show the user (``train`` exits 2 on it)."""


# close(): how long the collector gets to stop by itself, then after SIGTERM, then after SIGKILL
STOP_GRACE_S = 5.0
HUNG_GRACE_S = 0.5
TERM_WAIT_S = 2.0
KILL_WAIT_S = 5.0


@contextlib.contextmanager
def interrupts_ignored() -> Iterator[None]:
    """Ignore SIGINT for the block (only the fork and exec): a process spawned inside starts with it ignored. A signal
    mask does not survive multiprocessing's spawn; SIG_IGN does (exec keeps it and Python leaves an ignored SIGINT)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class CollectorClient:
    """Starts a collector process for ``args`` and talks to it through shared memory."""

    def __init__(self, args: CollectorArgs, step_timeout_s: float = 600.0):
        self.step_timeout_s = step_timeout_s
        ctx = mp.get_context("spawn")  # MuJoCo and torch threads make fork unsafe
        self._closed = False
        self._hung = False  # declared stuck: close() does not wait for it to stop by itself
        self.shm: SharedArrays | None = None
        self._sent_t: float | None = None  # when the last actions were handed over
        # the resource tracker (the first semaphore starts it) and the collector ignore SIGHUP and SIGINT: the learner
        # stops them itself, and a collector still importing cannot die of a Ctrl-C (with a traceback). A stop signal
        # during the start waits for its end (cut short, a semaphore is left in /dev/shm or the collector misses its
        # start-up data); one during the env build stops the collector here (a SIGHUP held by both comes as
        # hangups_blocked ends: inside the try)
        try:
            with hangups_blocked(), stops_held():
                self.ch = CollectorChannels(ready=ctx.Queue(), handle=ctx.Queue(), errors=ctx.Queue(),
                                            obs_ready=ctx.Semaphore(0), action_ready=ctx.Semaphore(0), stop=ctx.Event())
                self.proc = ctx.Process(target=run_collector, args=(args, self.ch), name="unilab-collector",
                                        daemon=True)
                with interrupts_ignored():  # only the start: the collector inherits an ignored SIGINT
                    self.proc.start()
            self.spec: EnvSpec = self._get(self.ch.ready, args.startup_timeout_s, "building its env")
            self.counter_names = counter_names(self.spec.reward_terms, self.spec.stats, self.spec.termination_terms)
            self.shm = SharedArrays.create(transport_spec(args.num_envs, self.spec, self.counter_names))
            self.ch.handle.put({**self.shm.handle(), "counter_names": self.counter_names})
        except BaseException:
            self._stop_started()
            raise
        self.steps_received = 0  # step k (0: the reset) is in shared-memory slot k % SLOTS and starts iteration k

    def _stop_started(self) -> None:
        """Stop a collector whose start-up was cut short, without waiting for its env build to notice."""
        if getattr(self, "proc", None) is not None and self.proc.pid is not None:
            self._hung = True
            self.close()

    @property
    def pid(self) -> int:
        return int(self.proc.pid)

    def __getitem__(self, name: str) -> np.ndarray:
        return self.shm[name]

    def _died(self, doing: str) -> CollectorDied:
        """The error to raise for a collector that exited: a build failure or a crash."""
        self.proc.join(timeout=1.0)
        report: Any = ""
        with contextlib.suppress(Exception):  # queue.Empty or a broken pipe: it died without a Python traceback
            report = self.ch.errors.get(timeout=0.5)
        if isinstance(report, dict) and report.get("stage") == "build":
            return CollectorStartupError(report["message"])
        msg = f"collector process (pid {self.proc.pid}) died with exit code {self.proc.exitcode} while {doing}"
        return CollectorDied(f"{msg}\n--- collector traceback ---\n{report}" if report else msg)

    def _get(self, queue: Any, timeout: float, doing: str) -> Any:
        t0 = time.monotonic()
        while True:
            with contextlib.suppress(Exception):  # queue.Empty, or a broken pipe: whether it died is checked next
                return queue.get(timeout=POLL_S)
            if not self.proc.is_alive():
                raise self._died(doing)
            if time.monotonic() - t0 > timeout:
                self._hung = True
                self.close()
                raise CollectorDied(
                    f"collector process (pid {self.proc.pid}) took over {timeout:.0f} s {doing} and was stopped; "
                    f"training.startup_timeout_s={timeout:g} sets this limit")

    def wait_step(self) -> dict[str, np.ndarray]:
        """Block until the collector has written a step (the first is the reset); return its arrays, views of shared
        memory that stay as they are until the actions after the next ones are sent. The timeout counts from when the
        actions were sent: a learner that trained longer than it still notices a stuck collector at once."""
        t0 = self._sent_t if self._sent_t is not None else time.monotonic()
        self._sent_t = None
        while not self.ch.obs_ready.acquire(timeout=POLL_S):
            if not self.proc.is_alive():
                raise self._died(f"stepping (iteration {self.steps_received})")
            if time.monotonic() - t0 > self.step_timeout_s:
                self._hung = True
                self.close()  # a stuck (or SIGSTOPped) collector is killed now, not waited for
                raise CollectorDied(
                    f"collector process (pid {self.proc.pid}) sent no step for {self.step_timeout_s:g} s "
                    f"(iteration {self.steps_received}), so it was killed; training.collector_timeout_s="
                    f"{self.step_timeout_s:g} sets this limit")
        step = step_slot(self.shm, self.spec, self.steps_received)
        self.steps_received += 1
        return step

    def send_action(self, action: np.ndarray) -> None:
        self.shm["action"][...] = action
        self.ch.action_ready.release()
        self._sent_t = time.monotonic()

    def close(self) -> None:
        """Stop the collector and free the shared memory, in bounded time (idempotent): ask it to stop and wait
        ``STOP_GRACE_S`` (``HUNG_GRACE_S`` once declared hung), then SIGTERM, then SIGKILL, which also ends a stopped
        (SIGSTOP) process that SIGTERM cannot."""
        if self._closed:
            return
        self._closed = True
        self.ch.stop.set()
        self.proc.join(timeout=HUNG_GRACE_S if self._hung else STOP_GRACE_S)
        if self.proc.is_alive():
            self.proc.terminate()
            self.proc.join(timeout=TERM_WAIT_S)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(timeout=KILL_WAIT_S)
        # the handle queue's daemon feeder thread holds its semaphores' last references: left running, it may unlink
        # one at exit unbeknown to the resource tracker (a reported leak). Its one message (< a pipe's buffer) is sent.
        self.ch.handle.close()
        self.ch.handle.join_thread()
        if self.shm is not None:
            self.shm.close()
            self.shm = None

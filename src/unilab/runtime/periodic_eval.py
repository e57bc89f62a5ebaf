"""``training.eval_interval``: the task's evaluation of ``unilab-eval`` during training.

Every ``eval_interval`` iterations the learner writes a policy snapshot (``<run dir>/eval/policy_<iter>.pt``, no replay)
and runs ``unilab-eval`` on it in a subprocess (niced, one physics and one torch thread, output in
``eval/eval_<iter>.log``); when that ends, its JSON report's overall metrics are logged as ``eval/<metric>`` at that
iteration's TensorBoard step and the snapshot is deleted.

A subprocess, because the evaluation steps its own env for whole clips: in the learner it would hold the GIL and torch
threads next to the loop that answers the collector, in the collector it would lengthen the steps the learner waits for.
A lower-priority process only takes spare CPU time, and its crash (or a task that cannot be evaluated) only warns. At
most one runs at a time: one still running when the next is due makes that one skip.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from unilab.runtime.checkpoint import save_checkpoint

_NICE = 10
FINAL_WAIT_S = 120.0
"""How long the end of training waits for a running evaluation before stopping it."""


class PeriodicEval:
    """Starts and collects the evaluations of one run (rank 0 only). ``payload(iteration)`` is the checkpoint dict to
    snapshot; an iteration's TensorBoard step is ``iteration * step_scale`` (env steps, as the other scalars);
    ``headline``: the overall metrics printed of each, (label, key, format) rows (``registry.Task.evaluation``)."""

    def __init__(self, run_dir: Path, interval: int, payload: Any, step_scale: int, headline: tuple):
        self.dir = Path(run_dir) / "eval"
        self.interval = int(interval)
        self.payload = payload
        self.step_scale = int(step_scale)
        self.headline = headline
        self.proc: subprocess.Popen | None = None
        self.iteration = 0
        self._snapshot: Path | None = None
        self._log = None
        self._skipped_note = False
        self.results: dict[int, dict[str, float]] = {}
        """Overall metrics of each finished evaluation, by iteration."""

    def step(self, iteration: int, writer: Any) -> None:
        """Once per training iteration: collect a finished evaluation, start a due one."""
        if self.proc is not None and self.proc.poll() is not None:
            self._collect(writer)
        if iteration <= 0 or iteration % self.interval:
            return
        if self.proc is not None:
            if not self._skipped_note:
                print(f"unilab: evaluation of iteration {self.iteration} still running at iteration {iteration}; "
                      "skipping this one (raise training.eval_interval to evaluate every time)", flush=True)
                self._skipped_note = True
            return
        self._start(iteration)

    def _start(self, iteration: int) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        snapshot = self.dir / f"policy_{iteration}.pt"
        try:
            save_checkpoint(snapshot, self.payload(iteration))
        except OSError as err:
            print(f"unilab: warning: no evaluation at iteration {iteration}: {err}", file=sys.stderr, flush=True)
            return
        cmd = [sys.executable, "-m", "unilab.cli.eval", str(snapshot), "--json",
               str(self.dir / f"eval_{iteration}.json"), "--threads", "1", "--nice", str(_NICE), "--no-progress"]
        self._log = open(self.dir / f"eval_{iteration}.log", "w")  # noqa: SIM115 - closed in _collect/close
        # own session: a Ctrl-C at the terminal stops training, which then stops this process itself
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)
        self.iteration, self._snapshot = iteration, snapshot

    def _collect(self, writer: Any) -> None:
        rc, it = self.proc.returncode, self.iteration
        self._release()
        if rc != 0:
            print(f"unilab: warning: evaluation of iteration {it} failed (rc {rc}); see {self.dir / f'eval_{it}.log'}",
                  file=sys.stderr, flush=True)
            return
        try:
            overall = json.loads((self.dir / f"eval_{it}.json").read_text())["overall"]
        except (OSError, ValueError, KeyError) as err:
            print(f"unilab: warning: evaluation of iteration {it} left no readable report ({err})",
                  file=sys.stderr, flush=True)
            return
        self.results[it] = dict(overall)
        if writer is not None:
            writer.add_dict({f"eval/{k}": float(v) for k, v in overall.items()}, it * self.step_scale)
        print(f"unilab: eval @ iter {it}: " + " | ".join(f"{label} {form.format(overall.get(key, float('nan')))}"
                                                         for label, key, form in self.headline), flush=True)

    def _release(self) -> None:
        self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._snapshot is not None:
            self._snapshot.unlink(missing_ok=True)
            self._snapshot = None

    def finish(self, writer: Any, wait_s: float = FINAL_WAIT_S) -> None:
        """At the end of training: wait up to ``wait_s`` for a running evaluation and log it, else stop it."""
        if self.proc is None:
            return
        try:
            self.proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            print(f"unilab: stopping the evaluation of iteration {self.iteration} (still running after {wait_s:g} s)",
                  flush=True)
            self.close()
            return
        self._collect(writer)

    def close(self) -> None:
        """Stop a running evaluation (idempotent)."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=10)
        self._release()

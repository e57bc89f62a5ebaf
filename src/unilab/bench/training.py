"""The ``train`` child of the learning benchmarks: its command line, its log file and its echoed progress."""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from unilab.bench import children
from unilab.tasks import registry


def recipe(args: argparse.Namespace) -> str:
    """``--algo``, or the task's CPU recipe (:func:`registry.recipes`)."""
    return args.algo or registry.recipes(args.task)[1]


def train_command(args: argparse.Namespace, algo: str | None = None, name: str = "bench_learn",
                  sizes: Sequence[str] | None = None) -> list[str]:
    """The ``train`` command line of a benchmark run (also ``unilab-bench gpu``'s); ``sizes``: the overrides before
    ``args.overrides``, by default a time-limited run with ``--num-envs`` if given."""
    if sizes is None:  # the time limit ends the run
        sizes = ["algo.max_iterations=10000000", *([] if args.num_envs is None else [f"algo.num_envs={args.num_envs}"])]
    return [sys.executable, "-m", "unilab.cli.train", "--algo", algo or recipe(args), "--task", args.task,
            f"training.time_limit_s={args.minutes * 60:g}", "training.no_play=true",
            f"training.log_root={args.log_root}", f"training.experiment_name={name}", *sizes, *args.overrides]


_print_lock = threading.Lock()


def announce(cmd: Sequence[str], tag: str = "") -> None:
    """Print ``cmd`` (after ``tag``) as one line, whole among parallel runs' output."""
    with _print_lock:
        print(f"unilab-bench learn: {tag}{' '.join(cmd)}", flush=True)


def training_log(cmd: Sequence[str]) -> Path:
    """Where a ``train`` command's output goes: ``<training.log_root>/<training.experiment_name>_<time>.log`` (the run
    directory is not known before the training makes it)."""
    keys = dict(a.split("=", 1) for a in cmd if a.startswith(("training.log_root=", "training.experiment_name=")))
    root = Path(keys.get("training.log_root", "logs"))
    name = keys.get("training.experiment_name", "train").replace("/", "_")
    root.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y-%m-%d_%H-%M-%S")
    for k in range(1000):
        path = root / (f"{name}_{stamp}.log" if k == 0 else f"{name}_{stamp}-{k}.log")
        with contextlib.suppress(FileExistsError):
            path.open("x").close()
            return path
    raise FileExistsError(f"no free training log name {name}_{stamp}-<k>.log in {root}")


def run_training(cmd: list[str], prefix: str = "", cpus: Sequence[int] | None = None,
                 env: dict[str, str] | None = None) -> tuple[int, Path | None, Path | None, float]:
    """Run ``train`` with its output in a log file (:func:`training_log`; :mod:`unilab.bench.children`: a killed
    benchmark leaves the training stopping cleanly), echoing each line of it after ``prefix`` (parallel runs stay
    readable); returns (rc, run dir, final checkpoint, wall s). After a stop signal nothing is started."""
    run_dir = checkpoint = None
    if children.stopped() is not None:
        return 128 + children.stopped(), None, None, 0.0
    log_path = training_log(cmd)
    t0 = time.monotonic()
    with open(log_path, "rb") as follow:
        partial = b""

        def echo() -> None:
            nonlocal run_dir, checkpoint, partial
            for raw in follow.readlines():
                if not raw.endswith(b"\n"):  # the training is still writing this line
                    partial += raw
                    continue
                line, partial = (partial + raw).decode(errors="replace"), b""
                with _print_lock:
                    sys.stdout.write(prefix + line)
                    sys.stdout.flush()
                if line.startswith("unilab: logging to "):
                    run_dir = Path(line.removeprefix("unilab: logging to ").strip())
                elif line.startswith("unilab: run directory ") and "; checkpoint " in line:
                    head, _, tail = line.partition("; checkpoint ")
                    run_dir = Path(head.removeprefix("unilab: run directory ").strip())
                    checkpoint = Path(tail.strip())

        with open(log_path, "ab") as log:
            rc = children.run(cmd, cpus, poll=echo, stdout=log, stderr=subprocess.STDOUT, env=env)
    with _print_lock:
        print(f"unilab-bench learn: {prefix}training output kept in {log_path}", flush=True)
    return rc, run_dir, checkpoint, time.monotonic() - t0

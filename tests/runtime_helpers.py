"""Shared bits of the runtime tests: a tiny, fast pendulum training command."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

TINY = [
    "--task", "pendulum",
    "algo.num_envs=8",
    "algo.batch_size=64",
    "algo.buffer_size=64",
    "algo.learning_starts=2",
    "algo.actor_hidden_dims=[16]",
    "algo.critic_hidden_dims=[16]",
    "training.no_play=true",
    "training.console_interval_s=0.5",
    "training.log_interval=5",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def train_cmd(log_root: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "unilab.cli.train", *TINY, f"training.log_root={log_root}", *extra]


def run_dirs(log_root: Path) -> list[Path]:
    return sorted((log_root / "fast_sac").glob("*/*_mujoco"))


def popen_train(log_root: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        train_cmd(log_root, *extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        start_new_session=True,
    )


def wait_for_line(proc: subprocess.Popen, needle: str, timeout: float = 120) -> None:
    """Read ``proc``'s stdout until a line contains ``needle`` (AssertionError after ``timeout``)."""
    t0 = time.monotonic()
    for line in proc.stdout:
        if needle in line:
            return
        if time.monotonic() - t0 > timeout:
            break
    raise AssertionError(f"never saw {needle!r}")

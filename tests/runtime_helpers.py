"""Shared bits of the runtime tests: a tiny, fast pendulum training command."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import torch.distributed as dist
import torch.multiprocessing as mp

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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _gloo_rank(rank: int, port: int, fn, out) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        out[rank] = fn(rank)
    finally:
        dist.destroy_process_group()


def on_two_gloo_ranks(fn) -> tuple:
    """``fn(rank)`` (a module-level function) on two spawned gloo ranks: both results, once neither hung."""
    with mp.Manager() as manager:
        out = manager.dict()
        ctx = mp.start_processes(_gloo_rank, args=(_free_port(), fn, out), nprocs=2, join=False,
                                 start_method="spawn")
        for proc in ctx.processes:
            proc.join(timeout=90)
        alive = [p for p in ctx.processes if p.is_alive()]
        for p in alive:
            p.kill()
        assert not alive, "a rank hung"
        assert all(p.exitcode == 0 for p in ctx.processes)
        return out[0], out[1]


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

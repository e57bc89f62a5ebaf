"""Named NumPy arrays in one shared-memory block: the collector<->learner transport, no pickling per step.

The learner creates the block (``SharedArrays.create``) from a ``name -> (shape, dtype)`` spec; the collector attaches
to its :meth:`~SharedArrays.handle`. Blocks are ``/dev/shm/unilab_<pid>_<hex>`` (Linux) and, after
:func:`name_semaphores`, this process's multiprocessing semaphores (queues, events, locks) ``sem.unilab_<pid>_mp-...``,
``<pid>`` their maker. A run killed with ``kill -9`` (learner, collector and resource tracker at once) leaves them;
:func:`remove_stale_segments`, called when training starts, deletes those whose pid no longer exists.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import re
import secrets
import sys
from collections.abc import Sequence
from multiprocessing import shared_memory
from pathlib import Path
from typing import Any

import numpy as np

from unilab.sim.spec import EnvSpec, env_outputs

Spec = dict[str, tuple[tuple[int, ...], str]]

SLOTS = 2
"""Copies of the env-written step record: step k lives in slot k % SLOTS, so the learner reads
step k (acts on it, then stores it in the replay) while the collector writes step k + 1."""

_ALIGN = 64  # cache-line alignment keeps the two processes' writes apart

SHM_DIR = Path("/dev/shm")
_PREFIX = "unilab_"
_STALE_RE = re.compile(r"^(?:sem\.)?unilab_(\d+)_")  # a block, or a named semaphore (sem.<name>)


def name_semaphores() -> None:
    """Name the multiprocessing semaphores this process makes from now on ``unilab_<pid>_mp-<random>``, for
    :func:`remove_stale_segments`. No public API: this sets the process config's ``semprefix`` (``/mp``, CPython since
    3.4) where it exists; elsewhere they keep their ``mp-<random>`` names and a killed run's stay."""
    config = getattr(multiprocessing.current_process(), "_config", None)
    if sys.platform.startswith("linux") and isinstance(config, dict) and "semprefix" in config:
        config["semprefix"] = f"/{_PREFIX}{os.getpid()}_mp"


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists (another user's counts as alive)."""
    try:
        os.kill(pid, 0)
    except PermissionError:
        return True  # another user's live process
    except (OSError, OverflowError):  # ProcessLookupError: no such process
        return False
    return True


def remove_stale_segments(shm_dir: str | Path = SHM_DIR) -> list[Path]:
    """Delete (best effort) this user's unilab blocks and semaphores in ``shm_dir`` whose owner pid is not alive; a pid
    that exists (reused or not) keeps its files. Only Linux exposes them as files: elsewhere nothing is done. Runs in
    another pid namespace sharing this /dev/shm (containers with ``--ipc=host``) look dead from here; those need their
    own /dev/shm, docker's default."""
    removed: list[Path] = []
    try:
        entries = list(os.scandir(shm_dir))
    except OSError:
        return removed
    uid = os.getuid() if hasattr(os, "getuid") else None
    for entry in entries:
        m = _STALE_RE.match(entry.name)
        if not m or pid_alive(int(m.group(1))):
            continue
        with contextlib.suppress(OSError):
            if uid is None or entry.stat(follow_symlinks=False).st_uid == uid:
                os.unlink(entry.path)
                removed.append(Path(entry.path))
    return removed


def _layout(spec: Spec) -> tuple[dict[str, int], int]:
    offsets, off = {}, 0
    for name, (shape, dtype) in spec.items():
        off = (off + _ALIGN - 1) // _ALIGN * _ALIGN
        offsets[name] = off
        off += int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    return offsets, max(off, 1)


class SharedArrays:
    """A set of named arrays over one shared-memory block."""

    def __init__(self, shm: shared_memory.SharedMemory, spec: Spec, owner: bool):
        self._shm = shm
        self.spec = spec
        self.owner = owner
        offsets, _ = _layout(spec)
        self.arrays: dict[str, np.ndarray] = {
            name: np.ndarray(shape, dtype=dtype, buffer=shm.buf, offset=offsets[name])
            for name, (shape, dtype) in spec.items()
        }

    @classmethod
    def create(cls, spec: Spec) -> SharedArrays:
        """Allocate a zeroed block for ``spec`` (this process unlinks it on close)."""
        _, size = _layout(spec)
        for _ in range(100):
            # a name that says which process made it, unilab_<pid>_<8 hex> (fits macOS's 31 chars)
            name = f"{_PREFIX}{os.getpid()}_{secrets.token_hex(4)}"
            try:
                shm = shared_memory.SharedMemory(name=name, create=True, size=size)
            except FileExistsError:
                continue
            break
        else:
            raise FileExistsError("cannot find a free shared-memory name")
        out = cls(shm, spec, owner=True)
        for a in out.arrays.values():
            a[...] = 0
        return out

    @classmethod
    def attach(cls, handle: dict[str, Any]) -> SharedArrays:
        """Attach to a block made elsewhere, from its :meth:`handle`."""
        # the creator owns the block's lifetime. track=False (Python >= 3.13) keeps this side out of it; before
        # 3.13 a spawned child shares its parent's resource tracker, where the block is registered already
        try:
            shm = shared_memory.SharedMemory(name=handle["name"], track=False)  # type: ignore[call-arg]
        except TypeError:
            shm = shared_memory.SharedMemory(name=handle["name"])
        return cls(shm, handle["spec"], owner=False)

    def handle(self) -> dict[str, Any]:
        """Picklable description that :meth:`attach` accepts."""
        return {"name": self._shm.name, "spec": self.spec}

    def __getitem__(self, name: str) -> np.ndarray:
        return self.arrays[name]

    def close(self) -> None:
        self.arrays.clear()
        with contextlib.suppress(BufferError):  # a view is still alive somewhere; the OS frees it at exit
            self._shm.close()
        if self.owner:
            with contextlib.suppress(FileNotFoundError):
                self._shm.unlink()


def transport_spec(num_envs: int, spec: EnvSpec, counter_names: Sequence[str]) -> Spec:
    """The shared arrays, all from the step record: ``SLOTS`` copies of every env-written field
    (incl. ``final_<obs>``), one of every learner-written field (the action), and the counters."""
    out: Spec = {f.name: ((SLOTS, num_envs, *f.shape), f.dtype) for f in env_outputs(spec.record)}
    out.update({f.name: ((num_envs, *f.shape), f.dtype) for f in spec.record if f.writer != "env"})
    out["counters"] = ((len(counter_names),), "float64")
    return out


def step_slot(shm: SharedArrays, spec: EnvSpec, k: int) -> dict[str, np.ndarray]:
    """The env-written arrays of step ``k`` (views of slot ``k % SLOTS``)."""
    return {f.name: shm[f.name][k % SLOTS] for f in env_outputs(spec.record)}

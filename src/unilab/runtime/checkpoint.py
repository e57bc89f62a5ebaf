"""Atomic, verifiable checkpoints: ``model_<iter>.pt`` is either complete or absent.

A checkpoint is a torch.save zip archive whose zip comment is the sha256 of the bytes before it
(``unilab-sha256:<hex>``), so ``torch.load`` still reads it as it is. ``load_checkpoint`` checks the hash first: torch
checks no CRC, so flipped bits would silently change weights. Files without the comment (written before the hash
existed) load unchecked. A save goes to a temp file, fsynced and renamed over the target: a full or unwritable disk
leaves the previous checkpoint intact.

Only tensors and plain data are stored (:func:`to_plain`) and read (``torch.load(weights_only=True)``): pickled objects
can run arbitrary code when loaded, so a file that needs any other class is refused (``UntrustedCheckpoint``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import hashlib
import os
import pickle
import re
import struct
import sys
import time
import zipfile
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import OmegaConf

from unilab.runtime.shm import pid_alive

_MODEL_RE = re.compile(r"^model_(\d+)\.pt$")
_TEMP_RE = re.compile(r"^\.model_\d+\.pt\.(\d+)\.tmp$")

_EOCD_SIG = b"PK\x05\x06"  # zip "end of central directory" record, 22 bytes + comment
_EOCD_LEN = 22
_HASH_TAG = b"unilab-sha256:"
_TRAILER_LEN = len(_HASH_TAG) + 64  # the zip comment: tag + sha256 hex
_STALE_TEMP_AGE_S = 60.0


class CheckpointWriteError(OSError):
    """A checkpoint could not be written; ``errno``/``strerror`` are the OS error's."""

    def __init__(self, path: Path, cause: BaseException):
        code = getattr(cause, "errno", None)
        if code is not None:
            super().__init__(code, getattr(cause, "strerror", None) or os.strerror(code))
            self.reason = f"[Errno {code}] {self.strerror}"
        else:
            super().__init__(str(cause))
            self.reason = str(cause) or type(cause).__name__
        self.path = Path(path)

    def __str__(self) -> str:
        return f"could not write checkpoint {self.path}: {self.reason}"


class UntrustedCheckpoint(ValueError):
    """The file holds more than tensors and plain data; it was not loaded (loading it could run code)."""


def to_plain(obj: Any, key: str = "payload") -> Any:
    """``obj`` as the tensors and plain data ``torch.load(weights_only=True)`` reads back (configs, NumPy values, paths
    and enums converted). Anything else is a TypeError naming ``key``, its place in the payload: better a failed save
    now than a checkpoint that cannot be loaded later."""
    if obj is None or isinstance(obj, (bool, int, float, str, torch.Tensor, torch.dtype, torch.device, torch.Size)):
        return obj
    if isinstance(obj, dict):
        out = {k: to_plain(v, f"{key}.{k}") for k, v in obj.items()}
        if type(obj) in (dict, OrderedDict) and all(out[k] is v for k, v in obj.items()):
            return obj  # unchanged: a module state_dict keeps its OrderedDict and _metadata (versions)
        return out
    if type(obj) in (list, tuple):
        seq = [to_plain(v, f"{key}[{i}]") for i, v in enumerate(obj)]
        return obj if all(a is b for a, b in zip(seq, obj)) else type(obj)(seq)
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return torch.from_numpy(np.array(obj))  # a copy: the payload must not alias live buffers
    if isinstance(obj, enum.Enum):
        return to_plain(obj.value, key)
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return to_plain(dataclasses.asdict(obj), key)
    if type(obj).__module__.startswith("omegaconf"):
        return to_plain(OmegaConf.to_container(obj, resolve=True), key)
    if isinstance(obj, tuple):  # a namedtuple: its fields, as a plain tuple
        return tuple(to_plain(v, f"{key}[{i}]") for i, v in enumerate(obj))
    raise TypeError(f"checkpoint entry {key} is a {type(obj).__module__}.{type(obj).__qualname__}; a checkpoint holds "
                    "only tensors and plain data (dict, list, tuple, number, str, bool, None)")


def checkpoint_path(run_dir: str | Path, iteration: int) -> Path:
    return Path(run_dir) / f"model_{iteration}.pt"


class _HashingWriter:
    """What torch.save streams into: sha256 of all but the last 2 bytes (the zip comment length, which the trailer
    replaces). ``error`` keeps the OSError of a failed write, which torch.save turns into a RuntimeError ("enforce fail
    ... unexpected pos")."""

    def __init__(self, f: Any):
        self._f = f
        self._sha = hashlib.sha256()
        self._tail = b""
        self.error: OSError | None = None

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        try:
            self._f.write(view)
        except OSError as err:
            self.error = err
            raise
        if len(view) >= 2:
            self._sha.update(self._tail)
            self._sha.update(view[:-2])
            self._tail = bytes(view[-2:])
        else:
            joined = self._tail + bytes(view)
            self._sha.update(joined[:-2])
            self._tail = joined[-2:]
        return len(view)

    def flush(self) -> None:
        self._f.flush()

    def trailer(self) -> bytes:
        """The bytes that replace the archive's last 2: comment length and the hash comment."""
        if self._tail != b"\0\0":
            raise ValueError("torch.save wrote no zip archive ending in an empty comment; cannot add the hash")
        return struct.pack("<H", _TRAILER_LEN) + _HASH_TAG + self._sha.hexdigest().encode("ascii")


def save_checkpoint(path: str | Path, payload: dict[str, Any], keep: int = 0) -> Path:
    """Write ``payload`` (made :func:`to_plain`, sha256 trailer added) to a temp file, fsync, rename over ``path``;
    then, with ``keep`` > 0, delete all but the newest ``keep`` ``model_<iter>.pt`` there (never ``path``). A failed
    write is a ``CheckpointWriteError`` (an OSError naming ``path`` and the errno), leaving ``path`` as it was and no
    temp file."""
    path = Path(path)
    if keep < 0:
        raise ValueError(f"keep must be >= 0 (0 keeps all), got {keep}")
    payload = to_plain(payload)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    writer: _HashingWriter | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temps(path.parent)
        with open(tmp, "wb") as f:
            writer = _HashingWriter(f)
            torch.save(payload, writer)
            trailer = writer.trailer()
            f.seek(-2, os.SEEK_END)
            f.write(trailer)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as err:
        raise CheckpointWriteError(path, err) from err
    except RuntimeError as err:  # torch.save's wrapper around a failed write
        if writer is None or writer.error is None:
            raise
        raise CheckpointWriteError(path, writer.error) from err
    finally:
        try:
            tmp.unlink(missing_ok=True)
        except OSError as err:
            print(f"unilab: warning: could not remove temp file {tmp}: {err}", file=sys.stderr, flush=True)
    _fsync_dir(path.parent)
    if keep:
        try:
            prune_checkpoints(path.parent, keep, protect=path)
        except OSError as err:  # housekeeping: the new checkpoint is written
            print(f"unilab: warning: could not prune old checkpoints in {path.parent}: {err}",
                  file=sys.stderr, flush=True)
    return path


def _fsync_dir(directory: Path) -> None:
    """Make the rename durable (best effort; not every platform/filesystem allows it)."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def remove_stale_temps(run_dir: str | Path) -> None:
    """Delete (best effort) the ``.model_<iter>.pt.<pid>.tmp`` files of killed saves: this process's own (its saves are
    sequential), or those of a pid not alive on this host and unmodified for a minute (a writer on another host sharing
    the filesystem may still be writing)."""
    try:
        entries = list(os.scandir(run_dir))
    except OSError:
        return
    now = time.time()
    for entry in entries:
        if not (m := _TEMP_RE.match(entry.name)):
            continue
        pid = int(m.group(1))
        with contextlib.suppress(OSError):
            if pid == os.getpid() or (not pid_alive(pid) and now - entry.stat().st_mtime >= _STALE_TEMP_AGE_S):
                os.unlink(entry.path)


def _models(run_dir: str | Path) -> list[tuple[int, Path]]:
    """(iteration, path) of every ``model_<iter>.pt`` in ``run_dir``, in directory order."""
    return [(int(m.group(1)), p) for p in Path(run_dir).iterdir() if (m := _MODEL_RE.match(p.name))]


def prune_checkpoints(run_dir: Path, keep: int, protect: Path) -> None:
    """Delete all but the newest ``keep`` (> 0) ``model_<iter>.pt`` in ``run_dir`` (never ``protect``)."""
    for _, p in sorted(_models(run_dir), reverse=True)[keep:]:
        if p.name == protect.name:
            continue
        try:
            p.unlink(missing_ok=True)
        except OSError as err:
            print(f"unilab: warning: could not delete old checkpoint {p}: {err}", file=sys.stderr, flush=True)


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The ``model_<iter>.pt`` with the highest iteration in ``run_dir``, or None."""
    found = _models(run_dir)
    return max(found, key=lambda f: f[0])[1] if found else None


def resolve_checkpoint(spec: str | Path) -> Path:
    """A checkpoint file, or a run directory's latest checkpoint; clear errors otherwise."""
    p = Path(spec).expanduser()
    if p.is_dir():
        remove_stale_temps(p)  # a killed run's half-written save (can be 100+ MB)
        if (found := latest_checkpoint(p)) is None:
            raise FileNotFoundError(f"no model_<iter>.pt checkpoint in run directory {p}")
        return found
    if not p.exists():
        raise FileNotFoundError(f"checkpoint {p} does not exist")
    return p


def verify_checkpoint(path: str | Path) -> bool:
    """Check the sha256 trailer of ``path``: True if verified, False if it has none (old format), ValueError naming the
    file when the hash does not match or the trailer is damaged."""
    path = Path(path)
    with open(path, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        tail_len = min(size, _EOCD_LEN + _TRAILER_LEN)
        f.seek(size - tail_len)
        tail = f.read(tail_len)
        if not (tail_len == _EOCD_LEN + _TRAILER_LEN and (tail.startswith(_EOCD_SIG) or _HASH_TAG[:8] in tail)):
            return False  # a plain torch.save file (or too short: torch.load reports it)
        comment = tail[_EOCD_LEN:]
        stored = comment[len(_HASH_TAG):]
        if not (tail.startswith(_EOCD_SIG) and tail[_EOCD_LEN - 2:_EOCD_LEN] == struct.pack("<H", _TRAILER_LEN)
                and comment.startswith(_HASH_TAG) and re.fullmatch(rb"[0-9a-f]{64}", stored)):
            raise ValueError(f"checkpoint {path} is corrupt (its sha256 trailer is damaged)")
        h = hashlib.sha256()
        remaining = size - _TRAILER_LEN - 2
        f.seek(0)
        while remaining > 0:
            chunk = f.read(min(1 << 20, remaining))
            if not chunk:
                raise ValueError(f"checkpoint {path} is corrupt (it changed while being read)")
            h.update(chunk)
            remaining -= len(chunk)
    if h.hexdigest().encode("ascii") != stored:
        raise ValueError(f"checkpoint {path} is corrupt: its sha256 does not match the one stored when it was written "
                         "(flipped bits on disk or in a copy); use an older checkpoint")
    return True


def _refusal_detail(err: BaseException) -> str:
    """The one informative line of torch's multi-paragraph weights_only error (which global it met)."""
    boilerplate = ("Weights only load failed", "Check the documentation", "Please file an issue")
    for line in str(err).splitlines():
        line = line.strip()
        if line and not line.startswith(boilerplate):
            return line if len(line) <= 200 else line[:197] + "..."
    return type(err).__name__


def load_checkpoint(spec: str | Path, map_location: str | torch.device = "cpu") -> tuple[dict[str, Any], Path]:
    """Load a checkpoint (file or run dir); a truncated, corrupt or foreign file raises ValueError, one that needs more
    than tensors and plain data :class:`UntrustedCheckpoint` (a ValueError) with nothing stored in it run."""
    path = resolve_checkpoint(spec)
    try:
        verify_checkpoint(path)
        archive = zipfile.is_zipfile(path)
    except OSError as err:
        raise ValueError(f"checkpoint {path} is unreadable ({type(err).__name__}: {err})") from err
    if not archive:  # torch would try it as a legacy pickle and report a refused one
        raise ValueError(f"checkpoint {path} is unreadable: truncated, corrupt or not a checkpoint (not the whole zip "
                         "archive torch.save writes)")
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as err:  # weights_only met a class or call it does not allow
        raise UntrustedCheckpoint(
            f"checkpoint {path} refused: it holds more than tensors and plain data ({_refusal_detail(err)}); "
            "loading it could run code, so nothing in it was loaded"
        ) from err
    except Exception as err:  # torch raises many kinds for a bad file
        raise ValueError(f"checkpoint {path} is unreadable ({type(err).__name__}: {err})") from err
    if not isinstance(payload, dict) or "agent" not in payload or "iteration" not in payload:
        raise ValueError(f"{path} is not a unilab checkpoint (no 'agent'/'iteration' entries)")
    check_payload(payload, path)
    return payload, path


MAX_DEPTH = 32
"""Nesting of a checkpoint's plain data (config, agent state) past which it is refused: ours nest under ten deep, and
the code that reads a config recurses (a deeper one would end in a RecursionError far from the file's name)."""


def check_payload(payload: dict[str, Any], path: Path) -> None:
    """The entries every reader takes as given have their types (ValueError naming the file and the entry):
    ``iteration`` an integer >= 0, ``agent`` and ``config`` (if there) mappings, nothing nested deeper than
    :data:`MAX_DEPTH`. Whether the agent state rebuilds an agent is :func:`load_agent`'s to say."""
    it = payload["iteration"]
    if isinstance(it, bool) or not isinstance(it, int) or it < 0:
        raise ValueError(f"checkpoint {path}: entry 'iteration' is {it!r}, expected an integer >= 0")
    for key in ("agent", "config"):
        if payload.get(key) is not None and not isinstance(payload[key], dict):
            raise ValueError(f"checkpoint {path}: entry {key!r} is a {type(payload[key]).__name__}, expected a "
                             "mapping")
    stack = [(payload, 0, "")]
    while stack:  # no recursion: the nesting is what is checked
        node, depth, where = stack.pop()
        if depth > MAX_DEPTH:
            raise ValueError(f"checkpoint {path}: entry {where.lstrip('.')[:120]}... nests more than {MAX_DEPTH} "
                             "levels deep; it is not a unilab checkpoint")
        if isinstance(node, dict):
            stack += [(v, depth + 1, f"{where}.{k}") for k, v in node.items()]
        elif isinstance(node, (list, tuple)):
            stack += [(v, depth + 1, f"{where}[{i}]") for i, v in enumerate(node)]


def load_agent(payload: dict[str, Any], path: Path | None = None, device: str | torch.device = "cpu") -> Any:
    """The FastSAC agent a checkpoint (``path``, for the message) holds; ValueError when its state does not rebuild
    one."""
    from unilab.algo.sac.agent import FastSAC  # noqa: PLC0415 - lazy: the checkpoint module is light

    try:
        return FastSAC.from_checkpoint(payload["agent"], device=device)
    except (KeyError, TypeError, ValueError, RuntimeError, AttributeError) as err:
        raise ValueError(f"checkpoint{'' if path is None else ' ' + str(path)}: the agent cannot be rebuilt "
                         f"({type(err).__name__}: {err})") from err


def stored_run_config(payload: dict[str, Any], path: Path,
                      task_overrides: dict[str, Any] | None = None) -> tuple[dict[str, Any], Any]:
    """The run config a checkpoint was trained with, ``task.*`` overrides applied (a moved clip or model), and its
    typed task config (built once here, where its paths are checked); ValueError naming the file when it stores
    none."""
    raw = payload.get("config")
    if not isinstance(raw, dict) or not isinstance(raw.get("task"), dict) or "name" not in raw["task"]:
        raise ValueError(f"checkpoint {path} stores no run config (config.task.name): it cannot rebuild its task")
    raw = {**raw, "task": apply_task_overrides(raw["task"], task_overrides)}
    from unilab.tasks.registry import task_config  # noqa: PLC0415 - lazy: the registry pulls in numpy

    cfg = task_config(raw["task"]["name"], raw["task"])
    check = getattr(cfg, "check_paths", None)
    try:  # a clip or model that moved since training: now, with how to say where it went
        if check is not None:
            check()
    except ValueError as err:
        if any(str(err).startswith(key) for key in task_overrides or {}):  # the user's own new place
            raise
        raise ValueError(f"{err}; checkpoint {path} was trained with it: if it moved, give its new place after the "
                         "checkpoint as task.KEY=VALUE, e.g. task.motion_files=[/new/place/clip.npz] or "
                         "task.robot.model_xml=/new/place/robot.xml") from None
    return raw, cfg


def apply_task_overrides(task_raw: dict[str, Any], overrides: dict[str, Any] | None) -> dict[str, Any]:
    """A copy of ``task_raw`` with ``{"task.a.b": v}`` overrides set as nested keys (``task.`` prefix optional)."""
    out = dict(task_raw)
    for key, value in (overrides or {}).items():
        parts = key.removeprefix("task.").split(".")
        node = out
        for part in parts[:-1]:
            child = node.get(part)
            node[part] = child = dict(child) if isinstance(child, dict) else {}
            node = child
        node[parts[-1]] = value
    return out

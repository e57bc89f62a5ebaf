"""Output files: paths checked before long work (a bad path fails in a second, not after a rollout), JSON written
atomically. Light on purpose: benchmarks import it without torch."""

from __future__ import annotations

import json
import os
from pathlib import Path


def check_writable(path: str | os.PathLike, what: str = "output") -> Path:
    """Make ``path``'s folder and write a scratch file in it; OSError naming ``what`` and ``path`` when impossible."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"cannot write the {what} to {path}: it is a directory")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        probe = path.with_name(f".{path.name}.{os.getpid()}.probe")
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        raise OSError(f"cannot write the {what} to {path} ({type(err).__name__}: {err.strerror or err})") from err
    return path


def write_json(path: str | os.PathLike, doc: dict, indent: int | None = 2) -> Path:
    """Write ``doc`` to ``path`` atomically (parents created); ``indent`` None: compact (large traces)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=indent))
    os.replace(tmp, path)
    return path

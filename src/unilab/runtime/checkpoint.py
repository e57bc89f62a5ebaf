"""Atomic checkpoints: ``model_<iter>.pt`` is either complete or absent."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import torch

_MODEL_RE = re.compile(r"^model_(\d+)\.pt$")


def checkpoint_path(run_dir: str | Path, iteration: int) -> Path:
    return Path(run_dir) / f"model_{iteration}.pt"


def save_checkpoint(path: str | Path, payload: dict[str, Any]) -> Path:
    """Write ``payload`` with torch.save to a temp file, fsync, then rename over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            torch.save(payload, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The ``model_<iter>.pt`` with the highest iteration in ``run_dir``, or None."""
    best: tuple[int, Path] | None = None
    for p in Path(run_dir).iterdir():
        m = _MODEL_RE.match(p.name)
        if m and (best is None or int(m.group(1)) > best[0]):
            best = (int(m.group(1)), p)
    return best[1] if best else None


def resolve_checkpoint(spec: str | Path) -> Path:
    """A checkpoint file, or a run directory's latest checkpoint; clear errors otherwise."""
    p = Path(spec).expanduser()
    if p.is_dir():
        found = latest_checkpoint(p)
        if found is None:
            raise FileNotFoundError(f"no model_<iter>.pt checkpoint in run directory {p}")
        return found
    if not p.exists():
        raise FileNotFoundError(f"checkpoint {p} does not exist")
    return p


def load_checkpoint(spec: str | Path, map_location: str | torch.device = "cpu") -> tuple[dict[str, Any], Path]:
    """Load a checkpoint (file or run dir); a truncated or foreign file raises ValueError."""
    path = resolve_checkpoint(spec)
    try:
        payload = torch.load(path, map_location=map_location, weights_only=False)
    except Exception as err:  # noqa: BLE001 - torch raises many kinds for a bad file
        raise ValueError(f"checkpoint {path} is unreadable ({type(err).__name__}: {err})") from err
    if not isinstance(payload, dict) or "agent" not in payload or "iteration" not in payload:
        raise ValueError(f"{path} is not a unilab checkpoint (no 'agent'/'iteration' entries)")
    return payload, path

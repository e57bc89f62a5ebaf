"""Learner device selection."""

from __future__ import annotations

import torch


def resolve_device(spec: str | torch.device | None = "auto") -> torch.device:
    """Turn a device spec into a torch.device.

    "auto" (or None) picks CUDA when ``torch.cuda.is_available()``, else CPU. Explicit CUDA specs fail loudly when no
    GPU is present instead of silently training on the CPU.
    """
    if spec is None or spec == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(spec)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"invalid device spec {spec!r}: {exc}") from exc
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {spec!r} requested but CUDA is not available")
    return device

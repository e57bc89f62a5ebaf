"""Learner device selection."""

from __future__ import annotations

import torch


def resolve_device(spec: str | torch.device | None = "auto") -> torch.device:
    """A torch.device: "auto" (or None) is CUDA when available, else CPU; an explicit CUDA spec without a GPU is a
    ValueError, not silent training on the CPU."""
    if spec is None or spec == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(spec)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"invalid device spec {spec!r}: {exc}") from exc
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {spec!r} requested but CUDA is not available")
    return device

"""Where unilab keeps downloaded assets and measured tuning results."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """``$UNILAB_CACHE``, default ``~/.cache/unilab`` (created on demand)."""
    root = Path(os.environ.get("UNILAB_CACHE") or Path.home() / ".cache" / "unilab").expanduser()
    root.mkdir(parents=True, exist_ok=True)
    return root

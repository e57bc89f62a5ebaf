"""Where unilab keeps downloaded assets and measured tuning results."""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV_VAR = "UNILAB_CACHE"


def cache_dir() -> Path:
    """The cache root: ``$UNILAB_CACHE`` if set, else ``~/.cache/unilab`` (may not exist yet)."""
    env = os.environ.get(CACHE_ENV_VAR)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "unilab"

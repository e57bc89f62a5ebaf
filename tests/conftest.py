"""Shared fixtures: the built-in humanoid and an isolated unilab cache."""

from __future__ import annotations

import mujoco
import pytest

from unilab.assets.builtin import load_humanoid


@pytest.fixture(scope="session")
def humanoid() -> mujoco.MjModel:
    return load_humanoid()


@pytest.fixture
def tmp_cache(tmp_path, monkeypatch):
    """Point $UNILAB_CACHE at a fresh directory for one test."""
    d = tmp_path / "cache"
    monkeypatch.setenv("UNILAB_CACHE", str(d))
    return d

"""Fetch, verify and cache holosoma's published policies, shipped in the ``holosoma-inference`` wheel.

The Apache-2.0 wheel ``holosoma-inference==0.1.3`` carries holosoma's trained policies (trained in IsaacSim) as ONNX
files in holosoma's deploy format (:mod:`unilab.interop.holosoma_onnx`)::

    <cache>/holosoma_inference-0.1.3/
        manifest.json                            # relative path -> size, sha256
        models/wbt/fastsac_g1_29dof_dancing.onnx, ppo_g1_29dof_dancing.onnx
        models/loco/g1_29dof/fastsac_g1_29dof.onnx, ppo_g1_29dof.onnx
        models/loco/t1_29dof/fastsac_t1_29dof.onnx, ppo_t1_29dof.onnx
    <cache>/downloads/holosoma_inference-0.1.3-py3-none-any.whl

As for the G1 assets (:mod:`unilab.assets.holosoma`): the wheel is downloaded with the user's own ``pip`` (their
index configuration applies), checked against its pinned sha256, and only ``models/`` is extracted (never installed)
into a temporary directory renamed into place; every load checks the files' sizes against the manifest.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from unilab import cache as unilab_cache
from unilab.assets.holosoma import (
    AssetError,
    PinnedWheel,
    acquire_wheel,
    build_tree,
    cache_lock,
    check_cache,
    extract_members,
)

PACKAGE = "holosoma-inference"
VERSION = "0.1.3"
WHEEL_NAME = f"holosoma_inference-{VERSION}-py3-none-any.whl"
WHEEL_SHA256 = "3c11fd4595bc82921d4c44f77357667828761548c1ce74782ea77937b2ab0ef7"
WHEEL_ENV_VAR = "UNILAB_HOLOSOMA_INFERENCE_WHEEL"
MODELS_PREFIX = "holosoma_inference/models/"
"""Wheel members extracted (this prefix becomes ``models/``)."""
PUBLISHED = {
    "fastsac_g1_29dof_dancing": "models/wbt/fastsac_g1_29dof_dancing.onnx",
    "ppo_g1_29dof_dancing": "models/wbt/ppo_g1_29dof_dancing.onnx",
    "fastsac_g1_29dof": "models/loco/g1_29dof/fastsac_g1_29dof.onnx",
    "ppo_g1_29dof": "models/loco/g1_29dof/ppo_g1_29dof.onnx",
    "fastsac_t1_29dof": "models/loco/t1_29dof/fastsac_t1_29dof.onnx",
    "ppo_t1_29dof": "models/loco/t1_29dof/ppo_t1_29dof.onnx",
}
"""The published policies by name (``unilab-eval --onnx NAME``): their path in the cache."""
_MANIFEST_FORMAT = 1


def wheel() -> PinnedWheel:
    """The pinned holosoma-inference wheel (read at call time: tests pin a fake one)."""
    return PinnedWheel(PACKAGE, VERSION, WHEEL_NAME, WHEEL_SHA256, WHEEL_ENV_VAR, "holosoma's published policies",
                       "~9 MB", "unilab-assets fetch --policies")


def policies_dir(cache_dir: str | os.PathLike | None = None) -> Path:
    """Directory holding the extracted policies (may not exist yet)."""
    base = Path(cache_dir).expanduser() if cache_dir is not None else unilab_cache.cache_dir()
    return base / f"holosoma_inference-{VERSION}"


def _is_model(member: str) -> bool:
    return member.startswith(MODELS_PREFIX) and member.endswith(".onnx")


def ensure_policies(cache_dir: str | os.PathLike | None = None, *, force: bool = False, progress: bool = True,
                    wheel_path: str | os.PathLike | None = None,
                    downloader: Callable[[Path], Path] | None = None) -> Path:
    """The extracted policy directory, built if missing or damaged (or ``force``); ``wheel_path``: a local wheel
    (also ``$UNILAB_HOLOSOMA_INFERENCE_WHEEL`` or ``<cache>/downloads/``); ``downloader``: ``f(dest) -> wheel``
    (default: pip). AssetError says what to download and where to put it when the wheel cannot be had."""
    cdir = Path(cache_dir).expanduser() if cache_dir is not None else None
    root = policies_dir(cdir)
    if not force and not check_cache(root, required=PUBLISHED.values()):
        return root
    with cache_lock(root.parent):
        if not force and not check_cache(root, required=PUBLISHED.values()):
            return root
        got = acquire_wheel(wheel(), cdir, downloader, Path(wheel_path) if wheel_path else None, progress)

        def fill(tmp: Path) -> dict:
            files = extract_members(got, tmp, progress, _is_model, "holosoma_inference/", (MODELS_PREFIX,))
            missing = sorted(set(PUBLISHED.values()) - set(files))
            if missing:
                raise AssetError(f"{got} lacks {missing}")
            return {"format": _MANIFEST_FORMAT, "source": WHEEL_NAME, "wheel_sha256": WHEEL_SHA256, "files": files}

        build_tree(root, fill)
    if progress:
        print(f"unilab: holosoma's published policies ready in {root}", file=sys.stderr, flush=True)
    return root


def published_policy(name: str, cache_dir: str | os.PathLike | None = None, *, progress: bool = True) -> Path:
    """The cached file of published policy ``name`` (a key of :data:`PUBLISHED`, with or without ``.onnx``),
    fetched on first use; ValueError listing the names for an unknown one."""
    key = Path(name).name.removesuffix(".onnx")
    if key not in PUBLISHED:
        raise ValueError(f"{name!r} is neither an ONNX file nor a published holosoma policy; published: "
                         f"{', '.join(PUBLISHED)}")
    return ensure_policies(cache_dir, progress=progress) / PUBLISHED[key]

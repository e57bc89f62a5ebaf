"""The Unitree G1 29-DoF model and its motion clips, from the holosoma asset cache."""

from __future__ import annotations

import os
from pathlib import Path

import mujoco

from unilab.assets.holosoma import MOTION_PREFIX, SCENES, WHEEL_DATA_PREFIX, ensure_assets, manifest_paths

SCENE_REL = SCENES["g1"]
MOTIONS_REL = MOTION_PREFIX[len(WHEEL_DATA_PREFIX):]
# Clips recorded with a manipulated object (e.g. "..._w_obj.npz") carry an extra object body and a motion that only
# makes sense with the object present, which the robot-only scene lacks.
OBJECT_CLIP_MARKER = "_w_obj"
# Clips performed on terrain (e.g. "motion_crawl_slope.npz", which ends on a slope 0.4 m above the floor) cannot be
# tracked in the flat-plane scene.
TERRAIN_CLIP_MARKERS = ("_slope",)


def assets_root(cache_dir: str | os.PathLike | None = None, *, progress: bool = True) -> Path:
    """Root of the extracted G1 assets, fetching them on first use."""
    return ensure_assets(cache_dir, progress=progress).root


def scene_xml_path(cache_dir: str | os.PathLike | None = None) -> Path:
    """The G1 29-DoF scene on a flat plane (robot + floor), fetching assets if needed."""
    return assets_root(cache_dir) / SCENE_REL


def motion_paths(cache_dir: str | os.PathLike | None = None, *, include_object_clips: bool = False,
                 include_terrain_clips: bool = False) -> list[Path]:
    """The whole-body-tracking clips (BeyondMimic npz), sorted by name, without those with an object (``*_w_obj*``:
    the joint layout matches, but the object is not in the scene) or on terrain (``*_slope*``: the scene is a flat
    plane) unless ``include_object_clips`` / ``include_terrain_clips``."""
    return [p for p in manifest_paths(assets_root(cache_dir), MOTIONS_REL, (".npz",))
            if (include_object_clips or OBJECT_CLIP_MARKER not in p.name)
            and (include_terrain_clips or not any(m in p.name for m in TERRAIN_CLIP_MARKERS))]


def load_model(cache_dir: str | os.PathLike | None = None) -> mujoco.MjModel:
    """Compile the G1 scene into an MjModel."""
    return mujoco.MjModel.from_xml_path(str(scene_xml_path(cache_dir)))

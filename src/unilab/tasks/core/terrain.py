"""Uneven ground: a grid of square tiles, each flat, rough or with low obstacles, as one MuJoCo height field
(holosoma 0.0.3's ``terrain_locomotion_mix``: ``config_values/terrain.py``, ``simulator/shared/terrain.py``).

A tile's kind is drawn by the configured proportions and its difficulty ``d`` from the configured levels;
heights sit at or below 0 (holosoma's tiles are carved downwards):

    flat            0
    rough           every sample uniform in [-(2 m + 0.025), -0.025] m, m = 0.025 d / 0.9
    low_obstacles   0, with 30 square pits a tenth of the tile wide, 0.03 d / 0.9 m deep

The field is centred on the world origin; the model's own floor plane moves below its lowest point, so the
robot stands on the field (its feet collide with it through contype/conaffinity). :func:`terrain_height` gives the
ground height under a point (bilinear in the samples), for the foot-height term and the spawn.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit

KINDS = ("flat", "rough", "low_obstacles")


@dataclass(frozen=True)
class Terrain:
    """The height samples ``heights[iy, ix]`` (m) at ``origin + (ix, iy) * resolution``, and the tiles."""

    heights: np.ndarray
    origin: np.ndarray  # (2,) world x, y of sample (0, 0)
    resolution: float
    tile_centres: np.ndarray  # (tiles, 2) world x, y of each tile's centre
    tile_kinds: np.ndarray  # (tiles,) index into KINDS

    @property
    def lookup(self) -> tuple[np.ndarray, float, float, float]:
        """What :func:`terrain_height` reads."""
        return self.heights, float(self.origin[0]), float(self.origin[1]), float(self.resolution)


FLAT = (np.zeros((0, 0)), 0.0, 0.0, 1.0)  # the terrain_height lookup of flat ground at z = 0


def make_terrain(cfg: Any, rng: np.random.Generator) -> Terrain:
    """The tiles of ``cfg`` (a terrain config), drawn with ``rng``."""
    n = int(round(cfg.tile_size / cfg.resolution))
    heights = np.zeros((cfg.rows * n, cfg.cols * n))
    p = np.array([cfg.flat, cfg.rough, cfg.low_obstacles], dtype=np.float64)
    kinds = rng.choice(len(KINDS), size=cfg.rows * cfg.cols, p=p / p.sum())
    for t, kind in enumerate(kinds):
        i, j = divmod(t, cfg.cols)
        d = float(rng.choice(cfg.difficulties))
        tile = heights[i * n:(i + 1) * n, j * n:(j + 1) * n]
        if KINDS[kind] == "rough":
            m = 0.025 * d / 0.9
            tile[:] = rng.uniform(-2.0 * m - 0.025, -0.025, tile.shape)
        elif KINDS[kind] == "low_obstacles":
            size = n // 10
            for _ in range(30):
                y, x = rng.integers(0, n - size, 2)
                tile[y:y + size, x:x + size] = -0.03 * d / 0.9
    origin = -0.5 * np.array([cfg.cols * n - 1, cfg.rows * n - 1]) * cfg.resolution
    ii, jj = np.divmod(np.arange(cfg.rows * cfg.cols), cfg.cols)
    centres = origin + (np.stack([jj, ii], axis=1) * n + 0.5 * (n - 1)) * cfg.resolution
    return Terrain(heights, origin, float(cfg.resolution), centres, kinds)


def add_to_spec(spec: Any, terrain: Terrain, floor: str = "floor") -> None:
    """Add ``terrain`` to an ``MjSpec`` as the height field geom ``terrain``; lower any geom ``floor`` under it."""
    import mujoco  # noqa: PLC0415 - only when a model is built

    h = terrain.heights
    low, span = float(h.min()), max(float(h.max() - h.min()), 1e-3)
    ny, nx = h.shape
    field = spec.add_hfield()
    field.name = "terrain"
    field.nrow, field.ncol = ny, nx
    # x, y half-extents from the outer samples' centres; the elevation data is normalised to [0, 1] x span
    field.size = [0.5 * (nx - 1) * terrain.resolution, 0.5 * (ny - 1) * terrain.resolution, span, 0.1]
    field.userdata = ((h - low) / span).reshape(-1).tolist()
    geom = spec.worldbody.add_geom()
    geom.name = "terrain"
    geom.type = mujoco.mjtGeom.mjGEOM_HFIELD
    geom.hfieldname = "terrain"
    geom.pos = [float(terrain.origin[0]) + field.size[0], float(terrain.origin[1]) + field.size[1], low]
    geom.rgba = [0.45, 0.45, 0.5, 1.0]
    for g in spec.geoms:
        if g.name == floor:
            g.pos = [g.pos[0], g.pos[1], low - 0.5]


@njit(cache=True, fastmath=False, inline="always")
def terrain_height(x, y, heights, x0, y0, res):
    """The ground height under world ``(x, y)``: bilinear in the samples (clamped at the edge); 0 for :data:`FLAT`."""
    ny, nx = heights.shape
    if ny == 0:
        return 0.0
    fx = min(max((x - x0) / res, 0.0), nx - 1.0)
    fy = min(max((y - y0) / res, 0.0), ny - 1.0)
    ix, iy = min(int(fx), nx - 2), min(int(fy), ny - 2)
    tx, ty = fx - ix, fy - iy
    a = heights[iy, ix] * (1.0 - tx) + heights[iy, ix + 1] * tx
    b = heights[iy + 1, ix] * (1.0 - tx) + heights[iy + 1, ix + 1] * tx
    return a * (1.0 - ty) + b * ty

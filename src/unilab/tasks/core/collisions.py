"""Robot self-collisions off, as holosoma's simulators set them when a robot asset has
``enable_self_collisions=False``."""

from __future__ import annotations

import mujoco
import numpy as np

ROBOT_CONAFFINITY = 2  # a robot geom's conaffinity without self-collisions: it meets environment geoms only


def robot_bodies(model: mujoco.MjModel, body: str) -> np.ndarray:
    """Ids of the bodies of the robot that ``body`` belongs to (those under the same child of the world)."""
    bid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, body)
    if bid < 0:
        raise ValueError(f"no body {body!r} in the model")
    root = model.body_rootid[bid]
    return np.flatnonzero(np.asarray(model.body_rootid) == root)


def disable_self_collisions(model: mujoco.MjModel, body: str) -> int:
    """Let the robot of ``body`` touch the environment only; returns how many geoms changed.

    holosoma's MuJoCo scene rule: a robot geom with the default contype 1 / conaffinity 1 gets conaffinity 2,
    so two robot geoms never collide (1 & 2 = 0 both ways) while a robot geom and a world geom of conaffinity
    1 still do. Geoms set otherwise (visual ones, 0 / 0) and explicit ``<pair>`` contacts are left alone.
    """
    geoms = np.flatnonzero(np.isin(np.asarray(model.geom_bodyid), robot_bodies(model, body)))
    default = geoms[(model.geom_contype[geoms] == 1) & (model.geom_conaffinity[geoms] == 1)]
    model.geom_conaffinity[default] = ROBOT_CONAFFINITY
    return int(default.size)

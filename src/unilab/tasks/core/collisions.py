"""A robot's bodies, those a config regex names, and its self-collisions off, as holosoma's simulators set them
when a robot asset has ``enable_self_collisions=False``."""

from __future__ import annotations

import re

import mujoco
import numpy as np

ROBOT_CONAFFINITY = 2  # a robot geom's conaffinity without self-collisions: it meets environment geoms only


def robot_bodies(model: mujoco.MjModel, body: str) -> np.ndarray:
    """Ids of the bodies of the robot that ``body`` belongs to (those under the same child of the world)."""
    bid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, body)
    if bid < 0:
        raise ValueError(f"no body {body!r} in the model")
    return np.flatnonzero(np.asarray(model.body_rootid) == model.body_rootid[bid])


def matching_bodies(model: mujoco.MjModel, body: str, pattern: str, key: str, full: bool = True) -> np.ndarray:
    """Ids of the bodies of ``body``'s robot whose names match the regex ``pattern`` (``full``: re.fullmatch, else
    re.match); ValueError naming the config ``key`` when none does."""
    rx = re.compile(pattern)
    match = rx.fullmatch if full else rx.match
    ids = [b for b in robot_bodies(model, body) if match(model.body(b).name)]
    if not ids:
        raise ValueError(f"{key} {pattern!r} matches no body of the robot")
    return np.array(ids, dtype=np.int64)


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

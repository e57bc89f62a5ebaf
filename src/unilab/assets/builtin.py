"""Models that ship inside the unilab wheel, so benchmarks and tests need no download."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import mujoco


def humanoid_xml_path() -> Path:
    """Path of the built-in 21-DoF humanoid MJCF (15 motors, floor contacts)."""
    return Path(str(resources.files("unilab.assets") / "models" / "humanoid.xml"))


def load_humanoid() -> mujoco.MjModel:
    """Compile the built-in humanoid."""
    return mujoco.MjModel.from_xml_path(str(humanoid_xml_path()))


def pendulum_xml_path() -> Path:
    """Path of the built-in torque-limited pendulum MJCF."""
    return Path(str(resources.files("unilab.assets") / "models" / "pendulum.xml"))

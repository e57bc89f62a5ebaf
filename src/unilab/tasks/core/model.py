"""The robot model a task starts from: the user's MJCF or a built-in robot's scene, with the task's timestep and
integrator."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

INTEGRATORS = ("euler", "implicit", "implicitfast", "rk4")
"""``task.integrator`` names (MuJoCo's ``mjINT_<NAME>``); this module imports MuJoCo only to load a model, so
configs validate without it."""


def load_task_model(cfg: Any, edit: Callable[[Any], None] | None = None) -> Any:
    """``cfg.robot.model_xml`` (a user's MJCF) or the scene of the built-in robot ``cfg.robot.asset``, with
    ``cfg.sim_dt`` and ``cfg.integrator`` (None keeps the model's); ``edit(spec)`` changes its ``mujoco.MjSpec``
    before it compiles (e.g. terrain)."""
    import mujoco  # noqa: PLC0415 - see INTEGRATORS

    path = model_path(cfg.robot)
    if edit is None:
        model = mujoco.MjModel.from_xml_path(str(path))
    else:
        spec = mujoco.MjSpec.from_file(str(path))
        edit(spec)
        model = spec.compile()
    model.opt.timestep = cfg.sim_dt
    if cfg.integrator is not None:
        model.opt.integrator = getattr(mujoco.mjtIntegrator, f"mjINT_{cfg.integrator.upper()}")
    return model



def model_path(robot: Any) -> Path:
    """The MJCF of ``robot`` (a :class:`~unilab.tasks.core.robot_config.RobotConfig`): its ``model_xml``, else its
    built-in asset's scene (fetched into the cache if needed)."""
    if robot.model_xml:
        path = Path(robot.model_xml).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"task.robot.model_xml {path} does not exist")
        return path
    from unilab.assets import holosoma  # noqa: PLC0415 - only for the built-in assets

    return holosoma.scene_xml_path(robot.asset)

"""No dead code in src/ and scripts/: vulture finds every function, class, attribute and variable nothing uses
(tests do not count: a function only tests call goes, or moves into the tests)."""

from __future__ import annotations

import re
from pathlib import Path

import vulture

from unilab.tasks.core import driver

ROOT = Path(__file__).resolve().parent.parent

# names vulture cannot see used, and why (vulture matches names, not places)
WHITELIST = {
    # reached by name, not by Python code
    "BatchEnvPool": "sim/physics.BACKENDS names it in a string",
    "PendulumEnv": "tasks/registry.TASKS names it in a string",
    "MotionTrackingEnv": "tasks/registry.TASKS names it in a string",
    "LocomotionEnv": "tasks/registry.TASKS names it in a string",
    "t1_locomotion": "tasks/registry.TASKS names the preset function in a string",
    "step_driver": "the generated driver's function, compiled by name (tasks/core/driver.py)",
    "offs": "the driver template's observation offsets, read by the generated lines",
    "_worker_main": "render/video.py's subprocess runs it by name",
    "__getattr__": "algo/sac/__init__.py: a module's lazy attributes (Python calls it)",
    "pd_gains": "tasks/core/randomization: a config field its term reads by name",
    "action_delay": "tasks/core/randomization: a config field its term reads by name",
    "get_cache_path": "Numba's cache locator interface (tasks/core/terms.py)",
    "get_source_stamp": "Numba's cache locator interface",
    "get_disambiguator": "Numba's cache locator interface",
    "from_function": "Numba's cache locator interface",
    # attributes set for a library that reads them
    "found_inf": "torch's fused optimizer step reads it (algo/sac/agent.py)",
    "THREADING_LAYER": "numba.config, read by Numba",
    "producer_name": "onnx.ModelProto fields (deploy/export.py)",
    "producer_version": "onnx.ModelProto fields",
    "intra_op_num_threads": "onnxruntime.SessionOptions (scripts/deploy/sim2sim.py)",
    "castshadow": "MuJoCo visual options (render/video.py)",
    "transparent": "MuJoCo visual options",
    "trackbodyid": "mujoco.MjvCamera fields",
    "azimuth": "mujoco.MjvCamera fields",
    "distance": "mujoco.MjvCamera fields",
    "elevation": "mujoco.MjvCamera fields",
    "nrow": "mujoco.MjSpec height field (tasks/core/terrain.py)",
    "ncol": "mujoco.MjSpec height field",
    "userdata": "mujoco.MjSpec height field",
    "hfieldname": "mujoco.MjSpec geom",
    "rgba": "mujoco.MjSpec geom",
    # holosoma's runner calls these of scripts/reference/holosoma_fast_sac.py's stand-ins for its env and logger
    "robot_config": "holosoma's FastSAC agent reads it",
    "observation_manager": "holosoma's FastSAC agent reads it",
    "logging_helper": "holosoma's FastSAC agent reads it",
    "record_learn_time": "holosoma's logging interface",
    "update_episode_stats": "holosoma's logging interface",
    "post_epoch_logging": "holosoma's logging interface",
    "dones": "holosoma's logging interface's parameters",
    "infos": "holosoma's logging interface's parameters",
    "extra_log_dicts": "holosoma's logging interface's parameters",
    "onnx_file_path": "holosoma's export interface's parameter",
    # bench/holosoma_sac.py: what holosoma's FastSAC modules, loaded from its wheel, read and call
    "__path__": "the import system reads it of the stand-in packages holosoma's modules import from",
    "TensorDict": "holosoma's replay buffer imports it from the tensordict stand-in",
    "symmetry_utils": "holosoma's FastSAC agent reads it when use_symmetry is on",
    "augment_observations": "holosoma's SymmetryUtils interface, called by its FastSAC agent",
    "augment_actions": "holosoma's SymmetryUtils interface, called by its FastSAC agent",
    # data and interfaces that users and tests read
    "tile_kinds": "tasks/core/terrain.Terrain: each tile's kind",
    "nbytes": "algo/sac/replay.ReplayBuffer: its memory",
    "read_metadata": "deploy/export: reads an exported policy's metadata",
    "METADATA_KEYS": "deploy/export: the metadata every export carries",
    "ROBOT_KEYS": "deploy/export: the metadata every joint-target task's export adds",
    "RANDOM_START_KEYS": "the tracking evaluation: the keys of random_start_metrics",
}


def test_nothing_in_src_or_scripts_is_unused(tmp_path):
    # the step driver's template calls the kernels it is generated around: scan it as code
    template = tmp_path / "driver_template.py"
    template.write_text(re.sub(r"\{\w+\}", "pass", driver.TEMPLATE))
    v = vulture.Vulture(ignore_names=list(WHITELIST))
    v.scavenge([str(ROOT / "src"), str(ROOT / "scripts"), str(template)])
    unused = [f"{Path(item.filename).relative_to(ROOT) if ROOT in Path(item.filename).parents else item.filename}:"
              f"{item.first_lineno}: {item.message}" for item in v.get_unused_code()]
    assert not unused, "unused code (remove it, or move what only tests use into the tests):\n" + "\n".join(unused)

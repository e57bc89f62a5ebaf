"""Motion-tracking task config: per-joint override rule (exact name beats pattern) and task.motion_files forms."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tiny_robot import ROBOT_XML, ZERO_NOISE, tiny_clip

from unilab.cli.config import ConfigError, compose_config, to_run_spec
from unilab.tasks.core.joints import match_joint_values
from unilab.tasks.core.robot_config import RobotConfig
from unilab.tasks.g1_motion_tracking.config import (
    MotionTrackingConfig,
    ResetConfig,
)
from unilab.tasks.g1_motion_tracking.env import MotionTrackingEnv, task_motion_files
from unilab.tasks.registry import task_config

# the 29 joints of the Unitree G1 29-DoF model, in model order
G1_JOINTS = [
    f"{side}_{j}_joint" for side in ("left", "right")
    for j in ("hip_pitch", "hip_roll", "hip_yaw", "knee", "ankle_pitch", "ankle_roll")
] + ["waist_yaw_joint", "waist_roll_joint", "waist_pitch_joint"] + [
    f"{side}_{j}_joint" for side in ("left", "right")
    for j in ("shoulder_pitch", "shoulder_roll", "shoulder_yaw", "elbow", "wrist_roll", "wrist_pitch", "wrist_yaw")
]


@pytest.fixture
def tiny(tmp_path):
    """A config of the tiny two-joint robot (j_a, j_b) with one clip; returns (cfg, clip path)."""
    xml = tmp_path / "robot.xml"
    xml.write_text(ROBOT_XML)
    clip = tmp_path / "clip.npz"
    np.savez(clip, **tiny_clip(60))
    cfg = MotionTrackingConfig(
        robot=RobotConfig(model_xml=str(xml), default_joint_pos={"j_a": 0.1}, kp={".*": 20.0}, kd={".*": 1.0}),
        motion_files=[str(clip)], tracked_bodies=["base", "upper", "tip"], anchor_body="base",
        end_effector_bodies=["tip"], max_episode_length_s=None, reset=ResetConfig(noise=ZERO_NOISE),
    )
    cfg.rewards.undesired_contacts.weight = 0.0  # the tiny robot has no acceleration-stage sensor for cfrc_ext
    return cfg, clip


def _env(cfg: MotionTrackingConfig) -> MotionTrackingEnv:
    env = MotionTrackingEnv(cfg, 2)
    env.pool.close()
    return env


# --- point 7: an exact joint name beats a pattern --------------------------------------------------


def test_exact_joint_key_beats_an_earlier_pattern(tiny):
    cfg, _ = tiny
    cfg.robot.kp = {".*": 20.0, "j_b": 55.0}  # a Hydra `+task.robot.kp.j_b=55` lands after the pattern
    cfg.robot.kd = {"j_.*": 1.0, "j_a": 3.0}
    cfg.robot.default_joint_pos = {".*": 0.3, "j_b": -0.2}
    env = _env(cfg)
    assert env.kp.tolist() == [20.0, 55.0]
    assert env.kd.tolist() == [3.0, 1.0]
    assert env.default_joint_pos.tolist() == [0.3, -0.2]
    # the gain really reaches the simulated servo
    assert env.model.actuator_gainprm[:, 0].tolist() == [20.0, 55.0]
    assert env.model.actuator_biasprm[:, 2].tolist() == [-3.0, -1.0]


def test_two_patterns_with_different_values_are_an_error_naming_both(tiny):
    cfg, _ = tiny
    cfg.robot.kp = {"j_.*": 20.0, ".*_b": 30.0}
    with pytest.raises(ValueError, match=r"kp: joint 'j_b' matches both 'j_\.\*' \(20\) and '\.\*_b' \(30\)"):
        _env(cfg)


def test_two_patterns_with_equal_values_are_fine(tiny):
    cfg, _ = tiny
    cfg.robot.kp = {"j_.*": 20.0, ".*_b": 20.0}
    assert _env(cfg).kp.tolist() == [20.0, 20.0]


def test_a_misspelt_joint_name_is_an_error(tiny):
    cfg, _ = tiny
    cfg.robot.kd = {".*": 1.0, "j_c": 9.0}
    with pytest.raises(ValueError, match=r"kd: key\(s\) \['j_c'\] name no joint"):
        _env(cfg)


def test_a_non_numeric_value_names_its_key():
    with pytest.raises(ValueError, match="kp: key 'j_a' needs a number, got 'stiff'"):
        match_joint_values({"j_a": "stiff"}, ["j_a"], None, "kp")


def test_command_line_knee_override_wins_on_g1_joints():
    """The issue's command line: ``+task.robot.kp.left_knee_joint=1e9`` must reach the left knee only."""
    cfg = to_run_spec(compose_config(["task=g1_motion_tracking", "+task.robot.kp.left_knee_joint=1e9"])).task_cfg
    assert isinstance(cfg, MotionTrackingConfig)  # typed once, here; the collector gets this object
    kp = match_joint_values(cfg.robot.kp, G1_JOINTS, None, "kp")
    assert kp[G1_JOINTS.index("left_knee_joint")] == 1e9
    assert kp[G1_JOINTS.index("right_knee_joint")] == pytest.approx(99.10)


def test_packaged_g1_maps_have_no_conflicting_patterns():
    cfg = to_run_spec(compose_config(["task=g1_motion_tracking"])).task_cfg
    kp = match_joint_values(cfg.robot.kp, G1_JOINTS, None, "kp")
    kd = match_joint_values(cfg.robot.kd, G1_JOINTS, None, "kd")
    q0 = match_joint_values(cfg.robot.default_joint_pos, G1_JOINTS, 0.0, "default_joint_pos")
    assert kp[G1_JOINTS.index("left_wrist_roll_joint")] == pytest.approx(14.25)
    assert kd[G1_JOINTS.index("right_wrist_yaw_joint")] == pytest.approx(1.068)
    assert q0[G1_JOINTS.index("right_shoulder_roll_joint")] == pytest.approx(-0.2)


# --- point 9: task.motion_files as one path ------------------------------------------------------


@pytest.mark.parametrize("as_type", [str, Path])
def test_one_motion_file_path_is_a_list_of_one(tiny, as_type):
    cfg, clip = tiny
    one = MotionTrackingConfig(**{**cfg.__dict__, "motion_files": as_type(clip)})
    assert one.motion_files == [str(clip)]
    env = _env(one)
    assert env.motion.num_clips == 1 and env.motion.files == [clip]


def test_motion_files_set_after_construction_is_still_one_path(tiny):
    cfg, clip = tiny
    cfg.motion_files = str(clip)
    assert task_motion_files(cfg) == [clip]


def test_command_line_single_motion_file(tmp_path):
    clip = tmp_path / "walk.npz"
    clip.write_bytes(b"")
    cfg = to_run_spec(compose_config(["task=g1_motion_tracking", f"task.motion_files={clip}"])).task_cfg
    assert cfg.motion_files == [str(clip)]
    assert task_motion_files(cfg) == [clip]


def test_a_missing_motion_file_on_the_command_line_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match=r"task.motion_files\[0\]=.*nope.npz: no such file"):
        to_run_spec(compose_config(["task=g1_motion_tracking", f"task.motion_files={tmp_path / 'nope.npz'}"]))


@pytest.mark.parametrize("value, where", [(5, "task.motion_files"), ({"a": "b.npz"}, "task.motion_files"),
                                          (["/a.npz", 3], r"task.motion_files\[1\]")])
def test_bad_motion_files_name_the_key(value, where):
    with pytest.raises(ValueError, match=where + r" must be a path"):
        task_config("g1_motion_tracking", {"motion_files": value})


def test_an_empty_motion_files_list_is_refused_not_replaced_by_the_builtin_clips():
    with pytest.raises(ConfigError, match=r"task.motion_files=\[\] lists no clips"):
        to_run_spec(compose_config(["task=g1_motion_tracking", "task.motion_files=[]"]))


def test_bad_motion_files_on_the_command_line_is_a_config_error():
    with pytest.raises(ConfigError, match="task.motion_files must be a path or a list of paths"):
        to_run_spec(compose_config(["task=g1_motion_tracking", "task.motion_files=5"]))

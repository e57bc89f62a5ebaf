"""A tiny self-made robot for motion-tracking tests (no download): its MJCF, clips, task config, and teleport."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from unilab.tasks.core.robot_config import RobotConfig
from unilab.tasks.g1_motion_tracking.config import (
    ContactTerm,
    MotionTrackingConfig,
    ObsNoiseConfig,
    RandomizationConfig,
    ResetConfig,
    ResetNoiseConfig,
    RewardsConfig,
    TerminationsConfig,
)

ROBOT_XML = """
<mujoco model="tiny_tracker">
  <compiler angle="radian"/>
  <option timestep="0.002"/>
  <worldbody>
    <geom name="floor" type="plane" size="0 0 0.05"/>
    <body name="base" pos="0 0 1">
      <freejoint name="root"/>
      <geom type="box" size="0.1 0.1 0.1" mass="1"/>
      <body name="upper" pos="0 0 0.2">
        <joint name="j_a" type="hinge" axis="0 1 0" range="-2 2"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" mass="0.5"/>
        <body name="tip" pos="0.3 0 0">
          <joint name="j_b" type="hinge" axis="0 0 1" range="-2 2"/>
          <geom type="sphere" size="0.05" mass="0.2"/>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor name="m_a" joint="j_a" ctrlrange="-20 20"/>
    <motor name="m_b" joint="j_b" ctrlrange="-10 10"/>
  </actuator>
</mujoco>
"""
ZERO_NOISE = ResetNoiseConfig(root_pos=[0, 0, 0], root_rpy=[0, 0, 0], root_lin_vel=[0, 0, 0],
                              root_ang_vel=[0, 0, 0], joint_pos=0.0)


def tiny_clip(T=60, fps=50):
    t = np.arange(T) / fps
    jp = np.zeros((T, 9))
    jp[:, 0] = 0.2 * t
    jp[:, 2] = 1.0
    yaw = 0.5 * t
    jp[:, 3] = np.cos(yaw / 2)
    jp[:, 6] = np.sin(yaw / 2)
    jp[:, 7] = 0.6 * np.sin(2 * t)
    jp[:, 8] = 0.4 * np.cos(3 * t)
    jv = np.zeros((T, 8))
    jv[:, 0] = 0.2
    jv[:, 5] = 0.5
    jv[:, 6] = 1.2 * np.cos(2 * t)
    jv[:, 7] = -1.2 * np.sin(3 * t)
    return dict(fps=np.array([fps]), joint_pos=jp, joint_vel=jv, joint_names=np.array(["j_a", "j_b"]))


def tiny_task_config(tmp_path: Path) -> MotionTrackingConfig:
    """The tiny robot's task config, its model and two clips written into ``tmp_path``."""
    xml = tmp_path / "robot.xml"
    xml.write_text(ROBOT_XML)
    clips = []
    for i, T in enumerate((60, 45)):
        path = tmp_path / f"clip{i}.npz"
        np.savez(path, **tiny_clip(T))
        clips.append(str(path))
    return MotionTrackingConfig(
        robot=RobotConfig(model_xml=str(xml), default_joint_pos={"j_a": 0.1}, kp={".*": 20.0}, kd={".*": 1.0}),
        motion_files=clips, tracked_bodies=["base", "upper", "tip"], anchor_body="base", end_effector_bodies=["tip"],
        max_episode_length_s=None, reset=ResetConfig(noise=ZERO_NOISE),
        # the settings these tests were written for (the task's defaults before the holosoma FastSAC recipe)
        policy_obs="privileged", obs_noise=ObsNoiseConfig(0.0, 0.0, 0.0, 0.0, 0.0, 0.0), action_scale=1.0,
        action_bound_from_joint_range=False, reward_times_dt=False,
        terminations=TerminationsConfig(anchor_height=0.25),
        randomization=RandomizationConfig(enabled=False),  # exact reference states (tests/test_randomization.py)
        # the tiny robot has no sensor that makes MuJoCo compute contact forces (tests/test_g1_recipe.py)
        rewards=RewardsConfig(undesired_contacts=ContactTerm(0.0)),
    )


def teleport(env, modify=None):
    """Replace physics by writing the next reference frame (optionally modified) into the pool."""

    def fake_step(ctrl, substeps=1):
        ref = env.motion.lookup(env.clip, env.frame + 1)
        qpos, qvel = ref.qpos.copy(), ref.qvel.copy()
        if modify is not None:
            modify(qpos, qvel)
        env.pool.reset(np.arange(env.num_envs), qpos, qvel)
        return env.pool.bad_envs

    env.pool.step = fake_step

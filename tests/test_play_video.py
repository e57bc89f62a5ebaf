"""play's video: the reference ghost and the text of the motion-tracking task, the pendulum without them."""

from __future__ import annotations

import dataclasses

import imageio.v3 as iio
import numpy as np
import pytest
from tiny_robot import teleport

from unilab.algo.sac.agent import FastSAC
from unilab.algo.sac.config import SACConfig
from unilab.runtime.checkpoint import save_checkpoint
from unilab.runtime.config import PlayConfig, SimConfig
from unilab.runtime.play import play
from unilab.tasks import registry
from unilab.tasks.g1_motion_tracking.env import MotionTrackingEnv
from unilab.tasks.pendulum.config import PendulumConfig
from unilab.tasks.registry import make_env

W, H = 160, 120


def test_tracking_env_reference_and_text(tiny_cfg):
    env = MotionTrackingEnv(tiny_cfg, 2, seed=4)
    env.reset()
    ref = env.reference_qpos(1)
    np.testing.assert_array_equal(ref, env.motion.qpos[env.state.ref_index[1]])
    np.testing.assert_allclose(env.render_qpos(1), ref, atol=1e-12)  # reset (no noise) puts it on the reference
    assert env.body_error_mm(1) == pytest.approx(0.0, abs=1e-6)
    clip, frame = int(env.clip[1]), int(env.frame[1])
    last = int(env.motion.num_frames[clip]) - 1
    assert env.overlay_text(1) == f"clip{clip}\nframe {frame}/{last}  body err 0 mm"

    def shift(qpos, qvel):
        qpos[:, 2] += 0.25  # every body 250 mm above its reference

    teleport(env, shift)
    env.step(np.zeros((2, env.action_dim), dtype=np.float32))
    assert env.body_error_mm(1) == pytest.approx(250.0, abs=1e-3)
    assert env.overlay_text(1).endswith("body err 250 mm")
    assert f"frame {frame + 1}/" in env.overlay_text(1)
    np.testing.assert_allclose(env.render_qpos(1)[2], env.reference_qpos(1)[2] + 0.25, atol=1e-9)
    env.close()


def test_pendulum_has_no_reference():
    env = make_env("pendulum", PendulumConfig(), 2)
    env.reset()
    assert env.reference_qpos(0) is None and env.overlay_text(0) is None
    env.close()


def _checkpoint(tmp_path, task: dict, env) -> str:
    """A checkpoint of an untrained (tiny) policy for ``task``: play needs no trained weights."""
    agent = FastSAC(SACConfig(actor_hidden_dims=[8], critic_hidden_dims=[8]), obs_dim=env.obs_dim,
                    critic_obs_dim=env.critic_obs_dim, action_dim=env.action_dim, device="cpu")
    payload = {"config": {"task": task, "sim": dataclasses.asdict(SimConfig())}, "agent": agent.state_dict(),
               "iteration": 0}
    path = tmp_path / "run" / "model_0.pt"
    path.parent.mkdir()
    save_checkpoint(path, payload)
    return str(path)


def _text_box(frames: np.ndarray) -> np.ndarray:
    """Per frame: does the top-left corner hold the darkened label box with light letters?"""
    corner = frames[:, 2:H // 5, 2:W // 3].astype(np.int16)
    return ((corner.max(axis=-1) < 90).mean(axis=(1, 2)) > 0.3) & ((corner.min(axis=-1) > 150).any(axis=(1, 2)))


def test_play_films_the_tracking_ghost_and_text(tiny_cfg, gl_backend, tmp_path, monkeypatch):
    monkeypatch.setenv("MUJOCO_GL", gl_backend)
    # the tiny robot's config as is (a stored dict would be merged into the G1 defaults' joint tables); the
    # checkpoint's config is built where its paths are checked (runtime.checkpoint.stored_run_config)
    monkeypatch.setattr(registry, "task_config", lambda name, values: tiny_cfg)
    env = MotionTrackingEnv(tiny_cfg, 1)
    ckpt = _checkpoint(tmp_path, {"name": "g1_motion_tracking"}, env)
    env.close()
    res = play(ckpt, num_envs=1, steps=4, width=W, height=H, ghost="side", out=str(tmp_path / "side.mp4"))
    frames = iio.imread(res.video).astype(np.int16)
    assert frames.shape == (5, H, W, 3)  # the reset frame and 4 steps
    assert _text_box(frames).all()
    # the ghost's blue (the tiny robot, its floor and the background are grey or black), right of the robot
    blue = frames[..., 2] > frames[..., 0] + 40
    blue[:, :H // 5, :W // 3] = False  # not the label
    cols = np.nonzero(blue)[2]
    assert cols.size > 20 * 5 and cols.mean() > W / 2


def test_pendulum_play_still_films(gl_backend, tmp_path, monkeypatch):
    monkeypatch.setenv("MUJOCO_GL", gl_backend)
    env = make_env("pendulum", PendulumConfig(), 1)
    ckpt = _checkpoint(tmp_path, dataclasses.asdict(PendulumConfig()), env)
    env.close()
    res = play(ckpt, num_envs=1, steps=3, width=W, height=H, out=str(tmp_path / "p.mp4"))  # ghost on by default
    frames = iio.imread(res.video)
    assert frames.shape == (4, H, W, 3) and frames.std() > 1.0
    assert not _text_box(frames).any()  # the pendulum has no text


def test_play_rejects_an_unknown_ghost_mode():
    with pytest.raises(ValueError, match="ghost must be one of overlay, side, off"):
        PlayConfig(ghost="beside")

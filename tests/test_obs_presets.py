"""Actor observation presets (task.policy_obs): pieces, widths, noise per piece, the critic keeps everything."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from unilab.tasks.g1_motion_tracking.config import MotionTrackingConfig, ObsNoiseConfig
from unilab.tasks.g1_motion_tracking.env import MotionTrackingEnv
from unilab.tasks.g1_motion_tracking.observations import CRITIC_OBS, POLICY_OBS, POLICY_PRESETS, obs_layout

DEPLOYABLE = ("ref_joint_pos", "ref_joint_vel", "anchor_ori_b", "base_ang_vel", "joint_pos_rel", "joint_vel",
              "last_action")
HOLOSOMA_NOISE = {"anchor_ori": 0.05, "base_ang_vel": 0.2, "joint_pos": 0.01, "joint_vel": 0.5}


def test_deployable_is_the_default_and_has_exactly_the_named_pieces():
    assert MotionTrackingConfig().policy_obs == "deployable"
    nj, nb = 29, 14
    lay = obs_layout(nj, nb, "deployable")
    widths = {n: s.stop - s.start for n, s in lay.policy_slices.items()}
    assert tuple(widths) == DEPLOYABLE
    assert widths == {"ref_joint_pos": nj, "ref_joint_vel": nj, "anchor_ori_b": 6, "base_ang_vel": 3,
                      "joint_pos_rel": nj, "joint_vel": nj, "last_action": nj}
    assert lay.policy_dim == 5 * nj + 9
    # the critic holds every piece whatever the actor set: the same dim and pieces as the privileged layout
    priv = obs_layout(nj, nb, "privileged")
    assert set(lay.slices) == set(priv.slices) == {t.name for t in POLICY_OBS + CRITIC_OBS}
    assert lay.critic_dim == priv.critic_dim == 5 * nj + 15 + 9 * nb
    assert list(lay.slices)[: len(DEPLOYABLE)] == list(DEPLOYABLE)  # the policy is the critic's first entries
    assert priv.policy_dim == 5 * nj + 15 and tuple(priv.policy_slices) == tuple(t.name for t in POLICY_OBS)


def test_noise_defaults_are_holosomas_and_the_scale_follows_the_preset():
    noise = ObsNoiseConfig()
    assert {k: getattr(noise, k) for k in HOLOSOMA_NOISE} == HOLOSOMA_NOISE
    lay = obs_layout(3, 2, "deployable")
    scale = lay.noise_scale(noise)
    s = lay.policy_slices
    want = np.zeros(lay.policy_dim)
    want[s["anchor_ori_b"]] = 0.05
    want[s["base_ang_vel"]] = 0.2
    want[s["joint_pos_rel"]] = 0.01
    want[s["joint_vel"]] = 0.5
    np.testing.assert_array_equal(scale, want)


def test_unknown_preset_is_an_error_naming_the_key():
    with pytest.raises(ValueError, match="task.policy_obs must be one of deployable, privileged, got 'mocap'"):
        MotionTrackingConfig(policy_obs="mocap")
    assert set(POLICY_PRESETS) == {"deployable", "privileged"}


def _env(cfg, preset, noise, n=64):
    cfg = dataclasses.replace(cfg, policy_obs=preset, obs_noise=noise)
    env = MotionTrackingEnv(cfg, n, seed=4)
    return env, env.reset()


def test_deployable_env_noise_only_on_policy_and_critic_unchanged(tiny_cfg):
    noise = ObsNoiseConfig(anchor_pos=0.25, anchor_ori=0.05, base_lin_vel=0.3, base_ang_vel=0.2, joint_pos=0.01,
                           joint_vel=0.5)
    dep, obs = _env(tiny_cfg, "deployable", noise)
    priv, pobs = _env(tiny_cfg, "privileged", ObsNoiseConfig(0, 0, 0, 0, 0, 0))
    assert dep._driver is not priv._driver  # one generated driver per preset
    assert dep.obs_dim == 5 * 2 + 9 and dep.critic_obs_dim == priv.critic_obs_dim
    # the same start states (the noise is drawn after the resets): every critic piece equals the privileged env's
    for name in priv.layout.slices:
        np.testing.assert_array_equal(obs["critic_obs"][:, dep.layout.slices[name]],
                                      pobs["critic_obs"][:, priv.layout.slices[name]], err_msg=name)
    # the policy is the critic's first entries plus uniform noise of each piece's level, nothing elsewhere
    diff = obs["obs"].astype(np.float64) - obs["critic_obs"][:, : dep.obs_dim]
    levels = {"anchor_ori_b": 0.05, "base_ang_vel": 0.2, "joint_pos_rel": 0.01, "joint_vel": 0.5}
    for name, sl in dep.layout.policy_slices.items():
        d = np.abs(diff[:, sl])
        if name in levels:
            assert d.max() <= levels[name] * (1 + 1e-5) + 1e-6, name
            assert d.max() > 0.5 * levels[name], name  # 64 envs x >= 2 entries: the draws span the range
        else:
            assert not d.any(), name

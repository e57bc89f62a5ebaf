"""SACConfig is the algo group's schema: presets, overrides and bad values."""

from __future__ import annotations

import dataclasses

import pytest

from unilab.algo.sac import SACConfig
from unilab.cli.config import ConfigError, compose_config, to_run_spec


def test_command_line_overrides_reach_the_typed_config():
    cfg = compose_config(["task=pendulum", "algo.num_envs=4096", "algo.distributional=true",
                          "algo.critic_hidden_dims=[64,32]"])
    sac = to_run_spec(cfg).algo
    assert isinstance(sac, SACConfig)
    assert sac.num_envs == 4096 and sac.distributional and sac.critic_hidden_dims == [64, 32]
    default = dataclasses.replace(sac, num_envs=4096, distributional=True, critic_hidden_dims=[768, 384, 192])
    assert default == SACConfig()


@pytest.mark.parametrize("override, match", [
    ("algo.gamma=abc", r"algo.gamma: 'abc' \(expected a number\)"),
    ("algo.obs_normalization=maybe", r"algo.obs_normalization: 'maybe' \(expected true or false\)"),
    ("algo.obs_normalization=no", r"algo.obs_normalization: 'no' \(expected true or false\)"),
    ("algo.num_envs=1.5", r"algo.num_envs: '1.5' \(expected an integer\)"),
    ("algo.actor_hidden_dims=[64,x]", r"algo.actor_hidden_dims\[1\]: 'x' \(expected an integer\)"),
    ("algo.target_entropy=low", r"algo.target_entropy: 'low' \(expected a number or null\)"),
])
def test_values_of_the_wrong_type_are_refused_naming_key_value_and_type(override, match):
    with pytest.raises(ConfigError, match=match):
        to_run_spec(compose_config(["task=pendulum", override]))


def test_target_entropy_default_scales_with_action_dim():
    assert SACConfig(target_entropy_scale=0.5).resolved_target_entropy(29) == pytest.approx(-14.5)
    assert SACConfig(target_entropy=-3.0).resolved_target_entropy(29) == -3.0


@pytest.mark.parametrize(
    "field,value,match",
    [
        ("num_envs", 0, "num_envs"),
        ("gamma", 1.5, "gamma"),
        ("tau", 0.0, "tau"),
        ("n_steps", 2000, "n_steps"),
        ("log_std_min", 1.0, "log_std_min"),
        ("activation", "gelu", "activation"),
        ("critic_hidden_dims", [], "critic_hidden_dims"),
    ],
)
def test_bad_values_raise_naming_the_field(field, value, match):
    with pytest.raises(ValueError, match=match):
        SACConfig(**{field: value})


def test_distributional_support_validated_and_unknown_keys_rejected():
    with pytest.raises(ValueError, match="v_min"):
        SACConfig(distributional=True, v_min=1.0, v_max=0.0)
    with pytest.raises(ValueError, match=r"unknown key algo.num_env; the keys there are: .*num_envs"):
        SACConfig.from_mapping({"num_env": 8})
    with pytest.raises(ValueError, match=r"algo.layer_norm: 'yes' \(expected true or false\)"):
        SACConfig.from_mapping({"layer_norm": "yes"})

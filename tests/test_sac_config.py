"""SACConfig and config/algo/sac.yaml stay in sync; bad values are rejected."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from omegaconf import OmegaConf

import unilab
from unilab.algo.sac import SACConfig

YAML = Path(unilab.__file__).parent / "config" / "algo" / "sac.yaml"


def test_yaml_mirrors_dataclass_defaults_exactly():
    yaml_values = OmegaConf.to_container(OmegaConf.load(YAML))
    assert list(yaml_values) == [f.name for f in dataclasses.fields(SACConfig)]
    assert yaml_values == SACConfig().to_dict()


def test_hydra_composes_yaml_with_cli_style_overrides():
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(YAML.parent), version_base=None):
        cfg = compose(config_name="sac", overrides=["num_envs=4096", "distributional=true", "critic_hidden_dims=[64,32]"])
    sac = SACConfig.from_mapping(OmegaConf.to_container(cfg))
    assert sac.num_envs == 4096 and sac.distributional and sac.critic_hidden_dims == [64, 32]
    # the structured form type-checks overrides
    merged = OmegaConf.merge(OmegaConf.structured(SACConfig), cfg)
    assert OmegaConf.to_object(merged) == sac


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
    with pytest.raises(ValueError, match=r"algo: unknown key\(s\)"):
        SACConfig.from_mapping({"num_env": 8})

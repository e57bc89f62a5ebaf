"""scripts/reference/holosoma_fast_sac.py: the view through which holosoma's learner drives a unilab env.

Its curve is the reference unilab's learner is judged against (docs/RECIPE.md), so the two conversions it makes
must be exact: holosoma's own bound formula on the view's joint limits gives unilab's ``b_j``, and the env
receives holosoma's bounded action divided by ``b_j``.
"""

from __future__ import annotations

import numpy as np
import torch
from script_modules import load_script

from unilab.sim.spec import FINAL


class RecordingEnv:
    """Three envs, two joints: records the action it is stepped with; env 1 times out, env 2 fails."""

    num_envs, action_dim, obs_dim, critic_obs_dim = 3, 2, 4, 5
    action_bound = np.array([1.05, 13.2])

    def __init__(self):
        self.received: list[np.ndarray] = []

    def buffers(self):
        out = {"obs": np.zeros((3, 4), np.float32), "critic_obs": np.zeros((3, 5), np.float32),
               "reward": np.zeros(3, np.float32), "terminated": np.zeros(3, bool), "truncated": np.zeros(3, bool)}
        out.update({FINAL + "obs": np.zeros((3, 4), np.float32), FINAL + "critic_obs": np.zeros((3, 5), np.float32)})
        return out

    def reset(self, out):
        out["obs"][:] = 1.0

    def step(self, action, out):
        self.received.append(action.copy())
        out["terminated"][:] = [False, False, True]
        out["truncated"][:] = [False, True, False]
        out[FINAL + "obs"][1] = 7.0


def holosoma_bounds(robot_config) -> np.ndarray:
    """holosoma's ``FastSACEnv._compute_action_boundaries``: the farthest limit from the default pose / scale."""
    lo = np.array(robot_config.dof_pos_lower_limit_list)
    hi = np.array(robot_config.dof_pos_upper_limit_list)
    q0 = np.array([robot_config.init_state.default_joint_angles.get(n, 0.0) for n in robot_config.dof_names])
    return np.maximum(np.abs(lo - q0), np.abs(hi - q0)) / robot_config.control.action_scale


def test_view_bounds_are_unilabs_and_the_env_gets_the_unit_action():
    script = load_script("reference/holosoma_fast_sac.py")
    env = RecordingEnv()
    view = script.EnvView(env)
    np.testing.assert_allclose(holosoma_bounds(view.robot_config), env.action_bound, rtol=1e-12)
    assert view.observation_manager.get_obs_dims() == {"actor_obs": 4, "critic_obs": 5}

    assert float(view.reset_all()["actor_obs"].sum()) == 12.0
    unit = np.array([[0.5, -0.25], [1.0, 0.0], [-1.0, 0.9]])
    obs, reward, done, info = view.step({"actions": torch.tensor(unit * env.action_bound, dtype=torch.float32)})
    np.testing.assert_allclose(env.received[0], unit, atol=1e-6)
    assert done.tolist() == [0, 1, 1] and info["time_outs"].tolist() == [0, 1, 0]
    assert float(info["final_observations"]["actor_obs"][1, 0]) == 7.0  # the time-out's bootstrap target
    assert view.ended == [1, 1] and view.env_steps == 3

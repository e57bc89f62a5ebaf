"""Actor log-probabilities, critic ensemble and the C51 projection."""

from __future__ import annotations

import math

import pytest
import torch

from unilab.algo.sac import Actor, CriticEnsemble, project_distribution


def _actor(obs_dim=3, action_dim=1, seed=0):
    torch.manual_seed(seed)
    return Actor(obs_dim, action_dim, [16, 16], log_std_min=-2.0, log_std_max=0.5)


def test_sampled_log_prob_equals_analytic_tanh_gaussian_density():
    actor = _actor(action_dim=3)
    obs = torch.randn(64, 3)
    torch.manual_seed(1)
    actions, log_prob, _ = actor.sample(obs)
    mean, log_std = actor.distribution_params(obs)
    # change of variables by hand: log N(atanh a; mu, sigma) - log(1 - a^2), summed over dims
    u = torch.atanh(actions.double())
    normal = torch.distributions.Normal(mean.double(), log_std.double().exp())
    expected = (normal.log_prob(u) - torch.log1p(-actions.double() ** 2)).sum(-1)
    assert torch.allclose(log_prob.double(), expected, atol=1e-3)
    assert torch.allclose(actor.log_prob(obs, actions).double(), expected, atol=1e-3)


def test_log_prob_is_a_density_matching_monte_carlo_histogram():
    actor = _actor(action_dim=1, seed=2)
    obs = torch.randn(1, 3)
    with torch.no_grad():
        torch.manual_seed(3)
        samples = actor.sample(obs.expand(200_000, 3))[0][:, 0]
        edges = torch.linspace(-1.0, 1.0, 21)
        grid = torch.linspace(-1.0 + 1e-4, 1.0 - 1e-4, 20_001)
        density = actor.log_prob(obs.expand(grid.shape[0], 3), grid.unsqueeze(1)).exp()
    # the density integrates to one over (-1, 1)
    assert torch.trapezoid(density, grid).item() == pytest.approx(1.0, abs=2e-3)
    for lo, hi in zip(edges[:-1], edges[1:]):
        inside = (grid >= lo) & (grid <= hi)
        mass = torch.trapezoid(density[inside], grid[inside]).item()
        freq = ((samples >= lo) & (samples < hi)).float().mean().item()
        assert freq == pytest.approx(mass, abs=4e-3), (lo.item(), hi.item())


def test_log_prob_stays_finite_for_saturated_actions():
    actor = _actor(action_dim=2)
    with torch.no_grad():
        actor.mean_head.bias.fill_(30.0)  # tanh saturates to exactly 1.0 in float32
    actions, log_prob, _ = actor.sample(torch.randn(8, 3))
    assert torch.isfinite(log_prob).all()
    assert actions.abs().max() <= 1.0


def test_actor_actions_in_range_and_deterministic_mode():
    actor = _actor(action_dim=4)
    obs = torch.randn(100, 3) * 10
    a = actor(obs)
    assert a.shape == (100, 4) and a.abs().max() <= 1.0
    assert torch.equal(actor(obs, deterministic=True), actor(obs, deterministic=True))
    _, log_std = actor.distribution_params(obs)
    assert log_std.min() >= -2.0 and log_std.max() <= 0.5


@pytest.mark.parametrize("distributional", [False, True])
def test_ensemble_members_are_independent_networks(distributional):
    torch.manual_seed(0)
    critic = CriticEnsemble(5, 2, [8, 8], num_q=3, distributional=distributional, num_atoms=11)
    obs, act = torch.randn(7, 5), torch.rand(7, 2)
    out = critic(obs, act)
    assert out.shape == ((3, 7, 11) if distributional else (3, 7))
    assert critic.q_values(obs, act).shape == (3, 7)
    # recompute member 1 by hand from its own slice of the stacked weights
    x = torch.cat([obs, act], -1)
    h = x
    layer_norms = [m for m in critic.net if type(m).__name__ == "EnsembleLayerNorm"]
    linears = [m for m in critic.net if type(m).__name__ == "EnsembleLinear"]
    for i, layer in enumerate(linears):
        h = h @ layer.weight[1] + layer.bias[1, 0]
        if i < len(layer_norms):
            ln = layer_norms[i]
            h = torch.nn.functional.layer_norm(h, (h.shape[-1],)) * ln.weight[1, 0] + ln.bias[1, 0]
            h = torch.nn.functional.silu(h)
    expected = h if distributional else h[:, 0]
    assert torch.allclose(out[1], expected, atol=1e-5)
    assert not torch.allclose(out[0], out[1])


def test_projection_preserves_mass_and_mean_inside_support():
    support = torch.linspace(-10.0, 10.0, 51)
    probs = torch.softmax(torch.randn(2, 16, 51) * 0.5, dim=-1)
    # keep r + gamma * z inside the support so nothing is clipped
    rewards = torch.rand(16) * 2.0 - 1.0
    discounts = torch.full((16,), 0.81) * (torch.rand(16) > 0.3).float()  # some terminal rows
    out = project_distribution(probs, rewards, discounts, -10.0, 10.0)
    assert torch.allclose(out.sum(-1), torch.ones(2, 16), atol=1e-5)
    mean_in = rewards + discounts * (probs * support).sum(-1)
    assert torch.allclose((out * support).sum(-1), mean_in, atol=1e-4)
    # terminal rows collapse onto the reward
    term = discounts == 0
    assert torch.allclose((out[:, term] * support).sum(-1), rewards[term].expand(2, -1), atol=1e-4)


def test_projection_clips_onto_edge_atoms():
    probs = torch.full((1, 5), 0.2)
    out = project_distribution(probs, torch.tensor([5.0]), torch.tensor([1.0]), 0.0, 1.0)
    assert torch.allclose(out, torch.tensor([[0.0, 0.0, 0.0, 0.0, 1.0]]))
    assert math.isclose(float(out.sum()), 1.0, abs_tol=1e-6)

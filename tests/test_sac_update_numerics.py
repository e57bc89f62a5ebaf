"""The learner's fast update computes what the straightforward formulas compute.

The references below are the textbook forms (C51's projection with floor and ceil, the critic on the concatenated
[obs, action] with LayerNorm then a per-member scale and shift, expectations as broadcast products and sums, the
loss as holosoma writes it); the update must give the same losses, metrics and gradient norms to float tolerance.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from unilab.algo.sac import FastSAC, SACConfig
from unilab.algo.sac.graphs import CapturedUpdate
from unilab.algo.sac.networks import CriticEnsemble, project_distribution

OBS, COBS, ACT = 6, 9, 3
BOUND = [0.5, 2.0, 1.5]
V_MIN, V_MAX = -5.0, 5.0


def c51_projection(probs: torch.Tensor, rewards: torch.Tensor, discounts: torch.Tensor, v_min: float,
                   v_max: float) -> torch.Tensor:
    """C51 (Bellemare et al. 2017, algorithm 1), one atom at a time: mass to floor(b) and ceil(b) in proportion to the
    distance, all of it to b when b is an atom."""
    num_atoms = probs.shape[-1]
    delta = (v_max - v_min) / (num_atoms - 1)
    out = torch.zeros(probs.shape, dtype=torch.float64)
    for row in range(probs.shape[-2]):
        for j in range(num_atoms):
            tz = min(max(float(rewards[row]) + float(discounts[row]) * (v_min + j * delta), v_min), v_max)
            b = (tz - v_min) / delta
            lo, hi = math.floor(b), math.ceil(b)
            p = probs[..., row, j].double()
            if lo == hi:
                out[..., row, lo] += p
            else:
                out[..., row, lo] += p * (hi - b)
                out[..., row, hi] += p * (b - lo)
    return out


@st.composite
def projection_cases(draw):
    num_atoms = draw(st.integers(2, 13))
    rows = draw(st.integers(1, 4))
    members = draw(st.integers(1, 2))
    delta = (V_MAX - V_MIN) / (num_atoms - 1)
    # rewards on atoms, between atoms, beyond both edges; discounts 0 (terminal), 1 and in between
    reward = st.one_of(st.integers(-2 * num_atoms, 2 * num_atoms).map(lambda k: k * delta / 2),
                       st.floats(-3 * V_MAX, 3 * V_MAX, allow_nan=False, width=32))
    rewards = torch.tensor(draw(st.lists(reward, min_size=rows, max_size=rows)), dtype=torch.float32)
    discounts = torch.tensor(draw(st.lists(st.sampled_from([0.0, 1.0, 0.5, 0.97, 0.99]) | st.floats(0, 1, width=32),
                                           min_size=rows, max_size=rows)), dtype=torch.float32)
    # distributions: random, or all mass on one atom (the edges included)
    logits = torch.tensor(draw(st.lists(st.floats(-8, 8, width=32), min_size=members * rows * num_atoms,
                                        max_size=members * rows * num_atoms))).view(members, rows, num_atoms)
    probs = torch.softmax(logits, -1)
    if draw(st.booleans()):
        atom = draw(st.sampled_from([0, num_atoms - 1, num_atoms // 2]))
        probs = F.one_hot(torch.full((members, rows), atom), num_atoms).float()
    return probs, rewards, discounts


@settings(max_examples=150, deadline=None)
@given(projection_cases())
def test_fused_projection_equals_c51(case):
    probs, rewards, discounts = case
    got = project_distribution(probs, rewards, discounts, V_MIN, V_MAX)
    want = c51_projection(probs, rewards, discounts, V_MIN, V_MAX)
    torch.testing.assert_close(got.double(), want, atol=2e-6, rtol=1e-5)
    torch.testing.assert_close(got.sum(-1), probs.sum(-1))  # each row keeps its mass


def test_a_nan_in_the_projection_is_nan_not_an_index_error():
    probs = torch.softmax(torch.randn(2, 3, 11), -1)
    out = project_distribution(probs, torch.tensor([0.5, math.nan, math.inf]), torch.tensor([0.9, 0.9, math.nan]),
                               V_MIN, V_MAX)
    assert torch.isfinite(out[:, 0]).all() and torch.isnan(out[:, 1]).any() and torch.isnan(out[:, 2]).any()


# ----------------------------------------------------------------------------- the update against the formulas
def _critic_reference(critic: torch.nn.Module, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
    """The ensemble's logits the textbook way: [obs, action] concatenated, each member's layers in turn."""
    x = torch.cat([obs, action], -1).unsqueeze(0).expand(critic.num_q, -1, -1)
    for layer in critic.net:
        name = type(layer).__name__
        if name == "EnsembleLinear":
            x = x @ layer.weight + layer.bias
        elif name == "EnsembleLayerNorm":
            x = F.layer_norm(x, (layer.dim,), eps=layer.eps) * layer.weight + layer.bias
        else:
            x = layer(x)
    return x if critic.distributional else x.squeeze(-1)


def _expectation(logits: torch.Tensor, support: torch.Tensor) -> torch.Tensor:
    return (torch.softmax(logits, -1) * support).sum(-1)


def _reference_losses(snap: FastSAC, after: FastSAC, b: dict[str, torch.Tensor], actor_turn: bool
                      ) -> dict[str, float]:
    """The update's losses, metrics and gradient norms from the formulas, on the state before the update (``snap``,
    normaliser statistics of ``after``, which merged this batch first) and, for the actor, the critic and temperature
    after their steps; draws the same noise in the same order as the update."""
    cfg, bound = snap.cfg, torch.tensor(BOUND)
    norm = after.obs_normalizer
    cnorm = after.critic_obs_normalizer

    def normalized(n: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
        return (x - n.mean.float()) / (n.var.sqrt() + n.eps).float()

    obs, next_obs = normalized(norm, b["obs"]), normalized(norm, b["next_obs"])
    obs_c, next_obs_c = normalized(cnorm, b["critic_obs"]), normalized(cnorm, b["next_critic_obs"])
    support = torch.linspace(cfg.v_min, cfg.v_max, cfg.num_atoms)
    alpha = snap.log_alpha.detach().exp()
    with torch.no_grad():
        next_a, next_lp, _ = snap.sample_action(next_obs)
        target_logits = _critic_reference(snap.critic_target, next_obs_c, next_a * bound)
    gk = b["bootstrap"] * b["discount"]
    critic = copy.deepcopy(snap.critic)
    logits = _critic_reference(critic, obs_c, b["action"] * bound)
    target = c51_projection(torch.softmax(target_logits, -1), b["rewards"] - gk * alpha * next_lp, gk,
                            cfg.v_min, cfg.v_max).float()
    log_probs = F.log_softmax(logits, -1)
    loss = -torch.sum(target * log_probs, dim=-1).mean(dim=1).sum(dim=0)  # holosoma's _update_main
    loss.backward()
    out = {"critic_loss": float(loss.detach()), "q_mean": float(_expectation(logits.detach(), support).mean()),
           "q_target_mean": float((target * support).sum(-1).mean()), "entropy_next": float(-next_lp.mean()),
           "critic_grad_norm": float(torch.cat([p.grad.flatten() for p in critic.parameters()]).norm()),
           "alpha_loss": float(-(alpha * (next_lp.mean() + snap.target_entropy)))}
    if actor_turn:
        actor = copy.deepcopy(snap.actor)
        alpha_after = after.log_alpha.detach().exp()
        mean, log_std = actor.distribution_params(obs)
        noise = torch.randn_like(mean)
        pre = mean + log_std.exp() * noise
        a = torch.tanh(pre)
        gauss = torch.distributions.Normal(mean, log_std.exp()).log_prob(pre)
        log_prob = (gauss - torch.log(1 - a.square() + 1e-12)).sum(-1) - bound.log().sum()
        q = _expectation(_critic_reference(after.critic, obs_c, a * bound), support).mean(0)
        actor_loss = (alpha_after * log_prob - q).mean()
        actor_loss = actor_loss + cfg.bc_weight * ((torch.tanh(mean) - b["action"]) * bound).square().sum(-1).mean()
        actor_loss.backward()
        out.update(actor_loss=float(actor_loss.detach()), entropy=float(-log_prob.detach().mean()),
                   actor_grad_norm=float(torch.cat([p.grad.flatten() for p in actor.parameters()]).norm()))
    return out


def _batch(seed: int, n: int = 64) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {"obs": torch.randn(n, OBS, generator=g) * 2 + 1, "critic_obs": torch.randn(n, COBS, generator=g),
            "action": torch.rand(n, ACT, generator=g) * 1.8 - 0.9, "rewards": torch.randn(n, generator=g) * 2,
            "next_obs": torch.randn(n, OBS, generator=g) * 2 + 1, "next_critic_obs": torch.randn(n, COBS, generator=g),
            "bootstrap": (torch.rand(n, generator=g) > 0.1).float(), "discount": torch.full((n,), 0.97)}


def _cfg(**kw) -> SACConfig:
    base = dict(device="cpu", num_envs=4, buffer_size=8, batch_size=64, actor_hidden_dims=[32, 16],
                critic_hidden_dims=[32, 16], num_atoms=21, v_min=V_MIN, v_max=V_MAX, policy_frequency=2,
                bc_weight=0.05, actor_lr=3e-3, critic_lr=3e-3, alpha_lr=1e-2, seed=3)
    base.update(kw)
    return SACConfig(**base)


def test_a_short_training_has_the_formulas_losses_at_every_update():
    agent = FastSAC(_cfg(), OBS, COBS, ACT, action_bound=BOUND)
    for i in range(10):
        b = _batch(i)
        snap = copy.deepcopy(agent)
        torch.manual_seed(100 + i)
        got = agent.update(b)
        torch.manual_seed(100 + i)
        want = _reference_losses(snap, agent, b, actor_turn=i % 2 == 1)
        for key, value in want.items():
            assert got[key] == pytest.approx(value, rel=2e-4, abs=2e-5), (i, key)
    assert agent.nonfinite_counts()["updates"] == 0


# ----------------------------------------------------------------------------- the captured update's program
def _run(agent: FastSAC, updates: int) -> list[dict[str, float]]:
    torch.manual_seed(7)
    return [agent.update(_batch(i)) for i in range(updates)]


def _same_training(a: FastSAC, b: FastSAC, updates: int = 20, rel: float = 1e-5) -> None:
    for ma, mb in zip(_run(a, updates), _run(b, updates), strict=True):
        for key in ma:
            assert ma[key] == pytest.approx(mb[key], rel=rel, abs=rel), key
    for p, q in zip([*a.actor.parameters(), *a.critic.parameters(), *a.critic_target.parameters()],
                    [*b.actor.parameters(), *b.critic.parameters(), *b.critic_target.parameters()], strict=True):
        torch.testing.assert_close(p, q, rtol=rel * 10, atol=rel * 10)


def test_the_static_buffer_program_trains_as_the_eager_update():
    eager = FastSAC(_cfg(), OBS, COBS, ACT, action_bound=BOUND)
    static = FastSAC(_cfg(), OBS, COBS, ACT, action_bound=BOUND)
    # on the CPU: the program a CUDA graph replays, without the capture
    static._captured = CapturedUpdate(static.update_step, static.device, static.cfg.policy_frequency)
    _same_training(eager, static, rel=1e-6)


@pytest.mark.slow
def test_the_compiled_update_trains_as_the_eager_update(monkeypatch):
    """algo.compile's path (inductor on the CPU here) against eager: 20 updates, losses and weights."""
    import torch._inductor.config as inductor

    monkeypatch.setattr(inductor, "fallback_random", True)  # the same noise as eager
    eager = FastSAC(_cfg(), OBS, COBS, ACT, action_bound=BOUND, accelerate=False)
    compiled = FastSAC(_cfg(), OBS, COBS, ACT, action_bound=BOUND, accelerate=True)
    assert compiled.use_compile and not eager.use_compile
    _same_training(eager, compiled, rel=1e-4)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_captured_update_trains_as_the_eager_update_on_cuda(monkeypatch):
    import torch._inductor.config as inductor

    monkeypatch.setattr(inductor, "fallback_random", True)
    cfg = _cfg(device="cuda", amp=False)
    eager = FastSAC(cfg, OBS, COBS, ACT, action_bound=BOUND, accelerate=False)
    captured = FastSAC(cfg, OBS, COBS, ACT, action_bound=BOUND, accelerate=True)
    _same_training(eager, captured, rel=1e-4)
    assert captured._captured.captured and captured._captured.failed is None


def test_metrics_are_the_means_of_the_steps_taken_since_the_last_read():
    """Each update's metrics stay on the device; a read (once per log interval in training) gives their means."""
    one_by_one = FastSAC(_cfg(), OBS, COBS, ACT, action_bound=BOUND)
    summed = FastSAC(_cfg(), OBS, COBS, ACT, action_bound=BOUND)
    torch.manual_seed(1)
    each = [one_by_one.update(_batch(i)) for i in range(4)]
    torch.manual_seed(1)
    for i in range(4):
        assert summed.update(_batch(i), return_metrics=False) == {}
    bad = _batch(9)
    bad["rewards"][0] = math.nan
    summed.update(bad, return_metrics=False)  # its critic step is skipped: counted there, not in the means
    means = summed.read_metrics()
    for key in ("critic_loss", "q_mean", "q_target_mean", "critic_grad_norm", "alpha_loss", "entropy_next"):
        assert means[key] == pytest.approx(sum(m[key] for m in each) / 4, rel=1e-5), key
    for key in ("actor_loss", "entropy", "log_std_mean", "actor_grad_norm"):  # actor steps: updates 2 and 4
        assert means[key] == pytest.approx((each[1][key] + each[3][key]) / 2, rel=1e-5), key
    assert means["alpha"] == pytest.approx(summed.alpha)
    assert summed.nonfinite_counts()["critic"] == 1
    assert summed.read_metrics().keys() == {"actor_loss", "entropy", "log_std_mean", "actor_grad_norm", "alpha"}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_captured_update_skips_a_nonfinite_step_on_cuda():
    agent = FastSAC(_cfg(device="cuda"), OBS, COBS, ACT, action_bound=BOUND, accelerate=True)
    for i in range(6):  # warm-up updates, then the capture
        agent.update(_batch(i), return_metrics=False)
    assert agent._captured.captured
    critic = [p.detach().clone() for p in agent.critic.parameters()]
    moments = [t.clone() for s in agent.critic_optimizer.state.values() for t in s.values()]
    bad = _batch(7)
    bad["rewards"][3] = math.nan
    agent.update(bad, return_metrics=False)
    assert all(torch.equal(a, b) for a, b in zip(critic, agent.critic.parameters()))
    assert all(torch.equal(a, b) for a, b in zip(moments, (t for s in agent.critic_optimizer.state.values()
                                                           for t in s.values())))
    assert agent.nonfinite_counts()["critic"] == 1


def test_expected_q_stays_float32_under_bf16_autocast():
    """The actor's Q (a product with the support) must not drop to bf16 where the learner autocasts (CUDA)."""
    critic = CriticEnsemble(COBS, ACT, [16, 8], distributional=True, num_atoms=21, v_min=V_MIN, v_max=V_MAX)
    obs, action = torch.randn(32, COBS), torch.rand(32, ACT)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        q = critic.q_values(obs, action)
        logits = critic(obs, action)
    assert q.dtype == torch.float32
    torch.testing.assert_close(q, _expectation(logits.float(), critic.support), rtol=1e-6, atol=1e-6)

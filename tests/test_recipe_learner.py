"""The FastSAC learner against holosoma 0.0.3's formulas (agents/fast_sac/fast_sac.py, fast_sac_agent.py).

Each test writes holosoma's expression out in torch (never importing it) and
compares it with unilab's value on the same weights, noise and batch.
"""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from unilab.algo.sac import FastSAC, SACConfig
from unilab.algo.sac.networks import project_distribution

OBS, COBS, ACT = 6, 9, 4
BOUND = [1.05, 2.5, 4.0, 13.2]  # G1-like factors: (max distance default -> limit) / 0.25


def _cfg(**overrides) -> SACConfig:
    base = dict(device="cpu", num_envs=4, buffer_size=8, batch_size=32, actor_hidden_dims=[32, 32],
                critic_hidden_dims=[32, 32], compile=False, amp=False, seed=0, num_atoms=51)
    base.update(overrides)
    return SACConfig(**base)


def _batch(n=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return {
        "obs": torch.randn(n, OBS, generator=g), "critic_obs": torch.randn(n, COBS, generator=g),
        "action": torch.rand(n, ACT, generator=g) * 2 - 1, "rewards": torch.rand(n, generator=g) * 0.2,
        "next_obs": torch.randn(n, OBS, generator=g), "next_critic_obs": torch.randn(n, COBS, generator=g),
        "bootstrap": (torch.rand(n, generator=g) > 0.1).float(), "discount": torch.full((n,), 0.99),
    }


def _randomise_actor(agent: FastSAC) -> None:
    with torch.no_grad():
        for p in agent.actor.parameters():
            p.add_(torch.randn_like(p) * 0.3)


def _holosoma_log_prob(mean, log_std, noise, scale):
    """holosoma Actor.get_actions_and_log_probs: tanh(u) * scale, log-prob with its 1e-6 guards."""
    raw = mean + log_std.exp() * noise
    tanh_action = torch.tanh(raw)
    log_prob = torch.distributions.Normal(mean, log_std.exp()).log_prob(raw)
    log_prob = log_prob - torch.log(1 - tanh_action.pow(2) + 1e-6) - torch.log(scale + 1e-6)
    return tanh_action * scale, log_prob.sum(1)


def test_log_prob_is_holosomas_in_its_bounded_action_space():
    agent = FastSAC(_cfg(), OBS, COBS, ACT, action_bound=BOUND)
    _randomise_actor(agent)
    obs = torch.randn(256, OBS) * 0.5
    torch.manual_seed(3)
    action, log_prob, _ = agent.sample_action(obs)
    torch.manual_seed(3)
    mean, log_std = agent.actor.distribution_params(obs)
    noise = torch.randn_like(mean)
    holo_action, holo_log_prob = _holosoma_log_prob(mean, log_std, noise, torch.tensor(BOUND))
    torch.testing.assert_close(action * torch.tensor(BOUND), holo_action)
    # the guards differ (1e-6 inside holosoma's logs, an exact identity here): equal where tanh is not saturated
    ok = (torch.tanh(mean + log_std.exp() * noise).abs() < 0.99).all(dim=1)
    assert ok.sum() > 100
    torch.testing.assert_close(log_prob[ok], holo_log_prob[ok], rtol=0, atol=2e-3)
    # the offset is -sum log b_j, a fact of the env's bounds
    assert math.isclose(agent.log_bound_sum, sum(math.log(b) for b in BOUND))


def test_entropy_target_is_holosomas_minus_half_per_action_dim():
    agent = FastSAC(_cfg(), OBS, COBS, ACT, action_bound=BOUND)
    assert agent.target_entropy == -0.5 * ACT  # holosoma: -n_act * target_entropy_ratio, in its action space
    # in the [-1, 1] space that target is lower by sum log b_j (what a [-1, 1] learner would need to be told)
    unit_target = agent.target_entropy - agent.log_bound_sum
    assert unit_target < agent.target_entropy


@pytest.mark.g1
def test_g1_bounds_put_holosomas_log_prob_offset_at_minus_55_nats():
    from unilab.tasks.g1_motion_tracking.config import MotionTrackingConfig
    from unilab.tasks.g1_motion_tracking.env import MotionTrackingEnv

    cfg = MotionTrackingConfig()
    env = MotionTrackingEnv(cfg, 2)
    try:
        # holosoma _compute_action_boundaries: max(|lo - default|, |hi - default|) / action_scale (0.25)
        lo, hi = env.joint_lo[env.act_joint], env.joint_hi[env.act_joint]
        expected = np.maximum(np.abs(lo - env.action_default), np.abs(hi - env.action_default)) / 0.25
        np.testing.assert_allclose(env.action_bound, expected)
        assert env.spec.action_bound == tuple(float(b) for b in expected)
        agent = FastSAC(_cfg(), env.obs_dim, env.critic_obs_dim, env.action_dim, action_bound=env.spec.action_bound)
        assert abs(-agent.log_bound_sum - (-55.06)) < 0.05
        assert agent.target_entropy == -14.5
    finally:
        env.close()


def test_fresh_actor_holds_the_default_pose_with_log_std_minus_2_5():
    agent = FastSAC(_cfg(), OBS, COBS, ACT, action_bound=BOUND)
    obs = torch.randn(32, OBS) * 10
    assert torch.equal(agent.act(obs, deterministic=True), torch.zeros(32, ACT))
    mean, log_std = agent.actor.distribution_params(obs)
    assert torch.equal(mean, torch.zeros_like(mean))
    torch.testing.assert_close(log_std, torch.full_like(log_std, -2.5))  # holosoma: zero heads, range [-5, 0]


def test_optimisers_are_adamw_with_betas_0_9_0_95():
    agent = FastSAC(_cfg(), OBS, COBS, ACT)
    for opt in (agent.actor_optimizer, agent.critic_optimizer, agent.alpha_optimizer):
        assert isinstance(opt, torch.optim.AdamW)
        assert opt.param_groups[0]["betas"] == (0.9, 0.95)
    assert agent.alpha_optimizer.param_groups[0]["weight_decay"] == 0.01  # AdamW's default, as holosoma's


def test_critic_sees_the_bounded_action():
    agent = FastSAC(_cfg(), OBS, COBS, ACT, action_bound=BOUND)
    seen = []
    agent.critic.register_forward_pre_hook(lambda m, args: seen.append(args[1].detach().clone()))
    batch = _batch()
    agent.update(batch)
    torch.testing.assert_close(seen[0], batch["action"] * torch.tensor(BOUND))


def test_each_critic_regresses_onto_its_own_target_distribution():
    """holosoma Critic.projection: member i's target is the projection of target member i."""
    agent = FastSAC(_cfg(distributional=True, use_cdq=False), OBS, COBS, ACT, action_bound=BOUND)
    with torch.no_grad():
        for p in agent.critic_target.parameters():
            p.add_(torch.randn_like(p) * 0.5)  # the two target members now disagree
    batch = _batch()
    alpha = agent.log_alpha.detach().exp()
    torch.manual_seed(5)
    loss, _, _, next_lp = agent._critic_loss(batch["critic_obs"], batch["action"], batch["rewards"], batch["obs"],
                                             batch["next_critic_obs"], batch["bootstrap"], batch["discount"], alpha)
    torch.manual_seed(5)
    next_a, next_lp_ref, _ = agent.sample_action(batch["obs"])
    bound = torch.tensor(BOUND)
    with torch.no_grad():
        target_logits = agent.critic_target(batch["next_critic_obs"], next_a * bound)
        online = F.log_softmax(agent.critic(batch["critic_obs"], batch["action"] * bound), dim=-1)
    gk = batch["bootstrap"] * batch["discount"]
    cfg_v = (agent.cfg.v_min, agent.cfg.v_max)
    ref = 0.0
    for i in range(2):  # holosoma: critic_losses.mean(dim=1).sum(dim=0), member i on target member i
        shifted = batch["rewards"] - gk * alpha * next_lp_ref
        target_i = project_distribution(torch.softmax(target_logits[i], -1), shifted, gk, cfg_v[0], cfg_v[1])
        ref = ref + (-(target_i * online[i]).sum(-1)).mean()
    torch.testing.assert_close(loss, ref)
    torch.testing.assert_close(next_lp, next_lp_ref.mean())


def test_temperature_steps_at_every_critic_update_with_holosomas_loss():
    agent = FastSAC(_cfg(policy_frequency=2, target_entropy=100.0), OBS, COBS, ACT, action_bound=BOUND)
    alphas = [agent.alpha]
    for i in range(4):
        m = agent.update(_batch(seed=i))
        alphas.append(agent.alpha)
        # holosoma: -exp(log_alpha) * (log pi(a'|s') + target), evaluated before the step
        assert m["alpha_loss"] < 0
        assert math.isclose(m["alpha_loss"], -alphas[-2] * (-m["entropy_next"] + 100.0), rel_tol=1e-4)
    # entropy far below a target of +100 nats: alpha grows at every update, actor steps or not
    assert all(b > a for a, b in zip(alphas, alphas[1:]))


def test_a_step_that_fails_and_times_out_bootstraps():
    from unilab.algo.sac.replay import ReplayBuffer
    from unilab.sim.spec import step_record

    buf = ReplayBuffer(2, 4, step_record(OBS, COBS, ACT), gamma=0.9)

    def z(*shape):
        return np.zeros(shape, dtype=np.float32)

    before = {"obs": z(2, OBS), "critic_obs": z(2, COBS), "action": z(2, ACT)}
    after = {"obs": z(2, OBS), "critic_obs": z(2, COBS), "reward": z(2), "terminated": np.array([True, True]),
             "truncated": np.array([True, False]), "final_obs": z(2, OBS), "final_critic_obs": z(2, COBS)}
    buf.extend(before, after)
    got = buf.gather(torch.tensor([0, 1]), torch.tensor([0, 0]))
    # holosoma: bootstrap = truncations | ~dones
    assert got["bootstrap"].tolist() == [1.0, 0.0]


def test_optional_start_at_the_entropy_target():
    agent = FastSAC(_cfg(init_log_std_at_target=True), OBS, COBS, ACT, action_bound=BOUND)
    obs = torch.randn(4096, OBS)
    with torch.no_grad():
        _, log_prob, log_std = agent.sample_action(obs)
    # the same noise in every dim of the bounded space: log-std_j + log b_j is one number
    in_bounded_space = log_std[0] + torch.tensor(BOUND).log()
    torch.testing.assert_close(in_bounded_space, in_bounded_space[:1].expand(ACT))
    assert abs(float(-log_prob.mean()) - agent.target_entropy) < 0.1  # tanh's Jacobian is small at this spread
    assert torch.equal(agent.act(obs[:8], deterministic=True), torch.zeros(8, ACT))  # still the default pose


def _signed_permutation(n, rng):
    return rng.permutation(n), rng.choice([-1.0, 1.0], n)


def test_symmetry_augmentation_trains_on_the_batch_followed_by_its_mirror():
    """holosoma's _sample_and_prepare_batches with use_symmetry: observations, next observations and actions
    mirrored, the rest repeated, one update on the doubled batch (normalisers included)."""
    rng = np.random.default_rng(0)
    mirror = {"obs": _signed_permutation(OBS, rng), "critic_obs": _signed_permutation(COBS, rng),
              "action": _signed_permutation(ACT, rng)}
    sym = FastSAC(_cfg(use_symmetry=True, policy_frequency=1), OBS, COBS, ACT, action_bound=BOUND, mirror=mirror)
    plain = FastSAC(_cfg(policy_frequency=1), OBS, COBS, ACT, action_bound=BOUND)
    batch = _batch()
    uses = {"obs": "obs", "next_obs": "obs", "critic_obs": "critic_obs", "next_critic_obs": "critic_obs",
            "action": "action"}
    doubled = {}
    for key, x in batch.items():
        if key in uses:
            perm, sign = mirror[uses[key]]
            doubled[key] = torch.cat([x, x[:, torch.as_tensor(perm)] * torch.as_tensor(sign, dtype=x.dtype)])
        else:
            doubled[key] = torch.cat([x, x])
    other = FastSAC(_cfg(policy_frequency=1), OBS, COBS, ACT, action_bound=BOUND)  # no mirror: other losses
    metrics = []
    for agent, b in ((sym, batch), (plain, doubled), (other, batch)):
        torch.manual_seed(5)
        metrics.append([agent.update(b) for _ in range(3)])
    for m_sym, m_plain in zip(metrics[0], metrics[1], strict=True):
        for key in ("critic_loss", "q_mean", "actor_loss", "alpha_loss"):
            assert m_sym[key] == pytest.approx(m_plain[key], rel=1e-5, abs=1e-7), key
    assert metrics[0][-1]["critic_loss"] != pytest.approx(metrics[2][-1]["critic_loss"], rel=1e-3)
    for p, q in zip([*sym.actor.parameters(), *sym.critic.parameters()],
                    [*plain.actor.parameters(), *plain.critic.parameters()], strict=True):
        torch.testing.assert_close(p, q)
    torch.testing.assert_close(sym.obs_normalizer.mean, plain.obs_normalizer.mean)
    # a checkpoint keeps the mirror: evaluation, export and resume rebuild the same agent (weights_only load)
    buf = io.BytesIO()
    torch.save(sym.state_dict(), buf)
    buf.seek(0)
    back = FastSAC.from_checkpoint(torch.load(buf, weights_only=True), device="cpu")
    assert back.cfg.use_symmetry and {k: [p.tolist(), s.tolist()] for k, (p, s) in back.mirror.items()} == {
        k: [list(p), list(s)] for k, (p, s) in mirror.items()}


def test_symmetry_needs_a_task_mirror():
    with pytest.raises(ValueError, match="use_symmetry=true needs a task with a left/right mirror.*no partner"):
        FastSAC(_cfg(use_symmetry=True), OBS, COBS, ACT, mirror=None, mirror_error="joint 'j_a' has no partner")
    bad = {"obs": (list(range(OBS)), [1.0] * OBS), "critic_obs": ([0] * COBS, [1.0] * COBS),
           "action": (list(range(ACT)), [1.0] * ACT)}
    with pytest.raises(ValueError, match="mirror of 'critic_obs' is not a signed permutation"):
        FastSAC(_cfg(use_symmetry=True), OBS, COBS, ACT, mirror=bad)

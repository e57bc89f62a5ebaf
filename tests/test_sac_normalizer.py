"""RunningNormalizer: batched running statistics match NumPy; forward never updates."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from unilab.algo.sac import RunningNormalizer


def test_running_stats_match_numpy_over_all_batches():
    rng = np.random.default_rng(0)
    moments = [(3.0, 2.0, 17), (-1.0, 0.5, 1), (10.0, 4.0, 250)]
    batches = [rng.normal(loc=m, scale=s, size=(n, 5)) for m, s, n in moments]
    norm = RunningNormalizer(5)
    for b in batches:
        norm.update(torch.from_numpy(b).float())
    data = np.concatenate(batches).astype(np.float32).astype(np.float64)
    np.testing.assert_allclose(norm.mean.numpy(), data.mean(0), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(norm.var.numpy(), data.var(0), rtol=1e-6, atol=1e-6)
    assert norm.count.item() == len(data)

    x = torch.from_numpy(rng.normal(size=(4, 5))).float()
    expected = (x.numpy() - data.mean(0)) / (np.sqrt(data.var(0)) + norm.eps)
    before = norm.mean.clone()
    np.testing.assert_allclose(norm(x).numpy(), expected, rtol=1e-5, atol=1e-5)
    assert torch.equal(norm.mean, before)  # forward is frozen


def test_fresh_normalizer_is_identity_and_disabled_one_never_changes():
    x = torch.randn(6, 3) * 5 + 2
    assert torch.allclose(RunningNormalizer(3, eps=0.0)(x), x, atol=1e-6)
    off = RunningNormalizer(3, enabled=False)
    off.update(x)
    assert off.count.item() == 0
    assert torch.equal(off(x), x)


def test_eps_bounds_the_gain_of_constant_inputs():
    norm = RunningNormalizer(2, eps=0.01)
    norm.update(torch.tensor([[1.0, 0.0], [1.0, 2.0]]))  # first column constant
    out = norm(torch.tensor([[1.5, 1.0]]))
    assert out[0, 0].item() == pytest.approx(0.5 / 0.01)
    assert out[0, 1].item() == pytest.approx(0.0)


def test_all_reduce_hook_merges_every_ranks_batch():
    rng = np.random.default_rng(1)
    rank_batches = [rng.normal(loc=2.0 * r, size=(40 + r, 3)) for r in range(2)]
    ranks = [RunningNormalizer(3), RunningNormalizer(3)]
    # a fake 2-rank all-reduce: every rank ends up with the sum of both ranks' packed moments
    packed = [None, None]

    def capture(rank):
        def hook(t):
            packed[rank] = t.clone()
        return hook

    for r in range(2):  # first pass: collect each rank's local moments
        RunningNormalizer(3).update(torch.from_numpy(rank_batches[r]), all_reduce=capture(r))
    total = packed[0] + packed[1]
    for r in range(2):
        ranks[r].update(torch.from_numpy(rank_batches[r]), all_reduce=lambda t: t.copy_(total))
    data = np.concatenate(rank_batches)
    for norm in ranks:
        np.testing.assert_allclose(norm.mean.numpy(), data.mean(0), rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(norm.var.numpy(), data.var(0), rtol=1e-9, atol=1e-9)
        assert norm.count.item() == len(data)


def test_state_dict_round_trip_and_shape_errors():
    a = RunningNormalizer(2)
    a.update(torch.randn(50, 2) * 3 + 1)
    b = RunningNormalizer(2)
    b.load_state_dict(a.state_dict())
    x = torch.randn(5, 2)
    assert torch.equal(a(x), b(x))
    with pytest.raises(ValueError, match=r"\(batch, 2\)"):
        a.update(torch.randn(5, 3))

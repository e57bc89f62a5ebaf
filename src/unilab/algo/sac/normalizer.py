"""Running mean/variance observation normaliser living on the learner device."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn


class RunningNormalizer(nn.Module):
    """Normalise ``(batch, dim)`` observations by a running mean and variance (``eps`` added to the std, so
    near-constant inputs are not blown up; ``enabled=False``: the identity, with the same state_dict keys).

    Statistics change only in :meth:`update` (batch moments merged Chan-style in float64, so counts in the billions
    stay exact), which keeps a whole gradient step, its bootstrap targets included, on one frozen set of statistics.
    """

    def __init__(self, dim: int, *, enabled: bool = True, eps: float = 1e-2,
                 device: torch.device | str | None = None) -> None:
        super().__init__()
        if dim < 1:
            raise ValueError(f"normaliser dim must be >= 1, got {dim}")
        self.dim = int(dim)
        self.enabled = bool(enabled)
        self.eps = float(eps)
        self.register_buffer("mean", torch.zeros(dim, dtype=torch.float64, device=device))
        self.register_buffer("var", torch.ones(dim, dtype=torch.float64, device=device))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64, device=device))

    @torch.no_grad()
    def update(self, x: torch.Tensor, all_reduce: Callable[[torch.Tensor], None] | None = None) -> None:
        """Merge the population mean/var of a ``(batch, dim)`` batch into the stats; ``all_reduce``: an in-place sum
        across processes, so every rank merges the moments of all ranks' batches and the stats stay equal."""
        if not self.enabled:
            return
        if x.ndim != 2 or x.shape[1] != self.dim:
            raise ValueError(f"normaliser expects (batch, {self.dim}), got {tuple(x.shape)}")
        if x.shape[0] == 0 and all_reduce is None:
            return
        x = x.to(device=self.mean.device, dtype=torch.float64)
        # packed raw moments [n, sum x, sum x^2]: one reduction covers all of them
        moments = torch.cat([x.new_full((1,), float(x.shape[0])), x.sum(dim=0), x.square().sum(dim=0)])
        if all_reduce is not None:
            all_reduce(moments)
        # tensor arithmetic only (no host sync). A batch with a NaN/inf value (on any rank) is left out, as an empty
        # one: the statistics stay finite, and the update's loss turns NaN and is skipped
        moments = torch.where(torch.isfinite(moments).all(), moments, 0.0)
        batch_count, sums, squares = moments.split([1, self.dim, self.dim])
        batch_count = batch_count.squeeze(0)
        inv_count = batch_count.clamp(min=1.0).reciprocal()
        batch_mean = sums * inv_count
        batch_var = (squares * inv_count - batch_mean.square()).clamp(min=0.0)
        total = self.count + batch_count
        # Chan's merge with w = n_batch / n_total (0 for an empty batch: nothing changes):
        # mean + w (batch mean - mean); var (1 - w) + batch var w + delta^2 w (1 - w)
        w = batch_count / total.clamp(min=1.0)
        delta_sq = (batch_mean - self.mean).square()
        self.var.lerp_(batch_var, w).addcmul_(delta_sq, w * (1.0 - w))
        self.mean.lerp_(batch_mean, w)
        self.count.copy_(total)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return ``(x - mean) / (sqrt(var) + eps)`` in ``x``'s dtype (stats unchanged)."""
        return self.normalize(x)[0]

    def normalize(self, *xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """:meth:`forward` of each of ``xs`` (one dtype), the statistics converted once."""
        if not self.enabled:
            return xs
        dtype = xs[0].dtype
        mean, scale = self.mean.to(dtype), (self.var.sqrt() + self.eps).to(dtype)
        return tuple((x - mean) / scale for x in xs)

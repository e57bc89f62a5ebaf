"""FastSAC networks: tanh-squashed Gaussian actor and a vectorised critic ensemble.

The critic ensemble keeps the weights of all ``num_q`` members in stacked tensors, so one batched matmul per layer
evaluates every member (no Python loop over members in the update).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

_ACTIVATIONS = {"silu": nn.SiLU, "relu": nn.ReLU, "elu": nn.ELU, "tanh": nn.Tanh}
_LOG2 = math.log(2.0)


def _hidden_layers(in_dim: int, hidden_dims: Sequence[int], layer_norm: bool, activation: str,
                   linear: Callable[[int, int], nn.Module], norm: Callable[[int], nn.Module]) -> list[nn.Module]:
    """Linear -> [LayerNorm] -> activation for each width in ``hidden_dims``."""
    if activation not in _ACTIVATIONS:
        raise ValueError(f"unknown activation {activation!r}; choose from {sorted(_ACTIVATIONS)}")
    layers: list[nn.Module] = []
    for prev, width in zip([in_dim, *hidden_dims], hidden_dims):
        layers.append(linear(prev, width))
        if layer_norm:
            layers.append(norm(width))
        layers.append(_ACTIVATIONS[activation]())
    return layers


def _squashed_log_prob(z: torch.Tensor, log_std: torch.Tensor, pre_tanh: torch.Tensor) -> torch.Tensor:
    """Log-density of ``tanh(pre_tanh)``, ``z`` the standardised Gaussian sample, summed over the last dim;
    ``log(1 - tanh(u)^2)`` as ``2 * (log 2 - u - softplus(-2u))``, stable for large ``|u|``."""
    gaussian_log_prob = (-0.5 * z.square() - log_std - 0.5 * math.log(2.0 * math.pi)).sum(dim=-1)
    return gaussian_log_prob - (2.0 * (_LOG2 - pre_tanh - F.softplus(-2.0 * pre_tanh))).sum(dim=-1)


class Actor(nn.Module):
    """Gaussian policy squashed by tanh into [-1, 1]^action_dim."""

    def __init__(self, obs_dim: int, action_dim: int, hidden_dims: Sequence[int], *,
                 layer_norm: bool = True, activation: str = "silu",
                 log_std_min: float = -5.0, log_std_max: float = 0.0) -> None:
        super().__init__()
        if log_std_min >= log_std_max:
            raise ValueError(f"log_std_min ({log_std_min}) must be < log_std_max ({log_std_max})")
        self.obs_dim = int(obs_dim)
        self.action_dim = int(action_dim)
        self.log_std_min = float(log_std_min)
        self.log_std_max = float(log_std_max)
        self.trunk = nn.Sequential(*_hidden_layers(obs_dim, hidden_dims, layer_norm, activation, nn.Linear,
                                                   nn.LayerNorm))
        self.mean_head = nn.Linear(hidden_dims[-1], action_dim)
        self.log_std_head = nn.Linear(hidden_dims[-1], action_dim)
        # zero heads: a fresh policy's mean is the default pose (action 0) for every observation, with the
        # log-std in the middle of its range (-2.5 for [-5, 0]); random heads put the G1's hip-pitch targets
        # 1.6 rad off on average, and episodes then end in a few steps until the critic has learned anything
        for head in (self.mean_head, self.log_std_head):
            nn.init.zeros_(head.weight)
            nn.init.zeros_(head.bias)

    @torch.no_grad()
    def set_initial_log_std(self, log_std: Sequence[float]) -> None:
        """Make the (zero-weight) log-std head output ``log_std`` per dim, clamped inside the open range."""
        target = torch.as_tensor(log_std, dtype=torch.float32)
        lo, hi = self.log_std_min, self.log_std_max
        raw = (2.0 * (target - lo) / (hi - lo) - 1.0).clamp(-0.999, 0.999)
        self.log_std_head.bias.copy_(torch.atanh(raw).to(self.log_std_head.bias))

    def distribution_params(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Pre-tanh Gaussian mean and log-std, log-std squashed into [min, max]."""
        h = self.trunk(obs)
        mean = self.mean_head(h)
        raw = torch.tanh(self.log_std_head(h).float())
        log_std = self.log_std_min + 0.5 * (self.log_std_max - self.log_std_min) * (raw + 1.0)
        # float32 from here on: log-probs under bf16 autocast would lose the tanh correction
        return mean.float(), log_std.float()

    def forward(self, obs: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        """Actions in [-1, 1]: tanh of the mean if deterministic, else of a sample."""
        mean, log_std = self.distribution_params(obs)
        return torch.tanh(mean if deterministic else mean + log_std.exp() * torch.randn_like(mean))

    def sample(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Reparameterised sample: (action, log_prob of the squashed action, log_std)."""
        return self.sample_from(*self.distribution_params(obs))

    @staticmethod
    def sample_from(mean: torch.Tensor, log_std: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """:meth:`sample` from :meth:`distribution_params` already computed."""
        noise = torch.randn_like(mean)
        pre_tanh = mean + log_std.exp() * noise
        return torch.tanh(pre_tanh), _squashed_log_prob(noise, log_std, pre_tanh), log_std

    def log_prob(self, obs: torch.Tensor, action: torch.Tensor, *, clip: float = 1e-6) -> torch.Tensor:
        """Log-density of given squashed actions (inverts tanh; for diagnostics and tests)."""
        mean, log_std = self.distribution_params(obs)
        pre_tanh = torch.atanh(action.clamp(-1.0 + clip, 1.0 - clip))
        return _squashed_log_prob((pre_tanh - mean) / log_std.exp(), log_std, pre_tanh)


class EnsembleLinear(nn.Module):
    """``num_members`` independent Linear layers as one batched matmul on ``(num_members, batch, in_dim)``, each
    initialised like ``nn.Linear`` (uniform in +-1/sqrt(in_dim))."""

    def __init__(self, num_members: int, in_dim: int, out_dim: int) -> None:
        super().__init__()
        bound = 1.0 / math.sqrt(in_dim)
        self.weight = nn.Parameter(torch.empty(num_members, in_dim, out_dim).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(num_members, 1, out_dim).uniform_(-bound, bound))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.baddbmm(self.bias, x, self.weight)


class EnsembleLayerNorm(nn.Module):
    """LayerNorm with a separate affine transform per ensemble member."""

    def __init__(self, num_members: int, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.dim = dim
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(num_members, 1, dim))
        self.bias = nn.Parameter(torch.zeros(num_members, 1, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # one fused normalise-and-scale per member: a plain LayerNorm followed by a broadcast multiply and add
        # makes two more passes over (num_members, batch, dim), and their backward reduces over the batch twice more
        # (unbind: one operator per tensor, where indexing would take one per member)
        members = zip(x.unbind(0), self.weight.view(-1, self.dim).unbind(0), self.bias.view(-1, self.dim).unbind(0))
        return torch.stack([F.layer_norm(xm, (self.dim,), w, b, self.eps) for xm, w, b in members])


class CriticEnsemble(nn.Module):
    """``num_q`` Q-networks on (critic_obs, action), evaluated together; distributional: logits on [v_min, v_max]."""

    def __init__(self, critic_obs_dim: int, action_dim: int, hidden_dims: Sequence[int], *,
                 num_q: int = 2, layer_norm: bool = True, activation: str = "silu",
                 distributional: bool = False, v_min: float = -20.0, v_max: float = 20.0,
                 num_atoms: int = 101) -> None:
        super().__init__()
        if num_q < 1:
            raise ValueError(f"num_q must be >= 1, got {num_q}")
        self.num_q = int(num_q)
        self.distributional = bool(distributional)
        self.num_atoms = int(num_atoms) if distributional else 1
        in_dim = critic_obs_dim + action_dim
        layers = _hidden_layers(in_dim, hidden_dims, layer_norm, activation,
                                lambda i, o: EnsembleLinear(num_q, i, o), lambda w: EnsembleLayerNorm(num_q, w))
        last = hidden_dims[-1] if hidden_dims else in_dim
        self.net = nn.Sequential(*layers, EnsembleLinear(num_q, last, self.num_atoms))
        self.v_min, self.v_max = float(v_min), float(v_max)
        support = torch.linspace(v_min, v_max, num_atoms) if distributional else torch.zeros(1)
        self.register_buffer("support", support, persistent=False)

    def forward(self, critic_obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """Raw outputs: Q-values ``(num_q, B)`` or logits ``(num_q, B, num_atoms)``."""
        # the first layer on [obs, action] as obs @ W_obs + action @ W_action: no concatenated copy, and the actor's
        # step (a gradient for the action only) skips the observation rows' input gradient
        first, q = self.net[0], self.num_q
        split = critic_obs.shape[-1]
        x = torch.baddbmm(first.bias, critic_obs.unsqueeze(0).expand(q, -1, -1), first.weight[:, :split])
        x = torch.baddbmm(x, action.unsqueeze(0).expand(q, -1, -1), first.weight[:, split:])
        for layer in itertools.islice(self.net, 1, None):  # (self.net[1:] would build a new Sequential per call)
            x = layer(x)
        return x if self.distributional else x.squeeze(-1)

    def q_values(self, critic_obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """Expected Q-values ``(num_q, B)`` in either mode."""
        out = self.forward(critic_obs, action)
        if not self.distributional:
            return out
        # a product with the support: its backward hands softmax a contiguous gradient (a broadcast multiply and sum
        # hands it an expanded one, whose backward is several times slower on the CPU); in float32 under autocast too
        with torch.autocast(device_type=out.device.type, enabled=False):
            return torch.softmax(out.float(), dim=-1) @ self.support


def project_distribution(probs: torch.Tensor, rewards: torch.Tensor, discounts: torch.Tensor, v_min: float,
                         v_max: float) -> torch.Tensor:
    """C51 projection of ``rewards + discounts * z`` onto the support ``z = linspace(v_min, v_max, num_atoms)`` for
    next-state atom probabilities ``probs`` ``(..., B, num_atoms)``; ``discounts`` ``(B,)`` hold the bootstrap mask and
    gamma^k, ``rewards`` any entropy shift. Each row keeps its mass; values beyond the support land on the edge atoms.

    Atom j's mass goes to its neighbours ``l = floor(b_j)`` and ``l + 1`` (``b_j`` its position in atom units) with
    weights ``1 - (b_j - l)`` and ``b_j - l``, in two scatters (on an atom the upper weight is 0; the last atom's upper
    neighbour is itself, with weight 0). Indices are valid whatever the inputs: a NaN position keeps its NaN weight, so
    a non-finite reward or discount makes the projection (and the loss) NaN instead of an index error.
    """
    num_atoms = probs.shape[-1]
    delta = (v_max - v_min) / (num_atoms - 1)
    support = torch.linspace(v_min, v_max, num_atoms, device=probs.device, dtype=probs.dtype)
    # Python-number bounds: a clamp to 0-dim tensor bounds takes a slow path on the CPU
    b = ((rewards.unsqueeze(-1) + discounts.unsqueeze(-1) * support).clamp(v_min, v_max) - v_min) / delta
    lower = torch.nan_to_num(b, nan=0.0).floor_().clamp_(0, num_atoms - 1)
    w_upper = b - lower
    shape = torch.broadcast_shapes(probs.shape, b.shape)
    index = lower.long()
    upper_mass = probs * w_upper
    out = probs.new_zeros(shape)
    out.scatter_add_(-1, index.expand(shape), probs - upper_mass)
    out.scatter_add_(-1, (index + 1).clamp_(max=num_atoms - 1).expand(shape), upper_mass)
    return out

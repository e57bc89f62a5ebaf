"""FastSAC learner: acting, one gradient step, checkpoints.

One :meth:`FastSAC.update` = a critic step and a temperature step, an actor step every ``policy_frequency``-th call
and a soft target update, in holosoma's order. The actor acts in [-1, 1], but log-probs, the entropy target and the
critic's action input live in the recipe's action space ``b_j * a_j`` (``action_bound``): holosoma's FastSAC acts
with ``tanh(u) * b_j``, so its log-prob carries ``-sum_j log b_j`` and its entropy target ``-0.5 * action_dim`` means
"0.5 nats below a unit box" there.

An update never waits for the device: its metrics are summed on the device and read by :meth:`FastSAC.read_metrics`
(once per log interval in training), a non-finite step is skipped on the device, and the batch comes from the replay's
device-side sampler. On CUDA with ``algo.compile`` the update's work (both optimiser steps, the actor's every
``policy_frequency``-th, the target update, the metrics) replays as one CUDA graph per update (:mod:`.graphs`).
"""

from __future__ import annotations

import contextlib
import copy
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import record_function

from .config import SACConfig
from .device import resolve_device
from .graphs import CapturedUpdate
from .networks import Actor, CriticEnsemble, project_distribution
from .normalizer import RunningNormalizer
from .replay import BATCH_KEYS

MIRRORED_KEYS = {"obs": "obs", "next_obs": "obs", "critic_obs": "critic_obs", "next_critic_obs": "critic_obs",
                 "action": "action"}
"""Batch keys that symmetry augmentation mirrors, and the mirror each uses (the others are repeated)."""
OPTIMIZER_SETTINGS = ("lr", "betas", "weight_decay", "capturable")
"""Optimiser settings a loaded state does not override (the config's, and the learning rate's tensor that a captured
update reads)."""
# nonfinite_counts(): updates with any skipped step, steps skipped per optimiser, current run of such updates
NONFINITE_KEYS = ("updates", "critic", "actor", "alpha", "streak")
_MODULES = ("actor", "critic", "critic_target", "obs_normalizer", "critic_obs_normalizer")
_OPTIMIZERS = ("actor_optimizer", "critic_optimizer", "alpha_optimizer")
CRITIC_METRICS = ("critic_loss", "q_mean", "q_target_mean", "critic_grad_norm", "alpha_loss", "entropy_next")
"""Metrics of every update (``entropy_next``: of the next-state actions the temperature step used)."""
ACTOR_METRICS = ("actor_loss", "entropy", "log_std_mean", "actor_grad_norm")
"""Metrics of the actor steps."""


class FastSAC:
    """Soft actor-critic with the FastSAC recipe (see :class:`SACConfig`).

    ``device`` overrides ``cfg.device``; ``action_bound``: per action dim the factor ``b_j`` from [-1, 1] to the
    recipe's action space (``EnvSpec.action_bound``; None: ones); ``mirror``: the task's left/right mirror of
    ``obs``, ``critic_obs`` and ``action`` as signed permutations (``EnvSpec.mirror``, used when
    ``cfg.use_symmetry``), ``mirror_error``: why the task has none.

    ``grad_sync`` may be set to a callable on a list of parameters, run after every backward pass before clipping
    and the optimiser step (e.g. an all-reduce average); ``stats_sync`` to an in-place all-reduce SUM of a tensor,
    so the observation normalisers merge the batches of all ranks and stay identical across them. With either set the
    update runs eagerly (a collective cannot be replayed in a CUDA graph with gloo).

    ``accelerate``: compiled loss functions and the update replayed as CUDA graphs (None: ``cfg.compile`` on CUDA; on
    the CPU, True runs the compiled functions and the captured update's static-buffer program without a capture).
    """

    def __init__(self, cfg: SACConfig, obs_dim: int, critic_obs_dim: int, action_dim: int,
                 device: str | torch.device | None = None, action_bound: Sequence[float] | None = None,
                 mirror: Mapping[str, tuple[Sequence[int], Sequence[float]]] | None = None,
                 mirror_error: str = "", accelerate: bool | None = None) -> None:
        if min(obs_dim, critic_obs_dim, action_dim) < 1:
            raise ValueError(f"FastSAC dims must be >= 1: obs_dim={obs_dim} critic_obs_dim={critic_obs_dim} "
                             f"action_dim={action_dim}")
        cfg.validate()
        self.cfg = cfg
        self.obs_dim = int(obs_dim)
        self.critic_obs_dim = int(critic_obs_dim)
        self.action_dim = int(action_dim)
        self.device = resolve_device(cfg.device if device is None else device)
        on_cuda = self.device.type == "cuda"
        self.use_amp = bool(cfg.amp and on_cuda)
        self.use_compile = bool(cfg.compile and on_cuda) if accelerate is None else bool(accelerate)
        self.target_entropy = cfg.resolved_target_entropy(self.action_dim)
        bound = [1.0] * self.action_dim if action_bound is None else [float(b) for b in action_bound]
        if len(bound) != self.action_dim or not all(math.isfinite(b) and b > 0 for b in bound):
            raise ValueError(f"action_bound needs {self.action_dim} finite positive factors, got {bound}")
        self.action_bound = torch.tensor(bound, dtype=torch.float32, device=self.device)
        # log|det| of a -> b * a, subtracted from every [-1, 1] log-density (-55.06 nats for the G1 29-DoF bounds)
        self.log_bound_sum = float(sum(math.log(b) for b in bound))
        self.mirror = self._mirror_tensors(mirror, mirror_error) if cfg.use_symmetry else None

        torch.manual_seed(cfg.seed)
        self.actor = Actor(self.obs_dim, self.action_dim, cfg.actor_hidden_dims, layer_norm=cfg.layer_norm,
                           activation=cfg.activation, log_std_min=cfg.log_std_min, log_std_max=cfg.log_std_max)
        self.actor.to(self.device)
        if cfg.init_log_std_at_target:
            per_dim = self.target_entropy / self.action_dim - 0.5 * math.log(2.0 * math.pi * math.e)
            self.actor.set_initial_log_std([per_dim - math.log(b) for b in bound])
        self.critic = CriticEnsemble(self.critic_obs_dim, self.action_dim, cfg.critic_hidden_dims, num_q=cfg.num_q,
                                     layer_norm=cfg.layer_norm, activation=cfg.activation,
                                     distributional=cfg.distributional, v_min=cfg.v_min, v_max=cfg.v_max,
                                     num_atoms=cfg.num_atoms).to(self.device)
        self.critic_target = copy.deepcopy(self.critic)
        self.critic_target.requires_grad_(False)
        self.obs_normalizer, self.critic_obs_normalizer = (
            RunningNormalizer(dim, enabled=cfg.obs_normalization, eps=cfg.obs_norm_eps, device=self.device)
            for dim in (self.obs_dim, self.critic_obs_dim))
        self.log_alpha = torch.tensor(math.log(cfg.alpha_init), dtype=torch.float32, device=self.device,
                                      requires_grad=True)

        # fused kernels (CPU and CUDA) take AMP's ``found_inf`` flag: a step whose loss or gradient
        # is not finite is skipped on the device, with no host sync per update (see _step). A captured update reads
        # its learning rates from tensors (set_learning_rates fills them) and needs capturable optimisers.
        betas = (cfg.adam_beta1, cfg.adam_beta2)
        capturable = self.use_compile and on_cuda

        def adamw(params: Any, lr: float, **kw: Any) -> torch.optim.AdamW:
            rate = torch.tensor(lr, device=self.device) if capturable else lr
            return torch.optim.AdamW(params, lr=rate, betas=betas, fused=True, capturable=capturable, **kw)

        # the parameter lists, walked once (a load copies into these tensors)
        self._actor_params, self._critic_params = list(self.actor.parameters()), list(self.critic.parameters())
        self._target_params = list(self.critic_target.parameters())
        self.actor_optimizer = adamw(self._actor_params, cfg.actor_lr, weight_decay=cfg.weight_decay)
        self.critic_optimizer = adamw(self._critic_params, cfg.critic_lr, weight_decay=cfg.weight_decay)
        # AdamW's default weight decay (0.01) on log(alpha) too, as holosoma's temperature optimiser
        self.alpha_optimizer = adamw([self.log_alpha], cfg.alpha_lr)
        # on the device, read on the host only by nonfinite_counts() and read_metrics(): skipped-step counters,
        # and per metric the sum since the last read with the number of updates (actor steps) summed
        self._nonfinite = torch.zeros(len(NONFINITE_KEYS), dtype=torch.float32, device=self.device)
        self._critic_sums = torch.zeros(len(CRITIC_METRICS) + 1, dtype=torch.float32, device=self.device)
        self._actor_sums = torch.zeros(len(ACTOR_METRICS) + 1, dtype=torch.float32, device=self.device)
        self._last_actor_metrics: dict[str, float] = {}

        self.num_updates_done = 0
        self._early_lr: bool | None = None  # what set_learning_rates last set: early_lr (True), the config's, or none
        self.grad_sync: Callable[[list[nn.Parameter]], None] | None = None  # see the class doc
        self.stats_sync: Callable[[torch.Tensor], None] | None = None
        self._captured = (CapturedUpdate(self.update_step, self.device, self.cfg.policy_frequency)
                          if self.use_compile else None)
        maybe_compile: Callable[[Callable[..., Any]], Callable[..., Any]] = (
            torch.compile if self.use_compile else lambda fn: fn)
        self._critic_loss_fn = maybe_compile(self._critic_loss)
        self._actor_loss_fn = maybe_compile(self._actor_loss)
        self._policy_fn = maybe_compile(self._policy)

    # ------------------------------------------------------------------ acting
    @property
    def alpha(self) -> float:
        """Current entropy temperature."""
        return float(self.log_alpha.detach().exp())

    def _autocast(self) -> contextlib.AbstractContextManager:
        if self.use_amp:
            # no cast cache: a CUDA graph must not hold casts made at its capture
            return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16, cache_enabled=False)
        return contextlib.nullcontext()

    def _policy(self, obs: torch.Tensor, deterministic: bool) -> torch.Tensor:
        with self._autocast():
            return self.actor(self.obs_normalizer(obs), deterministic=deterministic).float()

    @torch.no_grad()
    def act(self, obs: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        """Float32 actions in [-1, 1] for ``(N, obs_dim)`` observations, on the device ``obs`` came from (a CPU
        shared-memory tensor gets CPU actions back); the normaliser is not updated."""
        obs = torch.as_tensor(obs)
        if obs.ndim != 2 or obs.shape[1] != self.obs_dim:
            raise ValueError(f"FastSAC.act expects obs of shape (N, {self.obs_dim}), got {tuple(obs.shape)}")
        actions = self._policy_fn(obs.to(self.device, torch.float32, non_blocking=True), bool(deterministic))
        return actions.to(obs.device).clamp_(-1.0, 1.0)

    # ---------------------------------------------------------------- learning
    def sample_action(self, obs: torch.Tensor, params: tuple[torch.Tensor, torch.Tensor] | None = None
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Reparameterised sample for normalised ``obs``: (action in [-1, 1], log-prob in the recipe's
        action space ``b * a``, log-std); ``params``: the actor's (mean, log-std) for ``obs`` if already computed."""
        action, log_prob, log_std = self.actor.sample_from(
            *(self.actor.distribution_params(obs) if params is None else params))
        return action, log_prob.float() - self.log_bound_sum, log_std

    def _critic_loss(self, obs_c: torch.Tensor, actions: torch.Tensor, rewards: torch.Tensor,
                     next_obs: torch.Tensor, next_obs_c: torch.Tensor, bootstrap: torch.Tensor,
                     discount: torch.Tensor, alpha: torch.Tensor
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Critic loss, mean online Q, mean target value and mean next-state log-prob; each member regresses onto its
        own target member's soft target (clipped double-Q: all onto the one with the lowest expected value).

        A non-finite reward, bootstrap flag or discount makes the loss NaN (``0 * inf`` is NaN), so the step is skipped:
        the distributional target would clamp an infinite return onto its edge atom and train on it."""
        bound = self.action_bound
        with torch.no_grad(), self._autocast():
            next_actions, next_log_prob, _ = self.sample_action(next_obs)
            target_out = self.critic_target(next_obs_c, next_actions * bound)
        next_log_prob = next_log_prob.float()
        gamma_k = bootstrap * discount
        poison = (rewards.sum() + gamma_k.sum()) * 0.0
        with self._autocast():
            online_out = self.critic(obs_c, actions * bound)
        if self.cfg.distributional:
            support = self.critic.support
            with torch.no_grad():
                target_probs = torch.softmax(target_out.float(), dim=-1)  # (Q, B, A)
                # soft target atoms: r + gamma^k * mask * (z - alpha * log pi(a'|s'))
                shifted_rewards = rewards - gamma_k * alpha * next_log_prob
                target = project_distribution(target_probs, shifted_rewards, gamma_k, self.critic.v_min,
                                              self.critic.v_max)  # (Q, B, A)
                if self.cfg.use_cdq:
                    pick = (target_probs @ support).argmin(dim=0)  # (B,)
                    target = target.gather(0, pick.view(1, -1, 1).expand(1, -1, target.shape[-1]))
                target_value = target @ support
            log_probs = F.log_softmax(online_out.float(), dim=-1)
            # sum over members of the mean over the batch of -sum_i t_i log p_i, as one dot product
            target = target.expand_as(log_probs)
            loss = -torch.dot(target.reshape(-1), log_probs.reshape(-1)) / log_probs.shape[-2]
            with torch.no_grad():
                q_mean = (log_probs.exp() @ support).mean()
        else:
            with torch.no_grad():
                target_q = target_out.float()  # (Q, B)
                next_v = target_q.min(dim=0, keepdim=True).values if self.cfg.use_cdq else target_q
                target_value = rewards + gamma_k * (next_v - alpha * next_log_prob)
            online = online_out.float()
            loss = F.mse_loss(online, target_value.expand_as(online), reduction="none").mean(-1).sum()
            q_mean = online.mean().detach()
        return loss + poison, q_mean, target_value.mean(), next_log_prob.mean()

    def _actor_loss(self, obs: torch.Tensor, obs_c: torch.Tensor, alpha: torch.Tensor,
                    replayed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Actor loss, detached per-sample log-probs (recipe space), mean log-std; ``replayed``: for bc_weight."""
        with self._autocast():
            params = self.actor.distribution_params(obs)  # one forward for the sample and the pull's mean
            actions, log_prob, log_std = self.sample_action(obs, params)
            q = self.critic.q_values(obs_c, actions * self.action_bound).float()
        q = q.min(dim=0).values if self.cfg.use_cdq else q.mean(dim=0)
        loss = (alpha * log_prob - q).mean()
        if self.cfg.bc_weight > 0:
            mean = torch.tanh(params[0])
            loss = loss + self.cfg.bc_weight * ((mean - replayed) * self.action_bound).square().sum(-1).mean()
        return loss, log_prob.detach(), log_std.float().mean().detach()

    def _step(self, optimizer: torch.optim.Optimizer, loss: torch.Tensor, params: list[nn.Parameter],
              clip: bool = True, name: str = "critic") -> tuple[torch.Tensor, torch.Tensor]:
        """Backward, sync, clip and step (profiler ranges ``sac/<name>_backward``, ``_step``); returns the gradient norm
        and a 0/1 flag, 1 when the step was skipped (parameters and optimiser state untouched) for a non-finite loss or
        gradient, decided on the device."""
        with record_function(f"sac/{name}_backward"):
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if self.grad_sync is not None:
                # a loss non-finite on this rank alone must skip the step on every rank, or their weights part:
                # 0 * NaN/inf is NaN, so it reaches every rank's averaged gradient and so the skip flag below
                grad = next(p.grad for p in params if p.grad is not None)
                grad.view(-1)[:1] += loss.detach() * 0
                self.grad_sync(params)
        with record_function(f"sac/{name}_step"):
            # the norm of the per-tensor norms (get_total_norm adds a copy operator per tensor)
            norms = torch._foreach_norm([p.grad for p in params if p.grad is not None])  # noqa: SLF001 - torch's own
            grad_norm = torch.linalg.vector_norm(torch.stack(norms))
            if clip and self.cfg.max_grad_norm > 0:  # unclipped, the scale would be 1: a pass over the gradients saved
                nn.utils.clip_grads_with_norm_(params, self.cfg.max_grad_norm, grad_norm)
            skipped = (~(torch.isfinite(loss.detach()) & torch.isfinite(grad_norm))).float()
            optimizer.found_inf = skipped  # read by the fused kernel
            optimizer.step()
        return grad_norm, skipped

    def _mirror_tensors(self, mirror: Mapping[str, tuple[Sequence[int], Sequence[float]]] | None,
                        why: str) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        if mirror is None:
            raise ValueError(f"algo.use_symmetry=true needs a task with a left/right mirror; this one has none: "
                             f"{why or 'the task declares none'}")
        dims = {"obs": self.obs_dim, "critic_obs": self.critic_obs_dim, "action": self.action_dim}
        out = {}
        for key, dim in dims.items():
            perm, sign = mirror.get(key, ((), ()))
            if len(perm) != dim or len(sign) != dim or sorted(perm) != list(range(dim)):
                raise ValueError(f"the task's mirror of {key!r} is not a signed permutation of its {dim} entries")
            out[key] = (torch.as_tensor(perm, dtype=torch.long, device=self.device),
                        torch.as_tensor(sign, dtype=torch.float32, device=self.device))
        return out

    def _with_mirror(self, b: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The batch followed by its mirror image (holosoma's symmetry augmentation): observations and actions
        mirrored, rewards, bootstrap flags and discounts repeated."""
        out = {}
        for key, x in b.items():
            src = MIRRORED_KEYS.get(key)
            if src is None:
                out[key] = torch.cat([x, x])
            else:
                perm, sign = self.mirror[src]
                out[key] = torch.cat([x, x[..., perm] * sign.to(x.dtype)])
        return out

    def set_learning_rates(self, env_steps: int) -> None:
        """Actor and critic rates after ``env_steps`` env steps: algo.early_lr before algo.early_lr_env_steps."""
        cfg = self.cfg
        early = cfg.early_lr is not None and env_steps < cfg.early_lr_env_steps
        if early == self._early_lr:  # unchanged (a tensor rate would cost a kernel per call)
            return
        self._early_lr = early
        for optimizer, lr in ((self.actor_optimizer, cfg.actor_lr), (self.critic_optimizer, cfg.critic_lr)):
            for group in optimizer.param_groups:
                _set_lr(group, cfg.early_lr if early else lr)

    def update(self, batch: dict[str, torch.Tensor], *, return_metrics: bool = True) -> dict[str, float]:
        """One FastSAC gradient step on a batch from ``ReplayBuffer.sample``.

        The normalisers are updated from the batch first; every forward pass of this step, targets included, then uses
        those frozen statistics. The update never waits for the device; with ``return_metrics`` it then returns
        :meth:`read_metrics` (one host sync), else ``{}``.
        """
        missing = [k for k in BATCH_KEYS if k not in batch]
        if missing:
            raise ValueError(f"FastSAC.update: batch is missing keys {missing}")
        b = {k: batch[k] if batch[k].device == self.device else batch[k].to(self.device, non_blocking=True)
             for k in BATCH_KEYS}
        # the actor steps on the 2nd, 4th, ... critic step of a run of policy_frequency (holosoma: i % 2 == 1)
        actor_turn = self.num_updates_done % self.cfg.policy_frequency == self.cfg.policy_frequency - 1
        if self._captured is not None and self.grad_sync is None and self.stats_sync is None:
            self._captured.run(b, actor_turn)
        else:
            self.update_step(b, actor_turn)
        self.num_updates_done += 1
        return self.read_metrics() if return_metrics else {}

    def update_step(self, b: dict[str, torch.Tensor], actor_turn: bool) -> None:
        """The work of one update on a device batch, all of it tensor operations (what a CUDA graph captures):
        normalisers, critic and temperature steps, the actor step when ``actor_turn``, the target update, the metrics
        and the skipped-step counters."""
        if self.mirror is not None:
            b = self._with_mirror(b)
        with record_function("sac/normalize"):
            self.obs_normalizer.update(b["obs"], all_reduce=self.stats_sync)
            self.critic_obs_normalizer.update(b["critic_obs"], all_reduce=self.stats_sync)
            obs, next_obs = self.obs_normalizer.normalize(b["obs"], b["next_obs"])
            obs_c, next_obs_c = self.critic_obs_normalizer.normalize(b["critic_obs"], b["next_critic_obs"])
        alpha = self.log_alpha.detach().exp()
        with record_function("sac/critic_forward"):
            critic_loss, q_mean, q_target_mean, next_log_prob = self._critic_loss_fn(
                obs_c, b["action"], b["rewards"], next_obs, next_obs_c, b["bootstrap"], b["discount"], alpha)
        critic_grad_norm, critic_skipped = self._step(
            self.critic_optimizer, critic_loss, self._critic_params, name="critic")
        with record_function("sac/temperature"):
            # temperature at every critic step, on the next-state log-probs of the critic's target (holosoma's
            # loss: -alpha (log pi(a'|s') + target), so its gradient in log(alpha) scales with alpha)
            alpha_loss = -(self.log_alpha.exp() * (next_log_prob.detach() + self.target_entropy))
            alpha_skipped = torch.zeros((), device=self.device)
            if self.cfg.autotune_alpha:
                _, alpha_skipped = self._step(self.alpha_optimizer, alpha_loss, [self.log_alpha], clip=False,
                                              name="temperature")
        actor_skipped = torch.zeros((), device=self.device)
        if actor_turn:
            # the actor needs dQ/da only: with the critic's weights frozen, backward skips their gradients (one of
            # three matmuls per critic layer in this step) and the actor's gradient is the same
            with record_function("sac/actor_forward"):
                for p in self._critic_params:
                    p.requires_grad_(False)
                try:
                    actor_loss, log_prob, log_std_mean = self._actor_loss_fn(
                        obs, obs_c, self.log_alpha.detach().exp(), b["action"])
                finally:
                    for p in self._critic_params:
                        p.requires_grad_(True)
            actor_grad_norm, actor_skipped = self._step(self.actor_optimizer, actor_loss,
                                                        self._actor_params, name="actor")
            with record_function("sac/metrics"), torch.no_grad():
                _add_unless(self._actor_sums, actor_skipped, [actor_loss.detach(), -log_prob.mean(), log_std_mean,
                                                              actor_grad_norm.detach()])
        with record_function("sac/target_update"), torch.no_grad():  # Polyak average of the online critic
            torch._foreach_lerp_(self._target_params, self._critic_params, self.cfg.tau)
        with record_function("sac/metrics"), torch.no_grad():
            _add_unless(self._critic_sums, critic_skipped, [critic_loss.detach(), q_mean, q_target_mean,
                                                            critic_grad_norm.detach(), alpha_loss.detach(),
                                                            -next_log_prob.detach()])
            self._count_nonfinite(critic_skipped, actor_skipped, alpha_skipped)

    def read_metrics(self) -> dict[str, float]:
        """The mean of each metric over the updates since the last read whose critic step was taken (actor metrics:
        over the actor steps taken; the latest ones again if none was), and the current temperature ``alpha``, with
        one host sync; starts the next sums. A skipped step is counted by :meth:`nonfinite_counts` instead."""
        alpha = self.log_alpha.detach().float().exp().view(1)
        values = torch.cat([self._critic_sums, self._actor_sums, alpha]).tolist()
        self._critic_sums.zero_()
        self._actor_sums.zero_()
        nc, na = len(CRITIC_METRICS), len(ACTOR_METRICS)
        critic, n_critic = values[:nc], values[nc]
        actor, n_actor = values[nc + 1: nc + 1 + na], values[nc + 1 + na]
        metrics = {k: v / n_critic for k, v in zip(CRITIC_METRICS, critic)} if n_critic else {}
        if n_actor:
            self._last_actor_metrics = {k: v / n_actor for k, v in zip(ACTOR_METRICS, actor)}
        return {**metrics, **self._last_actor_metrics, "alpha": values[-1]}

    @torch.no_grad()
    def _count_nonfinite(self, critic: torch.Tensor, actor: torch.Tensor, alpha: torch.Tensor) -> None:
        any_skipped = torch.maximum(critic, torch.maximum(actor, alpha))
        n = self._nonfinite
        n[:4] += torch.stack([any_skipped, critic, actor, alpha])
        n[4] = (n[4] + 1.0) * any_skipped  # streak: consecutive updates with a skipped step

    def nonfinite_counts(self) -> dict[str, int]:
        """Updates skipped for a non-finite loss or gradient (one host sync; see NONFINITE_KEYS)."""
        return dict(zip(NONFINITE_KEYS, (int(v) for v in self._nonfinite.tolist())))

    def nonfinite_parameters(self) -> list[str]:
        """Names of the parameters and buffers (normalisers, temperature) holding NaN or inf."""
        tensors = {"log_alpha": self.log_alpha}
        for prefix in _MODULES:
            module = getattr(self, prefix)
            for name, t in (*module.named_parameters(), *module.named_buffers()):
                tensors[f"{prefix}.{name}"] = t
        return [name for name, t in tensors.items() if t.is_floating_point() and not bool(torch.isfinite(t).all())]

    # ------------------------------------------------------------- checkpoints
    def _dims(self) -> dict[str, Any]:
        """The constructor's shape arguments, as plain data (the mirror only when symmetry is on)."""
        out: dict[str, Any] = {"obs_dim": self.obs_dim, "critic_obs_dim": self.critic_obs_dim,
                               "action_dim": self.action_dim, "action_bound": self.action_bound.tolist()}
        if self.mirror is not None:
            out["mirror"] = {k: [perm.tolist(), sign.tolist()] for k, (perm, sign) in self.mirror.items()}
        return out

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume learning: networks, optimisers, normalisers, temperature."""
        return {"dims": self._dims(), "config": self.cfg.to_dict(),
                **{key: getattr(self, key).state_dict() for key in _MODULES},
                "log_alpha": self.log_alpha.detach().clone(),
                **{key: getattr(self, key).state_dict() for key in _OPTIMIZERS},
                "num_updates_done": self.num_updates_done}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a :meth:`state_dict` (from any device); dims must match."""
        dims = state.get("dims", {})
        mine = self._dims()
        if dims and dims != mine:
            raise ValueError(f"checkpoint dims {dims} do not match this agent {mine}")
        for key in _MODULES:
            getattr(self, key).load_state_dict(state[key])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"].to(self.device))
        for key in _OPTIMIZERS:
            opt = getattr(self, key)
            # the moments come from the checkpoint, the settings from this agent's config: a resume with
            # algo.alpha_lr=... or algo.weight_decay=... must train with them, as its config says
            mine = [{k: group[k] for k in OPTIMIZER_SETTINGS} for group in opt.param_groups]
            opt.load_state_dict(state[key])
            for group, settings in zip(opt.param_groups, mine):
                group.update(settings, fused=True, foreach=None)
        self._early_lr = None  # the next set_learning_rates sets the rates again
        self.num_updates_done = int(state.get("num_updates_done", 0))
        if self._captured is not None:  # new optimiser state tensors: capture again
            self._captured.reset()

    @classmethod
    def from_checkpoint(cls, state: dict[str, Any], device: str | torch.device | None = None) -> FastSAC:
        """Rebuild an agent (config and dims included) from a :meth:`state_dict`."""
        agent = cls(SACConfig.from_mapping(state["config"]), device=device, **state["dims"])
        agent.load_state_dict(state)
        return agent


def _add_unless(sums: torch.Tensor, skipped: torch.Tensor, values: list[torch.Tensor]) -> None:
    """Add ``values`` and a count of 1 to ``sums`` unless ``skipped`` (a 0/1 flag on the device)."""
    one = torch.ones_like(values[0])
    sums.add_(torch.where(skipped.bool(), 0.0, torch.stack([*values, one])))


def _set_lr(group: dict[str, Any], lr: float) -> None:
    """Set a param group's learning rate, in place where it is a tensor (a captured update reads that tensor)."""
    if isinstance(group["lr"], torch.Tensor):
        group["lr"].fill_(lr)
    else:
        group["lr"] = lr

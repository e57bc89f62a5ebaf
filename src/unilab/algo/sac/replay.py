"""Replay buffer on the learner device with n-step sampling.

Storage is ``(num_envs, capacity, ...)``: every env writes one transition per
iteration at a shared ring position, so each env row is that env's own time
series and n-step windows are read along it. ``next_obs`` is stored
explicitly (for done steps it is the true final observation from before the
autoreset), which makes truncated windows bootstrap from the right state.
"""

from __future__ import annotations

import psutil
import torch


def transition_nbytes(obs_dim: int, critic_obs_dim: int, action_dim: int) -> int:
    """Storage bytes of one transition (float32 obs/next obs/action/reward, two bool flags)."""
    return 4 * (2 * (obs_dim + critic_obs_dim) + action_dim + 1) + 2


def available_memory_bytes(device: torch.device) -> int:
    """Free memory where the buffer would live (CUDA device memory or host RAM)."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    return int(psutil.virtual_memory().available)


class ReplayBuffer:
    """Ring buffer of per-env transitions; samples n-step transitions.

    A sampled transition starting at step ``t`` of env ``e`` covers steps
    ``t .. t+k-1`` where ``k <= n_steps`` is cut at the first done step
    (terminated or truncated) and at the newest stored step. It carries:

    - ``rewards``: ``sum_{j<k} gamma^j r_{t+j}``
    - ``next_obs`` / ``next_critic_obs``: the next observation of step ``t+k-1``
    - ``bootstrap``: 0.0 only if step ``t+k-1`` TERMINATED (truncation still
      bootstraps from its final observation), else 1.0
    - ``discount``: ``gamma^k`` (multiply with ``bootstrap`` for the target)
    """

    def __init__(self, num_envs: int, capacity: int, obs_dim: int, critic_obs_dim: int,
                 action_dim: int, *, n_steps: int = 1, gamma: float = 0.99,
                 device: torch.device | str = "cpu", seed: int = 0) -> None:
        if min(num_envs, capacity, obs_dim, critic_obs_dim, action_dim, n_steps) < 1:
            raise ValueError(
                "ReplayBuffer sizes must be >= 1: "
                f"num_envs={num_envs} capacity={capacity} obs_dim={obs_dim} "
                f"critic_obs_dim={critic_obs_dim} action_dim={action_dim} n_steps={n_steps}"
            )
        if n_steps > capacity:
            raise ValueError(f"n_steps ({n_steps}) exceeds capacity ({capacity})")
        self.num_envs = int(num_envs)
        self.capacity = int(capacity)
        self.obs_dim = int(obs_dim)
        self.critic_obs_dim = int(critic_obs_dim)
        self.action_dim = int(action_dim)
        self.n_steps = int(n_steps)
        self.gamma = float(gamma)
        self.device = torch.device(device)
        need = self.num_envs * self.capacity * transition_nbytes(obs_dim, critic_obs_dim, action_dim)
        free = available_memory_bytes(self.device)
        if need > free:
            raise MemoryError(
                f"replay buffer needs {need / 2**30:.1f} GiB on {self.device} for num_envs={num_envs} x "
                f"buffer_size={capacity} transitions but only {free / 2**30:.1f} GiB is free; "
                "lower algo.buffer_size (transitions per env) or algo.num_envs"
            )
        shape = (self.num_envs, self.capacity)
        f32 = dict(dtype=torch.float32, device=self.device)
        self.obs = torch.zeros(*shape, self.obs_dim, **f32)
        self.critic_obs = torch.zeros(*shape, self.critic_obs_dim, **f32)
        self.actions = torch.zeros(*shape, self.action_dim, **f32)
        self.rewards = torch.zeros(*shape, **f32)
        self.next_obs = torch.zeros(*shape, self.obs_dim, **f32)
        self.next_critic_obs = torch.zeros(*shape, self.critic_obs_dim, **f32)
        self.terminated = torch.zeros(*shape, dtype=torch.bool, device=self.device)
        self.truncated = torch.zeros(*shape, dtype=torch.bool, device=self.device)
        self.ptr = 0
        self.size = 0
        self._generator = torch.Generator(device=self.device)
        self._generator.manual_seed(int(seed))
        self._discount_powers = self.gamma ** torch.arange(self.n_steps + 1, dtype=torch.float32,
                                                            device=self.device)

    def __len__(self) -> int:
        """Number of stored transitions over all envs."""
        return self.size * self.num_envs

    @property
    def nbytes(self) -> int:
        """Bytes held by the storage tensors."""
        tensors = (self.obs, self.critic_obs, self.actions, self.rewards, self.next_obs,
                   self.next_critic_obs, self.terminated, self.truncated)
        return sum(t.numel() * t.element_size() for t in tensors)

    def _check(self, name: str, x: torch.Tensor, trailing: tuple[int, ...]) -> torch.Tensor:
        x = torch.as_tensor(x)
        expected = (self.num_envs, *trailing)
        if tuple(x.shape) != expected:
            raise ValueError(f"ReplayBuffer.extend: {name} has shape {tuple(x.shape)}, expected {expected}")
        return x

    @torch.no_grad()
    def extend(self, obs: torch.Tensor, critic_obs: torch.Tensor, action: torch.Tensor,
               reward: torch.Tensor, next_obs: torch.Tensor, next_critic_obs: torch.Tensor,
               terminated: torch.Tensor, truncated: torch.Tensor) -> None:
        """Append one step of every env; all inputs are ``(num_envs, ...)`` on any device.

        ``next_obs``/``next_critic_obs`` must be the true post-step observation
        (the final observation for envs that just ended, not the reset one).
        """
        p = self.ptr
        self.obs[:, p] = self._check("obs", obs, (self.obs_dim,)).to(self.device, torch.float32)
        self.critic_obs[:, p] = self._check("critic_obs", critic_obs, (self.critic_obs_dim,)).to(
            self.device, torch.float32)
        self.actions[:, p] = self._check("action", action, (self.action_dim,)).to(self.device, torch.float32)
        self.rewards[:, p] = self._check("reward", reward, ()).to(self.device, torch.float32)
        self.next_obs[:, p] = self._check("next_obs", next_obs, (self.obs_dim,)).to(self.device, torch.float32)
        self.next_critic_obs[:, p] = self._check("next_critic_obs", next_critic_obs,
                                                 (self.critic_obs_dim,)).to(self.device, torch.float32)
        self.terminated[:, p] = self._check("terminated", terminated, ()).to(self.device, torch.bool)
        self.truncated[:, p] = self._check("truncated", truncated, ()).to(self.device, torch.bool)
        self.ptr = (p + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    @torch.no_grad()
    def sample(self, batch_size: int) -> dict[str, torch.Tensor]:
        """Uniformly sample ``batch_size`` n-step transitions (with replacement).

        Returns a dict of tensors on the buffer device: ``obs, critic_obs,
        actions, rewards, next_obs, next_critic_obs, bootstrap, discount``
        (see the class docstring), plus ``n`` (window lengths, int64).
        """
        if self.size == 0:
            raise ValueError("ReplayBuffer.sample called on an empty buffer")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        g = self._generator
        env = torch.randint(0, self.num_envs, (batch_size,), generator=g, device=self.device)
        # start slots: any stored slot; when not full, slots are 0..size-1 == 0..ptr-1
        start = torch.randint(0, self.size, (batch_size,), generator=g, device=self.device)
        return self._gather(env, start)

    @torch.no_grad()
    def gather(self, env: torch.Tensor, start: torch.Tensor) -> dict[str, torch.Tensor]:
        """n-step transitions for explicit ``(env, start slot)`` pairs (see :meth:`sample`)."""
        env = torch.as_tensor(env, dtype=torch.long, device=self.device)
        start = torch.as_tensor(start, dtype=torch.long, device=self.device)
        if self.size == 0:
            raise ValueError("ReplayBuffer.gather called on an empty buffer")
        if env.shape != start.shape or env.ndim != 1:
            raise ValueError(f"env and start must be equal-length 1-D, got {tuple(env.shape)} and {tuple(start.shape)}")
        if bool(((start < 0) | (start >= self.size) | (env < 0) | (env >= self.num_envs)).any()):
            raise ValueError("gather: env id or start slot outside the stored data")
        return self._gather(env, start)

    def _gather(self, env: torch.Tensor, start: torch.Tensor) -> dict[str, torch.Tensor]:
        batch_size = env.shape[0]
        # steps from start to the newest slot (ptr - 1), inclusive; windows never cross the write pointer
        available = (self.ptr - 1 - start) % self.capacity + 1
        returns = torch.zeros(batch_size, dtype=torch.float32, device=self.device)
        length = torch.zeros(batch_size, dtype=torch.long, device=self.device)
        alive = torch.ones(batch_size, dtype=torch.bool, device=self.device)
        last = start.clone()
        for j in range(self.n_steps):  # loop over the window, vectorised over the batch
            idx = (start + j) % self.capacity
            use = alive & (j < available)
            returns += torch.where(use, self._discount_powers[j] * self.rewards[env, idx], 0.0)
            length += use.long()
            last = torch.where(use, idx, last)
            done = self.terminated[env, idx] | self.truncated[env, idx]
            alive = use & ~done

        return {
            "obs": self.obs[env, start],
            "critic_obs": self.critic_obs[env, start],
            "actions": self.actions[env, start],
            "rewards": returns,
            "next_obs": self.next_obs[env, last],
            "next_critic_obs": self.next_critic_obs[env, last],
            "bootstrap": (~self.terminated[env, last]).float(),
            "discount": self._discount_powers[length],
            "n": length,
        }

    def state_dict(self) -> dict:
        """Full buffer contents (for optional checkpointing of the replay)."""
        return {
            "obs": self.obs, "critic_obs": self.critic_obs, "actions": self.actions,
            "rewards": self.rewards, "next_obs": self.next_obs, "next_critic_obs": self.next_critic_obs,
            "terminated": self.terminated, "truncated": self.truncated,
            "ptr": self.ptr, "size": self.size, "generator": self._generator.get_state(),
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore contents saved by :meth:`state_dict` (shapes must match)."""
        for name in ("obs", "critic_obs", "actions", "rewards", "next_obs", "next_critic_obs",
                     "terminated", "truncated"):
            dst = getattr(self, name)
            src = state[name]
            if tuple(src.shape) != tuple(dst.shape):
                raise ValueError(f"replay state {name} has shape {tuple(src.shape)}, buffer has {tuple(dst.shape)}")
            dst.copy_(src.to(self.device))
        self.ptr = int(state["ptr"])
        self.size = int(state["size"])
        self._generator.set_state(state["generator"])

"""Replay buffer on the learner device with n-step sampling.

Storage is ``(num_envs, capacity, ...)``, every env writing at a shared ring position, so each env row is its own
time series and n-step windows are read along it. ``next_obs`` is stored explicitly (for done steps the final
observation from before the autoreset), so truncated windows bootstrap from the right state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import psutil
import torch

from unilab.sim.spec import FINAL, NEXT, Field

BATCH_KEYS = ("obs", "critic_obs", "action", "rewards", "next_obs", "next_critic_obs", "bootstrap", "discount")


def stored_fields(record: Sequence[Field]) -> tuple[Field, ...]:
    """What the buffer stores per transition: every record field, plus ``next_<name>`` per observation."""
    nxt = tuple(Field(NEXT + f.name, f.shape, f.dtype) for f in record if f.observation)
    return (*record, *nxt)


def transition_nbytes(record: Sequence[Field]) -> int:
    """Storage bytes of one transition."""
    return sum(int(np.prod(f.shape, dtype=np.int64)) * np.dtype(f.dtype).itemsize for f in stored_fields(record))


def available_memory_bytes(device: torch.device) -> int:
    """Free memory where the buffer would live (CUDA device memory or host RAM)."""
    if device.type == "cuda":
        return int(torch.cuda.mem_get_info(device)[0])
    return int(psutil.virtual_memory().available)


class ReplayBuffer:
    """Ring buffer of per-env transitions; samples n-step transitions.

    A transition sampled at step ``t`` covers steps ``t .. t+k-1``, ``k <= n_steps`` cut at the first done step
    (terminated or truncated) and at the newest stored step. It carries ``rewards`` = ``sum_{j<k} gamma^j r_{t+j}``,
    ``next_obs`` / ``next_critic_obs`` of step ``t+k-1``, ``bootstrap`` = 0.0 only if step ``t+k-1`` terminated
    and was not also truncated (truncation bootstraps from its final observation), and ``discount`` = ``gamma^k``.
    """

    def __init__(self, num_envs: int, capacity: int, record: Sequence[Field], *, n_steps: int = 1,
                 gamma: float = 0.99, device: torch.device | str = "cpu", seed: int = 0) -> None:
        dims = {f.name: int(np.prod(f.shape, dtype=np.int64)) for f in record}
        if min(num_envs, capacity, n_steps, *dims.values()) < 1:
            raise ValueError(f"ReplayBuffer sizes must be >= 1: num_envs={num_envs} capacity={capacity} "
                             f"n_steps={n_steps} field sizes {dims}")
        if n_steps > capacity:
            raise ValueError(f"n_steps ({n_steps}) exceeds capacity ({capacity})")
        self.record = tuple(record)
        self.num_envs = int(num_envs)
        self.capacity = int(capacity)
        self.n_steps = int(n_steps)
        self.gamma = float(gamma)
        self.device = torch.device(device)
        need = self.num_envs * self.capacity * transition_nbytes(self.record)
        free = available_memory_bytes(self.device)
        if need > free:
            raise MemoryError(f"replay buffer needs {need / 2**30:.1f} GiB on {self.device} for num_envs={num_envs} x "
                              f"buffer_size={capacity} transitions but only {free / 2**30:.1f} GiB is free; "
                              "lower algo.buffer_size (transitions per env) or algo.num_envs")
        self.storage: dict[str, torch.Tensor] = {
            # float32 -> torch.float32, bool -> torch.bool, ...
            f.name: torch.zeros(self.num_envs, self.capacity, *f.shape, dtype=getattr(torch, np.dtype(f.dtype).name),
                                device=self.device)
            for f in stored_fields(self.record)
        }
        # each field as (num_envs * capacity, ...) rows, the rows a sample gathers (views: writes show through)
        self._rows = {name: t.view(-1, *t.shape[2:]) for name, t in self.storage.items()}
        self.observations = tuple(f.name for f in self.record if f.observation)
        self.ptr = 0
        self.size = 0
        self._generator = torch.Generator(device=self.device)
        self._generator.manual_seed(int(seed))
        self._discount_powers = self.gamma ** torch.arange(self.n_steps + 1, dtype=torch.float32, device=self.device)

    def __getattr__(self, name: str) -> torch.Tensor:
        storage = self.__dict__.get("storage")
        if storage is not None and name in storage:
            return storage[name]
        raise AttributeError(name)

    def __len__(self) -> int:
        """Number of stored transitions over all envs."""
        return self.size * self.num_envs

    @property
    def nbytes(self) -> int:
        """Bytes held by the storage tensors."""
        return sum(t.numel() * t.element_size() for t in self.storage.values())

    def _check(self, name: str, x: Any, dst: torch.Tensor) -> torch.Tensor:
        """``x`` as a tensor (where it was), checked against one step of storage ``dst``."""
        x = torch.as_tensor(x)
        expected = (self.num_envs, *dst.shape[2:])
        if tuple(x.shape) != expected:
            raise ValueError(f"ReplayBuffer.extend: {name} has shape {tuple(x.shape)}, expected {expected}")
        return x

    @torch.no_grad()
    def extend(self, before: Mapping[str, Any], after: Mapping[str, Any]) -> None:
        """Append one step of every env; arrays are ``(num_envs, ...)`` tensors or NumPy arrays on any device.

        ``before``: the observation fields the action was chosen on, and the action (the learner-written fields).
        ``after``: the step record the env wrote for that action: every other field, the next observations and, in the
        done rows (terminated | truncated) only, ``final_<obs>``. Other rows of ``final_<obs>`` are never read.
        """
        p = self.ptr
        # (key, storage name, the mapping that holds it): every record field, then each observation's next value
        writes = [(f.name, f.name, before if f.observation or f.writer != "env" else after) for f in self.record]
        writes += [(name, NEXT + name, after) for name in self.observations]
        for key, name, step in writes:
            dst = self.storage[name]
            dst[:, p] = self._check(key, step[key], dst).to(self.device, dst.dtype)
        # the done rows, found where the step lives (shared memory): only their final obs cross
        rows = (torch.as_tensor(after["terminated"]) | torch.as_tensor(after["truncated"])).nonzero().flatten()
        for name in self.observations if rows.numel() else ():  # no done rows: no final obs to read
            nxt = self.storage[NEXT + name]
            final = self._check(FINAL + name, after[FINAL + name], nxt)
            nxt[rows.to(self.device), p] = final[rows.to(final.device)].to(self.device, nxt.dtype)
        self.ptr = (p + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    @torch.no_grad()
    def sample(self, batch_size: int) -> dict[str, torch.Tensor]:
        """``batch_size`` n-step transitions (:data:`BATCH_KEYS` and ``n``, the window lengths): with ``batch_size >=
        num_envs`` ``batch_size // num_envs`` uniform start slots from every env (the remainder dropped, as holosoma's
        global batch is), else uniform envs."""
        if self.size == 0:
            raise ValueError("ReplayBuffer.sample called on an empty buffer")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        g = self._generator
        per_env = batch_size // self.num_envs
        if per_env >= 1:
            env = torch.arange(self.num_envs, device=self.device).repeat_interleave(per_env)
        else:
            env = torch.randint(0, self.num_envs, (batch_size,), generator=g, device=self.device)
        # start slots: any stored slot; when not full, slots are 0..size-1 == 0..ptr-1
        start = torch.randint(0, self.size, env.shape, generator=g, device=self.device)
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
        # rows of the (num_envs * capacity, ...) views: one index_select per field (advanced indexing with an
        # (env, slot) pair is several times slower on the CPU)
        base = env * self.capacity

        def rows(name: str, at: torch.Tensor) -> torch.Tensor:
            return self._rows[name].index_select(0, at)

        # the window's first step: every sampled slot holds one (the step from start to the newest slot, ptr - 1)
        at_start = base + start
        returns = rows("reward", at_start)
        length = torch.ones_like(start)
        last, at_last = start, at_start
        terminated, truncated = rows("terminated", at_start), rows("truncated", at_start)
        if self.n_steps > 1:
            alive = ~(terminated | truncated)
            available = (self.ptr - 1 - start) % self.capacity + 1  # steps up to the newest; never past ptr
            for j in range(1, self.n_steps):  # loop over the window, vectorised over the batch
                idx = (start + j) % self.capacity
                at = base + idx
                use = alive & (j < available)
                returns = returns + torch.where(use, self._discount_powers[j] * rows("reward", at), 0.0)
                length += use.long()
                last = torch.where(use, idx, last)
                alive = use & ~(rows("terminated", at) | rows("truncated", at))
            at_last = base + last
            terminated, truncated = rows("terminated", at_last), rows("truncated", at_last)

        batch = {name: rows(name, at_last if name.startswith(NEXT) else at_start) for name in self.storage
                 if name not in ("reward", "terminated", "truncated")}
        batch["rewards"] = returns
        # a step that both fails and times out bootstraps (holosoma: truncations | ~dones)
        batch["bootstrap"] = (~terminated | truncated).float()
        batch["discount"] = self._discount_powers[length]
        batch["n"] = length
        return batch

    def state_dict(self) -> dict:
        """Full buffer contents (for optional checkpointing of the replay)."""
        return {**self.storage, "ptr": self.ptr, "size": self.size, "generator": self._generator.get_state()}

    def reseed(self, seed: int) -> None:
        """Start a new sampling stream (a rank that loaded another rank's buffer must not draw its batches)."""
        self._generator.manual_seed(seed)

    def load_state_dict(self, state: dict) -> None:
        """Restore a :meth:`state_dict` (shapes must match; on error nothing is changed). The newest step of every env
        that did not fail is marked truncated: the envs restart after a resume, so an n-step window must end there."""
        for name, dst in self.storage.items():
            if name not in state:
                raise ValueError(f"replay state has no {name!r} (it holds {sorted(state)})")
            src = state[name]
            if tuple(src.shape) != tuple(dst.shape):
                raise ValueError(f"replay state {name} has shape {tuple(src.shape)}, buffer has {tuple(dst.shape)}")
        probe = torch.Generator(device=self._generator.device)
        probe.set_state(state["generator"])  # a sampler state of another device fails here, before any copy
        for name, dst in self.storage.items():
            dst.copy_(state[name].to(self.device))
        self.ptr = int(state["ptr"])
        self.size = int(state["size"])
        self._generator.set_state(state["generator"])
        if self.size:
            newest = (self.ptr - 1) % self.capacity
            self.truncated[:, newest] |= ~self.terminated[:, newest]

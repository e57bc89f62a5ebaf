"""One process group per GPU via torchrun / torch.distributed.

Each rank runs its own learner and collector; ranks average gradients
(all-reduce) so every rank holds the same networks. Only rank 0 writes logs
and checkpoints. On CPU the gloo backend runs the same code (that is how it is
tested here).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1


def from_env() -> DistInfo:
    """Join the process group torchrun describes in the environment (if any)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistInfo()
    info = DistInfo(
        rank=int(os.environ["RANK"]),
        world_size=world,
        local_rank=int(os.environ.get("LOCAL_RANK", os.environ["RANK"])),
        local_world_size=int(os.environ.get("LOCAL_WORLD_SIZE", str(world))),
    )
    if not dist.is_initialized():
        use_cuda = torch.cuda.is_available() and torch.cuda.device_count() >= info.local_world_size
        if use_cuda:
            torch.cuda.set_device(info.local_rank)
        dist.init_process_group(backend="nccl" if use_cuda else "gloo")
    return info


def cpu_partition(cpus: list[int], local_rank: int, local_world_size: int) -> list[int]:
    """Rank ``local_rank``'s contiguous, disjoint share of ``cpus``."""
    if local_world_size > len(cpus):
        raise ValueError(
            f"{local_world_size} ranks on this machine but only {len(cpus)} usable CPUs: each rank needs at least one"
        )
    per, extra = divmod(len(cpus), local_world_size)
    start = local_rank * per + min(local_rank, extra)
    return cpus[start : start + per + (1 if local_rank < extra else 0)]


def average_gradients(params: list[torch.nn.Parameter]) -> None:
    """All-reduce-average the gradients of ``params`` across ranks (one flat buffer)."""
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat)
    flat /= dist.get_world_size()
    offset = 0
    for g in grads:
        n = g.numel()
        g.copy_(flat[offset : offset + n].view_as(g))
        offset += n


def all_reduce_sum(t: torch.Tensor) -> None:
    """In-place sum of ``t`` over ranks (keeps observation normalisers equal)."""
    dist.all_reduce(t)


def broadcast_parameters(agent) -> None:
    """Give every rank rank 0's initial networks and temperature."""
    with torch.no_grad():
        for module in (agent.actor, agent.critic, agent.critic_target,
                       agent.obs_normalizer, agent.critic_obs_normalizer):
            for t in (*module.parameters(), *module.buffers()):
                dist.broadcast(t.data, src=0)
        dist.broadcast(agent.log_alpha.data, src=0)


def any_rank(flag: bool) -> bool:
    """True on every rank if ``flag`` is true on any rank."""
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else "cpu"
    t = torch.tensor([1.0 if flag else 0.0], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item() > 0)


def shutdown() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()

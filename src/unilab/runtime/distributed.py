"""One process group per GPU via torchrun / torch.distributed (on CPU gloo runs the same code: how it is tested, also as
two nodes on one machine). Each rank runs its own learner and collector; ranks average gradients, so all hold the same
networks. Only rank 0 writes logs and checkpoints.

A dead rank makes the others' next collective raise :class:`RankLost` naming it; a hung one, after a timeout. Two
timeouts, because the ranks are in step only once training runs: the default group (settings checks, start-up
broadcast, barriers after each checkpoint and evaluation snapshot) waits out a slow start-up or rank 0's writes; the
training group (gradients, normaliser statistics, stop votes) waits one collector step and :data:`STEP_SKEW_S` more.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist


@dataclass
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1


class RankLost(RuntimeError):
    """A collective failed: another rank died, hung past the timeout or lost its network."""


SURVIVOR_WAIT_S = 3.0  # how long survivors of a failed collective wait for each other to report in
# a training collective waits a collector step and this: a rank whose own collector hangs names it first
STEP_SKEW_S = 5.0
STORE_GRACE_S = 2.0  # a store that has not answered this long after the survivor wait lives on a frozen node


def from_env(timeout_s: float, cuda: bool) -> DistInfo:
    """Join the process group torchrun describes in the environment (if any). ``timeout_s`` bounds the default group's
    collectives: a rank that hangs (not only one that dies) in start-up or a save stops the others after it. ``cuda``
    (a GPU learner): NCCL, one GPU per local rank; else gloo (NCCL cannot move CPU tensors)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistInfo()
    info = DistInfo(rank=int(os.environ["RANK"]), world_size=world,
                    local_rank=int(os.environ.get("LOCAL_RANK", os.environ["RANK"])),
                    local_world_size=int(os.environ.get("LOCAL_WORLD_SIZE", str(world))))
    if not dist.is_initialized():
        use_cuda = cuda and torch.cuda.device_count() >= info.local_world_size
        if use_cuda:
            torch.cuda.set_device(info.local_rank)
        dist.init_process_group(backend="nccl" if use_cuda else "gloo", timeout=timedelta(seconds=timeout_s))
    return info


def lost_ranks() -> list[int] | None:
    """Ranks that did not report in after a failed collective (None: the rendezvous store does not answer). Every
    survivor writes its rank into the group's store and waits :data:`SURVIVOR_WAIT_S` for the others, on a daemon
    thread given :data:`STORE_GRACE_S` more: a store hosted by a frozen node never answers (its own timeout is the
    start-up's)."""
    answer: list[list[int] | None] = []
    ask = threading.Thread(target=lambda: answer.append(_report_in()), name="unilab-survivors", daemon=True)
    ask.start()
    ask.join(SURVIVOR_WAIT_S + STORE_GRACE_S)
    return answer[0] if answer else None


def _report_in() -> list[int] | None:
    rank, world = dist.get_rank(), dist.get_world_size()
    try:
        store = dist.distributed_c10d._get_default_store()  # noqa: SLF001 - the group's own store, no second one
        store.set(f"unilab/survivor/{rank}", "1")
        keys = [f"unilab/survivor/{r}" for r in range(world)]
        deadline = time.monotonic() + SURVIVOR_WAIT_S
        while time.monotonic() < deadline and not store.check(keys):
            time.sleep(0.1)
        return [r for r, key in enumerate(keys) if not store.check([key])]
    except Exception:  # noqa: BLE001 - the store lived on the lost node: we cannot tell who is alive
        return None


def _collective(what: str, call: Callable[[], Any]) -> Any:
    """Run one collective; a failure becomes RankLost naming the lost rank(s)."""
    try:
        return call()
    except RuntimeError as err:  # gloo and NCCL raise RuntimeError (DistBackendError) on a lost peer or timeout
        rank, world = dist.get_rank(), dist.get_world_size()
        lost = lost_ranks()
        if lost is None:
            who = f"rank {1 - rank}" if world == 2 else "another rank (the rendezvous store is unreachable too)"
        else:
            who = ", ".join(f"rank {r}" for r in lost) or "no rank (every rank is alive: a network fault?)"
        detail = str(err).strip().splitlines()[0][:200] if str(err).strip() else type(err).__name__
        raise RankLost(f"rank {rank} of {world} lost contact with {who} during {what} ({detail})") from err


def cpu_partition(cpus: list[int], local_rank: int, local_world_size: int) -> list[int]:
    """Rank ``local_rank``'s contiguous, disjoint share of ``cpus``."""
    if local_world_size > len(cpus):
        raise ValueError(f"{local_world_size} ranks on this machine but only {len(cpus)} usable CPUs: each rank needs "
                         "at least one")
    per, extra = divmod(len(cpus), local_world_size)
    start = local_rank * per + min(local_rank, extra)
    return cpus[start : start + per + (1 if local_rank < extra else 0)]


def training_group(step_timeout_s: float) -> Any:
    """A group of every rank whose collectives fail after ``step_timeout_s + STEP_SKEW_S``; call on every rank once all
    are past start-up (after :func:`barrier`)."""
    return _collective("the training group's set-up",
                       lambda: dist.new_group(timeout=timedelta(seconds=step_timeout_s + STEP_SKEW_S)))


def barrier(what: str) -> None:
    """Wait for every rank in the default group (its timeout is the start-up's)."""
    _collective(what, dist.barrier)


def check_same_settings(settings: dict[str, Any]) -> None:
    """Raise ValueError naming each setting whose value differs between ranks (a default-group collective): ranks with
    other iteration counts, intervals or algorithm settings would call their collectives in another order (a hang
    reported as a lost rank) or train different networks under one name."""
    gathered: list[Any] = [None] * dist.get_world_size()
    _collective("the settings check", lambda: dist.all_gather_object(gathered, settings))
    keys = sorted({k for g in gathered for k in g}, key=str)
    differ = [k for k in keys if any(g.get(k) != gathered[0].get(k) for g in gathered)]
    if differ:
        raise ValueError(
            "the ranks were started with different settings: "
            + "; ".join(f"{k} is " + ", ".join(f"{g.get(k)!r} on rank {r}" for r, g in enumerate(gathered))
                        for k in differ)
            + ". Start every rank with the same command (and the same training.resume checkpoint).")


def average_gradients(params: list[torch.nn.Parameter], group: Any = None) -> None:
    """All-reduce-average the gradients of ``params`` across ranks (one flat buffer)."""
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return
    flat = torch.cat([g.reshape(-1) for g in grads])
    _collective("the gradient all-reduce", lambda: dist.all_reduce(flat, group=group))
    flat /= dist.get_world_size()
    for g, part in zip(grads, flat.split([g.numel() for g in grads])):
        g.copy_(part.view_as(g))


def all_reduce_sum(t: torch.Tensor, group: Any = None) -> None:
    """In-place sum of ``t`` over ranks (keeps observation normalisers equal)."""
    _collective("the normaliser all-reduce", lambda: dist.all_reduce(t, group=group))


def broadcast_parameters(agent) -> None:
    """Give every rank rank 0's initial networks and temperature."""
    with torch.no_grad():
        for module in (agent.actor, agent.critic, agent.critic_target,
                       agent.obs_normalizer, agent.critic_obs_normalizer):
            for t in (*module.parameters(), *module.buffers()):
                _collective("the start-up broadcast", lambda t=t: dist.broadcast(t.data, src=0))
        _collective("the start-up broadcast", lambda: dist.broadcast(agent.log_alpha.data, src=0))


def any_rank(flag: bool, group: Any = None) -> bool:
    """True on every rank if ``flag`` is true on any rank."""
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend(group) == "nccl" else "cpu"
    t = torch.tensor([1.0 if flag else 0.0], device=device)
    _collective("the stop vote", lambda: dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group))
    return bool(t.item() > 0)


def weights_fingerprint(agent) -> str:
    """A short hash of the networks and normalisers: equal on every rank while training is in sync."""
    h = hashlib.sha256()
    for module in (agent.actor, agent.critic, agent.obs_normalizer, agent.critic_obs_normalizer):
        for name, t in module.state_dict().items():
            h.update(name.encode())
            h.update(t.detach().cpu().contiguous().numpy().tobytes())
    h.update(agent.log_alpha.detach().cpu().numpy().tobytes())
    return h.hexdigest()[:16]


def shutdown() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()

"""`unilab-bench learner`: one FastSAC update timed in isolation, against holosoma's own update in the same run.

Both learners are built at a recipe's sizes (``--algo``) for the observation and action widths of ``--task`` (its env
built with one env and closed again: no physics runs), with replays filled with the same random transitions of those
widths. Each timed block runs whole iterations (``algo.num_updates`` updates; the batch sampled on the device for each
of ours, once per iteration for holosoma's, as its ``learn`` does), the two learners' blocks interleaved and alternated
in order; ``ms_per_update`` is the median block's wall time over its updates, ``cpu_ms_per_update`` the same of the
process's CPU time (on a shared machine the steadier number; with one thread on an idle machine the two agree).
unilab's learner reads its metrics once per ``--log-interval`` iterations (as training does), holosoma's at its
``logging_interval`` of 100.

A profiled pass then counts per update:

- ``ops_per_update``: on the CPU, operator calls from Python or autograd (outermost ``aten::`` ops; each is at least one
  kernel on a GPU); on CUDA, the host's launches (kernels, graph replays, copies and fills: :data:`LAUNCHES`);
- ``syncs_per_update``: on CUDA, the host's waits for the device (:data:`CUDA_SYNCS`). On the CPU nothing waits, so it
  counts what would be a wait on CUDA: operators whose result the host reads or whose output size depends on the data
  (:data:`HOST_READS`: ``.item()``, ``bool(t)``, ``float(t)``, ``nonzero``, boolean indexing...; not those inside the
  fused optimisers' CPU kernels, :data:`DEVICE_SIDE`, whose CUDA kernels read their flags on the device) and the
  Python-level copies to the host (:data:`HOST_COPIES`: ``.cpu()``, ``.numpy()``, ``.tolist()``), which on the CPU
  dispatch no operator. A ``.to("cpu")`` is not counted on the CPU: there it is also how a tensor moves to the
  learner's device. Our metrics' read once per log interval is outside the counted updates;
- the split of our update by phase (``sac/...`` profiler ranges: batch sampling, normalisers, critic forward /
  backward / step, temperature, actor, target update, metrics), each phase's share of the profiled update times the
  timed ``ms_per_update``; on CUDA the eager update is profiled (a graph replay has no phases to see).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from unilab.bench.report import format_table, write_json
from unilab.tasks import registry

RECIPES = tuple(dict.fromkeys((*registry.DEFAULT_RECIPES, *(a for pair in registry.RECIPES.values() for a in pair))))
"""The recipes ``--algo`` takes (config/algo/): every task's GPU and CPU recipe in the registry."""
HOST_READS = frozenset({
    "aten::_local_scalar_dense", "aten::nonzero", "aten::masked_select", "aten::_unique", "aten::_unique2",
    "aten::unique_dim", "aten::unique_consecutive", "aten::equal", "aten::is_nonzero", "aten::allclose"})
"""Operators whose result the host reads, or whose output size depends on the data: a device sync on CUDA."""
DEVICE_SIDE = "aten::_fused_"
"""Operators (a name prefix) that read scalars on the host in their CPU kernels only."""
HOST_COPIES = frozenset({"cpu", "numpy", "tolist"})
"""Tensor methods that copy to the host (a device sync on CUDA; no operator on the CPU)."""
LAUNCHES = frozenset({"cudaLaunchKernel", "cuLaunchKernel", "cuLaunchKernelEx", "cudaLaunchKernelExC",
                      "cudaGraphLaunch", "cudaMemcpyAsync", "cudaMemsetAsync"})
"""CUDA runtime and driver calls that put work on the device."""
CUDA_SYNCS = frozenset({"cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy"})
"""CUDA runtime calls that make the host wait for the device."""
COUNTED = "bench/counted"
"""The profiler range around the counted updates."""
PHASES = ("sample", "normalize", "critic_forward", "critic_backward", "critic_step", "temperature", "actor_forward",
          "actor_backward", "actor_step", "target_update", "metrics")
"""Our update's profiler ranges (``sac/<phase>``), in order."""
REPORT_KEYS = ("ms_per_update", "reference_ms_per_update", "ratio", "cpu_ms_per_update", "reference_cpu_ms_per_update",
               "cpu_ratio", "syncs_per_update", "ops_per_update",
               "reference_syncs_per_update", "reference_ops_per_update", "device", "device_name", "captured",
               "split_ms", "algo", "task", "threads", "sizes", "overrides", "rounds", "iterations", "torch",
               "reference", "block_ms", "sync_names")
"""The keys of the JSON (after ``environment`` and ``benchmark``; null when not measured)."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="unilab-bench learner",
        description="Time one FastSAC update at a recipe's sizes, split by phase, with its operator and host-sync "
                    "counts, against holosoma 0.0.3's own update (from the wheel unilab fetches) at the same sizes "
                    "in the same run. Table on stdout, JSON with --out.")
    p.add_argument("--algo", choices=RECIPES, default="sac_cpu",
                   help="recipe whose sizes and numbers both learners use (batch, updates per iteration, networks, "
                        "atoms, symmetry; default: sac_cpu)")
    p.add_argument("--task", default=None,
                   help="task whose observation and action widths the networks get (default: the recipe's task, "
                        f"{', '.join(f'{a} -> {registry.task_for_recipe(a)}' for a in RECIPES)})")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="where both learners run (default: cpu); on cuda each recipe's compile and bf16 autocast "
                        "apply to both, and ours replays its update as CUDA graphs unless algo.compile=false")
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads (default: 1)")
    p.add_argument("--rounds", type=int, default=5,
                   help="timed blocks per learner, interleaved with the other's (default: 5)")
    p.add_argument("--iterations", type=int, default=5,
                   help="iterations (algo.num_updates updates each) per timed block (default: 5)")
    p.add_argument("--warmup", type=int, default=6,
                   help="untimed iterations per learner first (compiles, captures the CUDA graphs; default: 6)")
    p.add_argument("--replay-steps", type=int, default=64,
                   help="transitions per env in the replays (algo.buffer_size; default: 64). Sampling costs the "
                        "batch, not the capacity: the recipe's 1024 x 4096 envs would not fit twice on a GPU")
    p.add_argument("--log-interval", type=int, default=10,
                   help="iterations between reads of our learner's metrics (training.log_interval; default: 10)")
    p.add_argument("--no-reference", action="store_true", help="time only unilab's learner (no holosoma wheel needed)")
    p.add_argument("--out", default=None, help="JSON path (default: none)")
    p.add_argument("overrides", nargs="*", metavar="algo.KEY=VALUE",
                   help="recipe overrides, e.g. algo.batch_size=1024 algo.num_atoms=51 (applied to both learners)")
    return p


@dataclass
class Counts:
    """What one profiled pass saw, per update."""

    ops: float
    syncs: float
    phases_ms: dict[str, float] = field(default_factory=dict)
    total_ms: float = 0.0
    sync_names: dict[str, float] = field(default_factory=dict)


def _outermost(events: Sequence[Any], names: Callable[[str], bool], inside: str | None = None) -> list[Any]:
    """The events named as ``names`` says that have no such ancestor (nor one whose name starts with ``inside``)."""
    out = []
    for ev in events:
        if not names(ev.name):
            continue
        parent = ev.cpu_parent
        while parent is not None and not names(parent.name) and not (inside and parent.name.startswith(inside)):
            parent = parent.cpu_parent
        if parent is None:
            out.append(ev)
    return out


def count_per_update(step: Callable[[], None], updates: int, device: str) -> Counts:
    """Run ``step`` (``updates`` updates) under the profiler and count per update (see module docs)."""
    import torch
    from torch.overrides import TorchFunctionMode
    from torch.profiler import ProfilerActivity, profile, record_function

    copies: Counter[str] = Counter()

    class HostCopies(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            name = getattr(func, "__name__", "")
            if name in HOST_COPIES:
                copies[name] += 1
            return func(*args, **(kwargs or {}))

    cuda = device == "cuda"
    activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if cuda else [])]
    if cuda:
        torch.cuda.synchronize()
    with profile(activities=activities) as prof:
        with HostCopies(), record_function(COUNTED):
            step()
    events = prof.events()
    # only what ran inside the counted frame: the profiler's own start, stop and synchronisation left out
    frame = next(ev for ev in events if ev.name == COUNTED)
    start, end = frame.time_range.start, frame.time_range.end
    events = [ev for ev in events if ev is not frame and start <= ev.time_range.start and ev.time_range.end <= end]
    total_ms = (frame.device_time_total if cuda else frame.cpu_time_total) / 1000.0
    syncs: Counter[str] = Counter()
    if cuda:
        launches = sum(1 for ev in events if ev.name in LAUNCHES)
        syncs.update(ev.name for ev in events if ev.name in CUDA_SYNCS)
    else:
        launches = len(_outermost(events, lambda n: n.startswith("aten::")))
        syncs.update(ev.name for ev in _outermost(events, HOST_READS.__contains__, DEVICE_SIDE))
        syncs.update({f"Tensor.{k}": v for k, v in copies.items()})
    phases: dict[str, float] = {}
    for ev in _outermost(events, lambda n: n.startswith("sac/")):
        key = ev.name.removeprefix("sac/")
        key = key.removesuffix("_backward").removesuffix("_step") if key.startswith("temperature") else key
        spent = ev.device_time_total if cuda else ev.cpu_time_total
        phases[key] = phases.get(key, 0.0) + spent / 1000.0
    return Counts(ops=launches / updates, syncs=sum(syncs.values()) / updates,
                  phases_ms={k: v / updates for k, v in phases.items()}, total_ms=total_ms / updates,
                  sync_names={k: v / updates for k, v in syncs.items()})


def task_spec(task: str) -> Any:
    """The ``EnvSpec`` of ``task`` (its env built with one env, then closed)."""
    env = registry.make_env(task, registry.task_config(task, {}), 1)
    try:
        return env.spec
    finally:
        env.close()


def random_replay(spec: Any, cfg: Any, steps: int, device: Any, seed: int = 0) -> Any:
    """unilab's replay of ``cfg.num_envs`` x ``steps`` random transitions of ``spec``'s widths (full)."""
    import torch

    from unilab.algo.sac.replay import ReplayBuffer

    replay = ReplayBuffer(cfg.num_envs, steps, spec.record, n_steps=cfg.n_steps, gamma=cfg.gamma, device=device,
                          seed=seed)
    g = torch.Generator(device=device).manual_seed(seed)
    for name, t in replay.storage.items():
        if t.dtype == torch.bool:  # episode ends: about one in 50 steps
            t.copy_(torch.rand(t.shape, generator=g, device=device) < 0.02)
        elif name == "action":
            t.uniform_(-1.0, 1.0, generator=g)
        elif name == "reward":
            t.normal_(0.0, 0.05, generator=g)
        else:
            t.normal_(0.0, 1.0, generator=g)
    replay.size = steps
    return replay


class OurLearner:
    """unilab's agent and replay; :meth:`iteration` is the learner's training phase of one iteration."""

    def __init__(self, cfg: Any, spec: Any, replay: Any, log_interval: int):
        from unilab.algo.sac.agent import FastSAC

        self.agent = FastSAC(cfg, spec.obs_dim, spec.critic_obs_dim, spec.action_dim, action_bound=spec.action_bound,
                             mirror=spec.mirror, mirror_error=spec.mirror_error)
        self.replay, self.cfg, self.log_interval = replay, cfg, log_interval
        self.done = 0

    def updates(self) -> None:
        """The iteration's updates (what the counts see)."""
        from torch.profiler import record_function

        a = self.cfg
        self.agent.set_learning_rates(self.done * a.num_envs)
        for _ in range(a.num_updates):
            with record_function("sac/sample"):
                batch = self.replay.sample(a.batch_size)
            self.agent.update(batch, return_metrics=False)
        self.done += 1

    def iteration(self) -> None:
        """The updates, and the metrics read at every log interval (as training)."""
        self.updates()
        if self.done % self.log_interval == 0:
            self.agent.read_metrics()


def time_blocks(learners: dict[str, Callable[[], None]], rounds: int, iterations: int, cuda: bool
                ) -> dict[str, dict[str, list[float]]]:
    """Per learner, the wall ms and the process CPU ms of each block of ``iterations`` iterations, the learners'
    blocks interleaved, the order alternating."""
    import torch

    times: dict[str, dict[str, list[float]]] = {name: {"wall": [], "cpu": []} for name in learners}
    names = list(learners)
    for r in range(rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            if cuda:
                torch.cuda.synchronize()
            t0, c0 = time.perf_counter(), time.process_time()
            for _ in range(iterations):
                learners[name]()
            if cuda:
                torch.cuda.synchronize()
            times[name]["wall"].append((time.perf_counter() - t0) * 1000.0)
            times[name]["cpu"].append((time.process_time() - c0) * 1000.0)
    return times


def recipe_config(algo: str, overrides: Sequence[str], device: str, replay_steps: int) -> Any:
    """The recipe's ``SACConfig`` with ``overrides``, on ``device``, its replay ``replay_steps`` per env."""
    from omegaconf import OmegaConf

    from unilab.algo.sac.config import SACConfig
    from unilab.cli.config import compose_config

    composed = compose_config([f"algo={algo}", *overrides, f"algo.device={device}",
                               f"algo.buffer_size={replay_steps}"])
    return SACConfig.from_mapping(OmegaConf.to_container(composed.algo))


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    bad = [o for o in args.overrides if not o.startswith("algo.") or "=" not in o]
    checks = (("--threads", args.threads), ("--rounds", args.rounds), ("--iterations", args.iterations),
              ("--replay-steps", args.replay_steps), ("--log-interval", args.log_interval))
    error = next((f"{flag} must be >= 1, got {v}" for flag, v in checks if v < 1), None)
    if bad:
        error = f"overrides are algo.KEY=VALUE; got {bad}"
    if args.warmup < 0:
        error = f"--warmup must be >= 0, got {args.warmup}"
    if error:
        print(f"unilab-bench learner: error: {error}", file=sys.stderr)
        return 2
    import torch

    from unilab.cli.config import ConfigError

    if args.device == "cuda" and not torch.cuda.is_available():
        print("unilab-bench learner: error: --device cuda: no CUDA device here", file=sys.stderr)
        return 2
    task = args.task or registry.task_for_recipe(args.algo)
    try:
        cfg = recipe_config(args.algo, args.overrides, args.device, args.replay_steps)
        spec = task_spec(task)
    except (ConfigError, ValueError) as err:
        print(f"unilab-bench learner: error: {err}", file=sys.stderr)
        return 2
    wheel = None
    if not args.no_reference:
        from unilab.assets.holosoma import WHEEL_ENV_VAR, WHEEL_NAME, assets_dir

        wheel = Path(os.environ.get(WHEEL_ENV_VAR) or assets_dir().parent / "downloads" / WHEEL_NAME)
        if not wheel.is_file():
            print(f"unilab-bench learner: error: holosoma wheel {wheel} not found: run `unilab-assets fetch` (or "
                  f"pass --no-reference)", file=sys.stderr)
            return 2
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    print(f"unilab-bench learner: {args.algo} on {task} (obs {spec.obs_dim}/{spec.critic_obs_dim}, action "
          f"{spec.action_dim}), batch {cfg.batch_size} x {cfg.num_updates} updates, critic {cfg.critic_hidden_dims} "
          f"x {cfg.num_q} with {cfg.num_atoms if cfg.distributional else 'no'} atoms, actor {cfg.actor_hidden_dims}, "
          f"{args.device}, {args.threads} thread(s)", flush=True)
    torch.manual_seed(0)
    replay = random_replay(spec, cfg, args.replay_steps, device)
    ours = OurLearner(cfg, spec, replay, args.log_interval)
    learners: dict[str, Callable[[], None]] = {"unilab": ours.iteration}
    reference = None
    try:
        if wheel is not None:
            from unilab.bench.holosoma_sac import HolosomaLearner, tensordict_version

            reference = HolosomaLearner(wheel, cfg, device, spec.obs_dim, spec.critic_obs_dim, spec.action_dim,
                                        spec.action_bound or [1.0] * spec.action_dim, replay.storage, spec.mirror)
            learners["holosoma"] = reference.iteration
        for run in learners.values():
            for _ in range(args.warmup):
                run()
        times = time_blocks(learners, args.rounds, args.iterations, args.device == "cuda")
        updates = args.iterations * cfg.num_updates
        per_update = {name: statistics.median(ts["wall"]) / updates for name, ts in times.items()}
        cpu_per_update = {name: statistics.median(ts["cpu"]) / updates for name, ts in times.items()}
        counted = {"unilab": ours.updates, **({"holosoma": reference.updates} if reference else {})}
        counts = {name: count_per_update(lambda run=run: [run() for _ in range(2)], 2 * cfg.num_updates,
                                         args.device) for name, run in counted.items()}
        captured = ours.agent._captured is not None and ours.agent._captured.captured  # noqa: SLF001 - a fact
        split = counts["unilab"]
        if captured:  # a replayed graph has no phases: profile the same update eagerly
            eager = OurLearner(cfg, spec, replay, args.log_interval)
            eager.agent._captured = None  # noqa: SLF001 - the eager program of the same agent
            for _ in range(2):
                eager.iteration()
            split = count_per_update(lambda: [eager.updates() for _ in range(2)], 2 * cfg.num_updates, args.device)
    finally:
        if reference is not None:
            reference.close()
    ms = per_update["unilab"]
    shares = sum(split.phases_ms.values()) or 1.0
    profiled = split.total_ms or shares
    split_ms = {k: ms * split.phases_ms.get(k, 0.0) / profiled for k in PHASES}
    split_ms["other"] = max(0.0, ms - sum(split_ms.values()))
    ref_ms, ref_cpu = per_update.get("holosoma"), cpu_per_update.get("holosoma")
    report: dict[str, Any] = dict.fromkeys(REPORT_KEYS)
    report.update(
        ms_per_update=ms, reference_ms_per_update=ref_ms, ratio=None if ref_ms is None else ms / ref_ms,
        cpu_ms_per_update=cpu_per_update["unilab"], reference_cpu_ms_per_update=ref_cpu,
        cpu_ratio=None if ref_cpu is None else cpu_per_update["unilab"] / ref_cpu,
        syncs_per_update=counts["unilab"].syncs, ops_per_update=counts["unilab"].ops, device=args.device,
        device_name=torch.cuda.get_device_name(device) if args.device == "cuda" else "cpu", captured=captured,
        split_ms=split_ms, algo=args.algo, task=task, threads=args.threads, overrides=list(args.overrides),
        rounds=args.rounds, iterations=args.iterations, torch=torch.__version__, block_ms=times,
        sizes={"obs": spec.obs_dim, "critic_obs": spec.critic_obs_dim, "action": spec.action_dim,
               "num_envs": cfg.num_envs, "batch_size": cfg.batch_size, "num_updates": cfg.num_updates,
               "policy_frequency": cfg.policy_frequency, "actor_hidden_dims": cfg.actor_hidden_dims,
               "critic_hidden_dims": cfg.critic_hidden_dims, "num_q": cfg.num_q, "num_atoms": cfg.num_atoms,
               "use_symmetry": cfg.use_symmetry, "amp": ours.agent.use_amp, "compile": ours.agent.use_compile},
        sync_names=counts["unilab"].sync_names)
    if reference is not None:
        report.update(reference_syncs_per_update=counts["holosoma"].syncs,
                      reference_ops_per_update=counts["holosoma"].ops,
                      reference={"source": f"holosoma 0.0.3 FastSACAgent ({wheel.name})",
                                 "tensordict": tensordict_version() or "stand-in (dict)",
                                 "sync_names": counts["holosoma"].sync_names})
    rows = [("ms per update", ms, "-" if ref_ms is None else ref_ms),
            ("ratio (unilab / holosoma)", "-" if ref_ms is None else ms / ref_ms, ""),
            ("CPU ms per update", cpu_per_update["unilab"], "-" if ref_cpu is None else ref_cpu),
            ("CPU-time ratio", "-" if ref_cpu is None else cpu_per_update["unilab"] / ref_cpu, ""),
            ("host syncs per update", counts["unilab"].syncs, counts["holosoma"].syncs if reference else "-"),
            ("ops per update", counts["unilab"].ops, counts["holosoma"].ops if reference else "-")]
    rows += [(f"  {k} ms", v, "") for k, v in split_ms.items()]
    print(format_table(["per update", "unilab", "holosoma"], rows))
    if captured:
        print("unilab-bench learner: our update replays CUDA graphs; its split is the eager update's profile")
    path = write_json(args.out, {"benchmark": "learner", **report})
    if path:
        print(f"unilab-bench learner: JSON written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

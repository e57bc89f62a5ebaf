"""The collector's own ceiling: collector-only steps/s with a stub policy.

The learner is replaced by a stub that answers every step at once with
pre-drawn random actions, so what remains is the collector process itself:
env.step plus the shared-memory write, and the hand-off latency. Compared
with raw env steps/s of the same env stepped in this process with no
transport at all (measured first, in the same run).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import yaml
from omegaconf import OmegaConf

from unilab.bench.options import at_least, cpu_list
from unilab.bench.report import format_table, write_json
from unilab.cli.config import compose_config
from unilab.runtime.collector import CollectorArgs
from unilab.runtime.collector_client import CollectorClient
from unilab.runtime.stats import Counters, delta
from unilab.tasks.registry import DEFAULT_TASK, make_env, task_config


def raw_env_rate(name: str, values: dict, num_envs: int, steps: int, warmup: int, pool_kwargs: dict, seed: int) -> dict:
    """Env steps/s of env.step in this process with random actions."""
    env = make_env(name, task_config(name, values), num_envs, pool_kwargs=pool_kwargs, seed=seed)
    rng = np.random.default_rng(seed)
    actions = rng.uniform(-1, 1, (warmup + steps, num_envs, env.action_dim)).astype(np.float32)
    env.reset()
    for k in range(warmup):
        env.step(actions[k])
    t0 = time.perf_counter()
    for k in range(warmup, warmup + steps):
        env.step(actions[k])
    wall = time.perf_counter() - t0
    nthread = env.spec.nthread  # before close: the spec reads the pool
    env.close()
    return {"steps_per_sec": num_envs * steps / wall, "ms_per_step": wall / steps * 1000, "nthread": nthread}


def collector_rate(name: str, values: dict, num_envs: int, steps: int, warmup: int, pool_kwargs: dict,
                   seed: int) -> dict:
    """Steps/s of the collector process driven by a zero-cost stub policy."""
    args = CollectorArgs(name, task_config(name, values), num_envs, pool_kwargs, seed, trace_path=None,
                         startup_timeout_s=900.0)
    col = CollectorClient(args)
    try:
        rng = np.random.default_rng(seed)
        actions = rng.uniform(-1, 1, (warmup + steps, num_envs, col.spec.action_dim)).astype(np.float32)
        col.wait_step()  # the reset
        for k in range(warmup):
            col.send_action(actions[k])
            col.wait_step()
        counters = Counters(col["counters"], col.counter_names)
        c0 = counters.snapshot()
        t0 = time.perf_counter()
        for k in range(warmup, warmup + steps):
            col.send_action(actions[k])
            col.wait_step()
        wall = time.perf_counter() - t0
        d = delta(counters.snapshot(), c0)
    finally:
        col.close()
    n = d["iterations"] or steps
    active_ms = d["env_step_ms"] + d["replay_write_ms"]
    return {"end_to_end_steps_per_sec": num_envs * steps / wall,
            "active_steps_per_sec": num_envs * n / (active_ms / 1000.0), "env_step_ms": d["env_step_ms"] / n,
            "replay_write_ms": d["replay_write_ms"] / n, "action_wait_ms": d["action_wait_ms"] / n,
            "nthread": col.spec.nthread}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="unilab-bench collector",
        description="Collector-only steps/s (stub policy) as a ratio of raw env steps/s.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--task", default=DEFAULT_TASK, help="task name (see `train --help`)")
    p.add_argument("--num-envs", type=at_least(1), default=1024, help="envs")
    p.add_argument("--steps", type=at_least(1), default=40, help="timed steps")
    p.add_argument("--warmup", type=at_least(0), default=3, help="untimed steps first")
    p.add_argument("--nthread", default=None, help="pool threads (default: the sizing rule)")
    p.add_argument("--cpu-ids", type=cpu_list, default=None, help="pin the pool, e.g. 0-1")
    p.add_argument("--task-override", action="append", default=[], metavar="KEY=VALUE", help="task config override")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="also write results to this JSON file")
    return p


def main(argv: list[str] | None = None) -> dict:
    args = build_parser().parse_args(argv)
    overrides = {}
    for pair in args.task_override:
        key, eq, value = pair.partition("=")
        if not eq:
            raise SystemExit(f"--task-override expects key=value, got {pair!r}")
        overrides[key] = yaml.safe_load(value)
    values = OmegaConf.to_container(compose_config([f"task={args.task}"]).task, resolve=True) | overrides
    nthread = int(args.nthread) if args.nthread not in (None, "auto") else args.nthread
    pool_kwargs = {"nthread": nthread, "cpu_ids": args.cpu_ids}
    raw = raw_env_rate(args.task, values, args.num_envs, args.steps, args.warmup, pool_kwargs, args.seed)
    col = collector_rate(args.task, values, args.num_envs, args.steps, args.warmup, pool_kwargs, args.seed)
    res = {
        "benchmark": "offpolicy_collector_active", "task": args.task, "num_envs": args.num_envs, "steps": args.steps,
        "raw": raw, "collector": col, "active_over_raw": col["active_steps_per_sec"] / raw["steps_per_sec"],
        "end_to_end_over_raw": col["end_to_end_steps_per_sec"] / raw["steps_per_sec"],
    }
    print(f"task={args.task} num_envs={args.num_envs} steps={args.steps} pool nthread={raw['nthread']}")
    print(format_table(["measure", "env steps/s", "ms/step", "ratio to raw"], [
        ["raw env.step (in process)", raw["steps_per_sec"], raw["ms_per_step"], 1.0],
        ["collector active (env.step + shm write)", col["active_steps_per_sec"],
         col["env_step_ms"] + col["replay_write_ms"], res["active_over_raw"]],
        ["collector end to end (incl. hand-off)", col["end_to_end_steps_per_sec"],
         args.num_envs / col["end_to_end_steps_per_sec"] * 1000.0, res["end_to_end_over_raw"]],
    ]))
    print(f"collector per step: env_step {col['env_step_ms']:.3f} ms, replay write {col['replay_write_ms']:.3f} ms, "
          f"waiting for actions {col['action_wait_ms']:.3f} ms")
    if args.json:
        print(f"wrote {write_json(args.json, res)}")
    return res


if __name__ == "__main__":
    main()

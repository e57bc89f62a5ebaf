"""Where env.step time goes: backend_step / update_state / reset_done, wall ms and cores used.

Steps the G1 motion-tracking env with random actions, then steps a bare
BatchEnvPool of the same PD model, env count, thread sizing and substeps from
the same start states ("raw pool"), and prints per run

    phase | ms | cores      (backend_step, update_state, reset_done, env.step, raw pool.step)

plus env steps/s, raw pool steps/s, and the two ratios the performance bar is
about: (update_state + reset_done) / env.step wall, and env / raw steps/s.
A step/s counts one policy step of one env.

    python scripts/benchmark/env/benchmark_env_step_phase_cpu.py --num-envs 1024 --steps 100
    python scripts/benchmark/env/benchmark_env_step_phase_cpu.py --compare-cpu-ids 0-1 --json out.json
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from unilab.bench.report import format_table, write_json
from unilab.sim import cpu
from unilab.sim.mujoco.pool import BatchEnvPool
from unilab.tasks.g1_motion_tracking.config import G1TaskConfig
from unilab.tasks.g1_motion_tracking.env import G1MotionTrackingEnv

PHASES = ("backend_step", "update_state", "reset_done")


def _timed_env_run(env: G1MotionTrackingEnv, steps: int, warmup: int, rng: np.random.Generator) -> dict:
    shape = (env.num_envs, env.action_dim)
    for _ in range(warmup):
        env.step(rng.uniform(-1, 1, shape).astype(np.float32))
    actions = [rng.uniform(-1, 1, shape).astype(np.float32) for _ in range(min(steps, 16))]
    env.timer.reset()
    ended = lengths = 0.0
    wall = cpu_t = 0.0
    for i in range(steps):
        a = actions[i % len(actions)]
        w0, c0 = time.perf_counter(), time.process_time()
        _, _, _, _, info = env.step(a)
        wall += time.perf_counter() - w0
        cpu_t += time.process_time() - c0
        ep = info["episode"]
        ended += ep["count"]
        lengths += ep["count"] * ep["length_mean"]
    phases = {}
    for name, s in env.timer.summary().items():
        phases[name] = {"ms": s.mean_ms, "cores": s.cores, "count": s.count}
    phases["env.step"] = {"ms": 1e3 * wall / steps, "cores": cpu_t / wall if wall else 0.0, "count": steps}
    return {
        "phases": phases,
        "env_steps_per_sec": env.num_envs * steps / wall,
        "episodes_ended": int(ended),
        "mean_episode_length": lengths / ended if ended else float("nan"),
    }


def _timed_raw_run(env: G1MotionTrackingEnv, start_qpos: np.ndarray, start_qvel: np.ndarray, steps: int,
                   warmup: int, episode_len: float, rng: np.random.Generator, pool_kwargs: dict) -> dict:
    """Bare pool stepping from the env's start states; restarts (untimed) every ~episode_len steps."""
    n = env.num_envs
    pool = BatchEnvPool(env.model, n, outputs=("xpos", "xquat", "cvel", "subtree_com"),
                        substeps=env.cfg.decimation, **pool_kwargs)
    ids = np.arange(n)
    pool.reset(ids, start_qpos, start_qvel)
    ctrls = [env.action_default + env.action_scale * rng.uniform(-1, 1, (n, env.action_dim))
             for _ in range(min(steps, 16))]
    period = max(1, int(round(episode_len))) if np.isfinite(episode_len) else steps + warmup
    wall = cpu_t = 0.0
    for i in range(warmup + steps):
        if i and i % period == 0:
            pool.reset(ids, start_qpos, start_qvel)
        c = ctrls[i % len(ctrls)]
        w0, c0 = time.perf_counter(), time.process_time()
        bad = pool.step(c, env.cfg.decimation)
        if i >= warmup:
            wall += time.perf_counter() - w0
            cpu_t += time.process_time() - c0
        if bad.any():  # keep diverged sims out of the timing
            b = np.flatnonzero(bad)
            pool.reset(b, start_qpos[b], start_qvel[b])
    out = {"ms": 1e3 * wall / steps, "cores": cpu_t / wall if wall else 0.0, "count": steps,
           "nthread": pool.nthread, "steps_per_sec": n * steps / wall}
    pool.close()
    return out


def run_one(cfg: G1TaskConfig, num_envs: int, steps: int, warmup: int, cpu_ids: list[int] | None,
            nthread: int | None, seed: int) -> dict:
    """One env run and its matching raw-pool run."""
    pool_kwargs: dict = {}
    if cpu_ids is not None:
        pool_kwargs["cpu_ids"] = cpu_ids
    elif nthread is not None:
        pool_kwargs["nthread"] = nthread
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    env = G1MotionTrackingEnv(cfg, num_envs, pool_kwargs=pool_kwargs, seed=seed)
    env.reset()
    start_qpos, start_qvel = env.pool.qpos.copy(), env.pool.qvel.copy()
    build_s = time.perf_counter() - t0
    res = _timed_env_run(env, steps, warmup, rng)
    nthread_used = env.pool.nthread
    env.close()
    raw = _timed_raw_run(env, start_qpos, start_qvel, steps, warmup, res["mean_episode_length"], rng, pool_kwargs)
    ph = res["phases"]
    host = ph["update_state"]["ms"] + ph["reset_done"]["ms"]
    res.update(
        label="pinned " + ",".join(map(str, cpu_ids)) if cpu_ids is not None else "default sizing",
        cpu_ids=cpu_ids,
        nthread=nthread_used,
        build_s=build_s,
        raw_pool=raw,
        raw_steps_per_sec=raw["steps_per_sec"],
        host_fraction=host / ph["env.step"]["ms"],
        env_over_raw=res["env_steps_per_sec"] / raw["steps_per_sec"],
    )
    return res


def print_run(r: dict, num_envs: int) -> None:
    ph = r["phases"]
    rows = [[name, ph[name]["ms"], ph[name]["cores"]] for name in (*PHASES, "env.step")]
    rows.append(["raw pool.step", r["raw_pool"]["ms"], r["raw_pool"]["cores"]])
    print(f"\n== {r['label']}: {num_envs} envs, nthread {r['nthread']}, {r['phases']['env.step']['count']} steps ==")
    print(format_table(["phase", "ms", "cores"], rows))
    print(f"env steps/s        {r['env_steps_per_sec']:,.0f}")
    print(f"raw pool steps/s   {r['raw_steps_per_sec']:,.0f}")
    print(f"(update_state + reset_done) / env.step wall = {100 * r['host_fraction']:.1f} %   (bar <= 15 %)")
    print(f"env / raw steps/s                           = {r['env_over_raw']:.3f}   (bar >= 0.85)")
    print(f"episodes ended {r['episodes_ended']}, mean length {r['mean_episode_length']:.1f} steps")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--num-envs", type=int, default=1024)
    p.add_argument("--steps", type=int, default=60, help="timed env steps per run")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps before timing")
    p.add_argument("--cpu-ids", default=None, help="pin the pool's threads, e.g. 0-1 (one thread per id)")
    p.add_argument("--compare-cpu-ids", default=None,
                   help="A/B in one invocation: default sizing vs pinned to these cpu ids")
    p.add_argument("--nthread", type=int, default=None, help="thread count (default: the sizing rule)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="also write the results to this JSON file")
    p.add_argument("--motion-files", nargs="*", default=None, help="clips to use (default: the built-in G1 clips)")
    args = p.parse_args(argv)
    if args.cpu_ids and args.compare_cpu_ids:
        p.error("--cpu-ids and --compare-cpu-ids are exclusive")

    cfg = G1TaskConfig()
    if args.motion_files:
        cfg.motion_files = list(args.motion_files)
    runs: list[tuple[list[int] | None, int | None]] = []
    if args.compare_cpu_ids:
        runs = [(None, args.nthread), (cpu.parse_cpu_ids(args.compare_cpu_ids), None)]
    elif args.cpu_ids:
        runs = [(cpu.parse_cpu_ids(args.cpu_ids), None)]
    else:
        runs = [(None, args.nthread)]

    print(f"usable cpus {cpu.usable_cpus()}; G1 motion tracking, decimation {cfg.decimation}, sim dt {cfg.sim_dt}")
    results = []
    for cpu_ids, nthread in runs:
        r = run_one(cfg, args.num_envs, args.steps, args.warmup, cpu_ids, nthread, args.seed)
        print_run(r, args.num_envs)
        results.append(r)
    if len(results) == 2:
        a, b = results
        print(f"\nA/B env steps/s: {a['label']} {a['env_steps_per_sec']:,.0f} vs {b['label']} "
              f"{b['env_steps_per_sec']:,.0f} ({b['env_steps_per_sec'] / a['env_steps_per_sec']:.3f}x)")
    out = write_json(args.json, {"benchmark": "env_step_phase_cpu", "num_envs": args.num_envs,
                                 "steps": args.steps, "decimation": cfg.decimation, "runs": results})
    if out:
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How physics throughput scales with the pool's thread count, pinned and not.

Rows: nthread in (2 x usable, usable, halves down to 1) x {unpinned, pinned};
columns: ms/step, physics steps/s, cores used (process CPU time / wall) and
efficiency = steps/s / (usable cores x single-thread steps/s), all from the
same model, initial states and control sequence. Rows are measured in
interleaved rounds and the median kept, so slow drift hits every row alike.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass

import mujoco
import numpy as np

from unilab.assets.builtin import load_humanoid
from unilab.bench.options import at_least, integers_at_least
from unilab.bench.report import format_table, write_json
from unilab.sim import cpu
from unilab.sim.physics import make_pool

# a row this close to the fastest is "the fastest within noise"
WITHIN = 0.05


@dataclass
class Row:
    nthread: int
    pinned: bool
    ms_per_step: float = float("nan")
    steps_per_sec: float = float("nan")
    cores: float = float("nan")
    efficiency: float = float("nan")
    note: str = ""


def thread_counts(usable: int) -> list[int]:
    """2 x usable, usable, then halves down to 1 (descending, unique)."""
    return sorted({2 * usable, *(usable >> k for k in range(usable.bit_length()))}, reverse=True)


def _initial_state(model: mujoco.MjModel, num_envs: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    qpos = np.tile(model.qpos0, (num_envs, 1))
    # perturb the hinge/slide coordinates only; free-joint and ball quaternions stay unit
    mask = np.ones(model.nq)
    for adr, kind in zip(model.jnt_qposadr, model.jnt_type):
        width = 7 if kind == mujoco.mjtJoint.mjJNT_FREE else 4 if kind == mujoco.mjtJoint.mjJNT_BALL else 0
        mask[adr : adr + width] = 0.0
    qpos += rng.normal(0.0, 0.02, qpos.shape) * mask
    return qpos, rng.normal(0.0, 0.05, (num_envs, model.nv))


def _controls(model: mujoco.MjModel, n: int, num_envs: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed + 1)
    limited = model.actuator_ctrllimited.astype(bool)
    lo = np.where(limited, model.actuator_ctrlrange[:, 0], -1.0)
    hi = np.where(limited, model.actuator_ctrlrange[:, 1], 1.0)
    mid, half = (lo + hi) / 2, (hi - lo) / 2
    return rng.uniform(mid - 0.5 * half, mid + 0.5 * half, (n, num_envs, model.nu))


def time_config(model: mujoco.MjModel, num_envs: int, substeps: int, steps: int, warmup: int, nthread: int | None,
                cpu_ids: list[int] | None, state: tuple[np.ndarray, np.ndarray],
                ctrls: np.ndarray) -> tuple[float, float]:
    """(wall ms per step, cores used) of one fresh pool over ``steps`` steps."""
    pool = make_pool(model, num_envs, nthread=None if cpu_ids else nthread, cpu_ids=cpu_ids)
    try:
        pool.reset(np.arange(num_envs), *state)
        for k in range(warmup):
            pool.step(ctrls[k], substeps)
        w0, c0 = time.perf_counter(), time.process_time()
        for k in range(warmup, warmup + steps):
            pool.step(ctrls[k], substeps)
        wall, cpu_s = time.perf_counter() - w0, time.process_time() - c0
    finally:
        pool.close()
    return wall / steps * 1000.0, cpu_s / wall


def run(args: argparse.Namespace) -> dict:
    model = mujoco.MjModel.from_xml_path(args.model) if args.model else load_humanoid()
    usable_ids = cpu.usable_cpus()
    usable = len(usable_ids)
    num_envs = args.num_envs or (4096 if cpu.usable_cpu_count() >= 16 else 1024)
    counts = list(args.nthreads) if args.nthreads else thread_counts(usable)
    default_nthread = cpu.resolve_nthread(num_envs)
    for anchor in (1, default_nthread):  # the single-thread rate anchors efficiency; the default is what is judged
        if anchor not in counts:
            counts.append(anchor)
    state = _initial_state(model, num_envs, args.seed)
    ctrls = _controls(model, args.warmup + args.steps, num_envs, args.seed)

    rows = [Row(n, pinned) for n in counts for pinned in ((False,) if args.no_pinned else (False, True))]
    for r in rows:
        if r.pinned and r.nthread > usable:
            r.note = f"n/a: {r.nthread} threads > {usable} usable cpus"
        if r.pinned and not cpu.affinity_supported():
            r.note = "n/a: no thread affinity on this platform"

    samples: list[list[tuple[float, float]]] = [[] for _ in rows]
    for _ in range(args.repeats):
        for r, got in zip(rows, samples):
            if not r.note:
                ids = usable_ids[: r.nthread] if r.pinned else None
                got.append(time_config(model, num_envs, args.substeps, args.steps, args.warmup, r.nthread, ids,
                                       state, ctrls))
    for r, got in zip(rows, samples):
        if got:
            r.ms_per_step, r.cores = (statistics.median(col) for col in zip(*got))
            r.steps_per_sec = num_envs * args.substeps / (r.ms_per_step / 1000.0)

    single = next(r for r in rows if r.nthread == 1 and not r.pinned).steps_per_sec
    limit = usable * single
    for r in rows:
        r.efficiency = r.steps_per_sec / limit

    measured = [r for r in rows if not r.note]
    fastest = max(measured, key=lambda r: r.steps_per_sec)
    default_row = next(r for r in rows if r.nthread == default_nthread and not r.pinned)
    within = default_row.steps_per_sec >= fastest.steps_per_sec * (1 - WITHIN)
    return {
        "benchmark": "mujoco_pool_thread_scaling", "model": args.model or "builtin:humanoid", "num_envs": num_envs,
        "substeps": args.substeps, "steps": args.steps, "repeats": args.repeats, "usable_cpus": usable,
        "single_thread_steps_per_sec": single, "physical_limit_steps_per_sec": limit,
        "default_nthread": default_nthread, "fastest": {"nthread": fastest.nthread, "pinned": fastest.pinned},
        "default_within_5pct_of_fastest": bool(within), "default_efficiency": default_row.efficiency,
        "rows": [r.__dict__ for r in rows],
    }


def print_result(res: dict) -> None:
    headers = ["nthread", "pinning", "ms/step", "physics steps/s", "cores used", "efficiency", "note"]
    rows = [[r["nthread"], "pinned" if r["pinned"] else "unpinned", r["ms_per_step"], r["steps_per_sec"], r["cores"],
             r["efficiency"], r["note"]] for r in res["rows"]]
    print(f"model={res['model']} num_envs={res['num_envs']} substeps={res['substeps']} "
          f"steps={res['steps']} x{res['repeats']} usable_cpus={res['usable_cpus']}")
    print(format_table(headers, rows))
    print(f"physical limit = {res['usable_cpus']} x {res['single_thread_steps_per_sec']:,.0f} single-thread steps/s "
          f"= {res['physical_limit_steps_per_sec']:,.0f} steps/s")
    fast = res["fastest"]
    print(f"default nthread (sizing rule) = {res['default_nthread']}; fastest row = nthread {fast['nthread']} "
          f"{'pinned' if fast['pinned'] else 'unpinned'}; default within {WITHIN:.0%} of fastest: "
          f"{'yes' if res['default_within_5pct_of_fastest'] else 'NO'}; "
          f"default efficiency {res['default_efficiency']:.3f}")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="unilab-bench pool-threads",
        description="Physics steps/s of the physics pool by thread count, pinned and unpinned.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--model", default=None, help="MJCF path (default: unilab's built-in humanoid)")
    p.add_argument("--num-envs", type=at_least(1), default=None,
                   help="simulations (default: 4096 with >= 16 usable CPUs, else 1024)")
    p.add_argument("--substeps", type=at_least(1), default=3, help="physics steps per pool.step call")
    p.add_argument("--steps", type=at_least(1), default=30, help="timed pool.step calls per measurement")
    p.add_argument("--warmup", type=at_least(0), default=2, help="untimed pool.step calls before timing")
    p.add_argument("--repeats", type=at_least(1), default=3, help="interleaved rounds; the median is reported")
    p.add_argument("--nthreads", type=integers_at_least(1), default=None,
                   help="comma list of thread counts (default: 2x usable, usable, halves to 1)")
    p.add_argument("--no-pinned", action="store_true", help="skip the pinned rows")
    p.add_argument("--seed", type=int, default=0, help="seed of initial states and controls")
    p.add_argument("--json", default=None, help="also write the results to this JSON file")
    return p


def main(argv: list[str] | None = None) -> dict:
    args = build_parser().parse_args(argv)
    res = run(args)
    print_result(res)
    if args.json:
        print(f"wrote {write_json(args.json, res)}")
    return res


if __name__ == "__main__":
    main()

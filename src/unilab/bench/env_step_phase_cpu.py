"""Where env.step time goes: backend_step / update_state / reset_done, wall ms and cores used.

Steps a G1 env (``--task``: motion tracking or locomotion) with random actions, then a bare physics pool of the
same PD model, env count, thread sizing, substeps and post-step stage (``contacts``) from the same start states
("raw pool"), and prints per run

    phase | ms | cores      (backend_step, update_state, reset_done, env.step, raw pool.step)

plus env and raw pool steps/s (a step/s is one policy step of one env) and the two ratios the performance bar is
about: (update_state + reset_done) / env.step wall, and env / raw steps/s. Then a sub-phase breakdown (ms per
env.step and cores) of backend_step (the pool's physics and per-env health check; the rest of backend_step is the
action-to-PD-target kernel) and of the host phases (gather: the robot state, with the tracking task's reference
lookup or the locomotion task's commands and gait clock; rewards, terminations, observations; restart in
reset_done). update_state runs its stages in one parallel region, so its sub-phases come from steps run with the
stages one region each (``split_sub_phases``, interleaved in blocks with the others; same results), whose
update_state total is printed too; a spin check (raw ``pool.step`` right after a parallel host phase vs alone:
Numba's workers must not steal MuJoCo's cycles); and an Amdahl projection of each phase and of the host share to
16, 32 and 64 cores from the parallel fraction measured here (:func:`amdahl`; not a measurement).

    python scripts/benchmark/env/benchmark_env_step_phase_cpu.py --num-envs 1024 --steps 100
    python scripts/benchmark/env/benchmark_env_step_phase_cpu.py --compare-cpu-ids 0-1 --json out.json
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import psutil

from unilab.bench.options import at_least, cpu_list
from unilab.bench.report import format_table, write_json
from unilab.sim import cpu
from unilab.sim.physics import make_pool
from unilab.tasks.core.driver import OBSERVE, REWARDS, SPLIT
from unilab.tasks.core.driver_env import SUBPHASES
from unilab.tasks.registry import DEFAULT_TASK, kind, make_env, task_config, tasks_of_kind
from unilab.telemetry.phase_timer import PhaseTimer

PHASES = ("backend_step", "update_state", "reset_done")
TASKS = (*tasks_of_kind("motion_tracking"), *tasks_of_kind("locomotion"))
PROJECT_CORES = (16, 32, 64)


def amdahl(ms: float, cores: float, usable: int, n: int) -> float:
    """Projected ms on ``n`` cores of a phase measured at ``ms`` using ``cores`` of ``usable``:
    p = U/(U-1) (1 - 1/c) (U = 2: p = 2 (1 - 1/c)), T1 = ms c, T_N = T1 ((1 - p) + p / N)."""
    c = min(max(cores, 1.0), float(usable))
    p = usable / (usable - 1) * (1.0 - 1.0 / c) if usable > 1 else 0.0
    p = min(max(p, 0.0), 1.0)
    return ms * c * ((1.0 - p) + p / n)


def spin_check(env: Any, raw: _RawRunner, reps: int = 6) -> dict:
    """Raw pool.step wall ms alone vs right after a parallel host phase (rewards + observations of all envs)."""
    rows = np.arange(env.num_envs, dtype=np.int64)
    out = env.buffers()
    alone, after = [], []
    for i in range(2 * reps):
        host = i % 2 == 1
        if host:
            env.run_stages(REWARDS | OBSERVE, rows, out)  # the env's own host driver, without its pool step
        else:
            time.sleep(0.002)  # the same pause-free start: both begin from a just-finished Python call
        c = raw.ctrls[(i // 2) % len(raw.ctrls)]  # a pair steps the same controls from the same state
        w0 = time.perf_counter()
        raw.pool.step(c, env.cfg.decimation)
        (after if host else alone).append(1e3 * (time.perf_counter() - w0))
        raw.pool.reset(raw.ids, raw.q0, raw.v0)
    a, b = float(np.median(alone)), float(np.median(after))
    return {"alone_ms": a, "after_host_ms": b, "ratio": b / a}


class _EnvRunner:
    """Times env.step with random actions (phases come from env.timer)."""

    def __init__(self, env: Any, rng: np.random.Generator, pool_steps: int):
        self.env = env
        shape = (env.num_envs, env.action_dim)
        self.actions = itertools.cycle([rng.uniform(-1, 1, shape).astype(np.float32) for _ in range(pool_steps)])
        self.wall = self.cpu = self.lengths = 0.0
        self.ended = 0
        self.out = env.buffers()  # written in place every step, as the collector's shared memory is

    def run(self, n: int, timed: bool) -> None:
        for _ in range(n):
            a = next(self.actions)
            w0, c0 = time.perf_counter(), time.process_time()
            _, _, _, _, info = self.env.step(a, out=self.out)
            if timed:
                self.wall += time.perf_counter() - w0
                self.cpu += time.process_time() - c0
                ep = info["episode"]
                self.ended += ep["count"]
                self.lengths += ep["count"] * ep["length_mean"]

    def run_timed_by(self, n: int, timer: PhaseTimer, split: bool = False) -> None:
        """``n`` steps timed in ``timer`` (not in the totals); ``split``: update_state's stages one region each."""
        env = self.env
        main, env.split_sub_phases = env.timer, split
        env.timer = env.pool.timer = timer
        try:
            for _ in range(n):
                env.step(next(self.actions), out=self.out)
        finally:
            env.timer = env.pool.timer = main
            env.split_sub_phases = False

    @property
    def mean_episode_length(self) -> float:
        return self.lengths / self.ended if self.ended else float("nan")


class _RawRunner:
    """Times bare ``pool.step`` on the env's PD model from the env's start states. All sims restart (untimed)
    every ~mean episode length of the env run, so the physics sees a similar mix of standing and fallen robots."""

    def __init__(self, env: Any, start_qpos, start_qvel, rng, pool_kwargs: dict, pool_steps: int):
        n = env.num_envs
        self.env = env
        # the env's pool settings, its post-step stage (contacts) included: the ratio is the host phases' cost
        # the fields the env's pool copies out after each call for its body state (MuJoCo's), without its velocity
        # shift (backend_step's check_health)
        self.pool = make_pool(env.model, n, outputs=("xpos", "xquat", "cvel", "subtree_com"),
                              substeps=env.cfg.decimation, **{"contacts": env.pool.contacts, **pool_kwargs})
        self.ids = np.arange(n)
        self.q0, self.v0 = start_qpos, start_qvel
        self.pool.reset(self.ids, self.q0, self.v0)
        self.ctrls = [env.action_default + env.action_scale * rng.uniform(-1, 1, (n, env.action_dim))
                      for _ in range(pool_steps)]
        self.i = self.since_reset = 0
        self.wall = self.cpu = 0.0

    def run(self, n: int, timed: bool, period: float) -> None:
        period = max(1, int(round(period))) if np.isfinite(period) else 10
        for _ in range(n):
            if self.since_reset >= period:
                self.pool.reset(self.ids, self.q0, self.v0)
                self.since_reset = 0
            c = self.ctrls[self.i % len(self.ctrls)]
            self.i += 1
            w0, c0 = time.perf_counter(), time.process_time()
            bad = self.pool.step(c, self.env.cfg.decimation)
            if timed:
                self.wall += time.perf_counter() - w0
                self.cpu += time.process_time() - c0
            self.since_reset += 1
            if bad.any():  # keep diverged sims out of the timing
                b = np.flatnonzero(bad)
                self.pool.reset(b, self.q0[b], self.v0[b])


class ThreadPhaseTimer(PhaseTimer):
    """A PhaseTimer that also adds each phase's CPU time per thread group: the calling thread (``main``;
    ``time.thread_time``, exact), Numba's workers and MuJoCo's pool threads (Linux /proc schedstat, up to date for
    a thread parked at the phase's edges, as they are). Reading costs tens of microseconds per edge, so the
    benchmark times these steps on their own."""

    def __init__(self, groups: dict[str, list[int]]):
        super().__init__()
        self.groups = groups
        self.thread_ms: dict[str, dict[str, float]] = {}
        self._reading_s = 0.0  # the calling thread's CPU spent reading the groups (kept out of ``main``)

    def _groups_cpu(self) -> dict[str, float]:
        t = time.thread_time()
        out = {g: sum(cpu.thread_cpu_seconds(tid) for tid in tids) for g, tids in self.groups.items()}
        self._reading_s += time.thread_time() - t
        return out

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        g0 = self._groups_cpu()  # the groups first, then the calling thread: its reads stay outside
        m0, r0 = time.thread_time(), self._reading_s
        with super().phase(name):
            yield
        m1, r1 = time.thread_time(), self._reading_s
        g1 = self._groups_cpu()
        acc = self.thread_ms.setdefault(name, {"main": 0.0, **dict.fromkeys(self.groups, 0.0)})
        acc["main"] += 1e3 * ((m1 - m0) - (r1 - r0))  # minus the reads of phases nested in this one
        for g in self.groups:
            acc[g] += 1e3 * (g1[g] - g0[g])

    def breakdown(self, steps: int) -> dict[str, dict[str, float]]:
        """Per phase and env.step: wall, CPU of each group, and ``main_alone`` = main - sum over groups of (group CPU
        / its thread count): the calling thread's CPU beyond its even share of the parallel regions it joined (it is
        one of the threads of both pools), i.e. work no other thread could do: Python, serial NumPy, argument
        unboxing, an unbalanced region."""
        out = {}
        for name, st in self.summary().items():
            t = self.thread_ms[name]
            row = {"wall_ms": st.wall_ms_total / steps, **{f"{g}_ms": v / steps for g, v in t.items()}}
            share = sum(t[g] / len(tids) for g, tids in self.groups.items() if tids)
            row["main_alone_ms"] = max(0.0, t["main"] - share) / steps
            out[name] = row
        return out


def run_one(task: str, cfg: Any, num_envs: int, steps: int, warmup: int, block: int,
            cpu_ids: list[int] | None, nthread: int | None, seed: int, thread_steps: int = 6) -> dict:
    """Env and raw-pool timing, interleaved in blocks so machine load hits both alike."""
    pool_kwargs = {"cpu_ids": cpu_ids} if cpu_ids is not None else {"nthread": nthread} if nthread is not None else {}
    rng = np.random.default_rng(seed)
    usable = cpu.usable_cpus()
    t0 = time.perf_counter()
    env = make_env(task, cfg, num_envs, pool_kwargs=pool_kwargs, seed=seed)
    env.reset()
    # a pinned pool pins the calling thread too; give it back its CPU set so the
    # second pool's cpu ids validate (it pins the caller to the same cpu_ids[0])
    _restore_affinity(usable)
    raw = _RawRunner(env, env.pool.qpos.copy(), env.pool.qvel.copy(), rng, pool_kwargs, pool_steps=16)
    envr = _EnvRunner(env, rng, pool_steps=16)
    build_s = time.perf_counter() - t0

    envr.run(warmup, timed=False)
    raw.run(warmup, timed=False, period=10)
    env.timer.reset()
    split = PhaseTimer()  # the steps with update_state's stages one region each (not in the totals)
    machine0 = psutil.cpu_times()
    for done in range(0, steps, block):
        k = min(block, steps - done)
        envr.run(k, timed=True)
        raw.run(k, timed=True, period=envr.mean_episode_length)
        envr.run_timed_by(k, split, split=True)
    steal = steal_share(machine0, psutil.cpu_times())
    main_tid = cpu.current_tid()
    thread_timer = ThreadPhaseTimer({"numba": [t for t in env.host_thread_ids if t != main_tid],
                                     "mujoco": list(env.pool.pool_tids)})
    envr.run_timed_by(thread_steps, thread_timer)  # steps of their own, not in the totals
    threads = thread_timer.breakdown(max(thread_steps, 1))

    summary = env.timer.summary()
    phases = {name: {"ms": s.mean_ms, "cores": s.cores, "count": s.count} for name, s in summary.items()}
    phases["env.step"] = {"ms": 1e3 * envr.wall / steps, "cores": envr.cpu / envr.wall, "count": steps}
    # ms per env.step (restart runs only on steps where an env ended)
    split_summary = split.summary()
    stage_names = {name for name, _ in SPLIT}  # timed only in the split steps; the others in the main ones
    subphases = {}
    for name in SUBPHASES:
        phases.pop(name, None)
        src = split_summary if name in stage_names else summary
        if name in src:
            subphases[name] = {"ms": src[name].wall_ms_total / steps, "cores": src[name].cores,
                               "count": src[name].count}
    raw_stats = {"ms": 1e3 * raw.wall / steps, "cores": raw.cpu / raw.wall, "count": steps,
                 "nthread": raw.pool.nthread, "steps_per_sec": num_envs * steps / raw.wall}
    env_sps = num_envs * steps / envr.wall
    projection, projection_main_alone = project(phases, threads, len(usable))
    res = {
        "label": "pinned " + ",".join(map(str, cpu_ids)) if cpu_ids is not None else "default sizing",
        "cpu_ids": cpu_ids, "nthread": env.spec.nthread, "build_s": build_s, "phases": phases, "raw_pool": raw_stats,
        "env_steps_per_sec": env_sps, "raw_steps_per_sec": raw_stats["steps_per_sec"],
        "host_fraction": (phases["update_state"]["ms"] + phases["reset_done"]["ms"]) / phases["env.step"]["ms"],
        "env_over_raw": env_sps / raw_stats["steps_per_sec"], "episodes_ended": envr.ended,
        "mean_episode_length": envr.mean_episode_length, "subphases": subphases,
        "update_state_split": {"ms": split_summary["update_state"].mean_ms,
                               "cores": split_summary["update_state"].cores},
        "spin_check": spin_check(env, raw), "projection": projection,
        "steal_share": steal, "threads": threads, "projection_main_alone": projection_main_alone,
    }
    raw.pool.close()
    env.close()
    _restore_affinity(usable)
    return res


def steal_share(before, after) -> float:
    """Share of the machine's CPU time a hypervisor took (steal) between two ``psutil.cpu_times()``. On a busy VM
    host the vCPUs stall at random: a parallel region then waits for its slowest thread and reads as fewer cores
    used, the host's doing, not the code's; printed so a reader can tell."""
    d = {f: getattr(after, f) - getattr(before, f) for f in after._fields}
    total = sum(d.values()) - d.get("guest", 0.0) - d.get("guest_nice", 0.0)  # guest is inside user/nice
    return d.get("steal", 0.0) / total if total > 0 else 0.0


def project(phases: dict, threads: dict, usable: int) -> tuple[dict, dict]:
    """Each phase's projected ms and the host share at PROJECT_CORES cores (Amdahl, from this machine); and a second
    estimate, the host share if only each host phase's ``main_alone`` time were serial (T1 = ms x cores, serial =
    main_alone, the rest / N). The second counts waking the workers and waiting at a region's end as parallel (on
    many cores they cost more, not less), but does count the calling thread's extra work in unevenly split regions.
    main_alone varies by about 1 ms between runs on a 2-core VM."""
    projection, main_alone = {}, {}
    for n in PROJECT_CORES:
        ms = {name: amdahl(phases[name]["ms"], phases[name]["cores"], usable, n) for name in PHASES}
        host = ms["update_state"] + ms["reset_done"]
        projection[str(n)] = {"phases_ms": ms, "host_share": host / (host + ms["backend_step"])}
        lone = 0.0
        for name in ("update_state", "reset_done"):
            t1 = phases[name]["ms"] * phases[name]["cores"]
            serial = min(threads.get(name, {}).get("main_alone_ms", t1), t1)
            lone += serial + (t1 - serial) / n
        main_alone[str(n)] = lone / (lone + ms["backend_step"])
    return projection, main_alone


def _restore_affinity(cpus: list[int]) -> None:
    if cpu.affinity_supported():
        os.sched_setaffinity(0, set(cpus))


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
    print(f"steal time during the timed steps: {100 * r['steal_share']:.1f} % of the machine's CPU time "
          "(a VM host's; cores read low when it is high)")
    sub = r["subphases"]
    print("\nsub-phases (ms per env.step; physics and check_health (with the bodies' velocities) are backend_step's, "
          "restart = reset_done's restart of the ended envs)")
    print(format_table(["sub-phase", "ms", "cores"], [[n, sub[n]["ms"], sub[n]["cores"]] for n in sub]))
    us = r["update_state_split"]
    print(f"update_state with its stages one region each (the sub-phase steps): {us['ms']:.2f} ms, "
          f"{us['cores']:.2f} cores; in one region (the table above): {r['phases']['update_state']['ms']:.2f} ms, "
          f"{r['phases']['update_state']['cores']:.2f} cores")
    sc = r["spin_check"]
    print(f"\nspin check: raw pool.step alone {sc['alone_ms']:.1f} ms, right after a parallel host phase "
          f"{sc['after_host_ms']:.1f} ms, ratio {sc['ratio']:.3f} (bar <= 1.02)")
    print("\nprojection (Amdahl, NOT a measurement): with c cores used of U here, p = U/(U-1) (1 - 1/c) "
          "(U = 2: p = 2 (1 - 1/c)),\nT1 = ms x c, T_N = T1 ((1 - p) + p / N); host share = "
          "(update_state + reset_done) / (backend_step + update_state + reset_done)")
    rows = [[n, *(pr["phases_ms"][name] for name in PHASES), f"{100 * pr['host_share']:.1f} %"]
            for n, pr in r["projection"].items()]
    print(format_table(["cores", "backend_step ms", "update_state ms", "reset_done ms", "host share"], rows))
    lo = " / ".join(f"{n}: {100 * v:.1f} %" for n, v in r["projection_main_alone"].items())
    print(f"second estimate, serial = the calling thread's lone work (table below): {lo}")
    print("\nCPU per thread group (ms per env.step, steps of their own): the calling thread, Numba's workers, "
          "MuJoCo's workers;\nmain alone = main - each group's CPU / its thread count (work only the calling "
          "thread did)")
    print(format_table(["phase", "wall ms", "main", "numba workers", "mujoco workers", "main alone"],
                       [[n, t["wall_ms"], t["main_ms"], t["numba_ms"], t["mujoco_ms"], t["main_alone_ms"]]
                        for n, t in r["threads"].items()]))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="unilab-bench env-phases", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--task", choices=TASKS, default=DEFAULT_TASK, help=f"the task (default: {DEFAULT_TASK})")
    p.add_argument("--num-envs", type=at_least(1), default=1024)
    p.add_argument("--steps", type=at_least(1), default=60, help="timed env steps per run")
    p.add_argument("--warmup", type=at_least(0), default=5, help="untimed steps before timing")
    p.add_argument("--block", type=at_least(1), default=5,
                   help="env and raw-pool steps alternate in blocks of this many (shared machine load hits both)")
    p.add_argument("--cpu-ids", type=cpu_list, default=None,
                   help="pin the pool's threads, e.g. 0-1 (one thread per id)")
    p.add_argument("--compare-cpu-ids", type=cpu_list, default=None,
                   help="A/B in one invocation: default sizing vs pinned to these cpu ids")
    p.add_argument("--nthread", type=at_least(1), default=None, help="thread count (default: the sizing rule)")
    p.add_argument("--thread-steps", type=at_least(0), default=6,
                   help="extra env steps timed per thread group (calling thread, Numba, MuJoCo; 0: none)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None, help="also write the results to this JSON file")
    p.add_argument("--motion-files", nargs="*", default=None, help="clips to use (default: the built-in G1 clips)")
    p.add_argument("--randomization", choices=("on", "off"), default=None,
                   help="domain randomization (task.randomization.enabled); default: the task's default (on)")
    p.add_argument("--show-driver", action="store_true",
                   help="print the source of the step driver compiled from the term tables, and exit")
    p.add_argument("--undesired-contacts", choices=("on", "off"), default=None,
                   help="the undesired_contacts reward term, and with it the pool's contact stage "
                        "(off: task.rewards.undesired_contacts.weight=0); default: the task's default (on)")
    args = p.parse_args(argv)
    if args.cpu_ids and args.compare_cpu_ids:
        p.error("--cpu-ids and --compare-cpu-ids are exclusive")

    cfg = task_config(args.task, {})
    tracking_only = {"--motion-files": args.motion_files, "--randomization": args.randomization,
                     "--undesired-contacts": args.undesired_contacts}
    if kind(args.task) != "motion_tracking" and any(v is not None for v in tracking_only.values()):
        p.error(f"{', '.join(k for k, v in tracking_only.items() if v is not None)}: motion tracking only")
    if args.motion_files:
        cfg.motion_files = list(args.motion_files)
    if args.randomization is not None:
        cfg.randomization.enabled = args.randomization == "on"
    if args.undesired_contacts == "off":
        cfg.rewards.undesired_contacts.weight = 0.0
    if args.show_driver:
        print(make_env(args.task, cfg, 1).driver_source.text)
        return 0
    runs: list[tuple[list[int] | None, int | None]] = [] if args.cpu_ids else [(None, args.nthread)]
    if args.cpu_ids or args.compare_cpu_ids:
        runs.append((args.cpu_ids or args.compare_cpu_ids, None))

    print(f"usable cpus {cpu.usable_cpus()}; {args.task}, decimation {cfg.decimation}, sim dt {cfg.sim_dt}")
    results = []
    for cpu_ids, nthread in runs:
        r = run_one(args.task, cfg, args.num_envs, args.steps, args.warmup, args.block, cpu_ids, nthread, args.seed,
                    args.thread_steps)
        print_run(r, args.num_envs)
        results.append(r)
    if len(results) == 2:
        a, b = results
        print(f"\nA/B env steps/s: {a['label']} {a['env_steps_per_sec']:,.0f} vs {b['label']} "
              f"{b['env_steps_per_sec']:,.0f} ({b['env_steps_per_sec'] / a['env_steps_per_sec']:.3f}x)")
    out = write_json(args.json, {"benchmark": "env_step_phase_cpu", "task": args.task, "num_envs": args.num_envs,
                                 "steps": args.steps, "decimation": cfg.decimation, "runs": results})
    if out:
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

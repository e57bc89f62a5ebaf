"""The collector process: owns the task env (and its MuJoCo pool); never imports torch.

Per iteration it waits for the learner's actions and steps every env, which writes the step into shared memory (slot
``k % SLOTS`` for step ``k``). It exits when told to, when the learner is gone, or on an error: the traceback goes to
the learner (exit code 1), or for an env that cannot be built (a config or asset problem) one short message (exit code
2; UNILAB_DEBUG=1 adds the traceback).
"""

from __future__ import annotations

import itertools
import multiprocessing as mp
import os
import signal
import sys
import time
import traceback
from dataclasses import dataclass
from typing import Any

import numpy as np

from unilab.cache import cache_dir
from unilab.runtime import console
from unilab.runtime.shm import SharedArrays, step_slot
from unilab.runtime.stats import STAT, Counters
from unilab.sim.physics import pool_class
from unilab.tasks.registry import make_env
from unilab.telemetry.phase_timer import PhaseTimer
from unilab.telemetry.trace import TraceRecorder

POLL_S = 0.2  # how often a blocked wait looks at the stop flag and the learner


@dataclass
class CollectorArgs:
    """Everything the collector needs; picklable for the spawn start method."""

    task_name: str
    task_cfg: Any  # the task's typed config, validated once by the train CLI (it pickles)
    num_envs: int
    pool_kwargs: dict[str, Any]
    seed: int
    trace_path: str | None
    startup_timeout_s: float


@dataclass
class CollectorChannels:
    """The synchronisation objects shared by learner and collector."""

    ready: Any  # Queue: collector -> learner, the EnvSpec once built
    handle: Any  # Queue: learner -> collector, the shared-memory handle
    errors: Any  # Queue: collector -> learner, a traceback on failure
    obs_ready: Any  # Semaphore: collector -> learner, one release per step
    action_ready: Any  # Semaphore: learner -> collector, one release per step
    stop: Any  # Event: learner asks the collector to exit


class LearnerGone(Exception):
    """The parent process died; the collector stops."""


def _wait(sem: Any, ch: CollectorChannels) -> bool:
    """Acquire ``sem``; False when asked to stop. Raises LearnerGone if the parent died."""
    parent = mp.parent_process()
    while not sem.acquire(timeout=POLL_S):
        if ch.stop.is_set():
            return False
        if parent is not None and not parent.is_alive():
            raise LearnerGone
    return not ch.stop.is_set()


def build_error_message(task_name: str, err: BaseException, num_envs: int | None = None) -> str:
    """One clear line (or two) for an env that could not be built; the traceback only with UNILAB_DEBUG=1."""
    text = str(err).strip() or repr(err)
    msg = f"could not build the {task_name} env: {type(err).__name__}: {text}"
    # MuJoCo's batch raises ValueError("std::bad_alloc") or RuntimeError("Caught an unknown exception!"), naming no size
    if num_envs is not None and (isinstance(err, MemoryError) or "bad_alloc" in text
                                 or "Caught an unknown exception" in text):
        hint = f"out of memory for algo.num_envs={num_envs} envs: lower algo.num_envs"
    else:
        hint = asset_hint(err)
    if hint:
        msg += f"\n{hint}"
    if os.environ.get("UNILAB_DEBUG") == "1":
        msg += "\n--- collector traceback ---\n" + "".join(traceback.format_exception(err)).rstrip()
    else:
        msg += "\n(set UNILAB_DEBUG=1 for the full traceback)"
    return msg


def asset_hint(err: BaseException) -> str:
    """What to do about an env build error that involves the asset cache; empty when it does not. ``unilab-assets fetch
    --force`` only for a cached file that does not parse (a corrupt mesh or MJCF names its full path): a refetch cannot
    help with no network, a wrong wheel or an unwritable cache folder (AssetError, which already says what to do) nor
    with an OSError (permissions, a read-only or full disk) on a path in the cache."""
    from unilab.assets import holosoma  # noqa: PLC0415 - lazy: only this error path needs it

    if isinstance(err, holosoma.AssetError):
        return ""
    assets = holosoma.assets_dir()
    text = str(err)
    if isinstance(err, OSError):
        cache = cache_dir()
        if any(str(p) in text or str(getattr(err, "filename", "") or "").startswith(str(p))
               for p in {cache, cache.resolve()}):
            return (f"the asset cache {cache} is not usable ({err.strerror or type(err).__name__}); "
                    "set UNILAB_CACHE to a writable folder")
        return ""
    if any(str(p) in text for p in {assets, assets.resolve()}):  # MuJoCo's mesh errors name the file's full path
        return "the cached robot assets look corrupt: run `unilab-assets fetch --force` to rebuild them"
    return ""


def run_collector(args: CollectorArgs, ch: CollectorChannels) -> None:
    # Ctrl-C and a closed terminal (SIGHUP) reach the whole process group: the learner handles them and stops us
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
    console.guard("unilab collector", note=False)  # a closed stdout pipe: the learner says so and goes on, so do we
    trace = TraceRecorder("collector") if args.trace_path else None
    timer = PhaseTimer(trace=trace)
    shm = None
    try:
        # one line per diverged env per step otherwise; the pool counts them anyway
        pool_class(args.pool_kwargs.get("backend", "mujoco")).silence_warnings()
        env = make_env(args.task_name, args.task_cfg, args.num_envs, pool_kwargs=args.pool_kwargs, seed=args.seed)
    except Exception as err:  # noqa: BLE001 - a config or asset problem: one clear message, no traceback dump
        ch.errors.put({"stage": "build", "message": build_error_message(args.task_name, err, args.num_envs)})
        time.sleep(0.2)  # let the queue's feeder thread flush
        sys.exit(2)
    try:
        env.timer.trace = trace
        spec = env.spec
        ch.ready.put(spec)
        handle = ch.handle.get(timeout=args.startup_timeout_s)
        if handle is None:
            return
        shm = SharedArrays.attach(handle)
        counters = Counters(shm["counters"], handle["counter_names"])
        env.reset(out=step_slot(shm, spec, 0))  # step 0: reward and done flags stay zero
        ch.obs_ready.release()
        for k in itertools.count(1):
            with timer.phase("action_wait"):
                go = _wait(ch.action_ready, ch)
            if not go:
                break
            out = step_slot(shm, spec, k)
            with timer.phase("env_step"):  # the env writes the step into `out` (shared memory)
                _, reward, _, _, info = env.step(shm["action"], out=out)
            # the rest of handing the step to the learner's replay: the shared counters it reads with the step
            with timer.phase("replay_write"):
                _count(counters, timer, env.timer, reward, info, env.stats())
            ch.obs_ready.release()
        env.close()
    except LearnerGone:
        print("unilab collector: the learner process is gone; exiting", file=sys.stderr, flush=True)
    except BaseException:  # noqa: BLE001 - anything must reach the learner
        ch.errors.put(traceback.format_exc())
        sys.stderr.write(traceback.format_exc())
        sys.stderr.flush()
        time.sleep(0.2)  # let the queue's feeder thread flush
        sys.exit(1)
    finally:
        if shm is not None:
            shm.close()
        if trace is not None:
            trace.save(args.trace_path)


def _count(counters: Counters, timer: PhaseTimer, env_timer: PhaseTimer, reward, info: dict,
           stats: dict[str, float] | None = None) -> None:
    """Fold this step's timings, rewards, episode ends and task scalars into the shared counters."""
    for name, s in (*timer.pop_summary().items(), *env_timer.pop_summary().items()):
        if f"{name}_ms" in counters.index:  # a task may time extra phases of its own
            counters.add(f"{name}_ms", s.wall_ms_total)
            counters.add(f"{name}_cpu_ms", s.cpu_ms_total)
    counters.add("iterations", 1)
    counters.add("reward_sum", float(np.mean(reward)))
    ep = info.get("episode", {})
    n = ep.get("count", 0)
    if n:
        counters.add("episodes", n)
        counters.add("episode_return_sum", ep["return_mean"] * n)
        counters.add("episode_length_sum", ep["length_mean"] * n)
    counters.add("bad_envs", info.get("num_bad_envs", 0))
    # per-step means of the reward terms, how many envs each failure condition ended, the task scalars' values
    for prefix, values, fold in (("reward_term/", info.get("reward_terms", {}), np.mean),
                                 ("termination/", info.get("termination_terms", {}), np.count_nonzero),
                                 (STAT, stats or {}, float)):
        for name, value in values.items():
            if prefix + name in counters.index:
                counters.add(prefix + name, float(fold(value)))

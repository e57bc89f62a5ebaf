"""``nthread="auto"``: measure pool configurations once, cache the winner.

The key is everything the winner depends on: the compiled model (hash of its MJB bytes), num_envs, substeps, the usable
CPU set, the CPU model string, the MuJoCo version and, for a pool without contacts, that (its non-persistent candidates
are timed with the thin post-step stage they will run). A changed key re-tunes; an unreadable cache file, or an entry
whose values could not have been measured here (e.g. nthread 0, or more threads than usable CPUs), is reported (naming
the file and the value), re-measured and replaced, never fatal.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

import mujoco
import numpy as np
from mujoco import batch as mjbatch

from unilab.cache import cache_dir
from unilab.sim import cpu
from unilab.sim.mujoco.contacts import forward_without_contacts

# a candidate within this fraction of the fastest counts as a tie; ties go to the sizing rule's choice, so that noise
# does not flip the configuration
TIE_TOLERANCE = 0.03


@dataclass
class AutotuneResult:
    """The chosen configuration and what was measured to choose it."""

    nthread: int
    persistent: bool
    ms_per_step: dict[str, float] = field(default_factory=dict)
    cached: bool = False
    key: str = ""


def model_hash(model: mujoco.MjModel) -> str:
    """sha256 of the compiled model's MJB bytes."""
    buf = np.zeros(mujoco.mj_sizeModel(model), dtype=np.uint8)
    mujoco.mj_saveModel(model, None, buf)
    return hashlib.sha256(buf.tobytes()).hexdigest()


def cache_key(model: mujoco.MjModel, num_envs: int, substeps: int, contacts: bool = True) -> str:
    """The string the winner is cached under (keys of pools with contacts are as before the option)."""
    parts = {"model": model_hash(model), "num_envs": num_envs, "substeps": substeps, "cpus": cpu.usable_cpus(),
             "cpu_model": cpu.cpu_model_name(), "mujoco": mujoco.__version__}
    if not contacts:
        parts["contacts"] = False
    return json.dumps(parts, sort_keys=True)


def candidates(num_envs: int) -> list[tuple[int, bool]]:
    """(nthread, persistent) pairs: usable CPUs and its halves down to 1, x persistent on/off."""
    usable = cpu.resolve_nthread(num_envs)
    return [(usable >> k, p) for k in reversed(range(usable.bit_length())) for p in (False, True)]


def measure(model: mujoco.MjModel, num_envs: int, substeps: int, nthread: int, persistent: bool, steps: int = 5,
            seed: int = 0, contacts: bool = True) -> float:
    """Mean wall ms of one ``step(substeps)`` of a fresh batch, after one warm-up step, with the post-step stage the
    pool computes (``contacts=False``, non-persistent: the substeps, then a forward without collision and constraints).
    """
    b = mjbatch.Batch(model, num_envs, nthread, persistent)
    rng = np.random.default_rng(seed)
    ctrl = b.bind("ctrl")
    limited = model.actuator_ctrllimited.astype(bool)
    lo = np.where(limited, model.actuator_ctrlrange[:, 0], -1.0)
    hi = np.where(limited, model.actuator_ctrlrange[:, 1], 1.0)
    # a small fraction of the range keeps the sims in ordinary states
    mid, half = (lo + hi) / 2, (hi - lo) / 2
    lo, hi = mid - 0.3 * half, mid + 0.3 * half
    flags = b.expand("opt.disableflags") if not contacts and not persistent else None
    ctrl[:] = rng.uniform(lo, hi, ctrl.shape)
    _step(b, substeps, flags)
    t0 = time.perf_counter()
    for _ in range(steps):
        ctrl[:] = rng.uniform(lo, hi, ctrl.shape)
        _step(b, substeps, flags)
    return (time.perf_counter() - t0) / steps * 1000.0


def _step(b: mjbatch.Batch, substeps: int, flags: np.ndarray | None) -> None:
    """A pool's step: substeps + the VEL stage (thin, as BatchEnvPool(contacts=False), when ``flags`` is given)."""
    vel = int(mujoco.mjtStage.mjSTAGE_VEL)
    try:
        if flags is None:
            b.step(None, substeps, vel)
        else:
            b.step(None, substeps, int(mujoco.mjtStage.mjSTAGE_NONE))
            forward_without_contacts(b, flags, None, vel)
    except mjbatch.SimulationError:
        pass  # a failing sim costs what it costs; timing is all we want here


def _load(path: Path) -> dict:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            raise ValueError("top level is not an object")
        return data
    except (OSError, ValueError) as err:
        warnings.warn(f"ignoring unreadable autotune cache {path}: {err}; it will be rewritten", stacklevel=3)
        return {}


def _entry_problem(entry: object, num_envs: int) -> str | None:
    """What is wrong with a cached entry (None: usable as is): nthread must be an int in [1, min(num_envs, usable
    CPUs)] (the candidates' range; the key pins the CPU set, so a larger value was never measured here), persistent a
    bool, ms_per_step (optional) an object."""
    if not isinstance(entry, dict):
        return f"entry is {type(entry).__name__} {entry!r}, not an object"
    if "nthread" not in entry or "persistent" not in entry:
        return f"entry {entry!r} lacks nthread or persistent"
    nthread, bound = entry["nthread"], cpu.resolve_nthread(num_envs)
    if isinstance(nthread, bool) or not isinstance(nthread, int) or not 1 <= nthread <= bound:
        return (f"nthread={nthread!r} is not an int in [1, {bound}] "
                f"(num_envs {num_envs}, {cpu.usable_cpu_count()} usable CPUs)")
    if not isinstance(entry["persistent"], bool):
        return f"persistent={entry['persistent']!r} is not true/false"
    if not isinstance(entry.get("ms_per_step", {}), dict):
        return f"ms_per_step={entry['ms_per_step']!r} is not an object"
    return None


def autotune(model: mujoco.MjModel, num_envs: int, substeps: int = 1, *, cache_path: Path | None = None,
             steps: int = 5, force: bool = False, contacts: bool = True) -> AutotuneResult:
    """Pick (nthread, persistent) for this model and size; cached on disk. ``contacts``: the pool's option (False
    times the non-persistent candidates with the thin post-step stage they would run)."""
    path = Path(cache_path) if cache_path is not None else cache_dir() / "autotune.json"
    key = cache_key(model, num_envs, substeps, contacts)
    data = _load(path)
    entry = data.get(key)
    if not force and entry is not None:
        problem = _entry_problem(entry, num_envs)
        if problem is None:
            return AutotuneResult(entry["nthread"], entry["persistent"], dict(entry.get("ms_per_step", {})), True, key)
        warnings.warn(f"ignoring malformed autotune entry in {path}: {problem}; re-measuring and overwriting it",
                      stacklevel=2)
    timings = {f"{n}{'p' if p else ''}": (n, p, measure(model, num_envs, substeps, n, p, steps=steps,
                                                        contacts=contacts)) for n, p in candidates(num_envs)}
    fastest_n, fastest_p, best = min(timings.values(), key=lambda t: t[2])
    rule = cpu.resolve_nthread(num_envs)
    tie = timings[str(rule)][2] <= best * (1 + TIE_TOLERANCE)  # the rule's non-persistent candidate
    nthread, persistent = (rule, False) if tie else (fastest_n, fastest_p)
    result = AutotuneResult(nthread, persistent, {k: round(v[2], 3) for k, v in timings.items()}, False, key)
    data[key] = {k: v for k, v in asdict(result).items() if k not in ("cached", "key")}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    os.replace(tmp, path)
    return result

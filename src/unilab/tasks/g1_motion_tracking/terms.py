"""Task terms as tables, and the parallel per-env drivers generated from them.

A reward term, a termination condition and an observation piece are each one
row of a table (:data:`~unilab.tasks.g1_motion_tracking.rewards.REWARD_TERMS`,
:data:`~unilab.tasks.g1_motion_tracking.terminations.TERMINATIONS`,
:data:`~unilab.tasks.g1_motion_tracking.observations.POLICY_OBS` /
``CRITIC_OBS``): a name, a small ``@njit(inline="always")`` per-env function
and its parameters or width. Names, config keys, TensorBoard tags, widths and
slices all derive from the rows.

Why generated drivers: Numba cannot call a Python list of functions in a
loop, and a hand-written driver that calls each term explicitly repeats the
table (a second place to keep in order). So a driver's source is a fixed
template (:mod:`.step_driver`'s, readable there) with one generated line per row
of each table it runs, compiled once per set of rows and cached in memory and,
through a source file named by a hash of the template and the rows' code, in
Numba's on-disk cache.

A driver loops over envs with ``numba.prange`` and writes only its env's rows,
so its results are bit-identical to a serial loop at any thread count.
Term functions share one signature: ``f(s, e, r, p)`` with ``s`` the
:class:`TaskArrays` of the env, ``e`` the env, ``r`` its flat reference frame
(a row of the motion library's arrays) and ``p`` the row's parameter.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import os
import sys
from collections import namedtuple
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from unilab.cache import cache_dir
from unilab.sim import quat

# the arrays every term function may read (one namedtuple: Numba passes it as a struct)
TaskArrays = namedtuple("TaskArrays", [
    "anchor",          # int: index of the anchor among the tracked bodies
    "ee_index",        # (E,) end-effector indices among the tracked bodies
    "body_pos", "body_quat", "body_lin", "body_ang",  # (n, B, .) robot tracked bodies, world frame
    "joint_pos", "joint_vel",                          # (n, J)
    "base_lin_b", "base_ang_b",                        # (n, 3) base velocities, base frame
    "ref_index",       # (n,) flat reference frame of each env (motion library row)
    "ref_body_pos", "ref_body_quat", "ref_body_lin", "ref_body_ang",  # (F, B, .) library arrays
    "ref_joint_pos", "ref_joint_vel",                 # (F, J)
    "soft_lo", "soft_hi", "default_joint_pos",        # (J,)
    "action", "last_action",                          # (n, A) in [-1, 1]
    "action_bound",    # (A,) factors from the [-1, 1] action to the recipe's (holosoma's) action
    "joint_pos_bias",  # (n, J) offsets of the default joint positions (domain randomization); (0, J): none
    "contact_age",     # (n, K) policy steps since each undesired-contact body last touched (K = 0: term off)
    "contact_history", # int: a body counts while its contact_age is below this
])


@dataclass(frozen=True)
class Term:
    """One row of a term table: ``name``, its per-env function and what the driver needs of it.

    ``kind`` is free-form per table (``"exp"``/``"penalty"`` for rewards);
    ``width(J, B)`` is an observation piece's length; ``noise`` names the
    ``obs_noise`` config key of a policy piece (None: no noise).
    """

    name: str
    func: Callable
    kind: str = ""
    width: Callable[[int, int], int] | None = None
    noise: str | None = None


_CACHE: dict[tuple, Callable] = {}


def generate_driver(template: str, blocks: dict[str, tuple[str, Sequence[Term]]], name: str,
                    depends: Sequence[str] = ()) -> Callable:
    """Compile ``template`` with each ``{key}`` line replaced by one line per row of ``blocks[key]``.

    ``blocks[key] = (call, rows)``: row ``i``'s line is ``call`` with ``{i}``
    its index and ``{f}`` its function. The result is cached per (template,
    blocks); the source goes to a file named by its hash (under
    ``$UNILAB_CACHE/numba_drivers``) so Numba's ``cache=True`` works for it.
    ``depends`` names further modules whose functions the template imports
    (hashed too, so an edit there compiles afresh).
    """
    key = (template, tuple((k, call, tuple((t.name, t.func) for t in rows)) for k, (call, rows) in blocks.items()))
    fn = _CACHE.get(key)
    if fn is not None:
        return fn
    src, funcs = template, {}
    for k, (call, rows) in blocks.items():
        mark = "{" + k + "}"
        indent = next(line for line in src.splitlines() if mark in line).index(mark)
        names = [f"{k}_f{i}" for i in range(len(rows))]
        lines = ("\n" + " " * indent).join(call.replace("{i}", str(i)).replace("{f}", f)
                                           for i, f in enumerate(names))
        src = src.replace(mark, lines)
        funcs.update({f: t.func for f, t in zip(names, rows)})
    imports = "".join(f"from {t.py_func.__module__} import {t.py_func.__name__} as {f}\n" for f, t in funcs.items())
    body = "import numpy as np\nfrom numba import njit, prange\n" + imports + "\n\n" + src
    digest = hashlib.sha256(body.encode())
    # Numba's cache checks only the driver file: a changed term function, or a helper it
    # inlines, must give another file name (so hash the modules they are defined in)
    modules = sorted({t.py_func.__module__ for t in funcs.values()} | {quat.__name__} | set(depends))
    for mod in modules:
        digest.update(inspect.getsource(sys.modules[mod]).encode())
    try:
        path = _driver_dir() / f"{name}_{digest.hexdigest()[:16]}.py"
        if not path.is_file():
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(body)
            os.replace(tmp, path)
        spec = importlib.util.spec_from_file_location(f"unilab_driver_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # Numba's cache re-imports the driver's module by name
        spec.loader.exec_module(module)  # type: ignore[union-attr]
        fn = getattr(module, name)
    except OSError:  # read-only cache dir: compile in memory, every process
        ns: dict = {}
        exec(compile(body.replace("cache=True", "cache=False"), f"<{name}>", "exec"), ns)  # noqa: S102
        fn = ns[name]
    _CACHE[key] = fn
    return fn


def _driver_dir() -> Path:
    d = cache_dir() / "numba_drivers"
    d.mkdir(parents=True, exist_ok=True)
    return d

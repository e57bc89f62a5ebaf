"""Task terms as table rows, and the per-env drivers compiled from a template and the tables.

A reward term, a termination condition and an observation piece are each one row of a task's table: a name, a
small ``@njit(inline="always")`` per-env function and what the driver needs of it; names, config keys, TensorBoard
tags, widths and slices all derive from the rows.

Why generated drivers: Numba cannot call a Python list of functions in a loop, and a hand-written driver would
repeat the table. So a driver's source is the task's fixed template with one generated line per table row, calling
each term by its table's and its own name (Numba errors name ``rewards_body_ori``). It is compiled from memory
(:func:`driver_source` prints it), and Numba's on-disk cache keys it by a hash of that source and of every module
whose jitted functions it reaches (found by walking their globals: no hand-kept dependency list).
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import inspect
import linecache
import os
import sys
import types
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from numba.core import caching
from numba.core.dispatcher import Dispatcher

from unilab.cache import cache_dir


@dataclass(frozen=True)
class Term:
    """One row of a term table: ``name``, its per-env function and what the driver needs of it."""

    name: str
    func: Callable
    kind: str = ""  # free-form per table ("exp"/"penalty" for rewards)
    width: Callable[[int, int], int] | None = None  # width(J, B): an observation piece's length
    noise: str | None = None  # the obs_noise config key of a policy piece (None: no noise)
    mirror: str | None = None  # how the left/right mirror maps the piece (a symmetry.piece_mirror kind; None: none)


# a driver's code object is named "<_FILE_PREFIX><digest>": the cache locator below recognises it
_FILE_PREFIX = "unilab-driver-"
_CACHE: dict[tuple, Callable] = {}


def driver_source(template: str, blocks: dict[str, tuple[str, Sequence[Term]]]) -> str:
    """``template`` with each ``{key}`` line replaced by one line per row of ``blocks[key]``, and its imports.

    ``blocks[key] = (call, rows)``: row ``i``'s line is ``call`` with ``{i}`` its index and ``{f}`` its function,
    imported as ``<key>_<its name>`` (``rewards_body_ori``).
    """
    src, funcs = template, {}
    for key, (call, rows) in blocks.items():
        mark = "{" + key + "}"
        indent = next(line for line in src.splitlines() if mark in line).index(mark)
        lines = []
        for i, t in enumerate(rows):
            py = t.func.py_func
            alias = f"{key}_{py.__name__}"  # the table's name first: a term may share a name with a template variable
            if funcs.setdefault(alias, py) is not py:
                raise ValueError(f"two {key} functions named {py.__name__!r} ({funcs[alias].__module__} and "
                                 f"{py.__module__}): a driver calls each by its name, rename one")
            lines.append(call.replace("{i}", str(i)).replace("{f}", alias))
        src = src.replace(mark, ("\n" + " " * indent).join(lines))
    imports = "".join(f"from {py.__module__} import {py.__name__} as {alias}\n" for alias, py in funcs.items())
    return "import numpy as np\nfrom numba import njit, prange\n" + imports + src


def compile_driver(template: str, blocks: dict[str, tuple[str, Sequence[Term]]], name: str) -> Callable:
    """The function ``name`` of :func:`driver_source`'s source, compiled from memory (once per process per source)."""
    source = driver_source(template, blocks)
    key = (source, name)
    if key in _CACHE:
        return _CACHE[key]
    digest = hashlib.sha256(source.encode())
    for mod in sorted(_reached_modules(source)):
        digest.update(inspect.getsource(sys.modules[mod]).encode())
    filename = f"{_FILE_PREFIX}{name}-{digest.hexdigest()[:20]}"
    try:
        _DriverCacheLocator("").ensure_cache_path()
    except OSError:  # a read-only cache dir: compile in memory, every process
        source = source.replace("cache=True", "cache=False")
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)  # tracebacks
    module = types.ModuleType(filename)
    # Numba's cache rebuilds a loaded function's environment from its module, found by name
    sys.modules[filename] = module
    exec(compile(source, filename, "exec"), module.__dict__)  # noqa: S102 - our own template and term names
    _CACHE[key] = getattr(module, name)
    return _CACHE[key]


def _reached_modules(source: str) -> set[str]:
    """The modules defining the functions ``source`` imports and every jitted function those reach."""
    todo: list[object] = []
    modules: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("unilab."):
            mod = importlib.import_module(node.module)
            modules.add(node.module)  # its constants too (stage bits)
            todo.extend(getattr(mod, a.name) for a in node.names)
    seen: set[int] = set()
    while todo:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        modname = getattr(obj, "__module__", None) or ""
        if modname.startswith("unilab."):
            modules.add(modname)
        if isinstance(obj, Dispatcher):
            py = obj.py_func
            for name in _code_names(py.__code__):
                value = py.__globals__.get(name)
                if isinstance(value, types.ModuleType) and value.__name__.startswith("unilab."):
                    modules.add(value.__name__)
                    todo.extend(v for v in vars(value).values() if isinstance(v, Dispatcher))
                elif isinstance(value, Dispatcher):
                    todo.append(value)
    return modules


def _code_names(code: types.CodeType) -> Iterator[str]:
    yield from code.co_names
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_names(const)


class _DriverCacheLocator(caching._CacheLocator):  # noqa: SLF001 - Numba's documented extension point
    """Caches a driver compiled from memory under the cache dir, fresh while its digest (its name) is."""

    def __init__(self, stamp: str, line: int = 0):
        self._stamp, self._line = stamp, line

    def get_cache_path(self) -> str:
        return str(cache_dir() / "numba_drivers")

    def get_source_stamp(self) -> str:
        return self._stamp

    def get_disambiguator(self) -> str:
        return str(self._line)  # the stamp is in the file name already

    @classmethod
    def from_function(cls, py_func, py_file):
        name = os.path.basename(py_file)
        return cls(name, py_func.__code__.co_firstlineno) if name.startswith(_FILE_PREFIX) else None


if _DriverCacheLocator not in caching.CacheImpl._locator_classes:  # noqa: SLF001
    caching.CacheImpl._locator_classes.insert(0, _DriverCacheLocator)  # noqa: SLF001

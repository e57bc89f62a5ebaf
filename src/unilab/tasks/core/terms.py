"""Task terms as table rows, and the per-env drivers compiled from a template and the tables.

A reward term, a termination condition and an observation piece are each one row of a task's table: a name, a
small ``@njit(inline="always")`` per-env function and what the driver needs of it; names, config keys, TensorBoard
tags, widths and slices all derive from the rows.

A row's function receives its arguments by name: each parameter is either a name the driver has (``s`` the task's
arrays, ``e`` the env, a state row it writes, ...; the template's ``names``) or a number from the task config:
parameter ``p`` of row ``name`` in table ``table`` is ``task.<section>.<p>``, the section being ``Term.config`` or
``<table>.<name>`` (a section that is a number is the row's one parameter). So ``sigma`` is the same config field
wherever a term takes it, and a term's line in the driver says which value it gets.

Why generated drivers: Numba cannot call a Python list of functions in a loop, and a hand-written driver would
repeat the table. So a driver's source is a template with one generated line per table row, calling each term by
its table's and its row's name (Numba errors name ``rewards_body_ori``). It is compiled from memory
(:class:`DriverSource` holds the text ``--show-driver`` prints), and Numba's on-disk cache keys it by a hash of
that source and of every module whose jitted functions it reaches (found by walking their globals: no hand-kept
dependency list).
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import inspect
import linecache
import numbers
import os
import sys
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
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
    config: str | None = None  # the config section of the function's number parameters (None: <table>.<name>)
    reset: Callable | None = None  # a stateful row's reset on a restart (its ``func`` updates it every step)


@dataclass(frozen=True)
class DriverSource:
    """A driver's generated source and its number parameters: ``params[k]`` is parameter ``params[k][1]`` of config
    section ``params[k][0]``."""

    text: str
    params: tuple[tuple[str, str], ...]

    def values(self, cfg: Any) -> np.ndarray:
        """The ``params`` array a driver call takes, read from the task config ``cfg``."""
        out = np.empty(len(self.params))
        for k, (section, name) in enumerate(self.params):
            value, key = cfg, section
            for part in section.split("."):
                value = getattr(value, part, None)
            if not isinstance(value, numbers.Real):  # a section with fields, not the one number
                value, key = getattr(value, name, None), f"{section}.{name}"
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise ValueError(f"task.{key} must be a number (a term's parameter {name}), got {value!r}")
            out[k] = value
        return out


# a driver's code object is named "<_FILE_PREFIX><digest>": the cache locator below recognises it
_FILE_PREFIX = "unilab-driver-"
_CACHE: dict[tuple, Callable] = {}


def driver_source(template: str, blocks: Mapping[str, tuple[str, Sequence[Term]]],
                  names: Mapping[str, str]) -> DriverSource:
    """``template`` with each ``{key}`` line replaced by one line per row of ``blocks[key] = (line, rows)``.

    Row ``i``'s line is ``line`` with ``{i}`` its index and ``{call}`` the call of its function, imported as
    ``<key>_<row name>``. A parameter in ``names`` gets that expression (``{i}`` replaced), any other one
    ``params[k]``, the config number of the row's section (see the module doc).
    """
    src, funcs, params = template, {}, []
    for key, (line, rows) in blocks.items():
        mark = "{" + key + "}"
        indent = next(text for text in src.splitlines() if mark in text).index(mark)
        lines = []
        for i, t in enumerate(rows):
            alias = f"{key}_{t.name}"
            if alias in funcs:
                raise ValueError(f"two {key} rows named {t.name!r}: a driver calls each by its name, rename one")
            py = funcs[alias] = t.func.py_func
            args, configured = [], []
            for p in inspect.signature(py).parameters:
                if p not in names:  # a config number, passed by keyword
                    param = (t.config or f"{key}.{t.name}", p)
                    if param not in params:
                        params.append(param)
                    configured.append(f"{p}=params[{params.index(param)}]")
                elif configured:
                    raise ValueError(f"{key} row {t.name!r}: {py.__name__}'s parameter {p!r} (the driver's) must "
                                     f"come before its config parameters")
                else:
                    args.append(names[p].replace("{i}", str(i)))
            args += configured
            lines.append(line.replace("{i}", str(i)).replace("{call}", f"{alias}({', '.join(args)})"))
        src = src.replace(mark, ("\n" + " " * indent).join(lines or ["pass"]))
    imports = "".join(f"from {py.__module__} import {py.__name__} as {alias}\n" for alias, py in funcs.items())
    return DriverSource("import numpy as np\nfrom numba import njit, prange\n" + imports + src, tuple(params))


def compile_driver(source: DriverSource, name: str) -> Callable:
    """The function ``name`` of ``source``, compiled from memory (once per process per source)."""
    text = source.text
    key = (text, name)
    if key in _CACHE:
        return _CACHE[key]
    digest = hashlib.sha256(text.encode())
    for mod in sorted(_reached_modules(text)):
        digest.update(inspect.getsource(sys.modules[mod]).encode())
    filename = f"{_FILE_PREFIX}{name}-{digest.hexdigest()[:20]}"
    try:
        _DriverCacheLocator("").ensure_cache_path()
    except OSError:  # a read-only cache dir: compile in memory, every process
        text = text.replace("cache=True", "cache=False")
    linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)  # tracebacks
    module = types.ModuleType(filename)
    # Numba's cache rebuilds a loaded function's environment from its module, found by name
    sys.modules[filename] = module
    exec(compile(text, filename, "exec"), module.__dict__)  # noqa: S102 - our own template and term names
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

"""Plain mappings (Hydra/YAML sections, stored checkpoint configs) into typed config dataclasses.

Shared by every layer's config. OmegaConf's structured configs check that each value fits its field's annotation
(``list[int]`` a list of ints ...) and refuse unknown keys; nested dataclass fields are built from nested mappings; the
dataclass's ``__post_init__`` range checks run last. Every error is a ValueError naming the key, the value and what the
field accepts.
"""

from __future__ import annotations

import dataclasses
import math
import operator
import os
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from omegaconf import OmegaConf
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException

T = TypeVar("T")
NO_VALUE = object()  # describe_config_error: the refused value is not known
NONFINITE_OK = "nonfinite_ok"
"""``field(metadata={NONFINITE_OK: True})``: the field takes NaN and +-inf, which every other number refuses."""


def build_dataclass(cls: type[T] | T, data: Mapping[str, Any], where: str) -> T:
    """A checked ``cls`` instance from ``data`` (errors name ``where.<key>``); ``cls`` may be an instance, whose values
    are then the defaults (a mapping field merges ``data``'s keys into the instance's, not the class's)."""
    if not isinstance(data, Mapping):
        raise ValueError(f"{where} must be a mapping, got {data!r}")
    check_strict_bools(cls if isinstance(cls, type) else type(cls), data, where)
    try:
        node = OmegaConf.merge(OmegaConf.structured(cls), dict(data))
        check_finite(cls, OmegaConf.to_container(node, resolve=True), where)
        return OmegaConf.to_object(node)  # type: ignore[return-value]
    except OmegaConfBaseException as err:
        raise ValueError(describe_config_error(err, where)) from None


def check_finite(cls: type, data: Mapping[str, Any], where: str) -> None:
    """Refuse NaN and +-inf anywhere in ``data`` (``cls``'s values: numbers, lists and mappings of them, nested
    dataclass fields), except in a field declared :data:`NONFINITE_OK`: a NaN reward weight or an infinite threshold
    would only show up as NaN losses or an env that never ends, long after the start."""
    cls = cls if isinstance(cls, type) else type(cls)  # an instance stands for its class
    fields = {f.name: f for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else {}
    for key, value in data.items():
        field = fields.get(key)
        if field is not None and field.metadata.get(NONFINITE_OK):
            continue
        name = f"{where}.{key}"
        hint = field_type(cls, key)
        if dataclasses.is_dataclass(hint) and isinstance(value, Mapping):
            check_finite(hint, value, name)
            continue
        stack = [(name, value)]
        while stack:  # lists and mappings of numbers, first to last
            name, value = stack.pop(0)
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError(f"invalid value for {name}: {value} (expected a finite number)")
            if isinstance(value, Mapping):
                stack += [(f"{name}.{k}", v) for k, v in value.items()]
            elif isinstance(value, (list, tuple)):
                stack += [(f"{name}[{i}]", v) for i, v in enumerate(value)]


def describe_type(hint: Any) -> str:
    """A type annotation in words: what a config value of that field may be."""
    if hint is Any or hint is typing.Any:
        return "any value"
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        words = [describe_type(a) for a in args if a is not type(None)]
        if type(None) in args:
            words.append("null")
        return " or ".join(words)
    if origin is list:
        return f"a list of {_plural(args[0])}" if args else "a list"
    if origin is dict:
        return f"a mapping of names to {_plural(args[1])}" if args else "a mapping"
    if dataclasses.is_dataclass(hint):
        return f"a mapping of {hint.__name__} keys"
    return {bool: "true or false", int: "an integer", float: "a number", str: "a string"}.get(hint, str(hint))


def _plural(hint: Any) -> str:
    return {bool: "booleans", int: "integers", float: "numbers", str: "strings"}.get(hint, describe_type(hint))


def field_type(cls: type, key: str) -> Any:
    """The annotation of field ``key`` of dataclass ``cls`` (None if there is none)."""
    if not dataclasses.is_dataclass(cls):
        return None
    try:
        return typing.get_type_hints(cls).get(key)
    except (NameError, TypeError):
        return None


def describe_config_error(err: Any, where: str = "", value: Any = NO_VALUE) -> str:
    """One line for an OmegaConf error: the full key, the refused value (``value`` when the caller knows it: OmegaConf's
    errors do not keep it) and what is allowed."""
    key = str(getattr(err, "full_key", "") or "")
    full = f"{where}.{key}" if where and key else (key or where)
    obj = getattr(err, "object_type", None)
    if isinstance(err, (ConfigKeyError, ConfigAttributeError)):
        known = sorted(f.name for f in dataclasses.fields(obj)) if dataclasses.is_dataclass(obj) else []
        return f"unknown key {full}" + (f"; the keys there are: {', '.join(known)}" if known else "")
    hint = field_type(obj, str(getattr(err, "key", "")))
    if hint is None:  # an element of a typed list or dict: its element type
        ref_args = typing.get_args(getattr(err, "ref_type", None))
        if ref_args:
            hint = ref_args[-1]
    allowed = f" (expected {describe_type(hint)})" if hint is not None else ""
    if value is NO_VALUE:
        m = re.match(r"Value '(.*)' (?:of type|is not)", str(err).splitlines()[0])
        if m is None:
            return f"invalid value for {full}: {str(err).splitlines()[0]}{allowed}"
        value = m.group(1)
    return f"invalid value for {full}: {value!r}{allowed}"


def check_strict_bools(cls: type, data: Mapping[str, Any], where: str) -> None:
    """Refuse a non-bool value for a bool field (OmegaConf would read 'no', 'off' or 0 as false), in nested dataclass
    fields too; other types are OmegaConf's to check."""
    for key, value in data.items():
        hint = field_type(cls, key)
        if hint is bool and not isinstance(value, bool):
            raise ValueError(f"invalid value for {where}.{key}: {value!r} (expected true or false)")
        if dataclasses.is_dataclass(hint) and isinstance(value, Mapping):
            check_strict_bools(hint, value, f"{where}.{key}")


def check_fields(cfg: Any, prefix: str, rules: Iterable[tuple[Sequence[str], Callable[[Any], Any], str]]) -> None:
    """Range checks of a config dataclass's fields (each layer's ``validate`` / ``__post_init__``). ``rules``: ``(field
    names, test, what is allowed)``, a name may be dotted (``push.interval_s``: a nested dataclass's field); the first
    failing field raises ValueError ``<prefix><name> must be <allowed>, got <value>``."""
    for names, ok, allowed in rules:
        for name in names:
            value = operator.attrgetter(name)(cfg)
            if not ok(value):
                raise ValueError(f"{prefix}{name} must be {allowed}, got {value!r}")


def is_low_high(value: Sequence[float], lo: float = -math.inf) -> bool:
    """``value`` is a [low, high] pair with lo <= low <= high (NaN fails)."""
    return len(value) == 2 and lo <= value[0] <= value[1]


def check_file(path: str | os.PathLike, key: str, expected: str) -> None:
    """``path`` (``~`` expanded) is a file; else ValueError ``<key>=<path>: ...`` saying that it does not exist or is a
    directory, and what ``key`` expects."""
    p = Path(path).expanduser()
    if not p.is_file():
        what = "a directory, not a file" if p.is_dir() else "no such file"
        raise ValueError(f"{key}={path}: {what} (expected {expected})")

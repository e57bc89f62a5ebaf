"""Plain mappings (Hydra/YAML sections) into typed config dataclasses.

Shared by every layer's config: an unknown key is an error naming where it
was, and nested dataclass fields are built from nested mappings.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, TypeVar

T = TypeVar("T")


def build_dataclass(cls: type[T], data: Mapping[str, Any], where: str) -> T:
    """``cls(**data)`` with nested dataclass fields built recursively; unknown keys raise ValueError."""
    if not isinstance(data, Mapping):
        raise ValueError(f"{where} must be a mapping, got {data!r}")
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}; known keys: {sorted(known)}")
    defaults = cls()
    kwargs = {}
    for name, value in data.items():
        current = getattr(defaults, name)
        if dataclasses.is_dataclass(current) and value is not None:
            kwargs[name] = build_dataclass(type(current), value, f"{where}.{name}")
        else:
            kwargs[name] = value
    return cls(**kwargs)

"""Checks of the benchmarks' command lines: a bad value is a usage error naming the flag (exit 2) before any env is
built or any training starts, not a traceback from deep inside a run."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path

from unilab.paths import check_writable
from unilab.sim import cpu


def at_least(low: int) -> Callable[[str], int]:
    """An integer option ``>= low``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer >= {low}, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"expected an integer >= {low}, got {value}")
        return value

    return parse


def integers_at_least(low: int) -> Callable[[str], list[int]]:
    """A comma list of integers, each ``>= low``."""
    one = at_least(low)

    def parse(text: str) -> list[int]:
        return [one(part.strip()) for part in text.split(",")]

    return parse


def cpu_list(text: str) -> list[int]:
    """A CPU list (``0-3,8``) of CPUs this process may use (``taskset`` / cgroup cpusets count)."""
    try:
        ids = cpu.parse_cpu_ids(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    usable = cpu.usable_cpus()
    if not ids or (outside := sorted(set(ids) - set(usable))):
        raise argparse.ArgumentTypeError(f"{text!r} names CPUs {outside if ids else '(none)'} outside the usable "
                                         f"set {usable}")
    return ids


def usage_error(args: argparse.Namespace, bounds: Sequence[tuple[str, float | None, float, bool]]) -> str | None:
    """The first flag out of its range (``(flag, value, low, strict)``; a None value is unset) or a pass-through
    override that is not KEY=VALUE, as a message; None when all is well."""
    for flag, value, low, strict in bounds:
        if value is not None and not (value > low if strict else value >= low):  # NaN fails too
            return f"{flag} must be {'>' if strict else '>='} {low:g}, got {value}"
    bad = [o for o in args.overrides if "=" not in o]
    return f"overrides must be KEY=VALUE, got {bad}" if bad else None


def unwritable(*paths: Path) -> str | None:
    """Why a report file cannot be written (checked before the trainings, not after them), or None."""
    try:
        for path in paths:
            check_writable(path, "report")
    except OSError as err:
        return str(err)
    return None

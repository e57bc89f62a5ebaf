"""Option types of the benchmarks' command lines: a bad value is argparse's usage error naming the flag (exit 2),
before any env is built, not a traceback from deep inside a run."""

from __future__ import annotations

import argparse
from collections.abc import Callable

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

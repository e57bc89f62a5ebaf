"""The command-line entry points."""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from typing import Any

from unilab.gl_env import gl_disabled
from unilab.runtime import console
from unilab.runtime.signals import StopRequested


def run_cli(prog: str, main: Callable[..., int], *args: Any, interrupted: str = "interrupted") -> int:
    """``main(*args)`` with console output that cannot be written diverted rather than raised (``console.guard``: a
    closed pipe or a full disk must not end the work) and under ``gl_disabled`` (before mujoco is imported: a MUJOCO_GL
    that cannot load here must not kill the import; videos render in a subprocess with a probed backend, the user's
    first); Ctrl-C: exit 130, a stop signal that ``main`` turned into :class:`StopRequested` (SIGTERM, SIGHUP): one
    line naming it, exit 128 + its number."""
    console.guard(prog)
    with gl_disabled():
        try:
            return main(*args)
        except KeyboardInterrupt as err:  # one line, not a traceback from wherever the command was
            if isinstance(err, StopRequested):
                print(f"\n{prog}: {signal.Signals(err.signum).name}: {interrupted}", file=sys.stderr, flush=True)
                return 128 + err.signum
            print(f"\n{prog}: {interrupted}", file=sys.stderr, flush=True)
            return 130

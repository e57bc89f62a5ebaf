"""Console output that outlives its reader.

stdout and stderr may stop taking writes while a command runs: the reader of a pipe went away (``| head``, a ``tee``
or log shipper that died, a closed ``less``), the disk is full (``> /dev/full``), the terminal hung up. Python then
raises ``BrokenPipeError`` / ``OSError`` from whichever ``print`` met it, which would end a training run far from its
last checkpoint, or an evaluation before its JSON. :func:`guard` wraps both streams so that the first failed write
sends that stream's file descriptor to the run's log file (:func:`divert_to`) or to /dev/null from then on, notes it
once on stderr (if stderr still works) and at that point of the log file, and the command goes on as if nothing
happened. Processes started later inherit the new descriptor.

No torch, numpy or mujoco here: every entry point installs it first.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, TextIO

STREAMS = {1: "stdout", 2: "stderr"}


class _State:
    """What the guarded streams of this process share."""

    def __init__(self) -> None:
        self.prog = "unilab"
        self.note = True
        self.later: str | None = None
        """Where output will go once :func:`divert_to` is called (for the note of a failure before that)."""
        self.log_path: Path | None = None
        self.broken: dict[int, str] = {}
        """File descriptor -> why its writes failed (the strerror), for each stream diverted so far."""
        self.lock = threading.RLock()


_state = _State()


class GuardedStream:
    """A text stream whose failed writes divert its file descriptor (see module docs); everything else is the wrapped
    stream's."""

    def __init__(self, stream: TextIO, fd: int):
        self._stream = stream
        self._fd = fd
        self._pending = ""
        """What a line-buffered stream holds since its last newline: a failed write loses it with the text."""

    def write(self, text: str) -> int:
        try:
            n = self._stream.write(text)
        except (OSError, ValueError) as err:  # ValueError: the stream was closed under us
            _divert(self._fd, err)
            lost, self._pending = self._pending + text, ""
            with contextlib.suppress(OSError, ValueError):  # to the new target
                self._stream.write(lost)
                self._stream.flush()
            return len(text)
        if getattr(self._stream, "line_buffering", False):
            self._pending = (self._pending + text).rpartition("\n")[2]
        return n

    def flush(self) -> None:
        try:
            self._stream.flush()
        except (OSError, ValueError) as err:
            _divert(self._fd, err)
            with contextlib.suppress(OSError, ValueError):
                self._stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def guard(prog: str = "unilab", note: bool = True, later: str | None = None) -> None:
    """Wrap ``sys.stdout`` and ``sys.stderr`` (idempotent; a second call updates the settings); ``prog`` names the
    command in the note, ``note`` False diverts without a word (a child process whose parent already says it),
    ``later`` says where the output will go once :func:`divert_to` names the file."""
    _state.prog, _state.note, _state.later = prog, note, later
    for fd, name in STREAMS.items():
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, GuardedStream):
            try:
                if stream.fileno() != fd:
                    continue  # already redirected in-process (a test's capture): not ours to divert
            except (OSError, ValueError, AttributeError):
                continue
            setattr(sys, name, GuardedStream(stream, fd))


def divert_to(path: str | os.PathLike) -> None:
    """Where console output goes once a stream fails: ``path`` (appended to), e.g. a run's ``console.log``. A stream
    that already failed goes there now."""
    with _state.lock:
        _state.log_path = Path(path)
        for fd, reason in list(_state.broken.items()):
            _point(fd, _state.log_path)
            _log_note(f"{STREAMS[fd]} could not be written ({reason}) before this run's directory existed; "
                      "the console output from here on follows")


def _divert(fd: int, err: BaseException) -> None:
    with _state.lock:
        if fd in _state.broken:
            return
        reason = getattr(err, "strerror", None) or type(err).__name__
        _state.broken[fd] = reason
        target = _state.log_path
        if target is not None and not _point(fd, target):
            target = None
        if target is None:
            _point(fd, Path(os.devnull))
        where = (f"goes to {target} from here on" if target is not None
                 else f"is dropped, and goes to {_state.later} once that exists" if _state.later
                 else "is dropped from here on")
        message = f"{_state.prog}: {STREAMS[fd]} cannot be written ({reason}); its output {where}"
        if target is not None:
            _log_note(f"{STREAMS[fd]} could not be written ({reason}); the console output from here on follows")
        if _state.note and fd != 2 and 2 not in _state.broken:
            try:  # straight to the descriptor: stderr's own stream may be mid-write
                os.write(2, (message + "\n").encode())
            except OSError as err2:
                _divert(2, err2)


def _point(fd: int, path: Path) -> bool:
    """Make ``fd`` write to ``path`` (appended); False when it cannot be opened."""
    try:
        target = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError:
        return False
    try:
        os.dup2(target, fd)
    finally:
        os.close(target)
    return True


def _log_note(text: str) -> None:
    if _state.log_path is None:
        return
    with contextlib.suppress(OSError), open(_state.log_path, "a") as f:
        f.write(f"{_state.prog}: {time.strftime('%Y-%m-%d %H:%M:%S')}: {text}\n")

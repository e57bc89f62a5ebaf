"""Keep the user's ``MUJOCO_GL`` away from processes that never render.

``import mujoco`` reads ``MUJOCO_GL`` once and loads that OpenGL layer at once; a backend that cannot load here
(``osmesa`` without libOSMesa, an unknown name) makes the import itself fail, before any rendering. Training (and its
spawned collector) never renders, and ``play`` renders in a subprocess with a probed backend (``unilab.render.video``).
So the ``train`` and ``play`` entry points run inside ``gl_disabled()`` before anything imports mujoco: it sets
``MUJOCO_GL=disable`` (no OpenGL layer at all, inherited by spawned children) and remembers the user's value, which
``user_mujoco_gl()`` hands to the video code as its first choice.

This module must not import mujoco.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

DISABLED = "disable"
# values with which mujoco loads no OpenGL layer (mujoco/rendering/classic/gl_context.py)
_DISABLED_VALUES = ("disable", "disabled", "off", "false", "0")

_UNSET = object()
_user_gl: object = _UNSET  # the user's MUJOCO_GL before disable_gl(); _UNSET: not called


def _normalise(value: str | None) -> str | None:
    value = (value or "").strip().lower()
    return value if value and value not in _DISABLED_VALUES else None


def disable_gl() -> None:
    """Make this process (and its children) import mujoco without OpenGL; call it before anything imports mujoco.

    Remembers the user's ``MUJOCO_GL`` (the first call's), sets ``MUJOCO_GL=disable`` and drops ``PYOPENGL_PLATFORM``
    when it names the same backend. If mujoco is already imported its OpenGL layer is chosen; the environment is still
    scrubbed for child processes.
    """
    global _user_gl
    current = os.environ.get("MUJOCO_GL")
    if _user_gl is _UNSET:
        _user_gl = _normalise(current)
    pyopengl = os.environ.get("PYOPENGL_PLATFORM")
    if pyopengl is not None and current is not None and pyopengl.strip().lower() == current.strip().lower():
        del os.environ["PYOPENGL_PLATFORM"]
    os.environ["MUJOCO_GL"] = DISABLED


def user_mujoco_gl() -> str | None:
    """The backend the user asked for with ``MUJOCO_GL`` (lower case; from before ``disable_gl()`` once called), or
    None when unset, empty or one of mujoco's "disable" values."""
    return _normalise(os.environ.get("MUJOCO_GL")) if _user_gl is _UNSET else _user_gl  # type: ignore[return-value]


@contextmanager
def gl_disabled() -> Iterator[None]:
    """``disable_gl()`` for the block, then the caller's environment back: an entry point's ``main`` runs in it, so
    calling ``main`` in-process (tests, notebooks) leaves no ``MUJOCO_GL=disable`` behind."""
    global _user_gl
    saved_env = {k: os.environ.get(k) for k in ("MUJOCO_GL", "PYOPENGL_PLATFORM")}
    saved_user = _user_gl
    disable_gl()
    try:
        yield
    finally:
        _user_gl = saved_user
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

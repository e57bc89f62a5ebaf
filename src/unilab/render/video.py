"""Offscreen rendering of MuJoCo states to mp4 on headless machines.

MuJoCo's Python package picks its OpenGL layer from ``MUJOCO_GL`` once, when
``mujoco`` is first imported; a missing library can even make that import
fail. So this module never imports ``mujoco`` at import time, and
``select_gl_backend`` probes each candidate in a short-lived subprocess
(about a second) rather than in this process. ``render_states`` then renders
in this process when its OpenGL layer already is the selected backend (the
caller set ``MUJOCO_GL`` before importing mujoco), and otherwise in a fresh
Python subprocess started with that backend, the model passed as MJB.

The mp4 is encoded by the ffmpeg binary bundled in the imageio-ffmpeg wheel
(or the one ``IMAGEIO_FFMPEG_EXE`` names), never a separate system download.
"""

from __future__ import annotations

import argparse
import copy
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from unilab.gl_env import user_mujoco_gl

if TYPE_CHECKING:
    import mujoco

# tried in this order when MUJOCO_GL is unset: EGL is the fast path on GPUs
# and also runs on CPU through Mesa (libEGL_mesa + llvmpipe); OSMesa is the
# pure-software fallback
HEADLESS_BACKENDS = ("egl", "osmesa")
DEFAULT_TRACK_BODY = "pelvis"
_PROBE_TIMEOUT_S = 60.0

_INSTALL_HINT = (
    "Install an offscreen OpenGL library, e.g. on Debian/Ubuntu "
    "`apt-get install libegl-mesa0 libegl1` (EGL; on NVIDIA GPUs the driver's EGL works too) "
    "or `apt-get install libosmesa6` (OSMesa), then retry; "
    "or set MUJOCO_GL to a backend that works on this machine."
)

_PROBE_CODE = """
import mujoco
m = mujoco.MjModel.from_xml_string('<mujoco><worldbody><geom size="1"/></worldbody></mujoco>')
d = mujoco.MjData(m)
mujoco.mj_forward(m, d)
r = mujoco.Renderer(m, 16, 16)
try:
    r.update_scene(d)
    px = r.render()
finally:
    r.close()
assert px.shape == (16, 16, 3), px.shape
"""


class RenderUnavailable(RuntimeError):
    """No OpenGL backend can create a MuJoCo offscreen renderer here."""


def _child_env(backend: str) -> dict[str, str]:
    """Environment of a subprocess that uses ``backend`` and can import unilab."""
    env = dict(os.environ)
    env["MUJOCO_GL"] = backend
    # PyOpenGL must agree with MuJoCo's choice; mujoco sets it when unset
    env.pop("PYOPENGL_PLATFORM", None)
    if backend in HEADLESS_BACKENDS:
        env["PYOPENGL_PLATFORM"] = backend
    src = str(Path(__file__).resolve().parents[2])  # the directory holding unilab/
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p)
    return env


def probe_gl_backend(backend: str, timeout: float = _PROBE_TIMEOUT_S) -> str | None:
    """Try ``backend`` in a subprocess: None if it renders, else the error text."""
    try:
        res = subprocess.run(
            [sys.executable, "-c", _PROBE_CODE],
            env=_child_env(backend),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return f"probe timed out after {timeout:.0f} s"
    if res.returncode == 0:
        return None
    lines = [ln for ln in res.stderr.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else f"probe exited with code {res.returncode}"


def select_gl_backend() -> str:
    """The OpenGL backend for offscreen rendering, exported as ``MUJOCO_GL``.

    The user's ``MUJOCO_GL`` (see ``unilab.gl_env.user_mujoco_gl``: the value
    from before the entry point disabled OpenGL, else the environment's) is
    probed first; if it cannot create a renderer here (``glfw`` without a
    display, ``osmesa`` without libOSMesa, a name mujoco does not know) a
    one-line notice goes to stderr and ``egl`` then ``osmesa`` are probed.
    Probes run in subprocesses. The first backend that creates a
    ``mujoco.Renderer`` is written to ``os.environ["MUJOCO_GL"]`` (which takes
    effect in this process only if mujoco has not been imported yet, and in
    every subprocess) and returned.

    Raises:
        RenderUnavailable: no candidate works; the message says what to install.
    """
    user = user_mujoco_gl()
    candidates = ([user] if user else []) + [b for b in HEADLESS_BACKENDS if b != user]
    errors = {}
    for backend in candidates:
        err = probe_gl_backend(backend)
        if err is None:
            if user and backend != user:
                print(
                    f"unilab: MUJOCO_GL={user} does not work here ({errors[user]}); rendering with MUJOCO_GL={backend}",
                    file=sys.stderr,
                    flush=True,
                )
            os.environ["MUJOCO_GL"] = backend
            return backend
        errors[backend] = err
    tried = "; ".join(f"MUJOCO_GL={b}: {e}" for b, e in errors.items())
    raise RenderUnavailable(f"no offscreen OpenGL backend works ({tried}). {_INSTALL_HINT}")


def _loaded_gl_backend() -> str | None:
    """Backend of this process's mujoco OpenGL layer; None if not imported yet."""
    if "mujoco" not in sys.modules:
        return None
    import mujoco  # noqa: PLC0415 - mujoco picks its GL layer at first import (see above)

    # mujoco exports the context class of the backend it loaded, e.g.
    # mujoco.egl.GLContext; a placeholder lives in gl_context when it failed
    module = getattr(getattr(mujoco, "GLContext", None), "__module__", "") or ""
    name = module.rsplit(".", 1)[-1]
    return name if name in ("egl", "osmesa", "glfw", "cgl", "wgl") else ""


def _track_body_id(model: mujoco.MjModel, track_body: str | None) -> int | None:
    """Body id to follow; the default name falls back to the first body."""
    import mujoco  # noqa: PLC0415 - mujoco picks its GL layer at first import (see above)

    if track_body is None:
        return None
    bid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, track_body)
    if bid >= 0:
        return bid
    if track_body == DEFAULT_TRACK_BODY and model.nbody > 1:
        return 1  # the first body below the world
    names = [model.body(i).name for i in range(model.nbody)]
    raise ValueError(f"track_body {track_body!r} is not a body of the model (bodies: {names})")


def _check_inputs(
        model: mujoco.MjModel, qpos: np.ndarray, path: Path, fps: float, width: int, height: int) -> np.ndarray:
    qpos = np.asarray(qpos, dtype=np.float64)
    if qpos.ndim != 2 or qpos.shape[1] != model.nq:
        raise ValueError(f"qpos must have shape (T, nq={model.nq}), got {qpos.shape}")
    if qpos.shape[0] == 0:
        raise ValueError("qpos holds no frames (T == 0)")
    if not np.all(np.isfinite(qpos)):
        bad = np.flatnonzero(~np.all(np.isfinite(qpos), axis=1))
        raise ValueError(f"qpos has non-finite values in frames {bad[:10].tolist()}")
    if path.suffix.lower() != ".mp4":
        raise ValueError(f"video path must end in .mp4, got {path}")
    if not fps > 0:
        raise ValueError(f"fps must be > 0, got {fps}")
    for name, v in (("width", width), ("height", height)):
        # yuv420p (what players expect) needs even sizes
        if not isinstance(v, (int, np.integer)) or v <= 0 or v % 2:
            raise ValueError(f"{name} must be a positive even int, got {v!r}")
    return np.ascontiguousarray(qpos)


def _render_here(
    model: mujoco.MjModel,
    qpos: np.ndarray,
    path: Path,
    fps: float,
    width: int,
    height: int,
    track_body: str | None,
    camera_distance: float,
    camera_azimuth: float,
    camera_elevation: float,
) -> Path:
    """Render and encode in this process (its OpenGL layer must work)."""
    import imageio_ffmpeg  # noqa: PLC0415 - lazy: only to encode
    import mujoco  # noqa: PLC0415 - mujoco picks its GL layer at first import (see above)

    if model.vis.global_.offwidth < width or model.vis.global_.offheight < height:
        model = copy.copy(model)  # grow the offscreen buffer without touching the caller's model
        model.vis.global_.offwidth = max(model.vis.global_.offwidth, width)
        model.vis.global_.offheight = max(model.vis.global_.offheight, height)
    body_id = _track_body_id(model, track_body)
    data = mujoco.MjData(model)
    cam = mujoco.MjvCamera()
    if body_id is None:
        mujoco.mjv_defaultFreeCamera(model, cam)
    else:
        cam.type = mujoco.mjtCamera.mjCAMERA_TRACKING
        cam.trackbodyid = body_id
        cam.distance = camera_distance
        cam.azimuth = camera_azimuth
        cam.elevation = camera_elevation

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.partial.mp4")
    writer = imageio_ffmpeg.write_frames(
        str(tmp),
        (width, height),
        fps=fps,
        codec="libx264",
        pix_fmt_out="yuv420p",
        macro_block_size=1,  # sizes are checked even; no silent resize
        ffmpeg_log_level="error",
        output_params=["-f", "mp4"],
    )
    renderer = mujoco.Renderer(model, height, width)
    try:
        writer.send(None)  # start ffmpeg
        for q in qpos:
            data.qpos[:] = q
            mujoco.mj_forward(model, data)
            renderer.update_scene(data, cam)
            writer.send(np.ascontiguousarray(renderer.render()))
        writer.close()
        os.replace(tmp, path)
    except BaseException:
        writer.close()
        tmp.unlink(missing_ok=True)
        raise
    finally:
        # explicit close: left to the garbage collector at interpreter
        # shutdown, the GL context's teardown prints a ctypes traceback
        renderer.close()
    return path


def _render_in_subprocess(model: mujoco.MjModel, qpos: np.ndarray, path: Path, backend: str, **kw) -> Path:
    """Render in a fresh Python process whose mujoco loads ``backend``."""
    import mujoco  # noqa: PLC0415 - mujoco picks its GL layer at first import (see above)

    with tempfile.TemporaryDirectory(prefix="unilab_render_") as td:
        mjb = Path(td) / "model.mjb"
        qfile = Path(td) / "qpos.npy"
        mujoco.mj_saveModel(model, str(mjb), None)
        np.save(qfile, qpos)
        args = [
            "--model", str(mjb), "--qpos", str(qfile), "--out", str(path),
            "--fps", repr(kw["fps"]), "--width", str(kw["width"]), "--height", str(kw["height"]),
            "--camera-distance", repr(kw["camera_distance"]),
            "--camera-azimuth", repr(kw["camera_azimuth"]),
            "--camera-elevation", repr(kw["camera_elevation"]),
        ]  # fmt: skip
        if kw["track_body"] is not None:
            args += ["--track-body", kw["track_body"]]
        code = "import sys; from unilab.render.video import _worker_main; _worker_main(sys.argv[1:])"
        res = subprocess.run(
            [sys.executable, "-c", code, *args], env=_child_env(backend), capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(
            f"rendering with MUJOCO_GL={backend} failed (exit code {res.returncode}):\n{res.stderr.strip()[-4000:]}")
    return path


def render_states(
    model: mujoco.MjModel,
    qpos: np.ndarray,
    path: str | Path,
    fps: float = 50,
    width: int = 640,
    height: int = 480,
    track_body: str | None = DEFAULT_TRACK_BODY,
    camera_distance: float = 3.0,
    camera_azimuth: float = 90.0,
    camera_elevation: float = -15.0,
) -> Path:
    """Render each row of ``qpos`` (T, nq) and write an mp4 to ``path``.

    Each frame sets ``qpos`` into an MjData, runs ``mj_forward`` and renders
    from a tracking camera that follows ``track_body`` (``"pelvis"`` by
    default, falling back to the first body when the model has no pelvis;
    None: MuJoCo's default free camera). The file is written to a temporary
    name and renamed, so ``path`` is either complete or absent.

    Raises:
        ValueError: bad shapes, sizes, path suffix or body name.
        RenderUnavailable: no offscreen OpenGL backend works (see
            ``select_gl_backend``).
        RuntimeError: rendering in a subprocess failed (its stderr is included).
    """
    path = Path(path)
    qpos = _check_inputs(model, qpos, path, fps, width, height)
    _track_body_id(model, track_body)  # a bad name fails here, before any process starts
    kw = dict(
        fps=float(fps),
        width=int(width),
        height=int(height),
        track_body=track_body,
        camera_distance=float(camera_distance),
        camera_azimuth=float(camera_azimuth),
        camera_elevation=float(camera_elevation),
    )
    backend = select_gl_backend()
    if _loaded_gl_backend() == backend:
        return _render_here(model, qpos, path, **kw)
    return _render_in_subprocess(model, qpos, path, backend, **kw)


def _worker_main(argv: list[str]) -> None:
    """Entry point of the rendering subprocess (``MUJOCO_GL`` already set)."""
    p = argparse.ArgumentParser(description="render qpos frames of an MJB model to mp4")
    p.add_argument("--model", required=True)
    p.add_argument("--qpos", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--fps", type=float, required=True)
    p.add_argument("--width", type=int, required=True)
    p.add_argument("--height", type=int, required=True)
    p.add_argument("--track-body", default=None)
    p.add_argument("--camera-distance", type=float, required=True)
    p.add_argument("--camera-azimuth", type=float, required=True)
    p.add_argument("--camera-elevation", type=float, required=True)
    a = p.parse_args(argv)
    import mujoco  # noqa: PLC0415 - mujoco picks its GL layer at first import (see above)

    model = mujoco.MjModel.from_binary_path(a.model)
    _render_here(
        model,
        np.load(a.qpos),
        Path(a.out),
        fps=a.fps,
        width=a.width,
        height=a.height,
        track_body=a.track_body,
        camera_distance=a.camera_distance,
        camera_azimuth=a.camera_azimuth,
        camera_elevation=a.camera_elevation,
    )

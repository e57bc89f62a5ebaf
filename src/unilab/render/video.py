"""Offscreen rendering of MuJoCo states to mp4 on headless machines.

MuJoCo picks its OpenGL layer from ``MUJOCO_GL`` once, at its first import, and a missing library can make that
import fail: so this module never imports ``mujoco`` at import time, backends are probed in short-lived subprocesses
(about a second each), and ``render_states`` renders in a fresh subprocess (model passed as MJB) unless this
process's layer already is the selected backend.

The ghost of a second pose (play: the reference motion) is not a second render pass: its geoms are appended to the
frame's scene (``mjv_addGeoms``), shadowless, and only the primitive (non-mesh) ones, for the G1 its collision
capsules: its visual meshes hold ~440k triangles, and drawing them twice doubles the CPU (Mesa llvmpipe) render time.
A model without primitive geoms gets its visible meshes. Text is rasterised onto the pixels with Pillow; the mp4 is
encoded by the imageio-ffmpeg wheel's ffmpeg (or ``IMAGEIO_FFMPEG_EXE``'s), never a separate system download.
"""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from unilab.gl_env import user_mujoco_gl

if TYPE_CHECKING:
    import mujoco

# tried in this order: EGL is the fast path on GPUs and also runs on CPU through Mesa (libEGL_mesa + llvmpipe);
# OSMesa is the pure-software fallback
HEADLESS_BACKENDS = ("egl", "osmesa")
DEFAULT_TRACK_BODY = "pelvis"
GHOST_MODES = ("overlay", "side", "off")
"""overlay: where the reference is (on the robot when it tracks well); side: shifted sideways by
``GHOST_SIDE_OFFSET_M`` (view centred between both); off: none."""
GHOST_RGBA = (0.3, 0.75, 1.0, 0.45)
GHOST_SIDE_OFFSET_M = 1.0
ARROW_COLORS = ((0.15, 0.85, 0.15, 1.0), (0.15, 0.45, 1.0, 1.0), (1.0, 0.6, 0.1, 1.0))
"""RGBA of a frame's arrows, in order (a task's first arrow green, e.g. a command; its second blue)."""
_HIDDEN_GROUP = 5  # a geom group the ghost's MjvOption does not draw
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
        res = subprocess.run([sys.executable, "-c", _PROBE_CODE], env=_child_env(backend), capture_output=True,
                             text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"probe timed out after {timeout:.0f} s"
    if res.returncode == 0:
        return None
    lines = [ln for ln in res.stderr.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else f"probe exited with code {res.returncode}"


def select_gl_backend() -> str:
    """The first backend, of the user's ``MUJOCO_GL`` (``unilab.gl_env.user_mujoco_gl``) then ``egl`` and ``osmesa``,
    that creates a ``mujoco.Renderer`` in a subprocess, exported as ``os.environ["MUJOCO_GL"]`` (effective in this
    process only if mujoco is not imported yet). A user's backend that fails (``glfw`` without a display, a name mujoco
    does not know) gets a one-line notice on stderr; RenderUnavailable, saying what to install, if none works."""
    user = user_mujoco_gl()
    candidates = ([user] if user else []) + [b for b in HEADLESS_BACKENDS if b != user]
    errors = {}
    for backend in candidates:
        err = probe_gl_backend(backend)
        if err is None:
            if user and backend != user:
                print(f"unilab: MUJOCO_GL={user} does not work here ({errors[user]}); rendering with "
                      f"MUJOCO_GL={backend}", file=sys.stderr, flush=True)
            os.environ["MUJOCO_GL"] = backend
            return backend
        errors[backend] = err
    tried = "; ".join(f"MUJOCO_GL={b}: {e}" for b, e in errors.items())
    raise RenderUnavailable(f"no offscreen OpenGL backend works ({tried}). {_INSTALL_HINT}")


def _loaded_gl_backend() -> str | None:
    """Backend of this process's mujoco OpenGL layer; None if not imported yet."""
    if "mujoco" not in sys.modules:
        return None
    import mujoco  # mujoco picks its GL layer at first import (see above)

    # mujoco exports the context class of the backend it loaded (mujoco.egl.GLContext; gl_context's placeholder if none)
    module = getattr(getattr(mujoco, "GLContext", None), "__module__", "") or ""
    name = module.rsplit(".", 1)[-1]
    return name if name in ("egl", "osmesa", "glfw", "cgl", "wgl") else ""


def _track_body_id(model: mujoco.MjModel, track_body: str | None) -> int | None:
    """Body id to follow; the default name falls back to the first body."""
    import mujoco  # mujoco picks its GL layer at first import (see above)

    if track_body is None:
        return None
    bid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, track_body)
    if bid >= 0:
        return bid
    if track_body == DEFAULT_TRACK_BODY and model.nbody > 1:
        return 1  # the first body below the world
    names = [model.body(i).name for i in range(model.nbody)]
    raise ValueError(f"track_body {track_body!r} is not a body of the model (bodies: {names})")


def _check_inputs(model: mujoco.MjModel, qpos: np.ndarray, path: Path, fps: float, width: int, height: int,
                  ghost_qpos: np.ndarray | None, ghost: str, labels: Sequence[str] | None, arrows: np.ndarray | None
                  ) -> tuple[np.ndarray, np.ndarray | None, list[str] | None, np.ndarray | None]:
    """Validated ``qpos``, ghost poses (None: no ghost), per-frame texts (None: no text) and ``(T, k, 2, 3)`` arrows
    (per frame, ``k`` world-frame (start, end) points; None: none)."""
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
    if ghost not in GHOST_MODES:
        raise ValueError(f"ghost must be one of {GHOST_MODES}, got {ghost!r}")
    if ghost == "off":
        ghost_qpos = None
    if ghost_qpos is not None:
        ghost_qpos = np.ascontiguousarray(ghost_qpos, dtype=np.float64)
        if ghost_qpos.shape != qpos.shape:
            raise ValueError(f"ghost_qpos must have the shape of qpos {qpos.shape}, got {ghost_qpos.shape}")
        if not np.all(np.isfinite(ghost_qpos)):
            raise ValueError("ghost_qpos has non-finite values")
    if labels is not None:
        labels = ["" if t is None else str(t) for t in labels]
        if len(labels) != qpos.shape[0]:
            raise ValueError(f"labels must hold one text per frame ({qpos.shape[0]}), got {len(labels)}")
        if not any(labels):
            labels = None
    if arrows is not None:
        arrows = np.ascontiguousarray(arrows, dtype=np.float64)
        if arrows.ndim != 4 or arrows.shape[0] != qpos.shape[0] or arrows.shape[2:] != (2, 3):
            raise ValueError(f"arrows must have shape (frames={qpos.shape[0]}, k, 2, 3), got {arrows.shape}")
        if not 1 <= arrows.shape[1] <= len(ARROW_COLORS):
            raise ValueError(f"arrows: 1 to {len(ARROW_COLORS)} per frame, got {arrows.shape[1]}")
        if not np.all(np.isfinite(arrows)):
            raise ValueError("arrows has non-finite values")
    return np.ascontiguousarray(qpos), ghost_qpos, labels, arrows


def _add_arrows(scene: mujoco.MjvScene, arrows: np.ndarray) -> None:
    """One arrow geom per (start, end) row, colours :data:`ARROW_COLORS` in order (too short ones: none)."""
    import mujoco  # mujoco picks its GL layer at first import (see above)

    for k, (start, end) in enumerate(arrows):
        if scene.ngeom >= scene.maxgeom or np.linalg.norm(end - start) < 1e-3:
            continue
        g = scene.geoms[scene.ngeom]
        mujoco.mjv_initGeom(g, int(mujoco.mjtGeom.mjGEOM_ARROW), np.zeros(3), np.zeros(3), np.zeros(9),
                            np.asarray(ARROW_COLORS[k], dtype=np.float32))
        mujoco.mjv_connector(g, int(mujoco.mjtGeom.mjGEOM_ARROW), 0.02, start, end)
        g.castshadow = 0
        scene.ngeom += 1


def _ghost_model(model: mujoco.MjModel) -> mujoco.MjModel:
    """A copy of ``model`` whose group 0 holds exactly the ghost's geoms, coloured ``GHOST_RGBA``."""
    import mujoco  # mujoco picks its GL layer at first import (see above)

    gm = copy.copy(model)
    moving = np.asarray(model.body_weldid)[np.asarray(model.geom_bodyid)] != 0
    chosen = moving & (np.asarray(model.geom_type) != int(mujoco.mjtGeom.mjGEOM_MESH))  # primitive geoms
    if not chosen.any():
        chosen = moving & (np.asarray(model.geom_group) < 3)  # mjvOption draws groups 0-2 by default
    gm.geom_group[:] = np.where(chosen, 0, _HIDDEN_GROUP)
    gm.geom_rgba[chosen] = GHOST_RGBA
    gm.geom_matid[chosen] = -1  # the flat ghost colour, not the robot's material
    return gm


class _Ghost:
    """Appends the geoms of a second pose to a rendered scene: translucent, casting no shadow."""

    def __init__(self, model: mujoco.MjModel, mode: str):
        import mujoco  # mujoco picks its GL layer at first import (see above)

        self.model = _ghost_model(model)
        self.data = mujoco.MjData(self.model)
        self.opt = mujoco.MjvOption()
        self.opt.geomgroup[:] = 0
        self.opt.geomgroup[0] = 1
        self.pert = mujoco.MjvPerturb()
        self.side = mode == "side"

    def add(self, scene: mujoco.MjvScene, qpos: np.ndarray) -> None:
        import mujoco  # mujoco picks its GL layer at first import (see above)

        self.data.qpos[:] = qpos
        mujoco.mj_kinematics(self.model, self.data)  # geom poses are all the scene needs
        first = scene.ngeom
        mujoco.mjv_addGeoms(self.model, self.data, self.opt, self.pert, int(mujoco.mjtCatBit.mjCAT_DYNAMIC), scene)
        offset = None
        if self.side:
            # sideways on screen: the camera's right; then centre the view between robot and ghost
            cam = scene.camera[0]
            right = np.cross(cam.forward, cam.up)
            offset = GHOST_SIDE_OFFSET_M * right / max(float(np.linalg.norm(right)), 1e-9)
            for c in scene.camera:
                c.pos[:] += 0.5 * offset
        for i in range(first, scene.ngeom):
            g = scene.geoms[i]
            g.castshadow = 0  # a second shadow would read as a second robot
            g.transparent = 1
            if offset is not None:
                g.pos[:] += offset


class _TextOverlay:
    """Draws a few lines of text in the top-left corner of a frame, on a darkened box."""

    def __init__(self, height: int):
        from PIL import ImageFont  # lazy: only with text

        size = max(9, round(height / 20))
        try:
            self.font = ImageFont.load_default(size=size)
        except (TypeError, OSError, ImportError):  # Pillow < 10.1 or without FreeType: the fixed bitmap font
            self.font = ImageFont.load_default()
        self.margin = max(2, size // 4)

    def draw(self, frame: np.ndarray, text: str) -> np.ndarray:
        if not text:
            return frame
        from PIL import Image, ImageDraw  # lazy: only with text

        m = self.margin
        img = Image.fromarray(frame)
        x0, y0, x1, y1 = ImageDraw.Draw(img).multiline_textbbox((2 * m, 2 * m), text, font=self.font, spacing=m)
        x0, y0 = max(0, x0 - m), max(0, y0 - m)
        box = frame[y0:y1 + m, x0:x1 + m]
        img.paste(Image.fromarray((box * 0.35).astype(np.uint8)), (x0, y0))
        # a Draw made before paste would draw into the buffer paste replaced
        ImageDraw.Draw(img).multiline_text((2 * m, 2 * m), text, font=self.font, fill=(255, 255, 255), spacing=m)
        return np.asarray(img)


def _render_here(model: mujoco.MjModel, qpos: np.ndarray, path: Path, fps: float, width: int, height: int,
                 track_body: str | None, camera_distance: float, camera_azimuth: float, camera_elevation: float,
                 ghost_qpos: np.ndarray | None, ghost: str, labels: Sequence[str] | None, arrows: np.ndarray | None
                 ) -> Path:
    """Render and encode in this process (its OpenGL layer must work)."""
    import imageio_ffmpeg  # lazy: only to encode
    import mujoco  # mujoco picks its GL layer at first import (see above)

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
        cam.distance, cam.azimuth, cam.elevation = camera_distance, camera_azimuth, camera_elevation

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.partial.mp4")
    writer = imageio_ffmpeg.write_frames(str(tmp), (width, height), fps=fps, codec="libx264", pix_fmt_out="yuv420p",
                                         macro_block_size=1,  # sizes are checked even; no silent resize
                                         ffmpeg_log_level="error", output_params=["-f", "mp4"])
    ghost_geoms = _Ghost(model, ghost) if ghost_qpos is not None and ghost != "off" else None
    text = _TextOverlay(height) if labels is not None else None
    renderer = mujoco.Renderer(model, height, width)
    try:
        writer.send(None)  # start ffmpeg
        for k, q in enumerate(qpos):
            data.qpos[:] = q
            mujoco.mj_forward(model, data)
            renderer.update_scene(data, cam)
            if ghost_geoms is not None:
                ghost_geoms.add(renderer.scene, ghost_qpos[k])
            if arrows is not None:
                _add_arrows(renderer.scene, arrows[k])
            frame = renderer.render()
            if text is not None:
                frame = text.draw(frame, labels[k])
            writer.send(np.ascontiguousarray(frame))
        writer.close()
        os.replace(tmp, path)
    except BaseException:
        writer.close()
        tmp.unlink(missing_ok=True)
        raise
    finally:
        # explicit close: left to the garbage collector at shutdown, the GL context's teardown prints a ctypes traceback
        renderer.close()
    return path


def _render_in_subprocess(model: mujoco.MjModel, qpos: np.ndarray, path: Path, backend: str, **kw) -> Path:
    """Render in a fresh Python process whose mujoco loads ``backend``."""
    import mujoco  # mujoco picks its GL layer at first import (see above)

    with tempfile.TemporaryDirectory(prefix="unilab_render_") as td:
        mujoco.mj_saveModel(model, str(Path(td, "model.mjb")), None)
        arrays = {k: kw.pop(k) for k in ("ghost_qpos", "arrows") if kw[k] is not None}
        np.savez(Path(td, "arrays.npz"), qpos=qpos, **arrays)
        Path(td, "options.json").write_text(json.dumps(kw))
        code = "import sys; from unilab.render.video import _worker_main; _worker_main(*sys.argv[1:])"
        proc = subprocess.Popen([sys.executable, "-c", code, td, str(path)], env=_child_env(backend),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            _, stderr = proc.communicate()
        except BaseException:  # Ctrl-C, or SIGTERM turned into SystemExit
            proc.terminate()  # the worker closes ffmpeg and deletes its partial video
            try:
                proc.wait(10.0)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            raise
    if proc.returncode != 0:
        raise RuntimeError(
            f"rendering with MUJOCO_GL={backend} failed (exit code {proc.returncode}):\n{stderr.strip()[-4000:]}")
    return path


def exit_on_sigterm() -> None:
    """SIGTERM raises SystemExit(143) in the main thread, so that ``finally`` / ``except BaseException`` blocks
    (closing ffmpeg, deleting a partial video, stopping a rendering worker) run before the process ends."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


def render_states(model: mujoco.MjModel, qpos: np.ndarray, path: str | Path, fps: float = 50, width: int = 640,
                  height: int = 480, track_body: str | None = DEFAULT_TRACK_BODY, camera_distance: float = 3.0,
                  camera_azimuth: float = 90.0, camera_elevation: float = -15.0, ghost_qpos: np.ndarray | None = None,
                  ghost: str = "overlay", labels: Sequence[str] | None = None, arrows: np.ndarray | None = None
                  ) -> Path:
    """Render each row of ``qpos`` (T, nq) from a camera tracking ``track_body`` (the default falls back to the first
    body; None: MuJoCo's free camera) into an mp4 at ``path``, written under a temporary name and renamed.

    ``ghost_qpos`` (T, nq): a translucent ghost placed by ``ghost`` (:data:`GHOST_MODES`); ``labels``: one text per
    frame (newlines split lines; empty: none) in the top-left corner; ``arrows`` (T, k, 2, 3): ``k`` world-frame
    (start, end) arrows per frame, coloured :data:`ARROW_COLORS` in order (locomotion: command and base velocity).

    Raises ValueError (bad shapes, sizes, path suffix or body name), RenderUnavailable (no offscreen OpenGL backend
    works) or RuntimeError (a rendering subprocess failed; its stderr is included).
    """
    path = Path(path)
    qpos, ghost_qpos, labels, arrows = _check_inputs(model, qpos, path, fps, width, height, ghost_qpos, ghost, labels,
                                                     arrows)
    _track_body_id(model, track_body)  # a bad name fails here, before any process starts
    kw = dict(fps=float(fps), width=int(width), height=int(height), track_body=track_body,
              camera_distance=float(camera_distance), camera_azimuth=float(camera_azimuth),
              camera_elevation=float(camera_elevation), ghost_qpos=ghost_qpos, ghost=ghost, labels=labels,
              arrows=arrows)
    backend = select_gl_backend()
    if _loaded_gl_backend() == backend:
        return _render_here(model, qpos, path, **kw)
    return _render_in_subprocess(model, qpos, path, backend, **kw)


def _worker_main(job: str, out: str) -> None:
    """Entry point of the rendering subprocess (``MUJOCO_GL`` already set): the job folder's model, arrays and
    options (written by :func:`_render_in_subprocess`) to the mp4 ``out``."""
    exit_on_sigterm()
    import mujoco  # mujoco picks its GL layer at first import (see above)

    with np.load(Path(job, "arrays.npz")) as arrays:
        qpos, extra = arrays["qpos"], {k: arrays[k] for k in arrays.files if k != "qpos"}
    kw = json.loads(Path(job, "options.json").read_text())
    _render_here(mujoco.MjModel.from_binary_path(str(Path(job, "model.mjb"))), qpos, Path(out), **kw, **extra)

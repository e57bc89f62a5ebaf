"""Offscreen rendering of MuJoCo states to mp4."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pytest

from unilab.render import video
from unilab.render.video import RenderUnavailable, render_states, select_gl_backend

SRC = str(Path(video.__file__).resolve().parents[2])
W, H = 160, 120


@pytest.fixture(scope="module")
def gl_backend():
    """A working backend, probed once; skips (with the reason) on machines without one."""
    saved = os.environ.get("MUJOCO_GL")
    try:
        return select_gl_backend()
    except RenderUnavailable as e:
        pytest.skip(str(e))
    finally:
        # keep the probe's choice out of other tests' environment
        if saved is None:
            os.environ.pop("MUJOCO_GL", None)
        else:
            os.environ["MUJOCO_GL"] = saved


def _walking_qpos(model, n: int) -> np.ndarray:
    q = np.tile(model.qpos0, (n, 1))
    q[:, 0] = np.linspace(0.0, 1.0, n)  # root moves along x
    q[:, 7:] += np.sin(np.linspace(0, np.pi, n))[:, None] * 0.3  # joints swing
    return q


def _check_video(path: Path, n: int) -> np.ndarray:
    assert path.exists() and path.stat().st_size > 1000
    frames = iio.imread(path)
    assert frames.shape == (n, H, W, 3)
    assert frames.std() > 1.0
    for f in frames:
        assert f.std() > 1.0  # every frame shows something, not a blank buffer
    return frames


def test_render_humanoid_mp4(humanoid, gl_backend, tmp_path, monkeypatch):
    monkeypatch.setenv("MUJOCO_GL", gl_backend)
    out = render_states(humanoid, _walking_qpos(humanoid, 10), tmp_path / "sub" / "play.mp4", fps=25, width=W, height=H)
    assert out == tmp_path / "sub" / "play.mp4"
    frames = _check_video(out, 10)
    assert not np.array_equal(frames[0], frames[-1])  # the pose changes
    assert [p.name for p in out.parent.iterdir()] == ["play.mp4"]  # no temporary left behind


def test_render_in_process_when_backend_loaded_first(gl_backend, tmp_path):
    """MUJOCO_GL set before mujoco is imported: frames are rendered in that process."""
    out = tmp_path / "inproc.mp4"
    code = textwrap.dedent(f"""
        import numpy as np
        import mujoco
        from unilab.assets.builtin import load_humanoid
        from unilab.render import video
        assert video._loaded_gl_backend() == {gl_backend!r}, video._loaded_gl_backend()
        def no_subprocess(*a, **k):
            raise AssertionError("rendered in a subprocess")
        video._render_in_subprocess = no_subprocess
        m = load_humanoid()
        video.render_states(m, np.tile(m.qpos0, (4, 1)), {str(out)!r}, width={W}, height={H}, track_body=None)
    """)
    env = dict(os.environ, MUJOCO_GL=gl_backend, PYTHONPATH=os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]))
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    # renderer.close() was called: no ctypes traceback at interpreter shutdown
    assert "Traceback" not in res.stderr, res.stderr
    _check_video(out, 4)


def test_frame_larger_than_model_buffer(humanoid, gl_backend, tmp_path, monkeypatch):
    monkeypatch.setenv("MUJOCO_GL", gl_backend)
    w = humanoid.vis.global_.offwidth + 64
    out = render_states(humanoid, np.tile(humanoid.qpos0, (2, 1)), tmp_path / "big.mp4", width=w, height=H)
    assert iio.imread(out).shape == (2, H, w, 3)
    assert humanoid.vis.global_.offwidth == w - 64  # the caller's model is unchanged


def test_bad_inputs(humanoid, tmp_path):
    q = np.tile(humanoid.qpos0, (3, 1))
    with pytest.raises(ValueError, match="shape"):
        render_states(humanoid, q[:, :-1], tmp_path / "a.mp4")
    with pytest.raises(ValueError, match="no frames"):
        render_states(humanoid, q[:0], tmp_path / "a.mp4")
    bad = q.copy()
    bad[1, 3] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        render_states(humanoid, bad, tmp_path / "a.mp4")
    with pytest.raises(ValueError, match=r"\.mp4"):
        render_states(humanoid, q, tmp_path / "a.gif")
    with pytest.raises(ValueError, match="width"):
        render_states(humanoid, q, tmp_path / "a.mp4", width=161)
    with pytest.raises(ValueError, match="not a body"):
        render_states(humanoid, q, tmp_path / "a.mp4", track_body="tail")
    assert not any(tmp_path.iterdir())


def test_select_tries_existing_mujoco_gl_first(monkeypatch):
    monkeypatch.setenv("MUJOCO_GL", "OSMesa ")
    tried = []
    monkeypatch.setattr(video, "probe_gl_backend", lambda b: tried.append(b))  # every probe succeeds
    assert select_gl_backend() == "osmesa"
    assert tried == ["osmesa"]


def test_select_probes_in_order_and_exports(monkeypatch):
    monkeypatch.delenv("MUJOCO_GL", raising=False)
    tried = []

    def fake_probe(backend):
        tried.append(backend)
        return None if backend == "osmesa" else "libEGL missing"

    monkeypatch.setattr(video, "probe_gl_backend", fake_probe)
    assert select_gl_backend() == "osmesa"
    assert tried == ["egl", "osmesa"]
    assert os.environ["MUJOCO_GL"] == "osmesa"


def test_select_raises_with_install_hint(monkeypatch):
    monkeypatch.delenv("MUJOCO_GL", raising=False)
    monkeypatch.setattr(video, "probe_gl_backend", lambda b: f"cannot load lib for {b}")
    with pytest.raises(RenderUnavailable) as e:
        select_gl_backend()
    msg = str(e.value)
    assert "cannot load lib for egl" in msg and "cannot load lib for osmesa" in msg
    assert "libegl-mesa0" in msg and "libosmesa6" in msg
    assert "MUJOCO_GL" not in os.environ


def test_probe_reports_failure():
    err = video.probe_gl_backend("no-such-backend")
    assert err is not None and "MUJOCO_GL" in err

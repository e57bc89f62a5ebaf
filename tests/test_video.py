"""Offscreen rendering of MuJoCo states to mp4."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pytest

from unilab.render import video
from unilab.render.video import RenderUnavailable, render_states, select_gl_backend

SRC = str(Path(video.__file__).resolve().parents[2])
W, H = 160, 120


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


# a red box on a free joint over a floor: the robot; the ghost is the same model at another pose
TOKEN_XML = """
<mujoco>
  <worldbody>
    <light pos="0 0 4" dir="0 0 -1"/>
    <geom name="floor" type="plane" size="5 5 0.1" rgba="0.4 0.4 0.4 1"/>
    <body name="base" pos="0 0 0.4">
      <freejoint/>
      <geom type="box" size="0.25 0.25 0.25" rgba="1 0 0 1"/>
    </body>
  </worldbody>
</mujoco>
"""
_CAM = dict(track_body="base", camera_distance=3.0, camera_azimuth=90.0, camera_elevation=-15.0)


def _token_frames(gl_backend, tmp_path, monkeypatch, name, q, **kw) -> np.ndarray:
    import mujoco

    monkeypatch.setenv("MUJOCO_GL", gl_backend)
    m = mujoco.MjModel.from_xml_string(TOKEN_XML)
    out = render_states(m, q, tmp_path / f"{name}.mp4", fps=10, width=W, height=H, **_CAM, **kw)
    return iio.imread(out).astype(np.int16)


def _changed(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pixels that differ clearly (beyond mp4 coding noise), (T, H, W) bool."""
    return np.abs(a - b).max(axis=-1) > 40


def test_ghost_is_drawn_where_the_reference_is(gl_backend, tmp_path, monkeypatch):
    import mujoco

    q = np.tile(mujoco.MjModel.from_xml_string(TOKEN_XML).qpos0, (2, 1))
    ref = q.copy()
    ref[:, 0] += 1.0  # the camera looks along +y, so +x is to the right on screen
    off = _token_frames(gl_backend, tmp_path, monkeypatch, "off", q, ghost_qpos=ref, ghost="off")
    over = _token_frames(gl_backend, tmp_path, monkeypatch, "overlay", q, ghost_qpos=ref, ghost="overlay")
    changed = _changed(over, off)
    right, left = changed[:, :, W // 2 + 8:].sum(), changed[:, :, :W // 2].sum()
    assert right > 0.02 * changed[:, :, W // 2 + 8:].size, right  # a box-sized ghost appeared on the right
    assert left < 0.05 * right, (left, right)  # the robot's half is as it was (no second shadow)
    tint = (over - off)[changed]
    assert tint[:, 2].mean() > tint[:, 0].mean() + 20  # translucent blue over what is behind it

    # side: the same pose, shifted to the right on screen, the view centred between both
    side = _token_frames(gl_backend, tmp_path, monkeypatch, "side", q, ghost_qpos=q, ghost="side")
    blue = (side[..., 2] > side[..., 0] + 40) & ~(off[..., 2] > off[..., 0] + 40)
    cols = np.nonzero(blue)[2]
    assert cols.size > 0.01 * blue.size and cols.mean() > W / 2
    red = (side[..., 0] > side[..., 2] + 80)
    red_off = (off[..., 0] > off[..., 2] + 80)
    assert np.nonzero(red)[2].mean() < np.nonzero(red_off)[2].mean() - 5  # the robot moved left


def test_text_overlay_in_the_top_left(gl_backend, tmp_path, monkeypatch):
    import mujoco

    q = np.tile(mujoco.MjModel.from_xml_string(TOKEN_XML).qpos0, (2, 1))
    plain = _token_frames(gl_backend, tmp_path, monkeypatch, "plain", q, ghost_qpos=q, ghost="off")
    text = _token_frames(gl_backend, tmp_path, monkeypatch, "text", q, labels=["walk1\nframe 0/9", ""])
    changed = _changed(text, plain)
    assert changed[0, :H // 3, :W // 2].sum() > 50  # the label of frame 0
    assert changed[0, H // 2:].sum() == 0 and changed[0, :, 3 * W // 4:].sum() == 0
    assert changed[1].sum() == 0  # an empty label writes nothing


def test_arrows_are_drawn_in_their_colours(gl_backend, tmp_path, monkeypatch):
    import mujoco

    q = np.tile(mujoco.MjModel.from_xml_string(TOKEN_XML).qpos0, (2, 1))
    plain = _token_frames(gl_backend, tmp_path, monkeypatch, "plain", q)
    arrows = np.zeros((2, 2, 2, 3))
    arrows[:, :, 0] = [0.0, 0.0, 1.0]
    arrows[0, 0, 1] = [1.0, 0.0, 1.0]  # frame 0: a green arrow to the right (+x is right on screen)
    arrows[1, 1, 1] = [-1.0, 0.0, 1.0]  # frame 1: a blue arrow to the left; its first one too short to draw
    arrows[1, 0, 1] = [0.0, 0.0, 1.0]
    drawn = _token_frames(gl_backend, tmp_path, monkeypatch, "arrows", q, arrows=arrows)
    changed = _changed(drawn, plain)
    for k, (sign, channel) in enumerate(((1, 1), (-1, 2))):  # right and green, left and blue
        cols = np.nonzero(changed[k])[1]
        assert cols.size > 30, k
        assert sign * (cols.mean() - W / 2) > 5, (k, cols.mean())
        tint = drawn[k][changed[k]]
        assert tint[:, channel].mean() > tint[:, 0].mean() + 20, k
    with pytest.raises(ValueError, match="arrows must have shape"):
        render_states(mujoco.MjModel.from_xml_string(TOKEN_XML), q, tmp_path / "bad.mp4", arrows=arrows[:1])


def test_text_overlay_draws_only_its_box():
    frame = np.full((H, W, 3), 200, dtype=np.uint8)
    drawn = video._TextOverlay(H).draw(frame.copy(), "clip_a\nframe 3/10  body err 12 mm")
    assert drawn.shape == frame.shape and drawn.dtype == np.uint8
    changed = np.any(drawn != frame, axis=-1)
    rows, cols = np.nonzero(changed)
    assert rows.max() < H // 2 and cols.min() < 10  # a two-line box in the top-left
    assert (drawn[changed] < 100).any() and (drawn[changed] > 220).any()  # darkened box, white letters
    assert np.array_equal(video._TextOverlay(H).draw(frame, ""), frame)


def test_ghost_draws_primitive_geoms_of_moving_bodies():
    import mujoco

    hit = '<geom name="hit" type="capsule" size="0.05 0.1" group="3"/>'
    xml = f"""
    <mujoco>
      <asset><mesh name="tet" vertex="0 0 0  0.1 0 0  0 0.1 0  0 0 0.1"/></asset>
      <worldbody>
        <geom name="floor" type="plane" size="1 1 0.1"/>
        <body name="b"><freejoint/>
          <geom name="look" type="mesh" mesh="tet" group="1"/>
          {hit}
        </body>
      </worldbody>
    </mujoco>"""
    m = mujoco.MjModel.from_xml_string(xml)
    gm = video._ghost_model(m)
    drawn = [gm.geom(i).name for i in range(gm.ngeom) if gm.geom_group[i] == 0]
    assert drawn == ["hit"]  # the collision capsule, not the (costly) mesh, not the floor
    np.testing.assert_allclose(gm.geom_rgba[gm.geom("hit").id], video.GHOST_RGBA, rtol=1e-6)
    assert m.geom_group[m.geom("hit").id] == 3  # the caller's model is unchanged
    meshes_only = mujoco.MjModel.from_xml_string(xml.replace(hit, ""))
    gm = video._ghost_model(meshes_only)
    assert [gm.geom(i).name for i in range(gm.ngeom) if gm.geom_group[i] == 0] == ["look"]


def test_ghost_and_label_inputs_are_checked(humanoid, tmp_path):
    q = np.tile(humanoid.qpos0, (3, 1))
    with pytest.raises(ValueError, match="ghost must be one of"):
        render_states(humanoid, q, tmp_path / "a.mp4", ghost_qpos=q, ghost="behind")
    with pytest.raises(ValueError, match="ghost_qpos must have the shape"):
        render_states(humanoid, q, tmp_path / "a.mp4", ghost_qpos=q[:2])
    bad = q.copy()
    bad[0, 0] = np.inf
    with pytest.raises(ValueError, match="ghost_qpos has non-finite"):
        render_states(humanoid, q, tmp_path / "a.mp4", ghost_qpos=bad)
    with pytest.raises(ValueError, match="one text per frame"):
        render_states(humanoid, q, tmp_path / "a.mp4", labels=["a", "b"])
    assert not any(tmp_path.iterdir())


def _processes_naming(text: str) -> list[int]:
    """Pids of live processes whose command line contains ``text``."""
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if text in (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                    pids.append(int(d.name))
            except OSError:
                continue
    return pids


@pytest.mark.parametrize("where", ["in this process", "in a worker"])
def test_a_sigterm_while_rendering_leaves_no_partial_video_and_no_process(where, gl_backend, tmp_path):
    """What `play` does on SIGTERM: ffmpeg is closed and the partial file deleted, by the rendering worker too
    (MUJOCO_GL set before mujoco is imported renders in this process, unset in a worker)."""
    out_dir = tmp_path / "videos"
    code = textwrap.dedent(f"""
        import numpy as np
        from unilab.assets.builtin import load_humanoid
        from unilab.render import video
        video.exit_on_sigterm()
        m = load_humanoid()
        q = np.tile(m.qpos0, (100000, 1))  # minutes of frames: the SIGTERM comes long before the end
        video.render_states(m, q, {str(out_dir / "play.mp4")!r}, width={W}, height={H}, track_body=None)
    """)
    env = dict(os.environ, MUJOCO_GL=gl_backend, PYTHONPATH=os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]))
    if where == "in a worker":
        del env["MUJOCO_GL"]
    parent = subprocess.Popen([sys.executable, "-c", code], env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not list(out_dir.glob(".play.*.partial.mp4")) and parent.poll() is None:  # ffmpeg is writing
            assert time.monotonic() < deadline, "no partial video appeared"
            time.sleep(0.1)
        assert parent.poll() is None, parent.stderr.read()
        parent.terminate()
        assert parent.wait(timeout=60) == 143
    finally:
        parent.kill()
    assert list(out_dir.iterdir()) == []  # neither a partial nor a truncated video
    assert _processes_naming(str(out_dir)) == []  # the worker and its ffmpeg are gone

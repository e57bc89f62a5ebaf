"""A MUJOCO_GL that cannot load here breaks neither training nor play."""

from __future__ import annotations

import os
import subprocess
import sys
from functools import cache

import pytest
from runtime_helpers import run_dirs, train_cmd

from unilab import gl_env
from unilab.cli import train as train_cli
from unilab.render import video
from unilab.render.video import select_gl_backend

# glfw needs a display (none in these tests' environment); mujoco rejects unknown names
ALWAYS_BROKEN = ("glfw", "no-such-backend")


@cache
def broken_backends() -> tuple[str, ...]:
    """Backends that cannot render here; osmesa only where libOSMesa is missing."""
    osmesa_err = video.probe_gl_backend("osmesa")
    return ALWAYS_BROKEN + (("osmesa",) if osmesa_err is not None else ())


def _headless_env(mujoco_gl: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "PYOPENGL_PLATFORM")}
    env["MUJOCO_GL"] = mujoco_gl
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _run(cmd: list[str], mujoco_gl: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        cmd, check=False, capture_output=True, text=True, timeout=timeout, env=_headless_env(mujoco_gl))


def _assert_clean(res: subprocess.CompletedProcess) -> None:
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Traceback" not in res.stderr + res.stdout, res.stderr


@pytest.mark.parametrize("mujoco_gl", ["osmesa", *ALWAYS_BROKEN])
def test_train_help_ignores_mujoco_gl(mujoco_gl):
    res = _run([sys.executable, "-m", "unilab.cli.train", "--help"], mujoco_gl)
    _assert_clean(res)
    assert "algo.num_envs" in res.stdout


def test_train_and_play_survive_a_mujoco_gl_that_cannot_load(tmp_path):
    broken = broken_backends()
    res = _run(train_cmd(tmp_path, "algo.num_envs=4", "algo.max_iterations=3", "training.no_play=false",
                         "training.play_steps=5"), broken[-1])
    _assert_clean(res)
    (run,) = run_dirs(tmp_path)
    assert "play: model_3.pt" in res.stdout
    # the end-of-training video: the user's backend is tried first, then a fallback (or what to install)
    assert "video written" in res.stdout or "play: no video" in res.stdout, res.stdout
    if "video written" in res.stdout:
        assert f"MUJOCO_GL={broken[-1]} does not work here" in res.stderr

    play = [sys.executable, "-m", "unilab.cli.play", str(run), "--steps", "3", "--num-envs", "2"]
    for mujoco_gl in broken:
        no_video = _run([*play, "--no-video"], mujoco_gl)
        _assert_clean(no_video)
        assert "play: model_3.pt: 3 steps x 2 envs" in no_video.stdout
        assert "MUJOCO_GL" not in no_video.stdout + no_video.stderr  # nothing rendered, nothing probed

    out = tmp_path / "play.mp4"
    res = _run([*play, "--out", str(out)], "glfw")
    _assert_clean(res)
    if "play: no video" in res.stdout:
        assert "apt-get install" in res.stdout  # what to install
        assert not out.exists()
    else:
        assert f"play: rendering 4 frames at 320x240 to {out} ...\nplay: video written to {out}" in res.stdout
        assert out.stat().st_size > 1000
        assert "MUJOCO_GL=glfw does not work here" in res.stderr


def test_train_main_runs_without_gl_and_restores_the_environment(monkeypatch):
    monkeypatch.setenv("MUJOCO_GL", "OSMesa")
    monkeypatch.setenv("PYOPENGL_PLATFORM", "osmesa")
    seen = {}

    def fake_main(argv):
        seen.update(gl=os.environ.get("MUJOCO_GL"), pyopengl=os.environ.get("PYOPENGL_PLATFORM"),
                    user=gl_env.user_mujoco_gl())
        return 0

    monkeypatch.setattr(train_cli, "_main", fake_main)
    assert train_cli.main([]) == 0
    # mujoco imported inside loads no OpenGL layer; the user's choice is kept for the video
    assert seen == {"gl": "disable", "pyopengl": None, "user": "osmesa"}
    assert os.environ["MUJOCO_GL"] == "OSMesa" and os.environ["PYOPENGL_PLATFORM"] == "osmesa"
    assert gl_env.user_mujoco_gl() == "osmesa"


def test_mujoco_imported_under_gl_disabled_loads_no_gl_layer():
    code = (
        "import sys\n"
        "from unilab.gl_env import gl_disabled\n"
        "with gl_disabled():\n"
        "    import mujoco\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('OpenGL', 'glfw')\n"
        "             or m in ('mujoco.glfw', 'mujoco.egl', 'mujoco.osmesa'))\n"
        "assert not bad, bad\n"
    )
    for mujoco_gl in ("osmesa", "egl", "glfw", ""):
        res = _run([sys.executable, "-c", code], mujoco_gl, timeout=120)
        assert res.returncode == 0, (mujoco_gl, res.stderr)


def test_select_probes_the_users_choice_first(monkeypatch):
    monkeypatch.setenv("MUJOCO_GL", "GLFW ")
    tried = []

    def fake_probe(backend):
        tried.append(backend)  # and succeed (None)

    monkeypatch.setattr(video, "probe_gl_backend", fake_probe)
    assert select_gl_backend() == "glfw"
    assert tried == ["glfw"]


def test_select_falls_back_with_a_notice(monkeypatch, capsys):
    monkeypatch.setenv("MUJOCO_GL", "glfw")
    tried = []

    def fake_probe(backend):
        tried.append(backend)
        return "no display" if backend in ("glfw", "egl") else None

    monkeypatch.setattr(video, "probe_gl_backend", fake_probe)
    assert select_gl_backend() == "osmesa"
    assert tried == ["glfw", "egl", "osmesa"]
    assert os.environ["MUJOCO_GL"] == "osmesa"
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "MUJOCO_GL=glfw does not work here (no display)" in err and "MUJOCO_GL=osmesa" in err


def test_select_uses_the_value_from_before_gl_was_disabled(monkeypatch):
    monkeypatch.setenv("MUJOCO_GL", "osmesa")
    tried = []

    def fake_probe(backend):
        tried.append(backend)  # and succeed (None)

    monkeypatch.setattr(video, "probe_gl_backend", fake_probe)
    with gl_env.gl_disabled():
        assert os.environ["MUJOCO_GL"] == "disable"
        assert select_gl_backend() == "osmesa"
    assert tried == ["osmesa"]

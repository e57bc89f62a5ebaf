"""Asset cache: fetch, cache hit, corrupt-cache repair, offline error (fake wheel, no network)."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np
import pytest

from unilab.assets import cli, g1, holosoma

FAKE_MEMBERS = {
    "holosoma/__init__.py": b"# not extracted\n",
    "holosoma/data/robots/g1/g1_29dof.xml": b"<mujoco model='fake'/>\n",
    "holosoma/data/robots/g1/g1_29dof.urdf": b"<robot/>\n",
    "holosoma/data/robots/g1/scenes/scene_g1_29dof_wbt_plane.xml":
        b"<mujoco><include file='../g1_29dof.xml'/></mujoco>\n",
    "holosoma/data/robots/g1/meshes/pelvis.STL": bytes(range(256)) * 40,
    "holosoma/data/robots/t1/t1_29dof.xml": b"<mujoco model='fake T1'/>\n",
    "holosoma/data/robots/t1/t1_29dof.urdf": b"<robot/>\n",
    "holosoma/data/robots/t1/meshes/Trunk.STL": bytes(range(256)) * 30,
    "holosoma/data/motions/g1_29dof/whole_body_tracking/terrain_slope.obj": b"v 0 0 0\n",
}


def _npz_bytes(seed: int) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, fps=np.array([50]), joint_pos=np.random.default_rng(seed).normal(size=(4, 36)))
    return buf.getvalue()


def make_fake_wheel(path: Path) -> tuple[Path, str]:
    """A zip with the holosoma layout; returns (path, sha256)."""
    members = dict(FAKE_MEMBERS)
    members["holosoma/data/motions/g1_29dof/whole_body_tracking/clip_a.npz"] = _npz_bytes(0)
    members["holosoma/data/motions/g1_29dof/whole_body_tracking/clip_a_w_obj.npz"] = _npz_bytes(1)
    members["holosoma/data/motions/g1_29dof/whole_body_tracking/motion_crawl_slope.npz"] = _npz_bytes(2)
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path, holosoma.sha256_file(path)


class CountingDownloader:
    """Stands in for pip: copies the fake wheel into the destination."""

    def __init__(self, wheel: Path):
        self.wheel = wheel
        self.calls = 0

    def __call__(self, dest: Path) -> Path:
        self.calls += 1
        out = dest / holosoma.WHEEL_NAME
        out.write_bytes(self.wheel.read_bytes())
        return out


def _offline(dest: Path) -> Path:
    raise holosoma.WheelDownloadError("network is unreachable")


@pytest.fixture
def fake(tmp_path, monkeypatch):
    monkeypatch.delenv(holosoma.WHEEL_ENV_VAR, raising=False)
    wheel, digest = make_fake_wheel(tmp_path / "src.whl")
    return tmp_path / "cache", wheel, digest


def test_fetch_extracts_only_wanted_paths_and_writes_manifest(fake):
    cache, wheel, digest = fake
    dl = CountingDownloader(wheel)
    res = holosoma.ensure_assets(cache, expected_sha256=digest, downloader=dl, progress=False)
    assert res.rebuilt and dl.calls == 1
    root = res.root
    assert (root / g1.SCENE_REL).is_file()
    mesh = "robots/g1/meshes/pelvis.STL"
    assert (root / mesh).read_bytes() == FAKE_MEMBERS[f"holosoma/data/{mesh}"]
    assert not (root / "robots/g1/g1_29dof.urdf").exists()
    assert not (root / "motions/g1_29dof/whole_body_tracking/terrain_slope.obj").exists()
    assert not list(root.rglob("__init__.py"))
    manifest = holosoma.read_manifest(root)
    files = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}
    assert set(manifest) == files - {"manifest.json"}
    assert holosoma.verify_assets(cache) == []
    # the wheel is kept so a damaged cache can be rebuilt offline
    assert (cache / "downloads" / holosoma.WHEEL_NAME).is_file()


def test_cache_hit_does_not_download_again(fake):
    cache, wheel, digest = fake
    dl = CountingDownloader(wheel)
    holosoma.ensure_assets(cache, expected_sha256=digest, downloader=dl, progress=False)
    (cache / "downloads" / holosoma.WHEEL_NAME).unlink()
    res = holosoma.ensure_assets(cache, expected_sha256=digest, downloader=_offline, progress=False)
    assert not res.rebuilt and dl.calls == 1


@pytest.mark.parametrize("damage", ["truncate", "delete", "manifest"])
def test_partial_cache_is_detected_and_refetched(fake, damage):
    cache, wheel, digest = fake
    dl = CountingDownloader(wheel)
    root = holosoma.ensure_assets(cache, expected_sha256=digest, downloader=dl, progress=False).root
    mesh = root / "robots/g1/meshes/pelvis.STL"
    if damage == "truncate":
        mesh.write_bytes(mesh.read_bytes()[:100])
    elif damage == "delete":
        mesh.unlink()
    else:
        (root / "manifest.json").write_text("{not json")
    assert holosoma.check_cache(root)
    res = holosoma.ensure_assets(cache, expected_sha256=digest, downloader=dl, progress=False)
    assert res.rebuilt
    assert holosoma.verify_assets(cache) == []
    assert mesh.stat().st_size == len(FAKE_MEMBERS["holosoma/data/robots/g1/meshes/pelvis.STL"])


def test_same_size_corruption_found_by_full_verify(fake):
    cache, wheel, digest = fake
    root = holosoma.ensure_assets(
        cache, expected_sha256=digest, downloader=CountingDownloader(wheel), progress=False).root
    mesh = root / "robots/g1/meshes/pelvis.STL"
    data = bytearray(mesh.read_bytes())
    data[10] ^= 0xFF
    mesh.write_bytes(bytes(data))
    assert holosoma.check_cache(root) == []  # cheap size check cannot see it
    problems = holosoma.verify_assets(cache)
    assert len(problems) == 1 and "pelvis.STL" in problems[0] and "sha256" in problems[0]
    assert cli.main(["--cache-dir", str(cache), "verify"]) == 1
    holosoma.ensure_assets(cache, force=True, expected_sha256=digest, downloader=_offline, progress=False)
    assert cli.main(["--cache-dir", str(cache), "verify"]) == 0


def test_corrupt_downloaded_wheel_is_replaced(fake):
    cache, wheel, digest = fake
    (cache / "downloads").mkdir(parents=True)
    (cache / "downloads" / holosoma.WHEEL_NAME).write_bytes(b"half a wheel")
    dl = CountingDownloader(wheel)
    res = holosoma.ensure_assets(cache, expected_sha256=digest, downloader=dl, progress=False)
    assert res.rebuilt and dl.calls == 1
    assert holosoma.sha256_file(cache / "downloads" / holosoma.WHEEL_NAME) == digest


def test_no_network_error_says_what_to_download_and_where(fake):
    cache, _, digest = fake
    with pytest.raises(holosoma.AssetError) as err:
        holosoma.ensure_assets(cache, expected_sha256=digest, downloader=_offline, progress=False)
    msg = str(err.value)
    assert holosoma.WHEEL_NAME in msg and "PyPI" in msg
    assert str(cache / "downloads" / holosoma.WHEEL_NAME) in msg
    assert holosoma.WHEEL_ENV_VAR in msg
    assert "network is unreachable" in msg
    assert not holosoma.assets_dir(cache).exists()


def test_real_pip_failure_is_reported_as_offline_error(fake, monkeypatch):
    """The real pip subprocess, pointed at a closed local port (no network involved)."""
    cache, _, digest = fake
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "")
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_TIMEOUT", "2")
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    with pytest.raises(holosoma.AssetError, match=holosoma.WHEEL_NAME):
        holosoma.ensure_assets(cache, expected_sha256=digest, progress=False)


def test_pre_downloaded_wheel_env_var(fake, monkeypatch):
    cache, wheel, digest = fake
    monkeypatch.setenv(holosoma.WHEEL_ENV_VAR, str(wheel))
    res = holosoma.ensure_assets(cache, expected_sha256=digest, downloader=_offline, progress=False)
    assert res.rebuilt and res.wheel == wheel
    monkeypatch.setenv(holosoma.WHEEL_ENV_VAR, str(wheel))
    with pytest.raises(holosoma.AssetError, match="sha256"):
        holosoma.ensure_assets(cache, force=True, expected_sha256="0" * 64, downloader=_offline, progress=False)
    # the failed forced rebuild left the good cache in place
    assert holosoma.check_cache(holosoma.assets_dir(cache)) == []


def test_pre_downloaded_wheel_in_downloads_dir(fake):
    cache, wheel, digest = fake
    (cache / "downloads").mkdir(parents=True)
    (cache / "downloads" / holosoma.WHEEL_NAME).write_bytes(wheel.read_bytes())
    res = holosoma.ensure_assets(cache, expected_sha256=digest, downloader=_offline, progress=False)
    assert res.rebuilt


def test_motion_paths_skip_object_and_terrain_clips(fake, monkeypatch):
    cache, wheel, digest = fake
    holosoma.ensure_assets(cache, expected_sha256=digest, downloader=CountingDownloader(wheel), progress=False)
    names = [p.name for p in g1.motion_paths(cache)]
    assert names == ["clip_a.npz"]
    assert [p.name for p in g1.motion_paths(cache, include_object_clips=True)] == ["clip_a.npz", "clip_a_w_obj.npz"]
    assert [p.name for p in g1.motion_paths(cache, include_terrain_clips=True)] == [
        "clip_a.npz", "motion_crawl_slope.npz"]


def test_cli_help_and_path(fake, capsys):
    cache, wheel, digest = fake
    with pytest.raises(SystemExit) as ex:
        cli.main(["--help"])
    assert ex.value.code == 0
    assert "fetch" in capsys.readouterr().out
    assert cli.main(["--cache-dir", str(cache), "verify"]) == 1  # nothing there yet
    holosoma.ensure_assets(cache, expected_sha256=digest, downloader=CountingDownloader(wheel), progress=False)
    capsys.readouterr()
    assert cli.main(["--cache-dir", str(cache), "path", "--scene"]) == 0
    assert capsys.readouterr().out.strip() == str(holosoma.assets_dir(cache) / g1.SCENE_REL)


@pytest.mark.g1
def test_real_fetch_and_model(tmp_path):
    res = holosoma.ensure_assets(tmp_path / "cache", progress=False)
    assert res.rebuilt
    assert holosoma.verify_assets(tmp_path / "cache") == []
    model = g1.load_model(tmp_path / "cache")
    assert (model.nq, model.nv, model.nu, model.nbody) == (36, 35, 29, 33)
    clips = g1.motion_paths(tmp_path / "cache")
    assert clips and all(p.suffix == ".npz" and "_w_obj" not in p.name for p in clips)

"""Checkpoints are atomic, findable, and a bad file is a clear error."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch

from unilab.runtime import checkpoint as ck


def _payload(i):
    return {"iteration": i, "agent": {"w": torch.arange(3) * i}}


def test_save_load_latest(tmp_path):
    for i in (5, 20, 10):
        ck.save_checkpoint(ck.checkpoint_path(tmp_path, i), _payload(i))
    assert ck.latest_checkpoint(tmp_path).name == "model_20.pt"
    payload, path = ck.load_checkpoint(tmp_path)
    assert payload["iteration"] == 20 and path.name == "model_20.pt"
    assert not list(tmp_path.glob(".*tmp"))


def test_crash_during_save_keeps_the_old_file(tmp_path, monkeypatch):
    path = ck.checkpoint_path(tmp_path, 1)
    ck.save_checkpoint(path, _payload(1))
    real = torch.save

    def dying_save(obj, f):
        real(obj, f)
        f.write(b"half")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", dying_save)
    with pytest.raises(OSError, match="disk full"):
        ck.save_checkpoint(path, _payload(2))
    monkeypatch.setattr(torch, "save", real)
    assert ck.load_checkpoint(path)[0]["iteration"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["model_1.pt"]


def test_truncated_and_foreign_files(tmp_path):
    good = ck.save_checkpoint(tmp_path / "model_3.pt", _payload(3))
    data = good.read_bytes()
    bad = tmp_path / "model_4.pt"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="unreadable"):
        ck.load_checkpoint(bad)
    other = tmp_path / "other.pt"
    torch.save({"weights": 1}, other)
    with pytest.raises(ValueError, match="not a unilab checkpoint"):
        ck.load_checkpoint(other)


def test_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match="no model_"):
        ck.load_checkpoint(tmp_path)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        ck.load_checkpoint(tmp_path / "model_9.pt")


# --------------------------------------------------------------- disk full
def _disk_full_after(limit):
    """An ``open`` whose files accept ``limit`` bytes, then fail like a full disk."""
    real_open = open

    class FullFile:
        def __init__(self, *args, **kwargs):
            self._f = real_open(*args, **kwargs)
            self._left = limit

        def write(self, data):
            data = bytes(data)
            if len(data) > self._left:
                self._f.write(data[: self._left])
                self._left = 0
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            self._left -= len(data)
            return self._f.write(data)

        def __getattr__(self, name):
            return getattr(self._f, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self._f.close()

    return FullFile


def test_disk_full_is_a_clear_error_and_keeps_the_old_file(tmp_path, monkeypatch):
    path = ck.checkpoint_path(tmp_path, 1)
    ck.save_checkpoint(path, _payload(1))
    old_bytes = path.read_bytes()
    big = {"iteration": 2, "agent": {"w": torch.randn(50_000)}}
    monkeypatch.setattr(ck, "open", _disk_full_after(1000), raising=False)
    with pytest.raises(OSError) as info:
        ck.save_checkpoint(path, big)
    monkeypatch.undo()
    err = info.value
    assert err.errno == errno.ENOSPC
    assert str(err) == f"could not write checkpoint {path}: [Errno 28] {os.strerror(errno.ENOSPC)}"
    assert path.read_bytes() == old_bytes
    assert ck.load_checkpoint(path)[0]["iteration"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["model_1.pt"]  # no temp file left


def _dead_pid():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_stale_temp_files_of_a_killed_save_are_removed(tmp_path):
    old = time.time() - 3600
    dead = tmp_path / f".model_7.pt.{_dead_pid()}.tmp"  # a save killed an hour ago
    own = tmp_path / f".model_8.pt.{os.getpid()}.tmp"  # this process's own leftover
    live = tmp_path / f".model_9.pt.{os.getppid()}.tmp"  # another live process: maybe still writing
    fresh = tmp_path / f".model_10.pt.{_dead_pid()}.tmp"  # just written (e.g. by another host)
    for p in (dead, own, live, fresh):
        p.write_bytes(b"x" * 1000)
    for p in (dead, own, live):
        os.utime(p, (old, old))
    ck.save_checkpoint(ck.checkpoint_path(tmp_path, 11), _payload(11))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["model_11.pt", live.name, fresh.name])
    # resuming from / playing a run directory cleans up after that run too
    other = tmp_path / "other_run"
    other.mkdir()
    ck.save_checkpoint(ck.checkpoint_path(other, 3), _payload(3))
    leftover = other / f".model_4.pt.{_dead_pid()}.tmp"
    leftover.write_bytes(b"x")
    os.utime(leftover, (old, old))
    assert ck.load_checkpoint(other)[1].name == "model_3.pt"
    assert not leftover.exists()


def test_keep_only_the_newest_checkpoints(tmp_path):
    for i in (1, 2, 3, 10, 20):
        ck.save_checkpoint(ck.checkpoint_path(tmp_path, i), _payload(i), keep=3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model_10.pt", "model_20.pt", "model_3.pt"]
    ck.save_checkpoint(ck.checkpoint_path(tmp_path, 5), _payload(5), keep=1)  # never deletes what it wrote
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model_20.pt", "model_5.pt"]
    for i in (30, 40):
        ck.save_checkpoint(ck.checkpoint_path(tmp_path, i), _payload(i))  # keep=0: keep all
    assert len(list(tmp_path.iterdir())) == 4


# -------------------------------------------------------------- bit flips
def test_flipped_bits_are_detected(tmp_path):
    path = ck.save_checkpoint(tmp_path / "model_1.pt", {"iteration": 1, "agent": {"w": torch.randn(4096)}})
    good = path.read_bytes()
    n = len(good)
    positions = sorted({*(n * k // 16 for k in range(16)), *range(n - 100, n)})
    for pos in positions:
        bad = bytearray(good)
        bad[pos] ^= 0x10
        path.write_bytes(bytes(bad))
        with pytest.raises(ValueError) as info:
            ck.load_checkpoint(path)
        assert "corrupt" in str(info.value) and str(path) in str(info.value), pos
    path.write_bytes(good)
    assert ck.load_checkpoint(path)[0]["iteration"] == 1
    # still a plain torch file and zip archive
    assert torch.load(path, weights_only=True)["iteration"] == 1
    assert zipfile.ZipFile(path).testzip() is None


def test_checkpoints_without_a_hash_still_load(tmp_path):
    path = tmp_path / "model_2.pt"
    torch.save(_payload(2), path)  # how checkpoints were written before the hash
    assert ck.load_checkpoint(path)[0]["iteration"] == 2


@dataclass
class _Cfg:
    lr: float = 1e-3
    dims: tuple = (16, 16)


def test_a_payload_is_stored_as_tensors_and_plain_data(tmp_path):
    """Configs, NumPy values and paths are converted on save, so the weights_only load reads them back."""
    from omegaconf import OmegaConf

    linear = torch.nn.Linear(2, 2).state_dict()
    payload = {
        "iteration": np.int64(4),
        "agent": {"actor": linear, "n": np.float32(0.5), "arr": np.arange(3.0), "cfg": _Cfg()},
        "config": OmegaConf.create({"task": {"name": "pendulum", "dims": [1, 2]}}),
        "out": Path("videos"),
    }
    loaded, _ = ck.load_checkpoint(ck.save_checkpoint(tmp_path / "model_4.pt", payload))
    assert loaded["iteration"] == 4 and type(loaded["iteration"]) is int
    assert loaded["config"] == {"task": {"name": "pendulum", "dims": [1, 2]}} and type(loaded["config"]) is dict
    agent = loaded["agent"]
    assert agent["n"] == 0.5 and agent["cfg"] == {"lr": 1e-3, "dims": (16, 16)}
    assert torch.equal(agent["arr"], torch.arange(3.0, dtype=torch.float64))
    assert torch.equal(agent["actor"]["weight"], linear["weight"])
    assert hasattr(agent["actor"], "_metadata")  # a module state_dict keeps its version metadata
    assert loaded["out"] == "videos"


def test_an_object_that_is_not_plain_data_is_not_saved(tmp_path):
    class Opaque:
        pass

    path = tmp_path / "model_1.pt"
    with pytest.raises(TypeError, match=r"payload\.agent\.thing is a .*Opaque"):
        ck.save_checkpoint(path, {"iteration": 1, "agent": {"thing": Opaque()}})
    assert not path.exists() and not list(tmp_path.iterdir())

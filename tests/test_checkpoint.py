"""Checkpoints are atomic, findable, and a bad file is a clear error."""

from __future__ import annotations

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

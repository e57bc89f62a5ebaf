"""A checkpoint whose files moved, a checkpoint without its config, a resume with nothing left, a bad log root."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
import torch
from runtime_helpers import run_dirs, train_cmd

from unilab.assets.builtin import pendulum_xml_path
from unilab.runtime.checkpoint import latest_checkpoint, load_checkpoint


def _cli(*argv: str, timeout: int = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def moved_model_run(tmp_path_factory):
    """A 4-iteration pendulum run trained on a copy of the model that has since moved."""
    tmp = tmp_path_factory.mktemp("moved")
    xml = tmp / "first_place" / "pendulum.xml"
    xml.parent.mkdir()
    shutil.copy(pendulum_xml_path(), xml)
    out = subprocess.run(train_cmd(tmp / "logs", "algo.max_iterations=4", f"task.model_path={xml}"),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    moved = tmp / "new_place" / "pendulum.xml"
    moved.parent.mkdir()
    xml.rename(moved)
    (run,) = run_dirs(tmp / "logs")
    return tmp, run, moved


def test_play_and_eval_take_the_moved_model_as_a_task_override(moved_model_run):
    tmp, run, moved = moved_model_run
    lost = _cli("unilab.cli.play", str(run), "--no-video", "--steps", "5")
    assert lost.returncode == 2 and "first_place/pendulum.xml" in lost.stderr, lost.stderr
    found = _cli("unilab.cli.play", str(run), f"task.model_path={moved}", "--no-video", "--steps", "5")
    assert found.returncode == 0, found.stderr
    assert "play: model_4.pt: 5 steps" in found.stdout
    bad = _cli("unilab.cli.play", str(run), "model_path=x")
    assert bad.returncode == 2 and "must look like task.KEY=VALUE" in bad.stderr


def test_resume_with_nothing_left_to_train_is_refused_up_front(moved_model_run):
    tmp, run, moved = moved_model_run
    logs = tmp / "resume_logs"
    out = subprocess.run(train_cmd(logs, f"training.resume={run}", "algo.max_iterations=3",
                                   f"task.model_path={moved}"), capture_output=True, text=True, timeout=300)
    assert out.returncode == 2, out.stdout + out.stderr
    err = out.stderr.strip().splitlines()
    assert len(err) == 1 and "is at iteration 4 and algo.max_iterations=3" in err[0], out.stderr
    assert "Set algo.max_iterations above 4" in err[0]
    assert run_dirs(logs) == []
    assert latest_checkpoint(run).name == "model_4.pt"  # nothing was re-saved


@pytest.mark.parametrize("command", ["play", "eval"])
def test_a_checkpoint_without_its_config_is_one_line_naming_the_file(tmp_path, command):
    torch.save({"iteration": 3, "agent": {}}, tmp_path / "model_3.pt")
    load_checkpoint(tmp_path)  # a well-formed checkpoint file, only the run config is missing
    flag = "--no-plot" if command == "eval" else "--no-video"
    out = _cli(f"unilab.cli.{command}", str(tmp_path / "model_3.pt"), flag)
    assert out.returncode == 2, out.stderr
    err = out.stderr.strip().splitlines()
    assert len(err) == 1 and "model_3.pt stores no run config" in err[0], out.stderr


def test_a_log_root_that_is_a_file_is_one_line_and_exit_2(tmp_path):
    not_a_dir = tmp_path / "logs"
    not_a_dir.write_text("a file")
    out = subprocess.run(train_cmd(not_a_dir, "algo.max_iterations=2"), capture_output=True, text=True, timeout=300)
    assert out.returncode == 2, out.stderr
    err = out.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"train: error: training.log_root={not_a_dir}: cannot create"), err

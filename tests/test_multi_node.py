"""Several ranks with gloo on the CPU: one machine with two processes, and two torchrun nodes on one machine.

The two-node tests start two launchers as a real multi-node job would
(``--nnodes=2 --nproc_per_node=1``, c10d rendezvous), here both on localhost.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time

import psutil
import pytest
from runtime_helpers import run_dirs, train_cmd

from unilab.algo.sac.agent import FastSAC
from unilab.runtime.checkpoint import latest_checkpoint, load_checkpoint
from unilab.runtime.distributed import STEP_SKEW_S, STORE_GRACE_S, SURVIVOR_WAIT_S, cpu_partition, weights_fingerprint
from unilab.sim import cpu

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
FINGERPRINT = re.compile(r"unilab\[rank (\d)/2\]: final weights fingerprint (\w+) at iteration (\d+)")


def _train_args(log_root, *extra: str) -> list[str]:
    return ["-m", "unilab.cli.train", *train_cmd(log_root, *extra)[3:]]


def _checkpoint_fingerprint(path) -> str:
    return weights_fingerprint(FastSAC.from_checkpoint(load_checkpoint(path)[0]["agent"]))


def _fingerprints(stdout: str) -> dict[int, tuple[str, int]]:
    return {int(r): (fp, int(it)) for r, fp, it in FINGERPRINT.findall(stdout)}


def _assert_rank0_checkpoints_only(log_root, iterations: int) -> None:
    (run,) = run_dirs(log_root)  # rank 1 leaves no directory
    assert not list((log_root / "fast_sac").glob("*/*_rank1"))
    ckpt = latest_checkpoint(run)
    assert ckpt.name == f"model_{iterations}.pt"
    return ckpt


def test_two_ranks_on_one_machine_share_cpus_and_weights(tmp_path):
    """torchrun, 2 ranks: disjoint pinned collectors, identical networks after training."""
    if not cpu.affinity_supported() or cpu.usable_cpu_count() < 2:
        pytest.skip("needs thread affinity and 2 usable CPUs")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_port=29517",
           *_train_args(tmp_path, "algo.max_iterations=12")]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=ENV)
    assert out.returncode == 0, out.stdout + out.stderr
    pinned = sorted(
        line.split("cpu_ids=")[1].split(", learner")[0] for line in out.stdout.splitlines() if "pinned to" in line)
    assert pinned == sorted(str(cpu_partition(cpu.usable_cpus(), r, 2)) for r in range(2))
    ckpt = _assert_rank0_checkpoints_only(tmp_path, 12)
    prints = _fingerprints(out.stdout)
    assert prints[0] == prints[1] == (_checkpoint_fingerprint(ckpt), 12)


def _launch_node(node_rank: int, port: int, rdzv_id: str, *train: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc_per_node=1",
           f"--node_rank={node_rank}", "--rdzv_backend=c10d", f"--rdzv_endpoint=localhost:{port}",
           f"--rdzv_id={rdzv_id}", *train]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV,
                            start_new_session=True)


class _Lines:
    """Collects a process's output lines in the background (a full pipe must never stall it)."""

    def __init__(self, proc: subprocess.Popen):
        self.lines: list[str] = []
        self._thread = threading.Thread(target=lambda: self.lines.extend(proc.stdout), daemon=True)
        self._thread.start()

    def text(self) -> str:
        return "".join(self.lines)

    def wait_for(self, pattern: str, timeout: float = 180) -> re.Match:
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            match = re.search(pattern, self.text())
            if match:
                return match
            time.sleep(0.2)
        raise AssertionError(f"never saw {pattern!r} in:\n{self.text()[-3000:]}")


def _tree(proc: subprocess.Popen) -> list[psutil.Process]:
    """The launcher and everything under it: torchrun starts its worker in a session of its own."""
    try:
        root = psutil.Process(proc.pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _kill_tree(procs: list[psutil.Process]) -> None:
    for p in procs:  # one that already ended (a helper whose parent was killed first) must not spare the rest
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass


def _ended(proc: psutil.Process, timeout: float) -> bool:
    """``proc`` (not a child of this process: its parent may be too stuck to reap it) exited within ``timeout``."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.2)
    return False


def _alive(procs: list[psutil.Process]) -> list[str]:
    return [f"{p.pid} {' '.join(p.cmdline()[:4])}" for p in procs if p.is_running() and p.status() != "zombie"]


def _run_two_nodes(port: int, rdzv_id: str, *trains: list[str]) -> tuple[list[int], list[str]]:
    """Node 0 then node 1, each with its own arguments: their exit codes and outputs."""
    nodes = [_launch_node(0, port, rdzv_id, *trains[0])]
    time.sleep(2)  # node 0 hosts the rendezvous, as the machine named in --rdzv_endpoint would
    nodes.append(_launch_node(1, port, rdzv_id, *trains[1]))
    try:
        outs = [n.communicate(timeout=300)[0] for n in nodes]
    finally:
        for n in nodes:
            _kill_tree(_tree(n))
    return [n.returncode for n in nodes], outs


def test_two_nodes_train_in_sync_and_only_rank_0_writes_checkpoints(tmp_path):
    train = _train_args(tmp_path, "algo.max_iterations=10", "training.save_interval=5")
    codes, outs = _run_two_nodes(29541, "unilab_two_nodes", train, train)
    assert codes == [0, 0], "\n".join(o[-3000:] for o in outs)
    prints = {**_fingerprints(outs[0]), **_fingerprints(outs[1])}
    assert sorted(prints) == [0, 1] and prints[0] == prints[1]
    ckpt = _assert_rank0_checkpoints_only(tmp_path, 10)
    assert prints[0] == (_checkpoint_fingerprint(ckpt), 10)
    (run,) = run_dirs(tmp_path)
    assert sorted(p.name for p in run.glob("model_*.pt")) == ["model_10.pt", "model_5.pt"]


def test_two_nodes_stay_in_step_through_rank_0s_periodic_evaluation(tmp_path):
    """Rank 0 alone writes the snapshots and starts the evaluations; the barrier after each is every rank's."""
    train = ["-m", "unilab.cli.train", "--algo", "sac_cpu", "--task", "g1_motion_tracking", "algo.num_envs=8",
             "algo.max_iterations=12", "algo.learning_starts=2", "algo.batch_size=32", "training.eval_interval=4",
             "training.log_interval=2", "training.no_play=true", f"training.log_root={tmp_path}"]
    codes, outs = _run_two_nodes(29547, "unilab_two_nodes_eval", train, train)
    assert codes == [0, 0], "\n".join(o[-3000:] for o in outs)
    prints = {**_fingerprints(outs[0]), **_fingerprints(outs[1])}
    assert sorted(prints) == [0, 1] and prints[0] == prints[1]
    (run,) = sorted((tmp_path / "fast_sac").glob("*/*_mujoco"))
    assert (run / "eval" / "eval_4.log").is_file()


def test_ranks_started_with_different_settings_stop_naming_the_setting(tmp_path):
    # other network sizes too: the check must come before the start-up broadcast, which mismatched shapes break
    codes, outs = _run_two_nodes(29545, "unilab_mismatch", *(_train_args(
        tmp_path, "algo.max_iterations=10", f"training.save_interval={5 + 2 * node}",
        f"algo.actor_hidden_dims=[{32 // (node + 1)}]") for node in (0, 1)))
    for code, out in zip(codes, outs, strict=True):
        assert code != 0, out[-3000:]
        said = re.search(r"training\.save_interval is (\d) on rank 0, (\d) on rank 1", out)
        assert said is not None and sorted(said.groups()) == ["5", "7"], out[-3000:]
        said = re.search(r"algo\.actor_hidden_dims is \[(\d+)\] on rank 0, \[(\d+)\] on rank 1", out)
        assert said is not None and sorted(said.groups()) == ["16", "32"], out[-3000:]
        assert "lost contact" not in out
    assert not list((tmp_path / "fast_sac").glob("*/*")), "a run that never trained leaves no directory"


def test_ranks_resuming_different_checkpoints_of_one_iteration_stop_naming_the_networks(tmp_path):
    ckpts = []
    for seed in (0, 1):  # the env seed only: the same settings, other data, other weights
        root = tmp_path / f"seed{seed}"
        done = subprocess.run(train_cmd(root, "algo.max_iterations=6", f"training.seed={seed}"), env=ENV,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        ckpts.append(latest_checkpoint(run_dirs(root)[0]))
    codes, outs = _run_two_nodes(29546, "unilab_two_resumes", *(_train_args(
        tmp_path / "resumed", "algo.max_iterations=10", f"training.resume={ckpt}") for ckpt in ckpts))
    for code, out in zip(codes, outs, strict=True):
        assert code != 0, out[-3000:]
        assert re.search(r"network fingerprint after the resume is '\w+' on rank 0, '\w+' on rank 1", out), out[-3000:]
    assert not list((tmp_path / "resumed" / "fast_sac").glob("*/*")), "a run that never trained leaves no directory"


def _stop_tree(procs: list[psutil.Process]) -> None:
    for p in procs:
        try:
            p.suspend()
        except psutil.NoSuchProcess:
            pass


@pytest.mark.parametrize(("how", "lost_node", "port", "limit_s"), [
    # a killed node closes its connections: the next collective fails at once
    ("killed", 1, 29542, 15.0),
    # a stopped node (a frozen machine) keeps them open: the training group's timeout ends the wait
    ("stopped", 1, 29543, STEP_SKEW_S + SURVIVOR_WAIT_S + 15.0),
    # node 0 hosts the rendezvous store: frozen, it never answers the survivor's roll call either
    ("stopped", 0, 29544, STEP_SKEW_S + SURVIVOR_WAIT_S + STORE_GRACE_S + 15.0),
])
def test_a_lost_node_stops_the_other_within_the_timeout_naming_the_rank(tmp_path, how, lost_node, port, limit_s):
    timeout_s = 20
    train = _train_args(tmp_path, "algo.max_iterations=1000000", f"training.collector_timeout_s={timeout_s}")
    nodes = [_launch_node(0, port, f"unilab_{how}_node", *train)]
    time.sleep(2)
    nodes.append(_launch_node(1, port, f"unilab_{how}_node", *train))
    logs = [_Lines(n) for n in nodes]
    survivor = 1 - lost_node
    try:
        ranks = [int(log.wait_for(r"unilab\[rank (\d)/2\]: collector pid").group(1)) for log in logs]
        logs[ranks.index(0)].wait_for(r"unilab: iter \d")  # both are training (rank 0 prints progress)
        (trainer,) = [p for p in _tree(nodes[survivor]) if "unilab.cli.train" in p.cmdline()[:4]]
        lost_tree = _tree(nodes[lost_node])
        (_kill_tree if how == "killed" else _stop_tree)(lost_tree)
        t0 = time.monotonic()
        if not _ended(trainer, timeout_s + limit_s):
            raise AssertionError(f"the surviving trainer still runs {timeout_s + limit_s:g} s after the other node "
                                 f"was {how} (of its processes these still run: {_alive(lost_tree)}):\n"
                                 + logs[survivor].text()[-3000:])
        elapsed = time.monotonic() - t0
        if lost_node == 1:  # with the rendezvous host frozen, torchrun's own agent waits for it: not ours
            nodes[survivor].wait(timeout=30)
            assert nodes[survivor].returncode != 0
    finally:
        for n in nodes:
            _kill_tree(_tree(n))
    text = logs[survivor].text()
    assert f"train: error: rank {ranks[survivor]} of 2 lost contact with rank {ranks[lost_node]}" in text, text[-3000:]
    assert "Traceback" not in text.split("lost contact")[0].splitlines()[-1]
    assert elapsed < timeout_s + limit_s
    if ranks[survivor] == 0:  # the survivor is rank 0: it kept what was learned
        assert "before stopping" in text and latest_checkpoint(run_dirs(tmp_path)[0]) is not None

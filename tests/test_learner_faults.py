"""The learner never trains on garbage or loses its last checkpoint: NaN guard, stop signals."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from runtime_helpers import on_two_gloo_ranks, popen_train, run_dirs, train_cmd, wait_for_line

from unilab.algo.sac import FastSAC, SACConfig
from unilab.runtime import distributed
from unilab.runtime.checkpoint import latest_checkpoint, load_checkpoint
from unilab.runtime.signals import StopRequested, StopSignals


def _agent() -> FastSAC:
    cfg = SACConfig(num_envs=4, batch_size=32, buffer_size=16, actor_hidden_dims=[16], critic_hidden_dims=[16],
                    policy_frequency=1, distributional=False, use_cdq=True)
    return FastSAC(cfg, 3, 4, 2, device="cpu")


def _batch(n: int = 32, reward: float = 0.5) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {
        "obs": torch.randn(n, 3, generator=g), "critic_obs": torch.randn(n, 4, generator=g),
        "next_obs": torch.randn(n, 3, generator=g), "next_critic_obs": torch.randn(n, 4, generator=g),
        "action": torch.rand(n, 2, generator=g) * 2 - 1, "rewards": torch.full((n,), reward),
        "bootstrap": torch.ones(n), "discount": torch.full((n,), 0.99),
    }


def _params(module: torch.nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in module.parameters()]


def test_a_nonfinite_critic_step_is_skipped_and_counted():
    agent = _agent()
    agent.update(_batch())
    critic, actor = _params(agent.critic), _params(agent.actor)
    adam_state = [s["exp_avg"].clone() for s in agent.critic_optimizer.state.values()]
    agent.update(_batch(reward=math.nan))
    assert all(torch.equal(a, b) for a, b in zip(critic, _params(agent.critic)))  # critic step skipped
    assert all(torch.equal(a, s["exp_avg"]) for a, s in zip(adam_state, agent.critic_optimizer.state.values()))
    assert not all(torch.equal(a, b) for a, b in zip(actor, _params(agent.actor)))  # the actor's loss was finite
    assert agent.nonfinite_counts() == {"updates": 1, "critic": 1, "actor": 0, "alpha": 0, "streak": 1}
    agent.update(_batch(reward=math.inf))
    assert agent.nonfinite_counts()["streak"] == 2
    agent.update(_batch())
    counts = agent.nonfinite_counts()
    assert counts["streak"] == 0 and counts["updates"] == 2
    assert not all(torch.equal(a, b) for a, b in zip(critic, _params(agent.critic)))
    assert agent.nonfinite_parameters() == []


def _state(agent: FastSAC, *parts: str) -> list[torch.Tensor]:
    """The tensors of ``parts`` (modules, or optimisers with their moments and step counts)."""
    out = []
    for part in parts:
        obj = getattr(agent, part)
        if isinstance(obj, torch.optim.Optimizer):
            out += [t.clone() for s in obj.state.values() for t in s.values() if isinstance(t, torch.Tensor)]
        else:
            out += [t.detach().clone() for t in obj.state_dict().values()]
    return out


UNTOUCHED = {"rewards": ("critic", "critic_optimizer"), "bootstrap": ("critic", "critic_optimizer"),
             "discount": ("critic", "critic_optimizer"), "next_obs": ("critic", "critic_optimizer"),
             "next_critic_obs": ("critic", "critic_optimizer"),
             "critic_obs": ("critic", "critic_optimizer", "critic_obs_normalizer"),
             "obs": ("actor", "actor_optimizer", "obs_normalizer")}
"""A bad value in each batch key: what must not move (the step it reaches is skipped; a normaliser leaves the batch
out when it merges that key)."""


@pytest.mark.parametrize("distributional", [True, False])
@pytest.mark.parametrize("key,value", [("rewards", math.nan), ("rewards", math.inf), ("rewards", -math.inf),
                                       ("obs", math.nan), ("next_obs", math.nan), ("critic_obs", math.inf),
                                       ("next_critic_obs", math.inf), ("bootstrap", math.nan),
                                       ("discount", math.inf)])
@pytest.mark.parametrize("static", [False, True])
def test_any_nonfinite_input_ends_in_the_skip_path_for_both_critics(distributional, key, value, static):
    """Issue 42: a NaN reward weight made the distributional critic's projection index out of bounds. Every
    non-finite number reaching the learner ends in the skip path instead: no error, the step it reaches skipped
    (weights and optimiser state untouched), the normalisers' statistics finite, the skip counted (so training
    stops after algo.max_nonfinite_updates in a row)."""
    from unilab.algo.sac.graphs import CapturedUpdate

    cfg = SACConfig(num_envs=4, batch_size=32, buffer_size=16, actor_hidden_dims=[16], critic_hidden_dims=[16],
                    policy_frequency=2, distributional=distributional, num_atoms=11)
    agent = FastSAC(cfg, 3, 4, 2, device="cpu")
    if static:  # the captured update's program
        agent._captured = CapturedUpdate(agent.update_step, agent.device, cfg.policy_frequency)
    agent.update(_batch())
    agent.update(_batch())  # the actor and all optimisers have state
    before = _state(agent, *UNTOUCHED[key])
    bad = _batch()
    bad[key] = bad[key].clone()
    bad[key].view(-1)[5] = value
    for k in range(3):  # the 2nd of these is an actor step
        agent.update(bad)
        counts = agent.nonfinite_counts()
        if key == "obs":  # only the actor's loss sees it
            assert counts["critic"] == 0 and counts["actor"] == counts["updates"] == (k >= 1), counts
        else:
            assert counts["critic"] == counts["streak"] == counts["updates"] == k + 1, counts
    assert all(torch.equal(a, b) for a, b in zip(before, _state(agent, *UNTOUCHED[key]), strict=True))
    assert agent.nonfinite_parameters() == []  # the target's Polyak step moved it towards the untouched critic
    agent.update(_batch())
    assert agent.nonfinite_counts()["streak"] == 0


def test_training_stops_after_max_nonfinite_updates_in_a_row():
    from types import SimpleNamespace

    from unilab.runtime.trainer import NonFiniteTraining, Trainer

    cfg = SACConfig(num_envs=4, batch_size=32, buffer_size=16, actor_hidden_dims=[16], critic_hidden_dims=[16],
                    num_atoms=11, max_nonfinite_updates=3)
    agent = FastSAC(cfg, 3, 4, 2, device="cpu")
    trainer = Trainer.__new__(Trainer)  # only what the check reads
    trainer.spec, trainer.iteration, trainer.last_checkpoint = SimpleNamespace(algo=cfg), 7, None
    for _ in range(2):
        agent.update(_batch(reward=math.nan))
    assert trainer._check_finite(agent) == 2
    agent.update(_batch(reward=math.nan))
    with pytest.raises(NonFiniteTraining, match="algo.max_nonfinite_updates=3.*critic loss 3"):
        trainer._check_finite(agent)


def _one_critic_step(rank: int) -> tuple[float, list[torch.Tensor]]:
    """One critic step whose loss differs between the ranks only in a term non-finite on rank 1."""
    torch.manual_seed(0)
    agent = _agent()
    agent.grad_sync = distributed.average_gradients
    params = list(agent.critic.parameters())
    # a NaN constant: this rank's loss is non-finite while its own gradient is finite
    loss = sum(p.square().sum() for p in params) + (math.nan if rank == 1 else 0.0)
    _, skipped = agent._step(agent.critic_optimizer, loss, params)
    return float(skipped), [p.detach().clone() for p in params]


def test_a_loss_nonfinite_on_one_rank_skips_the_step_on_every_rank():
    """Ranks that part here would train different networks from then on, with no error."""
    (skip0, params0), (skip1, params1) = on_two_gloo_ranks(_one_critic_step)
    torch.manual_seed(0)
    start = _params(_agent().critic)
    assert skip0 == skip1 == 1.0
    assert all(torch.equal(a, b) and torch.equal(a, c) for a, b, c in zip(start, params0, params1))


def test_nonfinite_parameters_are_named():
    agent = _agent()
    with torch.no_grad():
        next(agent.actor.parameters()).view(-1)[0] = math.inf
    bad = agent.nonfinite_parameters()
    assert len(bad) == 1 and bad[0].startswith("actor.")
    agent.update(_batch())
    assert agent.nonfinite_counts()["actor"] == 1  # an inf weight makes the actor loss non-finite


def test_stop_signals_defer_inside_a_checkpoint_write_and_ignore_repeats(capsys):
    with StopSignals() as sigs:
        with pytest.raises(StopRequested) as err:
            with sigs.deferred():
                signal.raise_signal(signal.SIGTERM)
                signal.raise_signal(signal.SIGINT)  # a second signal is ignored, not raised
                finished = True
        assert finished and err.value.signum == signal.SIGTERM
        signal.raise_signal(signal.SIGINT)  # already stopping: reported, not raised
    try:
        signal.raise_signal(signal.SIGINT)  # after the block too: the shutdown is not cut short
        assert "ignored" in capsys.readouterr().err
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    with StopSignals():
        pass
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # no stop: handlers restored


def test_nonfinite_training_stops_and_keeps_only_finite_checkpoints(tmp_path):
    proc = popen_train(tmp_path, "algo.max_iterations=3000", "algo.critic_lr=1e6", "algo.actor_lr=1e6",
                       "algo.early_lr=null", "training.save_interval=5", "algo.max_nonfinite_updates=3")
    try:
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 1, err
    assert "non-finite" in err and "algo.max_nonfinite_updates=3" in err and "critic loss" in err
    assert "Traceback" not in err
    (run,) = run_dirs(tmp_path)
    ckpts = sorted(run.glob("model_*.pt"))
    last_iter = int(err.split("training stopped at iteration ")[1].split(":")[0])
    assert last_iter < 3000
    for path in ckpts:  # whatever was written holds finite weights only
        state = load_checkpoint(path)[0]["agent"]
        for part in ("actor", "critic"):
            assert all(torch.isfinite(t).all() for t in state[part].values()), path


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signals_during_checkpoint_writes_still_leave_a_final_checkpoint(tmp_path, sig):
    # a ~25 MB replay saved every iteration: the signals land inside torch.save most of the time
    proc = popen_train(tmp_path, "algo.max_iterations=100000", "algo.buffer_size=50000",
                       "training.save_interval=1", "training.save_replay=true", "training.keep_checkpoints=2")
    try:
        wait_for_line(proc, "unilab: iter")
        for _ in range(2):  # a second signal must not abandon the final checkpoint either
            proc.send_signal(sig)
            time.sleep(0.3)
        rc = proc.wait(timeout=120)
        out, err = proc.stdout.read(), proc.stderr.read()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert rc == 128 + sig, err
    assert "Traceback" not in err and "enforce fail" not in err
    (run,) = run_dirs(tmp_path)
    payload, path = load_checkpoint(latest_checkpoint(run))
    assert "replay" in payload and f"model_{payload['iteration']}.pt" == path.name
    assert f"interrupted at iteration {payload['iteration']}" in out
    assert not list(run.glob(".*.tmp"))


def test_resume_takes_the_checkpoints_algo_settings_unless_overridden(tmp_path):
    first = subprocess.run(train_cmd(tmp_path / "a", "algo.max_iterations=6", "algo.num_q=3"),
                           capture_output=True, text=True, timeout=240)
    assert first.returncode == 0, first.stderr
    (run,) = run_dirs(tmp_path / "a")
    # no network overrides: the `sac` preset's sizes differ from the checkpoint's, which win
    base = [sys.executable, "-m", "unilab.cli.train", "--task", "pendulum", "algo.num_envs=8",
            "training.no_play=true", f"training.resume={run}", "algo.max_iterations=9"]
    out = subprocess.run([*base, f"training.log_root={tmp_path / 'b'}"], capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr
    assert "algo.actor_hidden_dims=[16]" in out.stdout and "algo.num_q=3" in out.stdout
    (resumed,) = run_dirs(tmp_path / "b")
    cfg = load_checkpoint(resumed)[0]["agent"]["config"]
    assert cfg["num_q"] == 3 and cfg["actor_hidden_dims"] == [16] and cfg["max_iterations"] == 9
    # an explicit override that cannot load the checkpoint is named
    out = subprocess.run([*base, "algo.critic_hidden_dims=[32,32]", f"training.log_root={tmp_path / 'c'}"],
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 2
    assert "algo.critic_hidden_dims is [32, 32] here but [16] in the checkpoint" in out.stderr
    assert "Traceback" not in out.stderr and not run_dirs(tmp_path / "c")

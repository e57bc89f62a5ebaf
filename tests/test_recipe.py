"""The FastSAC recipes: `sac` = holosoma's G1 WBT FastSAC, `sac_cpu` without CUDA, the banner, the progress line."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest

from unilab.cli import config as cli_config
from unilab.cli import train as train_cli
from unilab.cli.config import choose_recipe, compose_config, explicit_algo_keys, split_argv, to_run_spec
from unilab.runtime.metrics import FIRST_LINE_S, MetricsLogger, format_duration
from unilab.runtime.stats import counter_names
from unilab.tasks.g1_locomotion.config import LocomotionConfig
from unilab.tasks.g1_motion_tracking.config import MotionTrackingConfig
from unilab.telemetry.phase_timer import PhaseTimer


def _algo(argv, cuda):
    overrides, _ = split_argv(argv)
    composed, line = choose_recipe(overrides, cuda=cuda)
    return to_run_spec(compose_config(composed), check_paths=False).algo, line


def test_plain_train_without_cuda_is_the_cpu_recipe():
    algo, line = _algo(["--task", "pendulum"], cuda=False)
    assert line == "unilab: recipe sac_cpu (no CUDA device; --algo sac forces the GPU recipe)"
    assert (algo.num_envs, algo.batch_size, algo.num_atoms, algo.actor_hidden_dims) == (256, 512, 101, [256, 128, 64])
    assert (algo.num_updates, algo.policy_frequency) == (4, 2)  # holosoma's 4 updates per iteration, at batch 512
    assert algo.critic_hidden_dims == [256, 128, 64] and algo.learning_starts == 10
    # the three non-size differences (docs/RECIPE.md, each with its A/B)
    assert algo.init_log_std_at_target and (algo.early_lr, algo.early_lr_env_steps) == (1e-3, 800_000)
    assert algo.bc_weight == 0.02
    assert algo.distributional and algo.gamma == 0.99  # the rest is the GPU recipe's


def test_plain_train_with_cuda_and_forced_sac_are_the_holosoma_recipe():
    for argv, cuda, line in ((["--task", "pendulum"], True, "unilab: recipe sac (CUDA device found)"),
                             (["--algo", "sac", "--task", "pendulum"], False, "unilab: recipe sac (--algo sac)")):
        algo, got = _algo(argv, cuda)
        assert got == line
        assert algo.distributional and algo.num_atoms == 501 and (algo.v_min, algo.v_max) == (-20.0, 20.0)
        assert (algo.gamma, algo.tau, algo.num_updates, algo.policy_frequency) == (0.99, 0.05, 4, 2)
        assert (algo.num_envs, algo.n_steps, algo.target_entropy_scale, algo.batch_size) == (4096, 1, 0.5, 8192)
        assert algo.actor_hidden_dims == [512, 256, 128] and algo.critic_hidden_dims == [768, 384, 192]
        assert (algo.actor_lr, algo.critic_lr, algo.alpha_lr, algo.alpha_init) == (3e-4, 3e-4, 3e-4, 0.001)
        assert not algo.init_log_std_at_target and (algo.adam_beta1, algo.adam_beta2) == (0.9, 0.95)
        assert algo.early_lr is None and algo.bc_weight == 0.0  # holosoma's rates and actor loss
        assert (algo.buffer_size, algo.learning_starts, algo.use_cdq, algo.max_iterations) == (1024, 10, False,
                                                                                               400_000)


def test_locomotion_picks_holosomas_loco_recipe():
    """holosoma's g1_29dof_fast_sac: config_values/algo.py fast_sac (gamma 0.97, tau 0.125, 8 updates, actor every
    4th, 101 atoms, target_entropy_ratio 0) with use_symmetry and 50000 iterations; the CPU recipe keeps
    sac_cpu's sizes and holosoma's zero-initialised log-std head."""
    algo, line = _algo(["--task", "g1_locomotion"], cuda=True)
    assert line == "unilab: recipe sac_loco (CUDA device found)"
    assert (algo.gamma, algo.tau, algo.num_updates, algo.policy_frequency) == (0.97, 0.125, 8, 4)
    assert (algo.num_atoms, algo.v_min, algo.v_max, algo.target_entropy_scale) == (101, -20.0, 20.0, 0.0)
    assert algo.use_symmetry and algo.max_iterations == 50_000 and (algo.num_envs, algo.batch_size) == (4096, 8192)
    assert algo.actor_hidden_dims == [512, 256, 128] and algo.critic_hidden_dims == [768, 384, 192]
    algo, line = _algo(["--task", "g1_locomotion"], cuda=False)
    assert line == "unilab: recipe sac_cpu_loco (no CUDA device; --algo sac_loco forces the GPU recipe)"
    assert (algo.num_envs, algo.batch_size, algo.num_updates, algo.policy_frequency) == (256, 1024, 2, 2)
    assert (algo.gamma, algo.tau, algo.target_entropy_scale, algo.use_symmetry) == (0.97, 0.125, 0.0, True)
    assert not algo.init_log_std_at_target and algo.early_lr is None and algo.bc_weight == 0.0
    algo, line = _algo(["--task", "g1_locomotion", "--algo", "sac_cpu"], cuda=False)
    assert line == "unilab: recipe sac_cpu (--algo sac_cpu)" and algo.gamma == 0.99  # a named recipe is kept


def test_the_chosen_recipe_does_not_make_algo_keys_explicit_for_resume():
    overrides, _ = split_argv(["--task", "pendulum", "algo.num_envs=8", "training.resume=somewhere"])
    composed, line = choose_recipe(overrides, cuda=False)
    assert composed[0] == "algo=sac_cpu" and "checkpoint's algo keys win" in line
    assert explicit_algo_keys(overrides) == ("num_envs",)  # what train passes on: the user's keys only


def test_train_cfg_shows_the_cpu_recipe_without_cuda(monkeypatch, capsys):
    monkeypatch.setattr(cli_config, "cuda_available", lambda: False)
    assert train_cli.main(["--task", "pendulum", "--cfg"]) == 0
    out = capsys.readouterr().out
    assert "num_envs: 256" in out and "num_atoms: 101" in out
    monkeypatch.setattr(cli_config, "cuda_available", lambda: True)
    assert train_cli.main(["--task", "pendulum", "--cfg"]) == 0
    assert "num_envs: 4096" in capsys.readouterr().out


def test_train_cfg_of_a_resumed_run_says_the_algo_block_comes_from_the_checkpoint(capsys):
    assert train_cli.main(["--task", "pendulum", "algo.gamma=0.9", "training.resume=somewhere", "--cfg"]) == 0
    last = capsys.readouterr().out.rstrip().splitlines()[-1]
    assert last.startswith("# training.resume is set") and "(given: gamma)" in last
    assert train_cli.main(["--task", "pendulum", "--cfg"]) == 0
    assert "training.resume is set" not in capsys.readouterr().out


def test_train_prints_the_recipe_line_before_it_starts(monkeypatch, capsys):
    import unilab.runtime.trainer as trainer_mod

    class Stop(Exception):
        pass

    def no_trainer(spec):
        raise Stop

    monkeypatch.setattr(cli_config, "cuda_available", lambda: False)
    monkeypatch.setattr(trainer_mod, "Trainer", no_trainer)
    with pytest.raises(Stop):
        train_cli.main(["--task", "pendulum", "training.no_play=true"])
    assert "unilab: recipe sac_cpu (no CUDA device; --algo sac forces the GPU recipe)" in capsys.readouterr().out


def test_cuda_probe_imports_no_torch():
    import torch

    if torch.version.hip:
        pytest.skip("a ROCm build asks torch itself")
    code = "import sys; from unilab.cli.config import cuda_available; cuda_available(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_task_defaults_are_holosomas_fast_sac_facts():
    cfg = MotionTrackingConfig()
    r = cfg.rewards
    got = {n: (getattr(r, n).weight, getattr(r, n).sigma) for n in
           ("anchor_pos", "anchor_ori", "body_pos", "body_ori", "body_lin_vel", "body_ang_vel", "action_rate",
            "joint_limit")}
    assert got == {"anchor_pos": (1.0, 0.3), "anchor_ori": (0.5, 0.4), "body_pos": (2.0, 0.3),
                   "body_ori": (1.0, 0.4), "body_lin_vel": (1.0, 1.0), "body_ang_vel": (1.0, 3.14),
                   "action_rate": (-1.0, None), "joint_limit": (-10.0, None)}
    t = cfg.terminations
    assert (t.anchor_height, t.anchor_orientation, t.end_effector_height) == (0.5, 0.8, 0.25)
    assert (cfg.action_scale, cfg.action_scale_mode, cfg.action_bound_from_joint_range) == (0.25, "effort_over_kp",
                                                                                          True)
    assert cfg.reward_times_dt and cfg.soft_joint_limit_factor == 0.9
    assert (cfg.sim_dt, cfg.decimation, cfg.max_episode_length_s) == (0.005, 4, 10.0)



def test_locomotion_reward_defaults_are_holosomas_g1_29dof_loco_fast_sac():
    """holosoma's config_values/loco/g1/reward.py: weight and params of each term (penalty_ prefix dropped). Its
    tracking_sigma divides the squared error (exp(-err / tracking_sigma), managers/reward/terms/locomotion.py), so
    the key keeps holosoma's name, not the tracking task's sigma (exp(-err / sigma^2))."""
    r = LocomotionConfig().rewards
    got = {n: (getattr(r, n).weight, getattr(r, n).tracking_sigma, getattr(r, n).curriculum)
           for n in LocomotionConfig().rewards.__dataclass_fields__}
    assert got == {"tracking_lin_vel": (2.0, 0.25, False), "tracking_ang_vel": (1.5, 0.25, False),
                   "ang_vel_xy": (-1.0, None, True), "orientation": (-10.0, None, True),
                   "action_rate": (-2.0, None, True), "feet_phase": (5.0, 0.008, False), "pose": (-0.5, None, True),
                   "close_feet_xy": (-10.0, None, True), "feet_ori": (-5.0, None, True), "alive": (10.0, None, False)}
    assert (r.feet_phase.swing_height, r.close_feet_xy.threshold) == (0.09, 0.15)
    assert not hasattr(r.tracking_lin_vel, "sigma")

def test_progress_line_between_log_intervals(capsys):
    names = counter_names([])
    log = MetricsLogger(None, 8, names, pids=[], enabled=False, log_interval=1000, console_interval_s=5.0,
                        max_iterations=100)
    log.start(0, np.zeros(len(names)))
    log.enabled = True  # the console only (no TensorBoard writer was made)
    log.step(3, PhaseTimer(), {})
    assert capsys.readouterr().out == ""  # not yet a console interval
    log._console_t -= 10.0  # 10 s went by
    log._run_t0 -= 10.0
    log._console_due -= 10.0
    log.step(5, PhaseTimer(), {})
    line = capsys.readouterr().out.strip()
    assert re.fullmatch(r"unilab: iter 5/100 \| steps/s \d+ \| ETA 3m\d\ds \| iter \d+\.\d ms", line), line
    assert format_duration(3725) == "1h02m" and format_duration(42) == "42s"


def test_progress_line_of_a_time_limited_run_shows_elapsed_over_the_limit(capsys):
    """With the time limit ending the run first, the line counts time, not a never-reached iteration total."""
    names = counter_names([])
    log = MetricsLogger(None, 8, names, pids=[], enabled=False, log_interval=1000, console_interval_s=5.0,
                        max_iterations=10_000_000, time_limit_s=1200)
    log.start(0, np.zeros(len(names)))
    log.enabled = True  # the console only (no TensorBoard writer was made)
    log._console_t -= 60.0
    log._run_t0 -= 60.0
    log._console_due -= 60.0
    log.step(300, PhaseTimer(), {})
    line = capsys.readouterr().out.strip()
    pattern = r"unilab: iter 300 \(1m00s/20m00s\) \| steps/s \d+ \| ETA 19m00s \| iter \d+\.\d ms"
    assert re.fullmatch(pattern, line), line
    # the iteration count ends it first: the total is shown again
    log.max_iterations = 400
    log._console_t -= 10.0
    log._console_due -= 10.0
    log.step(350, PhaseTimer(), {})
    assert capsys.readouterr().out.startswith("unilab: iter 350/400 |")


def test_first_progress_line_comes_early(capsys, monkeypatch):
    """The first line after FIRST_LINE_S of training, then one per console interval."""
    clock = [100.0]
    monkeypatch.setattr("unilab.runtime.metrics.time.monotonic", lambda: clock[0])
    names = counter_names([])
    log = MetricsLogger(None, 8, names, pids=[], enabled=False, log_interval=1000, console_interval_s=30.0)
    log.start(0, np.zeros(len(names)))
    log.enabled = True  # the console only (no TensorBoard writer was made)
    lines = []
    for it, t in enumerate((1.0, FIRST_LINE_S - 0.1, FIRST_LINE_S + 0.1, 20.0, FIRST_LINE_S + 30.2), start=1):
        clock[0] = 100.0 + t
        log.step(it, PhaseTimer(), {})
        lines.append(capsys.readouterr().out)
    assert [bool(x) for x in lines] == [False, False, True, False, True]
    assert lines[2].startswith("unilab: iter 3 |")

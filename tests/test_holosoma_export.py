"""``unilab-export --format holosoma`` driven by holosoma_inference's own policy classes (the ``test`` extra installs
holosoma-inference; its robot SDK interface and input providers are replaced by fakes): for the same robot state the
file commands what ``unilab-eval`` commands, and the robot it drives in a MuJoCo loop lasts as long."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import holosoma_inference.policies.base as holosoma_base  # the test extra installs holosoma-inference
import numpy as np
import pytest
import torch
from holosoma_inference.config.config_values import inference as hi_configs
from holosoma_inference.policies.locomotion import LocomotionPolicy
from holosoma_inference.policies.wbt import WholeBodyTrackingPolicy

from unilab.algo.sac.agent import FastSAC
from unilab.eval.locomotion import eval_config
from unilab.eval.rollout import EvalOptions, agent_policy, eval_task_config, evaluate
from unilab.runtime.checkpoint import apply_task_overrides, load_checkpoint
from unilab.tasks.registry import make_env, task_config

pytestmark = [pytest.mark.g1, pytest.mark.slow]
STEPS = 120


class FakeRobot:
    """holosoma_inference's robot interface over env 0 of a unilab env: ``get_low_state`` is the state row holosoma's
    SDK interfaces build (base position, quaternion wxyz, joints, base linear and angular velocity, joint rates),
    ``send_low_command`` keeps the commanded joint targets."""

    def __init__(self, env):
        self.env, self.kp_level, self.cmd_q = env, 1.0, None

    def get_low_state(self) -> np.ndarray:
        q, v, m = self.env.pool.qpos[0], self.env.pool.qvel[0], self.env.model
        joints = [m.joint(n) for n in self.env.joint_names]
        return np.concatenate([q[:7], q[[m.jnt_qposadr[j.id] for j in joints]], v[:6],
                               v[[m.jnt_dofadr[j.id] for j in joints]]])[None]

    def send_low_command(self, cmd_q, cmd_dq, cmd_tau, dof_pos, kp_override=None, kd_override=None):
        self.cmd_q = np.array(cmd_q, dtype=np.float64)

    def update_config(self, robot_config):
        self.robot_config = robot_config


class NoInput:
    """Input provider that never commands (the test calls the policy's handlers itself)."""

    def start(self):
        pass

    def poll_velocity(self):
        return None

    def poll_commands(self):
        return []

    def zero(self):
        pass


def _holosoma_policy(cls, config, model_path: Path, robot: FakeRobot, monkeypatch):
    cfg = dataclasses.replace(config, secondary=None, task=dataclasses.replace(
        config.task, model_path=str(model_path), velocity_input="injected", state_input="injected",
        skip_stiff_prompt=True))
    monkeypatch.setattr(holosoma_base, "create_interface", lambda *a, **k: robot)
    policy = cls.__new__(cls)
    policy._injected_velocity_input = policy._injected_command_provider = NoInput()
    policy.__init__(cfg)  # holosoma_inference's own initialisation, unchanged
    return policy


def _env_action(env, robot: FakeRobot) -> np.ndarray:
    """The env action whose PD targets are the commanded ones."""
    return ((robot.cmd_q - env.action_default) / env.action_scale)[None]


@pytest.fixture(scope="module")
def still_clip(tmp_path_factory) -> Path:
    """The built-in clip with its first pose held for three frames: holosoma_inference's first decisions then see
    what unilab's do (unilab.deploy.holosoma, conventions)."""
    from unilab.assets import g1

    data = dict(np.load(g1.motion_paths()[0]))
    for key in ("joint_pos", "joint_vel"):
        data[key] = np.concatenate([np.repeat(data[key][:1], 2, axis=0), data[key]])
    out = tmp_path_factory.mktemp("clip") / "still_start.npz"
    np.savez(out, **data)
    return out


def test_tracking_export_runs_in_holosoma_inference_as_in_unilab_eval(g1_short_run, still_clip, tmp_path,
                                                                      monkeypatch):
    from unilab.deploy.holosoma import export_holosoma

    overrides = {"task.motion_files": [str(still_clip)]}
    res = export_holosoma(g1_short_run, tmp_path / "wbt.onnx", overrides=overrides)
    assert res.kind == "wbt" and res.terms == sorted(res.terms) and res.obs_dim == 154

    payload, _ = load_checkpoint(g1_short_run)
    agent = FastSAC.from_checkpoint(payload["agent"], device="cpu")
    unilab_act = agent_policy(agent)
    torch.set_num_threads(1)
    cfg = eval_task_config(apply_task_overrides(payload["config"]["task"], overrides), False)
    env = make_env("g1_motion_tracking", cfg, 1, pool_kwargs={"nthread": 1})
    robot = FakeRobot(env)
    try:
        env.auto_reset = False
        obs = env.start_at(np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64))
        policy = _holosoma_policy(WholeBodyTrackingPolicy, hi_configs.g1_29dof_wbt, res.path, robot, monkeypatch)
        policy._handle_start_policy()
        policy._handle_start_motion_clip()
        worst, failed = 0.0, None
        for t in range(STEPS):
            mine = unilab_act(obs).astype(np.float64)
            policy.policy_action()  # holosoma_inference: read state, observe, infer, command
            theirs = _env_action(env, robot)
            worst = max(worst, float(np.abs(theirs - mine).max()))
            obs, _, terminated, _, _ = env.step(theirs)
            if terminated[0] and failed is None:
                failed = t + 1
    finally:
        env.close()
    assert worst < 1e-5, f"largest action difference {worst:.3g}"
    # unilab-eval on the same clip from the same start: the same first failure (or none)
    ev = evaluate(g1_short_run, EvalOptions(max_frames=STEPS + 1, progress=False, threads=1,
                                            task_overrides=overrides))
    first = int(ev.first_failure[0])
    assert (None if first < 0 else first) == failed


@pytest.fixture(scope="module")
def loco_run(tmp_path_factory) -> Path:
    """A checkpoint of a few seconds of locomotion training (not a good policy: the contract is tested)."""
    root = tmp_path_factory.mktemp("loco_run")
    cmd = [sys.executable, "-m", "unilab.cli.train", "--algo", "sac_cpu_loco", "--task", "g1_locomotion",
           "algo.num_envs=16", "algo.max_iterations=20", "algo.learning_starts=5", "algo.batch_size=64",
           "training.no_play=true", f"training.log_root={root}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return next((root / "fast_sac" / "g1_locomotion").glob("*_mujoco"))


def test_locomotion_export_runs_in_holosoma_inference_as_in_unilab_eval(loco_run, tmp_path, monkeypatch):
    from unilab.deploy.holosoma import export_holosoma

    res = export_holosoma(loco_run, tmp_path / "loco.onnx")
    assert res.kind == "loco" and res.obs_dim == 100
    assert res.metadata["action_scale"] == [0.25] * 29  # LocomotionPolicy's policy_action_scale

    payload, _ = load_checkpoint(loco_run)
    agent = FastSAC.from_checkpoint(payload["agent"], device="cpu")
    unilab_act = agent_policy(agent)
    torch.set_num_threads(1)
    cfg = eval_config(task_config("g1_locomotion", payload["config"]["task"]), pushes=False)
    command = np.array([[0.5, 0.0, 0.0]])

    def rollout(drive_with_holosoma: bool) -> tuple[float, int | None]:
        env = make_env("g1_locomotion", cfg, 1, pool_kwargs={"nthread": 1}, seed=3)
        robot = FakeRobot(env)
        try:
            env.evaluate(command)
            env.auto_reset = False
            obs = env.reset()
            policy = _holosoma_policy(LocomotionPolicy, hi_configs.g1_29dof_loco, res.path, robot, monkeypatch)
            policy._handle_start_policy()
            policy.lin_vel_command[0] = command[0, :2]
            policy.ang_vel_command[0, 0] = command[0, 2]
            policy.stand_command[0, 0] = 1
            # its loop advances the gait clock before each decision, unilab's env after: start it a step back
            policy.phase = np.array([[-policy.phase_dt, np.pi - policy.phase_dt]])
            worst, failed = 0.0, None
            for t in range(STEPS):  # to the first failure: the env's clock then stops, unilab-eval's count too
                mine = unilab_act(obs).astype(np.float64)
                policy.update_phase_time()
                policy.policy_action()
                theirs = _env_action(env, robot)
                worst = max(worst, float(np.abs(theirs - mine).max()))
                obs, _, terminated, _, _ = env.step(theirs if drive_with_holosoma else mine)
                if terminated[0]:
                    failed = t + 1
                    break
        finally:
            env.close()
        return worst, failed

    worst, failed = rollout(True)
    assert worst < 1e-5, f"largest action difference {worst:.3g}"
    assert rollout(False)[1] == failed  # unilab's own actions: the same survival

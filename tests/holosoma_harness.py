"""holosoma_inference's own policy classes driving a unilab env: its robot SDK interface and input providers replaced
by fakes (needs the ``test`` extra's holosoma-inference). Each rollout compares, at every step, the action holosoma's
code commands with what ``unilab-eval`` commands for the same robot state, and the first failure of both.

    python tests/holosoma_harness.py TRACKING_RUN LOCOMOTION_RUN [--steps N] [--json PATH]

exports both checkpoints with ``--format holosoma`` and writes the comparison (the measurement behind
``docs/results/holosoma_export_roundtrip.json``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
from pathlib import Path

import holosoma_inference.policies.base as holosoma_base
import numpy as np
import torch
import zmq
from holosoma_inference.config.config_values import inference as hi_configs
from holosoma_inference.policies.locomotion import LocomotionPolicy
from holosoma_inference.policies.wbt import WholeBodyTrackingPolicy

from unilab.algo.sac.agent import FastSAC
from unilab.eval.rollout import EvalOptions, agent_policy
from unilab.runtime.checkpoint import apply_task_overrides, load_checkpoint
from unilab.tasks.g1_locomotion.evaluation import eval_config
from unilab.tasks.g1_motion_tracking.evaluation import eval_task_config, evaluate
from unilab.tasks.registry import make_env, task_config


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

    def env_action(self) -> np.ndarray:
        """The env action whose PD targets are the last commanded ones."""
        return ((self.cmd_q - self.env.action_default) / self.env.action_scale)[None]


class NoInput:
    """Input provider that never commands (the harness calls the policy's handlers itself)."""

    def start(self):
        pass

    def poll_velocity(self):
        return None

    def poll_commands(self):
        return []

    def zero(self):
        pass


def holosoma_policy(cls, config, model_path: Path, robot: FakeRobot):
    """``cls`` (a holosoma_inference policy class) built by its own ``__init__`` on ``config`` with the file, the fake
    robot and injected inputs."""
    cfg = dataclasses.replace(config, secondary=None, task=dataclasses.replace(
        config.task, model_path=str(model_path), velocity_input="injected", state_input="injected",
        skip_stiff_prompt=True))
    policy = cls.__new__(cls)
    policy._injected_velocity_input = policy._injected_command_provider = NoInput()
    saved = holosoma_base.create_interface
    holosoma_base.create_interface = lambda *a, **k: robot
    try:
        policy.__init__(cfg)
    finally:
        holosoma_base.create_interface = saved
    return policy


def close_clock(policy) -> None:
    """Close a WholeBodyTrackingPolicy's ZMQ clock subscriber, which holosoma_inference never closes: left to the
    garbage collector, its context's termination can block the process forever."""
    sub = policy.timestep_util._clock._clock_sub
    sub.socket.setsockopt(zmq.LINGER, 0)
    sub.close()


def _agent(checkpoint) -> tuple[dict, object]:
    payload, _ = load_checkpoint(checkpoint)
    torch.set_num_threads(1)
    return payload, agent_policy(FastSAC.from_checkpoint(payload["agent"], device="cpu"))


def drive_tracking(checkpoint, onnx_path: Path, overrides: dict, steps: int) -> dict:
    """WholeBodyTrackingPolicy drives the clip from frame 0; unilab-eval runs the same clip from the same start."""
    payload, unilab_act = _agent(checkpoint)
    raw = apply_task_overrides(payload["config"]["task"], overrides)
    cfg = eval_task_config(task_config(raw["name"], raw), False)
    env = make_env(cfg.name, cfg, 1, pool_kwargs={"nthread": 1})
    robot = FakeRobot(env)
    worst, failed, policy = 0.0, None, None
    try:
        env.auto_reset = False
        obs = env.start_at(np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64))
        policy = holosoma_policy(WholeBodyTrackingPolicy, hi_configs.g1_29dof_wbt, onnx_path, robot)
        policy._handle_start_policy()
        policy._handle_start_motion_clip()
        for t in range(steps):
            mine = unilab_act(obs).astype(np.float64)
            policy.policy_action()  # holosoma_inference: read state, observe, infer, command
            theirs = robot.env_action()
            worst = max(worst, float(np.abs(theirs - mine).max()))
            obs, _, terminated, _, _ = env.step(theirs)
            if terminated[0] and failed is None:
                failed = t + 1
    finally:
        env.close()
        if policy is not None:
            close_clock(policy)
    ev = evaluate(checkpoint, EvalOptions(max_frames=steps + 1, progress=False, threads=1, task_overrides=overrides))
    first = int(ev.first_failure[0])
    return {"steps": steps, "max_action_difference": worst, "first_failure_holosoma_inference": failed,
            "first_failure_unilab_eval": None if first < 0 else first,
            "mpjpe_local_mm_unilab_eval": ev.summary["overall"]["mpjpe_local_mm"]}


def drive_locomotion(checkpoint, onnx_path: Path, steps: int, command=(0.5, 0.0, 0.0), seed: int = 3) -> dict:
    """LocomotionPolicy walks at ``command`` from the task's evaluation start; unilab's actions on the same start."""
    payload, unilab_act = _agent(checkpoint)
    cfg = eval_config(task_config(payload["config"]["task"]["name"], payload["config"]["task"]), pushes=False)
    cmd = np.array([command], dtype=np.float64)

    def rollout(drive_with_holosoma: bool) -> tuple[float, int | None]:
        env = make_env(cfg.name, cfg, 1, pool_kwargs={"nthread": 1}, seed=seed)
        robot = FakeRobot(env)
        worst, failed = 0.0, None
        try:
            env.evaluate(cmd)
            env.auto_reset = False
            obs = env.reset()
            policy = holosoma_policy(LocomotionPolicy, hi_configs.g1_29dof_loco, onnx_path, robot)
            policy._handle_start_policy()
            policy.lin_vel_command[0] = cmd[0, :2]
            policy.ang_vel_command[0, 0] = cmd[0, 2]
            policy.stand_command[0, 0] = 1
            # its loop advances the gait clock before each decision, unilab's env after: start it a step back
            policy.phase = np.array([[-policy.phase_dt, np.pi - policy.phase_dt]])
            for t in range(steps):  # to the first failure: the env's clock then stops, unilab-eval's count too
                mine = unilab_act(obs).astype(np.float64)
                policy.update_phase_time()
                policy.policy_action()
                theirs = robot.env_action()
                worst = max(worst, float(np.abs(theirs - mine).max()))
                obs, _, terminated, _, _ = env.step(theirs if drive_with_holosoma else mine)
                if terminated[0]:
                    failed = t + 1
                    break
        finally:
            env.close()
        return worst, failed

    worst, failed = rollout(True)
    return {"steps": steps, "command": list(command), "max_action_difference": worst,
            "first_failure_holosoma_inference": failed, "first_failure_unilab": rollout(False)[1]}


def still_start_clip(source: Path, out: Path) -> Path:
    """``source`` with its first pose held for three frames: holosoma_inference's first two decisions then see what
    unilab's do (``unilab.deploy.holosoma``, conventions)."""
    data = dict(np.load(source))
    for key in ("joint_pos", "joint_vel"):
        data[key] = np.concatenate([np.repeat(data[key][:1], 2, axis=0), data[key]])
    np.savez(out, **data)
    return out


def main() -> int:
    from unilab.assets import g1
    from unilab.deploy.holosoma import export_holosoma

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("tracking")
    p.add_argument("locomotion")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--json", default=None)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        clip = still_start_clip(g1.motion_paths()[0], Path(tmp) / "still_start.npz")
        overrides = {"task.motion_files": [str(clip)]}
        wbt = export_holosoma(args.tracking, Path(tmp) / "wbt.onnx", overrides=overrides)
        loco = export_holosoma(args.locomotion, Path(tmp) / "loco.onnx")
        source = g1.motion_paths()[0].name
        out = {"tracking": {"checkpoint": str(wbt.checkpoint), "clip": f"{source} with its first pose held 3 frames",
                            **drive_tracking(args.tracking, wbt.path, overrides, args.steps)},
               "locomotion": {"checkpoint": str(loco.checkpoint),
                              **drive_locomotion(args.locomotion, loco.path, args.steps)}}
    text = json.dumps(out, indent=1)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Evaluation of a velocity-command locomotion policy: one fixed command per bin (:func:`bin_commands`), every env one
episode of the task's length in its evaluation mode (:meth:`LocomotionEnv.evaluate`), observation noise off. Per bin:
the fraction surviving to the time-out, mean episode length (s), falls, the forward / lateral velocity and yaw-rate
errors (mean absolute error over the steps before a fall, base frame) and the mean of the tracking reward terms over
those steps (holosoma's nightly metrics are those terms' episode means)."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from unilab.eval.robustness import by_bins, randomized_values
from unilab.eval.rollout import PolicySource, eval_env, policy_config, without_noise

BINS = ("standing", "forward", "lateral", "turning")
HEADLINE = (("survived", "survived", "{:.2f}"), ("vx err", "lin_vel_x_error", "{:.2f} m/s"),
            ("yaw err", "yaw_rate_error", "{:.2f} rad/s"))
"""What training prints of each periodic evaluation: (label, overall metric, format)."""


def bin_commands(speed: float) -> dict[str, tuple[float, float, float]]:
    """Each bin's command (forward, lateral m/s, yaw rad/s) at ``speed``."""
    return {"standing": (0.0, 0.0, 0.0), "forward": (speed, 0.0, 0.0), "lateral": (0.0, speed, 0.0),
            "turning": (0.0, 0.0, speed)}


def eval_config(cfg: Any, pushes: bool, randomization: bool = False) -> Any:
    """``cfg`` for evaluation: observation noise off, pushes as asked, domain randomization off unless kept."""
    return without_noise(cfg, randomization, push=dataclasses.replace(cfg.push, enabled=bool(pushes)))


def evaluate_locomotion(env: Any, policy, speed: float = 0.5, envs_per_bin: int = 16, progress: bool = True,
                        desc: str = "eval", randomization_bins: bool = False) -> dict[str, Any]:
    """Roll ``policy`` (obs dict -> action) out on ``env`` (``4 x envs_per_bin`` envs, bins in :data:`BINS`
    order) for one episode each; the per-bin metrics of the module doc and their mean over bins;
    ``randomization_bins``: also the metrics per bin of each randomized quantity, per command bin
    (:func:`unilab.eval.robustness.by_bins`)."""
    if env.num_envs != len(BINS) * envs_per_bin:
        raise ValueError(f"the env needs {len(BINS)} x {envs_per_bin} envs, has {env.num_envs}")
    by_bin = bin_commands(speed)
    commands = np.repeat(np.array([by_bin[b] for b in BINS]), envs_per_bin, axis=0)
    env.evaluate(commands)
    env.auto_reset = False
    n, steps, dt = env.num_envs, int(env.max_episode_steps), float(env.control_dt)
    alive = np.ones(n, dtype=bool)
    length = np.zeros(n, dtype=np.int64)
    err = np.zeros((n, 3))
    track = np.zeros((n, 2))
    obs = env.reset()
    with tqdm(total=steps, desc=desc, unit="step", file=sys.stderr, disable=not progress, leave=False) as bar:
        for _ in range(steps):
            obs, _, terminated, _, info = env.step(policy(obs))
            s = env.state
            live = alive & ~terminated
            vel = np.stack([s.base_lin_b[:, 0], s.base_lin_b[:, 1], s.base_ang_b[:, 2]], axis=1)
            err[live] += np.abs(vel[live] - commands[live])
            terms = info["reward_terms"]
            track[live, 0] += terms["tracking_lin_vel"][live]
            track[live, 1] += terms["tracking_ang_vel"][live]
            length[live] += 1
            alive &= ~terminated
            bar.update(1)
            if not alive.any():
                break
    env.evaluate(None)
    per = np.maximum(length, 1)[:, None]
    out: dict[str, Any] = {"speed": speed, "episode_s": steps * dt, "control_dt": dt, "envs_per_bin": envs_per_bin,
                           "bins": {}}
    for b, name in enumerate(BINS):
        rows = slice(b * envs_per_bin, (b + 1) * envs_per_bin)
        e, t = err[rows] / per[rows], track[rows] / per[rows]
        out["bins"][name] = {
            "command": list(by_bin[name]),
            "survived": float(alive[rows].mean()),
            "falls": int((~alive[rows]).sum()),
            "episode_length_s": float(length[rows].mean() * dt),
            "lin_vel_x_error": float(e[:, 0].mean()), "lin_vel_y_error": float(e[:, 1].mean()),
            "yaw_rate_error": float(e[:, 2].mean()),
            "rew_tracking_lin_vel": float(t[:, 0].mean()), "rew_tracking_ang_vel": float(t[:, 1].mean()),
        }
    keys = next(iter(out["bins"].values())).keys() - {"command"}
    out["overall"] = {k: float(np.mean([out["bins"][b][k] for b in BINS])) for k in sorted(keys)}
    values = randomized_values(env) if randomization_bins else {}
    if values:
        e = err / per
        per_env = {"survived": alive.astype(np.float64), "episode_length_s": length * dt,
                   "lin_vel_x_error": e[:, 0], "lin_vel_y_error": e[:, 1], "yaw_rate_error": e[:, 2]}
        out["randomization_bins"] = {name: by_bins(values, per_env, rows=np.arange(b * envs_per_bin,
                                                                                   (b + 1) * envs_per_bin))
                                     for b, name in enumerate(BINS)}
    return out


def format_locomotion(result: dict[str, Any]) -> str:
    """A table: one row per bin and the overall mean."""
    cols = ("survived", "episode_length_s", "lin_vel_x_error", "lin_vel_y_error", "yaw_rate_error",
            "rew_tracking_lin_vel", "rew_tracking_ang_vel")
    rows = [f"{'bin':<10}" + "".join(f"{c:>22}" for c in cols)]
    rows += [f"{name:<10}" + "".join(f"{m[c]:>22.3f}" for c in cols)
             for name, m in [*result["bins"].items(), ("overall", result["overall"])]]
    return "\n".join(rows)


def run(task: str, checkpoint: Path | None, policy_kind: str, speed: float, envs_per_bin: int, pushes: bool,
        seed: int, device: str, threads: int | None, overrides: dict[str, Any], progress: bool,
        randomization: bool = False, source: PolicySource | None = None) -> dict[str, Any]:
    """``unilab-eval --task <task>`` of a locomotion task: build the env from the checkpoint's config (or the task's
    defaults for the zero baseline) and evaluate the checkpoint's mean action or the zero action; ``source``: its
    policy on its config instead (a config of ``task``)."""
    if source is None and policy_kind not in ("checkpoint", "zero"):
        raise ValueError(f"--task {task} evaluates --policy checkpoint or zero, got {policy_kind!r}")
    raw, cfg, payload, checkpoint = policy_config(checkpoint, policy_kind, overrides, source, task)
    cfg = eval_config(cfg, pushes, randomization)
    label = policy_kind if source is None else source.path.name
    with eval_env(raw, payload, policy_kind, cfg, len(BINS) * envs_per_bin, device, threads, seed,
                  source, path=checkpoint) as (env, policy):
        result = evaluate_locomotion(env, policy, speed, envs_per_bin, progress, desc=f"eval {label}",
                                     randomization_bins=randomization)
    result.update(task=task, policy=policy_kind if source is None else "onnx", pushes=pushes,
                  randomization=randomization, seed=seed, checkpoint=None if checkpoint is None else str(checkpoint),
                  iteration=None if payload is None else int(payload["iteration"]),
                  **({} if source is None else {"source": source.describe()}))
    return result

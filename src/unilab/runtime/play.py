"""Run a trained policy on a few envs and film env 0 (mp4)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from unilab.algo.sac.agent import FastSAC
from unilab.runtime.checkpoint import load_checkpoint
from unilab.dataclass_config import build_dataclass
from unilab.runtime.config import SimConfig
from unilab.tasks.registry import make_env, task_config


@dataclass
class PlayResult:
    checkpoint: Path
    video: Path | None
    steps: int
    episodes: int
    return_mean: float | None
    length_mean: float | None
    reward_mean: float


def play(
    checkpoint: str | Path,
    num_envs: int = 4,
    steps: int = 250,
    out: str | Path | None = None,
    video: bool = True,
    device: str | None = None,
    seed: int = 1,
    width: int = 320,
    height: int = 240,
) -> PlayResult:
    """Roll out the deterministic policy of ``checkpoint`` (file or run dir).

    Writes ``<run dir>/videos/play_<iter>.mp4`` (or ``out``) unless
    ``video=False``; a machine without offscreen OpenGL gets a clear message
    and the rollout numbers anyway. Frames are small by default: CPU
    rendering (Mesa llvmpipe) costs a few hundred ms per 640x480 frame.
    """
    if num_envs < 1 or steps < 1:
        raise ValueError(f"play needs num_envs >= 1 and steps >= 1, got {num_envs} and {steps}")
    payload, path = load_checkpoint(checkpoint)
    raw = payload["config"]
    name = raw["task"]["name"]
    task_cfg = task_config(name, raw["task"])
    sim = build_dataclass(SimConfig, raw["sim"], "sim")
    kw = sim.pool_kwargs()
    kw["cpu_ids"] = None  # play is small: the default sizing rule
    if kw["nthread"] == "auto":
        kw["nthread"] = None
    agent = FastSAC.from_checkpoint(payload["agent"], device=device or "cpu")
    env = make_env(name, task_cfg, num_envs, pool_kwargs=kw, seed=seed)
    obs = env.reset()
    frames = [env.pool.qpos[0].copy()]
    returns, lengths, rewards = [], [], []
    for _ in range(steps):
        action = agent.act(torch.from_numpy(obs["policy"]), deterministic=True).numpy()
        obs, reward, _, _, info = env.step(action)
        frames.append(env.pool.qpos[0].copy())
        rewards.append(float(np.mean(reward)))
        ep = info.get("episode", {})
        if ep.get("count"):
            returns.append((ep["return_mean"], ep["count"]))
            lengths.append((ep["length_mean"], ep["count"]))
    res = PlayResult(
        checkpoint=path,
        video=None,
        steps=steps,
        episodes=int(sum(c for _, c in returns)),
        return_mean=_weighted(returns),
        length_mean=_weighted(lengths),
        reward_mean=float(np.mean(rewards)),
    )
    print(
        f"play: {path.name}: {steps} steps x {num_envs} envs, mean reward/step {res.reward_mean:.4f}, "
        f"{res.episodes} episodes ended"
        + (f" (return {res.return_mean:.2f}, length {res.length_mean:.1f})" if res.episodes else ""),
        flush=True,
    )
    if video:
        from unilab.render.video import RenderUnavailable, render_states  # noqa: PLC0415

        target = Path(out) if out else path.parent / "videos" / f"play_{payload['iteration']}.mp4"
        fps = 1.0 / getattr(env, "control_dt", env.pool.model.opt.timestep)
        try:
            res.video = render_states(env.pool.model, np.stack(frames), target, fps=fps, width=width, height=height)
            print(f"play: video written to {res.video}", flush=True)
        except RenderUnavailable as err:
            print(f"play: no video: {err}", flush=True)
    env.pool.close()
    return res


def _weighted(pairs: list[tuple[float, int]]) -> float | None:
    n = sum(c for _, c in pairs)
    return sum(v * c for v, c in pairs) / n if n else None

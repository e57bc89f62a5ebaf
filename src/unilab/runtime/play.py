"""Run a trained policy on a few envs and film env 0 (mp4)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from unilab.dataclass_config import build_dataclass
from unilab.paths import check_writable
from unilab.runtime.checkpoint import load_agent, load_checkpoint, stored_run_config
from unilab.runtime.config import PlayConfig, SimConfig
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


def play(checkpoint: str | Path | None, options: PlayConfig | None = None, source: Any = None,
         **changes: Any) -> PlayResult:
    """Roll out the deterministic policy of ``checkpoint`` (file or run dir) in its task and sim, rebuilt from its
    stored config; ``changes`` apply to ``options`` (default ``PlayConfig()``), e.g. ``play(run, num_envs=16,
    video=False)``. Films env 0 to ``<run dir>/videos/play_<iter>.mp4`` (or ``out``) unless ``video=False``; without
    offscreen OpenGL, a clear message and the rollout numbers anyway. Frames are small by default: CPU rendering (Mesa
    llvmpipe) costs a few hundred ms per 640x480 frame. A reference motion is drawn as a ghost, the task's
    ``overlay_text`` on each frame. ``source`` (``unilab.eval.rollout.PolicySource``, e.g. a holosoma-format ONNX):
    its policy on its task config instead of a checkpoint's, a clip-tracking env started at its first frame, the
    video at ``videos/play_<file stem>.mp4`` by default."""
    opts = dataclasses.replace(options or PlayConfig(), **changes)  # validated by PlayConfig
    steps, video = opts.steps, opts.video
    if source is not None:
        payload, path = {"iteration": source.path.stem}, source.path
        raw = {"task": source.raw["task"], "sim": {}}
        task_cfg = task_config(raw["task"]["name"], raw["task"])
    else:
        payload, path = load_checkpoint(checkpoint)
        raw, task_cfg = stored_run_config(payload, path, opts.task_overrides)
    name = raw["task"]["name"]
    kw = build_dataclass(SimConfig, raw["sim"], "sim").pool_kwargs()
    kw["cpu_ids"] = None  # play is small: the default sizing rule
    if kw["nthread"] == "auto":
        kw["nthread"] = None
    folder = Path("videos") if source is not None else path.parent / "videos"
    target = Path(opts.out) if opts.out else folder / f"play_{payload['iteration']}.mp4"
    if video:  # an unwritable video path fails now, not after the rollout
        check_writable(target, "video")
    agent = None if source is not None else load_agent(payload, path, device=opts.device or "cpu")
    env = make_env(name, task_cfg, opts.num_envs, pool_kwargs=kw, seed=opts.seed)
    if source is not None:
        act = source.make_policy(env)
        start = getattr(env, "start_at", None)  # a clip-tracking env: from the clip's first frame
        zeros = np.zeros(env.num_envs, dtype=np.int64)
        obs = start(zeros, zeros) if start is not None else env.reset()
    else:
        def act(o: dict[str, np.ndarray]) -> np.ndarray:
            return agent.act(torch.from_numpy(o["obs"]), deterministic=True).numpy()

        obs = env.reset()
    film = _Film(env, ghost=video and opts.ghost != "off", text=video and opts.text)
    episodes, return_sum, length_sum, rewards = 0, 0, 0, []
    for _ in range(steps):
        obs, reward, _, _, info = env.step(act(obs))
        film.record()
        rewards.append(float(np.mean(reward)))
        ep = info.get("episode", {})
        if n := ep.get("count"):  # episode means weighted by their counts
            episodes += n
            return_sum += ep["return_mean"] * n
            length_sum += ep["length_mean"] * n
    res = PlayResult(checkpoint=path, video=None, steps=steps, episodes=int(episodes),
                     return_mean=return_sum / episodes if episodes else None,
                     length_mean=length_sum / episodes if episodes else None, reward_mean=float(np.mean(rewards)))
    print(f"play: {path.name}: {steps} steps x {opts.num_envs} envs, mean reward/step {res.reward_mean:.4f}, "
          f"{res.episodes} episodes ended"
          + (f" (return {res.return_mean:.2f}, length {res.length_mean:.1f})" if res.episodes else ""), flush=True)
    if video:
        from unilab.render.video import RenderUnavailable, render_states  # noqa: PLC0415 - lazy: only with video

        # encoding takes seconds to minutes: say what is being made before the wait
        print(f"play: rendering {len(film.qpos)} frames at {opts.width}x{opts.height} to {target} ...", flush=True)
        try:
            res.video = render_states(env.render_model(), np.stack(film.qpos), target, fps=1.0 / env.control_dt,
                                      width=opts.width, height=opts.height, ghost=opts.ghost,
                                      ghost_qpos=film.ghost_qpos(), labels=film.labels,
                                      arrows=None if film.arrows is None else np.stack(film.arrows))
            print(f"play: video written to {res.video}", flush=True)
        except RenderUnavailable as err:
            print(f"play: no video: {err}", flush=True)
    env.close()
    return res


class _Film:
    """What each video frame shows of env 0: its pose, the reference pose (ghost) and the task's text."""

    def __init__(self, env: Any, ghost: bool, text: bool):
        self.env = env
        self.ghost = ghost and env.reference_qpos(0) is not None  # None: the task has no reference
        self.qpos: list[np.ndarray] = []
        self.ghosts: list[np.ndarray] = []
        self.labels: list[str] | None = [] if text else None
        self.arrows: list[np.ndarray] | None = [] if env.arrows(0) is not None else None
        self.record()

    def record(self) -> None:
        self.qpos.append(self.env.render_qpos(0))
        if self.ghost:
            self.ghosts.append(self.env.reference_qpos(0))
        if self.labels is not None:
            self.labels.append(self.env.overlay_text(0) or "")
        if self.arrows is not None:
            self.arrows.append(self.env.arrows(0))

    def ghost_qpos(self) -> np.ndarray | None:
        return np.stack(self.ghosts) if self.ghost else None

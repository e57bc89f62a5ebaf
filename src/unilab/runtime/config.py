"""Typed configs of a run: `training` and `sim` (the Hydra groups' schema and defaults, registered by
``unilab.cli.config``), play's options, and `RunSpec`. No torch or mujoco import: ``train --help`` and config validation
load this module without starting anything."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from unilab.algo.sac.config import SACConfig
from unilab.dataclass_config import build_dataclass, check_fields
from unilab.render.video import GHOST_MODES


@dataclass
class PlayConfig:
    """What ``play`` rolls out and films (the one place of play's defaults)."""

    num_envs: int = 4
    """Envs stepped by play (env 0 is filmed)."""
    steps: int = 250
    """Control steps play rolls out and records."""
    seed: int = 1
    """Seed of the env resets."""
    video: bool = True
    """Write an mp4 of env 0; false: only print the rollout numbers."""
    out: str | None = None
    """mp4 path; null: <run dir>/videos/play_<iter>.mp4."""
    device: str | None = None
    """torch device of the policy; null: cpu."""
    width: int = 320
    """Video width in pixels (even)."""
    height: int = 240
    """Video height in pixels (even)."""
    ghost: str = "overlay"
    """Reference motion as a translucent ghost: overlay (where the reference is, on the robot when it
    tracks), side (shifted to its right on screen), off. Tasks without a reference (pendulum) draw none."""
    text: bool = True
    """Write the task's text on each frame (motion tracking: clip, frame, mean tracked-body error in mm)."""
    task_overrides: dict[str, Any] | None = None
    """``{"task.KEY": value}`` changes to the checkpoint's stored task config (a clip or model that moved)."""

    def __post_init__(self) -> None:
        if self.num_envs < 1 or self.steps < 1:
            raise ValueError(f"play needs num_envs >= 1 and steps >= 1, got {self.num_envs} and {self.steps}")
        check_fields(self, "play --", (
            (("ghost",), lambda g: g in GHOST_MODES, f"one of {', '.join(GHOST_MODES)}"),
            # before the rollout, not after it: yuv420p needs even sizes
            (("width", "height"), lambda v: v > 0 and not v % 2, "a positive even number of pixels"),
        ))
        if self.out is not None and Path(self.out).suffix.lower() != ".mp4":
            raise ValueError(f"play --out must end in .mp4, got {self.out}")


@dataclass
class TrainingConfig:
    """How a training run is driven, logged and saved."""

    experiment_name: str | None = None
    """Folder under <log_root>/fast_sac/ (relative, may hold subfolders, no '..'); null uses the task name."""
    log_root: str = "logs"
    """Root directory of run directories (logs/fast_sac/<experiment>/<time>_mujoco/)."""
    log_interval: int = 10
    """Iterations between TensorBoard scalar writes."""
    console_interval_s: float = 5.0
    """Seconds between console progress lines (the first comes after at most 2 s of training)."""
    save_interval: int = 1000
    """Iterations between checkpoints (model_<iter>.pt); a final one is always written; 0: only the final one."""
    save_replay: bool = False
    """Also store the replay buffer in checkpoints (large)."""
    keep_checkpoints: int = 5
    """Keep only the newest this many model_<iter>.pt of a run (older ones are deleted after each save); 0 keeps all."""
    resume: str | None = None
    """Run directory or model_<iter>.pt to continue from; null starts fresh."""
    trace_enabled: bool = False
    """Write a Chrome/Perfetto trace (trace.json) of both processes' phases."""
    trace_max_events: int = 200000
    """Per-process cap on trace events (the oldest run phases are kept)."""
    no_play: bool = False
    """Skip the video of the trained policy at the end of training."""
    play_num_envs: int = PlayConfig.num_envs
    """Envs stepped by play after training (env 0 is filmed)."""
    play_steps: int = PlayConfig.steps
    """Control steps play records after training."""
    learner_threads: int | None = None
    """torch CPU threads of the learner; null: 1 with CUDA, else half the usable CPUs (the pool then gets the
    rest unless sim.nthread or sim.cpu_ids says otherwise)."""
    collector_timeout_s: float = 600.0
    """Longest a step may take before the learner declares the collector hung. With several ranks, a training
    collective waits this and 5 s more for the other ranks, then 3 s for the survivors to report in (5 s when
    the rendezvous store does not answer), before declaring the missing ones lost."""
    startup_timeout_s: float = 900.0
    """Longest the collector may take to build its env (asset fetch, motion loading). With several ranks, the
    larger of this and collector_timeout_s is how long ranks wait for each other at start-up and while rank 0
    saves a checkpoint or an evaluation snapshot."""
    warn_bad_env_fraction: float = 0.05
    """Print a console warning when more than this share of env steps is bad (diverged) over a console interval."""
    max_bad_env_fraction: float | None = 0.95
    """Stop with a 'diverged' error (and a final checkpoint) when at least this share of env steps stays bad for
    divergence_window iterations; with several ranks, one rank's stop stops them all. null never stops."""
    divergence_window: int = 200
    """Iterations (rounded up to log_interval) the bad share must stay at max_bad_env_fraction before training stops."""
    seed: int = 0
    """Seed of the env's resets (the algorithm has algo.seed)."""
    time_limit_s: float | None = None
    """Stop (and save) after this many seconds of training; null: run max_iterations."""
    eval_interval: int = 0
    """Iterations between evaluations (unilab-eval on a policy snapshot, in a niced subprocess; results as
    eval/<metric> in TensorBoard and <run dir>/eval/eval_<iter>.json); 0: none. Tasks whose row has an evaluation."""

    def __post_init__(self) -> None:
        check_fields(self, "training.", (
            (("experiment_name",), lambda n: n is None or n and not Path(n).is_absolute() and ".." not in Path(n).parts,
             "a relative name without '..' (the run goes to <log_root>/fast_sac/<experiment_name>/)"),
            (("keep_checkpoints",), lambda k: not isinstance(k, bool) and isinstance(k, int) and k >= 0,
             "an integer >= 0 (0 keeps all)"),
            # divergence_window is refused, not raised to 1: the stop rule must be the one asked for
            (("log_interval", "play_num_envs", "play_steps", "trace_max_events", "divergence_window"),
             lambda v: v >= 1, "an integer >= 1"),
            (("eval_interval",), lambda v: v >= 0, "an integer >= 0 (0: none)"),
            (("seed",), lambda v: v >= 0, "an integer >= 0 (NumPy's generators take no negative seed)"),
            (("save_interval",), lambda v: v >= 0, "an integer >= 0"),
            (("learner_threads",), lambda v: v is None or v >= 1, "an integer >= 1 or null"),
            # comparisons that are false for nan refuse it too; an infinite timeout would overflow the waits
            (("collector_timeout_s", "startup_timeout_s"), lambda v: v > 0 and math.isfinite(v),
             "a finite number of seconds > 0"),
            (("time_limit_s",), lambda v: v is None or v > 0 and math.isfinite(v),
             "a finite number of seconds > 0, or null (no limit)"),
            (("console_interval_s",), lambda v: v >= 0, ">= 0"),
            (("warn_bad_env_fraction",), lambda v: 0.0 <= v <= 1.0, "in [0, 1]"),
            (("max_bad_env_fraction",), lambda v: v is None or 0.0 <= v <= 1.0, "in [0, 1], or null (never stop)"),
        ))


@dataclass
class SimConfig:
    """Physics backend settings."""

    backend: str = "mujoco"
    """Physics backend; mujoco (mujoco.batch) is the one unilab has."""
    nthread: int | str | None = None
    """Pool threads: an int >= 1; auto (measured, cached); null = min(num_envs, usable CPUs), except in
    training with the learner on the CPU: the usable CPUs its threads leave free (at least 1)."""
    cpu_ids: Any = None
    """Pin pool threads to these CPUs ("0-7", [0,1]); null = no pinning (torchrun ranks get a partition)."""
    persistent: bool = False
    """Keep one MjData per env (slower here; needed for sleep/IPC models)."""
    max_qvel: float | None = 100.0
    """An env whose |qvel| (rad/s, m/s) exceeds this after a step counts as diverged and is reset; null: no bound."""

    def __post_init__(self) -> None:
        check_fields(self, "sim.", (
            (("backend",), lambda b: b == "mujoco", "mujoco (the one sim backend unilab has)"),
            (("nthread",), lambda n: not (isinstance(n, str) and n != "auto" or isinstance(n, int) and n < 1),
             "an int >= 1, auto or null"),
        ))
        c = self.cpu_ids
        if c is not None and not isinstance(c, (str, int)):
            try:
                self.cpu_ids = [int(x) for x in c]
            except (TypeError, ValueError):
                raise ValueError(f"sim.cpu_ids={c}: expected a CPU list such as \"0-7\" or [0, 1], or null") from None

    def pool_kwargs(self) -> dict[str, Any]:
        """Options of the physics pool (``unilab.sim.physics.make_pool``)."""
        cpu_ids = list(self.cpu_ids) if isinstance(self.cpu_ids, list) else self.cpu_ids
        return {"backend": self.backend, "nthread": self.nthread, "cpu_ids": cpu_ids,
                "persistent": bool(self.persistent), "max_qvel": self.max_qvel}


@dataclass
class RunSpec:
    """A validated training run: typed configs plus the raw config to store."""

    algo: SACConfig
    task_name: str
    task_cfg: Any
    """The task's typed config (e.g. MotionTrackingConfig); it crosses to the collector as it is."""
    sim: SimConfig
    training: TrainingConfig
    raw: dict[str, Any] = field(default_factory=dict)
    """The composed config as plain data: checkpoints and config.yaml store it; play rebuilds from it."""
    explicit_algo_keys: tuple[str, ...] | None = None
    """The algo keys the user set (command-line overrides); on resume every other algo key comes
    from the checkpoint. None: all of ``algo`` is explicit (e.g. an --algo preset was named)."""
    recipe: str | None = None
    """The algo preset the config was composed from (``--algo`` or the task's default), for messages."""

    @classmethod
    def from_raw(cls, raw: Any, explicit_algo_keys: tuple[str, ...] | None = None) -> RunSpec:
        """Validate a composed config (or a checkpoint's stored one) into typed configs: field types and every config's
        range checks, ValueErrors naming the key. The one place a config is validated: the collector and play get its
        objects."""
        from unilab.tasks import registry  # noqa: PLC0415 - lazy: the task registry pulls in numpy

        if isinstance(raw, DictConfig):
            raw = OmegaConf.to_container(raw, resolve=True)
        raw = dict(raw)
        for group in ("algo", "task", "sim", "training"):
            if not isinstance(raw.get(group), dict):
                raise ValueError(f"the config has no {group!r} section")
        name = raw["task"].get("name")
        if not name:
            raise ValueError("the task config has no 'name'")
        spec = cls(algo=SACConfig.from_mapping(raw["algo"]), task_name=name,
                   task_cfg=registry.task_config(name, raw["task"]), sim=build_dataclass(SimConfig, raw["sim"], "sim"),
                   training=build_dataclass(TrainingConfig, raw["training"], "training"), raw=raw,
                   explicit_algo_keys=explicit_algo_keys)
        if spec.training.eval_interval and registry.TASKS[name].evaluation is None:
            # refused now: otherwise every evaluation would fail in its subprocess, each with a warning
            raise ValueError(f"training.eval_interval={spec.training.eval_interval}: task {name} has no evaluation; "
                             "leave it at 0")
        return spec

    def check_paths(self) -> None:
        """Files the run reads exist (training.resume, the task's model and motion files); checked before any run
        directory is made."""
        resume = self.training.resume
        if resume is not None and not Path(resume).expanduser().exists():
            raise ValueError(f"training.resume={resume}: {resume} does not exist "
                             "(expected a run directory or a model_<iter>.pt file, or null)")
        check = getattr(self.task_cfg, "check_paths", None)
        if check is not None:
            check()

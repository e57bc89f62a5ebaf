"""Typed configs of the `training` and `sim` groups (mirrored by their YAML)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class TrainingConfig:
    """How a training run is driven, logged and saved."""

    experiment_name: str | None = None
    """Name under logs/fast_sac/; null uses the task name."""
    log_root: str = "logs"
    """Root directory of run directories (logs/fast_sac/<experiment>/<time>_mujoco/)."""
    log_interval: int = 10
    """Iterations between TensorBoard scalar writes."""
    console_interval_s: float = 5.0
    """Seconds between console progress lines."""
    save_interval: int = 1000
    """Iterations between checkpoints (model_<iter>.pt); a final one is always written."""
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
    play_num_envs: int = 4
    """Envs stepped by play (env 0 is filmed)."""
    play_steps: int = 250
    """Control steps play records."""
    learner_threads: int | None = None
    """torch CPU threads of the learner; null: 1 with CUDA, else half the usable CPUs."""
    collector_timeout_s: float = 600.0
    """Longest a step may take before the learner declares the collector hung."""
    startup_timeout_s: float = 900.0
    """Longest the collector may take to build its env (asset fetch, motion loading)."""
    warn_bad_env_fraction: float = 0.05
    """Print a console warning when more than this share of env steps is bad (diverged) over a console interval."""
    max_bad_env_fraction: float | None = 0.95
    """Stop with a 'diverged' error when at least this share of env steps stays bad for divergence_window iterations; null never stops."""
    divergence_window: int = 200
    """Iterations (rounded up to log_interval) the bad share must stay at max_bad_env_fraction before training stops."""
    seed: int = 0
    """Seed of the env's resets (the algorithm has algo.seed)."""
    time_limit_s: float | None = None
    """Stop (and save) after this many seconds of training; null: run max_iterations."""

    def __post_init__(self) -> None:
        k = self.keep_checkpoints
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise ValueError(f"training.keep_checkpoints must be an integer >= 0 (0 keeps all), got {k!r}")


@dataclass
class SimConfig:
    """Physics backend settings."""

    backend: str = "mujoco"
    """Physics backend; mujoco (mujoco.batch) is the one unilab has."""
    nthread: Any = None
    """Pool threads: null = min(num_envs, usable CPUs); an int; or auto (measured, cached)."""
    cpu_ids: Any = None
    """Pin pool threads to these CPUs ("0-7", [0,1]); null = no pinning (torchrun ranks get a partition)."""
    persistent: bool = False
    """Keep one MjData per env (slower here; needed for sleep/IPC models)."""
    max_qvel: float | None = 100.0
    """An env whose |qvel| (rad/s, m/s) exceeds this after a step counts as diverged and is reset; null: no bound."""

    def pool_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of BatchEnvPool."""
        if self.backend != "mujoco":
            raise ValueError(f"unknown sim backend {self.backend!r}; unilab has: mujoco")
        cpu_ids = self.cpu_ids
        if cpu_ids is not None and not isinstance(cpu_ids, (str, int)):
            cpu_ids = [int(c) for c in cpu_ids]
        return {"nthread": self.nthread, "cpu_ids": cpu_ids, "persistent": bool(self.persistent), "max_qvel": self.max_qvel}

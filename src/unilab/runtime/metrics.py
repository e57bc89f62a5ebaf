"""TensorBoard scalars of the learner timers and collector counters every ``log_interval`` iterations (per-phase
values: means per iteration over the interval; steps: env steps summed over all envs), and a console progress line every
``console_interval_s`` seconds whatever the log interval (the first after at most :data:`FIRST_LINE_S`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from unilab.runtime.stats import STAT, Counters, delta
from unilab.sim.spec import EnvSpec
from unilab.telemetry.phase_timer import PhaseTimer

FIRST_LINE_S = 2.0  # the first progress line: start-up already took seconds, show the rate soon


class TrainingDiverged(RuntimeError):
    """(Nearly) every env stayed in a bad state for training.divergence_window iterations."""


class MetricsLogger:
    """See module docs. ``enabled=False`` (non-zero ranks) keeps only the bookkeeping."""

    def __init__(self, run_dir: Path, num_envs: int, counter_names: list[str], pids: list[int], enabled: bool = True,
                 log_interval: int = 10, console_interval_s: float = 5.0, warn_bad_env_fraction: float = 0.05,
                 max_bad_env_fraction: float | None = None, divergence_window: int = 200,
                 max_iterations: int | None = None, time_limit_s: float | None = None,
                 agree: Callable[[bool], bool] | None = None):
        self.run_dir = run_dir
        self.max_iterations = max_iterations
        self.time_limit_s = time_limit_s
        self.num_envs = num_envs
        self.names = counter_names
        self.enabled = enabled
        self.log_interval = max(1, int(log_interval))
        self.console_interval_s = console_interval_s
        self.writer = None
        self.sampler = None
        if enabled:
            # lazy (tensorboard, psutil): only the logging rank needs them
            from unilab.telemetry.cpu_sampler import CpuSampler  # noqa: PLC0415
            from unilab.telemetry.scalars import ScalarWriter  # noqa: PLC0415

            self.writer = ScalarWriter(str(run_dir))
            self.sampler = CpuSampler(pids)
        self.last: dict[str, float] = {}
        self._counters: Counters | None = None
        self.warn_bad_env_fraction = warn_bad_env_fraction
        self.max_bad_env_fraction = max_bad_env_fraction
        self.divergence_window = max(1, int(divergence_window))
        self._bad_since: int | None = None  # first iteration of the current run of (nearly) all-bad intervals
        self.agree = agree
        """With several ranks: ``flag -> any rank's flag``, called by every rank at every log iteration so all stop
        together when one diverges (one left running would wait out its next gradient all-reduce's timeout)."""
        self._console_bad = [0.0, 0.0, 0]  # bad env steps, env steps, iterations since the last console line

    def banner(self, spec: Any, env: EnvSpec, device: Any, dist: Any, learner_threads: int) -> None:
        if not self.enabled:
            return
        a = spec.algo
        print(f"unilab: FastSAC on {spec.task_name}: {a.num_envs} envs, obs {env.obs_dim}/{env.critic_obs_dim}, "
              f"action {env.action_dim}, learner on {device} (torch threads: {learner_threads}), collector pool "
              f"nthread={env.nthread} cpu_ids={None if env.cpu_ids is None else list(env.cpu_ids)} "
              f"persistent={env.persistent}, ranks={dist.world_size}", flush=True)
        print(f"unilab: logging to {self.run_dir}", flush=True)
        if a.early_lr is not None and a.early_lr_env_steps > 0:  # it overrides the two rates the user may have set
            print(f"unilab: learning rate {a.early_lr:g} for actor and critic until {a.early_lr_env_steps:,} env "
                  f"steps, then algo.actor_lr={a.actor_lr:g}, algo.critic_lr={a.critic_lr:g} "
                  "(algo.early_lr=null: those from the start)", flush=True)
        if str(device) == "cpu" and a.batch_size * sum(a.critic_hidden_dims) > 2_000_000:
            print(f"unilab: note: the learner is on the CPU with GPU-sized settings (batch {a.batch_size}, critic "
                  f"{a.critic_hidden_dims}); `--algo sac_cpu` is sized for a CPU learner", flush=True)

    def start(self, iteration: int, counters: np.ndarray) -> None:
        self._counters = Counters(counters, self.names)
        self._c0 = self._counters.snapshot()
        self._it0 = self._console_it = self._run_it0 = iteration  # _run_*: the whole run's, for the ETA
        self._t0 = self._console_t = self._run_t0 = time.monotonic()
        self._console_due = self._t0 + min(FIRST_LINE_S, self.console_interval_s)
        if self.sampler is not None:
            self.sampler.sample()

    def due(self, iteration: int) -> bool:
        return iteration % self.log_interval == 0

    def step(self, iteration: int, timer: PhaseTimer, train_metrics: dict[str, float]) -> None:
        """Called once per iteration; logs when due, prints progress every console interval."""
        if self.due(iteration):
            self._log(iteration, timer, train_metrics)
        now = time.monotonic()
        if self.enabled and now >= self._console_due:
            self._console(iteration, now)
            self._warn_bad_envs()
            self._console_t = now
            self._console_due = now + self.console_interval_s

    def _log(self, iteration: int, timer: PhaseTimer, train_metrics: dict[str, float]) -> None:
        """TensorBoard scalars of the interval since the last log."""
        now = time.monotonic()
        d_it, wall = iteration - self._it0, now - self._t0
        c1 = self._counters.snapshot()
        d = delta(c1, self._c0)
        lt = timer.pop_summary()
        s: dict[str, float] = {"perf/steps_per_sec": self.num_envs * d_it / wall if wall > 0 else 0.0,
                               "perf/iter_ms": wall / d_it * 1000 if d_it else 0.0}
        for phase in ("learner_act", "learner_train", "learner_collector_wait", "learner_replay_write"):
            s[f"timing/{phase}_ms"] = lt[phase].wall_ms_total / d_it if phase in lt and d_it else 0.0
        n_c = d.get("iterations", 0.0)
        if n_c > 0:
            s["timing/collector_env_step_ms"] = d["env_step_ms"] / n_c
            s["timing/collector_env_step_backend_ms"] = d["backend_step_ms"] / n_c
            s["timing/collector_env_step_update_state_ms"] = d["update_state_ms"] / n_c
            s["timing/collector_env_step_reset_done_ms"] = d["reset_done_ms"] / n_c
            s["timing/collector_learner_action_wait_ms"] = d["action_wait_ms"] / n_c
            s["timing/collector_replay_write_ms"] = d["replay_write_ms"] / n_c
            active_s = (d["env_step_ms"] + d["replay_write_ms"]) / 1000.0
            s["perf/collector_active_steps_per_sec"] = self.num_envs * n_c / active_s if active_s > 0 else 0.0
            for phase in ("env_step", "backend_step", "update_state", "reset_done"):
                if d[f"{phase}_ms"] > 0:
                    s[f"cpu/collector_{phase}_cores"] = d[f"{phase}_cpu_ms"] / d[f"{phase}_ms"]
            s["reward/mean"] = d["reward_sum"] / n_c
            s["env/bad_envs_per_step"] = d["bad_envs"] / n_c
            for n in self.names:
                if n.startswith("reward_term/"):
                    s[f"reward/{n.split('/', 1)[1]}"] = d[n] / n_c
                elif n.startswith(STAT):  # a task scalar (e.g. randomization/friction): its mean per step
                    s[n[len(STAT):]] = d[n] / n_c
        if d.get("episodes", 0.0) > 0:
            s["episode/return_mean"] = d["episode_return_sum"] / d["episodes"]
            s["episode/length_mean"] = d["episode_length_sum"] / d["episodes"]
            s["episode/count"] = d["episodes"]
            for n in self.names:
                if n.startswith("termination/"):  # the share of ended episodes this condition ended
                    s[n] = d[n] / d["episodes"]
        elif "episode/return_mean" in self.last:  # keep curves continuous on long episodes
            s["episode/return_mean"] = self.last["episode/return_mean"]
            s["episode/length_mean"] = self.last["episode/length_mean"]
        s.update({f"train/{k}": v for k, v in train_metrics.items()})
        if self.sampler is not None:
            s.update(self.sampler.sample())
        if self.writer is not None:
            self.writer.add_dict(s, iteration * self.num_envs)
        self.last = s
        diverged = None
        if n_c > 0:
            self._console_bad[0] += d["bad_envs"]
            self._console_bad[1] += n_c * self.num_envs
            self._console_bad[2] += d_it
            diverged = self._check_divergence(self._it0, iteration, d["bad_envs"] / (n_c * self.num_envs))
        self._c0, self._it0, self._t0 = c1, iteration, now
        # every rank asks at every log iteration (whatever its own counters), so the collective always matches
        # (the limit is the same on every rank, so with no limit no rank asks)
        if (self.agree is not None and self.max_bad_env_fraction is not None and self.agree(diverged is not None)
                and diverged is None):
            diverged = (f"training diverged on another rank at iteration {iteration} (its envs stayed in a bad "
                        "state; that rank's error names the limit); this rank stops with it")
        if diverged is not None:
            self.close()
            raise TrainingDiverged(diverged)

    def _check_divergence(self, it0: int, iteration: int, bad_fraction: float) -> str | None:
        """The stop message once the bad share stayed at the limit for divergence_window iterations, else None."""
        limit = self.max_bad_env_fraction
        if limit is None or bad_fraction < limit:
            self._bad_since = None
            return None
        if self._bad_since is None:
            self._bad_since = it0
        if iteration - self._bad_since < self.divergence_window:
            return None
        return (f"training diverged: at least {limit:.0%} of the envs were in a bad state (non-finite, MuJoCo "
                f"divergence warning, or |qvel| over sim.max_qvel) in each of the last {iteration - self._bad_since} "
                f"iterations (up to iteration {iteration}); check the task's reset noise, sim_dt and actions "
                f"(training.max_bad_env_fraction / training.divergence_window set this stop; null disables it)")

    def _warn_bad_envs(self) -> None:
        """One console line per console interval when too many env steps were bad."""
        bad, steps, its = self._console_bad
        self._console_bad = [0.0, 0.0, 0]
        if steps > 0 and bad / steps > self.warn_bad_env_fraction:
            stop = (f"; training stops when {self.max_bad_env_fraction:.0%} stay bad for {self.divergence_window} "
                    "iterations" if self.max_bad_env_fraction is not None else "")
            print(f"unilab: warning: {100 * bad / steps:.0f} % of envs diverged (bad state) in the last {its} "
                  f"iterations; they are reset with zero reward (env/bad_envs_per_step in TensorBoard). Check the "
                  f"task's reset noise and sim_dt{stop}", flush=True)

    def _console(self, iteration: int, now: float) -> None:
        """One progress line: iterations, steps/s and ETA, then the latest logged numbers (if any yet)."""
        s = self.last
        done, wall = iteration - self._console_it, now - self._console_t  # the rate since the last line
        self._console_it = iteration
        # seconds to max_iterations at the mean rate so far, and to the time limit; None where unknown
        run_done, run_wall = iteration - self._run_it0, now - self._run_t0
        to_iters = (max(0, self.max_iterations - iteration) * run_wall / run_done
                    if self.max_iterations is not None and run_done > 0 else None)
        to_time = None if self.time_limit_s is None else max(0.0, self.time_limit_s - run_wall)
        # the limit that comes first ends the run: show the iteration count, or elapsed / limit for the time limit
        eta = to_iters
        total = f"/{self.max_iterations:,}" if self.max_iterations is not None else ""
        if to_time is not None and (to_iters is None or to_time < to_iters):
            eta, total = to_time, f" ({format_duration(run_wall)}/{format_duration(self.time_limit_s)})"
        parts = [f"iter {iteration:,}{total}", f"steps/s {self.num_envs * done / wall if wall > 0 else 0.0:,.0f}",
                 f"ETA {format_duration(eta) if eta is not None else '?'}",
                 f"iter {1000 * wall / done if done else 0.0:.1f} ms"]
        if "timing/collector_env_step_ms" in s:
            parts.append(f"env {s['timing/collector_env_step_ms']:.1f} ms")
        if "timing/learner_train_ms" in s:
            parts.append(f"train {s['timing/learner_train_ms']:.1f} ms")
        if "episode/return_mean" in s:
            parts += [f"return {s['episode/return_mean']:.2f}", f"ep_len {s['episode/length_mean']:.1f}"]
        ends = {k.split("/", 1)[1]: v for k, v in s.items() if k.startswith("termination/")}
        if ends:  # the failure condition that ended most episodes: what the policy is losing to
            top = max(ends, key=ends.get)
            parts.append(f"ended by {top} {100 * ends[top]:.0f} %")
        if "reward/mean" in s:
            parts.append(f"reward {s['reward/mean']:.4f}")
        print("unilab: " + " | ".join(parts), flush=True)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.flush()
            self.writer.close()
            self.writer = None


def format_duration(seconds: float) -> str:
    """``1h02m``, ``3m05s`` or ``42s``."""
    t = int(round(seconds))
    if t >= 3600:
        return f"{t // 3600}h{t % 3600 // 60:02d}m"
    if t >= 60:
        return f"{t // 60}m{t % 60:02d}s"
    return f"{t}s"

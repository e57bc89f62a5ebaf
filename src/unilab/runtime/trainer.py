"""The learner process side of training: agent, replay, metrics, checkpoints.

The learner owns the networks and replay on its device; a collector process (``unilab.runtime.collector``) owns the env.
Each iteration the learner sends the actions for the step just received (all the collector waits for), then stores the
previous step and trains while the env steps into shared memory (two slots: the step read is never the one written):

    learner:   act -> | store | train ......... | wait | act -> | store | train ...
    collector:        | env.step | counters |          |        | env.step | ...
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import yaml

from unilab.algo.sac.agent import FastSAC
from unilab.algo.sac.config import SACConfig
from unilab.algo.sac.device import resolve_device
from unilab.algo.sac.replay import ReplayBuffer
from unilab.runtime import console, distributed, shm
from unilab.runtime.checkpoint import CheckpointWriteError, checkpoint_path, load_checkpoint, save_checkpoint
from unilab.runtime.collector import CollectorArgs
from unilab.runtime.collector_client import CollectorClient, CollectorDied
from unilab.runtime.config import RunSpec, TrainingConfig
from unilab.runtime.iteration import LearnerIteration
from unilab.runtime.metrics import MetricsLogger, TrainingDiverged
from unilab.runtime.periodic_eval import FINAL_WAIT_S, PeriodicEval
from unilab.runtime.signals import StopSignals
from unilab.sim import cpu
from unilab.sim.spec import EnvSpec
from unilab.tasks import registry
from unilab.telemetry.phase_timer import PhaseTimer
from unilab.telemetry.trace import TraceRecorder, merge_traces


def stream_seed(seed: int, iteration: int) -> int:
    """The seed of a random stream that starts at ``iteration``: ``seed`` itself at 0, and at a resume one
    that neither repeats the first iterations' stream nor another rank's (whose ``seed`` differs)."""
    return seed if iteration == 0 else (seed << 32) + iteration


def learner_threads(usable: int, setting: int | None, on_cuda: bool) -> int:
    """torch threads of the learner: ``training.learner_threads``, else 1 when it trains on a GPU (its host
    work is launching kernels), else half the ``usable`` CPUs."""
    if setting is not None:
        return int(setting)
    return 1 if on_cuda else max(1, usable // 2)


def pool_threads(usable: int, learner_setting: int | None, on_cuda: bool) -> int | None:
    """Physics pool threads when ``sim.nthread`` and ``sim.cpu_ids`` are unset: with the learner on the CPU, the CPUs
    its threads leave free (at least 1): a pool thread on a learner's core makes both wait for each other's time slices,
    and the learner's updates are what bounds a CPU run. With a GPU, None (the pool's own rule: every usable CPU)."""
    return None if on_cuda else max(1, usable - learner_threads(usable, learner_setting, on_cuda))


@dataclass
class TrainResult:
    checkpoint: Path | None
    stop_signal: int | None = None
    """SIGINT, SIGTERM or SIGHUP when a signal stopped the run."""

    @property
    def exit_code(self) -> int:
        """0, or 128 + the signal that stopped the run (130 Ctrl-C, 143 SIGTERM, 129 SIGHUP)."""
        return 128 + self.stop_signal if self.stop_signal else 0


class NonFiniteTraining(RuntimeError):
    """The learner's losses, gradients or weights stayed NaN/inf: training stopped."""


def make_run_dir(training: TrainingConfig, task_name: str, rank: int = 0) -> Path:
    """logs/fast_sac/<experiment>/<YYYY-MM-DD_HH-MM-SS>_mujoco/ (unique)."""
    exp = training.experiment_name or task_name
    stamp = time.strftime("%Y-%m-%d_%H-%M-%S")
    base = Path(training.log_root) / "fast_sac" / exp
    suffix = "_mujoco" if rank == 0 else f"_mujoco_rank{rank}"
    target = base
    try:
        base.mkdir(parents=True, exist_ok=True)
        # mkdir itself is the claim (no exists() check first): two runs started in the same second never share
        # a directory nor fail; the later one takes the next free -<k>
        for k in range(10_000):
            target = base / (f"{stamp}{suffix}" if k == 0 else f"{stamp}-{k}{suffix}")
            try:
                target.mkdir()
            except FileExistsError:
                continue
            return target
    except OSError as err:  # read-only, not a directory, no permission: a config problem, not a crash
        raise ValueError(f"training.log_root={training.log_root}: cannot create {target} "
                         f"({type(err).__name__}: {err.strerror or err})") from err
    raise FileExistsError(f"no free run directory name {stamp}-<k>{suffix} under {base}")


CONSOLE_LOG = "console.log"
"""The run's console output from the moment stdout or stderr could no longer be written (``runtime.console``)."""


def remove_unused_run_dir(run: Path) -> None:
    """Delete ``run`` if it holds nothing but config.yaml (and console.log) (and its experiment folder if that is then
    empty)."""
    with contextlib.suppress(OSError):
        if any(p.name not in ("config.yaml", CONSOLE_LOG) for p in run.iterdir()):
            return
        for name in ("config.yaml", CONSOLE_LOG):
            (run / name).unlink(missing_ok=True)
        run.rmdir()
        run.parent.rmdir()  # only succeeds when no other run is in it


# training keys that decide when the ranks meet in a collective (log_interval: the divergence vote)
COLLECTIVE_TRAINING_KEYS = ("log_interval", "save_interval", "eval_interval", "max_bad_env_fraction")
# algo keys that shape the networks: a checkpoint cannot be loaded under other values
RESUME_SHAPE_KEYS = ("actor_hidden_dims", "critic_hidden_dims", "num_q", "layer_norm", "distributional",
                     "num_atoms", "activation")


class Trainer:
    """Runs FastSAC on one task with a collector process; see module docs."""

    def __init__(self, spec: RunSpec, run_dir: Path | None = None):
        self.spec = spec
        # the default group's collectives wait for a slow rank's start-up (Numba compile) or rank 0's saves;
        # training's own group (``_join_ranks``) waits one collector step
        self.dist = distributed.from_env(max(spec.training.startup_timeout_s, spec.training.collector_timeout_s),
                                         cuda=resolve_device(spec.algo.device).type == "cuda")
        self.run_dir = run_dir or make_run_dir(spec.training, spec.task_name, self.dist.rank)
        if self.dist.rank == 0:  # console output that cannot be written goes on in the run directory
            console.divert_to(self.run_dir / CONSOLE_LOG)
        self.timer = PhaseTimer(
            trace=TraceRecorder("learner", spec.training.trace_max_events) if spec.training.trace_enabled else None)
        self.iteration = 0
        self.signals = StopSignals()
        self.stop_signal: int | None = None
        self._resume_payload: tuple[dict[str, Any], Path] | None = None
        self.last_checkpoint: Path | None = None
        self.evaluator: PeriodicEval | None = None
        self._learner_built = False
        """Agent and replay buffer exist (and a resume is loaded): from here on the run directory is kept."""

    # ------------------------------------------------------------------ setup
    def _pool_kwargs(self) -> dict[str, Any]:
        kw = self.spec.sim.pool_kwargs()
        if self.dist.world_size > 1 and kw["cpu_ids"] is None:
            # the one path that pins by default: disjoint CPU sets per rank
            kw["cpu_ids"] = distributed.cpu_partition(
                cpu.usable_cpus(), self.dist.local_rank, self.dist.local_world_size)
            kw["nthread"] = None
        elif kw["cpu_ids"] is None and kw["nthread"] is None:
            n = pool_threads(cpu.usable_cpu_count(), self.spec.training.learner_threads,
                             resolve_device(self.spec.algo.device).type == "cuda")
            kw["nthread"] = None if n is None else min(n, self.spec.algo.num_envs)  # never more threads than envs
        return kw

    def _collector_args(self) -> CollectorArgs:
        tr = self.spec.training
        return CollectorArgs(
            task_name=self.spec.task_name, task_cfg=self.spec.task_cfg, num_envs=self.spec.algo.num_envs,
            pool_kwargs=self._pool_kwargs(),
            seed=stream_seed(tr.seed + 1000 * self.dist.rank, self._resume_iteration()),
            trace_path=str(self.run_dir / "trace_collector.json") if tr.trace_enabled else None,
            startup_timeout_s=tr.startup_timeout_s)

    def _build(self, env: EnvSpec) -> tuple[FastSAC, ReplayBuffer]:
        a = self.spec.algo
        if a.use_symmetry and env.mirror is None:  # say where the setting came from: often a recipe, not the user
            explicit = self.spec.explicit_algo_keys
            origin = ("algo.use_symmetry=true" if self.spec.recipe is None or explicit and "use_symmetry" in explicit
                      else f"--algo {self.spec.recipe} sets algo.use_symmetry=true, which")
            raise ValueError(f"{origin} trains on left/right mirrored copies, but task {self.spec.task_name} has no "
                             f"mirror ({env.mirror_error}): add algo.use_symmetry=false, or choose a recipe without it")
        agent = FastSAC(a, env.obs_dim, env.critic_obs_dim, env.action_dim, action_bound=env.action_bound,
                        mirror=env.mirror, mirror_error=env.mirror_error)
        if self.dist.world_size > 1:
            distributed.broadcast_parameters(agent)
        if self.dist.rank > 0:  # the same networks, other noise: rank 0 keeps the stream algo.seed started
            torch.manual_seed(stream_seed(a.seed + self.dist.rank, 0))
        replay = ReplayBuffer(a.num_envs, a.buffer_size, env.record, n_steps=a.n_steps, gamma=a.gamma,
                              device=agent.device, seed=a.seed + self.dist.rank)
        return agent, replay

    def _check_ranks_agree(self, env: EnvSpec) -> None:
        """With several ranks, before any rank builds its networks: every rank must build the same ones and
        run the same iterations and collectives (waits out each rank's start-up, under the start-up timeout)."""
        if self.dist.world_size == 1:
            return
        distributed.check_same_settings({
            "task": self.spec.task_name,
            "start iteration": self._resume_iteration(),
            "env observation, critic observation and action sizes": (env.obs_dim, env.critic_obs_dim, env.action_dim),
            **{f"algo.{k}": v for k, v in self.spec.algo.to_dict().items() if k != "device"},
            **{f"training.{k}": getattr(self.spec.training, k) for k in COLLECTIVE_TRAINING_KEYS},
        })

    def _check_ranks_resumed_alike(self, agent: FastSAC, replay: ReplayBuffer) -> None:
        """With several ranks: the same networks and as many stored steps on every rank. Each rank resumes from its own
        copy of the checkpoint: another copy would train other networks, fewer steps would update on some ranks only."""
        if self.dist.world_size > 1:
            distributed.check_same_settings({
                "network fingerprint after the resume": distributed.weights_fingerprint(agent),
                "replay steps after the resume": replay.size})

    def _join_ranks(self, agent: FastSAC) -> Callable[[bool], bool] | None:
        """With several ranks: wait until every rank is ready to train, then sync gradients and statistics in a group
        whose collectives wait one collector step, so a rank that hangs in training stops the others after
        training.collector_timeout_s, not the start-up's timeout. Returns the stop vote (any rank's flag), or None."""
        if self.dist.world_size == 1:
            return None
        distributed.barrier("the start of training")
        group = distributed.training_group(self.spec.training.collector_timeout_s)
        agent.grad_sync = functools.partial(distributed.average_gradients, group=group)
        agent.stats_sync = functools.partial(distributed.all_reduce_sum, group=group)
        return functools.partial(distributed.any_rank, group=group)

    # ---------------------------------------------------------------- running
    def train(self) -> TrainResult:
        """Run until max_iterations, the time limit, Ctrl-C or a collector failure."""
        try:
            if self.spec.training.resume:  # a wrong path or setting fails before any process starts
                self._resume_payload = self._load_resume()
            (self.run_dir / "config.yaml").write_text(yaml.safe_dump(self.spec.raw, sort_keys=False))
            # what ``kill -9`` runs left in /dev/shm; this run's semaphores are named so the next start can find them
            if removed := shm.remove_stale_segments():
                print(f"unilab: removed {len(removed)} shared-memory segment(s) of dead runs from {removed[0].parent}",
                      flush=True)
            shm.name_semaphores()
            col = CollectorClient(self._collector_args(), step_timeout_s=self.spec.training.collector_timeout_s)
        except BaseException:
            remove_unused_run_dir(self.run_dir)  # a run whose env never came up leaves no directory
            raise
        try:
            with self.signals:
                return self._train(col)
        except BaseException:
            if not self._learner_built:  # no replay memory, a bad device, Ctrl-C: nothing ran, no directory left
                col.close()  # first: the collector may still write into the run directory
                remove_unused_run_dir(self.run_dir)
            raise
        finally:
            col.close()
            if self.evaluator is not None:
                self.evaluator.close()

    def _train(self, col: CollectorClient) -> TrainResult:
        tr, a = self.spec.training, self.spec.algo
        env = col.spec
        self._check_ranks_agree(env)
        agent, replay = self._build(env)
        torch.set_num_threads(learner_threads(cpu.usable_cpu_count(), tr.learner_threads, agent.device.type == "cuda"))
        start_iter = self._maybe_resume(agent, replay)
        self._check_ranks_resumed_alike(agent, replay)
        self._learner_built = True
        self.iteration = start_iter
        metrics = MetricsLogger(
            self.run_dir, a.num_envs, col.counter_names, [os.getpid(), col.pid], enabled=self.dist.rank == 0,
            log_interval=tr.log_interval, console_interval_s=tr.console_interval_s,
            warn_bad_env_fraction=tr.warn_bad_env_fraction, max_bad_env_fraction=tr.max_bad_env_fraction,
            divergence_window=tr.divergence_window, max_iterations=a.max_iterations, time_limit_s=tr.time_limit_s)
        metrics.banner(self.spec, env, agent.device, self.dist, torch.get_num_threads())
        if self.dist.world_size > 1:
            print(f"unilab[rank {self.dist.rank}/{self.dist.world_size}]: collector pid {col.pid} pinned to cpu_ids="
                  f"{None if env.cpu_ids is None else list(env.cpu_ids)}, learner on {agent.device}", flush=True)
        if tr.eval_interval and self.dist.rank == 0:
            self.evaluator = PeriodicEval(self.run_dir, tr.eval_interval, lambda i: self._payload(agent, i), a.num_envs,
                                          registry.evaluation(self.spec.task_name).HEADLINE)
        loop = LearnerIteration(agent, replay, a, [f.name for f in env.record if f.observation], self.timer)
        try:  # last: from here on the ranks are in step
            agree = metrics.agree = self._join_ranks(agent)
        except BaseException:
            metrics.close()
            raise

        t_start = time.monotonic()
        self.signals.saves = True  # from here on a stop ends with a final checkpoint (rank 0's)
        try:
            step = col.wait_step()  # the reset
            metrics.start(self.iteration, col["counters"])
            while self.iteration < a.max_iterations:
                it = self.iteration
                log_now = metrics.due(it + 1)
                eval_turn = None if self.evaluator is None else functools.partial(self._eval_turn, it + 1, metrics)
                step, train_metrics = loop.run(it, step, col, log_metrics=log_now, while_env_steps=eval_turn)
                if agree is not None and tr.eval_interval and (it + 1) % tr.eval_interval == 0:
                    # rank 0 wrote an evaluation snapshot: the others wait for it under the start-up timeout,
                    # before the next training-group collective (the divergence vote or the gradients)
                    distributed.barrier("the evaluation snapshot")
                if train_metrics:  # metrics read the device anyway: no extra sync
                    train_metrics["nonfinite_updates"] = self._check_finite(agent)
                self.iteration += 1
                metrics.step(self.iteration, self.timer, train_metrics)
                if tr.save_interval and self.iteration % tr.save_interval == 0:
                    loop.store_pending()  # a checkpoint holds every step up to its iteration
                    self.save(agent, replay)
                    if agree is not None:  # the others wait out rank 0's save under the start-up timeout
                        distributed.barrier("the checkpoint save")
                out_of_time = tr.time_limit_s is not None and time.monotonic() - t_start >= tr.time_limit_s
                if agree is not None:  # every rank must leave at the same iteration, or the next all-reduce hangs
                    out_of_time = agree(out_of_time)
                if out_of_time:
                    print(f"unilab: training.time_limit_s={tr.time_limit_s} reached at iteration {self.iteration}",
                          flush=True)
                    break
            loop.store_pending()
        except KeyboardInterrupt as err:
            self.stop_signal = getattr(err, "signum", signal.SIGINT)
            loop.store_pending()  # a step that arrived is kept (the collector wrote it completely)
            print(f"\nunilab: interrupted at iteration {self.iteration}; saving a checkpoint", flush=True)
        except NonFiniteTraining:
            col.close()
            metrics.close()
            raise
        except (CollectorDied, TrainingDiverged, distributed.RankLost):
            self.signals.stopping()
            loop.store_pending()  # before col.close(): the step is a view of the shared memory it unmaps
            col.close()
            if self.iteration > start_iter:  # keep what was learned before the failure (and for a diagnosis)
                try:
                    if (path := self.save(agent, replay, final=True)) is not None:
                        print(f"unilab: saved {path} before stopping", file=sys.stderr, flush=True)
                except NonFiniteTraining as err:  # never a checkpoint with NaN/inf weights
                    print(f"unilab: {err}", file=sys.stderr, flush=True)
            metrics.close()
            raise
        self.signals.stopping()  # from here on a signal cannot abandon the final checkpoint
        col.close()
        last_ckpt = self.last_checkpoint
        if last_ckpt is None or not last_ckpt.name.endswith(f"_{self.iteration}.pt"):
            last_ckpt = self.save(agent, replay, final=True)
        if self.evaluator is not None:  # a stopped run does not wait for its last evaluation
            self.evaluator.finish(metrics.writer, wait_s=0.0 if self.stop_signal else FINAL_WAIT_S)
        metrics.close()
        self._finish_trace()
        if self.dist.world_size > 1:  # equal on every rank: the ranks trained in sync
            print(f"unilab[rank {self.dist.rank}/{self.dist.world_size}]: final weights fingerprint "
                  f"{distributed.weights_fingerprint(agent)} at iteration {self.iteration}", flush=True)
        if self.dist.rank != 0:  # checkpoints and logs are rank 0's
            remove_unused_run_dir(self.run_dir)
            print(f"unilab[rank {self.dist.rank}/{self.dist.world_size}]: done (rank 0 keeps the checkpoints)",
                  flush=True)
            return TrainResult(None, self.stop_signal)
        print(f"unilab: run directory {self.run_dir}; checkpoint {last_ckpt}", flush=True)
        return TrainResult(last_ckpt, self.stop_signal)

    def _finish_trace(self) -> None:
        if self.timer.trace is not None:
            learner = self.timer.trace.save(self.run_dir / "trace_learner.json")
            merged = merge_traces([learner, self.run_dir / "trace_collector.json"], self.run_dir / "trace.json")
            print(f"unilab: trace written to {merged} (open in ui.perfetto.dev or chrome://tracing)", flush=True)

    def _eval_turn(self, iteration: int, metrics: MetricsLogger) -> None:
        with self.timer.phase("learner_eval"):  # a due snapshot is written while the collector steps
            self.evaluator.step(iteration, metrics.writer)

    def _check_finite(self, agent: FastSAC) -> int:
        """Stop with NonFiniteTraining after algo.max_nonfinite_updates skipped updates in a row."""
        counts = agent.nonfinite_counts()
        limit = self.spec.algo.max_nonfinite_updates
        if counts["streak"] >= limit:
            bad = agent.nonfinite_parameters()
            raise NonFiniteTraining(
                f"training stopped at iteration {self.iteration}: the last {counts['streak']} updates were "
                f"non-finite (algo.max_nonfinite_updates={limit}); steps skipped for a NaN/inf loss or gradient: "
                f"critic loss {counts['critic']}, actor loss {counts['actor']}, alpha {counts['alpha']}; "
                f"non-finite parameters: {', '.join(bad[:8]) + (' ...' if len(bad) > 8 else '') if bad else 'none'}. "
                f"Last finite checkpoint: {self.last_checkpoint or 'none written'}. "
                "A NaN/inf reward, observation or done flag in the replayed batches ends here too (check the task's "
                "reward weights); for losses that grow without bound, lower algo.actor_lr / algo.critic_lr or set "
                "algo.max_grad_norm.")
        return counts["updates"]

    # ------------------------------------------------------------ persistence
    def save(self, agent: FastSAC, replay: ReplayBuffer, final: bool = False) -> Path | None:
        """Atomically write model_<iteration>.pt (rank 0 only: every rank holds the same networks)."""
        if self.dist.rank != 0:
            return None
        if bad := agent.nonfinite_parameters():  # a checkpoint with NaN/inf weights is never written
            raise NonFiniteTraining(f"non-finite weights at iteration {self.iteration} ({', '.join(bad[:8])}): "
                                    "checkpoint not written. Last finite checkpoint: "
                                    f"{self.last_checkpoint or 'none written'}.")
        payload = self._payload(agent, self.iteration)
        if self.spec.training.save_replay:
            payload["replay"] = replay.state_dict()
        payload["rng"] = {"torch": torch.get_rng_state(),
                          "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else []}
        try:
            with self.signals.deferred():  # a signal inside torch.save would abandon the file
                self.last_checkpoint = save_checkpoint(checkpoint_path(self.run_dir, self.iteration), payload,
                                                       keep=self.spec.training.keep_checkpoints)
        except CheckpointWriteError as err:  # disk full / unwritable; the previous checkpoint is intact
            if final:  # nothing to fall back on: the run fails with this message
                raise
            if not getattr(self, "_save_error_reported", False):  # periodic: report once, keep training
                print(f"unilab: error: {err}; training continues and retries at the next save (last complete "
                      f"checkpoint: {self.last_checkpoint or 'none'}; further failures are not reported)",
                      file=sys.stderr, flush=True)
                self._save_error_reported = True
            return None
        return self.last_checkpoint

    def _payload(self, agent: FastSAC, iteration: int) -> dict[str, Any]:
        """What every checkpoint and evaluation snapshot holds."""
        return {"iteration": iteration, "agent": agent.state_dict(), "config": self.spec.raw,
                "task": self.spec.task_name}

    def _maybe_resume(self, agent: FastSAC, replay: ReplayBuffer) -> int:
        if not self.spec.training.resume:
            return 0
        payload, path = self._resume_payload
        self._resume_payload = None  # the replay copy may be large
        iteration = int(payload["iteration"])
        try:
            agent.load_state_dict(payload["agent"])
        except (KeyError, TypeError, RuntimeError, AttributeError) as err:  # a ValueError names the dims itself
            raise ValueError(f"checkpoint {path}: its agent state does not load ({type(err).__name__}: {err})") from err
        if "replay" in payload:
            try:
                replay.load_state_dict(payload["replay"])
            except (ValueError, KeyError, RuntimeError) as err:
                print(f"unilab: replay buffer of {path} not restored ({err}); starting with an empty one", flush=True)
            else:
                if self.dist.rank > 0:  # rank 0's replay and sampler state: the others draw their own batches
                    replay.reseed(stream_seed(self.spec.algo.seed + self.dist.rank, iteration))
        rng = payload.get("rng")
        if self.dist.rank == 0 and rng is not None:  # the noise goes on where the saved run stopped
            torch.set_rng_state(rng["torch"])
            if rng["cuda"] and torch.cuda.is_initialized() and len(rng["cuda"]) == torch.cuda.device_count():
                torch.cuda.set_rng_state_all(rng["cuda"])
        else:  # another rank's (or an unknown) state: a stream of its own, not the first iterations' again
            torch.manual_seed(stream_seed(self.spec.algo.seed + self.dist.rank, iteration))
        print(f"unilab: resumed from {path} at iteration {iteration}", flush=True)
        return iteration

    def _resume_iteration(self) -> int:
        """The iteration training.resume continues from (0 for a fresh run)."""
        return 0 if self._resume_payload is None else int(self._resume_payload[0]["iteration"])

    def _load_resume(self) -> tuple[dict[str, Any], Path]:
        """Load training.resume and take its algo settings for every key the user did not set."""
        payload, path = load_checkpoint(self.spec.training.resume)
        if payload.get("task") not in (None, self.spec.task_name):
            raise ValueError(f"checkpoint {path} is of task {payload['task']!r}, not {self.spec.task_name!r}")
        saved = payload["agent"].get("config")
        if saved is None:
            return payload, path
        mine = self.spec.algo.to_dict()
        explicit = self.spec.explicit_algo_keys
        if explicit is not None:
            merged = {**mine, **{k: v for k, v in saved.items() if k in mine and k not in explicit}}
            if taken := sorted(k for k in merged if merged[k] != mine[k]):
                self.spec.algo = SACConfig.from_mapping(merged)
                self.spec.raw["algo"] = self.spec.algo.to_dict()
                print(f"unilab: resume takes from {path.name}: "
                      + ", ".join(f"algo.{k}={merged[k]}" for k in taken), flush=True)
            mine = merged
        done, limit = int(payload["iteration"]), int(mine["max_iterations"])
        if done >= limit:
            raise ValueError(
                f"checkpoint {path} is at iteration {done} and algo.max_iterations={limit}: nothing is left to "
                f"train. Set algo.max_iterations above {done} to continue it.")
        if clash := [k for k in RESUME_SHAPE_KEYS if k in saved and saved[k] != mine[k]]:
            raise ValueError(
                f"cannot resume {path} with these settings: "
                + "; ".join(f"algo.{k} is {mine[k]} here but {saved[k]} in the checkpoint" for k in clash)
                + ". Drop those overrides (or the --algo choice) to take the checkpoint's values.")
        return payload, path


def line_buffered_stdout() -> None:
    """Make stdout/stderr line-buffered so a crash never loses the last lines."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, ValueError):
            stream.reconfigure(line_buffering=True)  # type: ignore[union-attr]

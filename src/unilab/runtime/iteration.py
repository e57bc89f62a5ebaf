"""One learner iteration, the same in training and in the learning tests: act on the newest step and send the actions
first (all the collector waits for), then store the previous step and train while the env steps. A step maps names to
the arrays of the shared-memory slot the collector wrote; the replay gets a copy of what it needs one iteration later,
because the collector overwrites that slot two steps on."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import numpy as np
import torch

from unilab.algo.sac.agent import FastSAC
from unilab.algo.sac.config import SACConfig
from unilab.algo.sac.replay import ReplayBuffer
from unilab.telemetry.phase_timer import PhaseTimer

Step = Mapping[str, np.ndarray]


class StepSource(Protocol):
    """Where steps come from: the collector process, or an env in the same process (tests)."""

    def send_action(self, action: np.ndarray) -> None: ...

    def wait_step(self) -> Step: ...


class LearnerIteration:
    """Act, send, store, update, receive: :meth:`run` is one training iteration. ``observations`` names the step's
    observation fields (the ones the replay stores for the step an action was chosen on)."""

    def __init__(self, agent: FastSAC, replay: ReplayBuffer, algo: SACConfig, observations: Sequence[str],
                 timer: PhaseTimer | None = None):
        self.agent, self.replay, self.algo = agent, replay, algo
        self.observations = tuple(observations)
        self.timer = timer or PhaseTimer()
        self.pending: tuple[dict[str, torch.Tensor], Step] | None = None
        """A received step not yet in the replay: (what the action was chosen on + the action, the step)."""
        self.unread = False
        """Updates ran since the agent's metrics were last read."""

    def store_pending(self) -> None:
        """Put the received step into the replay (before a checkpoint, and when training stops)."""
        if self.pending is not None:
            # cleared only once stored: a stop signal inside extend leaves it pending, and the stop path's
            # store_pending writes the whole slot again (the write pointer moves at extend's end)
            self.replay.extend(*self.pending)
            self.pending = None

    def run(self, iteration: int, step: Step, source: StepSource, log_metrics: bool = False,
            while_env_steps: Callable[[], None] | None = None) -> tuple[Step, dict[str, float]]:
        """Iteration ``iteration`` on ``step``: returns the next step and, when ``log_metrics`` and updates ran since
        the last read, the updates' metrics (:meth:`FastSAC.read_metrics`: means since the last read)."""
        a, timer = self.algo, self.timer
        with timer.phase("learner_act"):
            action = self.agent.act(torch.from_numpy(np.asarray(step["obs"])))
            source.send_action(action.numpy())
        with timer.phase("learner_replay_write"):
            self.store_pending()
            before = {name: torch.from_numpy(np.asarray(step[name]).copy()) for name in self.observations}
            before["action"] = action
        metrics: dict[str, float] = {}
        with timer.phase("learner_train"):
            # counted in stored steps, not iterations: a resume without its replay collects afresh first
            if self.replay.size >= max(min(a.learning_starts, self.replay.capacity), 1):
                self.agent.set_learning_rates(iteration * a.num_envs)
                for _ in range(a.num_updates):
                    self.agent.update(self.replay.sample(a.batch_size), return_metrics=False)
                self.unread = True
            if log_metrics and self.unread:  # the means since the last log: the interval's one host sync
                metrics = self.agent.read_metrics()
                self.unread = False
        if while_env_steps is not None:
            while_env_steps()
        with timer.phase("learner_collector_wait"):
            next_step = source.wait_step()
        self.pending = (before, next_step)
        return next_step, metrics

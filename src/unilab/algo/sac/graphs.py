"""FastSAC's update replayed as CUDA graphs: one launch per update instead of a few hundred kernels.

The agent's :meth:`~unilab.algo.sac.agent.FastSAC.update_step` is pure device work (no host sync, static shapes), so it
is captured whole, twice: once with the actor step and once without (``policy_frequency`` picks which graph an update
replays). A batch is copied into static input buffers first; the parameters, optimiser states, learning-rate tensors,
normaliser statistics, metric sums and skipped-step counters are the agent's own tensors, updated in place by the
replay. Each graph has its own memory pool, so replaying them in any order never overwrites what the other reads.

The first :data:`WARMUP_UPDATES` updates (and those after a checkpoint is loaded) run eagerly on a side stream: they
create the optimiser states and compile the loss functions, which a capture cannot do. On the CPU the same program runs
from the static buffers without a capture (what the tests compare with the eager update).
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import torch

WARMUP_UPDATES = 3
"""Eager updates before the capture (at least one actor step with ``policy_frequency`` up to 2; more are added for
larger values)."""


class CapturedUpdate:
    """The captured update of one agent (see module docs): ``update_step(batch, actor_turn)``, its pure device work on
    ``device``, whose actor steps every ``policy_frequency``-th update."""

    def __init__(self, update_step: Callable[[dict[str, torch.Tensor], bool], None], device: torch.device,
                 policy_frequency: int) -> None:
        self.update_step = update_step
        self.device = device
        self.policy_frequency = policy_frequency
        self.on_cuda = device.type == "cuda"
        self.failed: str | None = None
        """Why the capture failed (then every update runs eagerly), or None."""
        self.reset()

    def reset(self) -> None:
        """Capture again after the next warm-up updates (the optimiser states were replaced)."""
        self.static: dict[str, torch.Tensor] | None = None
        self.graphs: dict[bool, torch.cuda.CUDAGraph] = {}
        self.eager_left = max(WARMUP_UPDATES, self.policy_frequency + 1)

    @property
    def captured(self) -> bool:
        """The updates replay CUDA graphs."""
        return bool(self.graphs)

    def run(self, batch: dict[str, torch.Tensor], actor_turn: bool) -> None:
        """One update on ``batch`` (device tensors of the agent's batch keys)."""
        if self.static is not None and any(batch[k].shape != t.shape for k, t in self.static.items()):
            self.reset()  # another batch size: warm up and capture again
        if self.static is None:
            self.static = {k: torch.empty_like(v) for k, v in batch.items()}
        for k, t in self.static.items():
            t.copy_(batch[k], non_blocking=True)
        if not self.on_cuda or self.failed is not None:
            self.update_step(self.static, actor_turn)
            return
        if self.eager_left > 0:
            self.eager_left -= 1
            side = torch.cuda.Stream(self.device)
            side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(side):
                self.update_step(self.static, actor_turn)
            torch.cuda.current_stream(self.device).wait_stream(side)
            return
        if not self.graphs:
            self._capture()
            if self.failed is not None:
                self.update_step(self.static, actor_turn)
                return
        self.graphs[actor_turn].replay()

    def _capture(self) -> None:
        try:
            for turn in (False, True):
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    self.update_step(self.static, turn)
                self.graphs[turn] = graph
        except RuntimeError as err:  # a fault of this torch/driver: train on, eagerly, and say so once
            self.graphs = {}
            self.failed = f"{type(err).__name__}: {err}".splitlines()[0]
            print(f"unilab: warning: the learner's update could not be captured as a CUDA graph ({self.failed}); "
                  "training goes on with eager updates (algo.compile=false skips the attempt)", file=sys.stderr,
                  flush=True)

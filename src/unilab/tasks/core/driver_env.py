"""The step every joint-target task whose per-env host work is one compiled driver shares.

``backend_step`` turns the action into PD targets (:func:`~unilab.tasks.core.kernels.action_to_ctrl`, then the
domain randomizer's step terms) and steps the pool; ``update_state`` runs the driver's step stages in one
parallel region (or one region per stage, timed as sub-phases, when ``split_sub_phases``: the benchmark's
breakdown; the same results); ``reset_done`` records the ended episodes and restarts them. A task supplies
its driver (``run_stages``), its stage masks and three hooks.
"""

from __future__ import annotations

import numpy as np

from unilab.tasks.base import Buffers, PoolEnv, StepResult, result
from unilab.tasks.core.kernels import action_to_ctrl


class DriverEnv(PoolEnv):
    """:class:`PoolEnv` with the shared ``step``; a subclass sets the stage masks and the hooks below."""

    step_stages: int
    """The driver stages of a step, in one region."""
    split_stages: tuple[tuple[str, int], ...]
    """The same stages as timed sub-phases: ``(name, mask)`` in step order."""

    def before_update(self) -> None:
        """Anything that advances before the step's stages run (a task's clock)."""

    def record_ended(self, done: np.ndarray, out: Buffers) -> None:
        """The step's ended episodes (``done``; ``out`` holds their flags), before their restart."""

    def restart_rows(self, ids: np.ndarray, out: Buffers) -> None:
        """Restart envs ``ids`` and write their first observations into ``out``."""
        raise NotImplementedError

    def step(self, action: np.ndarray, out: Buffers | None = None) -> StepResult:
        """Advance every env one policy step and auto-reset finished ones, as ``unilab.tasks.base.VecEnv.step``
        (a failure at a time-out is both terminated and truncated: :func:`~unilab.tasks.core.kernels.settle_step`);
        ``info["reward_terms"]`` are the unweighted terms."""
        out = self.buffers() if out is None else out
        timer = self.timer
        action = np.asarray(action)
        if action.shape != (self.num_envs, self.action_dim):
            raise ValueError(f"action must have shape {(self.num_envs, self.action_dim)}, got {action.shape}")
        with timer.phase("backend_step"):
            # action = nan_to_num(clip(action, -1, 1)); PD targets = each env's default + scale * action
            # written straight into the pool's controls: no copy region of its own (one fork/join fewer)
            targets = self.pool.ctrl
            action_to_ctrl(action, self.action_scale, self.ctrl_default, self.state.action, targets)
            ctrl = targets if self.randomizer is None else self.randomizer.before_physics(targets)
            bad = self.pool.step(None if ctrl is targets else ctrl, self.cfg.decimation).copy()

        # this step's info rows, fresh each step (the caller may keep them): one per term / condition
        info = (np.empty((len(self.reward_term_names), self.num_envs), dtype=np.float32),
                np.empty((len(self.termination_names), self.num_envs), dtype=bool))
        with timer.phase("update_state"):
            self.before_update()
            self.book.begin_step()
            if self.split_sub_phases:
                for name, stages in self.split_stages:
                    with timer.phase(name):
                        self.run_stages(stages, self._all_rows, out, bad, info)
            else:  # every stage of an env's step back to back, one region
                self.run_stages(self.step_stages, self._all_rows, out, bad, info)
            self.book.count_bad(bad)

        def restart(ids: np.ndarray) -> None:
            if self.auto_reset:
                with timer.phase("restart"):
                    self.restart_rows(ids, out)

        with timer.phase("reset_done"):
            done = self._done
            self.record_ended(done, out)
            info = self.book.auto_reset(out, done, restart,
                                        reward_terms=dict(zip(self.reward_term_names, info[0])),
                                        termination_terms=dict(zip(self.termination_names, info[1])),
                                        finals_written=True)
        return result(out, info)

"""The set-up and the step every joint-target task whose per-env host work is one compiled driver shares.

``backend_step`` turns the action into PD targets (:func:`~unilab.tasks.core.kernels.action_to_ctrl`, then the
randomizer's step terms) and steps the pool; ``update_state`` runs the driver's stages in one parallel region (or,
with ``split_sub_phases``, one timed region per stage: the benchmark's breakdown, same results); ``reset_done``
records the ended episodes and restarts them. A task supplies its driver (``run_stages``), stage masks and hooks.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import mujoco
import numpy as np

from unilab.sim import numba_threads
from unilab.sim.physics import BODY_STATE, CONTACT_FORCE, make_pool
from unilab.sim.physics import SUBPHASES as POOL_SUBPHASES
from unilab.tasks.base import Buffers, EpisodeBook, Obs, PoolEnv, StepResult, observations, result
from unilab.tasks.core.actuation import Actuation
from unilab.tasks.core.kernels import action_to_ctrl
from unilab.tasks.core.randomization import make_randomizer
from unilab.tasks.core.state import StateSpec
from unilab.tasks.env_streams import env_streams
from unilab.telemetry.phase_timer import PhaseTimer

# sub-phases in env.timer: backend_step's (the pool's physics, check_health), update_state's (gather; rewards,
# terminations, observations: only with split_sub_phases) and reset_done's (restart)
SUBPHASES = (*POOL_SUBPHASES, "gather", "rewards", "terminations", "observations", "restart")


class DriverEnv(PoolEnv):
    """:class:`PoolEnv` with the shared set-up and ``step``; a subclass sets the stage masks and the hooks below."""

    step_stages: int  # the driver stages of a step, in one region
    split_stages: tuple[tuple[str, int], ...]  # the same stages as timed sub-phases: (name, mask) in step order

    def __init__(self, cfg: Any, num_envs: int) -> None:
        cfg.validate()
        numba_threads.launch()  # before any parallel kernel runs: the layer loads with its chosen settings
        self.cfg = cfg
        self.num_envs = int(num_envs)
        self.control_dt = cfg.control_dt

    def _actuate(self, base: mujoco.MjModel, joint_names: list[str]) -> Actuation:
        """The PD actuation of ``base``'s joints ``joint_names``; ``self.model`` is its PD-servo copy."""
        self.joint_names = joint_names
        act = Actuation.from_config(base, joint_names, self.cfg)
        self.model, self.act_joint = act.model, act.act_joint
        self.kp, self.kd, self.effort = act.kp, act.kd, act.effort
        self.default_joint_pos, self.action_default = act.default_joint_pos, act.action_default
        self.action_scale, self.action_bound = act.action_scale, act.action_bound
        self.joint_lo, self.joint_hi = act.joint_lo, act.joint_hi
        self.action_dim = int(self.model.nu)
        return act

    def _make_pool(self, pool_kwargs: dict | None, seed: int, body: str, contacts_error: str | None) -> None:
        """The physics pool (``pool_kwargs``: the ``sim.*`` options), its timer, Numba's host threads and the
        randomizer (``body``: the base body its terms default to).

        ``contacts_error``: the task reads contact forces (``CONTACT_FORCE``), and this is the error a pool asked for
        with ``contacts=False`` gets; None: by default the stage after a step or reset skips collision (restarts'
        forward ~2.5x cheaper, same values).
        """
        kwargs = dict(pool_kwargs or {})
        contact_outputs = (CONTACT_FORCE,) if contacts_error else ()
        outputs = tuple(dict.fromkeys([*kwargs.pop("outputs", ()), *BODY_STATE, *contact_outputs]))
        kwargs.setdefault("substeps", self.cfg.decimation)
        if contacts_error and kwargs.get("contacts") is False:
            raise ValueError(contacts_error)
        kwargs.setdefault("contacts", bool(contacts_error))
        self.pool = make_pool(self.model, self.num_envs, outputs=outputs, **kwargs)
        self.timer = PhaseTimer()
        self.pool.timer = self.timer  # backend_step's sub-phases: physics, check_health
        self.host_thread_ids = numba_threads.configure(self.pool.nthread, self.pool.cpu_ids)
        self.randomizer = make_randomizer(self.cfg.randomization, self.pool, seed, self.control_dt, body,
                                          len(self.joint_names), self.kp, self.kd, self.action_default, self.act_joint)
        # each env's PD targets of a zero action (the default pose, shifted by joint_pos_bias)
        self.ctrl_default = (np.tile(self.action_default, (self.num_envs, 1)) if self.randomizer is None
                             else self.randomizer.ctrl_default)
        self.stat_names = () if self.randomizer is None else tuple(self.randomizer.stats())

    def _allocate(self, seed: int, gathered: StateSpec, step_state: StateSpec, **dims: int) -> None:
        """The per-env state (``gathered``'s then ``step_state``'s rows, sized by ``dims`` plus ``n``, ``J``, ``A``)
        and the step's buffers; the observation dims are ``self.layout``'s."""
        n = self.num_envs
        self.obs_dim, self.critic_obs_dim = self.layout.policy_dim, self.layout.critic_dim
        self.book = EpisodeBook(n)
        self.auto_reset = True  # False: a finished env is not restarted and keeps running (evaluation rollouts)
        self.split_sub_phases = False  # True: one timed region per stage (sub-phases for the benchmark; same results)
        dims.update(n=n, J=len(self.joint_names), A=self.action_dim)
        self.state = SimpleNamespace(**vars(gathered.allocate(**dims)), **vars(step_state.allocate(**dims)))
        self._gathered = gathered.values(self.state)  # the gather stage's tuple
        self._obs_clip = np.inf if self.cfg.obs_clip is None else float(self.cfg.obs_clip)
        nt, nc = len(self.reward_term_names), len(self.termination_names)
        self._terms, self._reward, self._conds = np.zeros((n, nt)), np.zeros(n), np.zeros((n, nc), dtype=bool)
        self._failed, self._done = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
        self._bad = np.zeros(n, dtype=bool)  # no env bad (restarts)
        self._all_rows = np.arange(n, dtype=np.int64)
        # observation noise: one stream per env, drawn inside the parallel driver (a fill here would be serial)
        self.obs_noise_streams = env_streams(seed, n, tag=1)
        self._no_info = (np.empty((nt, n), dtype=np.float32), np.empty((nc, n), dtype=bool))

    def _place(self, rows: np.ndarray, qpos: np.ndarray, qvel: np.ndarray) -> None:
        """Envs ``rows`` start at ``(qpos, qvel)``, then the randomizer's reset-time draws (PD gains, delay)."""
        self.pool.reset(rows, qpos, qvel)
        if self.randomizer is not None:
            self.randomizer.reset(rows)

    def reset(self, out: Buffers | None = None) -> Obs:
        """Restart every env; write and return the first observations."""
        out = self.buffers() if out is None else out
        self.book.reset_all()
        self.restart_rows(self._all_rows, out)
        return observations(out)

    def stats(self) -> dict[str, float]:
        """This step's randomization scalars (``randomization/<term>``, see :mod:`.randomization`)."""
        return {} if self.randomizer is None else self.randomizer.stats()

    def close(self) -> None:
        if self.pool.cpu_ids is not None:
            numba_threads.release()
        super().close()

    def before_update(self) -> None:
        """Anything that advances before the step's stages run (a task's clock)."""

    def record_ended(self, done: np.ndarray, out: Buffers) -> None:
        """The step's ended episodes (``done``; ``out`` holds their flags), before their restart."""

    def restart_rows(self, ids: np.ndarray, out: Buffers) -> None:
        """Restart envs ``ids`` and write their first observations into ``out``."""
        raise NotImplementedError

    def step(self, action: np.ndarray, out: Buffers | None = None) -> StepResult:
        """``VecEnv.step``; a failure at a time-out is both terminated and truncated
        (:func:`~unilab.tasks.core.kernels.settle_step`); ``info["reward_terms"]`` are the unweighted terms."""
        out = self.buffers() if out is None else out
        timer = self.timer
        action = np.asarray(action)
        if action.shape != (self.num_envs, self.action_dim):
            raise ValueError(f"action must have shape {(self.num_envs, self.action_dim)}, got {action.shape}")
        with timer.phase("backend_step"):
            # PD targets written straight into the pool's controls: no copy region of its own (one fork/join fewer)
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
            self.record_ended(self._done, out)
            info = self.book.auto_reset(out, self._done, restart,
                                        reward_terms=dict(zip(self.reward_term_names, info[0])),
                                        termination_terms=dict(zip(self.termination_names, info[1])),
                                        finals_written=True)
        return result(out, info)

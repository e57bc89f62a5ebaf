"""The set-up and the step every joint-target task shares, its per-env host work one compiled driver
(:mod:`unilab.tasks.core.driver`).

``backend_step`` turns the action into PD targets (:func:`~unilab.tasks.core.kernels.action_to_ctrl`, then the
randomizer's step terms) and steps the pool; ``update_state`` runs the driver's stages in one parallel region (or,
with ``split_sub_phases``, one timed region per stage: the benchmark's breakdown, same results); ``reset_done``
records the ended episodes and restarts them. A task supplies its rows (``rows``), the struct its rows read
(``arrays``, :meth:`DriverEnv._struct`), the arrays they write besides the state (:meth:`DriverEnv._compile_driver`),
its start states (``start_state``) and hooks.
"""

from __future__ import annotations

from typing import Any

import mujoco
import numpy as np

from unilab.sim import numba_threads
from unilab.sim.physics import BODY_STATE, CONTACT_FORCE, OutputUnavailable, make_pool
from unilab.sim.physics import SUBPHASES as POOL_SUBPHASES
from unilab.sim.spec import FINAL
from unilab.tasks.base import Buffers, EpisodeBook, Obs, PoolEnv, StepResult, observations, result
from unilab.tasks.core.actuation import Actuation
from unilab.tasks.core.driver import RESTART, SPLIT, STEP, DriverRows, step_driver_source
from unilab.tasks.core.kernels import action_to_ctrl
from unilab.tasks.core.randomization import make_randomizer
from unilab.tasks.core.terms import compile_driver
from unilab.tasks.env_streams import env_streams
from unilab.telemetry.phase_timer import PhaseTimer

# sub-phases in env.timer: backend_step's (the pool's physics, check_health), update_state's (gather; rewards,
# terminations, observations: only with split_sub_phases) and reset_done's (restart)
SUBPHASES = (*POOL_SUBPHASES, "gather", "rewards", "terminations", "observations", "restart")


class DriverEnv(PoolEnv):
    """:class:`PoolEnv` with the shared set-up and ``step``; a subclass sets ``rows`` and the hooks below."""

    rows: DriverRows

    @property
    def reward_term_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.rows.rewards)

    @property
    def termination_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.rows.terminations)

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

    def _make_pool(self, pool_kwargs: dict | None, seed: int, body: str, contacts_key: str | None) -> None:
        """The physics pool (``pool_kwargs``: the ``sim.*`` options), its timer, Numba's host threads and the
        randomizer (``body``: the base body its terms default to).

        ``contacts_key``: the config key whose rows read contact forces (``CONTACT_FORCE``), named in the error of a
        pool that cannot give them; None: by default the stage after a step or reset skips collision (restarts'
        forward ~2.5x cheaper, same values).
        """
        kwargs = dict(pool_kwargs or {})
        contact_outputs = (CONTACT_FORCE,) if contacts_key else ()
        outputs = tuple(dict.fromkeys([*kwargs.pop("outputs", ()), *BODY_STATE, *contact_outputs]))
        kwargs.setdefault("substeps", self.cfg.decimation)
        kwargs.setdefault("contacts", bool(contacts_key))
        try:
            self.pool = make_pool(self.model, self.num_envs, outputs=outputs, **kwargs)
        except OutputUnavailable as err:
            raise ValueError(f"{contacts_key} reads contact forces, which this physics pool cannot give: {err}"
                             ) from err
        self.timer = PhaseTimer()
        self.pool.timer = self.timer  # backend_step's sub-phases: physics, check_health
        self.host_thread_ids = numba_threads.configure(self.pool.nthread, self.pool.cpu_ids)
        self.randomizer = make_randomizer(self.cfg.randomization, self.pool, seed, self.control_dt, body,
                                          len(self.joint_names), self.kp, self.kd, self.action_default, self.act_joint)
        # each env's PD targets of a zero action (the default pose, shifted by joint_pos_bias)
        self.ctrl_default = (np.tile(self.action_default, (self.num_envs, 1)) if self.randomizer is None
                             else self.randomizer.ctrl_default)
        self.stat_names = () if self.randomizer is None else tuple(self.randomizer.stats())

    def _allocate(self, seed: int, **dims: int) -> None:
        """The per-env state (``rows.state``, sized by ``dims`` plus ``n``, ``J``, ``A``) and the step's buffers;
        the observation dims are ``self.layout``'s."""
        n = self.num_envs
        self.obs_dim, self.critic_obs_dim = self.layout.policy_dim, self.layout.critic_dim
        self.book = EpisodeBook(n)
        self.auto_reset = True  # False: a finished env is not restarted and keeps running (evaluation rollouts)
        self.split_sub_phases = False  # True: one timed region per stage (sub-phases for the benchmark; same results)
        dims.update(n=n, J=len(self.joint_names), A=self.action_dim)
        self.state = self.rows.state.allocate(**dims)
        self._obs_clip = np.inf if self.cfg.obs_clip is None else float(self.cfg.obs_clip)
        nt, nc = len(self.reward_term_names), len(self.termination_names)
        self._terms, self._reward, self._conds = np.zeros((n, nt)), np.zeros(n), np.zeros((n, nc), dtype=bool)
        self._failed, self._done = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
        self._bad = np.zeros(n, dtype=bool)  # no env bad (restarts)
        self._all_rows = np.arange(n, dtype=np.int64)
        # observation noise: one stream per env, drawn inside the parallel driver (a fill here would be serial)
        self.obs_noise_streams = env_streams(seed, n, tag=1)
        self._no_info = (np.empty((nt, n), dtype=np.float32), np.empty((nc, n), dtype=bool))

    def _struct(self, cls: type, **values: Any) -> Any:
        """The namedtuple ``cls`` the rows read (``s``): each field is ``values[field]``, a state row or the pool's
        array of that name (``qpos``, ``body_pos_w``, ...)."""
        values = {**vars(self.state), **values}
        missing = [f for f in cls._fields if f not in values and not hasattr(self.pool, f)]
        nested = [f for f in cls._fields if isinstance(values.get(f), tuple)]
        if missing or nested:  # Numba refuses a tuple nested in the struct inside the driver's parallel loop
            raise ValueError(f"{cls.__name__}: no value, state row or pool array for {missing}; a tuple for "
                             f"{nested} (the struct must be flat: a field per array or number)")
        return cls(**{f: values[f] if f in values else getattr(self.pool, f) for f in cls._fields})

    def _compile_driver(self, **writes: np.ndarray) -> None:
        """The step driver of ``rows`` and ``self.layout``, its config numbers and its written arrays (the state
        rows, then ``writes``: ``rows.writes`` by name); ``self.arrays`` is the struct the rows read."""
        self.driver_source = step_driver_source(self.rows, tuple(self.layout.pieces))
        self._params = self.driver_source.values(self.cfg)
        self._driver = compile_driver(self.driver_source, "step_driver")
        self._writes = tuple(getattr(self.state, name) for name in self.rows.state.names) + tuple(
            writes[name] for name in self.rows.writes)

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

    def start_state(self, ids: np.ndarray, out: Buffers) -> tuple[np.ndarray, np.ndarray]:
        """The start states ``(qpos, qvel)`` of the restarted envs ``ids`` (a row each)."""
        raise NotImplementedError

    def restart_rows(self, ids: np.ndarray, out: Buffers) -> None:
        """Restart envs ``ids`` and write their first observations into ``out``."""
        self._place(ids, *self.start_state(ids, out))
        self.run_stages(RESTART, ids, out)

    def run_stages(self, stages: int, rows: np.ndarray, out: Buffers, bad: np.ndarray | None = None,
                   info: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        """The driver's ``stages`` (:mod:`.driver`) for envs ``rows``, writing into ``out`` (``final_*`` for
        FINALS); for TERMINATE, ``bad`` the pool's bad-env mask and ``info`` this step's ``(terms, conds)``."""
        terms_info, conds_info = self._no_info if info is None else info
        policy, critic = out["obs"], out["critic_obs"]
        self._driver(
            stages, rows, self.arrays, self._writes, self._params, self.rewards.weights,
            (self.book.lengths, self.book.returns, float(self.max_episode_steps), self._bad if bad is None else bad),
            (self._terms, self._reward, self._conds, self._failed, self._done),
            (self.layout.offsets, self.noise_scale, self.obs_noise_streams, self._obs_clip),
            (out["reward"], out["terminated"], out["truncated"], policy, critic, out.get(FINAL + "obs", policy),
             out.get(FINAL + "critic_obs", critic), terms_info, conds_info))

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
                for name, stages in SPLIT:
                    with timer.phase(name):
                        self.run_stages(stages, self._all_rows, out, bad, info)
            else:  # every stage of an env's step back to back, one region
                self.run_stages(STEP, self._all_rows, out, bad, info)
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

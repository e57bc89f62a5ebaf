"""The env interface every unilab task offers the runtime (EnvPool-sized).

``step`` (and ``reset``) write the env fields of the step record (``unilab.sim.spec``) straight into the caller's
buffers ``out`` (the collector's shared memory; fresh ones without ``out``) and return them as ``obs, reward,
terminated, truncated, info`` (``obs``: float32 ``(num_envs, D)`` ``{"obs", "critic_obs"}`` for the actor and the
(possibly privileged) critic).

Every task has the same done semantics (:class:`EpisodeBook`): finished envs are auto-reset, so a done env returns
its first observations after the reset, and ``final_obs`` / ``final_critic_obs`` hold, in the done rows only, those
the episode ended on (the bootstrap target of a time-out). Time-outs are ``truncated``; failures and diverged
("bad") envs are ``terminated``; a bad env's reward is 0.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

import numpy as np
from numba import njit, prange

from unilab.sim.spec import FINAL, EnvSpec, allocate, env_outputs
from unilab.sim.work_claims import LEAST_BYTES, claimed, copy_rows_at, new_counter, num_chunks
from unilab.telemetry.phase_timer import PhaseTimer

Obs = dict[str, np.ndarray]
Buffers = Mapping[str, np.ndarray]
StepResult = tuple[Obs, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]
OBSERVATIONS = ("obs", "critic_obs")


class VecEnv(Protocol):
    """Everything the collector, play and the benchmarks use of a task."""

    num_envs: int
    obs_dim: int
    critic_obs_dim: int
    action_dim: int
    control_dt: float  # seconds of simulated time per step
    timer: PhaseTimer  # times backend_step, update_state and reset_done of every step
    reward_term_names: tuple[str, ...]
    termination_names: tuple[str, ...]
    stat_names: tuple[str, ...]
    """TensorBoard tags of the task's own per-step scalars (``stats()``), e.g. ``randomization/friction``."""

    @property
    def spec(self) -> EnvSpec:
        """Dims, term names, control dt and the physics pool's threading."""

    def reset(self, out: Buffers | None = None) -> Obs:
        """Reset every env; write the first observations into ``out`` (or fresh arrays) and return them."""

    def step(self, action: np.ndarray, out: Buffers | None = None) -> StepResult:
        """Apply ``action`` (num_envs, action_dim) in [-1, 1]; write the step into ``out`` and return it.

        ``info`` holds ``final_obs`` (observation name -> array, valid in done rows only), ``reward_terms`` (name ->
        (num_envs,)), ``termination_terms`` (name -> (num_envs,) bool), ``episode`` (``{"count", "return_mean",
        "length_mean"}`` of the episodes that ended on this step) and ``num_bad_envs``.
        """

    def stats(self) -> dict[str, float]:
        """This step's value of each of ``stat_names`` (the logger shows their mean over a log interval)."""

    def render_model(self) -> Any:
        """The MjModel to film (what ``render_qpos`` positions)."""

    def render_qpos(self, env: int = 0) -> np.ndarray:
        """A copy of ``qpos`` of env ``env`` (one video frame)."""

    def reference_qpos(self, env: int = 0) -> np.ndarray | None:
        """``qpos`` of the reference pose env ``env`` follows now (a video's ghost); None: the task has none."""

    def overlay_text(self, env: int = 0) -> str | None:
        """A line or two on env ``env``'s state for a video frame (e.g. clip, frame, error); None: none."""

    def arrows(self, env: int = 0) -> np.ndarray | None:
        """``(k, 2, 3)`` world-frame (start, end) points of arrows to draw on env ``env``'s video frame (e.g. a
        velocity command); None: none."""

    def close(self) -> None:
        """Release the physics pool (threads, pinned CPUs)."""


class PoolEnv:
    """The pool-backed parts of :class:`VecEnv` shared by the tasks (needs ``self.pool``)."""

    pool: Any
    num_envs: int
    obs_dim: int
    critic_obs_dim: int
    action_dim: int
    control_dt: float
    reward_term_names: tuple[str, ...] = ()
    termination_names: tuple[str, ...] = ()
    stat_names: tuple[str, ...] = ()
    action_bound: np.ndarray | None = None
    """(action_dim,) factors from the [-1, 1] action to the recipe's action space (see ``EnvSpec.action_bound``)."""
    mirror: dict[str, tuple[np.ndarray, np.ndarray]] | None = None
    """The left/right mirror of obs, critic_obs and action (see ``EnvSpec.mirror``); None: none."""
    mirror_error: str = "the task declares no left/right mirror"

    @property
    def spec(self) -> EnvSpec:
        cpu_ids = self.pool.cpu_ids
        bound = None if self.action_bound is None else tuple(float(b) for b in self.action_bound)
        return EnvSpec(
            obs_dim=int(self.obs_dim), critic_obs_dim=int(self.critic_obs_dim), action_dim=int(self.action_dim),
            control_dt=float(self.control_dt), reward_terms=tuple(self.reward_term_names),
            termination_terms=tuple(self.termination_names), nthread=self.pool.nthread,
            cpu_ids=None if cpu_ids is None else tuple(cpu_ids), persistent=bool(self.pool.persistent),
            stats=tuple(self.stat_names), action_bound=bound, mirror=None if self.mirror is None else {
                k: (tuple(int(i) for i in perm), tuple(float(s) for s in sign))
                for k, (perm, sign) in self.mirror.items()},
            mirror_error="" if self.mirror is not None else self.mirror_error,
        )

    def buffers(self) -> dict[str, np.ndarray]:
        """Fresh arrays for one step's env outputs (what ``step`` writes when given no ``out``)."""
        return allocate(env_outputs(self.spec.record), self.num_envs)

    def stats(self) -> dict[str, float]:
        return {}

    def render_model(self) -> Any:
        return self.pool.model

    def render_qpos(self, env: int = 0) -> np.ndarray:
        return self.pool.qpos[env].copy()

    def reference_qpos(self, env: int = 0) -> np.ndarray | None:
        return None  # tasks with a reference motion override this

    def overlay_text(self, env: int = 0) -> str | None:
        return None

    def arrows(self, env: int = 0) -> np.ndarray | None:
        return None

    def close(self) -> None:
        self.pool.close()


class EpisodeBook:
    """Per-env episode return and length, and the auto-reset every task shares: a task's ``step`` calls
    :meth:`begin_step` (lengths count this step), fills ``out``'s observations, then :meth:`settle` (done semantics)
    and :meth:`auto_reset` (final observations, episode stats, restart)."""

    def __init__(self, num_envs: int):
        self.returns = np.zeros(num_envs, dtype=np.float64)
        self.lengths = np.zeros(num_envs, dtype=np.int64)
        self._num_bad = 0

    def begin_step(self) -> None:
        self.lengths += 1

    def settle(self, out: Buffers, reward: np.ndarray, terminated: np.ndarray, truncated: np.ndarray,
               bad: np.ndarray) -> np.ndarray:
        """Done semantics; writes reward/terminated/truncated into ``out`` and returns the done mask. A bad (diverged)
        env is terminated with reward 0; a time-out counts only for an env that did not terminate. ``reward`` is
        modified in place."""
        done = np.empty(terminated.shape[0], dtype=bool)
        _settle_all(terminated, truncated, bad, reward, self.returns, out["reward"], out["terminated"],
                    out["truncated"], done)
        self.count_bad(bad)
        return done

    def count_bad(self, bad: np.ndarray) -> None:
        """Record this step's bad-env count (``info["num_bad_envs"]``) when a task settles with :func:`settle_env`."""
        self._num_bad = int(bad.sum())

    def auto_reset(self, out: Buffers, done: np.ndarray, restart: Callable[[np.ndarray], None],
                   reward_terms: dict[str, np.ndarray], termination_terms: dict[str, np.ndarray],
                   finals_written: bool = False) -> dict[str, Any]:
        """Copy the done rows' observations into ``final_<obs>`` (unless ``finals_written``: the task's step did),
        restart them (``restart(ids)`` resets them and writes their first observations into ``out``), return ``info``.
        """
        ids = np.flatnonzero(done)
        episode: dict[str, Any] = {"count": int(ids.size), "return_mean": 0.0, "length_mean": 0.0}
        if ids.size:
            episode.update(return_mean=float(self.returns[ids].mean()), length_mean=float(self.lengths[ids].mean()))
            for name in () if finals_written else OBSERVATIONS:
                src, dst = out[name], out[FINAL + name]
                if src.ndim == 2:  # a parallel copy: hundreds of rows per step at 4096 envs
                    copy_rows_at(ids, src, dst)
                else:
                    dst[ids] = src[ids]
            restart(ids)
            self.returns[ids] = 0.0
            self.lengths[ids] = 0
        return {"final_obs": {name: out[FINAL + name] for name in OBSERVATIONS}, "reward_terms": reward_terms,
                "termination_terms": termination_terms, "episode": episode, "num_bad_envs": self._num_bad}

    def reset_all(self) -> None:
        self.returns[...] = 0.0
        self.lengths[...] = 0


@njit(cache=True, fastmath=False, inline="always")
def settle_env(e, terminated, truncated, bad, reward, returns, out_reward, out_terminated, out_truncated):
    """:meth:`EpisodeBook.settle` for env ``e`` alone, inside a task's ``prange`` driver; returns done.

    ``terminated``/``truncated`` are env ``e``'s flags; ``bad``, ``reward`` (modified), ``returns``
    (``EpisodeBook.returns``) and ``out_*`` are per-env arrays. The task calls :meth:`EpisodeBook.count_bad` too.
    """
    t = terminated or bad[e]
    tr = truncated and not t
    if bad[e]:
        reward[e] = 0.0
    returns[e] += reward[e]
    out_reward[e] = reward[e]
    out_terminated[e] = t
    out_truncated[e] = tr
    return t or tr


@njit(cache=True, parallel=True, fastmath=False)
def _settle_all(terminated, truncated, bad, reward, returns, out_reward, out_terminated, out_truncated, done):
    """:func:`settle_env` for every env, in claimed chunks (flags are a byte per env)."""
    n = done.shape[0]
    counter = new_counter()
    for _ in prange(num_chunks(n, LEAST_BYTES)):
        for e in claimed(counter, n, LEAST_BYTES):
            done[e] = settle_env(e, terminated[e], truncated[e], bad, reward, returns, out_reward,
                                 out_terminated, out_truncated)


def observations(out: Buffers) -> Obs:
    """The observation arrays of ``out`` (what ``reset``/``step`` return as ``obs``)."""
    return {name: out[name] for name in OBSERVATIONS}


def result(out: Buffers, info: dict[str, Any]) -> StepResult:
    """``step``'s return value from the buffers it wrote."""
    return observations(out), out["reward"], out["terminated"], out["truncated"], info


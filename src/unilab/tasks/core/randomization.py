"""Domain randomization (settings: :mod:`unilab.tasks.core.randomization_config`).

Each row of :data:`TERMS` is one ``task.randomization.<name>`` key with up to three hooks: ``setup(r, cfg, rng)``
when the env is built, ``reset(r, cfg, rng, rows)`` at the reset of envs ``rows`` (``DriverEnv._place``) and
``step(r, cfg, rng, ctrl)`` before each physics step (returns the ctrl to apply). When each term draws follows
holosoma's G1 recipes (``config_values/wbt/g1``, ``config_values/loco/g1``): friction, base_com, joint_pos_bias and
mass at setup (base_com and mass then ``set_const``), pd_gains and action_delay at resets, push on a per-env timer
redrawn at resets.

Model parameters are per-env slices of the pool's ``expand(field)`` (live ``(num_envs, ...)`` arrays), written with
NumPy: no recompile, no loop over envs; being model data, not state, they survive the pool's ``reset``.

Every term draws from its own generator seeded from (env seed, term name), the reset-time terms from per-env streams
seeded by it inside parallel kernels: values are reproducible, do not depend on which other terms are on, and the
env's own generator (start frames, reset and observation noise) is untouched. :func:`make_randomizer` returns None
when no term is on: the env then runs exactly its plain code.

TensorBoard (``env.stats()``): ``randomization/`` friction (mean coefficient), base_com (mean offset length, m),
joint_pos_bias (mean |offset|, rad), push_count (pushes per env step, all envs), push_interval_s (mean drawn
interval), pd_gains_kp / pd_gains_kd (mean scales), action_delay (mean steps), mass_scale (mean link factor),
added_mass (mean, kg).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np
from numba import njit, prange

from unilab.sim.quat import quat_normalize, quat_rotate_inv
from unilab.sim.work_claims import LEAST_ROWS, claimed, new_counter, num_chunks
from unilab.tasks.core.collisions import matching_bodies
from unilab.tasks.core.randomization_config import RandomizationConfig
from unilab.tasks.env_streams import next_symmetric

_STREAM = 0x52414E44  # separates the randomization streams from the env's own generator (same seed)
PREFIX = "randomization/"


@dataclass(frozen=True)
class RandomizationTerm:
    """One row of :data:`TERMS`: the config key, its hooks and its TensorBoard scalars."""

    name: str
    setup: Callable[[DomainRandomizer, Any, np.random.Generator], None]
    stats: Callable[[DomainRandomizer], dict[str, float]]
    reset: Callable[[DomainRandomizer, Any, np.random.Generator, np.ndarray], None] | None = None
    step: Callable[[DomainRandomizer, Any, np.random.Generator, np.ndarray], np.ndarray] | None = None


def _uniform(rng: np.random.Generator, pair, size) -> np.ndarray:
    return rng.uniform(float(pair[0]), float(pair[1]), size)


def _env_streams(rng: np.random.Generator, num_envs: int) -> np.ndarray:
    """A term's per-env streams (:mod:`unilab.tasks.env_streams`), from its own generator: the draws its
    parallel kernels make at resets and steps (a Generator draws on one core)."""
    return np.random.SeedSequence(int(rng.integers(1 << 62))).generate_state(num_envs, np.uint64)


@njit(cache=True, fastmath=False, inline="always")
def _draw(streams, e, pair):
    return pair[0] + (pair[1] - pair[0]) * (0.5 * (next_symmetric(streams, e) + 1.0))


def friction_setup(r: DomainRandomizer, cfg, rng) -> None:
    r.friction = _uniform(rng, cfg.range, r.num_envs)
    r.pool.expand("geom_friction")[:, r.contact_geoms, 0] = r.friction[:, None]
    if r.contact_pairs.size:  # explicit <pair>s (the G1's foot-floor contacts) carry their own friction
        r.pool.expand("pair_friction")[:, r.contact_pairs, :2] = r.friction[:, None, None]  # both sliding directions


def base_com_setup(r: DomainRandomizer, cfg, rng) -> None:
    r.com_offset = np.stack([_uniform(rng, getattr(cfg, a), r.num_envs) for a in ("x", "y", "z")], axis=1)
    r.pool.expand("body_ipos")[:, r.com_body] = r.model.body_ipos[r.com_body] + r.com_offset
    r.pool.set_const()  # body_ipos is an mj_setConst input (e.g. dof_invweight0)


def joint_pos_bias_setup(r: DomainRandomizer, cfg, rng) -> None:
    r.joint_pos_bias = _uniform(rng, cfg.range, (r.num_envs, r.num_joints))
    r.ctrl_default = r.ctrl_default + r.joint_pos_bias[:, r.act_joint]  # the PD targets' default pose moves too


def _push_interval(r: DomainRandomizer, cfg, rng, k: int) -> tuple[np.ndarray, np.ndarray]:
    """k drawn intervals (s) and the steps they last: U[interval_s] / control_dt truncated, as holosoma's."""
    s = _uniform(rng, cfg.interval_s, k)
    return s, np.maximum((s / r.control_dt).astype(np.int64), 1)


def push_setup(r: DomainRandomizer, cfg, rng) -> None:
    if r.root_dof < 0:
        raise ValueError("task.randomization.push needs a floating base (a free joint at the robot's root)")
    r.push_counter = np.zeros(r.num_envs, dtype=np.int64)
    r.push_interval_s, r.push_steps = _push_interval(r, cfg, rng, r.num_envs)
    r.push_max = np.array([*cfg.max_lin_vel, *cfg.max_ang_vel], dtype=np.float64)
    r.last_kick = np.zeros((r.num_envs, 6))
    r.pushes = 0


def push_reset(r: DomainRandomizer, cfg, rng, rows: np.ndarray) -> None:
    r.push_counter[rows] = 0
    r.push_interval_s[rows], r.push_steps[rows] = _push_interval(r, cfg, rng, rows.size)


def push_step(r: DomainRandomizer, cfg, rng, ctrl: np.ndarray) -> np.ndarray:
    r.push_counter += 1
    due = np.flatnonzero(r.push_counter >= r.push_steps)
    r.pushes = due.size
    if due.size:
        kick = rng.uniform(-1.0, 1.0, (due.size, 6)) * r.push_max
        qpos, qvel, d, q = r.pool.qpos, r.pool.qvel, r.root_dof, r.root_qpos
        # a free joint's qvel: world-frame linear, body-frame angular velocity; the kick is world-frame
        qvel[due, d:d + 3] += kick[:, :3]
        qvel[due, d + 3:d + 6] += quat_rotate_inv(quat_normalize(qpos[due, q + 3:q + 7]), kick[:, 3:])
        r.last_kick[due] = kick
        push_reset(r, cfg, rng, due)
    return ctrl


def pd_gains_setup(r: DomainRandomizer, cfg, rng) -> None:
    r.kp_scale, r.kd_scale = np.ones((r.num_envs, r.num_act)), np.ones((r.num_envs, r.num_act))
    r.gainprm, r.biasprm = r.pool.expand("actuator_gainprm"), r.pool.expand("actuator_biasprm")
    r.pd_streams = _env_streams(rng, r.num_envs)


def pd_gains_reset(r: DomainRandomizer, cfg, rng, rows: np.ndarray) -> None:
    _pd_gains_reset(rows, r.pd_streams, np.asarray(cfg.kp_scale, np.float64), np.asarray(cfg.kd_scale, np.float64),
                    r.kp, r.kd, r.kp_scale, r.kd_scale, r.gainprm, r.biasprm)


@njit(cache=True, parallel=True, fastmath=False)
def _pd_gains_reset(rows, streams, kp_range, kd_range, kp, kd, kp_scale, kd_scale, gainprm, biasprm):
    """Per restarted env (its own stream): a kp and a kd factor per actuator, and the PD servo of
    actuation.make_pd_model with them: force = gain0 ctrl + bias1 q + bias2 qdot = kp (ctrl - q) - kd qdot."""
    n = rows.shape[0]
    counter = new_counter()
    for _ in prange(num_chunks(n, LEAST_ROWS)):
        for i in claimed(counter, n, LEAST_ROWS):
            e = rows[i]
            for a in range(kp.shape[0]):
                ks = _draw(streams, e, kp_range)
                kp_scale[e, a] = ks
                kd_scale[e, a] = _draw(streams, e, kd_range)
                gainprm[e, a, 0] = kp[a] * ks
                biasprm[e, a, 1] = -(kp[a] * ks)
                biasprm[e, a, 2] = -(kd[a] * kd_scale[e, a])


def action_delay_setup(r: DomainRandomizer, cfg, rng) -> None:
    r.delay = np.zeros(r.num_envs, dtype=np.int64)
    r.ctrl_queue = np.repeat(r.ctrl_default[:, None], int(cfg.steps[1]) + 1, axis=1)  # [e, k]: targets k steps ago
    r.delayed_ctrl = np.empty((r.num_envs, r.num_act))
    r.delay_streams = _env_streams(rng, r.num_envs)


def action_delay_reset(r: DomainRandomizer, cfg, rng, rows: np.ndarray) -> None:
    _action_delay_reset(rows, r.delay_streams, int(cfg.steps[0]), int(cfg.steps[1]), r.ctrl_default, r.delay,
                        r.ctrl_queue)


def action_delay_step(r: DomainRandomizer, cfg, rng, ctrl: np.ndarray) -> np.ndarray:
    _action_delay_step(ctrl, r.delay, r.ctrl_queue, r.delayed_ctrl)
    return r.delayed_ctrl


@njit(cache=True, parallel=True, fastmath=False)
def _action_delay_reset(rows, streams, low, high, ctrl_default, delay, queue):
    """Per restarted env: a delay uniform in [low, high] steps (its own stream), its queue at the default pose."""
    n = rows.shape[0]
    counter = new_counter()
    for _ in prange(num_chunks(n, LEAST_ROWS)):
        for i in claimed(counter, n, LEAST_ROWS):
            e = rows[i]
            delay[e] = min(low + int(0.5 * (next_symmetric(streams, e) + 1.0) * (high - low + 1)), high)
            for k in range(queue.shape[1]):
                for a in range(queue.shape[2]):
                    queue[e, k, a] = ctrl_default[e, a]


@njit(cache=True, parallel=True, fastmath=False)
def _action_delay_step(ctrl, delay, queue, out):
    """Per env: the queue moves one step back, takes this step's targets, and gives those of ``delay`` steps ago."""
    n = queue.shape[0]
    counter = new_counter()
    for _ in prange(num_chunks(n, LEAST_ROWS)):
        for e in claimed(counter, n, LEAST_ROWS):
            for k in range(queue.shape[1] - 1, 0, -1):
                for a in range(queue.shape[2]):
                    queue[e, k, a] = queue[e, k - 1, a]
            for a in range(queue.shape[2]):
                queue[e, 0, a] = ctrl[e, a]
                out[e, a] = queue[e, delay[e], a]


def mass_setup(r: DomainRandomizer, cfg, rng) -> None:
    m = r.model
    links = matching_bodies(m, m.body(r.robot_root).name, cfg.bodies, "task.randomization.mass.bodies")
    added = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, cfg.added_body)
    if added < 0:
        raise ValueError(f"task.randomization.mass.added_body: {cfg.added_body!r} is not a body of the model")
    mass, inertia = r.pool.expand("body_mass"), r.pool.expand("body_inertia")
    r.mass_scale = _uniform(rng, cfg.scale, (r.num_envs, links.size))
    mass[:, links] = m.body_mass[links] * r.mass_scale
    inertia[:, links] = m.body_inertia[links] * r.mass_scale[..., None]
    r.added_mass = _uniform(rng, cfg.added, r.num_envs)
    factor = (mass[:, added] + r.added_mass) / mass[:, added]
    mass[:, added] = mass[:, added] * factor
    inertia[:, added] = inertia[:, added] * factor[:, None]
    r.pool.set_const()  # body_mass and body_inertia are mj_setConst inputs


TERMS = (
    RandomizationTerm("friction", friction_setup, lambda r: {"friction": float(r.friction.mean())}),
    RandomizationTerm("base_com", base_com_setup,
                      lambda r: {"base_com": float(np.linalg.norm(r.com_offset, axis=1).mean())}),
    RandomizationTerm("joint_pos_bias", joint_pos_bias_setup,
                      lambda r: {"joint_pos_bias": float(np.abs(r.joint_pos_bias).mean())}),
    RandomizationTerm("push", push_setup,
                      lambda r: {"push_count": float(r.pushes), "push_interval_s": float(r.push_interval_s.mean())},
                      reset=push_reset, step=push_step),
    RandomizationTerm("pd_gains", pd_gains_setup,
                      lambda r: {"pd_gains_kp": float(r.kp_scale.mean()), "pd_gains_kd": float(r.kd_scale.mean())},
                      reset=pd_gains_reset),
    RandomizationTerm("action_delay", action_delay_setup, lambda r: {"action_delay": float(r.delay.mean())},
                      reset=action_delay_reset, step=action_delay_step),
    RandomizationTerm("mass", mass_setup,
                      lambda r: {"mass_scale": float(r.mass_scale.mean()), "added_mass": float(r.added_mass.mean())}),
)


class DomainRandomizer:
    """The active terms of one env and their per-env values.

    ``robot_body``: a body of the robot (its root's geoms get the friction, its free joint the pushes);
    ``com_body``: the body ``base_com`` moves; ``num_joints``: the observed joints (``joint_pos_bias`` width);
    ``kp``, ``kd``, ``ctrl_default``: ``(nu,)`` nominal gains and zero-action PD targets (``self.ctrl_default``:
    each env's ``(num_envs, nu)``, shifted by ``joint_pos_bias``; an empty delay queue holds them);
    ``act_joint``: each actuator's joint (index among the ``num_joints``).
    """

    def __init__(self, cfg: RandomizationConfig, pool, seed: int, control_dt: float, robot_body: int, com_body: int,
                 num_joints: int, kp: np.ndarray, kd: np.ndarray, ctrl_default: np.ndarray, act_joint: np.ndarray):
        self.pool, self.model, self.num_envs = pool, pool.model, pool.num_envs
        self.control_dt = float(control_dt)
        self.num_joints = int(num_joints)
        self.num_act = int(self.model.nu)
        self.kp, self.kd = np.asarray(kp, dtype=np.float64), np.asarray(kd, dtype=np.float64)
        self.act_joint = np.asarray(act_joint, dtype=np.int64)
        self.ctrl_default = np.tile(np.asarray(ctrl_default, dtype=np.float64), (self.num_envs, 1))
        m = self.model
        self.com_body = int(com_body)
        robot = self.robot_root = int(m.body_rootid[robot_body])
        robot_geom = m.body_rootid[m.geom_bodyid] == robot
        # the robot's geoms and the ground's (world body): a contact's friction is the max of its pair
        self.contact_geoms = np.flatnonzero(robot_geom | (m.geom_bodyid == 0))
        # explicit contact pairs with a robot geom: their friction overrides the geoms' (MuJoCo's <pair>)
        self.contact_pairs = np.flatnonzero(robot_geom[m.pair_geom1] | robot_geom[m.pair_geom2])
        free = [j for j in range(m.njnt) if m.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE and m.jnt_bodyid[j] == robot]
        self.root_dof = int(m.jnt_dofadr[free[0]]) if free else -1
        self.root_qpos = int(m.jnt_qposadr[free[0]]) if free else -1
        self.terms = tuple(t for t in TERMS if cfg.active(t.name))
        self._cfg = {t.name: getattr(cfg, t.name) for t in self.terms}
        # each term's own generator: independent of the env's and of the other terms'
        self._rng = {t.name: np.random.default_rng([int(seed), _STREAM, zlib.crc32(t.name.encode())])
                     for t in self.terms}
        self._reset = tuple(t for t in self.terms if t.reset is not None)
        self._step = tuple(t for t in self.terms if t.step is not None)
        self.joint_pos_bias = np.zeros((0, self.num_joints))  # no rows: the observation adds nothing
        for t in self.terms:
            t.setup(self, self._cfg[t.name], self._rng[t.name])
        # setup-time values never change: their scalars once, not per step
        self._fixed_stats = self._term_stats(t for t in self.terms if t.reset is None and t.step is None)
        self._live = tuple(t for t in self.terms if t.reset is not None or t.step is not None)

    def reset(self, rows: np.ndarray) -> None:
        """Reset-time draws for envs ``rows`` (after their state was reset)."""
        for t in self._reset:
            t.reset(self, self._cfg[t.name], self._rng[t.name], rows)

    def before_physics(self, ctrl: np.ndarray) -> np.ndarray:
        """Step-time terms (pushes into the pool's qvel); returns the PD targets to apply."""
        for t in self._step:
            ctrl = t.step(self, self._cfg[t.name], self._rng[t.name], ctrl)
        return ctrl

    def stats(self) -> dict[str, float]:
        """``randomization/<name>`` -> this step's value of each active term's scalars."""
        return {**self._fixed_stats, **self._term_stats(self._live)}

    def _term_stats(self, terms) -> dict[str, float]:
        return {PREFIX + k: v for t in terms for k, v in t.stats(self).items()}


def make_randomizer(cfg: RandomizationConfig, pool, seed: int, control_dt: float, anchor_body: str, num_joints: int,
                    kp: np.ndarray, kd: np.ndarray, ctrl_default: np.ndarray,
                    act_joint: np.ndarray) -> DomainRandomizer | None:
    """The env's randomizer, or None when no term is on; ``anchor_body``: a body of the robot (the task's anchor),
    and the ``base_com`` body by default."""
    if not any(cfg.active(t.name) for t in TERMS):
        return None
    robot = mujoco.mj_name2id(pool.model, mujoco.mjtObj.mjOBJ_BODY, anchor_body)
    name = cfg.base_com.body or anchor_body
    body = mujoco.mj_name2id(pool.model, mujoco.mjtObj.mjOBJ_BODY, name)
    if body < 0 and cfg.active("base_com"):
        raise ValueError(f"task.randomization.base_com.body: {name!r} is not a body of the model")
    return DomainRandomizer(cfg, pool, seed, control_dt, robot, max(body, 0), num_joints, kp, kd, ctrl_default,
                            act_joint)


def observed_joint_pos_bias(randomizer: DomainRandomizer | None, num_joints: int) -> np.ndarray:
    """The ``(num_envs, J)`` offsets of the default joint positions; ``(0, J)``: none."""
    return np.zeros((0, num_joints)) if randomizer is None else randomizer.joint_pos_bias

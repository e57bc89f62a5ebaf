"""Per-env kernels every joint-target task shares: :func:`action_to_ctrl` (a parallel region of its own: a NumPy
pass over ``(num_envs, ...)`` arrays would run on one core; CONTRIBUTING.md, "Add a host kernel"), and the pieces
of the step driver (:mod:`unilab.tasks.core.driver`), each ``@njit(inline="always")`` for one env ``e``, writing
its rows only.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from unilab.sim.work_claims import LEAST_ROWS, claimed, new_counter, num_chunks
from unilab.tasks.base import settle_env
from unilab.tasks.env_streams import next_symmetric


@njit(cache=True, fastmath=False, inline="always")
def weighted_sum(terms, e, weights):
    """Env ``e``'s reward: its terms times their weights, added in table order.

    A fixed order, so the same bits on every CPU (``terms @ weights`` was OpenBLAS's dot, whose order depends on
    the kernel it picks for the CPU at run time); two roundings per term (Numba without fastmath does not fuse them).
    """
    out = 0.0
    for k in range(weights.shape[0]):
        out += terms[e, k] * weights[k]
    return out


@njit(cache=True, fastmath=False, inline="always")
def any_condition(conds, e):
    """Some condition of env ``e`` holds (its row of ``conds``)."""
    out = False
    for j in range(conds.shape[1]):
        out = out or conds[e, j]
    return out


@njit(cache=True, fastmath=False, inline="always")
def settle_step(e, failed, timeout, bad, reward, returns, terms, action, last_action, out_reward, out_terminated,
                out_truncated):
    """The step's end for env ``e``; returns done.

    Done semantics (:func:`unilab.tasks.base.settle_env`), a bad env's reward terms zeroed, ``last_action =
    action``. A failure in the step that times out is both terminated and truncated: the learner bootstraps it
    (``~terminated | truncated``, holosoma's ``truncations | ~dones``: the time-out wins) while failure counts
    (evaluation, samplers) still see it. A diverged (bad) env is terminated only.
    """
    done = settle_env(e, failed, timeout, bad, reward, returns, out_reward, out_terminated, out_truncated)
    if timeout and failed and not bad[e]:
        out_truncated[e] = True
    if bad[e]:
        for k in range(terms.shape[1]):
            terms[e, k] = 0.0
    for j in range(action.shape[1]):
        last_action[e, j] = action[e, j]
    return done


@njit(cache=True, fastmath=False, inline="always")
def info_columns(e, terms, conds, terms_info, conds_info):
    """Env ``e``'s reward terms (float32) and conditions into its column of the ``(k, num_envs)`` info rows."""
    for k in range(terms.shape[1]):
        terms_info[k, e] = np.float32(terms[e, k])
    for k in range(conds.shape[1]):
        conds_info[k, e] = conds[e, k]


@njit(cache=True, fastmath=False, inline="always")
def copy_final_obs(e, policy, critic, final_policy, final_critic):
    """Env ``e``'s observation rows into the final-observation buffers (its episode ended this step)."""
    for m in range(policy.shape[1]):
        final_policy[e, m] = policy[e, m]
    for m in range(critic.shape[1]):
        final_critic[e, m] = critic[e, m]


@njit(cache=True, fastmath=False)
def any_nonzero(x):
    """Some entry of ``x`` is not 0 (a driver draws observation noise only then)."""
    for m in range(x.shape[0]):
        if x[m] != 0.0:
            return True
    return False


@njit(cache=True, fastmath=False, inline="always")
def write_obs(e, row, noise_scale, use_noise, noise_streams, clip, policy_out, critic_out):
    """Env ``e``'s pieces in ``row`` (critic order) into its float32 policy (plus noise) and critic rows,
    each entry clipped to ``+-clip`` (holosoma's clip_observations, after the noise)."""
    # float32 out; a diverged env must not leak NaN/inf into the learner (it is reset this step anyway)
    for m in range(policy_out.shape[1]):
        x = row[m]
        if use_noise:  # every entry draws (scale 0 too): the stream's use does not depend on the scales
            x = row[m] + noise_scale[m] * next_symmetric(noise_streams, e)
        y = np.float32(x)
        policy_out[e, m] = _clipped(y, clip) if np.isfinite(y) else np.float32(0.0)
    for m in range(critic_out.shape[1]):
        y = np.float32(row[m])
        critic_out[e, m] = _clipped(y, clip) if np.isfinite(y) else np.float32(0.0)


@njit(cache=True, fastmath=False, inline="always")
def _clipped(y, clip):
    if y > clip:
        return np.float32(clip)
    if y < -clip:
        return np.float32(-clip)
    return y


@njit(cache=True, parallel=True, fastmath=False)
def action_to_ctrl(action_in, scale, default, action, ctrl):
    """``action = nan_to_num(clip(action_in, -1, 1))`` and ``ctrl = action * scale + default``, per env
    (``default``: ``(num_envs, nu)``, each env's default pose, which joint_pos_bias shifts).

    Two roundings, no fused multiply-add (Numba without fastmath does not contract them), so NumPy's ``np.clip``,
    ``np.nan_to_num(nan=0)`` (a NaN stays NaN through the clip), ``np.multiply`` then ``+=`` give the same bits.
    """
    n = action.shape[0]
    counter = new_counter()
    for _ in prange(num_chunks(n, LEAST_ROWS)):
        for e in claimed(counter, n, LEAST_ROWS):
            for j in range(action.shape[1]):
                a = np.float64(action_in[e, j])
                if np.isnan(a):
                    a = 0.0
                elif a < -1.0:
                    a = -1.0
                elif a > 1.0:
                    a = 1.0
                action[e, j] = a
                ctrl[e, j] = a * scale[j] + default[e, j]

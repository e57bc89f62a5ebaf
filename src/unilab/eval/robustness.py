"""Metrics per randomization bin: how a policy's success and errors depend on each randomized quantity.

Each env of an evaluation with domain randomization on draws its own values (:mod:`unilab.tasks.core.randomization`);
:func:`randomized_values` reads one number per env and quantity (a vector's mean: friction, PD-gain scales, link mass
scales; the centre-of-mass offset per axis), and :func:`by_bins` splits the envs into quantile bins of each (discrete
quantities such as the action delay: one bin per value) and reports the per-env metrics' means in each bin.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np


def randomized_values(env: Any) -> dict[str, np.ndarray]:
    """``{quantity: (num_envs,)}`` of the env's active randomization terms (empty without randomization)."""
    r = getattr(env, "randomizer", None)
    if r is None:
        return {}
    names = {t.name for t in r.terms}
    out: dict[str, np.ndarray] = {}
    if "friction" in names:
        out["friction"] = np.asarray(r.friction, dtype=np.float64).reshape(r.num_envs, -1).mean(axis=1)
    if "base_com" in names:
        for k, axis in enumerate("xyz"):
            out[f"base_com_{axis}"] = np.asarray(r.com_offset[:, k], dtype=np.float64)
    if "joint_pos_bias" in names:
        out["joint_pos_bias_abs"] = np.abs(r.joint_pos_bias).mean(axis=1)
    if "pd_gains" in names:
        out["kp_scale"] = r.kp_scale.mean(axis=1)
        out["kd_scale"] = r.kd_scale.mean(axis=1)
    if "action_delay" in names:
        out["action_delay_steps"] = np.asarray(r.delay, dtype=np.float64)
    if "mass" in names:
        out["mass_scale"] = r.mass_scale.mean(axis=1)
        out["added_mass_kg"] = np.asarray(r.added_mass, dtype=np.float64)
    return out


def bin_edges(values: np.ndarray, bins: int) -> np.ndarray:
    """Quantile edges of ``values`` (``bins + 1``), or the distinct values' midpoints for a quantity with at most
    ``bins`` distinct values (one bin each)."""
    distinct = np.unique(values)
    if distinct.size <= bins:
        mids = 0.5 * (distinct[1:] + distinct[:-1])
        return np.concatenate([[distinct[0]], mids, [distinct[-1]]])
    return np.quantile(values, np.linspace(0.0, 1.0, bins + 1))


def by_bins(values: Mapping[str, np.ndarray], per_env: Mapping[str, np.ndarray], bins: int = 4,
            rows: np.ndarray | None = None) -> dict[str, list[dict[str, float]]]:
    """``{quantity: [{"low", "high", "envs", metric: mean}, ...]}``: the means of ``per_env`` metrics (each
    ``(num_envs,)``) over the envs in each bin of each quantity; ``rows``: only these envs."""
    out: dict[str, list[dict[str, float]]] = {}
    for name, v in values.items():
        v = np.asarray(v, dtype=np.float64) if rows is None else np.asarray(v, dtype=np.float64)[rows]
        edges = bin_edges(v, bins)
        index = np.clip(np.searchsorted(edges, v, side="right") - 1, 0, len(edges) - 2)
        entries = []
        for b in range(len(edges) - 1):
            mask = index == b
            if not mask.any():
                continue
            entry: dict[str, float] = {"low": float(v[mask].min()), "high": float(v[mask].max()),
                                       "envs": int(mask.sum())}
            for metric, m in per_env.items():
                m = np.asarray(m, dtype=np.float64) if rows is None else np.asarray(m, dtype=np.float64)[rows]
                entry[metric] = float(np.nanmean(m[mask]))
            entries.append(entry)
        out[name] = entries
    return out


def format_bins(report: Mapping[str, list[Mapping[str, float]]], metrics: tuple[str, ...]) -> str:
    """A table: one row per quantity and bin, the bin's range, envs and ``metrics``."""
    rows = [f"{'quantity':<20}{'range':>22}{'envs':>6}" + "".join(f"{m:>18}" for m in metrics)]
    for name, entries in report.items():
        for e in entries:
            span = f"{e['low']:.3g}..{e['high']:.3g}"
            rows.append(f"{name:<20}{span:>22}{e['envs']:>6}" + "".join(f"{e.get(m, float('nan')):>18.3f}"
                                                                        for m in metrics))
    return "\n".join(rows)

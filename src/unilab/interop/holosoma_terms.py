"""holosoma's observation terms in a unilab env: the terms a task's pieces carry, the file's term list, and the
holosoma observation assembled from the env's own pieces.

A task declares, next to its observation rows, the holosoma term each of its pieces is (``HOLOSOMA_TERMS`` in
``unilab.tasks.<package>.observations``: term -> the pieces it concatenates). A file's terms are read from its metadata
(``observation_layout``, else the ``experiment_config``'s actor group) or, for files that record neither (holosoma's
published ones), holosoma_inference's own term lists (``config_values/observation.py``: ``wbt`` and
``loco_g1_29dof``/``loco_t1_29dof``, the same names); each term's width comes from the task's pieces.

The assembled observation reads the env's critic observation (every piece, no noise): a term's entries are its pieces'
entries, joint-valued pieces reordered from the env's joint order into the file's ``dof_names`` order, each value
times ``file scale / task scale`` (holosoma scales a term after computing it, unilab's pieces carry the task's
``obs_scales``; a file without scales is taken to use the task's). The ``actions`` term is the previous file output
``u``: the env shows its piece ``bound * a`` for the [-1, 1] action ``a`` it applied, and ``u = piece * (scale / bound)
/ holosoma_scale`` per joint (:mod:`.holosoma_actions`); the two differ only where the env clipped ``a`` at its bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from importlib import import_module
from typing import Any

import numpy as np

from unilab.interop.holosoma_onnx import HolosomaFormatError, ObsTerm, PolicyFile
from unilab.tasks.core.observations import joints_width
from unilab.tasks.registry import TASKS

DEFAULT_ACTOR_TERMS: dict[str, tuple[str, ...]] = {
    "wbt": ("motion_command", "motion_ref_ori_b", "base_ang_vel", "dof_pos", "dof_vel", "actions"),
    "loco": ("base_ang_vel", "projected_gravity", "command_lin_vel", "command_ang_vel", "dof_pos", "dof_vel",
             "actions", "sin_phase", "cos_phase"),
}
"""holosoma_inference 0.1.3's actor terms per file kind, for files whose metadata lists none (concatenated sorted)."""
ACTIONS = "actions"
"""holosoma's name of the previous-action term."""


def task_terms(task: str) -> dict[str, tuple[str, ...]] | None:
    """Task ``task``'s declared ``HOLOSOMA_TERMS`` (in its package's observations module), or None when it declares
    none."""
    try:
        module = import_module(f"unilab.tasks.{TASKS[task].package}.observations")
    except (KeyError, ModuleNotFoundError):
        return None
    return getattr(module, "HOLOSOMA_TERMS", None)


def missing_terms(names: Sequence[str], task: str) -> list[str]:
    """The terms of ``names`` no piece of task ``task`` carries (all of them when it declares none)."""
    table = task_terms(task) or {}
    return sorted(set(names) - set(table))


def file_term_names(policy: PolicyFile) -> list[str]:
    """The file's actor terms in concatenation order (sorted names), from its metadata or the kind's defaults."""
    layout = policy.metadata.get("observation_layout")
    if isinstance(layout, list) and layout:
        return [str(e["name"]) for e in layout]
    group = policy.experiment("observation", "groups", "actor_obs", "terms")
    if isinstance(group, dict) and group:
        return sorted(group)
    return sorted(DEFAULT_ACTOR_TERMS[policy.kind])


def file_terms(policy: PolicyFile, widths: dict[str, int]) -> list[ObsTerm]:
    """The file's terms with their width (``widths``: term -> entries per frame in the evaluating task), history and
    scale; HolosomaFormatError naming the file when they do not add up to its input width."""
    layout = policy.metadata.get("observation_layout")
    if isinstance(layout, list) and layout:
        terms = [ObsTerm(str(e["name"]), int(e["dim"]), int(e.get("history_length") or 1),
                         None if e.get("scale") is None else float(e["scale"])) for e in layout]
    else:
        group = policy.experiment("observation", "groups", "actor_obs")
        history = int((group or {}).get("history_length") or 1)
        scales = {k: v.get("scale") for k, v in ((group or {}).get("terms") or {}).items() if isinstance(v, dict)}
        terms = []
        for name in file_term_names(policy):
            if name not in widths:
                raise HolosomaFormatError(f"{policy.path}: observation term {name!r} has no piece in the task")
            s = scales.get(name)
            terms.append(ObsTerm(name, widths[name], history, None if s is None else float(s)))
    total = sum(t.width for t in terms)
    if total != policy.obs_dim:
        listing = ", ".join(f"{t.name} {t.dim}x{t.history}" for t in terms)
        raise HolosomaFormatError(f"{policy.path}: the observation is {policy.obs_dim} wide, its terms ({listing}) "
                                  f"add up to {total}")
    return terms


@dataclass
class _Entry:
    source: np.ndarray  # (F,) index into the critic observation of each entry of a frame
    factor: np.ndarray  # (F,) factor applied to it


class HolosomaObservation:
    """The file's observation of every env of ``env``, assembled from the env's critic observation; ``terms``: the
    file's (:func:`file_terms`), ``table``: the task's ``HOLOSOMA_TERMS``, ``dof_names``: the file's joint order,
    ``action_factor``: per file joint, the factor from the env's ``actions`` piece to the file's output
    (:meth:`HolosomaActions.piece_to_output`)."""

    def __init__(self, env: Any, terms: Sequence[ObsTerm], table: dict[str, tuple[str, ...]],
                 dof_names: Sequence[str], action_factor: np.ndarray):
        self.env, self.terms = env, list(terms)
        layout = env.layout
        by_name = {t.name: t for t in layout.pieces}
        joints = list(env.joint_names)
        actuators = [joints[j] for j in np.asarray(env.act_joint)]
        scales = getattr(env, "obs_scales", {})
        self._entries = []
        for term in self.terms:
            source, factor = [], []
            for piece in table[term.name]:
                sl = layout.slices[piece]
                if term.name == ACTIONS:
                    order = [actuators.index(n) for n in dof_names]
                    f = np.asarray(action_factor, dtype=np.float64)
                elif by_name[piece].width is joints_width:
                    order = [joints.index(n) for n in dof_names]
                    f = np.ones(len(order))
                else:
                    order = list(range(sl.stop - sl.start))
                    f = np.ones(len(order))
                scale = 1.0 if term.scale is None else term.scale / float(scales.get(piece, 1.0))
                source.append(sl.start + np.asarray(order, dtype=np.int64))
                factor.append(f * scale)
            entry = _Entry(np.concatenate(source), np.concatenate(factor))
            if entry.source.size != term.dim:
                raise HolosomaFormatError(f"holosoma term {term.name!r} is {term.dim} wide, the task's pieces "
                                          f"{table[term.name]} give {entry.source.size}")
            self._entries.append(entry)
        n = env.num_envs
        self._history = [np.zeros((n, t.history, t.dim), dtype=np.float32) for t in self.terms]

    def __call__(self, critic_obs: np.ndarray, new_episode: np.ndarray | None = None) -> np.ndarray:
        """``(num_envs, obs_dim)`` float32 for this step; ``new_episode``: envs whose history restarts (zeros)."""
        parts = []
        for entry, hist in zip(self._entries, self._history, strict=True):
            if new_episode is not None and new_episode.any():
                hist[new_episode] = 0.0
            hist[:, :-1] = hist[:, 1:]
            hist[:, -1] = critic_obs[:, entry.source] * entry.factor
            parts.append(hist.reshape(hist.shape[0], -1))
        return np.concatenate(parts, axis=1).astype(np.float32, copy=False)


def piece_widths(env: Any, table: dict[str, tuple[str, ...]]) -> dict[str, int]:
    """Entries per frame of each term of ``table`` in ``env``."""
    sl = env.layout.slices
    return {term: sum(sl[p].stop - sl[p].start for p in pieces) for term, pieces in table.items()
            if all(p in sl for p in pieces)}

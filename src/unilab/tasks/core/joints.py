"""Per-joint values from ``{joint name or regex: value}`` maps (kp, kd, default pose of any robot)."""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np


def match_joint_values(patterns: Mapping[str, float], joint_names: list[str], default: float | None,
                       what: str) -> np.ndarray:
    """Per-joint values from a ``{joint name or regex: value}`` map (``default_joint_pos``, ``kp``, ``kd``).

    - a key equal to a joint's name sets that joint, whatever patterns also match it
      (``+task.robot.kp.left_knee_joint=120`` beats ``.*_knee_joint``);
    - otherwise the keys that fully match the joint's name as a regex apply; two giving it different values are
      an error naming both keys (equal values are fine);
    - a joint no key matches gets ``default``; ``default=None`` makes that an error naming the joint;
    - a plain-name key (no regex metacharacters) naming no joint is an error: a misspelt override must not be
      ignored silently.

    Errors (these, a bad regex, a non-numeric value) are ValueErrors starting with ``what`` and naming the key.
    """
    entries = []
    for key, val in patterns.items():
        key = str(key)
        try:
            value = float(val)
        except (TypeError, ValueError):
            raise ValueError(f"{what}: key {key!r} needs a number, got {val!r}") from None
        try:
            entries.append((key, re.compile(key), value))
        except re.error as exc:
            raise ValueError(f"{what}: bad joint pattern {key!r}: {exc}") from exc
    names = set(joint_names)
    strays = [key for key, _, _ in entries if key not in names and re.escape(key) == key]
    if strays:
        raise ValueError(f"{what}: key(s) {strays} name no joint of the model (joints: {list(joint_names)})")
    exact = {key: value for key, _, value in entries if key in names}
    out = np.empty(len(joint_names))
    unmatched = []
    for i, name in enumerate(joint_names):
        hits = [(name, exact[name])] if name in exact else [(k, v) for k, rx, v in entries if rx.fullmatch(name)]
        clash = [(key, value) for key, value in hits[1:] if value != hits[0][1]]
        if clash:
            (first_key, first), (key, value) = hits[0], clash[0]
            raise ValueError(
                f"{what}: joint {name!r} matches both {first_key!r} ({first:g}) and {key!r} ({value:g}); "
                f"give {what} the key {name!r} (an exact joint name beats every pattern) or make the patterns disjoint"
            )
        if hits:
            out[i] = hits[0][1]
        elif default is None:
            unmatched.append(name)
        else:
            out[i] = default
    if unmatched:
        raise ValueError(f"{what}: no pattern matches joint(s) {unmatched}")
    return out

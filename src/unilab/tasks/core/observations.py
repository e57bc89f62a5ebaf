"""Where each observation piece (a :class:`~unilab.tasks.core.terms.Term` with a ``width``) sits: slices, dims,
noise and the left/right mirror. The critic observation is every piece in table order, the actor's its first
``num_policy`` pieces (plus noise), so one scratch row per env fills both (:func:`.kernels.write_obs`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from itertools import accumulate

import numpy as np

from unilab.tasks.core.symmetry import joint_mirror, piece_mirror
from unilab.tasks.core.terms import Term


def fixed_width(w: int) -> Callable[[int, int], int]:
    """A piece's ``Term.width`` for ``w`` entries; :func:`joints_width`: one per joint."""
    return lambda nj, nb: w


def joints_width(nj: int, nb: int) -> int:
    return nj


@dataclass(frozen=True)
class PieceLayout:
    """``pieces`` in critic order, the actor's the first ``num_policy``; a piece's ``width(J, B)`` reads
    ``num_joints`` and ``num_bodies``."""

    pieces: tuple[Term, ...]
    num_policy: int
    num_joints: int
    num_bodies: int = 0

    # cached: the layout is frozen, and the env's driver reads the offsets on every call (a restart: several per step)
    @cached_property
    def slices(self) -> dict[str, slice]:
        """Every piece's slice of the critic observation (the policy pieces: also of the policy's)."""
        bounds = list(accumulate((t.width(self.num_joints, self.num_bodies) for t in self.pieces), initial=0))
        return {t.name: slice(a, b) for t, a, b in zip(self.pieces, bounds, bounds[1:])}

    @cached_property
    def offsets(self) -> np.ndarray:
        return np.array([s.start for s in self.slices.values()], dtype=np.int64)

    @property
    def policy_dim(self) -> int:
        return self.slices[self.pieces[self.num_policy - 1].name].stop

    @property
    def critic_dim(self) -> int:
        return self.slices[self.pieces[-1].name].stop

    @property
    def policy_slices(self) -> dict[str, slice]:
        return {t.name: self.slices[t.name] for t in self.pieces[:self.num_policy]}

    def noise_scale(self, noise_cfg, factor: dict[str, float] | None = None) -> np.ndarray:
        """Per-entry uniform noise half-widths of the policy observation: ``noise_cfg.<piece's noise key>``,
        times ``factor[piece]`` (a piece's scale, for noise drawn before it, as holosoma)."""
        out = np.zeros(self.policy_dim)
        for t in self.pieces[:self.num_policy]:
            if t.noise is not None:
                out[self.slices[t.name]] = getattr(noise_cfg, t.noise) * (factor or {}).get(t.name, 1.0)
        return out

    def env_mirror(self, model, joint_ids: list[int], act_joint: np.ndarray, default_joint_pos: np.ndarray,
                   bodies: np.ndarray | None = None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """The env's left/right mirror of ``obs``, ``critic_obs`` and ``action`` (``EnvSpec.mirror``) as signed
        permutations ``(perm, sign)``: ``mirrored[..., k] = sign[k] * x[..., perm[k]]``. ``act_joint`` indexes
        ``joint_ids``; ``bodies``: each body piece's partner. Each piece maps onto itself, so the policy's is the
        critic's first ``policy_dim`` entries. ValueError for a joint or actuator without its partner, axes that
        are not mirror images, or a lopsided default pose.
        """
        joints = joint_mirror(model, joint_ids)
        actions = joint_mirror(model, [joint_ids[j] for j in act_joint])
        if not np.allclose(joints(default_joint_pos), default_joint_pos, rtol=0.0, atol=1e-9):
            raise ValueError("mirror: the default pose (task.robot.default_joint_pos) is not left/right symmetric")
        bodies = np.zeros(0, np.int64) if bodies is None else bodies
        perm, sign = np.empty(self.critic_dim, np.int64), np.empty(self.critic_dim)
        for t in self.pieces:
            sl = self.slices[t.name]
            p, s = piece_mirror(t.mirror, joints, actions, bodies)
            perm[sl], sign[sl] = sl.start + p, s
        n = self.policy_dim
        return {"obs": (perm[:n], sign[:n]), "critic_obs": (perm, sign), "action": (actions.perm, actions.sign)}

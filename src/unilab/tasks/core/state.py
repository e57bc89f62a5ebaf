"""Per-env state declared once, as ``(name, shape, dtype[, fill])`` rows: a task builds its arrays, the struct its
kernels read and the tuple a kernel writes through from the same rows, in the same order. A shape lists sizes and
dimension names (``("n", "B", 3)``: envs x tracked bodies x 3), looked up by :meth:`StateSpec.allocate`.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np


@dataclass(frozen=True)
class StateSpec:
    """Rows ``(name, shape, dtype)`` or ``(name, shape, dtype, fill)`` (fill: the value of a fresh buffer, 0)."""

    rows: tuple[tuple, ...]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(r[0] for r in self.rows)

    def allocate(self, **dims: int) -> SimpleNamespace:
        """One C-contiguous buffer per row, each dimension name in a shape replaced by ``dims[name]``."""
        out = {}
        for name, shape, dtype, *fill in self.rows:
            missing = [d for d in shape if isinstance(d, str) and d not in dims]
            if missing:
                raise ValueError(f"state {name!r}: no size given for dimension {missing[0]!r} of {shape}")
            size = tuple(dims[d] if isinstance(d, str) else int(d) for d in shape)
            out[name] = np.full(size, fill[0] if fill else 0, dtype=dtype)
        return SimpleNamespace(**out)

    def values(self, state: SimpleNamespace) -> tuple[np.ndarray, ...]:
        """The buffers of ``state`` in row order: the plain tuple a kernel writes through."""
        return tuple(getattr(state, n) for n in self.names)

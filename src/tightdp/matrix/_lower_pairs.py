"""Explicit pairs for the lower ends of Poisson-sampled runs: steps whose release reduces to DP-SGD.

A record whose gradient is a fixed unit vector at a set of steps and zero elsewhere is an explicit neighbouring
pair; a post-processing of its release that leaves independent Gaussians ``N(B_s a_s, sigma^2)``, ``B_s ~
Bern(q)``, is DP-SGD, whose certified lower end is then below the run's epsilon. Two such sets: steps with
pairwise orthogonal columns (project on the columns), and rows holding a single step each (drop the others).
"""

from __future__ import annotations

import numpy as np

from .._types import FloatArray
from .strategies import Strategy

__all__ = ["lone_entries", "orthogonal_steps"]


def orthogonal_steps(strategy: Strategy, n: int, norms: FloatArray) -> list[int]:
    """Steps whose columns of ``C`` are pairwise orthogonal: every ``b``-th for a ``b``-banded ``C`` (disjoint
    row windows), else greedily by decreasing norm with exact zero inner products."""
    b = strategy.bands(n)
    if b is not None:
        return list(range(0, n, b))
    c = strategy.matrix(n)
    chosen: list[int] = []
    for s in np.argsort(-norms):
        if all(float(c[:, s] @ c[:, t]) == 0.0 for t in chosen):
            chosen.append(int(s))
    return chosen


def lone_entries(strategy: Strategy, n: int) -> FloatArray:
    """``|C[r, j]|`` of the rows with a single non-zero entry, the largest per step (tree aggregation's leaves)."""
    if strategy.toeplitz_coefs(n) is not None:
        return np.zeros(0)
    c = strategy.matrix(n)
    rows = np.nonzero(np.count_nonzero(c, axis=1) == 1)[0]
    best = np.zeros(c.shape[1])
    for r in rows:
        j = int(np.flatnonzero(c[r])[0])
        best[j] = max(best[j], abs(float(c[r, j])))
    return best[best > 0]

"""Ledger helpers of the matrix samplers: column norms, safe rounding, grouping into ``(mechanism, count)``
ledgers, their certified epsilon and the final interval (``tightdp.matrix.accounting``'s module docstring)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from .._caches import register as _register_cache
from .._types import ArrayLike, FloatArray
from ..accountants.connect_dots import ConnectDotsAccountant
from ..bounds import Bounds
from ..mechanisms.base import Mechanism
from ..mechanisms.basic import Gaussian
from ..mechanisms.subsampled import PoissonSampled
from ._pattern_norms import tree_norm_mixture
from .sensitivity import SensitivityBounds
from .strategies import Strategy

__all__ = ["Ledger", "Upper"]

_U = float(np.finfo(float).eps) / 2
Ledger = Sequence[tuple[Mechanism, int]]
#: an upper ledger, or alternatives (each a proven bound; ``None``: not available)
Upper = Ledger | tuple[Ledger | None, ...]


@_register_cache
@lru_cache(maxsize=32)
def _column_norms(strategy: Strategy, n: int) -> FloatArray:
    """``||C[:, s]||`` for every step, read-only and memoised (a sampler asks for them from several bounds, and a
    tree's matrix is rebuilt for each)."""
    coefs = strategy.toeplitz_coefs(n)
    if coefs is not None:  # ||C[:, s]||^2 = sum_{m < n - s} c_m^2
        out = np.asarray(np.sqrt(np.cumsum(coefs**2)[::-1]), dtype=np.float64)
    else:
        c = strategy.matrix(n)
        out = np.asarray(np.sqrt(np.einsum("ij,ij->j", c, c)), dtype=np.float64)
    out.flags.writeable = False
    return out


def _up(x: float, n: int) -> float:
    return x * (1.0 + 4.0 * (n + 2) * _U)


def _down(x: float, n: int) -> float:
    return x * (1.0 - 4.0 * (n + 2) * _U)


def _sampled(sigma: float, sens: float, q: float) -> PoissonSampled | Gaussian:
    g = Gaussian(noise_multiplier=sigma, sensitivity=sens)
    return g if q >= 1.0 else PoissonSampled(mechanism=g, sampling_rate=q)


def _clusters(values: ArrayLike, max_groups: int = 4, tol: float = 1e-9) -> list[FloatArray]:
    """Sorted (descending) values cut into runs whose spread is at most ``tol`` relative; more than
    ``max_groups`` runs are cut into ``max_groups`` equal parts instead (coarser, still safe below)."""
    s = np.sort(np.asarray(values, float))[::-1]
    cuts = [0] + [i for i in range(1, s.size) if s[i] < s[i - 1] * (1 - tol)] + [s.size]
    runs = [s[a:b] for a, b in itertools.pairwise(cuts)]
    if len(runs) > max_groups:  # merge neighbouring runs, keeping the split points between the largest gaps
        runs = [p for p in np.array_split(s, max_groups) if p.size]
    return runs


def _grouped(sens: ArrayLike, n: int) -> list[tuple[float, int]]:
    """``(value, count)`` per cluster, each rounded DOWN to its least (a smaller gradient norm is an attained
    input, so the lower ledger stays an explicit pair)."""
    return [(_down(float(r[-1]), n), int(r.size)) for r in _clusters(sens) if r[-1] > 0]


def _grouped_up(values: ArrayLike, n: int) -> list[tuple[float, int]]:
    """``(value, count)`` per cluster, each rounded UP to its largest (a larger sensitivity dominates)."""
    return [(_up(float(r[0]), n), int(r.size)) for r in _clusters(values)]


def _sens_details(s: SensitivityBounds) -> dict[str, Any]:
    return {"sensitivity": s.to_dict()}


#: the pattern-norm mixture is skipped when ``E ||C x||^2 / sigma^2`` may exceed this (its loss beyond the range)
MAX_MEAN_SQUARE = 1000.0


def _pattern_norm_ledger(
    strategy: Strategy, sigma: float, n: int, q: float, cap: float, norms: FloatArray
) -> list[tuple[Mechanism, int]] | None:
    """The pattern-norm mixture (``PoissonSampling``'s docstring, (vi)) of patterns whose bits lie pathwise below
    ``n`` independent ``Bernoulli(q)`` bits, for a non-negative ``C`` whose ``pattern_norm_law`` is known: the
    mixture of ``tightdp.matrix._pattern_norms`` with the norms capped at ``cap`` (at least every such pattern's
    norm). ``None`` when the strategy has no law, or ``E ||C x||^2 <= q (1 - q) sum ||C_j||^2 + (q sum ||C_j||)^2``
    may exceed ``MAX_MEAN_SQUARE sigma^2`` (a loss out of the engine's range: the program is not run)."""
    mean_square = q * (1 - q) * float(np.sum(norms**2)) + (q * float(np.sum(norms))) ** 2
    if mean_square >= MAX_MEAN_SQUARE * sigma**2:
        return None
    law = strategy.pattern_norm_law(n, q)
    return None if law is None else tree_norm_mixture(law, sigma, cap)


def _epsilon_of(ledger: Ledger, delta: float, eps_error: float | None, rel_error: float | None) -> Bounds:
    acc = ConnectDotsAccountant(eps_error=eps_error, rel_error=rel_error)
    for mech, count in ledger:
        acc.compose(mech, count)
    return acc.epsilon(delta)


def _combine(lower: float, up: Bounds, details: dict[str, Any]) -> Bounds:
    lower = min(max(lower, 0.0), up.upper)
    est = min(max(up.estimate, lower), up.upper)
    return Bounds(lower, est, up.upper, "epsilon", "bound", details)

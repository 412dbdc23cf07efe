"""The law of a record's pattern norm ``||C x||`` under Poisson sampling, where a strategy can compute it (tree
aggregation, by dynamic programming over the tree), and the scalar mixture of Gaussians it gives: the
pattern-norm mixture upper end of ``PoissonSampling`` ((vi) in its docstring).

Why the law of the norm suffices. Under Poisson sampling the run of a record is a mixture over its participation
pattern ``x`` (0/1 per step, independent ``Bernoulli(q)`` bits). ``PoissonSampling``'s docstring, (v), shows that
for any adaptive gradients of norm at most 1 the run is dominated by the scalar mixture of Gaussians whose shift is
any upper bound ``r_x`` on ``|| |C| x ||`` (each pattern's likelihood ratio is a Brownian exponential stopped before
``r_x^2 / sigma^2``; comonotone sums dominate), with ``x`` drawn from its law. The count mixture there takes
``r_x = min(|x| A, s)``, the worst pattern with ``|x|`` participations. Here ``r_x = || C x ||`` itself, for a
non-negative ``C``, so only the law of ``||C x||`` under ``Bernoulli(q)`` bits is needed; and a scalar mixture grows
with the law of its shift in the usual stochastic order (Ganesh 2024, Lemma 2.9), so any stochastically larger law
is also an upper end.

Tree aggregation. ``BinaryTree``'s rows are the nodes ``v`` of the binary tree over ``2^h >= n`` leaves (leaves
``>= n`` never take part), each the indicator of its leaves, so ``||C x||^2 = sum_v n_v^2`` with ``n_v`` the number
of participating steps below ``v``: an integer. For the subtree of a node, the pair ``(N, S)`` (its count and the sum
of ``n_v^2`` over its nodes) is ``(N1 + N2, S1 + S2 + (N1 + N2)^2)`` from its children's independent pairs, and
``(B, B)`` at a leaf with bit ``B``. The joint law is computed level by level on exact integer ``S`` (a direct,
non-FFT convolution per pair of counts), one full subtree per level and the partial ones along the right edge.

Certification (``tree_norm_law``): every mass is a sum of products of non-negative numbers, so its computed value
is at most ``(1 + gamma)`` times the exact one, ``gamma`` accumulated from the number of terms per level (any
summation order of non-negative terms has relative error at most ``(T - 1) u``); masses below ``TINY`` are dropped.
Dividing by ``1 + gamma`` gives masses ``p~ <= p`` entrywise; the missing mass is ``1 - sum p~``. Then
``tree_norm_mixture`` rounds each norm up to a geometric grid of ratio ``1 + GRID_RATIO`` (never above ``s``) and
moves masses below ``MERGE_MASS`` up to the next kept norm: both only make the law larger. It does not put the
missing mass at ``s`` (a loss far out of the engine's range) but pays it as ``ApproximateDP(0, missing)``, by joint
convexity (``tree_norm_mixture``'s docstring).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .._caches import register as _register_cache
from .._types import FloatArray
from ..mechanisms.base import Mechanism
from ..mechanisms.basic import ApproximateDP
from ..mechanisms.mixture import MixtureOfGaussians

__all__ = ["GRID_RATIO", "MAX_WORK", "PatternNormLaw", "tree_norm_law", "tree_norm_mixture"]

_U = float(np.finfo(float).eps) / 2
#: masses below this at the ends of a count's row are dropped from the dynamic program (they join the missing mass)
TINY = 1e-24
#: the most multiply-adds the dynamic program may spend (about two seconds); beyond it no law is given
MAX_WORK = 1.5e10
#: the norms are rounded up to the grid ``(1 + GRID_RATIO)^k``
GRID_RATIO = 3e-3
#: grid masses below this move up to the next kept norm
MERGE_MASS = 1e-14

# a subtree's law: count N -> (offset, masses of S = offset, offset + 1, ...)
_Law = dict[int, tuple[int, FloatArray]]


@dataclass(frozen=True)
class PatternNormLaw:
    """A law of the squared pattern norm ``||C x||^2`` with masses at most the true ones (module docstring).

    Attributes
    ----------
    squares : FloatArray
        The values of ``||C x||^2`` (sorted, distinct, exact integers for tree aggregation).
    masses : FloatArray
        Their masses, each at most the true one.
    missing : float
        ``1 - sum(masses)`` rounded up: the mass a user of the law puts on the largest norm.
    """

    squares: FloatArray
    masses: FloatArray
    missing: float


def _log1pu(terms: float) -> float:
    """``log`` of a bound on ``(1 + u)^terms`` (the rounding of ``terms`` operations), padded by 1 %."""
    return 1.01 * terms * _U


class _TreeProgram:
    """The dynamic program over the tree for ``Bernoulli(q)`` leaves (module docstring); ``work`` counts the
    multiply-adds so far and the program stops (``None``) past ``MAX_WORK``."""

    def __init__(self, q: float, max_work: float) -> None:
        self.q, self.max_work, self.work = q, max_work, 0.0
        self.memo: dict[tuple[int, int], tuple[_Law, float]] = {}

    def law(self, level: int, present: int) -> tuple[_Law, float] | None:
        """The law of ``(N, S)`` of a subtree of ``2^level`` leaves whose first ``present`` take part with rate
        ``q``, and the log of its masses' relative error factor; ``None`` past the work budget."""
        key = (level, present)
        if key in self.memo:
            return self.memo[key]
        if present == 0:
            out: tuple[_Law, float] = ({0: (0, np.array([1.0]))}, 0.0)
        elif level == 0:
            out = ({0: (0, np.array([1.0 - self.q])), 1: (1, np.array([self.q]))}, _log1pu(1))
        else:
            half = 1 << (level - 1)
            left = self.law(level - 1, min(present, half))
            right = self.law(level - 1, max(0, present - half)) if left is not None else None
            if left is None or right is None:
                return None
            combined = self._combine(left, right)
            if combined is None:
                return None
            out = combined
        self.memo[key] = out
        return out

    def _combine(self, a: tuple[_Law, float], b: tuple[_Law, float]) -> tuple[_Law, float] | None:
        """The parent's law from its children's: ``N = N1 + N2``, ``S = S1 + S2 + N^2``; masses below ``TINY``
        dropped."""
        (la, ga), (lb, gb) = a, b
        work = sum(len(x) * len(y) for _, x in la.values() for _, y in lb.values())
        self.work += work
        if self.work > self.max_work:
            return None
        parts: dict[int, list[tuple[int, FloatArray]]] = {}
        terms: dict[int, int] = {}
        for n1, (o1, a1) in la.items():
            for n2, (o2, a2) in lb.items():
                n = n1 + n2
                parts.setdefault(n, []).append((o1 + o2 + n * n, np.convolve(a1, a2)))
                terms[n] = terms.get(n, 0) + min(len(a1), len(a2)) + 1
        out: _Law = {}
        for n, pieces in parts.items():
            lo = min(o for o, _ in pieces)
            hi = max(o + len(x) for o, x in pieces)
            z = np.zeros(hi - lo)
            for o, x in pieces:
                z[o - lo : o - lo + len(x)] += x
            keep = np.flatnonzero(z >= TINY)
            if keep.size:
                out[n] = (lo + int(keep[0]), z[keep[0] : keep[-1] + 1])
        return out, ga + gb + _log1pu(max(terms.values()) + 1)


@_register_cache
@lru_cache(maxsize=16)
def tree_norm_law(n: int, q: float, max_work: float = MAX_WORK) -> PatternNormLaw | None:
    """The law of ``||C x||^2`` for tree aggregation over ``n`` steps, ``x`` with ``Bernoulli(q)`` bits, as masses at
    most the true ones (module docstring); ``None`` when the program would exceed ``max_work`` multiply-adds.
    Memoised (it does not depend on the noise); the arrays returned are read-only.

    Parameters
    ----------
    n : int
        Steps (``>= 1``).
    q : float
        The Poisson rate, in ``(0, 1]``.
    max_work : float, optional
        The budget of multiply-adds (default ``MAX_WORK``).

    Returns
    -------
    PatternNormLaw or None
        The law, or ``None`` past the budget.

    Raises
    ------
    ValueError
        ``n < 1`` or ``q`` outside ``(0, 1]``.
    """
    if not (isinstance(n, int) and n >= 1):
        raise ValueError(f"n must be a positive int, got {n!r}")
    if not (0.0 < q <= 1.0):
        raise ValueError(f"q must be in (0, 1], got {q!r}")
    h = (n - 1).bit_length()  # ceil(log2 n) in integers: the levels above the leaves
    res = _TreeProgram(q, max_work).law(h, n)
    if res is None:
        return None
    law, log_err = res
    squares = np.concatenate([o + np.arange(len(x), dtype=float) for o, x in law.values()])
    masses = np.concatenate([x for _, x in law.values()]) / math.exp(log_err)  # each at most the true mass
    order = np.argsort(squares, kind="stable")
    order = order[masses[order] > 0]  # the values no pattern takes
    squares, masses = squares[order], masses[order]
    missing = max(0.0, 1.0 - math.fsum(masses.tolist())) + 4 * _U * masses.size
    squares.flags.writeable = masses.flags.writeable = False
    return PatternNormLaw(squares=squares, masses=masses, missing=min(1.0, missing))


def tree_norm_mixture(
    law: PatternNormLaw, noise: float, cap: float, grid_ratio: float = GRID_RATIO
) -> list[tuple[Mechanism, int]]:
    """The ledger that dominates the scalar mixture of Gaussians at ``noise`` whose shift has the norm's law
    (module docstring): the kept masses, renormalised, on norms rounded up to the grid ``(1 + grid_ratio)^k`` (at
    most ``cap``), masses below ``MERGE_MASS`` moved up; and the missing mass ``w`` as ``ApproximateDP(0, w)``.

    The true pair is ``(1 - w) P' + w P''`` against ``Q`` with ``P'`` the kept masses renormalised (each is at most
    the true one, so ``P''`` is a law), and the hockey-stick divergence is jointly convex and at most 1, so in both
    directions ``delta <= (1 - w) delta' + w``: exactly the composition with ``ApproximateDP(0, w)``. Rounding the
    shifts up and moving masses up only enlarge ``delta'`` (Ganesh 2024, Lemma 2.9). So the missing mass never
    sits at ``cap`` itself, whose loss would be out of the engine's range.

    Parameters
    ----------
    law : PatternNormLaw
        The law of the squared norm (``tree_norm_law``).
    noise : float
        The noise multiplier.
    cap : float
        An upper bound on every pattern's norm (the sensitivity over all patterns, certified).
    grid_ratio : float, optional
        The grid's ratio minus one (default ``GRID_RATIO``).

    Returns
    -------
    list of (Mechanism, int)
        The mixture, and ``ApproximateDP(0, w)`` when ``w > 0``, each once.

    Raises
    ------
    ValueError
        A non-positive ``noise`` or ``cap``, or a law with no mass (from the mechanisms).
    """
    r = np.sqrt(law.squares)
    step = math.log1p(grid_ratio)
    pos = r > 0
    up = np.zeros_like(r)
    up[pos] = np.exp(np.ceil(np.log(r[pos]) / step) * step) * (1 + 4 * _U)
    up = np.minimum(np.maximum(up, r), cap)
    values, inverse = np.unique(up, return_inverse=True)
    w = np.bincount(inverse, weights=law.masses)
    carry = 0.0
    for i in range(w.size - 1):  # small masses up to the next kept norm
        w[i] += carry
        carry, w[i] = (w[i], 0.0) if w[i] < MERGE_MASS else (0.0, w[i])
    w[-1] += carry
    keep = w > 0
    kept = np.minimum(w[keep] / (1.0 - law.missing), 1.0)  # a lone pattern's mass stays a probability
    out: list[tuple[Mechanism, int]] = [
        (
            MixtureOfGaussians(
                noise_multiplier=noise,
                sensitivities=tuple(float(v) for v in values[keep]),
                probabilities=tuple(float(x) for x in kept),
            ),
            1,
        )
    ]
    if law.missing > 0:
        out.append((ApproximateDP(epsilon=0.0, delta=law.missing), 1))
    return out

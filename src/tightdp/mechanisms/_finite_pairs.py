"""Two-point and finite pairs of the selection mechanisms' attained lower ends (``tightdp.mechanisms.selection``),
and the range of epsilon every selection mechanism takes (``check_selection_epsilon``).

``FinitePair`` is a pair given by its finitely many losses; the helpers build the two-candidate pairs of
permute-and-flip and Laplace report-noisy-max and the one-query pairs of the sparse vector technique, whose
proofs are in the module docstrings of ``tightdp.mechanisms.selection`` and ``tightdp.mechanisms._sparse_vector``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from .._validation import check_real
from ..losses import DiscreteLoss
from .base import LossPair, Mechanism

__all__ = ["FinitePair", "check_selection_epsilon", "two_candidate_pair"]

#: the largest epsilon a selection mechanism takes
_MAX_EPSILON = 500.0


def check_selection_epsilon(value: object) -> float:
    """``value`` as a selection mechanism's epsilon, in ``[0, 500]``; a ``ValueError`` naming ``epsilon`` otherwise."""
    return check_real("epsilon", value, low=0.0, high=_MAX_EPSILON, high_open=False)


@dataclass(frozen=True, kw_only=True)
class FinitePair(Mechanism):
    """A concrete pair of output laws on finitely many outputs, given by its losses ``values`` and P-masses
    ``probs`` (an attained pair of a selection mechanism: its certified interval bounds that pair).

    Parameters
    ----------
    values : tuple of float
        The finite losses of the outputs, at least one.
    probs : tuple of float
        Their P-masses, non-negative, one per value.

    Raises
    ------
    ValueError
        If the lengths differ, ``values`` is empty or holds a non-finite loss, or a mass is negative.

    References
    ----------
    Kairouz, Oh, Viswanath 2015, Sec. 2 (a pair of output laws and its privacy region).
    """

    type_name = "finite_pair"
    #: the pair is given as the output laws of one concrete pair of neighbouring data sets (its attained pair)
    pair_attained = True
    values: tuple[float, ...]
    probs: tuple[float, ...]

    def __post_init__(self) -> None:
        v = tuple(float(x) for x in self.values)
        p = tuple(float(x) for x in self.probs)
        if len(v) != len(p) or not v or any(not math.isfinite(x) for x in v) or any(x < 0 for x in p):
            raise ValueError("values and probs must be equally long, finite, probs non-negative")
        object.__setattr__(self, "values", v)
        object.__setattr__(self, "probs", p)

    def privacy_losses(self) -> LossPair:
        loss = DiscreteLoss(values=self.values, probs=self.probs)
        return LossPair(loss, loss)


#: score gaps ``a`` (in units of ``Delta``) of the two-candidate attained pairs (``_two_candidate_pairs``)
_GAPS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5)


def two_candidate_pair(second: Callable[[float], float], gap: float) -> FinitePair | None:
    """The attained pair of two candidates at score gap ``a = gap``: scores ``(0, a Delta)`` on ``D`` and
    ``(Delta, (a - 1) Delta)`` on ``D'`` (each score moves by ``Delta``; ``a = 0`` is ``(0, 0)`` against
    ``(Delta, -Delta)``, ``a = 1`` swaps the two scores, ``a`` and ``2 - a`` are the two directions of one pair).
    ``second(d)`` is candidate 2's output probability when its score exceeds candidate 1's by ``d Delta``; the
    output is the whole release, so the pair is exact. ``None`` where an output's probability is 0 or 1 in
    floating point (the pair is then not representable by its losses)."""
    p2, q2 = second(gap), second(gap - 2.0)
    if not (0.0 < p2 < 1.0 and 0.0 < q2 < 1.0):
        return None
    values = (math.log((1.0 - p2) / (1.0 - q2)), math.log(p2 / q2))
    return FinitePair(values=values, probs=(1.0 - p2, p2))


def _two_candidate_pairs(second: Callable[[float], float]) -> tuple[FinitePair, ...]:
    """``two_candidate_pair`` at every gap of ``_GAPS``."""
    pairs = (two_candidate_pair(second, a) for a in _GAPS)
    return tuple(p for p in pairs if p is not None)


def _permute_and_flip_second(epsilon: float) -> Callable[[float], float]:
    """Permute-and-flip with two candidates: the top one is accepted whenever reached, the other with
    ``e^(-epsilon gap / 2)``; the order is uniform."""

    def second(d: float) -> float:
        return 1.0 - 0.5 * math.exp(-0.5 * epsilon * d) if d >= 0 else 0.5 * math.exp(0.5 * epsilon * d)

    return second


def _laplace_second(epsilon: float) -> Callable[[float], float]:
    """Report-noisy-max with Laplace noise of scale ``b = 2 Delta / epsilon``, two candidates:
    ``P(L_2 - L_1 > x) = e^(-x / b) (1 + x / (2 b)) / 2`` for ``x >= 0`` (the difference of two Laplace variables)."""
    b = 2.0 / epsilon

    def second(d: float) -> float:
        x = abs(d)
        tail = 0.5 * math.exp(-x / b) * (1.0 + x / (2.0 * b))
        return 1.0 - tail if d >= 0 else tail

    return second


def _above(x: float, b1: float, b2: float) -> float:
    """``P(W >= x)`` for ``W = nu - rho``, ``rho ~ Lap(b1)``, ``nu ~ Lap(b2)`` independent (``SparseVector``)."""
    t = abs(x)
    if math.isclose(b1, b2, rel_tol=1e-9):
        tail = 0.5 * math.exp(-t / b1) * (1.0 + t / (2.0 * b1))
    else:
        tail = (b1 * b1 * math.exp(-t / b1) - b2 * b2 * math.exp(-t / b2)) / (2.0 * (b1 * b1 - b2 * b2))
    return tail if x >= 0 else 1.0 - tail

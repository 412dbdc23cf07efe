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

__all__ = ["CLOSED_FORM_REL_ERROR", "FinitePair", "check_selection_epsilon", "two_candidate_pair"]

#: the largest epsilon a selection mechanism takes
_MAX_EPSILON = 500.0
#: the largest relative error of a finite pair's masses accepted (beyond it the pair is not worth composing)
_MAX_MASS_REL_ERROR = 1e-6


def check_selection_epsilon(value: object) -> float:
    """``value`` as a selection mechanism's epsilon, in ``(0, 500]``; a ``ValueError`` naming ``epsilon`` otherwise."""
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
    mass_rel_error : float, optional
        A bound ``rho`` on the relative error of every mass, P's (``probs``) and Q's (``probs * e^(-values)``),
        against the exact pair the floats stand for (default 0: the floats are the pair). Pairs computed from
        closed forms carry ``CLOSED_FORM_REL_ERROR``; the accountants pay for it at both ends
        (``Accountant._query``).

    Raises
    ------
    ValueError
        If the lengths differ, ``values`` is empty or holds a non-finite loss, a mass is negative, or
        ``mass_rel_error`` is not in ``[0, 1e-6]``.

    References
    ----------
    Kairouz, Oh, Viswanath 2015, Sec. 2 (a pair of output laws and its privacy region).
    """

    type_name = "finite_pair"
    #: the pair is given as the output laws of one concrete pair of neighbouring data sets (its attained pair)
    pair_attained = True
    values: tuple[float, ...]
    probs: tuple[float, ...]
    mass_rel_error: float = 0.0

    def __post_init__(self) -> None:
        v = tuple(float(x) for x in self.values)
        p = tuple(float(x) for x in self.probs)
        if len(v) != len(p) or not v or any(not math.isfinite(x) for x in v) or any(x < 0 for x in p):
            raise ValueError("values and probs must be equally long, finite, probs non-negative")
        object.__setattr__(self, "values", v)
        object.__setattr__(self, "probs", p)
        rho = check_real(
            "mass_rel_error", self.mass_rel_error, low=0.0, high=_MAX_MASS_REL_ERROR, low_open=False, high_open=False
        )
        object.__setattr__(self, "mass_rel_error", rho)

    def masses_rel_error(self) -> float:
        return self.mass_rel_error

    def privacy_losses(self) -> LossPair:
        loss = DiscreteLoss(values=self.values, probs=self.probs)
        return LossPair(loss, loss)


#: score gaps ``a`` (in units of ``Delta``) of the two-candidate attained pairs (``_two_candidate_pairs``)
_GAPS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5)
#: a bound on the relative rounding error of every output probability the closed forms below return: a few
#: correctly rounded operations, the smaller probability of an output pair always computed directly (never as
#: ``1 - p``), and an exponential's argument (at most 745 before it underflows) rounded relatively, which moves
#: its value by up to ``745 u``: each within 1e-12 of the exact one (``tightdp.tuning.selection_epsilon`` pays)
CLOSED_FORM_REL_ERROR = 1e-12

#: a candidate's ``(win, lose)`` probabilities given its lead ``d`` in units of ``Delta``, both computed directly
Outcome = Callable[[float], tuple[float, float]]


def two_candidate_pair(second: Outcome, gap: float, *, swapped: bool = False) -> FinitePair | None:
    """The attained pair in which one candidate's lead over its rival(s) falls from ``a Delta`` to ``(a - 2)
    Delta``, ``a = gap`` (each score moves by ``Delta``: the candidate down, the rivals up). Two candidates:
    scores ``(0, a Delta)`` on ``D`` and ``(Delta, (a - 1) Delta)`` on ``D'`` (``a = 0`` is ``(0, 0)`` against
    ``(Delta, -Delta)``, ``a = 1`` swaps the two scores, ``a`` and ``2 - a`` are the two directions of one pair);
    ``second(d)`` is candidate 2's ``(win, lose)`` probabilities when its score exceeds candidate 1's by ``d
    Delta``. The output is the whole release, so the pair is exact. ``swapped``: the data sets exchanged (the
    lead rises from ``(a - 2) Delta`` to ``a Delta``), the other direction of the same neighbours. ``None``
    where an output's probability is 0 in floating point (the pair is then not representable by its losses).
    """
    (p_win, p_lose), (q_win, q_lose) = second(gap), second(gap - 2.0)
    if swapped:
        (p_win, p_lose), (q_win, q_lose) = (q_win, q_lose), (p_win, p_lose)
    if min(p_win, p_lose, q_win, q_lose) <= 0.0:
        return None
    values = (math.log(p_lose / q_lose), math.log(p_win / q_win))
    return FinitePair(values=values, probs=(p_lose, p_win), mass_rel_error=CLOSED_FORM_REL_ERROR)


def _two_candidate_pairs(second: Outcome, *, swapped: bool = False) -> tuple[FinitePair, ...]:
    """``two_candidate_pair`` at every gap of ``_GAPS``."""
    pairs = (two_candidate_pair(second, a, swapped=swapped) for a in _GAPS)
    return tuple(p for p in pairs if p is not None)


def _permute_and_flip_second(epsilon: float) -> Outcome:
    """Permute-and-flip with two candidates: the top one is accepted whenever reached, the other with
    ``e^(-epsilon gap / 2)``; the order is uniform."""

    def second(d: float) -> tuple[float, float]:
        small = 0.5 * math.exp(-0.5 * epsilon * abs(d))
        return (1.0 - small, small) if d >= 0 else (small, 1.0 - small)

    return second


def _laplace_second(epsilon: float) -> Outcome:
    """Report-noisy-max with Laplace noise of scale ``b = 2 Delta / epsilon``, two candidates:
    ``P(L_2 - L_1 > x) = e^(-x / b) (1 + x / (2 b)) / 2`` for ``x >= 0`` (the difference of two Laplace variables)."""
    b = 2.0 / epsilon

    def second(d: float) -> tuple[float, float]:
        x = abs(d)
        tail = 0.5 * math.exp(-x / b) * (1.0 + x / (2.0 * b))
        return (1.0 - tail, tail) if d >= 0 else (tail, 1.0 - tail)

    return second


def _laplace_lone(epsilon: float) -> Outcome:
    """Report-noisy-max with Laplace noise of scale ``b = 2 Delta / epsilon``, three candidates, two of them
    tied: ``(win, lose)`` of the third, whose score exceeds theirs by ``d Delta``.

    With ``x = d Delta / b``, ``Z`` Laplace of scale 1, ``F`` and ``S = 1 - F`` its CDF and survival function
    (``S(t) = e^(-t) / 2`` for ``t >= 0``, ``1 - e^t / 2`` below): the third wins w.p. ``W(x) = E[F(Z + x)^2]``.
    For ``x >= 0``, ``1 - W(x) = P(max(Z_2, Z_3) > Z + x) = 2 P(Z_2 > Z + x) - E[S(Z + x)^2]``; the first term
    is the Laplace difference's tail ``e^(-x) (1 + x / 2)``, and ``E[S(Z + x)^2]`` splits at ``Z = -x`` and
    ``0`` into ``e^(-2x) / 24 + e^(-2x) (e^x - 1) / 8 + 7 e^(-x) / 24 = (5 e^(-x) - e^(-2x)) / 12``. Hence
    ``1 - W(x) = e^(-x) (7/12 + x / 2) + e^(-2x) / 12``. For ``x <= 0``, ``F(t) = S(-t)`` and ``-Z ~ Z`` give
    ``W(x) = E[S(Z - x)^2] = (5 e^x - e^(2x)) / 12``. Both give ``1/3`` at ``x = 0``; the smaller probability
    (at most 2/3, the larger at least 1/3) is always the one computed directly."""
    b = 2.0 / epsilon

    def lone(d: float) -> tuple[float, float]:
        x = d / b
        if x >= 0.0:
            lose = math.exp(-x) * (7.0 / 12.0 + 0.5 * x) + math.exp(-2.0 * x) / 12.0
            return 1.0 - lose, lose
        win = math.exp(x) * (5.0 - math.exp(x)) / 12.0
        return win, 1.0 - win

    return lone


def _above(x: float, b1: float, b2: float) -> tuple[float, float]:
    """``(P(W >= x), P(W < x))`` for ``W = nu - rho``, ``rho ~ Lap(b1)``, ``nu ~ Lap(b2)`` independent
    (``SparseVector``); the tail beyond ``|x|`` computed directly, its complement as ``1 - tail``.

    The tail ``(b1^2 e^(-t/b1) - b2^2 e^(-t/b2)) / (2 (b1^2 - b2^2))`` (symmetric in the scales) is evaluated as
    ``e^(-t/hi) expm1(2 log r - k) / (2 expm1(2 log r))`` with ``r = lo / hi < 1`` (``log r`` by ``log1p``) and
    ``k = t (hi - lo) / (lo hi)``: no cancellation however close the scales; equal scales give ``e^(-t/b) (1 + t /
    (2 b)) / 2``."""
    t = abs(x)
    lo, hi = min(b1, b2), max(b1, b2)
    if lo == hi:
        tail = 0.5 * math.exp(-t / lo) * (1.0 + t / (2.0 * lo))
    else:
        two_log_r = 2.0 * math.log1p((lo - hi) / hi)
        k = t * ((hi - lo) / (lo * hi))  # (hi - lo exact when the scales are close)
        tail = 0.5 * math.exp(-t / hi) * math.expm1(two_log_r - k) / math.expm1(two_log_r)
    return (tail, 1.0 - tail) if x >= 0 else (1.0 - tail, tail)

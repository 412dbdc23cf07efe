"""Closed-form bounds on a composition's ``delta(eps)`` from each step alone, with no grid.

* **Upper**: the total variation distance of a product of pairs is at most the sum of the pairs' (couple the steps
  one by one), and ``delta(eps) <= delta(0) = TV`` for ``eps >= 0`` (for ``eps < 0``, ``delta(eps) = sup_E P(E) -
  Q(E) + (1 - e^eps) Q(E) <= TV + 1 - e^eps``). Each step's ``PrivacyLoss.total_variation`` is a certified bound.
* **Lower**: for any set ``E`` of outputs, ``delta(eps) >= P(E) - e^eps Q(E)``. With ``E_i`` the outputs where step
  ``i``'s loss exceeds ``t = eps`` (``PrivacyLoss.event_masses``: lower bounds on the P-masses of ``E_i`` and its
  complement, upper ones on the Q-masses) and the steps independent, the outputs where *some* step's ``E_i``
  occurs have ``P(E) = 1 - prod_i (1 - P(E_i))`` (for probability measures; ``_candidates`` in general) and
  likewise under Q; one step's ``E_i`` alone is the other candidate, and the larger value counts.

Where every step's loss is small except on rare outputs (a record sampled once in a billion, a Laplace step of
loss 1000 behind a rate of 1e-9), both ends are within ``O(k q)`` relative of each other, and of the truth: a grid
would need a mesh at the scale of the common outputs' loss (1e-9) across the rare ones' (up to 700 and beyond).
Elsewhere they are loose, and only narrow what the grids certify (intervals are intersected).
"""

from __future__ import annotations

import math

import numpy as np

from .._types import FloatArray
from ._pld import Directions

__all__ = ["step_delta_bounds", "total_variation_bound"]

_U = float(np.finfo(float).eps) / 2


def total_variation_bound(directions: Directions) -> float | None:
    """A certified upper bound on ``delta(0)`` of the composition (the larger of the directions'): the sum of its
    steps' ``total_variation``, or ``None`` where a step has none.

    Parameters
    ----------
    directions : list of list of (PrivacyLoss, int)
        Per direction, the distinct losses and their counts.

    Returns
    -------
    float or None
        The bound, in ``[0, 1]``.
    """
    worst = 0.0
    for terms in directions:
        total = 0.0
        for loss, c in terms:
            tv = loss.total_variation()
            if tv is None or not tv >= 0.0:  # (a NaN from a loss at the edge of double precision: no bound)
                return None
            total += c * tv
        worst = max(worst, total * (1.0 + (len(terms) + 2) * 4 * _U))  # the sum's rounding
    return min(worst, 1.0)


def step_delta_bounds(directions: Directions, epsilons: FloatArray) -> tuple[FloatArray, FloatArray] | None:
    """``(lower, upper)`` on ``delta`` at each of ``epsilons`` (module docstring), or ``None`` where a step gives no
    total variation bound or no event masses.

    Parameters
    ----------
    directions : list of list of (PrivacyLoss, int)
        Per direction, the distinct losses and their counts.
    epsilons : FloatArray
        The epsilons, one-dimensional.

    Returns
    -------
    tuple of FloatArray or None
        Certified lower and upper ends, each the shape of ``epsilons``.
    """
    tv = total_variation_bound(directions)
    if tv is None:
        return None
    eps = np.asarray(epsilons, float)
    upper = np.minimum(1.0, tv + np.maximum(0.0, -np.expm1(np.minimum(eps, 0.0))) * (1.0 + 4 * _U))
    lower = np.zeros_like(eps)
    for j, e in enumerate(eps.tolist()):
        for terms in directions:
            masses = []
            for loss, c in terms:
                m = loss.event_masses(e)
                if m is None:
                    return None
                # (NaN from a loss at the edge of double precision: the trivial ends, 0 below and 1 above)
                p, q, p_out, q_out = (v if v >= 0.0 else d for v, d in zip(m, (0.0, 1.0, 0.0, 1.0)))
                masses.append((p, _q_upper(q, p_out, e), p_out, q_out, c))
            for p, q in _candidates(masses):
                lower[j] = max(lower[j], _hockey_stick(p, q, e))
    return lower, upper


def _q_upper(q: float, p_out: float, t: float) -> float:
    """An upper bound on ``Q(E)``, ``E`` the outputs whose computed loss exceeds ``t``, that survives underflow.

    A computed ``Q(E)`` below the normal range (``< 1e-290``) may have lost all its digits, and one that underflowed
    to 0 is no upper bound (a Laplace step of epsilon 1000: ``Q(L > 999) = e^-1000 / 2`` computes as 0, which read
    ``delta(999) >= P(E) = 0.70`` against a truth of 0.39). On ``E`` the true loss is at least ``t - err`` (the
    computed loss within ``err = 1e-9 (1 + |t|)``), and finite losses have ``dQ = e^-L dP`` (the P-mass at ``+inf``
    has no Q-mass), so ``Q(E) <= e^-(t - err) P(E) <= e^-(t - err) (1 - p_out)``. Past ``e^-700`` that is below
    ``1e-300``, which is returned instead (a representable upper bound). The smaller of the two bounds where the
    computed one is in the normal range."""
    log_crude = -(t - 1e-9 * (1.0 + abs(t))) + math.log(max(1.0 - p_out, 0.0) * (1.0 + 4 * _U) + 1e-300)
    crude = 1e-300 if log_crude < -700.0 else min(1.0, math.exp(log_crude) * (1.0 + 4 * _U * (1.0 + abs(log_crude))))
    return min(q, crude) if q >= 1e-290 else max(crude, q)


def _candidates(masses: list[tuple[float, float, float, float, int]]) -> list[tuple[float, float]]:
    """``(P(E), Q(E))`` bounds (lower, upper) for the candidate sets ``E`` of a composition whose steps have the event
    masses ``(p, q, p_out, q_out, count)``: some step's event (the union), and one step's (each term's).

    With totals ``T_i = p_i + p_out_i`` (P; Q's alike): ``P(union) = prod T_i^c_i - prod p_out_i^c_i = prod T_i^c_i
    (1 - e^(-sum c_i log1p(p_i / p_out_i)))`` (no cancellation), non-decreasing in every argument, so lower bounds
    give a lower bound; likewise Q's from upper bounds. One step of term ``j``: ``p_j T_j^(c_j - 1) prod_(i != j)
    T_i^c_i``. (The totals are not taken as 1: computed masses need not sum to 1.) Rounding: each exponent is a sum
    of ``c`` times logs, within ``3u`` of the sum of their sizes, and ``exp``/``expm1`` add a few ``u``: ``4u`` of
    the exponents' total size, and ``4u`` per term, is charged to every value."""

    def logs(ins: list[float], outs: list[float], counts: list[int]) -> tuple[list[float], float, bool]:
        """Each term's ``c log T``, the union's ``sum c log1p(in / out)`` and whether some ``out`` is 0."""
        log_t = [c * math.log(i + o) if i + o > 0.0 else -math.inf for i, o, c in zip(ins, outs, counts)]
        certain = any(o <= 0.0 for o in outs)  # some step's event is certain on this side
        grow = 0.0 if certain else sum(c * math.log1p(i / o) for i, o, c in zip(ins, outs, counts))
        return log_t, grow, certain

    counts = [c for *_, c in masses]
    sides = []
    for k in (0, 1):  # P's masses (k = 0), Q's (k = 1)
        ins, outs = [m[k] for m in masses], [m[k + 2] for m in masses]
        sides.append((ins, outs, *logs(ins, outs, counts)))
    size = sum(abs(x) for side in sides for x in side[2] if math.isfinite(x)) + sides[0][3] + sides[1][3]
    rel = 4 * _U * (len(masses) + 16 + size)
    unions = []
    for _ins, _outs, log_t, grow, certain in sides:
        total = math.exp(sum(log_t))
        unions.append(total if certain else total * -math.expm1(-grow))
    out = [(unions[0] * (1.0 - rel), unions[1] * (1.0 + rel))]
    for j, (p, q, po, qo, c) in enumerate(masses):
        if p <= 0.0:
            continue
        rest = []
        for (_, _, log_t, _, _), mine in zip(sides, (p + po, q + qo)):
            others = sum(x for i, x in enumerate(log_t) if i != j)
            if c > 1:  # the term's other steps (a total of 0 leaves nothing: only Q's can be, and then q is 0)
                others += (c - 1) * math.log(mine) if mine > 0.0 else -math.inf
            rest.append(math.exp(others))
        out.append((p * rest[0] * (1.0 - rel), q * rest[1] * (1.0 + rel)))
    return out


def _hockey_stick(p: float, q: float, eps: float) -> float:
    """``p - e^eps q`` rounded down (``0`` if negative). ``e^eps q`` is taken in logs (it may exceed a double) and
    raised by the exponent's rounding, ``4u`` of ``|eps| + |log q| + 4``."""
    if not p > 0.0:
        return 0.0
    if q <= 0.0:
        return p
    log_b = eps + math.log(q)
    if log_b >= math.log(p):
        return 0.0
    b = math.exp(log_b) * (1.0 + 4 * _U * (abs(eps) + abs(math.log(q)) + 4.0))
    return max(0.0, (p - b) * (1.0 - 4 * _U))

"""Certified lower ends of a composition's ``delta(eps)`` from one event of its output, built from each step's.

For any set ``E`` of outputs, ``delta(eps) = sup_E P(E) - e^eps Q(E) >= P(E) - e^eps Q(E)``. Here ``E`` is built from
one event ``E_i`` per step (``StepEvent``: a lower bound on ``P(E_i)`` and on ``P(E_i^c)``, an upper bound on
``Q(E_i)`` and on ``Q(E_i^c)``, and a floor of the true loss on ``E_i``), the steps independent:

* the **union**, some step's event occurs (``accountants._step_bounds``: ``E_i`` the outputs where the step's loss
  exceeds ``eps``; rare large losses), and each step's event alone (the larger value counts);
* the **intersection**, every step's event occurs (``PLDAccountant._top_mass_lower``: ``E_i`` the outputs near the
  top of the step's loss support).

``event_delta_lower`` answers ``delta`` at an array of epsilons (one event per epsilon: the masses are arrays of the
epsilons' shape), ``event_epsilon_lower`` the inverse, ``epsilon`` at one delta. Both evaluate ``P(E)`` and ``Q(E)``
in ``_composed_masses``, which rounds each to its safe side; ``Q(E_i)`` bounds that underflowed are replaced there by
``e^-floor`` times an upper bound on ``P(E_i)`` (``_q_upper``: an underflowed 0 is no upper bound).

The elementary functions are ``math``'s (the platform's libm, within an ulp: ``2u`` relative) applied elementwise,
not numpy's (whose AVX-512 loops are within 4 ulp); every charge below assumes the ulp.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Literal, NamedTuple

import numpy as np

from .._types import FloatArray

__all__ = ["StepEvent", "event_delta_lower", "event_epsilon_lower"]

_U = float(np.finfo(float).eps) / 2
#: an absolute charge for values below the normal range, where relative ones do nothing (subnormal results of a
#: product or ``exp`` are within ``2^-1074`` each; the factors here are at most about 1)
_TINY = 1e-300


class StepEvent(NamedTuple):
    """One step's event ``E_i``, at each of an array of thresholds (the fields broadcast to one shape).

    Attributes
    ----------
    p : FloatArray
        Lower bounds on ``P(E_i)``.
    q : FloatArray
        Upper bounds on ``Q(E_i)`` as computed: they may have underflowed (``_q_upper`` repairs them); ``inf`` where
        there is none.
    p_out : FloatArray
        Lower bounds on ``P(E_i^c)`` (0 where there is none).
    q_out : FloatArray
        Upper bounds on ``Q(E_i^c)`` (``inf`` where there is none; the union needs them).
    floor : FloatArray
        Lower bounds on the true privacy loss on ``E_i``, so that ``Q(E_i) <= e^-floor P(E_i)``.
    copies : int
        The number of steps with this event (``c_i``).
    """

    p: FloatArray
    q: FloatArray
    p_out: FloatArray
    q_out: FloatArray
    floor: FloatArray
    copies: int


def event_delta_lower(
    steps: Sequence[StepEvent], epsilons: FloatArray, event: Literal["union", "intersection"]
) -> FloatArray:
    """Certified lower ends of ``delta(eps)`` at each of ``epsilons``, from the union or the intersection of the
    steps' events (each epsilon its own events: the fields of ``steps`` have the epsilons' shape, or broadcast).

    For each candidate set ``E`` (``_composed_masses``: the union and each step's event alone, or the intersection)
    with ``P(E) >= P`` and ``Q(E) <= Q`` (both rounded to their safe side), ``delta(eps) >= P(E) - e^eps Q(E) >= P -
    e^eps Q``. For the intersection, on which the true loss is at least ``T = sum_i c_i floor_i``, also ``Q(E) <=
    e^-T P(E)``, so ``delta(eps) >= P(E) (1 - e^(eps - T)) >= P (1 - e^(eps - T))`` for ``eps < T`` (the bracket
    is positive, ``P(E) >= P``). The largest of these, and 0, is returned, rounded down (``_hockey_stick``,
    ``_below_floor``).

    Parameters
    ----------
    steps : sequence of StepEvent
        The steps' events, one per distinct step with its count.
    epsilons : FloatArray
        The epsilons, one-dimensional.
    event : {"union", "intersection"}
        Which composed event.

    Returns
    -------
    FloatArray
        The lower ends, in ``[0, 1]``, the shape of ``epsilons``.

    Raises
    ------
    ValueError
        If ``event`` is neither.
    """
    eps = np.asarray(epsilons, float)
    out = np.zeros(eps.shape)
    cands, total_floor = _composed_masses(steps, eps.shape, event)
    for p, q in cands:
        out = np.maximum(out, _hockey_stick(p, q, eps))
    if total_floor is not None:
        out = np.maximum(out, _below_floor(cands[0][0], total_floor, eps))
    return out


def event_epsilon_lower(steps: Sequence[StepEvent], delta: float) -> float:
    """A certified lower end of ``epsilon(delta)`` from the intersection of the steps' events (one event each: the
    fields of ``steps`` have one element).

    ``delta(eps) >= f(eps)`` with ``f`` either bound of ``event_delta_lower`` (``P - e^eps Q``, or ``P (1 - e^(eps -
    T))``), decreasing in ``eps``. Where ``f(e) > delta`` for every ``e`` below a root ``r``, ``delta(e) > delta``
    there, so ``epsilon(delta) = inf {e : delta(e) <= delta} >= r``. The roots: ``log(P - delta) - log Q`` for
    ``P > delta``, and ``T + log(1 - delta / P)``; each is lowered by its rounding (``delta / P`` raised ``4u``,
    the logarithms ``2u`` of their sizes, the sums ``u``: ``4u`` of the terms' total size).

    Parameters
    ----------
    steps : sequence of StepEvent
        The steps' events, each field of one element.
    delta : float
        The delta, in ``(0, 1)``.

    Returns
    -------
    float
        The lower end, ``>= 0`` (0 where ``P <= delta``).
    """
    cands, total_floor = _composed_masses(steps, (1,), "intersection")
    p, q = float(cands[0][0][0]), float(cands[0][1][0])
    best = 0.0
    if p > delta and q > 0.0:
        a, b = math.log(p - delta), math.log(q)
        best = max(best, a - b - 4 * _U * (abs(a) + abs(b) + 2.0))
    if total_floor is not None and p > 0.0 and math.isfinite(t := float(total_floor[0])):
        ratio = delta / p * (1.0 + 4 * _U)
        if ratio < 1.0:
            log_keep = math.log1p(-ratio)
            best = max(best, t + log_keep - 4 * _U * (abs(t) + abs(log_keep) + 1.0))
    return best


# ------------------------------------------------------------------------------------------------- the masses
def _composed_masses(
    steps: Sequence[StepEvent], shape: tuple[int, ...], event: Literal["union", "intersection"]
) -> tuple[list[tuple[FloatArray, FloatArray]], FloatArray | None]:
    """``(P, Q)`` bounds (lower, upper, rounded to their safe side) for the candidate sets ``E``, and for the
    intersection the floor ``T = sum_i c_i floor_i`` of the true loss on it (exact sum, rounded down), else ``None``.

    Each step's ``Q(E_i)`` is first ``_q_upper``'s (an underflowed one replaced). Write ``a_i, b_i`` for a side's
    bounds on ``E_i`` and ``E_i^c`` (P's lower, Q's upper), ``c_i`` the counts.

    * Intersection: ``P(E) = prod_i P(E_i)^c_i``, non-decreasing in each, so ``exp(sum_i c_i log a_i)`` bounds it
      below on P's side, above on Q's.
    * Union: with ``t_i = P(E_i) + P(E_i^c)`` (Q's alike; not taken as 1, computed masses need not sum to 1),
      ``P(union) = prod_i t_i^c_i - prod_i P(E_i^c)^c_i``, non-decreasing in every argument (its derivative in
      ``P(E_j^c)`` is ``c_j (t_j^(c_j - 1) prod_(i != j) t_i^c_i - ...) >= 0`` as ``t >= P(E^c)``). It is evaluated
      as ``e^A (1 - e^-G)``, ``A = sum_i c_i log t_i``, ``G = sum_i c_i log1p(a_i / b_i)`` (no cancellation); a
      side with some ``b_i = 0`` has the event certain: ``e^A``. One step of term ``j`` alone: ``a_j t_j^(c_j - 1)
      prod_(i != j) t_i^c_i = a_j e^(A - log t_j)``. ``t_i = a_i + b_i`` is kept exactly as a float and its
      rounding error (``_two_sum``): ``log t_i = log s_i + e_i / s_i`` within ``u^2``, where a rounded ``t_i``
      raised to a power ``c_i`` in the thousands would be off by ``c_i u`` relative (near ``t_i = 1`` its log is
      tiny; an error of ``c u`` in masses near 1/2 is ``1e-3`` of a delta of ``4e-10`` at epsilon 0).

    Rounding (libm within ``2u``; the argument's own rounding moves ``log1p(x)`` by at most ``u x / (1 + x) <= u
    log1p(x)``): every term ``c_i log t_i`` is within ``4u`` of its size (and ``c_i u^2``), a sum of ``K`` terms
    within ``(K + 3) u`` of the terms' total size ``S``, ``1 - e^-G`` within ``(K + 8) u`` relative (its relative
    change is at most the change of ``G`` over ``G``, which is ``(K + 3) u`` relative: all its terms are
    positive) and ``exp`` and the products within a few ``u``: ``(K + 8) u (S + 2) + 4 u^2 sum_i c_i`` relative is
    charged to every value, and ``6u`` of ``|log t_j|`` and the exponent to one step's; and ``_TINY`` absolute
    (below the normal range a relative charge moves nothing).
    """
    counts = [s.copies for s in steps]
    k = len(steps)
    q_up = [_q_upper(s.q, s.p_out, s.floor) for s in steps]
    sides = (([s.p for s in steps], [s.p_out for s in steps]), (q_up, [s.q_out for s in steps]))
    if event == "intersection":
        out = []
        for sign, (ins, _) in zip((-1.0, 1.0), sides):
            terms = [c * _log(np.broadcast_to(a, shape)) for a, c in zip(ins, counts)]
            exponent = sum(terms, np.zeros(shape))
            size = sum((np.abs(np.where(np.isfinite(x), x, 0.0)) for x in terms), np.zeros(shape))
            out.append(_exp(exponent) * (1.0 + sign * (k + 8) * _U * (size + 2.0)) + sign * _TINY)
        return [(np.maximum(out[0], 0.0), out[1])], _exact_floor_sum([s.floor for s in steps], counts, shape)
    if event != "union":
        raise ValueError(f"event must be 'union' or 'intersection', not {event!r}")
    per_side = []
    for ins, outs in sides:
        a_ = [np.broadcast_to(np.asarray(a, float), shape) for a in ins]
        b_ = [np.broadcast_to(np.asarray(b, float), shape) for b in outs]
        certain = np.zeros(shape, bool)
        exponent, grow, size = np.zeros(shape), np.zeros(shape), np.zeros(shape)
        one = []  # each term's log t_j
        for a, b, c in zip(a_, b_, counts):
            has_out = b > 0.0
            certain |= ~has_out
            g1 = np.where(has_out, _log1p(np.divide(a, b, out=np.zeros(shape), where=has_out)), 0.0)
            t, err = _two_sum(a, b)
            log_t = _log(t) + np.divide(err, t, out=np.zeros(shape), where=t > 0.0)
            one.append(log_t)
            exponent = exponent + c * log_t
            grow = grow + c * g1
            size = size + np.abs(np.where(np.isfinite(log_t), c * log_t, 0.0))
        union = _exp(exponent) * np.where(certain, 1.0, -_expm1(-grow))
        per_side.append((union, exponent, size, one))
    rels = [(k + 8) * _U * (side[2] + 2.0) + 4 * _U * _U * sum(counts) for side in per_side]
    cands = [(np.maximum(per_side[0][0] * (1.0 - rels[0]) - _TINY, 0.0), per_side[1][0] * (1.0 + rels[1]) + _TINY)]
    for j, (step, qj) in enumerate(zip(steps, q_up)):
        p = np.broadcast_to(np.asarray(step.p, float), shape)
        if not np.any(p > 0.0):
            continue
        vals = []
        for sign, mine, (_, exponent, _, one), rel in zip((-1.0, 1.0), (p, qj), per_side, rels):
            others = np.where(np.isfinite(one[j]), exponent - one[j], -np.inf)  # (a total of 0: only Q's, q_j = 0)
            charge = rel + 6 * _U * (np.abs(np.where(np.isfinite(one[j]), one[j], 0.0)) + np.abs(others))
            vals.append(mine * _exp(others) * (1.0 + sign * charge) + sign * _TINY)
        cands.append((np.where(vals[0] > 0.0, vals[0], 0.0), vals[1]))
    return cands, None


def _two_sum(a: FloatArray, b: FloatArray) -> tuple[FloatArray, FloatArray]:
    """``(s, e)`` with ``s = fl(a + b)`` and ``a + b = s + e`` exactly (Knuth's TwoSum, round to nearest; ``e = 0``
    where ``s`` is not finite)."""
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    return s, np.where(np.isfinite(s), e, 0.0)


def _q_upper(q: FloatArray, p_out: FloatArray, floor: FloatArray) -> FloatArray:
    """An upper bound on ``Q(E)`` that survives underflow, ``E`` an event on which the true loss is at least
    ``floor``.

    A computed ``Q(E)`` below the normal range (``< 1e-290``) may have lost all its digits, and one that underflowed
    to 0 is no upper bound (a Laplace step of epsilon 1000: ``Q(L > 999) = e^-1000 / 2`` computes as 0, which read
    ``delta(999) >= P(E) = 0.70`` against a truth of 0.39). Finite losses have ``dQ = e^-L dP`` (the P-mass at
    ``+inf`` has no Q-mass), so ``Q(E) <= e^-floor P(E) <= e^-floor (1 - p_out)``. Past ``e^-700`` that is below
    ``1e-300``, which is returned instead (a representable upper bound). The smaller of the two bounds where the
    computed one is in the normal range."""
    q, p_out, floor = np.broadcast_arrays(*(np.asarray(x, float) for x in (q, p_out, floor)))
    log_crude = -floor + _log(np.maximum(1.0 - p_out, 0.0) * (1.0 + 4 * _U) + 1e-300)
    grown = _exp(np.minimum(log_crude, 0.0)) * (1.0 + 4 * _U * (1.0 + np.abs(log_crude)))
    crude = np.where(log_crude < -700.0, 1e-300, np.where(log_crude >= 0.0, 1.0, np.minimum(1.0, grown)))
    return np.where(q >= 1e-290, np.minimum(q, crude), np.maximum(crude, q))


def _exact_floor_sum(floors: Sequence[FloatArray], counts: Sequence[int], shape: tuple[int, ...]) -> FloatArray:
    """``sum_i c_i floor_i`` summed exactly (rationals) and rounded down to a float, elementwise (``-inf`` where a
    floor is)."""
    cols = [np.broadcast_to(np.asarray(f, float), shape).ravel().tolist() for f in floors]
    out = []
    for vals in zip(*cols) if cols else [()] * int(np.prod(shape)):
        if not all(math.isfinite(v) for v in vals):
            out.append(-math.inf if any(v == -math.inf or math.isnan(v) for v in vals) else math.inf)
            continue
        exact = sum((Fraction(v) * c for v, c in zip(vals, counts)), Fraction(0))
        t = float(exact)
        out.append(math.nextafter(t, -math.inf) if Fraction(t) > exact else t)
    return np.asarray(out, float).reshape(shape)


# ---------------------------------------------------------------------------------------------- the answers
def _hockey_stick(p: FloatArray, q: FloatArray, eps: FloatArray) -> FloatArray:
    """``p - e^eps q`` rounded down, elementwise (``0`` if negative or not a number). ``e^eps q`` is taken in logs (it
    may exceed a double) and raised by the exponent's rounding, ``4u`` of ``|eps| + |log q| + 4``, and ``_TINY`` (it
    may be subnormal); the difference is exact where subnormal, else within ``u``."""
    p, q, eps = np.broadcast_arrays(*(np.asarray(x, float) for x in (p, q, eps)))
    pos = p > 0.0
    log_q = _log(np.where(q > 0.0, q, 1.0))
    log_b = eps + log_q
    live = pos & (q > 0.0) & (log_b < _log(np.where(pos, p, 1.0)))
    b = _exp(np.where(live, log_b, 0.0)) * (1.0 + 4 * _U * (np.abs(eps) + np.abs(log_q) + 4.0)) + _TINY
    val = np.where(live, (p - b) * (1.0 - 4 * _U), np.where(pos & (q <= 0.0), p, 0.0))
    return np.where(val > 0.0, val, 0.0)


def _below_floor(p: FloatArray, floor: FloatArray, eps: FloatArray) -> FloatArray:
    """``p (1 - e^(eps - floor))`` rounded down, elementwise (``0`` for ``eps >= floor``): ``eps - floor`` within
    ``u`` of its size moves ``1 - e^x`` by at most ``u`` relative (``|x| e^x / (1 - e^x) <= 1``), ``expm1`` ``2u``
    and the product ``u``: ``8u`` is charged, and ``_TINY``."""
    p, floor, eps = np.broadcast_arrays(*(np.asarray(x, float) for x in (p, floor, eps)))
    x = eps - floor
    live = (p > 0.0) & (x < 0.0)
    val = p * -_expm1(np.where(live, x, 0.0)) * (1.0 - 8 * _U) - _TINY
    return np.where(live & (val > 0.0), val, 0.0)


def _elementwise(fn: Callable[[float], float], x: FloatArray) -> FloatArray:
    """``fn`` (a ``math`` function) at each element of ``x`` (its arguments kept in its domain by the callers)."""
    arr = np.asarray(x, float)
    return np.fromiter(map(fn, arr.ravel().tolist()), float, arr.size).reshape(arr.shape)


def _log(x: FloatArray) -> FloatArray:
    """``log x`` elementwise: ``-inf`` at 0 and below, NaN kept."""
    x = np.asarray(x, float)
    return np.where(x > 0.0, _elementwise(math.log, np.where(x > 0.0, x, 1.0)), np.where(np.isnan(x), x, -np.inf))


def _log1p(x: FloatArray) -> FloatArray:
    """``log1p x`` elementwise, for ``x >= 0`` (and ``inf``)."""
    return _elementwise(math.log1p, x)


def _exp(x: FloatArray) -> FloatArray:
    """``exp x`` elementwise: ``inf`` past 709 (an upper bound; lower ones here are below 1), NaN kept."""
    x = np.asarray(x, float)
    return np.where(x > 709.0, np.inf, _elementwise(math.exp, np.minimum(x, 709.0)))


def _expm1(x: FloatArray) -> FloatArray:
    """``expm1 x`` elementwise, for ``x <= 0``."""
    return _elementwise(math.expm1, x)

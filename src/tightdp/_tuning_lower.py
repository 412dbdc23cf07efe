"""A certified lower end for tuning runs from a concrete tuned instance: the threshold score on the privacy loss.

The instance
------------
Let ``(P, Q)`` be one run's attained pair (``Mechanism.attained_mechanism``: the exact output laws of one concrete
pair of neighbouring data sets, the same pair for every step of the run) in one direction, ``L = log dP/dQ`` its
privacy loss as a function of the run's output ``y``, ``S_P(c) = P(L > c)`` and ``S_Q(c) = Q(L > c)``. The tuning
procedure draws ``K`` (probability generating function ``f``; ``K = 0`` allowed, then a fixed empty output), trains
``K`` runs and releases the output of the best one under a score. Any function of a run's output is an admissible
score; take ``s(y) = 1{L(y) > c}`` (ties broken in any way that does not look at the data). The released score is
1 exactly when ``K >= 1`` and some run has ``L > c``; the runs are independent, so the event has probability
``h(S_P(c))`` under ``P`` and ``h(S_Q(c))`` under ``Q``, with ``h(x) = 1 - f(1 - x)`` (``f(1 - x)`` is the chance
that no run, possibly none at all, exceeds ``c``). The released score is a post-processing of the released output,
so the tuned procedure's hockey-stick divergence satisfies, for every ``c`` and ``eps``,

    ``delta_tuned(eps) >= phi_c(eps) = h(S_P(c)) - e^eps h(S_Q(c))``.

Certified inputs from the run's curve alone
-------------------------------------------
With ``a = e^c`` and ``g(a) = H_a(P || Q) = sup_E P(E) - a Q(E)`` (one run's ``delta(log a)`` in that direction):

1. ``g(a) = S_P(c) - a S_Q(c)`` (the supremum is attained on ``{L > c}``), so ``S_P(c) = g(a) + a S_Q(c)`` exactly.
2. ``g`` is convex (a supremum of affine functions of ``a``) with right derivative ``-S_Q(c)`` and left derivative
   ``-Q(L >= c)``. For a step ``D > 0`` with ``a - D >= 1``, convexity gives
   ``g(a - D) >= g(a) + D Q(L >= c) >= g(a) + D S_Q(c)`` and ``g(a + D) >= g(a) - D S_Q(c)``, hence for any
   certified ``g_lo <= g <= g_hi``

   ``s_lo = (g_lo(a) - g_hi(a + D')) / D' <= S_Q(c) <= (g_hi(a - D) - g_lo(a)) / D = s_hi``

   (``s_hi`` also capped at ``(1 - g_lo(a)) / a``, which ``S_Q`` obeys since ``S_P = g + a S_Q <= 1``).
3. ``h`` is non-decreasing and concave (``h'(x) = f'(1 - x)``, ``f'`` is non-decreasing on [0, 1]). As a function
   of ``(g, s)``, ``phi = h(g + a s) - e^eps h(s)`` is non-decreasing in ``g``, and for ``a <= e^eps``
   (``c <= eps``) non-increasing in ``s``: its ``s``-derivative is ``a h'(g + a s) - e^eps h'(s) <=
   (a - e^eps) h'(s) <= 0`` as ``g + a s >= s``. So ``phi_c(eps) >= h(g_lo + a s_hi) - e^eps h(s_hi)``, and
   ``delta_tuned(eps) > delta`` for every ``eps`` in ``[c, eps_c)``, ``eps_c = log((h(g_lo + a s_hi) - delta) /
   h(s_hi))``.
4. Any ``c`` (also ``c > eps``, where ``phi`` need not be monotone in ``s``): cut ``[s_lo, s_hi]`` into pieces
   ``[s_j, s_j+1]``; ``S_Q(c)`` lies in one, where ``phi_c(eps) >= h(g_lo + a s_j) - e^eps h(s_j+1)`` (``h``
   non-decreasing). So ``delta_tuned(eps) > delta`` for every ``eps < eps_c = min_j log((h(g_lo + a s_j) - delta) /
   h(s_j+1))``.

``delta_tuned`` is non-increasing, so the tuned epsilon at ``delta`` is at least every such ``eps_c`` (in step 3
only those with ``eps_c >= c``): the lower end kept here is the largest over a grid of ``c`` and steps ``D``
(the grid's other points), rounded down. When ``S_Q`` is small, ``h`` is about linear with slope ``E K`` and
``phi_c(c) ~ E K g(e^c)``: the lower end is close to one run's epsilon at ``delta / E K`` (step 3 at ``c`` near
``eps``; the tail bound hardly matters). Where ``E K S_Q`` is not small (large ``delta`` or ``E K``), ``h``
saturates and the best threshold lies above the answer (step 4): a Gaussian run with ``sigma = 2.33``, geometric
``K`` of mean 59, ``delta = 5.9e-3``: 1.384 against one run's 0.847 (the instance's exact epsilon 1.3841).

Directions. tightdp's certified ``delta(eps)`` is the larger of the remove and add directions' curves: its upper end
bounds both, and its lower end at each ``eps`` bounds the curve of one direction (the one it was computed for). At
each ``c`` all of steps 1-4 is then about that one direction's pair ``(P, Q)`` (the add direction is the pair read
the other way round), whose tuned instance is an instance of the procedure; so every ``eps_c`` is a lower bound,
and the largest over ``c`` covers both directions.

A grid of thresholds (releasing the best run's loss, binned: the largest of ``K`` binned losses, whose law is
``f(F(i)) - f(F(i - 1))``) could only add where the best event of that release is not an upper set ``{max L > c}``,
the single threshold's event. Its likelihood ratio at loss ``l`` is ``e^l f'(F_P(l)) / f'(F_Q(l))`` (``F`` the
loss's distribution functions under ``P`` and ``Q``). For a Gaussian run (``mu = 0.8``, geometric ``K`` of mean
10) it is increasing, and the exact hockey-stick divergence of the released maximum exceeded the best single
threshold's by at most 0.07 % of it (mpmath; ``mu`` from 0.43 to 2, means 10 to 200, divergences from ``3e-7`` to
0.7; the grid of ``c`` had steps of 0.01), so the grid is not built.

Numerics: ``g_lo``, ``g_hi`` come from ``ConnectDotsAccountant`` on the attained ledger (no ledger entry without an
attained pair: no lower end from here); steps ``D`` below ``1e-6 a`` are not used, ``s_hi`` is raised and ``s_lo``
lowered by a relative ``1e-9`` and the subtractions' rounding, each ``h(.)`` in a numerator lowered and in a
denominator raised by a relative ``1e-9`` (far above the floating-point error of ``D``, ``e^c`` and ``h``), and
``eps_c`` is rounded down.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ._types import FloatArray
from .accountants import ConnectDotsAccountant
from .errors import GridTooLargeError, UnsupportedMechanismError
from .mechanisms.base import Mechanism

__all__ = ["tuned_lower_epsilon"]

_REL = 1e-9  # relative margin on the tail bounds and on h(.) (rounding of D = e^c - e^c', of e^c and of h)
_MIN_STEP = 1e-6  # the smallest step D kept, relative to a
_ULP = 2.0**-52
_PIECES = 32  # pieces of [s_lo, s_hi] in step 4
_COARSE = 81  # thresholds on the first grid
_FINE = 81  # thresholds on the refined grid around the best one


def _attained(entries: list[tuple[Mechanism, int]]) -> list[tuple[Mechanism, int]] | None:
    """The ledger of attained pairs, or ``None`` when a step has none."""
    out = []
    for mech, count in entries:
        low = mech.attained_mechanism()
        if low is None:
            return None
        out.append((low, count))
    return out


def _curve(acc: ConnectDotsAccountant, eps: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Certified ``(g_lo, g_hi)`` of one run's ``delta`` at ``eps`` (a missing or NaN end reads as 0 / 1)."""
    b = acc.delta(eps)
    lo = np.zeros_like(eps) if b.lower is None else np.asarray(b.lower, dtype=float)
    hi = np.ones_like(eps) if b.upper is None else np.asarray(b.upper, dtype=float)
    lo = np.clip(np.where(np.isnan(lo), 0.0, lo), 0.0, 1.0)
    hi = np.clip(np.where(np.isnan(hi), 1.0, hi), 0.0, 1.0)
    return lo, hi


def _tail_bounds(c: FloatArray, lo: FloatArray, hi: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Certified ``(s_lo, s_hi)`` of ``S_Q(c)`` at each threshold (module docstring, step 2), the best step ``D``
    among the grid's other points: backward ``(g_hi(c_k) - g_lo(c)) / (e^c - e^c_k)``, forward
    ``(g_lo(c) - g_hi(c_k)) / (e^c_k - e^c)``. A threshold past ``e^709`` (``a = inf``) gets ``s_lo = s_hi = 0``: no
    bound there."""
    with np.errstate(over="ignore"):
        a = np.exp(c)
    err = 4.0 * _ULP * (hi[None, :] + lo[:, None])  # the subtraction's rounding, absolute
    with np.errstate(divide="ignore", invalid="ignore"):
        den = a[:, None] - a[None, :]  # D for c_k < c (positive), -D for c_k > c; NaN (no step) between infs
        # steps below 1e-6 a are left out: there the rounding of e^c would be a large part of D
        back = np.where(den > _MIN_STEP * a[:, None], (hi[None, :] - lo[:, None] + err) / den, np.inf)
        fwd = np.where(-den > _MIN_STEP * a[:, None], (lo[:, None] - hi[None, :] - err) / -den, 0.0)
    s_hi = np.maximum(np.min(back, axis=1), 0.0) * (1.0 + _REL) + 1e-300
    s_hi = np.minimum(s_hi, (1.0 - lo) / a)  # the true S_Q obeys it: S_P = g + a S_Q <= 1
    s_lo = np.minimum(np.maximum(np.max(fwd, axis=1), 0.0) * (1.0 - _REL), s_hi)
    return s_lo, s_hi


def _log_ratio(top: FloatArray, bottom: FloatArray, delta: float) -> FloatArray:
    """``log((top - delta) / bottom)`` with ``top`` rounded down and ``bottom`` up; ``-inf`` where it has none."""
    top, bottom = top * (1.0 - _REL), bottom * (1.0 + _REL)
    ok = (top > delta) & (bottom > 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        out: FloatArray = np.where(ok, np.log(np.where(ok, top - delta, 1.0) / np.where(ok, bottom, 1.0)), -np.inf)
    return out


def _threshold_epsilons(
    c: FloatArray,
    lo: FloatArray,
    hi: FloatArray,
    tail: Callable[[FloatArray], FloatArray],
    delta: float,
) -> FloatArray:
    """``eps_c`` (module docstring) at each threshold ``c`` (sorted increasing, ``lo``/``hi`` the curve there), rounded
    down; ``-inf`` where neither step 3 nor step 4 gives one."""
    with np.errstate(over="ignore"):  # e^c past 709 is inf: such thresholds give no bound (NaN -> -inf below)
        a = np.exp(c)
    s_lo, s_hi = _tail_bounds(c, lo, hi)
    with np.errstate(invalid="ignore"):  # inf * 0 where e^c overflows: NaN, read as no bound below
        # step 3 (c <= eps): the bound at s_hi
        mono = _log_ratio(tail(np.minimum(lo + a * s_hi, 1.0)), tail(s_hi), delta)
        mono = np.where(mono >= c, mono, -np.inf)
        # step 4 (any c): the worst of the pieces of [s_lo, s_hi]
        t = np.linspace(0.0, 1.0, _PIECES + 1)
        pts = s_lo[:, None] + (s_hi - s_lo)[:, None] * t[None, :]
        pts[:, 0], pts[:, -1] = s_lo, s_hi
        top = tail(np.minimum(lo[:, None] + a[:, None] * pts[:, :-1], 1.0))
        pieces = np.min(_log_ratio(top, tail(pts[:, 1:]), delta), axis=1)
    eps = np.maximum(mono, pieces)
    eps = np.where(np.isnan(eps), -np.inf, eps)  # a ratio past double precision (e^c overflowing): no bound there
    with np.errstate(invalid="ignore"):  # (-inf - inf: still -inf)
        out: FloatArray = np.nextafter(eps - 1e-12 * np.abs(eps), -np.inf)
    return out


def tuned_lower_epsilon(
    entries: list[tuple[Mechanism, int]],
    delta: float,
    tail: Callable[[FloatArray], FloatArray],
    mean: float,
) -> tuple[float, dict[str, Any]]:
    """A certified lower bound on a tuning procedure's epsilon from the threshold-score instance.

    Parameters
    ----------
    entries : list of (Mechanism, int)
        One run's ledger.
    delta : float
        The delta, in (0, 1).
    tail : callable
        ``x -> 1 - f(1 - x)`` on arrays in [0, 1], ``f`` the generating function of the number of runs ``K``
        (non-decreasing and concave in ``x``, as every such ``h`` is).
    mean : float
        ``E K >= 1``, only to place the grid of thresholds.

    Returns
    -------
    tuple of (float, dict)
        The lower end (``0.0`` when no threshold gives one, or a step has no attained pair) and details: the best
        ``threshold`` ``c``.

    Raises
    ------
    ValueError
        ``delta`` outside (0, 1) (the accountant's check). The accountant's refusals of the curve
        (``PrecisionError``, ``GridTooLargeError``, ``UnsupportedMechanismError``) give the lower end 0 and a
        ``note`` instead.

    References
    ----------
    Papernot & Steinke 2022 (ICLR): the tuning procedure (random number of runs, best released). The instance and
    its proof: this module's docstring.
    """
    ledger = _attained(entries)
    if ledger is None:
        return 0.0, {"threshold": None, "note": "a step has no attained pair"}
    try:
        return _search(ConnectDotsAccountant().compose(ledger), delta, tail, mean)
    except (ArithmeticError, GridTooLargeError, UnsupportedMechanismError) as exc:  # PrecisionError included
        return 0.0, {"threshold": None, "note": f"the run's curve could not be certified ({exc})"}


def _search(
    acc: ConnectDotsAccountant, delta: float, tail: Callable[[FloatArray], FloatArray], mean: float
) -> tuple[float, dict[str, Any]]:
    """The best ``eps_c`` over a coarse grid of thresholds, then a fine one around the best."""
    first = acc.epsilon(delta)
    low = float(first.lower) if first.lower is not None else 0.0
    scaled = delta / max(mean, 1.0)
    high = float(acc.epsilon(scaled).upper) if scaled < 1.0 else low
    if not math.isfinite(high):
        return 0.0, {"threshold": None}
    span = max(high - low, 0.05)
    c = np.linspace(max(0.0, low - 0.1 * span), high + 0.5 * span, _COARSE)
    lo, hi = _curve(acc, c)
    eps = _threshold_epsilons(c, lo, hi, tail, delta)
    best = int(np.argmax(eps))
    if not math.isfinite(float(eps[best])):
        return 0.0, {"threshold": None}
    step = float(c[1] - c[0])
    fine = np.linspace(max(0.0, float(c[best]) - 2.0 * step), float(c[best]) + 2.0 * step, _FINE)
    lo_f, hi_f = _curve(acc, fine)
    allc = np.concatenate([c, fine])
    order = np.argsort(allc, kind="stable")
    allc, lo_a, hi_a = allc[order], np.concatenate([lo, lo_f])[order], np.concatenate([hi, hi_f])[order]
    eps = _threshold_epsilons(allc, lo_a, hi_a, tail, delta)
    best = int(np.argmax(eps))
    return float(max(eps[best], 0.0)), {"threshold": float(allc[best])}

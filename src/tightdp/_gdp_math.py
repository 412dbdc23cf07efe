"""The mu-GDP trade-off curve with certified floating-point error (Dong, Roth, Su 2022, Cor. 2.13).

A composition of Gaussian mechanisms is exactly ``mu``-GDP with
``mu^2 = sum_i c_i mu_i^2`` (Dong et al. Cor. 3.3; Koskela et al. 2023, Thm 11 for adaptive
composition), and its privacy curve is

    delta_mu(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2).

It is evaluated in log space, ``log delta = la + log(1 - e^(lb - la))`` with
``la = log Phi(a)``, ``lb = eps + log Phi(b)``, so that it stays accurate far
into the tail (delta = 1e-300 and below) and never overflows. Every answer
carries a bound on the float error of that evaluation, so that the epsilon
interval is a certified bracket of the exact root, not only of the computed
one: ``lower`` has ``delta_mu(lower) > delta`` and ``upper`` has
``delta_mu(upper) <= delta`` even after the worst-case rounding.

The inversions, each certified on the safe side: ``gdp_epsilon_bounds`` (one ``mu``) and
``gdp_epsilon_bounds_array`` (an array of ``mu``, the per-example epsilons of a ledger) bracket epsilon by
bisection (``bisect_boundary``, the one vectorised bisection) with the endpoint checks on the certified curve;
``gdp_mu_within`` is the inverse in ``mu`` (rounded down), by ``largest_within``. The two epsilon inversions
differ only in their starting bracket and stopping rule (the scalar one stops at ``1e-14`` relative, the
array one after a fixed number of halvings): both are certified, and each keeps the exact bits it has always
answered with.

Error model (``u`` the unit round-off; scipy's ``log_ndtr`` is accurate to a
few ulp): the argument ``a`` carries a relative error of at most ``3u``, which
``log Phi`` turns into an absolute error of at most ``3u a^2 + 3u |a|`` (its
slope is below ``|a| + 1``); ``log_ndtr`` itself adds ``8u (|log Phi| + 1)``.
The difference ``d = lb - la`` then carries the sum of both errors plus
``u |eps|``, and ``log(1 - e^d)`` has slope ``1 / expm1(-d)``. All of it is
multiplied by 4 for safety; it is still about 1e-13 relative for ordinary
arguments, far below anything a user sees.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy import special

from ._numerics import falling_root
from ._types import ArrayLike, BoolArray, FloatArray
from .errors import PrecisionError

__all__ = [
    "bisect_boundary",
    "gdp_delta_bounds",
    "gdp_delta_bounds_array",
    "gdp_epsilon_bounds",
    "gdp_epsilon_bounds_array",
    "gdp_log_delta",
    "gdp_log_delta_bounds",
    "gdp_mu_within",
    "largest_within",
]

_TINIEST = 5e-324  # the smallest positive double: an upper bound on any delta that underflows

_U = float(np.finfo(float).eps) / 2
_SAFETY = 4.0
#: below this mu (subnormal quotients, or 0 after underflow) delta is bounded at the floor itself
_MU_FLOOR = 1e-290


def gdp_log_delta(mu: float, eps: ArrayLike) -> FloatArray:
    """``log delta_mu(eps)`` as computed (the estimate; no error term). ``-inf`` where delta underflows.

    Two floats take a scalar route (the root finders of the audits call this thousands of times) that computes
    exactly the estimate of ``gdp_log_delta_bounds``, whose clipping to its own bracket never moves it.
    """
    if isinstance(mu, float) and isinstance(eps, float) and 0.0 < mu < math.inf and math.isfinite(eps):
        return np.asarray(_log_delta_estimate(mu, eps))
    return gdp_log_delta_bounds(mu, eps)[1]


def _log_delta_estimate(mu: float, eps: float) -> float:
    """``gdp_log_delta_bounds(mu, eps)[1]`` for two floats, without the arrays (same operations, same order)."""
    a = -eps / mu + mu / 2.0
    b = -eps / mu - mu / 2.0
    la = float(special.log_ndtr(a))
    lb = float(special.log_ndtr(b)) + eps
    d = min(lb - la, 0.0) if math.isfinite(la) and math.isfinite(lb) else -math.inf
    gap = -float(np.expm1(d))  # numpy's, not math's: the same last bit as the array route
    est = la + float(np.log(gap)) if gap > 0.0 else -math.inf
    return -math.inf if math.isnan(est) else min(est, 0.0)


def gdp_log_delta_bounds(mu: float | FloatArray, eps: ArrayLike) -> tuple[FloatArray, FloatArray, FloatArray]:
    """``(lower, estimate, upper)`` of ``log delta_mu(eps)`` with the float error pushed outwards.

    ``-inf`` is returned (lower and estimate) where delta underflows every
    double; the upper end then stays finite only if the first term does not
    underflow too, which is the honest statement of what double precision knows.
    """
    eps = np.asarray(eps, float)
    tiny = np.asarray(mu, float) < _MU_FLOOR
    if np.any(tiny):  # delta grows with mu: bound it above at the floor (0/0 at mu = 0 gave NaN), below by 0
        lo, est, hi = gdp_log_delta_bounds(np.maximum(mu, _MU_FLOOR), eps)
        return np.where(tiny, -np.inf, lo), np.where(tiny, -np.inf, est), hi
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        a = -eps / mu + mu / 2.0
        b = -eps / mu - mu / 2.0
        la = special.log_ndtr(a)
        lpb = special.log_ndtr(b)
        lb = lpb + eps
        err_a = _SAFETY * (3.0 * _U * (a * a + np.abs(a)) + 8.0 * _U * (np.abs(la) + 1.0))
        err_b = _SAFETY * (3.0 * _U * (b * b + np.abs(b)) + 8.0 * _U * (np.abs(lpb) + 1.0) + _U * np.abs(eps))
        d = np.where(np.isfinite(la) & np.isfinite(lb), lb - la, -np.inf)  # < 0: delta > 0 in exact arithmetic
        d = np.minimum(d, 0.0)
        err_d = err_a + err_b + _U * np.abs(d)
        # log(1 - e^d) and how far it can move when d moves by err_d
        tail = np.log(-np.expm1(d))
        d_far = d - err_d  # the more negative end: larger 1 - e^d
        d_near = d + err_d  # the end closer to 0: smaller 1 - e^d
        tail_hi = np.log(-np.expm1(np.minimum(d_far, 0.0)))
        tail_lo = np.where(d_near < 0.0, np.log(-np.expm1(np.minimum(d_near, 0.0))), -np.inf)
        est = la + tail
        rnd_hi = _SAFETY * _U * (np.abs(la) + np.abs(tail_hi) + 1.0)
        rnd_lo = _SAFETY * _U * (np.abs(la) + np.abs(tail_lo) + 1.0)
        upper = np.minimum(la + err_a + tail_hi + rnd_hi, 0.0)
        lower = la - err_a + tail_lo - rnd_lo
    est = np.where(np.isnan(est), -np.inf, np.minimum(est, 0.0))
    # la = -inf: Phi(a) underflows, so delta < Phi(a) < the smallest double (log of it: -745.2)
    upper = np.where(np.isneginf(la), math.log(_TINIEST), upper)
    lower = np.where(np.isnan(lower), -np.inf, lower)
    est = np.clip(est, lower, upper)
    return lower, est, upper


def gdp_delta_bounds(mu: float | FloatArray, eps: ArrayLike) -> tuple[FloatArray, FloatArray, FloatArray]:
    """``(lower, estimate, upper)`` of ``delta_mu(eps)``; ``upper`` never underflows to 0 (delta > 0)."""
    lo, est, hi = gdp_log_delta_bounds(mu, eps)
    with np.errstate(under="ignore"):
        return np.exp(lo), np.exp(est), np.clip(np.exp(hi), _TINIEST, 1.0)


def gdp_epsilon_bounds(mu: float, delta: float) -> tuple[float, float, float]:
    """``(lower, estimate, upper)`` around the exact epsilon of ``mu``-GDP at ``delta``.

    ``upper`` satisfies ``upper(log delta_mu(upper)) <= log delta`` and ``lower``
    either is 0 or satisfies ``lower(log delta_mu(lower)) > log delta``: a
    certified bracket whatever the rounding. Bisection on each curve (they are
    monotone up to the error terms, and the bisection invariant only relies on
    the endpoint checks). ``upper`` is ``inf`` only if no double epsilon
    reaches ``delta`` (mu above about 1e150).
    """
    target = math.log(delta)
    start = max(1.0, 0.5 * mu * mu + mu)

    def below(end: int) -> Callable[[FloatArray], BoolArray]:
        return lambda e: np.asarray(gdp_log_delta_bounds(mu, e)[end] <= target)

    up_ok = below(2)  # the upper curve is at or below delta: a certified upper end
    lo_ok = below(0)  # fails where even the lower curve is above delta: epsilon > e
    est_ok = below(1)
    zero = np.zeros(1)

    def root(ok: Callable[[FloatArray], BoolArray]) -> tuple[float, float]:
        lo, hi = bisect_boundary(
            ok, zero, np.array([start]), iterations=2000, grow_lo=True, rtol=1e-14, cap=1e300, overflow="inf"
        )
        return float(lo[0]), float(hi[0])

    upper = 0.0 if up_ok(zero)[0] else root(up_ok)[1]
    lower = 0.0 if lo_ok(zero)[0] else root(lo_ok)[0]
    est = 0.0 if est_ok(zero)[0] else root(est_ok)[1]
    if math.isinf(upper):
        return lower, upper, upper
    lower = min(lower, upper)
    return lower, min(max(est, lower), upper), upper


def bisect_boundary(
    ok: Callable[[FloatArray], BoolArray],
    lo: FloatArray,
    hi: FloatArray,
    *,
    iterations: int,
    grow_lo: bool = False,
    rtol: float = 0.0,
    cap: float = math.inf,
    overflow: str = "raise",
    what: str = "bisection",
) -> tuple[FloatArray, FloatArray]:
    """Vectorised bisection for the boundary of ``ok`` (false below it, true above it), element-wise.

    ``hi`` is doubled until ``ok(hi)`` holds everywhere (``grow_lo``: ``lo`` moves to the old ``hi``);
    then up to ``iterations`` halvings, stopping once every bracket is within ``rtol`` relative or cannot
    be halved in floating point. ``ok`` holds at every returned ``hi`` (it was evaluated there) and fails
    at every ``lo`` that moved: the certified side of each end is the one the caller's predicate states.
    ``falling_root`` is the scalar root finder for smooth functions; this one serves predicates, and arrays
    of examples at once.

    Parameters
    ----------
    ok : callable
        Element-wise predicate on an array of points, monotone (false, then true).
    lo, hi : numpy.ndarray
        Starting brackets (float arrays of one shape).
    iterations : int
        Most halvings.
    grow_lo : bool, default False
        Whether ``lo`` follows ``hi`` while ``hi`` is doubled.
    rtol : float, default 0
        Stop once every ``hi - lo <= rtol hi``.
    cap : float, default inf
        The largest ``hi`` the doubling may reach.
    overflow : {"raise", "inf"}, default "raise"
        Beyond ``cap``: raise, or answer ``hi = inf`` for that element (its ``lo`` the last ``hi`` tried).
    what : str
        What the search is for (the error message).

    Returns
    -------
    tuple of numpy.ndarray
        ``(lo, hi)`` element-wise.

    Raises
    ------
    PrecisionError
        ``hi`` would exceed ``cap`` before ``ok`` holds (with ``overflow="raise"``).
    """
    lo, hi = np.array(lo, dtype=float), np.array(hi, dtype=float)
    live = np.ones(hi.shape, dtype=bool)  # elements still being searched (``overflow="inf"`` drops some)
    grow = ~ok(hi)
    while np.any(grow):
        if grow_lo:
            lo = np.where(grow, hi, lo)
        hi = np.where(grow, 2.0 * hi, hi)
        over = hi > cap
        if np.any(over):
            if overflow != "inf":
                raise PrecisionError(f"{what}: no bracket below {cap:g}")
            hi = np.where(over, math.inf, hi)
            live &= ~over
        grow = live & ~ok(np.where(live, hi, 0.0))
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        done = (mid <= lo) | (mid >= hi) | ~live
        if rtol:
            done |= hi - lo <= rtol * hi
        if np.all(done):
            break
        good = ok(np.where(live, mid, 0.0))
        hi = np.where(live & good, mid, hi)
        lo = np.where(live & ~good, mid, lo)
    return lo, hi


def gdp_delta_bounds_array(mu: ArrayLike, eps: ArrayLike) -> tuple[FloatArray, FloatArray, FloatArray]:
    """``gdp_delta_bounds`` broadcast over ``mu`` as well: ``mu = 0`` gives delta 0, ``mu = inf`` gives 1.

    No input checks (the per-example loops call it); ``mu >= 0`` and no NaN are the caller's to ensure.
    """
    e, m = np.broadcast_arrays(np.asarray(eps, dtype=float), np.asarray(mu, dtype=float))
    lo, est, up = np.zeros(e.shape), np.zeros(e.shape), np.zeros(e.shape)
    pos = (m > 0) & np.isfinite(m)
    if np.any(pos):
        for out, v in zip((lo, est, up), gdp_delta_bounds(m[pos], e[pos])):
            out[pos] = v
    for out in (lo, est, up):
        out[np.isinf(m)] = 1.0
    return lo, est, up


def gdp_epsilon_bounds_array(
    mu: ArrayLike, delta: float, *, lower: bool = True
) -> tuple[FloatArray | None, FloatArray]:
    """Certified ``(lower, upper)`` around the epsilon of each ``mu``-GDP at ``delta``, for an array of ``mu``.

    Bisection on every element at once (``bisect_boundary``: 80 halvings of ``[0, max(1, mu^2 + 10 mu + 10)]``,
    doubled while too small) with the endpoint checks on the certified curve ``gdp_delta_bounds_array``:
    ``upper`` has its upper delta ``<= delta`` (rounded up); ``lower`` is 0 or has its lower delta ``> delta``
    (rounded down). A scalar root finder per example would cost about a thousand times more for a large
    ledger. No input checks: ``mu >= 0`` (the callers pass rounded-up sums of squares), ``delta`` in ``(0, 1)``;
    ``lower=False`` skips the second bisection (``lower`` is then None). 0 where ``mu = 0``.
    """
    m = np.asarray(mu, float)
    start = np.maximum(1.0, m * m + 10.0 * m + 10.0)

    def up_ok(e: FloatArray) -> BoolArray:
        return np.asarray(gdp_delta_bounds_array(m, e)[2] <= delta)

    def lo_ok(e: FloatArray) -> BoolArray:
        return np.asarray(~(gdp_delta_bounds_array(m, e)[0] > delta))

    _, hi = bisect_boundary(up_ok, np.zeros_like(m), start, iterations=80)
    upper = np.where(m == 0, 0.0, np.where(up_ok(np.zeros_like(m)), 0.0, hi))
    if not lower:
        return None, upper
    lo, _ = bisect_boundary(lo_ok, np.zeros_like(m), start, iterations=80, grow_lo=True)
    return np.where((m == 0) | lo_ok(lo), 0.0, lo), upper


def largest_within(spend: Callable[[float], float], *, rtol: float, cap: float = 1e6) -> float | None:
    """The largest ``x >= 0`` (rounded down) with ``spend(x) <= 0``, for a non-decreasing ``spend``.

    ``[0, 1]`` is doubled until ``spend`` is positive at its top, then ``falling_root`` on ``-x`` (relative
    tolerance ``rtol``) answers with a point where ``spend`` was evaluated and found ``<= 0``: a budget
    that certainly fits. ``None`` when no ``x <= cap`` makes ``spend`` positive (the caller says why).
    """
    lo, hi = 0.0, 1.0
    while spend(hi) <= 0.0:
        lo, hi = hi, 2.0 * hi
        if hi > cap:
            return None
    # x = -budget: spend(-x) is non-increasing in x and <= 0 exactly where the budget fits
    return -falling_root(lambda x: spend(-x), -hi, -lo, xtol=1e-300, rtol=rtol)


def gdp_mu_within(epsilon: float, delta: float) -> float:
    """The largest ``mu`` (rounded down) whose certified upper curve is at most ``delta`` at ``epsilon``.

    The inverse of the curve in ``mu`` (delta increases with ``mu``), by ``largest_within`` (Brent's method,
    relative tolerance ``4u``): ``mu``-GDP then gives ``(epsilon, delta)``-DP whatever the rounding. No
    input checks (``epsilon >= 0``, ``delta`` in ``(0, 1)``); ``PrecisionError`` when no ``mu <= 1e6``
    reaches ``delta`` (which cannot happen for ``delta < 1``).
    """
    target = math.log(delta)

    def spend(m: float) -> float:  # non-decreasing in mu, <= 0 exactly where the upper curve is <= delta
        d = float(gdp_delta_bounds_array(m, epsilon)[2])
        r = math.log(d) - target if d > 0.0 else -1e3
        return min(r, 0.0) if d <= delta else max(r, 5e-324)

    out = largest_within(spend, rtol=4.0 * _U)
    if out is None:  # delta(eps; mu) -> 1 as mu -> inf, so this cannot happen for delta < 1
        raise PrecisionError(f"gdp_mu: no GDP parameter <= 1e6 reaches delta={delta!r} at epsilon={epsilon!r}")
    return out

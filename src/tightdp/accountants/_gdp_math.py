"""The mu-GDP trade-off curve with certified floating-point error (Dong, Roth, Su 2022, Cor. 2.13).

A composition of Gaussian mechanisms is exactly ``mu``-GDP with
``mu^2 = sum_i c_i mu_i^2`` (Dong et al. Cor. 3.3; 000 Thm 11 for adaptive
composition), and its privacy curve is

    delta_mu(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2).

It is evaluated in log space, ``log delta = la + log(1 - e^(lb - la))`` with
``la = log Phi(a)``, ``lb = eps + log Phi(b)``, so that it stays accurate far
into the tail (delta = 1e-300 and below) and never overflows. Every answer
carries a bound on the float error of that evaluation, so that the epsilon
interval is a certified bracket of the exact root, not only of the computed
one: ``lower`` has ``delta_mu(lower) > delta`` and ``upper`` has
``delta_mu(upper) <= delta`` even after the worst-case rounding.

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

import numpy as np
from scipy import special

__all__ = ["gaussian_ledger_mu", "gdp_log_delta_bounds", "gdp_delta_bounds", "gdp_epsilon_bounds", "gdp_log_delta"]

_TINIEST = 5e-324  # the smallest positive double: an upper bound on any delta that underflows

_U = float(np.finfo(float).eps) / 2
_SAFETY = 4.0


def gdp_log_delta(mu: float, eps) -> np.ndarray:
    """``log delta_mu(eps)`` as computed (the estimate; no error term). ``-inf`` where delta underflows."""
    return gdp_log_delta_bounds(mu, eps)[1]


def gdp_log_delta_bounds(mu: float, eps) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(lower, estimate, upper)`` of ``log delta_mu(eps)`` with the float error pushed outwards.

    ``-inf`` is returned (lower and estimate) where delta underflows every
    double; the upper end then stays finite only if the first term does not
    underflow too, which is the honest statement of what double precision knows.
    """
    eps = np.asarray(eps, float)
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


def gdp_delta_bounds(mu: float, eps) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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

    def curve(e: float) -> tuple[float, float, float]:
        lo, est, hi = gdp_log_delta_bounds(mu, np.array([e]))
        return float(lo[0]), float(est[0]), float(hi[0])

    def root(ok) -> tuple[float, float]:
        """``(lo, hi)``, ``hi - lo`` about 1e-14 relative, with ``ok`` false at ``lo`` and true at
        ``hi`` (``ok`` is false at 0); ``hi`` is ``inf`` if ``ok`` never holds below 1e300."""
        lo, hi = 0.0, max(1.0, 0.5 * mu * mu + mu)
        while not ok(hi):
            lo, hi = hi, 2.0 * hi
            if hi > 1e300:
                return lo, math.inf
        for _ in range(2000):
            mid = 0.5 * (lo + hi)
            if mid <= lo or mid >= hi or hi - lo <= 1e-14 * hi:
                break
            if ok(mid):
                hi = mid
            else:
                lo = mid
        return lo, hi

    up_ok = lambda e: curve(e)[2] <= target  # the upper curve is at or below delta: a certified upper end
    lo_ok = lambda e: curve(e)[0] <= target  # fails where even the lower curve is above delta: epsilon > e
    est_ok = lambda e: curve(e)[1] <= target
    upper = 0.0 if up_ok(0.0) else root(up_ok)[1]
    lower = 0.0 if lo_ok(0.0) else root(lo_ok)[0]
    est = 0.0 if est_ok(0.0) else root(est_ok)[1]
    if math.isinf(upper):
        return lower, upper, upper
    lower = min(lower, upper)
    return lower, min(max(est, lower), upper), upper


def gaussian_ledger_mu(ledger) -> float | None:
    """``mu`` of a ledger ``[(mechanism, count), ...]`` whose every step has a Gaussian privacy loss, equal in
    both directions (then the composition is exactly ``mu``-GDP with ``mu^2 = sum c mu_i^2``, Dong, Roth,
    Su 2022, Cor. 3.3; may be ``inf`` when the sum overflows), else ``None``."""
    from ..losses import GaussianLoss

    mu2 = 0.0
    for mech, count in ledger:
        pair = mech.privacy_losses()
        if not (isinstance(pair.remove, GaussianLoss) and pair.add == pair.remove):
            return None
        mu2 += count * pair.remove.mu * pair.remove.mu
    return math.sqrt(mu2)

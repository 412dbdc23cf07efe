"""Gaussian differential privacy: exact (eps, delta) conversion, fully adaptive filter and odometer.

000 Thm 11: if the GDP parameters ``mu_m`` of a fully adaptive composition
(each chosen from the outputs so far) satisfy ``sum_m mu_m^2 <= B^2`` almost
surely, the composition is ``B``-GDP. A ``B``-GDP mechanism is
``(eps, delta(eps))``-DP for every ``eps`` with (000 Cor. C.2, eq. (C.2))::

    delta(eps) = Phi(-eps/B + B/2) - e^eps Phi(-eps/B - B/2)

and this is tight for the Gaussian mechanism. ``GDPFilter`` is the filter
``F_B`` of 000 eq. (4.1) / Alg. 2 (App. C.1) together with the odometer of
App. C.5: it admits a step of ``mu``-GDP only when the accumulated
``sum mu^2`` stays within ``B^2``.

All conversions use the one certified evaluation of this curve,
``tightdp.accountants._gdp_math`` (log space with a proven float-error term), and
are rounded to the safe side: ``gdp_mu`` returns a ``mu`` no larger than the exact
root, ``gdp_epsilon`` an ``eps`` no smaller than the exact one. (A fixed relative
allowance of 1e-12, used before, was short in the far tail: 85 of 300 random
``gdp_epsilon`` calls with delta down to 1e-250 came out up to 4e-12 below the
80-digit truth.)
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from .._validation import check_delta, check_epsilon, check_nonnegative, check_positive
from ..accountants._gdp_math import gdp_epsilon_bounds, gdp_log_delta_bounds
from ..bounds import Bounds

__all__ = ["gdp_delta", "gdp_delta_bounds", "gdp_epsilon", "gdp_mu", "GDPFilter"]

def gdp_delta_bounds(epsilon, mu) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(lower, estimate, upper)`` of ``delta(eps)`` of ``mu``-GDP, 000 eq. (C.2), vectorised over both
    arguments, with the certified float error of ``_gdp_math`` pushed outwards. ``mu = 0`` gives
    ``delta = 0`` for ``eps >= 0``, ``mu = inf`` gives 1."""
    eps = np.asarray(epsilon, dtype=float)
    mu = np.asarray(mu, dtype=float)
    eps, mu = np.broadcast_arrays(eps, mu)
    lo, est, up = np.zeros(eps.shape), np.zeros(eps.shape), np.zeros(eps.shape)
    pos = (mu > 0) & np.isfinite(mu)
    if np.any(pos):
        bounds = gdp_log_delta_bounds(mu[pos], eps[pos])
        with np.errstate(under="ignore"):
            for out, v in zip((lo, est, up), bounds):
                out[pos] = np.clip(np.exp(v), 0.0, 1.0)
        up[pos] = np.maximum(up[pos], 5e-324)  # delta > 0 for mu > 0: never round the upper end to 0
    for out in (lo, est, up):
        out[np.isinf(mu)] = 1.0
    return lo, est, up


def gdp_delta(epsilon, mu) -> np.ndarray:
    """``delta(eps)`` of ``mu``-GDP, 000 eq. (C.2), vectorised: the computed value (``gdp_delta_bounds``
    gives the certified ends)."""
    return gdp_delta_bounds(epsilon, mu)[1]


def gdp_mu(epsilon: float, delta: float) -> float:
    """The largest ``mu`` (rounded down) such that ``mu``-GDP implies ``(epsilon, delta)``-DP.

    ``delta(eps; mu)`` is increasing in ``mu``; bisection keeps as answer the
    lower end of the bracket, whose delta (inflated by the relative evaluation
    error ``1e-12``) is at most ``delta``. The bracket is narrowed to 4 ulp.
    """
    eps = check_epsilon("epsilon", epsilon)
    dlt = check_delta("delta", delta)
    ok = lambda m: float(gdp_delta_bounds(eps, m)[2]) <= dlt
    lo, hi = 0.0, 1.0
    while ok(hi):
        lo, hi = hi, 2.0 * hi
        if hi > 1e6:  # delta(eps; mu) -> 1 as mu -> inf, so this cannot happen for delta < 1
            raise ArithmeticError("could not bracket the GDP parameter")
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if ok(mid):
            lo = mid
        else:
            hi = mid
        if hi - lo <= 4 * math.ulp(hi):
            break
    return lo


def gdp_epsilon(delta: float, mu: float) -> float:
    """The smallest ``eps >= 0`` (rounded up) with ``delta(eps; mu) <= delta``.

    Bisection on the decreasing function ``eps -> delta(eps; mu)``; the upper
    end of the bracket is returned, and its delta is checked with the relative
    evaluation error ``1e-12`` added, so the answer is never below the exact
    ``eps``. ``mu = 0`` gives 0.
    """
    dlt = check_delta("delta", delta)
    m = check_nonnegative("mu", mu)
    if m == 0.0:
        return 0.0
    hi = gdp_epsilon_bounds(m, dlt)[2]
    if math.isinf(hi):
        raise ArithmeticError("could not bracket epsilon for the GDP curve")
    return hi


class GDPFilter:
    """Fully adaptive GDP privacy filter with an odometer (000 Thm 11, eq. (4.1), Alg. 2, App. C.5).

    Construct with a GDP budget ``mu=B``, or with ``epsilon`` and ``delta``, in
    which case ``B = gdp_mu(epsilon, delta)`` (the largest ``B`` whose tight
    curve (C.2) gives at most ``delta`` at ``epsilon``, rounded down).

    ``admit(mu)`` says whether a step of ``mu``-GDP keeps ``sum mu_m^2 <= B^2``
    and, if so, records it. The sums are kept as exact rationals of the floats
    passed in, so the comparison has no rounding error: the filter admits a
    step exactly when the theorem's condition holds for the parameters given.
    By Thm 11 (and Thm C.1 for the random stopping time) every sequence of
    admitted steps, with each ``mu_m`` chosen from the outputs so far, is
    ``B``-GDP, hence ``(epsilon, delta)``-DP. That is the whole promise, and it is a proof:
    GDP filters are valid under fully adaptive composition, whereas the natural PLD / f-DP filter
    (stop when the composed privacy profile crosses the budget's) is not (Tran, Koskela, Raisa,
    Honkela 2026, arXiv 2602.06756). For per-example filters see ``IndividualAccountant.active``.

    The odometer (``spent_mu``, ``epsilon_spent(delta)``, ``delta_spent(eps)``)
    reports the GDP parameter ``sqrt(sum mu_m^2)`` of the steps admitted so far
    and its exact (eps, delta) curve (C.2).
    """

    def __init__(self, *, epsilon: float | None = None, delta: float | None = None,
                 mu: float | None = None) -> None:
        if mu is not None:
            if epsilon is not None or delta is not None:
                raise ValueError("give either mu or (epsilon, delta), not both")
            self._budget = check_positive("mu", mu)
            self._eps_delta = None
        else:
            if epsilon is None or delta is None:
                raise ValueError("give either mu or both epsilon and delta")
            eps = check_epsilon("epsilon", epsilon)
            dlt = check_delta("delta", delta)
            b = gdp_mu(eps, dlt)
            if b <= 0.0:
                raise ValueError(f"epsilon={eps!r}, delta={dlt!r} allows no GDP budget")
            self._budget = b
            self._eps_delta = (eps, dlt)
        self._budget_sq = Fraction(self._budget) ** 2
        self._spent_sq = Fraction(0)
        self._steps = 0

    # ----------------------------------------------------------------- filter
    @property
    def budget(self) -> float:
        """The GDP budget ``B``."""
        return self._budget

    @property
    def steps(self) -> int:
        """Number of admitted steps with ``mu > 0``."""
        return self._steps

    def fits(self, mu: float) -> bool:
        """Whether a step of ``mu``-GDP fits the remaining budget (nothing is recorded)."""
        m = check_nonnegative("mu", mu)
        return self._spent_sq + Fraction(m) ** 2 <= self._budget_sq

    def admit(self, mu: float) -> bool:
        """Record a step of ``mu``-GDP if it fits (000 eq. (4.1)); return whether it did."""
        m = check_nonnegative("mu", mu)
        new = self._spent_sq + Fraction(m) ** 2
        if new > self._budget_sq:
            return False
        self._spent_sq = new
        if m > 0:
            self._steps += 1
        return True

    def remaining_mu(self) -> float:
        """The largest ``mu`` (rounded down) that still fits."""
        rem = self._budget_sq - self._spent_sq
        r = math.sqrt(float(rem))
        while r > 0 and Fraction(r) ** 2 > rem:
            r = math.nextafter(r, 0.0)
        return r

    # --------------------------------------------------------------- odometer
    @property
    def spent_mu(self) -> float:
        """``sqrt(sum mu_m^2)`` of the admitted steps, rounded up (App. C.5)."""
        s = self._spent_sq
        r = math.sqrt(float(s))
        if r == 0.0 and s > 0:  # mu^2 sums below the float range (subnormal mu): go through logs
            r = math.exp(0.5 * (math.log(s.numerator) - math.log(s.denominator)))
        while Fraction(r) ** 2 < s:
            # one ulp at a time near the answer; far below it (deep subnormals) double instead,
            # which still rounds up and ends in a few hundred steps at most
            r = math.nextafter(r, math.inf) if r > 1e-290 else (2.0 * r if r > 0 else 5e-324)
        return r

    def epsilon_spent(self, delta: float) -> Bounds:
        """Exact epsilon (rounded up) of the steps admitted so far, at ``delta``."""
        dlt = check_delta("delta", delta)
        m = self.spent_mu
        e = gdp_epsilon(dlt, m)
        return Bounds(e, e, e, "epsilon", "bound",
                      {"method": "gdp", "mu": m, "steps": self._steps, "source": "000 Thm 11, eq. (C.2)"})

    def delta_spent(self, epsilon: float) -> Bounds:
        """Exact delta of the steps admitted so far, at ``epsilon``."""
        eps = check_epsilon("epsilon", epsilon)
        m = self.spent_mu
        lo, d, up = (float(v) for v in gdp_delta_bounds(eps, m))
        return Bounds(lo, d, up, "delta", "bound",
                      {"method": "gdp", "mu": m, "steps": self._steps, "source": "000 Thm 11, eq. (C.2)"})

    def __repr__(self) -> str:
        return f"GDPFilter(budget={self._budget:.6g}, spent_mu={self.spent_mu:.6g}, steps={self._steps})"
def _gdp_eps_vec(delta: float, mu: np.ndarray) -> np.ndarray:
    """Vectorised ``gdp_epsilon``: bisection on every example at once, upper end returned."""
    mu = np.asarray(mu, float)
    lo = np.zeros_like(mu)
    hi = np.maximum(1.0, mu * mu + 10.0 * mu + 10.0)
    ok = lambda e: gdp_delta_bounds(e, mu)[2] <= delta
    grow = ~ok(hi)
    while np.any(grow):
        hi = np.where(grow, 2 * hi, hi)
        grow = ~ok(hi)
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        good = ok(mid)
        hi = np.where(good, mid, hi)
        lo = np.where(good, lo, mid)
    out = np.where(ok(np.zeros_like(mu)), 0.0, hi)
    return np.where(mu == 0, 0.0, out)


def _gdp_eps_lower_vec(delta: float, mu: np.ndarray) -> np.ndarray:
    """Vectorised certified *lower* end of ``gdp_epsilon``: the largest bisection point whose GDP delta,
    rounded down, is still above ``delta`` (0 if none)."""
    mu = np.asarray(mu, float)
    lo = np.zeros_like(mu)
    hi = np.maximum(1.0, mu * mu + 10.0 * mu + 10.0)
    above = lambda e: gdp_delta_bounds(e, mu)[0] > delta
    grow = above(hi)
    while np.any(grow):
        lo = np.where(grow, hi, lo)
        hi = np.where(grow, 2 * hi, hi)
        grow = above(hi)
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        a = above(mid)
        lo = np.where(a, mid, lo)
        hi = np.where(a, hi, mid)
    return np.where((mu == 0) | ~above(lo), 0.0, lo)

"""Rényi-DP curves and the RDP -> (epsilon, delta) conversion (pure, keyword-only functions).

Every function returns, for an array of orders ``alpha > 1``, an *upper bound*
on the Rényi divergence ``D_alpha(P || Q)`` of one run of a mechanism (and,
where the mechanism has two neighbouring directions, on both of them). The
functions work in log space so that large orders and tiny sampling rates
neither overflow nor underflow.

References
----------
* Mironov (2017), "Rényi Differential Privacy", Table II: Gaussian,
  Laplace and randomized-response curves.
* Mironov, Talwar, Zhang (2019), "Rényi Differential Privacy of the Sampled
  Gaussian Mechanism" (MTZ), Sec. 3.2 (integer orders, binomial expansion) and
  Sec. 3.3 (fractional orders, two convergent series split at
  ``z0 = sigma^2 log(1/q - 1) + 1/2``); Sec. 3.1 shows that the remove
  direction ``D_alpha(mu || mu0)`` dominates the add direction
  ``D_alpha(mu0 || mu)``, so the remove curve bounds both.
* Wang, Balle, Kasiviswanathan (2019), "Subsampled Rényi Differential Privacy
  and Analytical Moments Accountant" (WBK), Theorem 9: sampling without
  replacement under the replace-one (substitute) relation, integer orders;
  fractional orders by the convexity of ``(alpha - 1) D_alpha`` in ``alpha``
  (van Erven & Harremoës 2014, Thm 11), which makes linear interpolation of the
  integer-order bounds on ``(alpha - 1) D_alpha`` an upper bound again.
* Canonne, Kamath, Steinke (2020), "The Discrete Gaussian for Differential
  Privacy", Prop. 12 (equivalently Asoodeh et al. 2021): the RDP -> (eps, delta)
  conversion ``delta = exp((alpha-1)(rdp-eps)) / alpha * (1 - 1/alpha)^(alpha-1)``.
* Bretagnolle-Huber inequality: ``TV(P, Q) <= sqrt(1 - exp(-KL))`` and
  ``KL <= D_alpha`` for ``alpha >= 1``, so ``delta(eps) <= delta(0) = TV``.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import cast

import numpy as np
from scipy import special

from .._caches import register as _register_cache
from .._types import ArrayLike, FloatArray
from ..errors import PrecisionError

__all__ = [
    "DEFAULT_ORDERS",
    "gaussian_rdp",
    "laplace_rdp",
    "discrete_rdp",
    "poisson_gaussian_rdp",
    "without_replacement_gaussian_rdp",
    "epsilon_from_rdp",
    "delta_from_rdp",
]


def _lse(x: FloatArray) -> float:
    """log(sum(exp(x))) for a 1-D array (faster than scipy's generic logsumexp)."""
    x = np.asarray(x, float)
    m = float(np.max(x)) if x.size else -math.inf
    if not math.isfinite(m):
        return m
    return m + math.log(float(np.sum(np.exp(x - m))))


def _default_orders() -> FloatArray:
    near_one = 1.0 + np.geomspace(1e-3, 0.1, 15)  # 1.001 ... 1.1
    frac = np.round(np.arange(1.1, 12.0, 0.05), 2)  # 1.1 ... 11.95 in steps of 0.05
    ints = np.arange(12.0, 129.0)
    large = np.unique(np.round(np.geomspace(130, 1e5, 80)))  # ... 100000 (integers)
    return cast("FloatArray", np.unique(np.concatenate([near_one, frac, ints, large])))


#: Default order grid: fractional orders in (1, 12) (dense, because the curve
#: of the subsampled Gaussian turns sharply), all integers 12..128, then
#: integers geometrically spaced up to 1e5, so that the optimum is interior
#: from epsilon ~ 1e-4 to epsilon ~ 1e3.
DEFAULT_ORDERS = _default_orders()


def gaussian_rdp(*, mu: float, orders: FloatArray) -> FloatArray:
    """Gaussian mechanism with ``mu = sensitivity / sigma``: ``alpha mu^2 / 2`` (Mironov 2017, Table II)."""
    return np.asarray(orders, float) * mu * mu / 2.0


def laplace_rdp(*, r: float, orders: FloatArray) -> FloatArray:
    """Laplace mechanism with ``r = sensitivity / scale`` (Mironov 2017, Table II):

    ``D_alpha = log(alpha/(2alpha-1) e^{(alpha-1) r} + (alpha-1)/(2alpha-1) e^{-alpha r}) / (alpha-1)``.
    """
    a = np.asarray(orders, float)
    log_num = np.logaddexp(np.log(a / (2 * a - 1)) + (a - 1) * r, np.log((a - 1) / (2 * a - 1)) - a * r)
    return cast("FloatArray", log_num / (a - 1))


def discrete_rdp(*, p: FloatArray, q: FloatArray, orders: FloatArray) -> FloatArray:
    """``D_alpha(P || Q) = log sum_i p_i^alpha q_i^(1-alpha) / (alpha - 1)`` for finite distributions.

    Infinite when some ``p_i > 0 = q_i``. Used for randomized response
    (Mironov 2017, Table II, generalised to k buckets).
    """
    a = np.asarray(orders, float)[:, None]
    p, q = np.asarray(p, float), np.asarray(q, float)
    keep = p > 0
    if np.any(q[keep] <= 0):
        return np.full(a.shape[0], math.inf)
    lp, lq = np.log(p[keep]), np.log(q[keep])
    return cast("FloatArray", special.logsumexp(a * lp + (1 - a) * lq, axis=1) / (a[:, 0] - 1))


# ------------------------------------------------------------ sampled Gaussian
@_register_cache
@lru_cache(maxsize=4)
def _log_factorial_table(size: int) -> FloatArray:
    """``log(n!)`` for ``n = 0 ... size - 1`` (the values ``gammaln(n + 1.0)`` returns), computed once per size and
    emptied by ``tightdp.clear_caches``."""
    table: FloatArray = special.gammaln(np.arange(size, dtype=float) + 1.0)
    table.flags.writeable = False
    return table


def _log_factorials(n: int) -> FloatArray:
    """A table of ``log(k!)`` holding at least ``k = 0 ... n`` (sizes are powers of two, so few tables exist)."""
    return _log_factorial_table(max(256, 1 << int(n).bit_length()))


def _log_a_integer(q: float, sigma: float, alpha: int) -> float:
    """MTZ Sec. 3.2: ``A_alpha = sum_k C(alpha,k) (1-q)^(alpha-k) q^k exp((k^2-k)/(2 sigma^2))``."""
    k = np.arange(alpha + 1, dtype=float)
    g = _log_factorials(alpha)
    log_binom = g[alpha] - g[: alpha + 1] - g[alpha::-1]
    terms = log_binom + k * math.log(q) + (alpha - k) * math.log1p(-q) + (k * k - k) / (2.0 * sigma * sigma)
    return _lse(terms)


def _log_a_fractional(q: float, sigma: float, alpha: float) -> float:
    """MTZ Sec. 3.3: ``A_alpha = A_0 + A_1`` with two binomial series split at ``z0``.

    ``A_0 = sum_i C(alpha,i) q^i (1-q)^(alpha-i) e^{(i^2-i)/(2s^2)} Phi((z0 - i)/s)`` and
    ``A_1 = sum_i C(alpha,i) q^(alpha-i) (1-q)^i e^{(j^2-j)/(2s^2)} Phi((j - z0)/s)``, ``j = alpha - i``.
    Terms are summed in chunks of doubling size until they fall below ``e^-36`` of the
    largest term; the last term is added once more to cover the alternating tail.
    """
    s2 = sigma * sigma
    z0 = s2 * math.log(1.0 / q - 1.0) + 0.5 if q < 1 else -math.inf
    lq, l1q = math.log(q), math.log1p(-q)
    pos_terms: list[FloatArray] = []
    neg_terms: list[FloatArray] = []
    start, chunk = 0, max(64, int(2 * alpha) + 64)
    running = -math.inf
    for _ in range(60):
        i = np.arange(start, start + chunk, dtype=float)
        j = alpha - i
        log_c = special.gammaln(alpha + 1.0) - special.gammaln(i + 1.0) - special.gammaln(j + 1.0)
        sign = special.gammasgn(j + 1.0)  # sign of C(alpha, i) (Gamma(alpha+1), Gamma(i+1) > 0)
        s0 = log_c + i * lq + j * l1q + (i * i - i) / (2 * s2) + special.log_ndtr((z0 - i) / sigma)
        s1 = log_c + j * lq + i * l1q + (j * j - j) / (2 * s2) + special.log_ndtr((j - z0) / sigma)
        both = np.logaddexp(s0, s1)
        pos_terms.append(both[sign > 0])
        neg_terms.append(both[sign < 0])
        last = float(both[-1])
        running = max(running, float(np.max(both)))
        if start > alpha + 1 and last < running - 36.0 and both[-1] <= both[-2]:
            break
        start += chunk
        chunk = min(2 * chunk, 1 << 20)
    else:  # power-law tails this slow are not expected; the caller falls back to a chord bound
        raise PrecisionError(f"the MTZ series for alpha={alpha}, q={q}, sigma={sigma} did not converge")
    # beyond i > alpha + 1 the signs alternate and the magnitudes decrease, so the omitted
    # tail is at most the last term in absolute value: add it on the safe side
    pos_terms.append(np.array([last]))
    lp = _lse(np.concatenate(pos_terms))
    neg = np.concatenate(neg_terms)
    ln = _lse(neg) if neg.size else -math.inf
    if ln == -math.inf:
        return float(lp)
    if ln >= lp - 1e-9:
        raise PrecisionError(f"cancellation in the MTZ series for alpha={alpha}, q={q}, sigma={sigma}")
    return float(lp + math.log1p(-math.exp(ln - lp)))


def poisson_gaussian_rdp(*, q: float, sigma: float, orders: FloatArray) -> FloatArray:
    """RDP of the Poisson-subsampled Gaussian (sensitivity 1, noise ``sigma``, rate ``q``).

    ``D_alpha(mu || mu0) = log A_alpha / (alpha - 1)`` with ``mu0 = N(0, s^2)``,
    ``mu = (1-q) mu0 + q N(1, s^2)``: exact at every order (MTZ Sec. 3.2-3.3), and
    an upper bound on the add direction ``D_alpha(mu0 || mu)`` (MTZ Sec. 3.1).
    """
    orders = np.asarray(orders, float)
    if q >= 1.0:
        return gaussian_rdp(mu=1.0 / sigma, orders=orders)
    out = np.empty_like(orders)
    for n, a in enumerate(orders):
        if float(a).is_integer():
            la = _log_a_integer(q, sigma, int(a))
        else:
            try:
                la = _log_a_fractional(q, sigma, float(a))
            except PrecisionError:
                # log A_alpha = (alpha-1) D_alpha is convex in alpha (van Erven & Harremoes 2014,
                # Thm 11), so the chord between the neighbouring integer orders bounds it from above
                lo = math.floor(a)
                w = a - lo
                la_lo = 0.0 if lo == 1 else _log_a_integer(q, sigma, lo)
                la = (1 - w) * la_lo + w * _log_a_integer(q, sigma, lo + 1)
        out[n] = max(la, 0.0) / (a - 1.0)  # D_alpha >= 0; clip float noise of order 1e-16
    return out


def _log_wor_integer(q: float, mu_base: float, alpha: int) -> float:
    """``(alpha-1) x`` WBK Theorem 9 bound at an integer order, base Gaussian ``eps(j) = j mu_base^2/2``.

    ``1 + q^2 C(a,2) min{4(e^{eps(2)} - 1), 2 e^{eps(2)}} + sum_{j>=3} 2 q^j C(a,j) e^{(j-1) eps(j)}``
    (``eps(inf) = inf`` for the Gaussian, so ``min{2, (e^{eps(inf)}-1)^j} = 2``).
    """
    if alpha == 1:
        return 0.0
    rho = mu_base * mu_base / 2.0
    e2 = 2.0 * rho
    t2 = (
        2 * math.log(q)
        + math.log(alpha * (alpha - 1) / 2.0)
        + min(math.log(4.0) + math.log(math.expm1(e2)), math.log(2.0) + e2)
    )
    terms = [0.0, t2]
    if alpha >= 3:
        j = np.arange(3, alpha + 1, dtype=float)
        log_binom = special.gammaln(alpha + 1.0) - special.gammaln(j + 1.0) - special.gammaln(alpha - j + 1.0)
        terms.extend((math.log(2.0) + j * math.log(q) + log_binom + (j - 1) * j * rho).tolist())
    return _lse(np.asarray(terms))


def without_replacement_gaussian_rdp(*, q: float, mu_base: float, orders: FloatArray) -> FloatArray:
    """Upper bound on the RDP of the Gaussian under sampling without replacement, substitute relation.

    ``q`` is the sampling ratio (WBK's gamma) and ``mu_base`` the base Gaussian's
    ``mu`` under substitution (``2 sensitivity / sigma``: a record replaced by
    another moves the sum by up to twice the clipping norm). Integer orders use
    WBK Theorem 9; fractional orders interpolate ``(alpha-1) D_alpha`` linearly
    between neighbouring integers (convexity; ``(alpha-1) D_alpha = 0`` at 1),
    which keeps the bound valid.
    """
    orders = np.asarray(orders, float)
    if q >= 1.0:
        return gaussian_rdp(mu=mu_base, orders=orders)
    out = np.empty_like(orders)
    cache: dict[int, float] = {}

    def cum(a: int) -> float:
        if a not in cache:
            cache[a] = _log_wor_integer(q, mu_base, a)
        return cache[a]

    for n, a in enumerate(orders):
        lo = math.floor(a)
        if lo == a:
            val = cum(int(a))
        else:
            w = a - lo
            val = (1 - w) * cum(lo) + w * cum(lo + 1)
        # never better than the base mechanism without amplification
        out[n] = min(val / (a - 1.0), a * mu_base * mu_base / 2.0)
    return out


# ----------------------------------------------------------------- conversion
def _conversion_terms(orders: FloatArray, rdp: FloatArray, log_delta: float) -> FloatArray:
    a = orders
    with np.errstate(invalid="ignore", over="ignore"):
        return cast("FloatArray", rdp + np.log1p(-1.0 / a) - (log_delta + np.log(a)) / (a - 1.0))


def epsilon_from_rdp(*, orders: ArrayLike, rdp: ArrayLike, delta: float) -> tuple[float, float]:
    """Smallest epsilon over the order grid (CKS 2020 Prop. 12) and the order that attains it.

    ``eps = rdp + log1p(-1/alpha) - (log delta + log alpha) / (alpha - 1)``, clipped at 0;
    ``eps = 0`` when ``delta >= sqrt(1 - exp(-rdp))`` (Bretagnolle-Huber, KL <= D_alpha).
    Returns ``(inf, nan)`` when every order has infinite RDP.
    """
    orders, rdp = np.asarray(orders, float), np.asarray(rdp, float)
    finite = np.isfinite(rdp)
    if not np.any(finite):
        return math.inf, math.nan
    kl_bound = float(np.min(rdp[finite]))
    if delta * delta >= -math.expm1(-kl_bound):
        return 0.0, float(orders[finite][np.argmin(rdp[finite])])
    eps = np.where(finite, _conversion_terms(orders, rdp, math.log(delta)), math.inf)
    k = int(np.argmin(eps))
    return max(0.0, float(eps[k])), float(orders[k])


def delta_from_rdp(*, orders: FloatArray, rdp: FloatArray, epsilons: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Smallest delta over the order grid for each epsilon (inverse of CKS 2020 Prop. 12), capped at
    ``min(1, sqrt(1 - exp(-min rdp)))`` (Bretagnolle-Huber). Also returns the optimal order per epsilon."""
    orders, rdp = np.asarray(orders, float), np.asarray(rdp, float)
    eps = np.asarray(epsilons, float)
    finite = np.isfinite(rdp)
    if not np.any(finite):
        return np.ones_like(eps), np.full_like(eps, math.nan)
    a = orders[finite][None, :]
    r = rdp[finite][None, :]
    e = eps[:, None]
    log_d = (a - 1.0) * (r - e + np.log1p(-1.0 / a)) - np.log(a)
    k = np.argmin(log_d, axis=1)
    best = np.exp(np.minimum(log_d[np.arange(len(eps)), k], 0.0))
    cap = math.sqrt(-math.expm1(-max(float(np.min(rdp[finite])), 0.0)))  # (a Renyi divergence is >= 0; rounding)
    return np.minimum(best, min(1.0, cap)), orders[finite][k]

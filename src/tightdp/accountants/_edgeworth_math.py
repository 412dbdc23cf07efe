"""Numerics of the Edgeworth accountant (004): PLLR cumulants, Edgeworth CDFs, finite-sample bounds.

* ``pllr_moments``: mean, central moments 2-5 and absolute central moments of
  the privacy loss ``L = log(p/q)`` under ``P`` and under ``Q`` for one
  dominating pair. In 004's notation (Def. 3.1, with the roles of P and Q
  swapped so that the loss increases with the privacy leak), ``L`` under ``Q``
  is the PLLR ``X_i`` and ``L`` under ``P`` is ``Y_i``. Computed by adaptive
  composite Gauss-Legendre quadrature over the output space, component by
  component, for Gaussian-mixture pairs (the subsampled Gaussian, 004 Sec. 3),
  and by ``scipy.integrate.quad_vec`` plus the two atoms for the Laplace pair (004 Sec. 4.4).
* ``edgeworth_sf``: the survival function of the k-th order Edgeworth
  expansion (004 Def. 4.1; Hall 1992 eq. 2.17) of a sum with given cumulants,
  k = 0 (CLT) ... 3.
* ``edgeworth_uniform_bound``: the explicit non-asymptotic bound of Derumigny,
  Girard, Guyonvarch (2023), Thm 2.1 in its inid, no-continuity, skewed form
  (their Thm A.2, eq. (11), remainder r_{1,n} of eq. (15)) on
  ``sup_x |P(S_n <= x) - G_{n,1}(x)|`` - the bound that 004 Lemma 4.3 quotes.
  Where two published versions of a constant differ we take the larger.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import integrate, special

from ..mechanisms.base import PrivacyLoss
from ..mechanisms.losses import GaussianLoss, GaussianMixtureLoss, LaplaceLoss

__all__ = ["Moments", "pllr_moments", "edgeworth_sf", "edgeworth_uniform_bound", "SumStats"]

_SQRT2PI = math.sqrt(2.0 * math.pi)


@dataclass(frozen=True)
class Moments:
    """Moments of one PLLR: mean, central moments ``mu2..mu5``, absolute central moments ``abs1, abs3``."""

    mean: float
    mu2: float
    mu3: float
    mu4: float
    mu5: float
    abs1: float
    abs3: float

    @property
    def cumulants(self) -> tuple[float, float, float, float, float]:
        """``kappa_1 .. kappa_5`` (``kappa4 = mu4 - 3 mu2^2``, ``kappa5 = mu5 - 10 mu3 mu2``)."""
        return (self.mean, self.mu2, self.mu3, self.mu4 - 3 * self.mu2 ** 2, self.mu5 - 10 * self.mu3 * self.mu2)


def _from_expectation(expect) -> Moments:
    """Two passes: the mean, then central and absolute central moments, each by ``expect(g)``."""
    mean = float(expect(lambda L: L[..., None])[0])
    vals = expect(lambda L: np.stack([(L - mean) ** 2, (L - mean) ** 3, (L - mean) ** 4, (L - mean) ** 5,
                                      np.abs(L - mean), np.abs(L - mean) ** 3], axis=-1), kink=mean)
    return Moments(mean, *map(float, vals))


def _gaussian_moments(mu: float, sign: float) -> Moments:
    s = mu
    return Moments(sign * mu * mu / 2.0, s ** 2, 0.0, 3 * s ** 4, 0.0, s * math.sqrt(2 / math.pi),
                   2 * math.sqrt(2 / math.pi) * s ** 3)


def _laplace_expect(r: float, under: str):
    """E[g(L)] for P = Lap(0, 1), Q = Lap(r, 1), L(x) = |x - r| - |x| (in units of the scale)."""
    # atoms: L = r on x <= 0, L = -r on x >= r; between, L = r - 2x
    if under == "P":
        w_hi, w_lo = 0.5, 0.5 * math.exp(-r)
        dens = lambda x: 0.5 * np.exp(-x)
    else:
        w_hi, w_lo = 0.5 * math.exp(-r), 0.5
        dens = lambda x: 0.5 * np.exp(-(r - x))

    def expect(g, kink=None):
        atoms = w_hi * g(np.array(r)) + w_lo * g(np.array(-r))
        pts = None if kink is None or not (-r < kink < r) else [(r - kink) / 2.0]
        mid = 0.0
        for a, b in ((0.0, pts[0]), (pts[0], r)) if pts else ((0.0, r),):
            v, _ = integrate.quad_vec(lambda x: g(np.array(r - 2 * x)) * dens(x), a, b, epsabs=1e-15, epsrel=1e-12)
            mid = mid + v
        return np.asarray(atoms + mid, float).reshape(-1)
    return expect


_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(24)


def _panel_rule(breaks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Composite 24-point Gauss-Legendre nodes and weights on the panels between ``breaks``."""
    a, b = breaks[:-1, None], breaks[1:, None]
    half = (b - a) / 2.0
    return (a + half * (_GL_NODES[None, :] + 1.0)).ravel(), (half * _GL_WEIGHTS[None, :]).ravel()


def _mixture_expect(loss: GaussianMixtureLoss, under: str):
    """E[g(L(X))] with X from P's or Q's Gaussian mixture.

    Per component ``N(m, s^2)``: composite Gauss-Legendre in ``z = (x - m)/s`` on
    ``[-40, 40]`` with panels of width 0.2 (the mass outside is below 1e-340),
    with an extra panel break where ``L`` crosses ``kink`` (so that ``|L - mean|``
    is smooth on every panel). The integrands are analytic on each panel, so the
    rule is accurate to rounding; the tests check it against mpmath quadrature.
    """
    means = loss.p_means if under == "P" else loss.q_means
    weights = loss.p_weights if under == "P" else loss.q_weights
    s = loss.sigma
    base = np.linspace(-40.0, 40.0, 401)

    def expect(g, kink=None):
        total = 0.0
        for m, w in zip(means, weights):
            if w <= 0:
                continue
            breaks = base
            if kink is not None:
                lo, hi = loss.support()
                if lo < kink < hi:
                    zk = (float(loss.inverse(np.array([kink]))[0]) - m) / s
                    if -40.0 < zk < 40.0:
                        breaks = np.unique(np.append(base, zk))
            z, wq = _panel_rule(breaks)
            vals = g(loss.loss(m + s * z))
            total = total + w * np.sum(vals * (wq * np.exp(-0.5 * z * z) / _SQRT2PI)[:, None], axis=0)
        return np.asarray(total, float).reshape(-1)
    return expect


def pllr_moments(loss: PrivacyLoss) -> tuple[Moments, Moments]:
    """Moments of the privacy loss under ``P`` and under ``Q`` (``E_Q[g(L)] = E_P[g(L) e^{-L}]``)."""
    if isinstance(loss, GaussianLoss):
        return _gaussian_moments(loss.mu, +1.0), _gaussian_moments(loss.mu, -1.0)
    if isinstance(loss, LaplaceLoss):
        return (_from_expectation(_laplace_expect(loss.r, "P")), _from_expectation(_laplace_expect(loss.r, "Q")))
    if isinstance(loss, GaussianMixtureLoss) and loss.infinity_mass == 0.0:
        return _from_expectation(_mixture_expect(loss, "P")), _from_expectation(_mixture_expect(loss, "Q"))
    raise TypeError(f"no PLLR moments for {type(loss).__name__}")


# ------------------------------------------------------------------ sums
@dataclass(frozen=True)
class SumStats:
    """Statistics of a sum of ``n`` independent PLLRs (cumulants add; 004 Sec. 4.1)."""

    n: int
    kappa: tuple[float, float, float, float, float]  # total cumulants 1..5
    abs1_var: float  # sum_i E|X_i - mu_i| sigma_i^2
    abs3: float  # sum_i E|X_i - mu_i|^3
    mu4: float  # sum_i E(X_i - mu_i)^4

    @classmethod
    def from_entries(cls, entries: list[tuple[Moments, int]]) -> "SumStats":
        n = sum(c for _, c in entries)
        kappa = tuple(sum(c * m.cumulants[r] for m, c in entries) for r in range(5))
        return cls(n, kappa,  # type: ignore[arg-type]
                   sum(c * m.abs1 * m.mu2 for m, c in entries),
                   sum(c * m.abs3 for m, c in entries),
                   sum(c * m.mu4 for m, c in entries))


def _hermite(z: np.ndarray, k: int) -> np.ndarray:
    """Probabilists' Hermite polynomial He_k."""
    return special.eval_hermitenorm(k, z)


def edgeworth_correction(z: np.ndarray, gam: tuple[float, float, float], order: int) -> np.ndarray:
    """``P(S <= z) ~ Phi(z) - phi(z) * correction``; ``gam = (g3, g4, g5)`` standardized cumulants."""
    g3, g4, g5 = gam
    c = np.zeros_like(z)
    if order >= 1:
        c = c + g3 / 6.0 * _hermite(z, 2)
    if order >= 2:
        c = c + g4 / 24.0 * _hermite(z, 3) + g3 * g3 / 72.0 * _hermite(z, 5)
    if order >= 3:
        c = c + g5 / 120.0 * _hermite(z, 4) + g3 * g4 / 144.0 * _hermite(z, 6) + g3 ** 3 / 1296.0 * _hermite(z, 8)
    return c


def edgeworth_sf(stats: SumStats, x: np.ndarray, order: int, *, log_scale: float = 0.0) -> np.ndarray:
    """``exp(log_scale) * (1 - G_{order}(x))`` for the sum described by ``stats`` (may leave [0, 1]).

    ``log_scale`` lets the caller multiply by ``e^eps`` without overflow in the far tail.
    """
    k1, k2, k3, k4, k5 = stats.kappa
    B = math.sqrt(k2)
    z = (np.asarray(x, float) - k1) / B
    gam = (k3 / B ** 3, k4 / B ** 4, k5 / B ** 5)
    log_sf = special.log_ndtr(-z) + log_scale
    log_pdf = -0.5 * z * z - math.log(_SQRT2PI) + log_scale
    corr = edgeworth_correction(z, gam, order)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.exp(log_sf) + np.exp(log_pdf) * corr


# --------------------------------------------- Derumigny-Girard-Guyonvarch bound
_CHI1 = 0.09916191
_PSI = 1.0253  # |Psi(t)| <= 1.0253 / (2 pi |t|)


def _upper_gamma(a: float, x: float) -> float:
    return float(special.gamma(a) * special.gammaincc(a, x))


def _lower_gamma(a: float, x: float) -> float:
    return float(special.gamma(a) * special.gammainc(a, x))


def _dgg_bound(n: float, K3: float, K3t: float, K4: float, lam3: float, e: float) -> float:
    """DGG (2023) Thm A.2 eq. (11) + r_{1,n} eq. (15) for one value of their free parameter ``e``."""
    lam = abs(lam3)
    d13 = (1 - 3 * e) ** 2
    p1 = (144 + 48 * e + 4 * e * e) / 576 + (96 * math.sqrt(2 * e) + 32 * e + 16 * math.sqrt(2) * e ** 1.5) / 576
    e1 = math.exp(e * e * (1 / 6 + 2 * p1 / d13))
    main = 0.1995 * K3t / math.sqrt(n) + (0.031 * K3t ** 2 + 0.327 * K4 * (1 / 12 + 1 / (4 * d13))) / n
    skew = (0.054 * lam * K3t + 0.038 * e1 * lam3 ** 2) / n
    r = K4 / n
    g = special.gamma
    # integrated remainder bar R_n^{inid}(e), skewed case; larger of the published constants
    a1 = _PSI / (48 * d13 * math.pi) * r ** 1.5 * 2 ** 4 * g(5)
    a2 = _PSI / (24 ** 2 * 2 * d13 * math.pi) * r ** 2 * 2 ** 5 * g(6)
    a3 = _PSI / (12 * d13 * math.pi) * r ** 1.25 * 2 ** 3.5 * g(4.5)
    a4 = _PSI / (72 * d13 * math.pi) * r ** 1.5 * 2 ** 4 * g(5)
    a5 = _PSI / (144 * d13 * math.pi) * r ** 1.75 * 2 ** 4.5 * g(5.5)
    a6 = _PSI * e1 / (2 * math.pi) * r ** 2 * (1 / 24 + p1 / (2 * d13)) ** 2 * 2 ** 5 * g(6)
    a7 = _PSI * e1 / (6 * math.pi) * lam * K4 / n ** 1.5 * (1 / 24 + p1 / (2 * d13)) * 2 ** 5 * g(6)
    rbar = a1 + a2 + a3 + a4 + a5 + a6 + a7
    Delta = (1 - 4 * _CHI1 - math.sqrt(r)) / 2
    if Delta <= 0:
        return math.inf
    up = 2 * Delta * min(e * math.sqrt(n / K4), 2 * n / K3t ** 2)
    lo = 4 * Delta * n / K3t ** 2
    curly = 0.5 * Delta ** -1.5 * abs(_lower_gamma(1.5, lo) - _lower_gamma(1.5, up))
    low_end = min(math.sqrt(2 * e) * (n / K4) ** 0.25, 2 * math.sqrt(n) / K3t)
    r1 = ((14.1961 + 67.0415) * K3t ** 4 / (16 * math.pi ** 4 * n * n)
          + 4.3394 * lam * K3t ** 3 / (8 * math.pi ** 3 * n * n)
          + rbar
          + lam * (_upper_gamma(1.5, low_end) - _upper_gamma(1.5, 2 * math.sqrt(n) / K3t)) / math.sqrt(n)
          + _PSI * K3 * curly / (6 * math.pi * math.sqrt(n)))
    return main + skew + r1


def edgeworth_uniform_bound(stats: SumStats) -> float:
    """A bound on ``sup_x |F_{S_n}(x) - G_{n,1}(x)|`` (004 Lemma 4.3 via DGG 2023 Thm A.2), or ``inf``.

    Uses the average standardized moments of 004 Lemma 4.3: with ``Bbar^2 = B_n^2 / n``,
    ``K_p = n^-1 sum E|X_i - mu_i|^p / Bbar^p``, ``K3tilde = K3 + n^-1 sum E|X_i - mu_i| sigma_i^2 / Bbar^3``
    and ``lambda3 = n^-1 sum kappa_{3,i} / Bbar^3``. The free parameter of the bound is
    minimised over a small grid in (0, 1/3) (each value gives a valid bound).
    """
    n = float(stats.n)
    var = stats.kappa[1]
    if n < 1 or var <= 0:
        return math.inf
    bbar = math.sqrt(var / n)
    K3 = stats.abs3 / n / bbar ** 3
    K3t = K3 + stats.abs1_var / n / bbar ** 3
    K4 = stats.mu4 / n / bbar ** 4
    lam3 = stats.kappa[2] / n / bbar ** 3
    best = math.inf
    for e in (0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3):
        try:
            val = _dgg_bound(n, K3, K3t, K4, lam3, e)
        except (OverflowError, ZeroDivisionError, ValueError):
            continue
        if math.isfinite(val):
            best = min(best, val)
    return best

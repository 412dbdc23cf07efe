"""Numerics of the Edgeworth accountant (Wang et al. 2023): Edgeworth CDFs, finite-sample bounds, tails.

The per-step PLLR moments these start from are in ``_pllr_moments`` (re-exported here).

* ``edgeworth_sf``: the survival function of the k-th order Edgeworth
  expansion (Wang et al. 2023, Def. 4.1; Hall 1992 eq. 2.17) of a sum with given cumulants,
  k = 0 (CLT) ... 3.
* ``edgeworth_uniform_bound``: the explicit non-asymptotic bound of Derumigny,
  Girard, Guyonvarch (2023), Thm 2.1 in its inid, no-continuity, skewed form
  (their Thm A.2, eq. (11), remainder r_{1,n} of eq. (15)) on
  ``sup_x |P(S_n <= x) - G_{n,1}(x)|`` - the bound that Wang et al. 2023, Lemma 4.3 quotes.
  Where two published versions of a constant differ we take the larger (the
  integrated remainder ``bar R_n^inid``: our Gamma factors are those of the
  arXiv text, ten times those of the authors' R package BoundEdgeworth 0.1.x).
* ``edgeworth_iid_bounds``: the i.i.d. forms of the same theorem that Wang et al. 2023
  Remark 4.4 / App. H use for the O(1/m) rate: DGG Thm A.3 (i.i.d., moments only,
  eq. (17)) and Thm A.5 (i.i.d. with the characteristic-function condition, eq.
  (29) plus ``1.0253/pi * kappa^n * log(b_n/a_n)``), constants as in the authors'
  R package BoundEdgeworth. ``kappa`` (a supremum of the PLLR's characteristic
  function) is evaluated on a grid by quadrature, not proven, so these serve
  approximation-labelled intervals only.
* ``integrated_delta_bounds``: ``delta(eps) = E_P[(1 - e^(eps - S))_+] =
  int_eps^inf e^(eps - x) P_P(S > x) dx`` (the hockey-stick divergence written under
  ``P`` only) bounded by monotone Riemann sums from any pointwise bounds on
  ``P_P(S > x)``: the CDF error enters with weight ``int e^(eps-x) dx = 1`` instead
  of the ``e^eps`` of Wang et al. 2023, Def. 4.2.
* ``hoeffding_tail`` (Wang et al. 2023, Prop. 4.5: bounded PLLRs, Hoeffding's inequality) and
  ``thm1_tail`` (Wang et al. 2023, Thm 1 as printed, subsampled Gaussian).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import numpy as np
from scipy import special

from .._types import FloatArray
from ._pllr_moments import LAMBDAS as LAMBDAS
from ._pllr_moments import Moments as Moments
from ._pllr_moments import _is_swap as _is_swap
from ._pllr_moments import pllr_char_abs as pllr_char_abs
from ._pllr_moments import pllr_moments as pllr_moments
from ._pllr_moments import pllr_range as pllr_range
from ._pllr_moments import pllr_statistics as pllr_statistics
from ._pllr_moments import pllr_statistics_pair as pllr_statistics_pair

__all__ = [
    "Moments",
    "pllr_moments",
    "pllr_statistics",
    "pllr_statistics_pair",
    "pllr_range",
    "pllr_char_abs",
    "LAMBDAS",
    "edgeworth_sf",
    "edgeworth_uniform_bound",
    "edgeworth_iid_bounds",
    "standardized",
    "SumStats",
    "integrated_delta_bounds",
    "hoeffding_tail",
    "thm1_tail",
]

_SQRT2PI = math.sqrt(2.0 * math.pi)


# ------------------------------------------------------------------ sums
@dataclass(frozen=True)
class SumStats:
    """Statistics of a sum of ``n`` independent PLLRs (cumulants add; Wang et al. 2023, Sec. 4.1)."""

    n: int
    kappa: tuple[float, float, float, float, float]  # total cumulants 1..5
    abs1_var: float  # sum_i E|X_i - mu_i| sigma_i^2
    abs3: float  # sum_i E|X_i - mu_i|^3
    mu4: float  # sum_i E(X_i - mu_i)^4

    @classmethod
    def from_entries(cls, entries: list[tuple[Moments, int]]) -> SumStats:
        n = sum(c for _, c in entries)
        kappa = tuple(sum(c * m.cumulants[r] for m, c in entries) for r in range(5))
        return cls(
            n,
            kappa,  # type: ignore[arg-type]
            sum(c * m.abs1 * m.mu2 for m, c in entries),
            sum(c * m.abs3 for m, c in entries),
            sum(c * m.mu4 for m, c in entries),
        )


def _hermite(z: FloatArray, k: int) -> FloatArray:
    """Probabilists' Hermite polynomial He_k."""
    return cast("FloatArray", special.eval_hermitenorm(k, z))


def edgeworth_correction(z: FloatArray, gam: tuple[float, float, float], order: int) -> FloatArray:
    """``P(S <= z) ~ Phi(z) - phi(z) * correction``; ``gam = (g3, g4, g5)`` standardized cumulants."""
    g3, g4, g5 = gam
    c = np.zeros_like(z)
    if order >= 1:
        c = c + g3 / 6.0 * _hermite(z, 2)
    if order >= 2:
        c = c + g4 / 24.0 * _hermite(z, 3) + g3 * g3 / 72.0 * _hermite(z, 5)
    if order >= 3:
        c = c + g5 / 120.0 * _hermite(z, 4) + g3 * g4 / 144.0 * _hermite(z, 6) + g3**3 / 1296.0 * _hermite(z, 8)
    return c


def edgeworth_sf(stats: SumStats, x: FloatArray, order: int, *, log_scale: float | FloatArray = 0.0) -> FloatArray:
    """``exp(log_scale) * (1 - G_{order}(x))`` for the sum described by ``stats`` (may leave [0, 1]).

    ``log_scale`` lets the caller multiply by ``e^eps`` without overflow in the far tail.
    """
    k1, k2, k3, k4, k5 = stats.kappa
    B = math.sqrt(k2)
    z = (np.asarray(x, float) - k1) / B
    gam = (k3 / B**3, k4 / B**4, k5 / B**5)
    log_sf = special.log_ndtr(-z) + log_scale
    log_pdf = -0.5 * z * z - math.log(_SQRT2PI) + log_scale
    corr = edgeworth_correction(z, gam, order)
    with np.errstate(over="ignore", invalid="ignore"):
        return cast("FloatArray", np.exp(log_sf) + np.exp(log_pdf) * corr)


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
    p1 = (144 + 48 * e + 4 * e * e) / 576 + (96 * math.sqrt(2 * e) + 32 * e + 16 * math.sqrt(2) * e**1.5) / 576
    e1 = math.exp(e * e * (1 / 6 + 2 * p1 / d13))
    main = 0.1995 * K3t / math.sqrt(n) + (0.031 * K3t**2 + 0.327 * K4 * (1 / 12 + 1 / (4 * d13))) / n
    skew = (0.054 * lam * K3t + 0.038 * e1 * lam3**2) / n
    r = K4 / n
    g = special.gamma
    # integrated remainder bar R_n^{inid}(e), skewed case; larger of the published constants
    a1 = _PSI / (48 * d13 * math.pi) * r**1.5 * 2**4 * g(5)
    a2 = _PSI / (24**2 * 2 * d13 * math.pi) * r**2 * 2**5 * g(6)
    a3 = _PSI / (12 * d13 * math.pi) * r**1.25 * 2**3.5 * g(4.5)
    a4 = _PSI / (72 * d13 * math.pi) * r**1.5 * 2**4 * g(5)
    a5 = _PSI / (144 * d13 * math.pi) * r**1.75 * 2**4.5 * g(5.5)
    a6 = _PSI * e1 / (2 * math.pi) * r**2 * (1 / 24 + p1 / (2 * d13)) ** 2 * 2**5 * g(6)
    a7 = _PSI * e1 / (6 * math.pi) * lam * K4 / n**1.5 * (1 / 24 + p1 / (2 * d13)) * 2**5 * g(6)
    rbar = a1 + a2 + a3 + a4 + a5 + a6 + a7
    Delta = (1 - 4 * _CHI1 - math.sqrt(r)) / 2
    if Delta <= 0:
        return math.inf
    up = 2 * Delta * min(e * math.sqrt(n / K4), 2 * n / K3t**2)
    lo = 4 * Delta * n / K3t**2
    curly = 0.5 * Delta**-1.5 * abs(_lower_gamma(1.5, lo) - _lower_gamma(1.5, up))
    low_end = min(math.sqrt(2 * e) * (n / K4) ** 0.25, 2 * math.sqrt(n) / K3t)
    r1 = (
        (14.1961 + 67.0415) * K3t**4 / (16 * math.pi**4 * n * n)
        + 4.3394 * lam * K3t**3 / (8 * math.pi**3 * n * n)
        + rbar
        + lam * (_upper_gamma(1.5, low_end) - _upper_gamma(1.5, 2 * math.sqrt(n) / K3t)) / math.sqrt(n)
        + _PSI * K3 * curly / (6 * math.pi * math.sqrt(n))
    )
    return cast("float", main + skew + r1)


def edgeworth_uniform_bound(stats: SumStats) -> float:
    """A bound on ``sup_x |F_{S_n}(x) - G_{n,1}(x)|`` (Wang et al. 2023, Lemma 4.3 via DGG 2023 Thm A.2), or ``inf``.

    Uses the average standardized moments of Wang et al. 2023, Lemma 4.3: with ``Bbar^2 = B_n^2 / n``,
    ``K_p = n^-1 sum E|X_i - mu_i|^p / Bbar^p``, ``K3tilde = K3 + n^-1 sum E|X_i - mu_i| sigma_i^2 / Bbar^3``
    and ``lambda3 = n^-1 sum kappa_{3,i} / Bbar^3``. The free parameter of the bound is
    minimised over a small grid in (0, 1/3) (each value gives a valid bound).
    """
    n = float(stats.n)
    var = stats.kappa[1]
    if n < 1 or var <= 0:
        return math.inf
    bbar = math.sqrt(var / n)
    K3 = stats.abs3 / n / bbar**3
    K3t = K3 + stats.abs1_var / n / bbar**3
    K4 = stats.mu4 / n / bbar**4
    lam3 = stats.kappa[2] / n / bbar**3
    best = math.inf
    for e in (0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3):
        try:
            val = _dgg_bound(n, K3, K3t, K4, lam3, e)
        except (OverflowError, ZeroDivisionError, ValueError):
            continue
        if math.isfinite(val):
            best = min(best, val)
    return best


def standardized(stats: SumStats) -> tuple[float, float, float, float, float]:
    """``(n, K3, K3tilde, K4, lambda3)`` of Wang et al. 2023, Lemma 4.3 (DGG's average standardized moments)."""
    n = float(stats.n)
    bbar = math.sqrt(stats.kappa[1] / n)
    K3 = stats.abs3 / n / bbar**3
    return (n, K3, K3 + stats.abs1_var / n / bbar**3, stats.mu4 / n / bbar**4, stats.kappa[2] / n / bbar**3)


# ------------------------------------------------------ i.i.d. bounds (Wang et al. 2023, Remark 4.4, App. H)
_T1STAR = 0.6359658


def _e1(z: float) -> float:
    """``Gamma(0, x) = E_1(x)`` (upper incomplete gamma with ``a = 0``)."""
    return cast("float", special.exp1(z))


def _dgg_iid(n: float, K3: float, K3t: float, K4: float, lam3: float, e: float, kappa: float | None) -> float:
    """DGG (2023) Thm A.3 eq. (17) (``kappa is None``) or Thm A.5 eq. (29) + the smoothness term.

    Transcribed from the authors' R package BoundEdgeworth (``Bound_EE1_nocont_iid_skew``,
    ``Bound_EE1_cont_iid_skew_wo_int_fSn``, ``Smoothness_additional_term`` with ``regularity = kappa``).
    """
    lam = abs(lam3)
    d13 = (1 - 3 * e) ** 2
    g = special.gamma
    P2 = (
        48 * e * math.sqrt(K4 / n)
        + 4 * e * e * K4 / n
        + 96 * math.sqrt(2 * e) * lam / (K4**0.25 * n**0.25)
        + 32 * e * lam3**2 / math.sqrt(K4 * n)
        + 16 * math.sqrt(2) * K4**0.25 * lam * e**1.5 / n**0.75
    )
    e2n = math.exp(e * e * (1 / 6 + 1 / (2 * d13) + 2 * P2 / (576 * d13)))
    e3 = math.exp(e * e / 6 + e * e / (2 * (1 - 3 * e)) ** 2)
    denom = 2 * d13 * math.pi
    bracket = K4 / 12 + 1 / (4 * d13) + P2 / (576 * d13)
    rbar = (
        _PSI / denom * lam / (6 * n**1.5) * 2**0.5 * g(1.5)
        + _PSI / denom * K4 / (24 * n * n) * 2**3 * g(4)
        + _PSI / denom * lam3**2 / (36 * n * n) * 2**3 * g(4)
        + _PSI / denom * K4 * lam / (72 * n**2.5) * 2**3.5 * g(4.5)
        + _PSI / denom * K4**2 / (576 * n**3) * 2**4 * g(5)
        + _PSI / math.pi * e2n / (8 * n * n) * bracket * 2**4 * g(5)
        + _PSI / math.pi * e2n * lam / (12 * n**1.5) * bracket * 2**3.5 * g(4.5)
    )
    ug = _upper_gamma
    if kappa is None:  # Thm A.3
        low = min(math.sqrt(2 * e) * (n / K4) ** 0.25, 2 * math.sqrt(n) / K3t)
        main = 0.1995 * K3t / math.sqrt(n) + (0.031 * K3t**2 + 0.327 * K4 * (1 / 12 + 1 / (4 * d13))) / n
        skew = (0.054 * lam * K3t + 0.037 * e3 * lam3**2) / n
        r1 = (
            (14.1961 + 67.0415) * K3t**4 / (16 * math.pi**4 * n * n)
            + 4.3394 * lam * K3t**3 / (8 * math.pi**3 * n * n)
            + rbar
            + 1.306 * (e2n - e3) * lam3**2 / (36 * n)
            + lam * (ug(1.5, low) - ug(1.5, 2 * math.sqrt(n) / K3t)) / math.sqrt(n)
            + _PSI * 2**2.5 * K3 / (3 * math.pi * math.sqrt(n)) * (ug(1.5, low * low / 8) - ug(1.5, n / (2 * K3t**2)))
        )
        return cast("float", main + skew + r1)
    # Thm A.5
    main = 0.327 * K4 * (1 / 12 + 1 / (4 * d13)) / n
    skew = 0.037 * e3 * lam3**2 / n
    up1 = 16 * math.pi**3 * n * n / K3t**4
    lo1 = min(math.sqrt(2 * e) * (n / K4) ** 0.25, up1)
    up2 = 2**5 * math.pi**6 * n**4 / K3t**8
    lo2 = min(e * math.sqrt(n / (16 * K4)), up2)
    T = 16 * math.pi**4 * n * n / K3t**4
    short = 1 - 4 * math.pi * _CHI1 * _T1STAR
    J4 = (
        _PSI
        / math.pi
        * abs(
            _e1(min(T**0.5, T * T) * short / (2 * math.pi**2))
            - _e1(min(_T1STAR**2 * T**0.5, T * T / math.pi**2) * short / 2)
        )
    )
    J5 = _PSI / math.pi * abs(_e1(min(T**0.5, T * T) / (2 * math.pi**2)) - _e1(T * T / (2 * math.pi**2)))
    r2 = (
        1.2533 * K3t**4 / (16 * math.pi**4 * n * n)
        + 0.3334 * K3t**4 * lam / (16 * math.pi**4 * n**2.5)
        + 14.1961 * K3t**16 / ((2 * math.pi) ** 16 * n**8)
        + 4.3394 * K3t**12 * lam / ((2 * math.pi) ** 12 * n**6.5)
        + lam * (ug(1.5, lo1) - ug(1.5, up1)) / math.sqrt(n)
        + rbar
        + _PSI * 2**2.5 * K3 / (3 * math.pi * math.sqrt(n)) * (ug(1.5, lo2) - ug(1.5, up2))
        + 1.306 * (e2n - e3) * lam3**2 / (36 * n)
        + J4
        + J5
    )
    a_n = min(2 * _T1STAR * math.pi * math.sqrt(n) / K3t, 16 * math.pi**3 * n * n / K3t**4)
    b_n = 16 * math.pi**4 * n * n / K3t**4
    smooth = _PSI / math.pi * kappa**n * math.log(max(b_n / a_n, 1.0))
    return cast("float", main + skew + r2 + smooth)


def kappa_window(stats: SumStats) -> tuple[float, float]:
    """The range of standardized frequencies ``t`` over which DGG Thm A.5 needs ``sup |f_{X/sigma}(t)|``:
    ``[a_n, b_n] / sqrt(n)`` with ``a_n = min(2 t1* pi sqrt(n) / K3tilde, 16 pi^3 n^2 / K3tilde^4)``,
    ``b_n = 16 pi^4 n^2 / K3tilde^4``."""
    n, _, K3t, _, _ = standardized(stats)
    a_n = min(2 * _T1STAR * math.pi * math.sqrt(n) / K3t, 16 * math.pi**3 * n * n / K3t**4)
    return a_n / math.sqrt(n), 16 * math.pi**4 * n * n / K3t**4 / math.sqrt(n)


def edgeworth_iid_bounds(stats: SumStats, kappa: float | None = None) -> dict[str, float]:
    """The i.i.d. bounds on ``sup_x |F_{S_n}(x) - G_{n,1}(x)|`` (Wang et al. 2023, Remark 4.4 / App. H via DGG Thm A.3, A.5).

    ``"A3"``: moments only, O(1/sqrt(n)) with a remainder far smaller than the inid one;
    ``"A5"`` (only when ``kappa`` is given): the O(1/n) bound under the condition
    ``sup_{t in kappa_window} |E e^(i t X/sigma)| <= kappa``. Each minimised over DGG's free
    parameter on a grid in (0, 1/3); ``inf`` where the theorem's conditions fail.
    """
    n, K3, K3t, K4, lam3 = standardized(stats)
    out = {}
    for name, kap in (("A3", None), ("A5", kappa)):
        if name == "A5" and kappa is None:
            continue
        best = math.inf
        for e in (0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3):
            try:
                v = _dgg_iid(n, K3, K3t, K4, lam3, e, kap)
            except (OverflowError, ZeroDivisionError, ValueError):
                continue
            if math.isfinite(v):
                best = min(best, v)
        out[name] = best
    return out


# ------------------------------------------------------------------ tails
def hoeffding_tail(mean_sum: float, range_sq_sum: float, x: FloatArray) -> FloatArray:
    """``P(S > x) <= exp(-2 (x - E S)^2 / sum_i (b_i - a_i)^2)`` for ``x > E S`` (Hoeffding; Wang et al. 2023, Prop. 4.5,
    where ``x - E S = eps + m eta`` and ``tau`` is the range of one PLLR); ``1`` below the mean."""
    x = np.asarray(x, float)
    t = np.maximum(x - mean_sum, 0.0)
    if range_sq_sum <= 0:
        return np.where(t > 0, 0.0, 1.0)
    return cast("FloatArray", np.exp(-2.0 * t * t / range_sq_sum))


def thm1_tail(p: float, mu: float, m: int, eps: FloatArray, eta: float, a_grid: FloatArray | None = None) -> FloatArray:
    """Wang et al. 2023, Thm 1 as printed: ``P(sum X_i >= eps) <= 2 exp(-(eps + m eta)^2 / (8 m tau^2))`` for the PLLRs
    ``X_i = log(1 - p + p e^(mu xi - mu^2/2))`` of the Poisson-subsampled Gaussian, with
    ``tau^2 = max{(log(1 - p + p e^(mu a - mu^2/2)) + mu (a+ - a) - log(1 - p))^2 / 4, mu^2,
    (a+ - a)^2 mu^2 / (2 |log(Phi(a+) - Phi(a))|)}``, ``a+ = phi(a) / (1 - Phi(a))``, minimised over ``a``.

    An approximation, not a bound: the theorem leaves ``eta(a)`` implicit (we take ``eta = -E X_i``, the value
    of Prop. 4.5) and its proof (App. G) is not part of the specification; the last term's denominator is
    printed as ``2 log(...)`` (negative), read here as its absolute value.
    """
    eps = np.asarray(eps, float)
    a_grid = np.linspace(0.05, 6.0, 120) if a_grid is None else a_grid
    ap = np.exp(-0.5 * a_grid**2 - special.log_ndtr(-a_grid)) / _SQRT2PI  # phi(a) / (1 - Phi(a))
    t1 = (
        np.logaddexp(math.log1p(-p), math.log(p) + mu * a_grid - mu * mu / 2) + mu * (ap - a_grid) - math.log1p(-p)
    ) ** 2 / 4
    t3 = (ap - a_grid) ** 2 * mu * mu / (2 * np.abs(np.log(special.ndtr(ap) - special.ndtr(a_grid))))
    tau2 = float(np.min(np.maximum(np.maximum(t1, mu * mu), t3)))
    t = np.maximum(eps + m * eta, 0.0)
    return cast("FloatArray", np.minimum(2 * np.exp(-t * t / (8 * m * tau2)), 1.0))


# ------------------------------------------------------ delta from P only (certified Riemann sums)
def riemann_offsets(scale: float) -> FloatArray:
    """Offsets ``x - eps >= 0`` of the Riemann grid: steps of ``min(0.005, scale / 40)`` to 12 (at most 6000),
    then geometric to 60 (beyond, ``e^(-60)`` times the tail bound is added as a remainder). The two sums differ
    by at most ``(1 - e^(-step)) P(S > eps)``."""
    step = max(min(0.005, scale / 40.0), 12.0 / 6000)
    return np.concatenate([np.arange(0.0, 12.0, step), np.geomspace(12.0, 60.0, 60)])


def integrated_delta_bounds(
    eps: FloatArray,
    offsets: FloatArray,
    sf_upper: Callable[[FloatArray], FloatArray],
    sf_lower: Callable[[FloatArray], FloatArray],
) -> tuple[FloatArray, FloatArray]:
    """Bounds on ``delta(eps) = int_eps^inf e^(eps - x) P_P(S > x) dx`` (``S`` the composed loss under ``P``).

    ``sf_upper(x)`` / ``sf_lower(x)`` are pointwise upper / lower bounds on ``P_P(S > x)`` (arrays of any
    shape). ``P_P(S > x)`` is non-increasing, so on each cell ``[x_j, x_{j+1}]`` the integral lies between
    ``sf(x_{j+1}) w_j`` and ``sf(x_j) w_j`` with ``w_j = e^(-o_j) - e^(-o_{j+1})``; beyond the last point
    ``sf(x_N) e^(-o_N)`` bounds the rest. Results are rounded outward by ``1e-12`` relative.
    """
    eps = np.asarray(eps, float)
    o = offsets
    w = np.exp(-o[:-1]) * -np.expm1(-(o[1:] - o[:-1]))
    x = eps[..., None] + o
    U = np.clip(sf_upper(x), 0.0, 1.0)
    L = np.clip(sf_lower(x), 0.0, 1.0)
    up = U[..., :-1] @ w + U[..., -1] * math.exp(-o[-1])
    lo = L[..., 1:] @ w
    return lo * (1 - 1e-12), np.minimum(up * (1 + 1e-12) + 1e-300, 1.0)

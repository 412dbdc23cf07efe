"""Numerics of the Edgeworth accountant (004): PLLR cumulants, Edgeworth CDFs, finite-sample bounds.

* ``pllr_moments`` / ``pllr_statistics``: mean, central moments 2-5 and absolute
  central moments of the privacy loss ``L = log(p/q)`` under ``P`` and under
  ``Q`` for one dominating pair, and the moment generating function
  ``E_P[e^(lambda L)]`` for the Chernoff tails. In 004's notation (Def. 3.1,
  with the roles of P and Q swapped so that the loss increases with the
  privacy leak), ``L`` under ``Q`` is the PLLR ``X_i`` and ``L`` under ``P`` is
  ``Y_i``. Closed form for the Gaussian; otherwise one composite 16-point
  Gauss-Legendre rule over the output space per loss, shared by both measures,
  all moments and all ``lambda`` (the loss and the densities are evaluated
  once, about 1300 points): Gaussian mixtures (the subsampled Gaussian, 004
  Sec. 3), the Laplace mechanism (Sec. 4.4) and the Poisson-subsampled Laplace
  mechanism (Prop. 4.5; two atoms and a smooth part on ``(0, 1)``). A few
  milliseconds per mechanism, so m distinct mechanisms cost O(m) (004 Sec. 4).
* ``edgeworth_sf``: the survival function of the k-th order Edgeworth
  expansion (004 Def. 4.1; Hall 1992 eq. 2.17) of a sum with given cumulants,
  k = 0 (CLT) ... 3.
* ``edgeworth_uniform_bound``: the explicit non-asymptotic bound of Derumigny,
  Girard, Guyonvarch (2023), Thm 2.1 in its inid, no-continuity, skewed form
  (their Thm A.2, eq. (11), remainder r_{1,n} of eq. (15)) on
  ``sup_x |P(S_n <= x) - G_{n,1}(x)|`` - the bound that 004 Lemma 4.3 quotes.
  Where two published versions of a constant differ we take the larger (the
  integrated remainder ``bar R_n^inid``: our Gamma factors are those of the
  arXiv text, ten times those of the authors' R package BoundEdgeworth 0.1.x).
* ``edgeworth_iid_bounds``: the i.i.d. forms of the same theorem that 004
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
  of the ``e^eps`` of 004 Def. 4.2.
* ``hoeffding_tail`` (004 Prop. 4.5: bounded PLLRs, Hoeffding's inequality) and
  ``thm1_tail`` (004 Thm 1 as printed, subsampled Gaussian).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special

from ..errors import UnsupportedMechanismError
from ..losses import GaussianLoss, GaussianMixtureLoss, LaplaceLoss, PoissonLaplaceLoss, PrivacyLoss

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
        return (self.mean, self.mu2, self.mu3, self.mu4 - 3 * self.mu2**2, self.mu5 - 10 * self.mu3 * self.mu2)


# ------------------------------------------------------------------ one quadrature rule per loss
#: Chernoff parameters lambda (= Renyi order - 1) at which the PLLR moment generating function is tabulated
LAMBDAS = np.geomspace(1e-2, 512.0, 48)
_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(16)


def _panel_rule(breaks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Composite 16-point Gauss-Legendre nodes and weights on the panels between ``breaks``."""
    a, b = breaks[:-1, None], breaks[1:, None]
    half = (b - a) / 2.0
    return (a + half * (_GL_NODES[None, :] + 1.0)).ravel(), (half * _GL_WEIGHTS[None, :]).ravel()


@dataclass(frozen=True, eq=False)
class _Rule:
    """``E_P[g(L)] ~ sum wp g(L(x)) + sum_atoms p g(v)`` and the same under ``Q`` with ``wq``.

    ``pieces(x) -> (L, p, q)`` evaluates the loss and both densities at any outputs (used to split the
    panel that holds a kink of ``|L - c|``); ``x_at(s)`` is the output where the loss equals ``s``
    (``None`` outside the continuous part); ``truncated``: whether the node range cuts off the tails
    (Gaussian mixtures: +-40 sigma around the components), so that moment generating functions at
    large ``lambda`` must be checked for mass at the ends.
    """

    breaks: np.ndarray
    x: np.ndarray
    w: np.ndarray
    L: np.ndarray
    p: np.ndarray
    q: np.ndarray
    atoms: tuple[tuple[float, float, float], ...]
    pieces: object
    x_at: object
    truncated: bool

    def split_at(self, s: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(L, weights under P, weights under Q)`` with a panel break where ``L = s``."""
        x0 = self.x_at(s)
        if x0 is None or not (self.breaks[0] < x0 < self.breaks[-1]):
            return self.L, self.w * self.p, self.w * self.q
        i = int(np.searchsorted(self.breaks, x0)) - 1  # panel [breaks[i], breaks[i+1]] holds x0
        if x0 in (self.breaks[i], self.breaks[i + 1]):
            return self.L, self.w * self.p, self.w * self.q
        xs, ws = _panel_rule(np.array([self.breaks[i], x0, self.breaks[i + 1]]))
        Ls, ps, qs = self.pieces(xs)
        n = _GL_NODES.size
        keep = np.ones(self.x.size, bool)
        keep[i * n : (i + 1) * n] = False
        L = np.concatenate([self.L[keep], Ls])
        return L, np.concatenate([(self.w * self.p)[keep], ws * ps]), np.concatenate([(self.w * self.q)[keep], ws * qs])

    def moments(self, under: str) -> Moments:
        """Mean, central moments 2-5 and absolute central moments 1, 3 of ``L`` under ``P`` or ``Q``."""
        k = 1 if under == "P" else 2
        wts = self.w * (self.p if under == "P" else self.q)
        av = np.array([a[0] for a in self.atoms], float)
        aw = np.array([a[k] for a in self.atoms], float)
        mean = float(np.dot(wts, self.L) + np.dot(aw, av))
        L, wp, wq = self.split_at(mean)
        w2 = wp if under == "P" else wq
        d, da = L - mean, av - mean
        ad, d2 = np.abs(d), d * d
        d3 = d2 * d
        vals = [float(np.dot(v, w2)) for v in (d2, d3, d2 * d2, d3 * d2, ad, ad * d2)]
        if av.size:
            vals = [
                v + float(np.dot(a, aw))
                for v, a in zip(vals, (da**2, da**3, da**4, da**5, np.abs(da), np.abs(da) ** 3))
            ]
        return Moments(mean, *vals)

    def log_mgf(self, lambdas: np.ndarray) -> np.ndarray:
        """``log E_P[e^(lambda L)]`` at each ``lambda``; ``inf`` where the node range may miss mass
        (the Chernoff bounds then skip that ``lambda``: any subset of them is valid)."""
        with np.errstate(divide="ignore"):
            lw = np.log(self.w * self.p)
            la = np.log(np.array([a[1] for a in self.atoms], float))
        av = np.array([a[0] for a in self.atoms], float)
        n = _GL_NODES.size
        t = lw[None, :] + lambdas[:, None] * self.L[None, :]  # (lambdas, nodes)
        ta = la[None, :] + lambdas[:, None] * av[None, :]
        m = np.max(t, axis=1)
        if ta.size:
            m = np.maximum(m, np.max(ta, axis=1))
        out = m + np.log(np.exp(t - m[:, None]).sum(axis=1) + np.exp(ta - m[:, None]).sum(axis=1))
        if self.truncated:  # where the integrand is not negligible at the ends, the rule may miss mass
            edge = np.maximum(np.max(t[:, :n], axis=1), np.max(t[:, -n:], axis=1))
            out = np.where(edge > out + math.log(1e-17), np.inf, out)
        return out


def _mixture_rule(loss: GaussianMixtureLoss) -> _Rule:
    """Nodes over ``[min mean - 40 s, max mean + 40 s]``, panels of width ``s`` (``s^2`` if ``s < 1``, where the
    loss bends on the scale ``s^2``); the integrands are analytic on each panel, so 16 points per panel
    integrate them to rounding (the tests check against mpmath)."""
    s = loss.sigma
    a = np.asarray(loss.p_means, float)
    w = np.asarray(loss.p_weights, float)
    b = np.asarray(loss.q_means, float)
    v = np.asarray(loss.q_weights, float)
    lo, hi = min(a.min(), b.min()) - 40.0 * s, max(a.max(), b.max()) + 40.0 * s
    width = s * min(1.0, s)
    breaks = np.linspace(lo, hi, int(math.ceil((hi - lo) / width)) + 1)

    def pieces(x):
        z = (x[:, None] - a[None, :]) / s
        y = (x[:, None] - b[None, :]) / s
        p = np.exp(-0.5 * z * z) @ w / (s * _SQRT2PI)
        q = np.exp(-0.5 * y * y) @ v / (s * _SQRT2PI)
        return loss.loss(x), p, q

    sup = loss.support()

    def x_at(val):
        if not (sup[0] < val < sup[1]):
            return None
        return float(loss.inverse(np.array([val]))[0])

    x, wq = _panel_rule(breaks)
    L, p, q = pieces(x)
    return _Rule(breaks, x, wq, L, p, q, (), pieces, x_at, True)


def _laplace_rule(q: float, b: float, direction: str) -> _Rule:
    """Poisson-subsampled Laplace (004 Prop. 4.5; ``q = 1``: the Laplace mechanism, 004 Sec. 4.4).

    remove: ``P = q Lap(1, b) + (1 - q) Lap(0, b)``, ``Q = Lap(0, b)``, ``L = log(1 - q + q e^g)`` with
    ``g(x) = (|x| - |x - 1|)/b``; constant outside ``(0, 1)`` (two atoms), smooth inside.
    add: ``P = Lap(0, b)``, ``Q`` the mixture, ``L = -log(1 - q + q e^g)``.
    """
    e1 = math.exp(-1.0 / b)
    mix_lo, mix_hi = q * 0.5 * e1 + (1 - q) * 0.5, q * 0.5 + (1 - q) * 0.5 * e1  # mixture mass x<=0, x>=1
    lap_lo, lap_hi = 0.5, 0.5 * e1  # Lap(0, b) mass x<=0, x>=1
    sign = 1.0 if direction == "remove" else -1.0

    def ell(g):
        if q >= 1.0:
            return g
        return np.logaddexp(math.log1p(-q), math.log(q) + g)

    def pieces(x):
        g = (2.0 * x - 1.0) / b  # on (0, 1)
        mix = (q * np.exp(-np.abs(x - 1.0) / b) + (1 - q) * np.exp(-np.abs(x) / b)) / (2 * b)
        lap = np.exp(-np.abs(x) / b) / (2 * b)
        p, qq = (mix, lap) if direction == "remove" else (lap, mix)
        return sign * ell(g), p, qq

    v_lo, v_hi = float(sign * ell(np.array(-1.0 / b))), float(sign * ell(np.array(1.0 / b)))
    if direction == "remove":
        atoms = ((v_lo, mix_lo, lap_lo), (v_hi, mix_hi, lap_hi))
    else:
        atoms = ((v_lo, lap_lo, mix_lo), (v_hi, lap_hi, mix_hi))

    def x_at(val):
        e = sign * val
        inner = math.expm1(e) + q if e < 700 else math.inf
        if not (inner > 0) or math.isinf(inner):
            return None
        g = math.log(inner) - math.log(q)
        x = (b * g + 1.0) / 2.0
        return x if 0.0 < x < 1.0 else None

    breaks = np.linspace(0.0, 1.0, 17)
    x, w = _panel_rule(breaks)
    L, p, qq = pieces(x)
    return _Rule(breaks, x, w, L, p, qq, atoms, pieces, x_at, False)


def _rule(loss: PrivacyLoss) -> _Rule:
    if isinstance(loss, LaplaceLoss):
        return _laplace_rule(1.0, 1.0 / loss.r, "remove")
    if isinstance(loss, PoissonLaplaceLoss):
        return _laplace_rule(loss.q, loss.b, loss.direction)
    if isinstance(loss, GaussianMixtureLoss) and loss.infinity_mass == 0.0:
        return _mixture_rule(loss)
    raise UnsupportedMechanismError(f"the Edgeworth accountant has no PLLR moments for {type(loss).__name__}")


def _gaussian_moments(mu: float, sign: float) -> Moments:
    s = mu
    return Moments(
        sign * mu * mu / 2.0, s**2, 0.0, 3 * s**4, 0.0, s * math.sqrt(2 / math.pi), 2 * math.sqrt(2 / math.pi) * s**3
    )


def pllr_moments(loss: PrivacyLoss) -> tuple[Moments, Moments]:
    """Moments of the privacy loss under ``P`` and under ``Q`` (004 Sec. 3-4).

    Gaussian: closed form. Gaussian mixtures (subsampled Gaussians, 004 Sec. 3), the Laplace mechanism
    (Sec. 4.4) and the Poisson-subsampled Laplace mechanism (Prop. 4.5): one composite Gauss-Legendre
    rule over the outputs, shared by both measures and all moments (a panel break at the mean, where
    ``|L - mean|`` has a kink), plus the atoms. Raises ``UnsupportedMechanismError`` otherwise.
    """
    if isinstance(loss, GaussianLoss):
        return _gaussian_moments(loss.mu, +1.0), _gaussian_moments(loss.mu, -1.0)
    r = _rule(loss)
    return r.moments("P"), r.moments("Q")


def pllr_statistics(loss: PrivacyLoss, lambdas: np.ndarray = LAMBDAS) -> tuple[Moments, Moments, np.ndarray]:
    """``(moments under P, moments under Q, log E_P[e^(lambda L)] at lambdas)`` from one quadrature rule.

    The last is the Renyi divergence ``lambda D_(lambda+1)(P||Q)`` that the Chernoff tails use
    (``inf`` at any ``lambda`` the rule cannot resolve).
    """
    if isinstance(loss, GaussianLoss):
        mu = loss.mu
        return (_gaussian_moments(mu, +1.0), _gaussian_moments(mu, -1.0), lambdas * (lambdas + 1.0) * mu * mu / 2.0)
    r = _rule(loss)
    return r.moments("P"), r.moments("Q"), r.log_mgf(lambdas)


def _is_swap(a: PrivacyLoss, b: PrivacyLoss) -> bool:
    """Whether ``b`` is the pair ``(Q, P)`` of ``a = (P, Q)``, possibly reflected ``x -> -x`` (which leaves the
    loss' distributions unchanged): Poisson-subsampled Gaussians, add vs remove."""
    if not (
        isinstance(a, GaussianMixtureLoss)
        and isinstance(b, GaussianMixtureLoss)
        and a.sigma == b.sigma
        and a.infinity_mass == 0.0
        and b.infinity_mass == 0.0
    ):
        return False

    def comps(means, weights, sign):
        return sorted((sign * float(m), float(w)) for m, w in zip(means, weights))

    return any(
        comps(a.p_means, a.p_weights, 1) == comps(b.q_means, b.q_weights, sg)
        and comps(a.q_means, a.q_weights, 1) == comps(b.p_means, b.p_weights, sg)
        for sg in (1.0, -1.0)
    )


def _mirror(m: Moments) -> Moments:
    """Moments of ``-L`` from those of ``L``."""
    return Moments(-m.mean, m.mu2, -m.mu3, m.mu4, -m.mu5, m.abs1, m.abs3)


def pllr_statistics_pair(remove: PrivacyLoss, add: PrivacyLoss, lambdas: np.ndarray = LAMBDAS):
    """``pllr_statistics`` of both directions. When the add pair is the remove pair swapped (``L_add = -L_remove``,
    ``P_add = Q_remove``: Poisson-subsampled Gaussians), one rule serves both: the add moments are the
    mirrored remove ones and ``log E_{P_add}[e^(lambda L_add)] = log E_{P_remove}[e^(-(lambda + 1) L_remove)]``."""
    if add == remove:
        st = pllr_statistics(remove, lambdas)
        return st, st
    if not _is_swap(remove, add):
        return pllr_statistics(remove, lambdas), pllr_statistics(add, lambdas)
    r = _rule(remove)
    P, Q = r.moments("P"), r.moments("Q")
    return (P, Q, r.log_mgf(lambdas)), (_mirror(Q), _mirror(P), r.log_mgf(-(lambdas + 1.0)))


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
        c = c + g5 / 120.0 * _hermite(z, 4) + g3 * g4 / 144.0 * _hermite(z, 6) + g3**3 / 1296.0 * _hermite(z, 8)
    return c


def edgeworth_sf(stats: SumStats, x: np.ndarray, order: int, *, log_scale: float = 0.0) -> np.ndarray:
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
    """``(n, K3, K3tilde, K4, lambda3)`` of 004 Lemma 4.3 (DGG's average standardized moments)."""
    n = float(stats.n)
    bbar = math.sqrt(stats.kappa[1] / n)
    K3 = stats.abs3 / n / bbar**3
    return (n, K3, K3 + stats.abs1_var / n / bbar**3, stats.mu4 / n / bbar**4, stats.kappa[2] / n / bbar**3)


# ------------------------------------------------------ i.i.d. bounds (004 Remark 4.4, App. H)
_T1STAR = 0.6359658


def _e1(z: np.ndarray | float) -> np.ndarray | float:
    """``Gamma(0, x) = E_1(x)`` (upper incomplete gamma with ``a = 0``)."""
    return special.exp1(z)


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
        return main + skew + r1
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
    return main + skew + r2 + smooth


def kappa_window(stats: SumStats) -> tuple[float, float]:
    """The range of standardized frequencies ``t`` over which DGG Thm A.5 needs ``sup |f_{X/sigma}(t)|``:
    ``[a_n, b_n] / sqrt(n)`` with ``a_n = min(2 t1* pi sqrt(n) / K3tilde, 16 pi^3 n^2 / K3tilde^4)``,
    ``b_n = 16 pi^4 n^2 / K3tilde^4``."""
    n, _, K3t, _, _ = standardized(stats)
    a_n = min(2 * _T1STAR * math.pi * math.sqrt(n) / K3t, 16 * math.pi**3 * n * n / K3t**4)
    return a_n / math.sqrt(n), 16 * math.pi**4 * n * n / K3t**4 / math.sqrt(n)


def edgeworth_iid_bounds(stats: SumStats, kappa: float | None = None) -> dict[str, float]:
    """The i.i.d. bounds on ``sup_x |F_{S_n}(x) - G_{n,1}(x)|`` (004 Remark 4.4 / App. H via DGG Thm A.3, A.5).

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


def pllr_char_abs(loss: PrivacyLoss, freqs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``|E e^(i s L)|`` under ``P`` and under ``Q`` at the frequencies ``s`` (by the shared quadrature rule).

    Reliable while ``s`` times the loss' change across one panel stays below about ten radians; used only
    for the approximation-labelled constant ``kappa`` of DGG Thm A.5.
    """
    s = np.asarray(freqs, float)
    if isinstance(loss, GaussianLoss):  # L ~ N(+-mu^2/2, mu^2) under P / Q
        a = np.exp(-0.5 * (s * loss.mu) ** 2)
        return a, a
    r = _rule(loss)
    av = np.array([a[0] for a in r.atoms], float)
    out = []
    for k, dens in ((1, r.p), (2, r.q)):
        aw = np.array([a[k] for a in r.atoms], float)
        ph = s[:, None] * r.L[None, :]
        c = (np.cos(ph) @ (r.w * dens)) + (np.cos(s[:, None] * av[None, :]) @ aw if av.size else 0.0)
        d = (np.sin(ph) @ (r.w * dens)) + (np.sin(s[:, None] * av[None, :]) @ aw if av.size else 0.0)
        out.append(np.hypot(c, d))
    return out[0], out[1]


def pllr_range(loss: PrivacyLoss) -> tuple[float, float] | None:
    """``(min L, max L)`` of a bounded privacy loss (Laplace, subsampled Laplace: 004 Prop. 4.5), else ``None``."""
    if isinstance(loss, (LaplaceLoss, PoissonLaplaceLoss)):
        vals = [a[0] for a in _rule(loss).atoms]
        return min(vals), max(vals)
    return None


# ------------------------------------------------------------------ tails
def hoeffding_tail(mean_sum: float, range_sq_sum: float, x: np.ndarray) -> np.ndarray:
    """``P(S > x) <= exp(-2 (x - E S)^2 / sum_i (b_i - a_i)^2)`` for ``x > E S`` (Hoeffding; 004 Prop. 4.5,
    where ``x - E S = eps + m eta`` and ``tau`` is the range of one PLLR); ``1`` below the mean."""
    x = np.asarray(x, float)
    t = np.maximum(x - mean_sum, 0.0)
    if range_sq_sum <= 0:
        return np.where(t > 0, 0.0, 1.0)
    return np.exp(-2.0 * t * t / range_sq_sum)


def thm1_tail(p: float, mu: float, m: int, eps: np.ndarray, eta: float, a_grid: np.ndarray | None = None) -> np.ndarray:
    """004 Thm 1 as printed: ``P(sum X_i >= eps) <= 2 exp(-(eps + m eta)^2 / (8 m tau^2))`` for the PLLRs
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
    return np.minimum(2 * np.exp(-t * t / (8 * m * tau2)), 1.0)


# ------------------------------------------------------ delta from P only (certified Riemann sums)
def riemann_offsets(scale: float) -> np.ndarray:
    """Offsets ``x - eps >= 0`` of the Riemann grid: steps of ``min(0.005, scale / 40)`` to 12 (at most 6000),
    then geometric to 60 (beyond, ``e^(-60)`` times the tail bound is added as a remainder). The two sums differ
    by at most ``(1 - e^(-step)) P(S > eps)``."""
    step = max(min(0.005, scale / 40.0), 12.0 / 6000)
    return np.concatenate([np.arange(0.0, 12.0, step), np.geomspace(12.0, 60.0, 60)])


def integrated_delta_bounds(eps: np.ndarray, offsets: np.ndarray, sf_upper, sf_lower) -> tuple[np.ndarray, np.ndarray]:
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

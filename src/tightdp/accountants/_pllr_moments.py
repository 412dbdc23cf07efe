"""Moments of one privacy loss (PLLR) for the Edgeworth accountant (Wang et al. 2023, Sec. 3-4).

``pllr_moments`` / ``pllr_statistics``: mean, central moments 2-5 and absolute
central moments of the privacy loss ``L = log(p/q)`` under ``P`` and under
``Q`` for one dominating pair, and the moment generating function
``E_P[e^(lambda L)]`` for the Chernoff tails. In Wang et al. 2023's notation (Def. 3.1,
with the roles of P and Q swapped so that the loss increases with the
privacy leak), ``L`` under ``Q`` is the PLLR ``X_i`` and ``L`` under ``P`` is
``Y_i``. Closed form for the Gaussian; otherwise one composite 16-point
Gauss-Legendre rule over the output space per loss, shared by both measures,
all moments and all ``lambda`` (the loss and the densities are evaluated
once, about 1300 points): Gaussian mixtures (the subsampled Gaussian, Wang et al. 2023
Sec. 3), the Laplace mechanism (Sec. 4.4) and the Poisson-subsampled Laplace
mechanism (Prop. 4.5; two atoms and a smooth part on ``(0, 1)``). A few
milliseconds per mechanism, so m distinct mechanisms cost O(m) (Wang et al. 2023, Sec. 4).

``pllr_statistics_pair`` serves both directions of a swapped pair from one rule; ``pllr_char_abs`` and
``pllr_range`` read the characteristic function and the range of a loss off the same rule.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from .._types import FloatArray
from ..errors import UnsupportedMechanismError
from ..losses import GaussianLoss, GaussianMixtureLoss, LaplaceLoss, PoissonLaplaceLoss, PrivacyLoss

__all__ = [
    "LAMBDAS",
    "Moments",
    "pllr_char_abs",
    "pllr_moments",
    "pllr_range",
    "pllr_statistics",
    "pllr_statistics_pair",
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


def _panel_rule(breaks: FloatArray) -> tuple[FloatArray, FloatArray]:
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

    breaks: FloatArray
    x: FloatArray
    w: FloatArray
    L: FloatArray
    p: FloatArray
    q: FloatArray
    atoms: tuple[tuple[float, float, float], ...]
    pieces: Callable[[FloatArray], tuple[FloatArray, FloatArray, FloatArray]]
    x_at: Callable[[float], float | None]
    truncated: bool

    def split_at(self, s: float) -> tuple[FloatArray, FloatArray, FloatArray]:
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

    def log_mgf(self, lambdas: FloatArray) -> FloatArray:
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
        return cast("FloatArray", out)


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

    def pieces(x: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
        z = (x[:, None] - a[None, :]) / s
        y = (x[:, None] - b[None, :]) / s
        p = np.exp(-0.5 * z * z) @ w / (s * _SQRT2PI)
        q = np.exp(-0.5 * y * y) @ v / (s * _SQRT2PI)
        return loss.loss(x), p, q

    sup = loss.support()

    def x_at(val: float) -> float | None:
        if not (sup[0] < val < sup[1]):
            return None
        return float(loss.inverse(np.array([val]))[0])

    x, wq = _panel_rule(breaks)
    L, p, q = pieces(x)
    return _Rule(breaks, x, wq, L, p, q, (), pieces, x_at, True)


def _laplace_rule(q: float, b: float, direction: str) -> _Rule:
    """Poisson-subsampled Laplace (Wang et al. 2023, Prop. 4.5; ``q = 1``: the Laplace mechanism, Wang et al. 2023, Sec. 4.4).

    remove: ``P = q Lap(1, b) + (1 - q) Lap(0, b)``, ``Q = Lap(0, b)``, ``L = log(1 - q + q e^g)`` with
    ``g(x) = (|x| - |x - 1|)/b``; constant outside ``(0, 1)`` (two atoms), smooth inside.
    add: ``P = Lap(0, b)``, ``Q`` the mixture, ``L = -log(1 - q + q e^g)``.
    """
    e1 = math.exp(-1.0 / b)
    mix_lo, mix_hi = q * 0.5 * e1 + (1 - q) * 0.5, q * 0.5 + (1 - q) * 0.5 * e1  # mixture mass x<=0, x>=1
    lap_lo, lap_hi = 0.5, 0.5 * e1  # Lap(0, b) mass x<=0, x>=1
    sign = 1.0 if direction == "remove" else -1.0

    def ell(g: Any) -> Any:
        if q >= 1.0:
            return g
        return np.logaddexp(math.log1p(-q), math.log(q) + g)

    def pieces(x: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
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

    def x_at(val: float) -> float | None:
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
    """Moments of the privacy loss under ``P`` and under ``Q`` (Wang et al. 2023, Sec. 3-4).

    Gaussian: closed form. Gaussian mixtures (subsampled Gaussians, Wang et al. 2023, Sec. 3), the Laplace mechanism
    (Sec. 4.4) and the Poisson-subsampled Laplace mechanism (Prop. 4.5): one composite Gauss-Legendre
    rule over the outputs, shared by both measures and all moments (a panel break at the mean, where
    ``|L - mean|`` has a kink), plus the atoms. Raises ``UnsupportedMechanismError`` otherwise.
    """
    if isinstance(loss, GaussianLoss):
        return _gaussian_moments(loss.mu, +1.0), _gaussian_moments(loss.mu, -1.0)
    r = _rule(loss)
    return r.moments("P"), r.moments("Q")


def pllr_statistics(loss: PrivacyLoss, lambdas: FloatArray = LAMBDAS) -> tuple[Moments, Moments, FloatArray]:
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

    def comps(means: Any, weights: Any, sign: float) -> list[tuple[float, float]]:
        return sorted((sign * float(m), float(w)) for m, w in zip(means, weights))

    return any(
        comps(a.p_means, a.p_weights, 1) == comps(b.q_means, b.q_weights, sg)
        and comps(a.q_means, a.q_weights, 1) == comps(b.p_means, b.p_weights, sg)
        for sg in (1.0, -1.0)
    )


def _mirror(m: Moments) -> Moments:
    """Moments of ``-L`` from those of ``L``."""
    return Moments(-m.mean, m.mu2, -m.mu3, m.mu4, -m.mu5, m.abs1, m.abs3)


def pllr_statistics_pair(
    remove: PrivacyLoss, add: PrivacyLoss, lambdas: FloatArray = LAMBDAS
) -> tuple[tuple[Moments, Moments, FloatArray], tuple[Moments, Moments, FloatArray]]:
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


def pllr_char_abs(loss: PrivacyLoss, freqs: FloatArray) -> tuple[FloatArray, FloatArray]:
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
    """``(min L, max L)`` of a bounded privacy loss (Laplace, subsampled Laplace: Wang et al. 2023, Prop. 4.5), else ``None``."""
    if isinstance(loss, (LaplaceLoss, PoissonLaplaceLoss)):
        vals = [a[0] for a in _rule(loss).atoms]
        return min(vals), max(vals)
    return None

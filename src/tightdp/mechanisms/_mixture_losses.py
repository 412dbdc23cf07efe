"""The privacy losses of a scalar mixture-of-Gaussians mechanism (Ganesh 2024, Def. 2.8), in both directions.

``MixtureRemoveLoss`` and ``MixtureAddLoss`` evaluate the loss and its inverse through the convex
log-sum-exp ``_ConvexLSE``; ``_AccurateTails`` gives tail quantiles accurate down to 1e-300 and
``_WeightError`` carries a certified relative error of the mixture weights to the engine. ``_mixture_pair``
assembles the two directions (``tightdp.mechanisms.mixture`` has the mechanisms that use them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np
from scipy import special

from .._numerics import logsumexp
from .._types import ArrayLike, FloatArray
from ..losses import DiscreteLoss, GaussianLoss, GaussianMixtureLoss, PrivacyLoss
from .base import LossPair

if TYPE_CHECKING:
    # the mixins below are only ever combined with GaussianMixtureLoss; the type checker sees them as its subclasses
    _MixtureBase = GaussianMixtureLoss
else:
    _MixtureBase = object


class _ConvexLSE:
    """``f(x) = logsumexp_i(a_i + b_i x)`` with ``b_i >= 0``: convex and non-decreasing.

    For a scalar MoG with sensitivities ``c_i`` and weights ``w_i`` (Ganesh 2024, Def. 2.8),
    ``a_i = log w_i - c_i^2 / (2 s^2)`` and ``b_i = c_i / s^2``; the remove loss is
    ``f(x)`` and the (reflected) add loss is ``-f(-x)``.

    The inverse splits off the flat component (``b = 0``, weight ``w_0``):
    ``f(x) = s`` iff ``F(x) = s + log(1 - w_0 e^{-s})`` where ``F`` is the
    log-sum-exp over the components with ``b_i > 0`` (the same step that gives
    the closed-form Poisson inverse of Koskela et al. 2020, Sec. 6.1). ``F`` is convex with
    slopes between ``min b`` and ``max b``, so Newton's method started at the
    inverse of the max-affine envelope ``g(x) = max_i(a_i + b_i x) <= F(x)``
    stays to the right of the root and decreases to it monotonically.
    """

    def __init__(self, a: FloatArray, b: FloatArray) -> None:
        flat = b == 0.0
        self.log_w0 = float(logsumexp(a[flat])) if np.any(flat) else -math.inf
        self.a, self.b = a[~flat], b[~flat]
        self.a_all, self.b_all = a, b

    def value(self, x: FloatArray) -> FloatArray:
        """``f(x)``; ``f(-inf) = log w_0`` (or ``-inf``) and ``f(+inf) = +inf``."""
        with np.errstate(invalid="ignore"):
            t = self.a_all + self.b_all * x[..., None]
        t = np.where(self.b_all == 0.0, self.a_all, t)  # 0 * inf is 0 here, not NaN
        m = np.max(t, axis=-1)
        fin = np.isfinite(m)
        mf = np.where(fin, m, 0.0)
        with np.errstate(divide="ignore"):
            out = mf + np.log(np.sum(np.exp(t - mf[..., None]), axis=-1))
        res: FloatArray = np.where(fin, out, m)
        return res

    def value_and_slope(self, x: FloatArray) -> tuple[FloatArray, FloatArray]:
        t = self.a_all + self.b_all * x[..., None]
        m = np.max(t, axis=-1)
        e = np.exp(t - m[..., None])
        tot = np.sum(e, axis=-1)
        return m + np.log(tot), (e @ self.b_all) / tot

    def inverse(self, s: FloatArray, *, max_iter: int = 60) -> FloatArray:
        """``x`` with ``f(x) = s`` for ``s > log w_0`` (the lower limit of ``f``).

        Long sorted inputs (the engine's grids) are solved on every 32nd point
        first; ``F^{-1}`` is concave, so linear interpolation between those
        starts each remaining point just left of its root, and Newton then
        needs two or three steps instead of five from the envelope.
        Returns a non-finite entry where the envelope cannot be formed (slopes
        ``b`` that underflow); callers fall back to the generic inverse there.
        """
        s = np.asarray(s, float)
        if math.isfinite(self.log_w0):
            with np.errstate(divide="ignore", invalid="ignore"):
                target = s + np.log(-np.expm1(self.log_w0 - s))
        else:
            target = s.copy()
        n = target.size
        if target.ndim == 1 and n > 4096 and np.all(np.diff(target) > 0):
            idx = np.unique(np.r_[np.arange(0, n, 32), n - 1])
            xc = self._newton(target[idx], self._envelope(target[idx]), max_iter)
            if np.all(np.isfinite(xc)) and np.all(np.diff(xc) > 0):
                return self._newton(target, np.interp(target, target[idx], xc), max_iter)
        return self._newton(target, self._envelope(target), max_iter)

    def _envelope(self, target: FloatArray) -> FloatArray:
        """Inverse of the max-affine minorant ``max_i(a_i + b_i x)`` of ``F``: a start right of the root."""
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            out: FloatArray = np.min((target[..., None] - self.a) / self.b, axis=-1)
        return out

    def _newton(self, target: FloatArray, x: FloatArray, max_iter: int) -> FloatArray:
        """Newton on the convex ``F``: from the left one step crosses the root, from the right it is monotone."""
        a, b = self.a, self.b
        x = np.array(x, float)
        active = np.flatnonzero(np.isfinite(x))
        for _ in range(max_iter):
            if active.size == 0:
                break
            xa, ta = x[active], target[active]
            t = a + b * xa[:, None]
            m = np.max(t, axis=-1)
            e = np.exp(t - m[:, None])
            tot = np.sum(e, axis=-1)
            gap = m + np.log(tot) - ta
            slope = (e @ b) / tot
            x[active] = xa - gap / slope
            done = np.abs(gap) <= 4e-16 * np.maximum(1.0, np.abs(ta))
            active = active[~done]
        return x


class _AccurateTails(_MixtureBase):
    """Tail points (``tail_point``, behind the tail quantiles) of ``Y = L(X)``, ``X ~ P = sum_i w_i N(a_i, s^2)``,
    accurate down to 1e-300.

    Each component of ``P`` gets ``mass / K`` of the tail: ``x = max_i(a_i + s z_i)``
    with ``z_i = Phi^{-1}(1 - mass / (K w_i))`` computed as ``-ndtri(mass / (K w_i))``
    (``1 - mass`` would round to 1 below 1e-16). Then ``P(X > x) <= mass`` and,
    ``L`` being increasing, ``P(Y > L(x)) <= mass``; symmetrically below.
    """

    def _tail_x(self, mass: float, upper: bool) -> float:
        a = np.asarray(self.p_means, float)
        w = np.asarray(self.p_weights, float)
        with np.errstate(over="ignore", divide="ignore"):  # a weight near 0 gives inf: no room needed
            r = mass * (1.0 - 1e-9) / (len(w) * w)  # margin for rounding in ndtri and the loss
        live = r < 1.0  # lighter components need no room at all
        z = special.ndtri(r[live])
        return float(np.max(a[live] - self.sigma * z)) if upper else float(np.min(a[live] + self.sigma * z))

    def tail_point(self, mass: float, *, upper: bool) -> float:
        return float(self.loss(np.array([self._tail_x(mass, upper)]))[0])


class _WeightError(_MixtureBase):
    """Carries ``weight_error``: the varying side's mixture weights are known only up to a factor.

    The weights given are the true ones rounded *up*, ``p_i <= w_i <=
    (1 + r) p_i`` with ``r = weight_error`` (``CertifiedPMF``). Then every cell
    mass of the varying distribution is within a factor ``1 + r`` of the true
    one, and the true privacy loss at any output differs from the computed one
    by at most ``log(1 + r)``. Both are reported through the engine's existing
    error channels: ``outputs_at`` adds ``log1p(r)`` to the realised loss error
    (the distance between the requested loss and the *true* loss at the
    returned output), ``cell_masses`` adds ``r`` to the relative mass error
    and ``partial_mean`` the corresponding error of the first moment.

    What is covered where: upper bounds are safe in both directions (remove:
    ``P`` pointwise above the true one; add: ``Q <= (1 + r) Q_true`` is a loss
    shift of ``log1p(r)``, which the dominance cells charge on the
    connect-the-dots pair and the PRV discretisation on its coupling range).
    The PRV accountant's lower bound is covered by the relative mass error.
    The dominance (connect-dots) *lower* pairs use the realised cell masses
    only, so in the remove direction a factor ``(1 + r)^T`` on the lower delta
    (``r`` about 7e-16: 7e-10 relative at ``T = 1e6``) is not yet charged;
    that needs ``tightdp.pld.dominance._cells`` to add ``weight_error`` to its
    relative mass error ``rel`` (outside this module).
    """

    if TYPE_CHECKING:
        weight_error: float

    def outputs_at(self, s: ArrayLike) -> tuple[FloatArray, float]:
        x, err = super().outputs_at(s)
        if self.weight_error:
            err = err + math.log1p(self.weight_error) * (1.0 + 1e-6)
        return x, err

    def cell_masses(self, edges: ArrayLike) -> tuple[float, float, FloatArray, tuple[float, float], float]:
        below, above, masses, (rel, l1), err = super().cell_masses(edges)
        if self.weight_error:
            rel = rel + self.weight_error * (1.0 + 1e-6)
        return below, above, masses, (rel, l1), err

    def partial_mean(self, a: float, b: float) -> tuple[float, float]:
        val, err = super().partial_mean(a, b)
        if self.weight_error:
            lo, hi = self.support()
            a_in, b_in = max(a, lo), min(b, hi)
            span = max(abs(a_in), abs(b_in)) if math.isfinite(a_in) and math.isfinite(b_in) else math.inf
            # E[Y 1{a < Y <= b}]: the masses move by a factor 1 + r, the losses by log(1 + r)
            err = err + (self.weight_error * (span + 1.0) + math.log1p(self.weight_error)) * (1.0 + 1e-6)
        return val, err


@dataclass(frozen=True)
class MixtureRemoveLoss(_WeightError, _AccurateTails, GaussianMixtureLoss):
    """Remove direction of a scalar MoG: ``P = sum p_i N(c_i, s^2)``, ``Q = N(0, s^2)`` (Ganesh 2024, Def. 2.8).

    ``L(x) = f(x)`` with ``f`` the convex log-sum-exp of ``_ConvexLSE``; the
    inverse is Newton's method from the envelope (monotone, no table).
    ``weight_error``: see ``_WeightError`` (0 for weights taken as exact).
    """

    weight_error: float = 0.0

    @cached_property
    def _lse(self) -> _ConvexLSE:
        c, lw = np.asarray(self.p_means, float), np.log(np.asarray(self.p_weights, float))
        s2 = self.sigma**2
        return _ConvexLSE(lw - c * c / (2 * s2), c / s2)

    def loss(self, x: ArrayLike) -> FloatArray:
        return self._lse.value(np.asarray(x, float))

    def _loss_and_slope(self, x: ArrayLike) -> tuple[FloatArray, FloatArray]:
        return self._lse.value_and_slope(np.asarray(x, float))

    def inverse(self, s: ArrayLike) -> FloatArray:
        s = np.asarray(s, float)
        x = self._lse.inverse(s)
        bad = ~np.isfinite(x)  # only for sensitivities so tiny that c / s^2 underflows
        if np.any(bad):
            x[bad] = super().inverse(s[bad])
        return x


@dataclass(frozen=True)
class MixtureAddLoss(_WeightError, _AccurateTails, GaussianMixtureLoss):
    """Add direction of a scalar MoG, reflected ``x -> -x`` so the loss increases:
    ``P = N(0, s^2)``, ``Q = sum p_i N(-c_i, s^2)`` (Ganesh 2024, Def. 2.8); ``L(x) = -f(-x)``.
    ``weight_error``: see ``_WeightError``."""

    weight_error: float = 0.0

    @cached_property
    def _lse(self) -> _ConvexLSE:
        c, lw = -np.asarray(self.q_means, float), np.log(np.asarray(self.q_weights, float))
        s2 = self.sigma**2
        return _ConvexLSE(lw - c * c / (2 * s2), c / s2)

    def loss(self, x: ArrayLike) -> FloatArray:
        return -self._lse.value(-np.asarray(x, float))

    def _loss_and_slope(self, x: ArrayLike) -> tuple[FloatArray, FloatArray]:
        v, d = self._lse.value_and_slope(-np.asarray(x, float))
        return -v, d

    def inverse(self, s: ArrayLike) -> FloatArray:
        s = np.asarray(s, float)
        x = -self._lse.inverse(-s)
        bad = ~np.isfinite(x)  # only for sensitivities so tiny that c / s^2 underflows
        if np.any(bad):
            x[bad] = super().inverse(s[bad])
        return x


def _mixture_pair(
    c: FloatArray, w_remove: FloatArray, w_add: FloatArray, sigma: float, weight_error: float = 0.0
) -> LossPair:
    """The MoG's two directions: ``remove`` with P weights ``w_remove``, ``add`` with Q weights ``w_add``
    (sorted distinct sensitivities ``c``, positive weights)."""
    if c[-1] == 0.0:  # every sensitivity is zero: P == Q, but for a deficit in the add direction's Q
        zero: PrivacyLoss = DiscreteLoss(values=(0.0,), probs=(1.0,))
        q = math.fsum(w_add.tolist())
        if q >= 1.0:
            return LossPair(zero, zero)
        return LossPair(zero, DiscreteLoss(values=(-math.log(q),), probs=(1.0,)))
    cs = tuple(map(float, c))
    if len(c) == 1 and w_remove[0] == 1.0 and w_add[0] == 1.0:  # a Gaussian mechanism with sensitivity c
        loss = GaussianLoss(mu=cs[0] / sigma)
        return LossPair(loss, loss)
    if len(c) == 1 and w_remove[0] == 1.0:
        remove: PrivacyLoss = GaussianLoss(mu=cs[0] / sigma)
    else:
        remove = MixtureRemoveLoss(cs, tuple(map(float, w_remove)), (0.0,), (1.0,), sigma, weight_error=weight_error)
    add = MixtureAddLoss(
        (0.0,), (1.0,), tuple(-x for x in cs), tuple(map(float, w_add)), sigma, weight_error=weight_error
    )
    return LossPair(remove, add)

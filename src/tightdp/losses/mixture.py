"""Gaussian mixture losses: ``P = sum_i w_i N(a_i, s^2)``, ``Q = sum_j v_j N(b_j, s^2)`` with ``min a >= max b``
so the loss is non-decreasing in the output.

This one class covers the subsampled Gaussian under Poisson sampling (Koskela et al. 2020, Sec. 6.1), sampling
without replacement (6.2), with replacement (6.3) and the mixture-of-Gaussians mechanisms of group privacy (Ganesh
2024, Thm 3.1, 3.3). Poisson sampling and sampling without replacement use the closed-form inverses of Koskela et
al. 2020, Sec. 6.1-6.2; other mixtures invert numerically, and the inversion error is measured and handed to the
engine, which widens its coupling accordingly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from scipy import special

from .._numerics import logsumexp
from .._types import ArrayLike, FloatArray
from ._cells import _SQRT2PI, _U, _gauss_legendre_integral, _ndtr, gaussian_mixture_cell_masses
from .base import PrivacyLoss
from .gaussian import GaussianLoss

__all__ = ["GaussianMixtureLoss", "poisson_gaussian_loss", "without_replacement_gaussian_loss"]


@dataclass(frozen=True)
class GaussianMixtureLoss(PrivacyLoss):
    """The privacy loss of ``P = sum w_i N(a_i, sigma^2)`` against ``Q = sum v_j N(b_j, sigma^2)``.

    Requires ``min(a) >= max(b)``; then the loss ``L(x) = log p(x) - log q(x)``
    is non-decreasing (its derivative is ``(E_post_P[a] - E_post_Q[b]) / sigma^2``),
    so ``P(Y <= s) = P(X <= L^{-1}(s))``.

    Parameters
    ----------
    p_means, p_weights : tuple of float
        P's component means and weights (non-negative, summing to at most 1).
    q_means, q_weights : tuple of float
        Q's component means and weights.
    sigma : float
        The common standard deviation, positive.
    infinity_mass : float, default 0.0
        P-mass of outputs treated as fully revealing (safe side), in ``[0, 1]``.

    Raises
    ------
    ValueError
        If ``min(p_means) < max(q_means)`` (the loss would not be monotone).

    References
    ----------
    Koskela et al. 2020, Sec. 6.1-6.3 (subsampled Gaussians); Ganesh 2024, Thm 3.1, 3.3 (group privacy).
    """

    p_means: tuple[float, ...]
    p_weights: tuple[float, ...]
    q_means: tuple[float, ...]
    q_weights: tuple[float, ...]
    sigma: float
    infinity_mass: float = 0.0  # P-mass of outputs treated as fully revealing (safe side)
    infinity_is_exact = False  # same-variance components have finite losses: the mass above is a device

    def __post_init__(self) -> None:
        if min(self.p_means) < max(self.q_means) - 1e-12:
            raise ValueError("GaussianMixtureLoss needs min(p_means) >= max(q_means)")

    # -- the loss in output space ------------------------------------------
    @cached_property
    def _par(self) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray]:
        a = np.asarray(self.p_means, float)
        w = np.asarray(self.p_weights, float)
        b = np.asarray(self.q_means, float)
        v = np.asarray(self.q_weights, float)
        keep_p, keep_q = w > 0, v > 0
        return a[keep_p], np.log(w[keep_p]), b[keep_q], np.log(v[keep_q]), w[keep_p]

    def loss(self, x: ArrayLike) -> FloatArray:
        """The privacy loss ``L(x) = log p(x) - log q(x)`` at outputs ``x`` (stable for large ``|x|``).

        Parameters
        ----------
        x : array_like of float
            Outputs, any real.

        Returns
        -------
        numpy.ndarray of float
            ``L(x)`` elementwise, non-decreasing in ``x``.

        Raises
        ------
        ValueError
            If ``x`` cannot be read as floats (numpy's error).
        """
        a, lw, b, lv, _ = self._par
        xx = np.asarray(x, float)[..., None]
        s2 = self.sigma**2
        lp = logsumexp(lw + (2 * a * xx - a * a) / (2 * s2), axis=-1)
        lq = logsumexp(lv + (2 * b * xx - b * b) / (2 * s2), axis=-1)
        out: FloatArray = lp - lq
        return out

    def _loss_and_slope(self, x: ArrayLike) -> tuple[FloatArray, FloatArray]:
        a, lw, b, lv, _ = self._par
        xx = np.asarray(x, float)[..., None]
        s2 = self.sigma**2
        ep = lw + (2 * a * xx - a * a) / (2 * s2)
        eq = lv + (2 * b * xx - b * b) / (2 * s2)
        lp = logsumexp(ep, axis=-1)
        lq = logsumexp(eq, axis=-1)
        post_a = np.sum(np.exp(ep - lp[..., None]) * a, axis=-1)
        post_b = np.sum(np.exp(eq - lq[..., None]) * b, axis=-1)
        return lp - lq, (post_a - post_b) / s2

    @cached_property
    def _limits(self) -> tuple[float, float]:
        """Limits of L at -inf and +inf (the support of the finite part). (Plain floats: a few components,
        where numpy's per-call overhead was a tenth of a millisecond of every small composition.)"""
        a, lw, b, lv, _ = (arr.tolist() for arr in self._par)

        def near(v: float, x: float) -> bool:
            return abs(v - x) <= 1e-8 + 1e-5 * abs(x)  # np.isclose's tolerances

        def lse(vals: list[float]) -> float:
            m = max(vals)
            return m + math.log(math.fsum(math.exp(t - m) for t in vals))

        def end(ea: float, eb: float) -> float:  # equal extreme means: L -> log(w / v) of those components
            return lse([l for m, l in zip(a, lw) if near(m, ea)]) - lse([l for m, l in zip(b, lv) if near(m, eb)])

        lo = -math.inf if min(a) > min(b) + 1e-12 else end(min(a), min(b))
        hi = math.inf if max(a) > max(b) + 1e-12 else end(max(a), max(b))
        return float(lo), float(hi)

    def support(self) -> tuple[float, float]:
        return self._limits

    def upper_quantile(self, mass: float) -> float:
        """A loss ``s`` with ``P(s < Y < inf) <= mass``: each of the ``K`` components of P gets ``mass / K``.

        Parameters
        ----------
        mass : float
            Tail mass in ``(0, 1)``.

        Returns
        -------
        float
            The point ``s`` (the support's upper end when that is finite).

        Raises
        ------
        ValueError
            Not raised for a ``mass`` in ``(0, 1)``; ``mass`` is the engine's to choose (a mass of 0 gives an
            infinite point).
        """
        _lo, hi = self._limits
        if math.isfinite(hi):
            return hi
        return self.tail_point(mass, upper=True)

    def lower_quantile(self, mass: float) -> float:
        """A loss ``s`` with ``P(Y <= s) <= mass``: each of the ``K`` components of P gets ``mass / K``.

        Parameters
        ----------
        mass : float
            Tail mass in ``(0, 1)``.

        Returns
        -------
        float
            The point ``s`` (the support's lower end when that is finite).

        Raises
        ------
        ValueError
            Not raised for a ``mass`` in ``(0, 1)``; ``mass`` is the engine's to choose (a mass of 0 gives an
            infinite point).
        """
        lo, _hi = self._limits
        if math.isfinite(lo):
            return lo
        return self.tail_point(mass, upper=False)

    def tail_point(self, mass: float, *, upper: bool) -> float:
        """The loss ``L(x)`` at an output ``x`` with ``P(X > x) <= mass`` (``upper``) or ``P(X <= x) <= mass``, each
        of the ``K`` components of P given ``mass / K``; ``L`` is non-decreasing, so ``P(Y > L(x)) <= mass``
        (``P(Y <= L(x)) <= mass``). Unlike the quantiles, a point inside the support where its end is finite:
        that end can lie far out where P has almost no mass (a group of 1000 at rate 1/2 has its lower end at
        ``log 2^-1000 = -693``), and the dominance grids stop at this point instead (``pld._cells``).

        Parameters
        ----------
        mass : float
            Tail mass in ``(0, 1)``.
        upper : bool
            The upper tail (else the lower one).

        Returns
        -------
        float
            The point (infinite where ``mass`` is 0).

        Raises
        ------
        ValueError
            Not raised for a ``mass`` in ``(0, 1)``; ``mass`` is the engine's to choose.
        """
        a, _, _, _, w = self._par
        p = mass / (len(w) * w)
        if upper:
            z = np.where(p >= 1.0, -np.inf, -special.ndtri(np.minimum(p, 1.0)))  # 1 - Phi(z) = mass / (K w)
            x = float(np.max(a + self.sigma * z))  # z = -inf: a component lighter than mass/K
        else:
            x = float(np.min(a + self.sigma * special.ndtri(np.clip(p, 0.0, 1.0))))
        return float(self.loss(np.array([x]))[0])

    @cached_property
    def _table(self) -> tuple[FloatArray, FloatArray]:
        """A dense monotone table (x, L(x)) used as the starting point of Newton's method."""
        a, _, b, _, _ = self._par
        lo_x = min(a.min(), b.min()) - 40 * self.sigma
        hi_x = max(a.max(), b.max()) + 40 * self.sigma
        xs = np.linspace(lo_x, hi_x, 4001)
        ls = np.maximum.accumulate(self.loss(xs))
        return xs, ls

    def inverse(self, s: ArrayLike) -> FloatArray:
        """The outputs ``x`` with ``L(x) = s`` for ``s`` inside the support (vectorised Newton).

        Parameters
        ----------
        s : array_like of float
            Loss values inside ``support()``.

        Returns
        -------
        numpy.ndarray of float
            The outputs; ``outputs_at`` reports how far ``L(x)`` lies from ``s``.

        Raises
        ------
        ValueError
            If ``s`` cannot be read as floats (numpy's error).
        """
        s = np.asarray(s, float)
        xs, ls = self._table
        x = np.interp(s, ls, xs)
        # extrapolate linearly beyond the table using the end slopes
        lo_slope = (ls[1] - ls[0]) / (xs[1] - xs[0])
        hi_slope = (ls[-1] - ls[-2]) / (xs[-1] - xs[-2])
        below, above = s < ls[0], s > ls[-1]
        if np.any(below) and lo_slope > 0:
            x = np.where(below, xs[0] + (s - ls[0]) / lo_slope, x)
        if np.any(above) and hi_slope > 0:
            x = np.where(above, xs[-1] + (s - ls[-1]) / hi_slope, x)
        for _ in range(8):
            val, slope = self._loss_and_slope(x)
            step = np.where(slope > 1e-300, (val - s) / np.maximum(slope, 1e-300), 0.0)
            x = x - np.clip(step, -10 * self.sigma, 10 * self.sigma)
            if np.all(np.abs(val - s) <= 1e-13 * np.maximum(1.0, np.abs(s))):
                break
        return x

    def _cdf_sf_at_x(self, x: FloatArray) -> tuple[FloatArray, FloatArray]:
        a, _, _, _, w = self._par
        z = (x[..., None] - a) / self.sigma
        return np.sum(w * _ndtr(z), axis=-1), np.sum(w * _ndtr(-z), axis=-1)

    def outputs_at(self, s: ArrayLike) -> tuple[FloatArray, float]:
        """The outputs ``x`` with ``L(x) = s`` and the largest ``|L(x) - s|`` actually realised.

        Outputs are ``-inf`` / ``+inf`` below / above the support; the inversion is numerical for general
        mixtures, so the realised error is measured and handed to the engine.

        Parameters
        ----------
        s : array_like of float
            Loss values.

        Returns
        -------
        tuple
            ``(x, error)``: the outputs (shaped as ``s``) and a non-negative float.

        Raises
        ------
        ValueError
            If ``s`` cannot be read as floats (numpy's error).
        """
        s = np.asarray(s, float)
        lo, hi = self._limits
        inside = (s > lo) & (s < hi)
        x = np.where(s <= lo, -np.inf, np.inf)
        err = 0.0
        if np.any(inside):
            xi = self.inverse(s[inside])
            x[inside] = xi
            realised = self.loss(xi)
            finite = np.isfinite(realised)
            if np.any(finite):
                err = float(np.max(np.abs(realised[finite] - s[inside][finite])))
        return x, err

    def _cdf_sf_outputs(self, edges: ArrayLike) -> tuple[FloatArray, FloatArray, float, FloatArray]:
        s = np.asarray(edges, float)
        x, err = self.outputs_at(s)
        c, sf = self._cdf_sf_at_x(np.where(np.isfinite(x), x, 0.0))
        lo, hi = self._limits
        total = float(np.sum(self._par[4]))
        c = np.where(s <= lo, 0.0, np.where(s >= hi, total, c))
        sf = np.where(s <= lo, total, np.where(s >= hi, 0.0, sf))
        return c, sf, err, x

    def cdf_sf(self, edges: ArrayLike) -> tuple[FloatArray, FloatArray, float]:
        c, sf, err, _ = self._cdf_sf_outputs(edges)
        return c, sf, err

    def cell_masses(self, edges: ArrayLike) -> tuple[float, float, FloatArray, tuple[float, float], float]:
        c, sf, err, x = self._cdf_sf_outputs(edges)
        a, _, _, _, w = self._par
        masses, errs = gaussian_mixture_cell_masses(x, a, w, self.sigma, c, sf)
        return float(c[0]), float(sf[-1]), masses, errs, err

    def _weight_factor(self) -> float:
        """``1 + weight_error``: weights certified only as rounded up by that factor (``_WeightError``), else 1."""
        return 1.0 + float(getattr(self, "weight_error", 0.0) or 0.0) * (1.0 + 1e-6)

    def _above(self, x: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, int]:
        """``(P(X > x), Q(X > x), P(X <= x), Q(X <= x), n)`` at each output of ``x`` from the components (``Phi`` to
        a few ulp each; one matrix product per side), ``n`` the number of terms; an infinite output is an empty
        (``+inf``) or full (``-inf``) event."""
        a, _, b, _, w = self._par
        v = np.asarray(self.q_weights, float)
        v = v[v > 0]
        x = np.asarray(x, float)
        finite = np.isfinite(x)
        xf = np.where(finite, x, 0.0)
        za, zb = (a[:, None] - xf[None, :]) / self.sigma, (b[:, None] - xf[None, :]) / self.sigma
        pt, qt = float(np.sum(w)), float(np.sum(v))
        full = x < 0.0  # where not finite: -inf puts every output in the event, +inf none
        return (
            np.where(finite, w @ _ndtr(za), np.where(full, pt, 0.0)),
            np.where(finite, v @ _ndtr(zb), np.where(full, qt, 0.0)),
            np.where(finite, w @ _ndtr(-za), np.where(full, 0.0, pt)),
            np.where(finite, v @ _ndtr(-zb), np.where(full, 0.0, qt)),
            a.size + b.size,
        )

    def event_masses(self, t: ArrayLike) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray] | None:
        """``E = {X > x}`` with ``x`` the output where the computed loss is the threshold: the masses of ``E`` and of its
        complement summed over the ``n`` components (each ``Phi`` within a few ulp: ``(n + 64) u`` relative covers
        them and the sum, in any order), P's divided by the weights' certified factor, and the Q-mass of components
        left out (at most ``infinity_mass``) added to both of Q's. All thresholds in one pass (``_above``).

        Parameters
        ----------
        t : array_like of float
            The loss thresholds, one-dimensional.

        Returns
        -------
        tuple of FloatArray or None
            ``(p, q, p_out, q_out)``, each the shape of ``t``; ``None`` where an output is NaN (a loss at the edge of
            double precision: no event to speak of).

        Raises
        ------
        ValueError
            Not raised: every real ``t`` is answered (a NaN mass reads as no bound downstream).
        """
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # +-inf: the event is empty or all
            x = np.asarray(self.outputs_at(np.asarray(t, dtype=float))[0], float)
        if np.any(np.isnan(x)):
            return None
        p, q, p_out, q_out, n = self._above(x)
        lo, hi = (1.0 - (n + 64) * _U) / self._weight_factor(), 1.0 + (n + 64) * _U
        left_out = float(self.infinity_mass)
        return p * lo, q * hi + left_out, p_out * lo, q_out * hi + left_out

    def total_variation(self) -> float | None:
        """``sup_E P(E) - Q(E)`` is attained at ``E* = {X > x*}``, ``L(x*) = 0`` (``L`` is non-decreasing), where it is
        ``D(x*)``, ``D(x) = sum_m (w_m - v_m) Phi((m - x) / sigma)`` over the distinct means ``m`` (components common to
        P and Q cancel exactly: no cancellation of near-equal masses). At the computed ``x0`` with ``|L(x0)| <= eta``,
        ``D(x*) - D(x0)`` is the integral of ``|p - q| = q |e^L - 1|`` between ``x0`` and ``x*``, where ``|L| <= eta``:
        at most ``e^eta - 1``. Plus ``D``'s rounding (``(n + 8) u`` of the terms' total, and the weights' certified
        factor) and the mass of components left out (``infinity_mass``: their ``P - Q`` is at most their P-mass).

        Returns
        -------
        float or None
            The bound.
        """
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # NaN and inf are answered below
            x0 = float(self.outputs_at(np.array([0.0]))[0][0])
            loss_x0 = float(self.loss(np.array([x0]))[0]) if math.isfinite(x0) else 0.0
        if math.isnan(x0) or math.isnan(loss_x0):  # (a loss at the edge of double precision: no bound)
            return None
        if math.isfinite(x0):
            r = x0 / self.sigma  # (sigma may be tiny: x0 / sigma, not sigma squared)
            eta = abs(loss_x0) + 64.0 * _U * (1.0 + r * r)
        else:
            eta = 0.0  # 0 lies outside the support: E* is every output or none, exactly
        a, lw, b, lv, _ = self._par
        diff: dict[float, float] = {}
        for m, l in zip(a.tolist(), lw.tolist()):
            diff[m] = diff.get(m, 0.0) + math.exp(l)
        for m, l in zip(b.tolist(), lv.tolist()):
            diff[m] = diff.get(m, 0.0) - math.exp(l)
        above = self._above(np.array([x0]))
        p, q, n = float(above[0][0]), float(above[1][0]), above[4]
        if math.isfinite(x0):
            means = np.array(list(diff), dtype=float)
            d = float(np.dot(np.array(list(diff.values())), _ndtr((means - x0) / self.sigma)))
        else:
            d = sum(diff.values()) if x0 < 0 else 0.0
        err = ((n + 8) * _U + self._weight_factor() - 1.0) * (p + q)
        tv = max(d, 0.0) + math.expm1(eta) + err + float(self.infinity_mass)
        return min(1.0, tv * (1.0 + 1e-12) + 1e-300)

    def cdf(self, s: ArrayLike) -> FloatArray:
        return self.cdf_sf(np.atleast_1d(s))[0].reshape(np.shape(s))

    def sf(self, s: ArrayLike) -> FloatArray:
        return self.cdf_sf(np.atleast_1d(s))[1].reshape(np.shape(s))

    def partial_mean(self, a: float, b: float) -> tuple[float, float]:
        lo, hi = self._limits
        a, b = max(a, lo), min(b, hi)
        if b <= a:
            return 0.0, 0.0
        xa = -math.inf if a <= lo else float(self.inverse(np.array([a]))[0])
        xb = math.inf if b >= hi else float(self.inverse(np.array([b]))[0])
        means, _, _, _, w = self._par
        total, err = 0.0, 0.0
        sig = self.sigma
        for m, wi in zip(means, w):
            lo_x, hi_x = max(xa, m - 40 * sig), min(xb, m + 40 * sig)
            if hi_x <= lo_x:
                continue

            def f(x: FloatArray, m: float = float(m)) -> FloatArray:
                out: FloatArray = self.loss(x) * np.exp(-0.5 * ((x - m) / sig) ** 2) / (sig * _SQRT2PI)
                return out

            v1 = _gauss_legendre_integral(f, lo_x, hi_x, 96, 16)
            v2 = _gauss_legendre_integral(f, lo_x, hi_x, 96, 32)
            total += wi * v2
            err += wi * (10.0 * abs(v2 - v1) + 1e-15 * abs(v2))
        # mass beyond +-40 sigma of each component is below 1e-300; quadrature floor
        return total, err + 1e-14 * (abs(total) + 1e-3)


class _PoissonRemoveLoss(GaussianMixtureLoss):
    """Koskela et al. 2020, Sec. 6.1: L(x) = log(q exp((2x - 1)/(2 s^2)) + 1 - q), closed-form inverse."""

    def loss(self, x: ArrayLike) -> FloatArray:
        q = self.p_weights[0]
        with np.errstate(divide="ignore", over="ignore"):  # sigma ~ 1e-160: +-inf, refused as out of range
            return np.logaddexp(math.log1p(-q), math.log(q) + (2 * np.asarray(x, float) - 1) / (2 * self.sigma**2))

    def inverse(self, s: ArrayLike) -> FloatArray:
        q = self.p_weights[0]
        s = np.asarray(s, float)
        with np.errstate(divide="ignore", invalid="ignore"):
            # e^s - (1 - q) = (1 - q) expm1(s - log(1 - q)): no cancellation near the support's lower end
            out: FloatArray = (
                self.sigma**2 * (math.log1p(-q) + np.log(np.expm1(s - math.log1p(-q))) - math.log(q)) + 0.5
            )
        return out


class _PoissonAddLoss(GaussianMixtureLoss):
    """The add direction, reflected so that the loss increases: P = N(0), Q = q N(-1) + (1-q) N(0)."""

    def loss(self, x: ArrayLike) -> FloatArray:
        q = self.q_weights[1]
        with np.errstate(divide="ignore", over="ignore"):  # as above
            out: FloatArray = -np.logaddexp(
                math.log1p(-q), math.log(q) + (-2 * np.asarray(x, float) - 1) / (2 * self.sigma**2)
            )
        return out

    def inverse(self, s: ArrayLike) -> FloatArray:
        q = self.q_weights[1]
        s = np.asarray(s, float)
        with np.errstate(divide="ignore", invalid="ignore"):
            out: FloatArray = (
                -(self.sigma**2) * (math.log1p(-q) + np.log(np.expm1(-s - math.log1p(-q))) - math.log(q)) - 0.5
            )
        return out


class _WithoutReplacementLoss(GaussianMixtureLoss):
    """Koskela et al. 2020, Sec. 6.2, closed-form inverse (written in scaled form to avoid overflow)."""

    def loss(self, x: ArrayLike) -> FloatArray:
        q = self.p_weights[0]
        x = np.asarray(x, float)
        s2 = 2 * self.sigma**2
        out: FloatArray = np.logaddexp(math.log1p(-q), math.log(q) + (2 * x - 1) / s2) - np.logaddexp(
            math.log1p(-q), math.log(q) + (-2 * x - 1) / s2
        )
        return out

    def inverse(self, s: ArrayLike) -> FloatArray:
        # the root of a quadratic, (A + sqrt(A^2 + B^2)) / (2c), taken in logs: c = q e^(-1 / (2 sigma^2)) underflows
        # to 0 at small sigma (sigma 0.01: e^-5000), where the plain form took log(0)
        q = self.p_weights[0]
        s2 = self.sigma**2
        log_c = math.log(q) - 1.0 / (2 * s2)
        log_r = math.log1p(-q)
        s = np.asarray(s, float)
        out = np.empty_like(s)
        pos = s >= 0
        sp = s[pos]
        with np.errstate(divide="ignore"):  # log(0) = -inf at s = 0 is meant
            la = log_r + np.log(-np.expm1(-sp))  # log(r (1 - e^-s))
        lb = math.log(2.0) + log_c - sp / 2.0  # log(2 c e^(-s/2))
        lnum = np.logaddexp(la, 0.5 * np.logaddexp(2.0 * la, 2.0 * lb))
        out[pos] = s2 * (sp + lnum - math.log(2.0) - log_c)
        sn = s[~pos]
        la = log_r + np.log(-np.expm1(sn))  # log(r (1 - e^s)), s < 0
        lb = math.log(2.0) + log_c + sn / 2.0
        lden = np.logaddexp(la, 0.5 * np.logaddexp(2.0 * la, 2.0 * lb))
        out[~pos] = s2 * (math.log(2.0) + log_c + sn - lden)
        return out


def poisson_gaussian_loss(*, sigma: float, q: float, direction: str) -> PrivacyLoss:
    """The privacy loss of the Poisson-subsampled Gaussian (sensitivity 1, noise ``sigma``), one direction.

    Parameters
    ----------
    sigma : float
        Noise standard deviation per unit sensitivity, positive.
    q : float
        Sampling rate in ``(0, 1]``; ``q = 1`` is the Gaussian mechanism.
    direction : str
        ``"remove"`` (``P = q N(1) + (1 - q) N(0)`` against ``N(0)``) or ``"add"`` (the reverse pair).

    Returns
    -------
    PrivacyLoss
        The loss, with the closed-form inverse of Koskela et al. 2020, Sec. 6.1.

    Raises
    ------
    ValueError
        Not raised for values out of their domain: ``sigma`` and ``q`` are the caller's to validate
        (``PoissonSampled`` does); only a malformed mixture is refused (``GaussianMixtureLoss``).

    References
    ----------
    Koskela et al. 2020, Sec. 6.1.
    """
    if q >= 1.0:
        return GaussianLoss(mu=1.0 / sigma)
    if direction == "remove":
        return _PoissonRemoveLoss((1.0, 0.0), (q, 1.0 - q), (0.0,), (1.0,), sigma)
    return _PoissonAddLoss((0.0,), (1.0,), (0.0, -1.0), (1.0 - q, q), sigma)


def without_replacement_gaussian_loss(*, sigma: float, q: float) -> PrivacyLoss:
    """The privacy loss of the Gaussian subsampled without replacement, substitute relation.

    Parameters
    ----------
    sigma : float
        Noise standard deviation per unit sensitivity, positive.
    q : float
        Sampling rate ``batch_size / dataset_size`` in ``(0, 1]``; ``q = 1`` is the Gaussian of sensitivity 2.

    Returns
    -------
    PrivacyLoss
        The loss, with the closed-form inverse of Koskela et al. 2020, Sec. 6.2.

    Raises
    ------
    ValueError
        Not raised for values out of their domain: ``sigma`` and ``q`` are the caller's to validate
        (``SampledWithoutReplacement`` does); only a malformed mixture is refused (``GaussianMixtureLoss``).

    References
    ----------
    Koskela et al. 2020, Sec. 6.2.
    """
    if q >= 1.0:
        return GaussianLoss(mu=2.0 / sigma)
    return _WithoutReplacementLoss((1.0, 0.0), (q, 1.0 - q), (0.0, -1.0), (1.0 - q, q), sigma)

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
from ..losses import DiscreteLoss, GaussianLoss, GaussianMixtureLoss, PrivacyLoss, gaussian_cell_masses_and_errors
from ..losses._cells import _SQRT2PI, _U, hermite_cell_masses
from ..losses.base import split_errors
from .base import LossPair

if TYPE_CHECKING:
    # the mixins below are only ever combined with GaussianMixtureLoss; the type checker sees them as its subclasses
    _MixtureBase = GaussianMixtureLoss
else:
    _MixtureBase = object


_CHUNK = 1 << 15  # points per block of the long evaluations (keeps the points-by-components temporaries small)
_STRIDE = 64  # Newton to convergence on every 64th point of a long grid, the rest interpolated from them


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

    def value_and_slope_chunked(self, x: FloatArray) -> tuple[FloatArray, FloatArray]:
        """``value_and_slope`` on a long 1-D ``x`` in blocks of ``_CHUNK`` (no ``len(x)`` by ``K`` temporaries)."""
        val, slope = np.empty(x.shape), np.empty(x.shape)
        for i in range(0, x.size, _CHUNK):
            val[i : i + _CHUNK], slope[i : i + _CHUNK] = self.value_and_slope(x[i : i + _CHUNK])
        return val, slope

    def hermite_start(self, target: FloatArray) -> FloatArray | None:
        """Starts for ``F(x) = target`` on a long increasing 1-D ``target``: Newton to convergence on every
        ``_STRIDE``-th point, then the quintic Hermite interpolant of ``x(t) = F^{-1}(t)`` through them (values and
        the derivatives ``x' = 1 / F'``, ``x'' = -F'' / F'^3``; ``F''`` is the posterior variance of ``b``).
        ``x(t)`` is smooth and the nodes are close (64 grid steps), so the starts are within a few ulp of the
        roots; they are only starts: callers measure the realised ``|f(x) - s|`` and correct. ``None`` where the
        nodes cannot be formed (non-finite or not increasing)."""
        n = target.size
        idx = np.unique(np.r_[np.arange(0, n, _STRIDE), n - 1])
        tc = target[idx]
        xc = self._newton(tc, self._envelope(tc), 60)
        if not (np.all(np.isfinite(xc)) and np.all(np.diff(xc) > 0) and np.all(np.diff(tc) > 0)):
            return None
        t = self.a + self.b * xc[:, None]
        e = np.exp(t - np.max(t, axis=-1)[:, None])
        tot = np.sum(e, axis=-1)
        f1 = (e @ self.b) / tot
        f2 = np.maximum((e @ (self.b * self.b)) / tot - f1 * f1, 0.0)
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            d1, d2 = 1.0 / f1, -f2 / f1**3
        if not (np.all(np.isfinite(d1)) and np.all(np.isfinite(d2))):
            return None
        out = np.empty(n)
        for i in range(0, n, _CHUNK):
            tt = target[i : i + _CHUNK]
            j = np.clip(np.searchsorted(tc, tt, side="right") - 1, 0, tc.size - 2)
            hh = tc[j + 1] - tc[j]
            u = (tt - tc[j]) / hh
            u2 = u * u
            u3 = u2 * u
            u4 = u3 * u
            u5 = u4 * u
            h01 = 10 * u3 - 15 * u4 + 6 * u5
            out[i : i + _CHUNK] = (
                (1.0 - h01) * xc[j]
                + h01 * xc[j + 1]
                + hh * ((u - 6 * u3 + 8 * u4 - 3 * u5) * d1[j] + (-4 * u3 + 7 * u4 - 3 * u5) * d1[j + 1])
                + (0.5 * hh * hh) * ((u2 - 3 * u3 + 3 * u4 - u5) * d2[j] + (u3 - 2 * u4 + u5) * d2[j + 1])
            )
        return out

    def solve(self, s: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
        """``(x, f(x), f'(x))`` with ``f(x) = s`` for an increasing 1-D ``s`` inside ``(log w_0, inf)``, ``f`` the full
        log-sum-exp (with the flat component): starts from ``hermite_start``, one evaluation of ``f`` and ``f'``
        at every start (which is also the measurement the callers need), Newton steps on ``f`` only where
        ``|f(x) - s| > 4e-16 max(1, |s|)`` (the tolerance of ``_newton``), and ``inverse`` (Newton on ``F`` from
        the envelope, re-measured) for any point still outside it. The returned ``f(x)`` is the computed value at
        the returned ``x``, so ``max |f(x) - s|`` is the realised inversion error."""
        if math.isfinite(self.log_w0):
            with np.errstate(divide="ignore", invalid="ignore"):
                target = s + np.log(-np.expm1(self.log_w0 - s))
        else:
            target = s.copy()
        x = None
        if s.size > 4096 and np.all(np.diff(target) > 0):
            x = self.hermite_start(target)
        if x is None:
            x = self._newton(target, self._envelope(target), 60)
        val, slope = self.value_and_slope_chunked(x)
        tol = 4e-16 * np.maximum(1.0, np.abs(s))
        for _ in range(3):
            with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
                gap = val - s
                step = gap / slope
                bad = np.flatnonzero(
                    (np.abs(gap) > tol) & np.isfinite(step) & (np.abs(step) <= 1e-6 * (1.0 + np.abs(x)))
                )
            if bad.size == 0:
                break
            x[bad] = x[bad] - step[bad]
            val[bad], slope[bad] = self.value_and_slope_chunked(x[bad])
        with np.errstate(invalid="ignore"):
            rest = np.flatnonzero(~(np.abs(val - s) <= tol))
        if rest.size:  # far from the bulk (f nearly flat) or not finite: the envelope route, measured as it ends
            xr = self._newton(target[rest], self._envelope(target[rest]), 60)
            vr, sr = self.value_and_slope_chunked(xr)
            old_gap, new_gap = np.abs(val[rest] - s[rest]), np.abs(vr - s[rest])
            better = (new_gap < old_gap) | (np.isfinite(new_gap) & ~np.isfinite(old_gap))
            x[rest] = np.where(better, xr, x[rest])
            val[rest] = np.where(better, vr, val[rest])
            slope[rest] = np.where(better, sr, slope[rest])
        return x, val, slope

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


class _EdgeCells(_MixtureBase):
    """Fast certified cell masses and tail-cut grid ends for the two directions of a scalar MoG.

    ``cell_masses`` solves ``L(x) = s`` at every edge with ``_ConvexLSE.solve`` (a quintic Hermite start from
    every 64th edge, then one evaluation of the loss and its slope per edge, which is both the measurement of the
    realised error ``max |L(x) - s|`` and the density at the edge), integrates each cell from its two edges
    (``losses._cells.hermite_cell_masses``: the corrected trapezoid, truncation at most ``D^5 / 720`` times the
    largest fourth derivative, proven there), and falls back to ``gaussian_cell_masses_and_errors``
    (Gauss-Legendre or CDF differences, as before) on the cells that rule does not certify.

    The P-density at an edge is ``p(x) = q(x) e^(L(x))`` (remove: ``Q = N(0, s^2)``, ``L`` the log-sum-exp ``f``)
    or ``phi(x / s) / s`` (add: ``P = N(0, s^2)``), computed as ``exp(log p)``. Its relative error ``rho``: every
    term ``a_i + b_i x`` of the log-sum-exp and ``x^2 / (2 s^2)`` is at most ``T = max|log w| + ((|x| + A) / s)^2``
    in size (``A``: the largest ``|c_i|``) and is formed by a few operations (``8u T`` each); shifting by the
    maximum, the ``K`` exponentials and their sum, the log, the subtraction of ``log(s sqrt(2 pi))`` and the final
    ``exp`` add ``(K + 8) u + |log(s sqrt(2 pi))| u``; ``rho = 16 u (K + 8 + T + |log(s sqrt(2 pi))|)`` covers it
    with room. ``(log p)' = f'(x) - x / s^2`` (remove) or ``-x / s^2`` (add): ``f'`` is the posterior mean of
    ``b = c / s^2`` under weights of relative error ``rho``, within ``2.1 rho A / s^2 + (2K + 6) u (A + |x|) / s^2``;
    ``dlog_err = (6 A rho + 8 (K + 4) u (A + |x|)) / s^2`` covers it. The realised edge error and the weights'
    ``log1p(weight_error)`` are reported as ``outputs_at`` reports them.

    ``lower_quantile`` / ``upper_quantile``: where the support's end is finite it can lie far out where P has
    almost no mass (the log of the lightest weight: ``-64.6`` for a group of 31 at rate 0.88, against ``-17`` at
    P-mass ``1e-11``: half the grid), so the grids stop at ``tail_point`` instead, as at an infinite end. The
    point is taken at half the mass (its loss is computed: the factor 2 is room for that rounding, so the
    quantiles' promise ``P(Y <= s) <= mass`` holds). The
    engine's upper variant moves the mass below the grid up into its first cell and the mass above to ``+inf``
    (both on the safe side) and counts both as truncated (``discretise``): the cut mass is measured, not assumed.
    """

    if TYPE_CHECKING:

        @property
        def _lse(self) -> _ConvexLSE: ...

    _reflected = False  # the add direction: L(x) = -f(-x)

    def lower_quantile(self, mass: float) -> float:
        lo = super().lower_quantile(mass)
        if math.isfinite(lo):
            t = self.tail_point(0.5 * mass, upper=False)  # (half: room for the loss's rounding)
            if math.isfinite(t) and t > lo:
                return t
        return lo

    def upper_quantile(self, mass: float) -> float:
        hi = super().upper_quantile(mass)
        if math.isfinite(hi):
            t = self.tail_point(0.5 * mass, upper=True)
            if math.isfinite(t) and t < hi:
                return t
        return hi

    def _p_side(self) -> tuple[int, float, float, tuple[float, float]]:
        """``(K, max|log w|, A, (min a, max a))`` of P's components."""
        a, lw, _, _, _ = self._par
        return a.size, float(np.max(np.abs(lw))), float(np.max(np.abs(a))), (float(a.min()), float(a.max()))

    def cell_masses(self, edges: ArrayLike) -> tuple[float, float, FloatArray, tuple[float, float], float]:
        s = np.asarray(edges, float)
        if s.ndim != 1 or s.size < 2 or not np.all(np.diff(s) > 0):
            return super().cell_masses(edges)
        lo, hi = self._limits
        inside = (s > lo) & (s < hi)
        x = np.where(s <= lo, -np.inf, np.inf)
        val = np.full(s.shape, np.nan)
        slope = np.full(s.shape, np.nan)
        err = 0.0
        if np.any(inside):
            si = s[inside]
            if self._reflected:  # L(x) = -f(-x): solve f(u) = -s on the reversed (increasing) targets
                u, fv, fs = (arr[::-1] for arr in self._lse.solve(-si[::-1]))
                xi, li, di = -u, -fv, fs
            else:
                xi, li, di = self._lse.solve(si)
            x[inside], val[inside], slope[inside] = xi, li, di
            fin = np.isfinite(li)
            if np.any(fin):
                err = float(np.max(np.abs(li[fin] - si[fin])))
        weight_error = float(getattr(self, "weight_error", 0.0) or 0.0)
        if weight_error:  # as ``_WeightError.outputs_at``
            err = err + math.log1p(weight_error) * (1.0 + 1e-6)
        sig = self.sigma
        s2 = sig * sig
        c0 = math.log(sig * _SQRT2PI)
        k, max_lw, big_a, mean_range = self._p_side()
        with np.errstate(invalid="ignore", over="ignore"):
            if self._reflected:  # P = N(0, s^2)
                log_p = -0.5 * (x / sig) ** 2 - c0
                dlog_p = -x / s2
            else:  # p = q e^L, q = N(0, s^2)
                log_p = val - 0.5 * (x / sig) ** 2 - c0
                dlog_p = slope - x / s2
            rho = 16 * _U * (k + 8 + max_lw + abs(c0) + ((np.abs(x) + big_a) / sig) ** 2)
            dlog_err = (6.0 * big_a * rho + 8 * (k + 4) * _U * (big_a + np.abs(x))) / s2
        masses, errs, ok = hermite_cell_masses(x, log_p, dlog_p, rho, dlog_err, sig, mean_range)
        a, _, _, _, w = self._par
        ends = self._cdf_sf_at_x(x[[0, -1]])
        below, above = float(ends[0][0]), float(ends[1][1])
        rest = np.flatnonzero(~ok)
        if rest.size:  # the cells the edge rule leaves: Gauss-Legendre or CDF differences, as before
            xe = np.empty(2 * rest.size)
            xe[0::2], xe[1::2] = x[rest], x[rest + 1]
            c, sf = self._cdf_sf_at_x(xe)
            m_r, e_r = gaussian_cell_masses_and_errors(xe, a, w, sig, c, sf)
            masses[rest], errs[rest] = m_r[0::2], e_r[0::2]
        return below, above, masses, split_errors(masses, errs), err


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
class MixtureRemoveLoss(_WeightError, _EdgeCells, _AccurateTails, GaussianMixtureLoss):
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
class MixtureAddLoss(_WeightError, _EdgeCells, _AccurateTails, GaussianMixtureLoss):
    """Add direction of a scalar MoG, reflected ``x -> -x`` so the loss increases:
    ``P = N(0, s^2)``, ``Q = sum p_i N(-c_i, s^2)`` (Ganesh 2024, Def. 2.8); ``L(x) = -f(-x)``.
    ``weight_error``: see ``_WeightError``."""

    weight_error: float = 0.0
    _reflected = True

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

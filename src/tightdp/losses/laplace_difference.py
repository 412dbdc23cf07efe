"""The privacy loss of the difference of two Laplace variables under a shift.

``Z = X_1 - X_2`` with ``X_i`` i.i.d. Laplace of scale ``b`` has the density
``f(x) = (1 + |x| / b) e^(-|x| / b) / (4 b)`` and the survival function ``e^(-x / b) (1 + x / (2 b)) / 2`` for
``x >= 0``. The pair is ``P = f`` against ``Q = f(. - s)``: report-noisy-max with Laplace noise over two
candidates releases a threshold of ``Z`` shifted by the score gap, which moves by at most ``s = 2 Delta``
between neighbours (``tightdp.mechanisms.selection``).

The loss ``L(x) = log(1 + |x| / b) - log(1 + |x - s| / b) - (|x| - |x - s|) / b`` decreases strictly from
``s / b`` (``x -> -inf``) to ``-s / b`` (``x -> +inf``), with ``L(s - x) = -L(x)``: the pair is symmetric, so the
add direction is the same loss. Off ``[0, s]`` it inverts in closed form (for ``x <= 0``,
``e^(L - s / b) = (b - x) / (b + s - x)``); on ``[0, s]`` by bisection, and the realised distance of every
inverted edge from its loss value is measured and handed to the engine (``cdf_sf``'s edge error), as for
the Gaussian mixtures.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from .._types import ArrayLike, FloatArray
from ._cells import _gauss_legendre_integral
from .base import PrivacyLoss, difference_masses, split_errors

__all__ = ["LaplaceDifferenceLoss"]

#: the partial mean's quadrature stops this many scales out, where the density's mass is below 1e-300
_REACH = 700.0


@dataclass(frozen=True)
class LaplaceDifferenceLoss(PrivacyLoss):
    """Privacy loss of ``P = f`` against ``Q = f(. - shift)``, ``f`` the density of the difference of two
    i.i.d. Laplace variables of scale ``scale`` (module docstring).

    Parameters
    ----------
    scale : float
        The Laplace scale ``b``, positive.
    shift : float
        The shift ``s``, positive; the loss lies in ``(-s / b, s / b)``.

    Raises
    ------
    ValueError
        If ``scale`` or ``shift`` is not a positive finite number.

    References
    ----------
    Dwork & Roth 2014, Claim 3.9 (report-noisy-max with Laplace noise).
    """

    scale: float
    shift: float

    has_q_side = True

    def __post_init__(self) -> None:
        for name in ("scale", "shift"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a positive finite number, got {v!r}")
            object.__setattr__(self, name, float(v))

    # ------------------------------------------------------------------ the output space
    def loss(self, x: ArrayLike) -> FloatArray:
        """``L(x) = log f(x) - log f(x - shift)`` (vectorised).

        Parameters
        ----------
        x : array_like of float
            Outputs.

        Returns
        -------
        numpy.ndarray of float
            The losses.

        Raises
        ------
        ValueError
            If ``x`` cannot be read as floats (numpy's error).
        """
        x = np.asarray(x, float)
        b, s = self.scale, self.shift
        ax, axs = np.abs(x), np.abs(x - s)
        out: FloatArray = np.log1p(ax / b) - np.log1p(axs / b) - (ax - axs) / b
        return out

    @cached_property
    def _kink(self) -> float:
        """``L(0) = s / b - log(1 + s / b)``; ``L(s) = -L(0)``."""
        r = self.shift / self.scale
        return r - math.log1p(r)

    def _tail(self, x: FloatArray) -> FloatArray:
        """``P(Z > |x|)`` (0 at infinite ``x``)."""
        b = self.scale
        ax = np.abs(x)
        finite = np.isfinite(ax)
        a = np.where(finite, ax, 0.0)
        out: FloatArray = np.where(finite, 0.5 * np.exp(-a / b) * (1.0 + a / (2.0 * b)), 0.0)
        return out

    def _survival(self, x: FloatArray) -> FloatArray:
        """``P(Z > x)`` under ``f`` (no cancellation on either side)."""
        tail = self._tail(x)
        out: FloatArray = np.where(x >= 0, tail, 1.0 - tail)
        return out

    def _below(self, x: FloatArray) -> FloatArray:
        """``P(Z <= x)`` under ``f``."""
        tail = self._tail(x)
        out: FloatArray = np.where(x < 0, tail, 1.0 - tail)
        return out

    def inverse(self, t: ArrayLike) -> FloatArray:
        """The outputs ``x`` with ``L(x) = t`` for ``t`` inside ``(-s / b, s / b)`` (module docstring).

        Parameters
        ----------
        t : array_like of float
            Loss values inside the support.

        Returns
        -------
        numpy.ndarray of float
            The outputs (``outputs_at`` measures how far ``L(x)`` lies from ``t``).

        Raises
        ------
        ValueError
            If ``t`` cannot be read as floats (numpy's error).
        """
        t = np.asarray(t, float)
        b, s = self.scale, self.shift
        r = s / b
        k = self._kink

        def left(v: FloatArray) -> FloatArray:  # x <= 0 with L(x) = v >= L(0)
            q = np.exp(v - r)  # (b - x) / (b + s - x), in (b / (b + s), 1)
            with np.errstate(divide="ignore", invalid="ignore"):
                out: FloatArray = b - q * s / (-np.expm1(v - r))
            return out

        x = np.empty_like(t)
        hi, lo = t >= k, t <= -k
        x[hi] = left(t[hi])
        x[lo] = s - left(-t[lo])  # L(s - x) = -L(x)
        mid = ~(hi | lo)
        if np.any(mid):
            a, c = np.zeros(int(mid.sum())), np.full(int(mid.sum()), s)
            tm = t[mid]
            for _ in range(200):  # bisection on [0, s], where L falls from k to -k
                m = 0.5 * (a + c)
                above = self.loss(m) > tm
                a, c = np.where(above, m, a), np.where(above, c, m)
                if np.all(c - a <= 4 * np.finfo(float).eps * np.maximum(1.0, np.abs(c))):
                    break
            x[mid] = 0.5 * (a + c)
        return x

    def outputs_at(self, t: ArrayLike) -> tuple[FloatArray, float]:
        """The outputs with ``L(x) = t`` and the largest ``|L(x) - t|`` realised (``+-inf`` outside the support).

        Parameters
        ----------
        t : array_like of float
            Loss values.

        Returns
        -------
        tuple
            ``(x, error)``.

        Raises
        ------
        ValueError
            If ``t`` cannot be read as floats (numpy's error).
        """
        t = np.asarray(t, float)
        r = self.shift / self.scale
        inside = (t > -r) & (t < r)
        x = np.where(t <= -r, np.inf, -np.inf)  # L decreases: low losses sit at large outputs
        err = 0.0
        if np.any(inside):
            xi = self.inverse(t[inside])
            finite = np.isfinite(xi)
            x[inside] = xi
            if np.any(finite):
                err = float(np.max(np.abs(self.loss(xi[finite]) - t[inside][finite])))
            if not np.all(finite):  # a loss within rounding of the support's end: its output is infinite
                err = max(err, float(np.max(np.abs(np.abs(t[inside][~finite]) - r))))
        return x, err

    # ------------------------------------------------------------------ loss space
    def cdf_sf(self, edges: ArrayLike) -> tuple[FloatArray, FloatArray, float]:
        x, err = self.outputs_at(edges)
        # L(X) <= t  <=>  X >= x(t)
        return self._survival(x), self._below(x), err

    def cdf(self, s: ArrayLike) -> FloatArray:
        return self.cdf_sf(np.atleast_1d(s))[0].reshape(np.shape(s))

    def sf(self, s: ArrayLike) -> FloatArray:
        return self.cdf_sf(np.atleast_1d(s))[1].reshape(np.shape(s))

    def cell_masses(self, edges: ArrayLike) -> tuple[float, float, FloatArray, tuple[float, float], float]:
        cdf, sf, err = self.cdf_sf(edges)
        masses, errs = difference_masses(cdf, sf)
        return float(cdf[0]), float(sf[-1]), masses, split_errors(masses, errs), err

    def q_cell_masses(self, edges: ArrayLike) -> tuple[FloatArray, tuple[float, float]]:
        x, _ = self.outputs_at(edges)  # one inversion for both sides' values (``q_cdf`` and ``q_sf`` each invert)
        masses, errs = difference_masses(self._survival(x - self.shift), self._below(x - self.shift))
        return masses, split_errors(masses, errs)

    def q_cdf(self, s: ArrayLike) -> FloatArray:
        x, _ = self.outputs_at(np.atleast_1d(s))
        return self._survival(x - self.shift).reshape(np.shape(s))

    def q_sf(self, s: ArrayLike) -> FloatArray:
        x, _ = self.outputs_at(np.atleast_1d(s))
        return self._below(x - self.shift).reshape(np.shape(s))

    def support(self) -> tuple[float, float]:
        r = self.shift / self.scale
        return -r, r

    def partial_mean(self, a: float, b: float) -> tuple[float, float]:
        r = self.shift / self.scale
        a, b = max(a, -r), min(b, r)
        if b <= a:
            return 0.0, 0.0
        # a < L <= b  <=>  x(b) <= X < x(a); outside +-_REACH scales the mass is below 1e-300
        sc = self.scale
        x_lo = -_REACH * sc if b >= r else max(float(self.inverse(np.array([b]))[0]), -_REACH * sc)
        x_hi = _REACH * sc + self.shift if a <= -r else min(float(self.inverse(np.array([a]))[0]), _REACH * sc)

        def g(x: FloatArray) -> FloatArray:
            ax = np.abs(x)
            out: FloatArray = self.loss(x) * (1.0 + ax / sc) * np.exp(-ax / sc) / (4.0 * sc)
            return out

        # pieces between the kinks (0 and s) and, beyond them, widths of a few scales
        cuts = sorted({x_lo, x_hi, *(c for c in (0.0, self.shift) if x_lo < c < x_hi)})
        total, err = 0.0, 0.0
        for lo, hi in itertools.pairwise(cuts):
            panels = max(1, min(400, math.ceil((hi - lo) / (2.0 * sc))))
            v1 = _gauss_legendre_integral(g, lo, hi, panels, 16)
            v2 = _gauss_legendre_integral(g, lo, hi, panels, 32)
            total += v2
            err += 10.0 * abs(v2 - v1) + 1e-15 * abs(v2)
        return total, err + 1e-14 * (abs(total) + 1e-3) + 1e-300

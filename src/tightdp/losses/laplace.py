"""The Laplace mechanism's loss (atoms at ``+-Delta/b`` and a continuous part between) and the Poisson-subsampled
Laplace loss."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._types import ArrayLike, FloatArray
from ._cells import AtomCells, _gauss_legendre_integral, _laplace_interval_mass, _place_atoms
from .base import PrivacyLoss

__all__ = ["LaplaceLoss", "PoissonLaplaceLoss"]


@dataclass(frozen=True)
class LaplaceLoss(AtomCells, PrivacyLoss):
    """The privacy loss of the Laplace mechanism, ``P = Lap(0, b)`` against ``Q = Lap(Delta, b)``.

    With ``r = Delta / b``: ``Y = r`` with probability 1/2, ``Y = -r`` with probability ``exp(-r)/2``,
    and on ``(-r, r)`` the CDF is ``exp(-(r - s)/2)/2``.

    Parameters
    ----------
    r : float
        ``sensitivity / scale``, positive (``Laplace`` validates it).

    Raises
    ------
    TypeError
        If ``r`` is missing.

    References
    ----------
    Koskela et al. 2020, Sec. 6 (the PLD formalism); Zhu, Dong, Wang 2022, "Optimal accounting of
    differential privacy via characteristic function" (the Laplace pair).
    """

    r: float  # sensitivity / scale

    def cdf(self, s: ArrayLike) -> FloatArray:
        s = np.asarray(s, float)
        r = self.r
        inner = 0.5 * np.exp(-(r - np.clip(s, -r, r)) / 2.0)
        return np.where(s < -r, 0.0, np.where(s >= r, 1.0, inner))

    def sf(self, s: ArrayLike) -> FloatArray:
        s = np.asarray(s, float)
        r = self.r
        inner = 1.0 - 0.5 * np.exp(-(r - np.clip(s, -r, r)) / 2.0)
        inner = -0.5 * np.expm1(-(r - np.clip(s, -r, r)) / 2.0) + 0.5
        return np.where(s < -r, 1.0, np.where(s >= r, 0.0, inner))

    def partial_mean(self, a: float, b: float) -> tuple[float, float]:
        r = self.r
        val = 0.0
        if a < r <= b:
            val += 0.5 * r
        if a < -r <= b:
            val += -r * 0.5 * math.exp(-r)
        lo, hi = max(a, -r), min(b, r)
        if hi > lo:
            # density on (-r, r): exp(-(r - s)/2) / 4
            from scipy import integrate  # lazily: scipy.integrate costs 0.4 s of import

            def f(s: float) -> float:
                return s * math.exp(-(r - s) / 2.0) / 4.0

            v, err = integrate.quad(f, lo, hi, epsabs=1e-15, epsrel=1e-13)
            val += v
            return val, float(10 * err + 1e-15)
        return val, 1e-15

    def support(self) -> tuple[float, float]:
        return -self.r, self.r

    has_q_side = True

    def q_cdf(self, s: ArrayLike) -> FloatArray:
        """``Q(Y <= s)`` for ``Q = Lap(Delta, b)``: atom 1/2 at ``-r``, density ``exp(-(r + s)/2)/4`` on ``(-r, r)``,
        atom ``exp(-r)/2`` at ``r``; so ``Q(Y <= s) = 1 - exp(-(r + s)/2)/2`` on ``[-r, r)``.

        Parameters
        ----------
        s : array_like of float
            Loss values, any real.

        Returns
        -------
        numpy.ndarray of float
            ``Q(Y <= s)`` elementwise.

        Raises
        ------
        ValueError
            If ``s`` cannot be read as floats (numpy's error).
        """
        s = np.asarray(s, float)
        r = self.r
        inner = 1.0 - 0.5 * np.exp(-(r + np.clip(s, -r, r)) / 2.0)
        return np.where(s < -r, 0.0, np.where(s >= r, 1.0, inner))

    def q_sf(self, s: ArrayLike) -> FloatArray:
        s = np.asarray(s, float)
        r = self.r
        inner = 0.5 * np.exp(-(r + np.clip(s, -r, r)) / 2.0)
        return np.where(s < -r, 1.0, np.where(s >= r, 0.0, inner))

    def _cells_pq(
        self, edges: ArrayLike, apart: bool = False
    ) -> tuple[float, float, FloatArray, FloatArray, float, tuple[FloatArray, FloatArray] | None]:
        """P- and Q-masses of the cells ``(e_i, e_(i+1)]`` in closed form (no cancellation): the
        continuous part ``-exp(-(r - v)/2) expm1(-(v - u)/2) / 2`` under P and
        ``-exp(-(r + u)/2) expm1(-(v - u)/2) / 2`` under Q on ``(u, v) = cell ^ (-r, r)``, plus the atoms
        (``-r``: P ``exp(-r)/2``, Q ``1/2``; ``r``: P ``1/2``, Q ``exp(-r)/2``)."""
        e = np.asarray(edges, float)
        r = self.r
        a, b = e[:-1], e[1:]
        u, v = np.clip(a, -r, r), np.clip(b, -r, r)
        w = np.where(v > u, -np.expm1(-(v - u) / 2.0), 0.0)
        P = 0.5 * np.exp(-(r - v) / 2.0) * w
        Q = 0.5 * np.exp(-(r + u) / 2.0) * w
        below, above, edge_err, atoms = _place_atoms(
            e, (-r, r), (0.5 * math.exp(-r), 0.5), (0.5, 0.5 * math.exp(-r)), P, Q, apart
        )
        if e[0] > -r:  # the continuous part below the grid
            below += float(0.5 * np.exp(-(r - min(e[0], r)) / 2.0) * -np.expm1(-(min(e[0], r) + r) / 2.0))
        if e[-1] < r:  # and above it
            above += float(0.5 * -np.expm1(-(r - max(e[-1], -r)) / 2.0))
        return below, above, P, Q, edge_err, atoms

    def lattice_atoms(self) -> tuple[float, ...]:
        return (-self.r, self.r)

    def total_variation(self) -> float | None:
        """``1 - e^(-r/2)``, the total variation of two Laplace laws ``r`` scales apart (rounding paid).

        Returns
        -------
        float or None
            The bound.
        """
        return min(1.0, -math.expm1(-0.5 * self.r) * (1.0 + 1e-12))


@dataclass(frozen=True)
class PoissonLaplaceLoss(AtomCells, PrivacyLoss):
    """The privacy loss of the Poisson-subsampled Laplace mechanism (noise scale ``b``, sensitivity 1, rate ``q``).

    remove: ``P = q Lap(1, b) + (1 - q) Lap(0, b)``, ``Q = Lap(0, b)``, so
    ``L(x) = log(1 - q + q exp(g(x)))`` with ``g(x) = (|x| - |x - 1|) / b``;
    add: ``P = Lap(0, b)``, ``Q`` the mixture, ``L(x) = -log(1 - q + q exp(g(x)))``.
    ``g`` is constant outside ``(0, 1)``, so the loss has two atoms (at ``g = -+1/b``)
    and a continuous part between (the subsampled analogue of ``LaplaceLoss``).

    Parameters
    ----------
    q : float
        Sampling rate in ``(0, 1)``.
    b : float
        Noise scale per unit sensitivity, positive.
    direction : str
        ``"remove"`` or ``"add"``.

    Raises
    ------
    TypeError
        If a parameter is missing.

    References
    ----------
    Koskela et al. 2020, Sec. 6.1 (Poisson subsampling of a pair).
    """

    q: float
    b: float
    direction: str  # "remove" or "add"

    def _ell(self, g: FloatArray | float) -> FloatArray:
        out: FloatArray = np.logaddexp(math.log1p(-self.q), math.log(self.q) + g)
        return out

    def _lap_cdf(self, x: ArrayLike, loc: float) -> FloatArray:
        z = (np.asarray(x, float) - loc) / self.b
        return np.where(z < 0, 0.5 * np.exp(np.minimum(z, 0.0)), 1.0 - 0.5 * np.exp(-np.maximum(z, 0.0)))

    def _lap_sf(self, x: ArrayLike, loc: float) -> FloatArray:
        z = (np.asarray(x, float) - loc) / self.b
        return np.where(z > 0, 0.5 * np.exp(-np.maximum(z, 0.0)), 1.0 - 0.5 * np.exp(np.minimum(z, 0.0)))

    def _p_cdf(self, x: ArrayLike) -> FloatArray:
        if self.direction == "remove":
            return self.q * self._lap_cdf(x, 1.0) + (1 - self.q) * self._lap_cdf(x, 0.0)
        return self._lap_cdf(x, 0.0)

    def _p_sf(self, x: ArrayLike) -> FloatArray:
        if self.direction == "remove":
            return self.q * self._lap_sf(x, 1.0) + (1 - self.q) * self._lap_sf(x, 0.0)
        return self._lap_sf(x, 0.0)

    def support(self) -> tuple[float, float]:
        lo, hi = float(self._ell(-1.0 / self.b)), float(self._ell(1.0 / self.b))
        return (lo, hi) if self.direction == "remove" else (-hi, -lo)

    def _x_of(self, s: ArrayLike) -> FloatArray:
        """The output x in [0, 1] where the loss equals s (clipped at the atoms)."""
        s = np.asarray(s, float)
        e = s if self.direction == "remove" else -s
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # e > 709: inf, clipped to x = 1 below
            g = np.log(np.maximum(np.expm1(e) + self.q, 1e-300)) - math.log(self.q)
        out: FloatArray = np.clip((self.b * g + 1.0) / 2.0, 0.0, 1.0)
        return out

    def cdf(self, s: ArrayLike) -> FloatArray:
        s = np.asarray(s, float)
        lo, hi = self.support()
        x = self._x_of(s)
        # remove: L increasing in x, P(L <= s) = P(X <= x_s); add: decreasing, P(L <= s) = P(X >= x_s)
        inner = self._p_cdf(x) if self.direction == "remove" else self._p_sf(x)
        return np.where(s < lo, 0.0, np.where(s >= hi, 1.0, inner))

    def sf(self, s: ArrayLike) -> FloatArray:
        s = np.asarray(s, float)
        lo, hi = self.support()
        x = self._x_of(s)
        inner = self._p_sf(x) if self.direction == "remove" else self._p_cdf(x)
        return np.where(s < lo, 1.0, np.where(s >= hi, 0.0, inner))

    has_q_side = True

    def _q_cdf_x(self, x: ArrayLike) -> FloatArray:
        if self.direction == "remove":  # Q = Lap(0, b)
            return self._lap_cdf(x, 0.0)
        return self.q * self._lap_cdf(x, 1.0) + (1 - self.q) * self._lap_cdf(x, 0.0)

    def _q_sf_x(self, x: ArrayLike) -> FloatArray:
        if self.direction == "remove":
            return self._lap_sf(x, 0.0)
        return self.q * self._lap_sf(x, 1.0) + (1 - self.q) * self._lap_sf(x, 0.0)

    def q_cdf(self, s: ArrayLike) -> FloatArray:
        """``Q(Y <= s)``: the output set is the same as for ``cdf`` (``x <= x_s`` for remove, where the loss
        increases in ``x``; ``x >= x_s`` for add), measured under Q.

        Parameters
        ----------
        s : array_like of float
            Loss values, any real.

        Returns
        -------
        numpy.ndarray of float
            ``Q(Y <= s)`` elementwise.

        Raises
        ------
        ValueError
            If ``s`` cannot be read as floats (numpy's error).
        """
        s = np.asarray(s, float)
        lo, hi = self.support()
        x = self._x_of(s)
        inner = self._q_cdf_x(x) if self.direction == "remove" else self._q_sf_x(x)
        return np.where(s < lo, 0.0, np.where(s >= hi, 1.0, inner))

    def q_sf(self, s: ArrayLike) -> FloatArray:
        s = np.asarray(s, float)
        lo, hi = self.support()
        x = self._x_of(s)
        inner = self._q_sf_x(x) if self.direction == "remove" else self._q_cdf_x(x)
        return np.where(s < lo, 1.0, np.where(s >= hi, 0.0, inner))

    def _cells_pq(
        self, edges: ArrayLike, apart: bool = False
    ) -> tuple[float, float, FloatArray, FloatArray, float, tuple[FloatArray, FloatArray] | None]:
        """P- and Q-masses of the loss cells ``(e_i, e_(i+1)]`` as masses of output intervals, each a
        sum of positive Laplace interval masses (relative-accurate), and the largest distance
        ``|L(x_i) - e_i|`` of the realised output edges (the inversion is in floats). With ``apart``: the
        cells of the outputs in ``(0, 1)`` only (the density), and the two atoms (outputs ``x <= 0`` and ``x >=
        1``) per edge where they sit on one (``_place_atoms``)."""
        e = np.asarray(edges, float)
        lo, hi = self.support()
        if apart:
            P, Q = self._interval_masses(self._x_of(e))  # x clipped to [0, 1]: the density only
            p0, p1 = float(self._p_cdf(0.0)), float(self._p_sf(1.0))  # P(X <= 0), P(X >= 1)
            q0, q1 = float(self._q_cdf_x(0.0)), float(self._q_sf_x(1.0))
            # remove: x <= 0 has the lowest loss; add: the highest
            atoms = ((lo, hi), (p0, p1), (q0, q1)) if self.direction == "remove" else ((lo, hi), (p1, p0), (q1, q0))
            below, above, moved, placed = _place_atoms(e, *atoms, P, Q, True)
            return below, above, P, Q, moved, placed
        x = self._x_of(e)
        # outputs below 0 carry the loss lo (remove) / hi (add); the atom belongs where the edges bracket it
        x = (
            np.where(e < lo, -np.inf, np.where(e >= hi, np.inf, x))
            if self.direction == "remove"
            else np.where(e < lo, np.inf, np.where(e >= hi, -np.inf, x))
        )
        P, Q = self._interval_masses(x)
        inner = (e > lo) & (e < hi)
        edge = 0.0
        if np.any(inner):
            xi = x[inner]
            realised = self._ell((np.abs(xi) - np.abs(xi - 1.0)) / self.b)
            realised = realised if self.direction == "remove" else -realised
            edge = float(np.max(np.abs(realised - e[inner])))
        return float(self.cdf(e[:1])[0]), float(self.sf(e[-1:])[0]), P, Q, edge, None

    def _interval_masses(self, x: FloatArray) -> tuple[FloatArray, FloatArray]:
        """P- and Q-masses of the output intervals between the cell edges' outputs ``x`` (the loss rises in
        ``x`` for remove, falls for add), each a sum of positive Laplace interval masses."""
        xa, xb = (x[:-1], x[1:]) if self.direction == "remove" else (x[1:], x[:-1])
        q = self.q

        def lap(loc: float) -> FloatArray:
            return _laplace_interval_mass(xa, xb, loc, self.b)

        mix = q * lap(1.0) + (1.0 - q) * lap(0.0)
        return (mix, lap(0.0)) if self.direction == "remove" else (lap(0.0), mix)

    def lattice_atoms(self) -> tuple[float, ...]:
        return self.support()  # the outputs x <= 0 and x >= 1 carry the two end losses

    def total_variation(self) -> float | None:
        """``q (1 - e^(-1/(2b)))``: in either direction ``P - Q = +-q (Lap(1, b) - Lap(0, b))`` (the unsampled part
        is common to both), whose total variation is ``q`` times the two Laplace laws' (rounding paid).

        Returns
        -------
        float or None
            The bound.
        """
        return min(1.0, self.q * -math.expm1(-0.5 / self.b) * (1.0 + 1e-12))

    def partial_mean(self, a: float, b: float) -> tuple[float, float]:
        lo, hi = self.support()
        val = 0.0
        # the atoms: remove -> lo has P(X <= 0), hi has P(X >= 1); add -> reversed
        p0 = float(self._p_cdf(0.0))
        p1 = float(self._p_sf(1.0))
        atoms = ((lo, p0), (hi, p1)) if self.direction == "remove" else ((lo, p1), (hi, p0))
        for v, p in atoms:
            if a < v <= b:
                val += v * p
        # continuous part: x in (0, 1), loss L(x), density of P
        xa, xb = float(self._x_of(max(a, lo))), float(self._x_of(min(b, hi)))
        xa, xb = min(xa, xb), max(xa, xb)
        if xb > xa:
            sign = 1.0 if self.direction == "remove" else -1.0

            def f(xs: FloatArray) -> FloatArray:
                x = np.asarray(xs, float)
                dens = (self.q * np.exp(-np.abs(x - 1.0) / self.b) if self.direction == "remove" else 0.0) + (
                    1 - self.q if self.direction == "remove" else 1.0
                ) * np.exp(-np.abs(x) / self.b)
                out: FloatArray = sign * self._ell((2 * x - 1.0) / self.b) * dens / (2 * self.b)
                return out

            v1 = _gauss_legendre_integral(f, xa, xb, 32, 16)
            v2 = _gauss_legendre_integral(f, xa, xb, 32, 32)
            val += v2
            return val, 10 * abs(v2 - v1) + 1e-15
        return val, 1e-15

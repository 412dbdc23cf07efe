"""Concrete privacy loss random variables (the engine's vocabulary).

* ``GaussianLoss``: the Gaussian mechanism, ``Y ~ N(mu^2/2, mu^2)`` with
  ``mu = sensitivity / sigma`` (the mu-GDP curve, Dong et al.; 003 eq. (10)).
* ``DiscreteLoss``: finitely many atoms (pure DP, approximate DP, randomized
  response) and an optional atom at ``+inf``.
* ``LaplaceLoss``: the Laplace mechanism, atoms at ``+-Delta/b`` and a
  continuous part between.
* ``GaussianMixtureLoss``: ``P = sum_i w_i N(a_i, s^2)``, ``Q = sum_j v_j N(b_j, s^2)``
  with ``min a >= max b`` so the loss is non-decreasing in the output. This one
  class covers the subsampled Gaussian under Poisson sampling (001 Sec. 6.1),
  sampling without replacement (6.2), with replacement (6.3) and the
  mixture-of-Gaussians mechanisms of group privacy (002 Thm 3.1, 3.3).
  Poisson sampling and sampling without replacement use the closed-form
  inverses of 001 Sec. 6.1-6.2; other mixtures invert numerically, and the
  inversion error is measured and handed to the engine, which widens its
  coupling accordingly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from scipy import special

from .._numerics import logsumexp
from .base import PrivacyLoss, difference_masses, split_errors

__all__ = [
    "GaussianLoss",
    "DiscreteLoss",
    "LaplaceLoss",
    "GaussianMixtureLoss",
    "poisson_gaussian_loss",
    "without_replacement_gaussian_loss",
]

_SQRT2PI = math.sqrt(2.0 * math.pi)
_U = float(np.finfo(float).eps) / 2


def _gauss_legendre(n: int):
    """``n``-point Gauss-Legendre nodes, weights, the truncation constant ``(n!)^4 / ((2n+1) ((2n)!)^3)`` and
    ``sqrt(2n) + 0.03``, which bounds ``|He_2n(z)|^(1/2n) - |z|`` inside a cell
    (``gaussian_mixture_cell_masses``)."""
    nodes, weights = np.polynomial.legendre.leggauss(n)
    return nodes, weights, math.factorial(n) ** 4 / ((2 * n + 1) * math.factorial(2 * n) ** 3), math.sqrt(2 * n) + 0.03


#: (widest cell in sigma, rule): 4 points below 0.01 sigma (truncation below 1e-16 relative ten standard deviations
#: out), 8 points up to 0.05 sigma; wider cells difference the CDF / survival values
_GL_RULES = ((0.01, _gauss_legendre(4)), (0.05, _gauss_legendre(8)))
_NARROW = _GL_RULES[-1][0]  # cells narrower than this many sigma are integrated, not differenced


#: atoms this close (relative) to a cell edge are counted in the cell below it (``_atom_cells``)
_ATOM_SNAP = 1e-12


def _atom_cells(edges: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """``(cell, on_edge, moved)``: the cell ``(e_i, e_(i+1)]`` of every atom (``-1``: below the grid,
    ``>= len(edges) - 1``: above), whether it sits on that cell's upper edge, and the largest distance an
    atom was moved to put it there.

    An atom within ``_ATOM_SNAP`` (relative) of an edge is on that edge, whichever side of it rounding put
    the edge (``0.3`` against ``3 * 0.1 = 0.30000000000000004``), and belongs to the cell below it: on a
    lattice that holds the atoms every atom is a cell's upper edge, where both dominance constructions
    keep it exactly (a mesh's misplacement per step otherwise). The distance moved is charged by the
    constructions as an edge error (a loss shift)."""
    idx = np.searchsorted(edges, values, side="left") - 1
    if edges.size == 0:
        return idx, np.zeros(idx.shape, bool), 0.0
    near = np.clip(np.searchsorted(edges, values), 1, edges.size - 1)
    near = np.where(np.abs(edges[near - 1] - values) < np.abs(edges[near] - values), near - 1, near)
    gap = np.abs(edges[near] - values)
    snap = gap <= _ATOM_SNAP * (1.0 + np.abs(values))
    return np.where(snap, near - 1, idx), snap, float(np.max(gap[snap], initial=0.0))


def _place_atoms(edges: np.ndarray, values, p, q, P: np.ndarray, Q: np.ndarray, apart: bool):
    """Add atoms (losses ``values``, P-masses ``p``, Q-masses ``q``) to the cell masses ``P, Q`` in place;
    with ``apart``, atoms on an edge go to separate per-edge arrays instead. Returns ``(below, above,
    edge_err, atoms)``: the P-mass below / above the grid, the distance moved, and ``(P_at, Q_at)``
    (per edge; ``None`` without ``apart``)."""
    values, p, q = (np.asarray(x, float) for x in (values, p, q))
    idx, on_edge, edge_err = _atom_cells(edges, values)
    n = P.size
    atoms = (np.zeros(n + 1), np.zeros(n + 1)) if apart else None
    below = above = 0.0
    for i, on, pa, qa in zip(idx.tolist(), on_edge.tolist(), p.tolist(), q.tolist()):
        if i < 0:
            below += pa
        elif i >= n:
            above += pa
        elif apart and on:
            atoms[0][i + 1] += pa
            atoms[1][i + 1] += qa
        else:
            P[i] += pa
            Q[i] += qa
    return below, above, edge_err, atoms


def _ndtr(z):
    return special.ndtr(z)


def _laplace_interval_mass(xa, xb, loc: float, b: float) -> np.ndarray:
    """Mass of ``Lap(loc, b)`` on ``(xa, xb]`` (``xa <= xb``, infinities allowed) as a sum of positive
    terms, so it is relative-accurate (a few ulp) in the tails too: no CDF differences."""
    za = (np.asarray(xa, float) - loc) / b
    zb = (np.asarray(xb, float) - loc) / b
    with np.errstate(invalid="ignore", over="ignore"):
        gap = np.where(np.isfinite(za) & np.isfinite(zb), za - zb, -np.inf)
        left = -0.5 * np.exp(np.minimum(zb, 0.0)) * np.expm1(gap)  # both ends at or below loc
        right = -0.5 * np.exp(-np.maximum(za, 0.0)) * np.expm1(gap)  # both ends at or above loc
        across = -0.5 * np.expm1(np.minimum(za, 0.0)) - 0.5 * np.expm1(-np.maximum(zb, 0.0))
    out = np.where(zb <= 0.0, left, np.where(za >= 0.0, right, across))
    return np.where(zb > za, np.maximum(out, 0.0), 0.0)


_CELL_REL = 16 * float(np.finfo(float).eps)  # relative error of the closed-form cell masses (a few ops)


def gaussian_mixture_cell_masses(x_edges, means, weights, sigma, cdf, sf):
    """Masses of a Gaussian mixture between consecutive ``x_edges``, with ``(rel, l1)`` error bounds
    (``gaussian_cell_masses_and_errors``, its per-cell absolute bounds split by ``split_errors``)."""
    masses, err = gaussian_cell_masses_and_errors(x_edges, means, weights, sigma, cdf, sf)
    return masses, split_errors(masses, err)


def gaussian_cell_masses_and_errors(x_edges, means, weights, sigma, cdf, sf):
    """Masses of a Gaussian mixture between consecutive ``x_edges`` and a bound on each one's absolute error.

    Narrow cells (width ``w < 0.05 sigma``) use ``n``-point Gauss-Legendre quadrature
    of the density, without cancellation: rounding ``(K + n) u`` relative for
    ``K`` components, and a truncation error per unit weight of at most
    ``(w^(2n+1) (n!)^4 / ((2n+1) ((2n)!)^3)) max|f^(2n)|``, with ``f^(2n) = He_2n(z) phi(z) / sigma^(2n+1)``
    and ``|He_2n(z)| <= (|z| + sqrt(2n))^2n`` (``He_m(z) = E[(z + iY)^m]``, ``Y ~ N(0, 1)``, so
    ``|He_m(z)| <= E[(|z| + |Y|)^m] <= (|z| + sqrt(m))^m``; ``|z|`` inside the cell exceeds the centre's
    by at most ``w / 2 < 0.025``): ``n = 8`` for ``w < 0.05 sigma`` (1.7e-23 (w/sigma)^17 (|z| + 4.03)^16
    phi(z_near)), ``n = 4`` where ``w < 0.01 sigma`` (5.6e-10 (w/sigma)^9 (|z| + 2.86)^8 phi(z_near), as
    small there and half the work). Either keeps the truncation below the rounding even ten standard
    deviations out, so cell masses stay relative-accurate where delta is 1e-25. Wider cells difference
    the CDF / survival values. The nodes' own rounding, a few ``u (|x| + |a|)``, moves the density by ``|z|``
    times that over sigma, relative (this term was missing: 2.8e-15 relative six standard deviations out,
    where ``(K + n) u`` claimed 6.7e-16).
    """
    xl, xr = x_edges[:-1], x_edges[1:]
    width = xr - xl
    narrow = np.isfinite(width) & (width < _NARROW * sigma)
    masses, err = difference_masses(cdf, sf)
    a = np.asarray(means, float)
    w = np.asarray(weights, float)
    below = np.zeros(width.shape, dtype=bool)
    for top, (nodes, gl_weights, trunc_const, he_shift) in _GL_RULES:
        rule = narrow & ~below & (width < top * sigma)
        below |= rule
        if not np.any(rule):
            continue
        n = nodes.size
        half = 0.5 * width[rule]
        mid = 0.5 * (xl[rule] + xr[rule])
        wr = width[rule] / sigma
        zc = np.abs(mid[:, None] - a[None, :]) / sigma  # (cells, components)
        z_near = np.maximum(zc - 0.5 * wr[:, None], 0.0)
        hp = zc + he_shift  # (zc + he_shift)^(2n), n = 4 or 8, by squaring (a float power is 10x slower)
        for _ in range(int(math.log2(2 * n))):
            hp = hp * hp
        trunc = (wr ** (2 * n + 1)) * ((w * trunc_const / _SQRT2PI) * (hp * np.exp(-0.5 * z_near**2))).sum(axis=1)
        x = mid[:, None] + half[:, None] * nodes[None, :]  # (cells, nodes)
        acc = np.zeros(mid.size)
        for a_i, w_i in zip(a, w):
            z = (x - a_i) / sigma
            acc += w_i * (np.exp(-0.5 * z * z) @ gl_weights)
        gl = acc * half / (sigma * _SQRT2PI)
        masses[rule] = gl
        # the nodes x = mid + half t and z = (x - a) / sigma are rounded by a few u (|mid| + half + |a|), which
        # moves a density exp(-z^2 / 2) by |z| times that over sigma, relative
        z_far = (zc[:, 0] if zc.shape[1] == 1 else np.max(zc, axis=1)) + 0.5 * wr
        nodes_err = 4.0 * _U * (z_far + 1.0) * (np.abs(mid) + half + float(np.max(np.abs(a)))) / sigma
        err[rule] = ((len(means) + n) * _U + nodes_err) * gl + trunc
    return masses, err


@dataclass(frozen=True)
class GaussianLoss(PrivacyLoss):
    """PRV of the Gaussian mechanism with ``mu = sensitivity / sigma``: ``N(mu^2/2, mu^2)``."""

    mu: float

    @property
    def mean(self) -> float:
        return 0.5 * self.mu * self.mu

    def cdf(self, s):
        return _ndtr((np.asarray(s, float) - self.mean) / self.mu)

    def sf(self, s):
        return _ndtr((self.mean - np.asarray(s, float)) / self.mu)

    def cell_masses(self, edges):
        edges = np.asarray(edges, float)
        cdf, sf = self.cdf(edges), self.sf(edges)
        masses, errs = gaussian_mixture_cell_masses(edges, (self.mean,), (1.0,), self.mu, cdf, sf)
        return float(cdf[0]), float(sf[-1]), masses, errs, 0.0

    def partial_mean(self, a, b):
        za, zb = (a - self.mean) / self.mu, (b - self.mean) / self.mu
        mass = float(_ndtr(zb) - _ndtr(za)) if za < 0 else float(_ndtr(-za) - _ndtr(-zb))
        dens = lambda z: 0.0 if math.isinf(z) else math.exp(-0.5 * z * z) / _SQRT2PI
        val = self.mean * mass + self.mu * (dens(za) - dens(zb))
        return val, 1e-15 * (abs(self.mean) + self.mu + abs(val))


@dataclass(frozen=True)
class DiscreteLoss(PrivacyLoss):
    """Finitely many atoms ``values`` with probabilities ``probs`` plus ``infinity_mass``."""

    values: tuple[float, ...]
    probs: tuple[float, ...]
    infinity_mass: float = 0.0

    @cached_property
    def _arrays(self):
        v = np.asarray(self.values, float)
        p = np.asarray(self.probs, float)
        order = np.argsort(v)
        return v[order], p[order]

    def cdf(self, s):
        v, p = self._arrays
        c = np.concatenate([[0.0], np.cumsum(p)])
        return c[np.searchsorted(v, np.asarray(s, float), side="right")]

    def sf(self, s):
        v, p = self._arrays
        c = np.concatenate([np.cumsum(p[::-1])[::-1], [0.0]])
        return c[np.searchsorted(v, np.asarray(s, float), side="right")]

    def partial_mean(self, a, b):
        v, p = self._arrays
        m = (v > a) & (v <= b)
        return float(np.sum(v[m] * p[m])), 1e-16 * float(np.sum(np.abs(v * p)))

    def support(self):
        v, _ = self._arrays
        return float(v[0]), float(v[-1])

    has_q_side = True

    @cached_property
    def _q_atoms(self):
        v, p = self._arrays
        return v, p * np.exp(-v)  # Q-mass of an atom of loss v: P-mass times e^-v

    def q_cdf(self, s):
        v, q = self._q_atoms
        c = np.concatenate([[0.0], np.cumsum(q)])
        return c[np.searchsorted(v, np.asarray(s, float), side="right")]

    def q_sf(self, s):
        v, q = self._q_atoms
        c = np.concatenate([np.cumsum(q[::-1])[::-1], [0.0]])
        return c[np.searchsorted(v, np.asarray(s, float), side="right")]

    def _cells_pq(self, edges, apart: bool = False):
        """Cell masses straight from the atoms (cell ``i`` is ``(e_i, e_(i+1)]``): empty cells are exactly
        0 and a cell's mass is a sum of at most ``len(values)`` atoms, so the relative error is
        ``len(values) u`` and there is no absolute error term at all. Atoms on an edge up to rounding go to
        the cell below it (``_atom_cells``), or with ``apart`` to per-edge arrays. Returns ``(below,
        above, P, Q, edge_err, atoms)``."""
        e = np.asarray(edges, float)
        v, p = self._arrays
        _, q = self._q_atoms
        P, Q = np.zeros(max(e.size - 1, 0)), np.zeros(max(e.size - 1, 0))
        below, above, edge_err, atoms = _place_atoms(e, v, p, q, P, Q, apart)
        return below, above, P, Q, edge_err, atoms

    def cell_masses(self, edges):
        below, above, P, _, edge_err, _ = self._cells_pq(edges)
        return below, above, P, ((len(self.values) + 2) * _U, 0.0), edge_err

    def q_cell_masses(self, edges):
        return self._cells_pq(edges)[3], ((len(self.values) + 2) * _U, 0.0)

    def edge_atoms(self, edges):
        """``(P, Q, P_at, Q_at, moved)``: the cell masses without the atoms that sit on an edge, those atoms'
        masses per edge (for the merge-to-the-grid construction, which keeps them where they are), and the
        largest distance an atom was moved onto its edge."""
        _, _, P, Q, moved, (pa, qa) = self._cells_pq(edges, apart=True)
        return P, Q, pa, qa, moved

    def lattice_atoms(self):
        v, p = self._arrays
        return tuple(float(x) for x in v[(p > 0) & np.isfinite(v)])


@dataclass(frozen=True)
class LaplaceLoss(PrivacyLoss):
    """PRV of the Laplace mechanism, ``P = Lap(0, b)``, ``Q = Lap(Delta, b)``.

    With ``r = Delta / b``: ``Y = r`` w.p. 1/2, ``Y = -r`` w.p. ``exp(-r)/2``,
    and on ``(-r, r)`` the CDF is ``exp(-(r - s)/2)/2``.
    """

    r: float  # sensitivity / scale

    def cdf(self, s):
        s = np.asarray(s, float)
        r = self.r
        inner = 0.5 * np.exp(-(r - np.clip(s, -r, r)) / 2.0)
        return np.where(s < -r, 0.0, np.where(s >= r, 1.0, inner))

    def sf(self, s):
        s = np.asarray(s, float)
        r = self.r
        inner = 1.0 - 0.5 * np.exp(-(r - np.clip(s, -r, r)) / 2.0)
        inner = -0.5 * np.expm1(-(r - np.clip(s, -r, r)) / 2.0) + 0.5
        return np.where(s < -r, 1.0, np.where(s >= r, 0.0, inner))

    def partial_mean(self, a, b):
        r = self.r
        val = 0.0
        if a < r <= b:
            val += 0.5 * r
        if a < -r <= b:
            val += -r * 0.5 * math.exp(-r)
        lo, hi = max(a, -r), min(b, r)
        if hi > lo:
            # density on (-r, r): exp(-(r - s)/2) / 4
            f = lambda s: s * math.exp(-(r - s) / 2.0) / 4.0
            from scipy import integrate  # lazily: scipy.integrate costs 0.4 s of import

            v, err = integrate.quad(f, lo, hi, epsabs=1e-15, epsrel=1e-13)
            val += v
            return val, 10 * err + 1e-15
        return val, 1e-15

    def support(self):
        return -self.r, self.r

    has_q_side = True

    def q_cdf(self, s):
        """Q = Lap(Delta, b): atom 1/2 at ``-r``, density ``exp(-(r + s)/2)/4`` on ``(-r, r)``, atom
        ``exp(-r)/2`` at ``r``; so ``Q(Y <= s) = 1 - exp(-(r + s)/2)/2`` on ``[-r, r)``."""
        s = np.asarray(s, float)
        r = self.r
        inner = 1.0 - 0.5 * np.exp(-(r + np.clip(s, -r, r)) / 2.0)
        return np.where(s < -r, 0.0, np.where(s >= r, 1.0, inner))

    def q_sf(self, s):
        s = np.asarray(s, float)
        r = self.r
        inner = 0.5 * np.exp(-(r + np.clip(s, -r, r)) / 2.0)
        return np.where(s < -r, 1.0, np.where(s >= r, 0.0, inner))

    def _cells_pq(self, edges, apart: bool = False):
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

    def cell_masses(self, edges):
        below, above, P, _, edge_err, _ = self._cells_pq(edges)
        return below, above, P, (_CELL_REL, 0.0), edge_err

    def edge_atoms(self, edges):
        """As ``DiscreteLoss.edge_atoms``: the atoms at ``-r`` and ``r``, where they sit on an edge, apart."""
        _, _, P, Q, moved, (pa, qa) = self._cells_pq(edges, apart=True)
        return P, Q, pa, qa, moved

    def lattice_atoms(self):
        return (-self.r, self.r)

    def q_cell_masses(self, edges):
        return self._cells_pq(edges)[3], (_CELL_REL, 0.0)


@dataclass(frozen=True)
class GaussianMixtureLoss(PrivacyLoss):
    """PRV of ``P = sum w_i N(a_i, sigma^2)`` against ``Q = sum v_j N(b_j, sigma^2)``.

    Requires ``min(a) >= max(b)``; then the loss ``L(x) = log p(x) - log q(x)``
    is non-decreasing (its derivative is ``(E_post_P[a] - E_post_Q[b]) / sigma^2``),
    so ``P(Y <= s) = P(X <= L^{-1}(s))``.
    """

    p_means: tuple[float, ...]
    p_weights: tuple[float, ...]
    q_means: tuple[float, ...]
    q_weights: tuple[float, ...]
    sigma: float
    infinity_mass: float = 0.0  # P-mass of outputs treated as fully revealing (safe side)
    infinity_is_exact = False  # same-variance components have finite losses: the mass above is a device

    def __post_init__(self):
        if min(self.p_means) < max(self.q_means) - 1e-12:
            raise ValueError("GaussianMixtureLoss needs min(p_means) >= max(q_means)")

    # -- the loss in output space ------------------------------------------
    @cached_property
    def _par(self):
        a = np.asarray(self.p_means, float)
        w = np.asarray(self.p_weights, float)
        b = np.asarray(self.q_means, float)
        v = np.asarray(self.q_weights, float)
        keep_p, keep_q = w > 0, v > 0
        return a[keep_p], np.log(w[keep_p]), b[keep_q], np.log(v[keep_q]), w[keep_p]

    def loss(self, x):
        """``L(x) = log p(x) - log q(x)`` (stable for large ``|x|``)."""
        a, lw, b, lv, _ = self._par
        x = np.asarray(x, float)[..., None]
        s2 = self.sigma**2
        lp = logsumexp(lw + (2 * a * x - a * a) / (2 * s2), axis=-1)
        lq = logsumexp(lv + (2 * b * x - b * b) / (2 * s2), axis=-1)
        return lp - lq

    def _loss_and_slope(self, x):
        a, lw, b, lv, _ = self._par
        x = np.asarray(x, float)[..., None]
        s2 = self.sigma**2
        ep = lw + (2 * a * x - a * a) / (2 * s2)
        eq = lv + (2 * b * x - b * b) / (2 * s2)
        lp = logsumexp(ep, axis=-1)
        lq = logsumexp(eq, axis=-1)
        post_a = np.sum(np.exp(ep - lp[..., None]) * a, axis=-1)
        post_b = np.sum(np.exp(eq - lq[..., None]) * b, axis=-1)
        return lp - lq, (post_a - post_b) / s2

    @cached_property
    def _limits(self):
        """Limits of L at -inf and +inf (the support of the finite part). (Plain floats: a few components,
        where numpy's per-call overhead was a tenth of a millisecond of every small composition.)"""
        a, lw, b, lv, _ = (arr.tolist() for arr in self._par)
        near = lambda v, x: abs(v - x) <= 1e-8 + 1e-5 * abs(x)  # np.isclose's tolerances

        def lse(vals):
            m = max(vals)
            return m + math.log(math.fsum(math.exp(t - m) for t in vals))

        def end(ea, eb):  # equal extreme means: L -> log(w / v) of those components
            return lse([l for m, l in zip(a, lw) if near(m, ea)]) - lse([l for m, l in zip(b, lv) if near(m, eb)])

        lo = -math.inf if min(a) > min(b) + 1e-12 else end(min(a), min(b))
        hi = math.inf if max(a) > max(b) + 1e-12 else end(max(a), max(b))
        return float(lo), float(hi)

    def support(self):
        return self._limits

    def upper_quantile(self, mass: float) -> float:
        """``s`` with ``P(s < Y < inf) <= mass``: each of the K components of P gets ``mass / K``."""
        _lo, hi = self._limits
        if math.isfinite(hi):
            return hi
        a, _, _, _, w = self._par
        p = mass / (len(w) * w)
        z = np.where(p >= 1.0, -np.inf, -special.ndtri(np.minimum(p, 1.0)))  # 1 - Phi(z) = mass / (K w)
        x = float(np.max(a + self.sigma * z))  # z = -inf: a component lighter than mass/K
        return float(self.loss(np.array([x]))[0])

    def lower_quantile(self, mass: float) -> float:
        """``s`` with ``P(Y <= s) <= mass``: each of the K components of P gets ``mass / K``."""
        lo, _hi = self._limits
        if math.isfinite(lo):
            return lo
        a, _, _, _, w = self._par
        z = special.ndtri(np.clip(mass / (len(w) * w), 0.0, 1.0))
        x = float(np.min(a + self.sigma * z))
        return float(self.loss(np.array([x]))[0])

    @cached_property
    def _table(self):
        """A dense monotone table (x, L(x)) used as the starting point of Newton's method."""
        a, _, b, _, _ = self._par
        lo_x = min(a.min(), b.min()) - 40 * self.sigma
        hi_x = max(a.max(), b.max()) + 40 * self.sigma
        xs = np.linspace(lo_x, hi_x, 4001)
        ls = np.maximum.accumulate(self.loss(xs))
        return xs, ls

    def inverse(self, s):
        """``x`` with ``L(x) = s`` for ``s`` inside the support (vectorised Newton)."""
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

    def _cdf_sf_at_x(self, x):
        a, _, _, _, w = self._par
        z = (x[..., None] - a) / self.sigma
        return np.sum(w * _ndtr(z), axis=-1), np.sum(w * _ndtr(-z), axis=-1)

    def outputs_at(self, s) -> tuple[np.ndarray, float]:
        """The outputs ``x`` with ``L(x) = s`` (``-inf`` / ``+inf`` below / above the support) and the
        largest ``|L(x) - s|`` actually realised (the inversion is numerical for general mixtures)."""
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

    def _cdf_sf_outputs(self, edges):
        s = np.asarray(edges, float)
        x, err = self.outputs_at(s)
        c, sf = self._cdf_sf_at_x(np.where(np.isfinite(x), x, 0.0))
        lo, hi = self._limits
        total = float(np.sum(self._par[4]))
        c = np.where(s <= lo, 0.0, np.where(s >= hi, total, c))
        sf = np.where(s <= lo, total, np.where(s >= hi, 0.0, sf))
        return c, sf, err, x

    def cdf_sf(self, edges):
        return self._cdf_sf_outputs(edges)[:3]

    def cell_masses(self, edges):
        c, sf, err, x = self._cdf_sf_outputs(edges)
        a, _, _, _, w = self._par
        masses, errs = gaussian_mixture_cell_masses(x, a, w, self.sigma, c, sf)
        return float(c[0]), float(sf[-1]), masses, errs, err

    def cdf(self, s):
        return self.cdf_sf(np.atleast_1d(s))[0].reshape(np.shape(s))

    def sf(self, s):
        return self.cdf_sf(np.atleast_1d(s))[1].reshape(np.shape(s))

    def partial_mean(self, a_s, b_s):
        lo, hi = self._limits
        a_s, b_s = max(a_s, lo), min(b_s, hi)
        if b_s <= a_s:
            return 0.0, 0.0
        xa = -math.inf if a_s <= lo else float(self.inverse(np.array([a_s]))[0])
        xb = math.inf if b_s >= hi else float(self.inverse(np.array([b_s]))[0])
        means, _, _, _, w = self._par
        total, err = 0.0, 0.0
        sig = self.sigma
        for m, wi in zip(means, w):
            lo_x, hi_x = max(xa, m - 40 * sig), min(xb, m + 40 * sig)
            if hi_x <= lo_x:
                continue
            f = lambda x, m=m: self.loss(x) * np.exp(-0.5 * ((x - m) / sig) ** 2) / (sig * _SQRT2PI)
            v1 = _gauss_legendre(f, lo_x, hi_x, 96, 16)
            v2 = _gauss_legendre(f, lo_x, hi_x, 96, 32)
            total += wi * v2
            err += wi * (10.0 * abs(v2 - v1) + 1e-15 * abs(v2))
        # mass beyond +-40 sigma of each component is below 1e-300; quadrature floor
        return total, err + 1e-14 * (abs(total) + 1e-3)


def _gauss_legendre(f, a: float, b: float, panels: int, order: int) -> float:
    """Composite Gauss-Legendre quadrature of a vectorised ``f`` on ``[a, b]``."""
    nodes, weights = np.polynomial.legendre.leggauss(order)
    edges = np.linspace(a, b, panels + 1)
    half = 0.5 * np.diff(edges)
    mid = 0.5 * (edges[1:] + edges[:-1])
    x = (mid[:, None] + half[:, None] * nodes[None, :]).ravel()
    return float(np.sum(f(x).reshape(panels, order) * weights[None, :] * half[:, None]))


class _PoissonRemoveLoss(GaussianMixtureLoss):
    """001 Sec. 6.1: L(x) = log(q exp((2x - 1)/(2 s^2)) + 1 - q), closed-form inverse."""

    def loss(self, x):
        q = self.p_weights[0]
        with np.errstate(divide="ignore", over="ignore"):  # sigma ~ 1e-160: +-inf, refused as out of range
            return np.logaddexp(math.log1p(-q), math.log(q) + (2 * np.asarray(x, float) - 1) / (2 * self.sigma**2))

    def inverse(self, s):
        q = self.p_weights[0]
        s = np.asarray(s, float)
        with np.errstate(divide="ignore", invalid="ignore"):
            # e^s - (1 - q) = (1 - q) expm1(s - log(1 - q)): no cancellation near the support's lower end
            return self.sigma**2 * (math.log1p(-q) + np.log(np.expm1(s - math.log1p(-q))) - math.log(q)) + 0.5


class _PoissonAddLoss(GaussianMixtureLoss):
    """The add direction, reflected so that the loss increases: P = N(0), Q = q N(-1) + (1-q) N(0)."""

    def loss(self, x):
        q = self.q_weights[1]
        with np.errstate(divide="ignore", over="ignore"):  # as above
            return -np.logaddexp(math.log1p(-q), math.log(q) + (-2 * np.asarray(x, float) - 1) / (2 * self.sigma**2))

    def inverse(self, s):
        q = self.q_weights[1]
        s = np.asarray(s, float)
        with np.errstate(divide="ignore", invalid="ignore"):
            return -(self.sigma**2) * (math.log1p(-q) + np.log(np.expm1(-s - math.log1p(-q))) - math.log(q)) - 0.5


class _WithoutReplacementLoss(GaussianMixtureLoss):
    """001 Sec. 6.2, closed-form inverse (written in scaled form to avoid overflow)."""

    def loss(self, x):
        q = self.p_weights[0]
        x = np.asarray(x, float)
        s2 = 2 * self.sigma**2
        return np.logaddexp(math.log1p(-q), math.log(q) + (2 * x - 1) / s2) - np.logaddexp(
            math.log1p(-q), math.log(q) + (-2 * x - 1) / s2
        )

    def inverse(self, s):
        q = self.p_weights[0]
        s2 = self.sigma**2
        c = q * math.exp(-1.0 / (2 * s2))
        r = 1.0 - q
        s = np.asarray(s, float)
        out = np.empty_like(s)
        pos = s >= 0
        sp = s[pos]
        em = -np.expm1(-sp)  # 1 - e^{-s}
        val = (r * em + np.sqrt((r * em) ** 2 + 4 * c * c * np.exp(-sp))) / (2 * c)
        out[pos] = s2 * (sp + np.log(val))
        sn = s[~pos]
        e1 = -np.expm1(sn)  # 1 - e^{s} > 0
        den = r * e1 + np.sqrt((r * e1) ** 2 + 4 * c * c * np.exp(sn))
        out[~pos] = s2 * (math.log(2 * c) + sn - np.log(den))
        return out


def poisson_gaussian_loss(*, sigma: float, q: float, direction: str) -> PrivacyLoss:
    """The Poisson-subsampled Gaussian (sensitivity 1, noise ``sigma``), 001 Sec. 6.1."""
    if q >= 1.0:
        return GaussianLoss(mu=1.0 / sigma)
    if direction == "remove":
        return _PoissonRemoveLoss((1.0, 0.0), (q, 1.0 - q), (0.0,), (1.0,), sigma)
    return _PoissonAddLoss((0.0,), (1.0,), (0.0, -1.0), (1.0 - q, q), sigma)


def without_replacement_gaussian_loss(*, sigma: float, q: float) -> PrivacyLoss:
    """Sampling without replacement, substitute relation, 001 Sec. 6.2."""
    if q >= 1.0:
        return GaussianLoss(mu=2.0 / sigma)
    return _WithoutReplacementLoss((1.0, 0.0), (q, 1.0 - q), (0.0, -1.0), (1.0 - q, q), sigma)


@dataclass(frozen=True)
class PoissonLaplaceLoss(PrivacyLoss):
    """Poisson-subsampled Laplace mechanism (noise scale ``b``, sensitivity 1, rate ``q``).

    remove: ``P = q Lap(1, b) + (1 - q) Lap(0, b)``, ``Q = Lap(0, b)``, so
    ``L(x) = log(1 - q + q exp(g(x)))`` with ``g(x) = (|x| - |x - 1|) / b``;
    add: ``P = Lap(0, b)``, ``Q`` the mixture, ``L(x) = -log(1 - q + q exp(g(x)))``.
    ``g`` is constant outside ``(0, 1)``, so the loss has two atoms (at ``g = -+1/b``)
    and a continuous part between (the subsampled analogue of ``LaplaceLoss``).
    """

    q: float
    b: float
    direction: str  # "remove" or "add"

    def _ell(self, g):
        return np.logaddexp(math.log1p(-self.q), math.log(self.q) + g)

    def _lap_cdf(self, x, loc):
        z = (np.asarray(x, float) - loc) / self.b
        return np.where(z < 0, 0.5 * np.exp(np.minimum(z, 0.0)), 1.0 - 0.5 * np.exp(-np.maximum(z, 0.0)))

    def _lap_sf(self, x, loc):
        z = (np.asarray(x, float) - loc) / self.b
        return np.where(z > 0, 0.5 * np.exp(-np.maximum(z, 0.0)), 1.0 - 0.5 * np.exp(np.minimum(z, 0.0)))

    def _p_cdf(self, x):
        if self.direction == "remove":
            return self.q * self._lap_cdf(x, 1.0) + (1 - self.q) * self._lap_cdf(x, 0.0)
        return self._lap_cdf(x, 0.0)

    def _p_sf(self, x):
        if self.direction == "remove":
            return self.q * self._lap_sf(x, 1.0) + (1 - self.q) * self._lap_sf(x, 0.0)
        return self._lap_sf(x, 0.0)

    def support(self):
        lo, hi = float(self._ell(-1.0 / self.b)), float(self._ell(1.0 / self.b))
        return (lo, hi) if self.direction == "remove" else (-hi, -lo)

    def _x_of(self, s):
        """The output x in [0, 1] where the loss equals s (clipped at the atoms)."""
        s = np.asarray(s, float)
        e = s if self.direction == "remove" else -s
        with np.errstate(divide="ignore", invalid="ignore"):
            g = np.log(np.maximum(np.expm1(e) + self.q, 1e-300)) - math.log(self.q)
        return np.clip((self.b * g + 1.0) / 2.0, 0.0, 1.0)

    def cdf(self, s):
        s = np.asarray(s, float)
        lo, hi = self.support()
        x = self._x_of(s)
        # remove: L increasing in x, P(L <= s) = P(X <= x_s); add: decreasing, P(L <= s) = P(X >= x_s)
        inner = self._p_cdf(x) if self.direction == "remove" else self._p_sf(x)
        return np.where(s < lo, 0.0, np.where(s >= hi, 1.0, inner))

    def sf(self, s):
        s = np.asarray(s, float)
        lo, hi = self.support()
        x = self._x_of(s)
        inner = self._p_sf(x) if self.direction == "remove" else self._p_cdf(x)
        return np.where(s < lo, 1.0, np.where(s >= hi, 0.0, inner))

    has_q_side = True

    def _q_cdf_x(self, x):
        if self.direction == "remove":  # Q = Lap(0, b)
            return self._lap_cdf(x, 0.0)
        return self.q * self._lap_cdf(x, 1.0) + (1 - self.q) * self._lap_cdf(x, 0.0)

    def _q_sf_x(self, x):
        if self.direction == "remove":
            return self._lap_sf(x, 0.0)
        return self.q * self._lap_sf(x, 1.0) + (1 - self.q) * self._lap_sf(x, 0.0)

    def q_cdf(self, s):
        """``Q(Y <= s)``: the output set is the same as for ``cdf`` (``x <= x_s`` for remove, where the
        loss increases in ``x``; ``x >= x_s`` for add), measured under Q."""
        s = np.asarray(s, float)
        lo, hi = self.support()
        x = self._x_of(s)
        inner = self._q_cdf_x(x) if self.direction == "remove" else self._q_sf_x(x)
        return np.where(s < lo, 0.0, np.where(s >= hi, 1.0, inner))

    def q_sf(self, s):
        s = np.asarray(s, float)
        lo, hi = self.support()
        x = self._x_of(s)
        inner = self._q_sf_x(x) if self.direction == "remove" else self._q_cdf_x(x)
        return np.where(s < lo, 1.0, np.where(s >= hi, 0.0, inner))

    def _cells_pq(self, edges):
        """P- and Q-masses of the loss cells ``(e_i, e_(i+1)]`` as masses of output intervals, each a
        sum of positive Laplace interval masses (relative-accurate), and the largest distance
        ``|L(x_i) - e_i|`` of the realised output edges (the inversion is in floats)."""
        e = np.asarray(edges, float)
        lo, hi = self.support()
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
        return float(self.cdf(e[:1])[0]), float(self.sf(e[-1:])[0]), P, Q, edge

    def cell_masses(self, edges):
        below, above, P, _, edge = self._cells_pq(edges)
        return below, above, P, (_CELL_REL, 0.0), edge

    def _interval_masses(self, x):
        """P- and Q-masses of the output intervals between the cell edges' outputs ``x`` (the loss rises in
        ``x`` for remove, falls for add), each a sum of positive Laplace interval masses."""
        xa, xb = (x[:-1], x[1:]) if self.direction == "remove" else (x[1:], x[:-1])
        q = self.q
        lap = lambda loc: _laplace_interval_mass(xa, xb, loc, self.b)
        mix = q * lap(1.0) + (1.0 - q) * lap(0.0)
        return (mix, lap(0.0)) if self.direction == "remove" else (lap(0.0), mix)

    def lattice_atoms(self):
        return self.support()  # the outputs x <= 0 and x >= 1 carry the two end losses

    def edge_atoms(self, edges):
        """As ``DiscreteLoss.edge_atoms``: the cells' masses of outputs in ``(0, 1)`` only (the density), and
        the two atoms (outputs ``x <= 0`` and ``x >= 1``) apart where they sit on an edge."""
        e = np.asarray(edges, float)
        P, Q = self._interval_masses(self._x_of(e))  # x clipped to [0, 1]: the density only
        lo, hi = self.support()
        p0, p1 = float(self._p_cdf(0.0)), float(self._p_sf(1.0))  # P(X <= 0), P(X >= 1)
        q0, q1 = float(self._q_cdf_x(0.0)), float(self._q_sf_x(1.0))
        # remove: x <= 0 has the lowest loss; add: the highest
        atoms = ((lo, hi), (p0, p1), (q0, q1)) if self.direction == "remove" else ((lo, hi), (p1, p0), (q1, q0))
        _, _, moved, (pa, qa) = _place_atoms(e, *atoms, P, Q, True)
        return P, Q, pa, qa, moved

    def q_cell_masses(self, edges):
        return self._cells_pq(edges)[3], (_CELL_REL, 0.0)

    def partial_mean(self, a, b_):
        lo, hi = self.support()
        val = 0.0
        # the atoms: remove -> lo has P(X <= 0), hi has P(X >= 1); add -> reversed
        p0 = float(self._p_cdf(0.0))
        p1 = float(self._p_sf(1.0))
        atoms = ((lo, p0), (hi, p1)) if self.direction == "remove" else ((lo, p1), (hi, p0))
        for v, p in atoms:
            if a < v <= b_:
                val += v * p
        # continuous part: x in (0, 1), loss L(x), density of P
        xa, xb = float(self._x_of(max(a, lo))), float(self._x_of(min(b_, hi)))
        xa, xb = min(xa, xb), max(xa, xb)
        if xb > xa:
            sign = 1.0 if self.direction == "remove" else -1.0

            def f(x):
                x = np.asarray(x, float)
                dens = (self.q * np.exp(-np.abs(x - 1.0) / self.b) if self.direction == "remove" else 0.0) + (
                    1 - self.q if self.direction == "remove" else 1.0
                ) * np.exp(-np.abs(x) / self.b)
                return sign * self._ell((2 * x - 1.0) / self.b) * dens / (2 * self.b)

            v1 = _gauss_legendre(f, xa, xb, 32, 16)
            v2 = _gauss_legendre(f, xa, xb, 32, 32)
            val += v2
            return val, 10 * abs(v2 - v1) + 1e-15
        return val, 1e-15

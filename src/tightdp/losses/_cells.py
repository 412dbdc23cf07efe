"""Certified cell masses of Gaussian and Laplace mixtures on a grid of the output (Gauss-Legendre on narrow
cells, CDF differences on wide ones) and the placement of atoms into cells."""

from __future__ import annotations

import math
from abc import abstractmethod
from collections.abc import Callable, Sequence

import numpy as np
from scipy import special

from .._types import ArrayLike, BoolArray, FloatArray, IntArray
from .base import difference_masses, split_errors

_SQRT2PI = math.sqrt(2.0 * math.pi)
_U = float(np.finfo(float).eps) / 2


def _gauss_legendre_rule(n: int) -> tuple[FloatArray, FloatArray, float, float]:
    """``n``-point Gauss-Legendre nodes, weights, the truncation constant ``(n!)^4 / ((2n+1) ((2n)!)^3)`` and
    ``sqrt(2n) + 0.03``, which bounds ``|He_2n(z)|^(1/2n) - |z|`` inside a cell
    (``gaussian_mixture_cell_masses``)."""
    nodes, weights = np.polynomial.legendre.leggauss(n)
    return nodes, weights, math.factorial(n) ** 4 / ((2 * n + 1) * math.factorial(2 * n) ** 3), math.sqrt(2 * n) + 0.03


#: (widest cell in sigma, rule): 4 points below 0.01 sigma (truncation below 1e-16 relative ten standard deviations
#: out), 8 points up to 0.05 sigma; wider cells difference the CDF / survival values
_GL_RULES = ((0.01, _gauss_legendre_rule(4)), (0.05, _gauss_legendre_rule(8)))
_NARROW = _GL_RULES[-1][0]  # cells narrower than this many sigma are integrated, not differenced


#: atoms this close (relative) to a cell edge are counted in the cell below it (``_atom_cells``)
_ATOM_SNAP = 1e-12


def _atom_cells(edges: FloatArray, values: FloatArray) -> tuple[IntArray, BoolArray, float]:
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


def _place_atoms(
    edges: FloatArray, values: ArrayLike, p: ArrayLike, q: ArrayLike, P: FloatArray, Q: FloatArray, apart: bool
) -> tuple[float, float, float, tuple[FloatArray, FloatArray] | None]:
    """Add atoms (losses ``values``, P-masses ``p``, Q-masses ``q``) to the cell masses ``P, Q`` in place;
    with ``apart``, atoms on an edge go to separate per-edge arrays instead. Returns ``(below, above,
    edge_err, atoms)``: the P-mass below / above the grid, the distance moved, and ``(P_at, Q_at)``
    (per edge; ``None`` without ``apart``)."""
    v, pv, qv = (np.asarray(x, float) for x in (values, p, q))
    idx, on_edge, edge_err = _atom_cells(edges, v)
    n = P.size
    atoms = (np.zeros(n + 1), np.zeros(n + 1)) if apart else None
    below = above = 0.0
    for i, on, pa, qa in zip(idx.tolist(), on_edge.tolist(), pv.tolist(), qv.tolist()):
        if i < 0:
            below += pa
        elif i >= n:
            above += pa
        elif atoms is not None and on:
            atoms[0][i + 1] += pa
            atoms[1][i + 1] += qa
        else:
            P[i] += pa
            Q[i] += qa
    return below, above, edge_err, atoms


def _ndtr(z: ArrayLike) -> FloatArray:
    out: FloatArray = special.ndtr(z)
    return out


def _laplace_interval_mass(xa: ArrayLike, xb: ArrayLike, loc: float, b: float) -> FloatArray:
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


def gaussian_mixture_cell_masses(
    x_edges: FloatArray,
    means: Sequence[float] | FloatArray,
    weights: Sequence[float] | FloatArray,
    sigma: float,
    cdf: FloatArray,
    sf: FloatArray,
) -> tuple[FloatArray, tuple[float, float]]:
    """Masses of a Gaussian mixture between consecutive ``x_edges``, with ``(rel, l1)`` error bounds.

    ``gaussian_cell_masses_and_errors``'s per-cell absolute bounds, split by ``split_errors``.

    Parameters
    ----------
    x_edges : numpy.ndarray of float
        Increasing output values (infinities allowed at the ends).
    means, weights : sequence of float
        The mixture's component means and non-negative weights.
    sigma : float
        The components' standard deviation, positive.
    cdf, sf : numpy.ndarray of float
        The mixture's CDF and survival values at ``x_edges``.

    Returns
    -------
    tuple
        ``(masses, (rel, l1))``.

    Raises
    ------
    ValueError
        If the arrays' shapes do not match (numpy's error).
    """
    masses, err = gaussian_cell_masses_and_errors(x_edges, means, weights, sigma, cdf, sf)
    return masses, split_errors(masses, err)


def gaussian_cell_masses_and_errors(
    x_edges: FloatArray,
    means: Sequence[float] | FloatArray,
    weights: Sequence[float] | FloatArray,
    sigma: float,
    cdf: FloatArray,
    sf: FloatArray,
) -> tuple[FloatArray, FloatArray]:
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
    times that over sigma, relative (2.8e-15 relative six standard deviations out, where ``(K + n) u``
    alone would give 6.7e-16).

    Parameters
    ----------
    x_edges : numpy.ndarray of float
        Increasing output values (infinities allowed at the ends).
    means, weights : sequence of float
        The mixture's component means and non-negative weights.
    sigma : float
        The components' standard deviation, positive.
    cdf, sf : numpy.ndarray of float
        The mixture's CDF and survival values at ``x_edges``.

    Returns
    -------
    tuple of numpy.ndarray
        ``(masses, errors)``, one per cell.

    Raises
    ------
    ValueError
        If the arrays' shapes do not match (numpy's error).
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


def _gauss_legendre_integral(
    f: Callable[[FloatArray], FloatArray], a: float, b: float, panels: int, order: int
) -> float:
    """Composite Gauss-Legendre quadrature of a vectorised ``f`` on ``[a, b]``."""
    nodes, weights = np.polynomial.legendre.leggauss(order)
    edges = np.linspace(a, b, panels + 1)
    half = 0.5 * np.diff(edges)
    mid = 0.5 * (edges[1:] + edges[:-1])
    x = (mid[:, None] + half[:, None] * nodes[None, :]).ravel()
    return float(np.sum(f(x).reshape(panels, order) * weights[None, :] * half[:, None]))


class AtomCells:
    """The cell interface of a loss whose masses come from one ``_cells_pq(edges, apart)`` (closed-form continuous
    parts plus atoms placed by ``_place_atoms``): ``cell_masses``, ``q_cell_masses`` and ``edge_atoms`` read it.
    Listed before ``PrivacyLoss`` among the bases."""

    def _cell_rel(self) -> float:
        """The masses' relative error (closed forms of a few operations)."""
        return _CELL_REL

    @abstractmethod
    def _cells_pq(
        self, edges: ArrayLike, apart: bool = False
    ) -> tuple[float, float, FloatArray, FloatArray, float, tuple[FloatArray, FloatArray] | None]:
        """``(below, above, P, Q, edge_err, atoms)`` of the cells ``(e_i, e_(i+1)]``; ``atoms`` (the on-edge atoms
        per edge) only with ``apart``, when ``P`` and ``Q`` leave them out. Abstract: enforced through
        ``PrivacyLoss``'s ``ABCMeta`` in the classes that list both."""

    def cell_masses(self, edges: ArrayLike) -> tuple[float, float, FloatArray, tuple[float, float], float]:
        below, above, P, _, edge_err, _ = self._cells_pq(edges)
        return below, above, P, (self._cell_rel(), 0.0), edge_err

    def q_cell_masses(self, edges: ArrayLike) -> tuple[FloatArray, tuple[float, float]]:
        return self._cells_pq(edges)[3], (self._cell_rel(), 0.0)

    def edge_atoms(self, edges: ArrayLike) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, float]:
        """Cell masses without the atoms that sit on an edge, and those atoms per edge (the merge-to-the-grid
        construction keeps on-edge atoms where they are, ``tightdp.pld.dominance``).

        Parameters
        ----------
        edges : array_like of float
            Increasing loss values, at least two.

        Returns
        -------
        tuple
            ``(P, Q, P_at, Q_at, moved)``: the cells' P- and Q-masses without the atoms on an edge, those
            atoms' masses per edge (``len(edges)`` each), and the largest distance an atom was moved onto
            its edge.

        Raises
        ------
        ValueError
            If ``edges`` is not one-dimensional (numpy's error).
        """
        _, _, P, Q, moved, atoms = self._cells_pq(edges, apart=True)
        assert atoms is not None  # apart=True fills them
        return P, Q, atoms[0], atoms[1], moved


#: a cell is integrated from its edges (``hermite_cell_masses``) when its truncation bound is below this share of
#: its mass: far below the masses' rounding (about 1e-13 relative), so no accuracy is given up against the
#: Gauss-Legendre rules; other cells fall back to ``gaussian_cell_masses_and_errors``
_HERMITE_REL = 1e-16


def hermite_cell_masses(
    x_edges: FloatArray,
    log_p: FloatArray,
    dlog_p: FloatArray,
    rho: FloatArray,
    dlog_err: FloatArray,
    sigma: float,
    mean_range: tuple[float, float],
) -> tuple[FloatArray, FloatArray, BoolArray]:
    """Masses of a Gaussian mixture ``p = sum_i w_i N(a_i, sigma^2)`` between consecutive ``x_edges`` from the
    density and its log-derivative at the edges only (no evaluation inside the cells), each with a bound on its
    absolute error, and which cells the rule could certify (the others are left for
    ``gaussian_cell_masses_and_errors``).

    The rule is the corrected trapezoid (the integral of the cubic Hermite interpolant of ``p`` at the cell's ends
    ``l < r``, ``D = r - l``): ``M = D/2 (p_l + p_r) + D^2/12 (p'_l - p'_r)``, ``p' = p (log p)'``.

    Truncation. ``p - H = p''''(xi(x)) / 24 (x - l)^2 (x - r)^2`` and ``int (x - l)^2 (x - r)^2 = D^5 / 30``, so
    ``|int p - M| <= D^5 / 720 max |p''''|`` over the cell. ``p'''' = sum_i w_i He_4(z_i) phi(z_i) / sigma^5`` with
    ``z_i = (x - a_i) / sigma`` and ``|He_4(z)| <= (|z| + 2)^4`` (``gaussian_cell_masses_and_errors``), so
    ``|p''''| <= (Z + 2)^4 p / sigma^4`` with ``Z`` the largest ``|z_i|`` on the cell (at an end: ``|x - a|`` is
    convex). Inside the cell ``p(x) <= p_l e^(Z D / sigma)``: per component ``log phi(z_i(x)) - log phi(z_i(l)) =
    -d (2 z_i(l) + d) / 2 <= d |z_i(l)|`` with ``0 <= d = (x - l) / sigma <= D / sigma`` (and likewise from ``r``).
    Hence ``|int p - M| <= D (D / sigma)^4 / 720 (Z + 2)^4 e^(Z D / sigma) min(p_l, p_r)`` with the true ``p`` at the
    ends, at most the computed one times ``1 + rho``.

    Rounding. ``rho`` bounds the relative error of ``exp(log_p)`` against the true density at each edge (the
    caller's), ``dlog_err`` the absolute error of ``dlog_p``; the edges are taken as given (the cell is
    ``(l, r]`` of these floats), ``D`` is rounded by ``u`` relative and the few operations of ``M`` add ``8u``.
    A cell is certified when its edges are finite, ``D >= 0``, both densities are above ``e^-700`` (no
    underflow), ``M > 0`` (or ``D = 0``: an empty cell, mass 0 exactly) and the truncation bound is below
    ``_HERMITE_REL`` of ``M``.

    Parameters
    ----------
    x_edges : numpy.ndarray of float
        Increasing outputs.
    log_p, dlog_p : numpy.ndarray of float
        ``log p`` and ``(log p)' = p' / p`` at the edges (computed).
    rho, dlog_err : numpy.ndarray of float
        Bounds on the relative error of ``exp(log_p)`` and on the absolute error of ``dlog_p``, per edge.
    sigma : float
        The components' standard deviation.
    mean_range : tuple of float
        The smallest and largest component mean.

    Returns
    -------
    tuple of numpy.ndarray
        ``(masses, errors, certified)``, one per cell; masses and errors are 0 where not certified.

    Raises
    ------
    ValueError
        If the arrays' shapes do not match (numpy's error).
    """
    x = np.asarray(x_edges, float)
    xl, xr = x[:-1], x[1:]
    a_lo, a_hi = mean_range
    with np.errstate(invalid="ignore", over="ignore", under="ignore"):
        d = xr - xl
        ok = np.isfinite(d) & (d >= 0.0) & (log_p[:-1] > -700.0) & (log_p[1:] > -700.0)
        ok &= np.isfinite(dlog_p[:-1]) & np.isfinite(dlog_p[1:])
        d = np.where(ok, d, 0.0)
        lpl, lpr = np.where(ok, log_p[:-1], 0.0), np.where(ok, log_p[1:], 0.0)
        pl, pr = np.exp(lpl), np.exp(lpr)
        gl, gr = np.where(ok, dlog_p[:-1], 0.0), np.where(ok, dlog_p[1:], 0.0)
        rl, rr = np.where(ok, rho[:-1], 0.0), np.where(ok, rho[1:], 0.0)
        el, er = np.where(ok, dlog_err[:-1], 0.0), np.where(ok, dlog_err[1:], 0.0)
        xlf, xrf = np.where(ok, xl, 0.0), np.where(ok, xr, 0.0)
        main = 0.5 * d * (pl + pr)
        corr = (d * d / 12.0) * (pl * gl - pr * gr)
        m = main + corr
        zmax = np.maximum(np.abs(xrf - a_lo), np.abs(xlf - a_hi)) / sigma * (1.0 + 4 * _U)
        r = d / sigma * (1.0 + 2 * _U)
        r2 = r * r
        trunc = d * (r2 * r2) / 720.0 * (zmax + 2.0) ** 4 * np.exp(zmax * r) * (np.minimum(pl, pr) * (1.0 + 4 * _U))
        trunc *= 1.0 + np.maximum(rl, rr) + 8 * _U
        err_main = main * (np.maximum(rl, rr) + 4 * _U)
        err_corr = (d * d / 12.0) * (pl * (np.abs(gl) * (rl + 4 * _U) + el) + pr * (np.abs(gr) * (rr + 4 * _U) + er))
        err = (trunc + err_main + err_corr * (1.0 + 1e-6) + 8 * _U * (main + np.abs(corr))) * (1.0 + 1e-6)
    ok &= ((m > 0.0) & (trunc <= _HERMITE_REL * m)) | (d == 0.0)
    masses = np.where(ok, np.maximum(m, 0.0), 0.0)
    return masses, np.where(ok, err, 0.0), ok

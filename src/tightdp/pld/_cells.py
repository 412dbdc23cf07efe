"""The cells of one step's privacy loss on the grid ``c + h Z``, for the dominance pairs of ``pld.dominance``.

Which losses the constructions support (``supports_dominance``, ``own_pairs``) and, for those, the cell
P- and Q-masses with their relative and l1 errors, the P-mass outside the grid and the edge margin of the
realised cells (``_cells``, memoised: the upper and the lower pair of one step on one mesh share them).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any, Protocol, TypeGuard

import numpy as np
from scipy import special

from .._caches import register as _register_cache
from .._types import FloatArray
from ..errors import GridTooLargeError, LossRangeError, PrecisionError, UnsupportedMechanismError
from ..losses import GaussianLoss, GaussianMixtureLoss, PrivacyLoss, gaussian_cell_masses_and_errors, split_errors
from .discretise import DiscretisedLoss

__all__ = ["Cells", "OwnPairsLoss", "Tail", "grid_ends", "grid_offset", "own_pairs", "supports_dominance"]

_U = float(np.finfo(float).eps) / 2
#: up to this many distinct Gaussian components, each is integrated once for P and Q together (per-component
#: calls: DP-SGD's 2 instead of 3); more (group privacy's binomial mixtures, 65 at a group of 64), each side's
#: mixture in one vectorised call (per-component calls were 18 % slower there)
_SHARED_COMPONENTS = 4
_LOSS_RANGE = 700.0  # exp(700) ~ 1e304: the largest step loss the cell arithmetic can exponentiate
_MAX_CELLS = 20_000_000

#: the P-mass a step's grid may leave outside it: one number for both sides, or ``(below, above)``
Tail = float | tuple[float, float]
#: ``_cells``: ``(s, P, Q, r, l1, p_below, p_above, inf_p, i0, e, c)`` (``split_cells``' arguments after ``h``)
Cells = tuple[FloatArray, FloatArray, FloatArray, float, float, float, float, float, int, float, float]


class OwnPairsLoss(Protocol):
    """A privacy loss that discretises itself (``own_pairs``)."""

    def dominating_pld(self, h: float, tail: float) -> DiscretisedLoss: ...

    def dominated_pld(self, h: float, tail: float) -> DiscretisedLoss: ...

    def spread(self) -> float: ...


def supports_dominance(loss: PrivacyLoss) -> bool:
    """Whether both distributions of ``loss`` are known well enough for these constructions: Gaussian
    losses and mixtures (by their outputs), every loss that gives Q's side in loss space, and every
    loss that brings its own certified pairs (``own_pairs``).

    Parameters
    ----------
    loss : PrivacyLoss
        Any privacy loss.

    Returns
    -------
    bool
        Whether ``dominating`` / ``dominated`` can discretise it.

    Raises
    ------
    TypeError
        Never for a ``PrivacyLoss``; an object whose ``has_q_side`` cannot be made a bool raises its own error.
    """
    return (
        isinstance(loss, (GaussianLoss, GaussianMixtureLoss))
        or bool(getattr(loss, "has_q_side", False))
        or own_pairs(loss)
    )


def own_pairs(loss: object) -> TypeGuard[OwnPairsLoss]:
    """Whether ``loss`` discretises itself: ``dominating_pld(h, tail)`` / ``dominated_pld(h, tail)``
    return certified dominating / dominated ``DiscretisedLoss`` pairs on the mesh ``h`` and ``spread()``
    its loss standard deviation (random allocation's epoch, truncated Poisson's flagged mixture:
    losses with no closed-form CDF whose pairs are built by their own dominance arguments).

    Parameters
    ----------
    loss : object
        Any object.

    Returns
    -------
    bool
        Whether it has callable ``dominating_pld`` and ``dominated_pld`` (a type guard for ``OwnPairsLoss``).

    Raises
    ------
    TypeError
        Never: attributes are looked up with defaults.
    """
    return callable(getattr(loss, "dominating_pld", None)) and callable(getattr(loss, "dominated_pld", None))


@_register_cache
@lru_cache(maxsize=32)
def _tails(tail: Tail) -> tuple[float, float]:
    """``(below, above)``: the P-mass a step's grid may leave below and above it; one number is both."""
    return (float(tail[0]), float(tail[1])) if isinstance(tail, tuple) else (float(tail), float(tail))


@_register_cache
@lru_cache(maxsize=8)
def _cells(loss: PrivacyLoss, h: float, tail: Tail) -> Cells:
    """Grid, cell P- and Q-masses with their relative errors, and the P-mass below / above the grid
    (``tail``: the mass allowed outside the grid, one number or ``(below, above)``). Memoised: the upper and
    the lower construction of one step on one mesh share them (the arrays are read-only)."""
    out = _cells_uncached(loss, h, tail)
    for a in out:
        if isinstance(a, np.ndarray):
            a.flags.writeable = False
    return out


def grid_ends(loss: PrivacyLoss, tail: Tail) -> tuple[float, float]:
    """The losses ``(s_lo, s_hi)`` a step's grid spans for the P-mass ``tail`` it may leave outside (one number, or
    ``(below, above)``): the support's ends, or tail points where they are infinite (or far out, for mixtures).

    Parameters
    ----------
    loss : PrivacyLoss
        The step's loss (not one that brings its own pairs).
    tail : float or tuple of float
        The P-mass the grid may leave outside it.

    Returns
    -------
    tuple of float
        ``(s_lo, s_hi)``, unchecked (possibly NaN or beyond the cells' range; ``_cells`` refuses those).
    """
    t_lo, t_hi = _tails(tail)
    lo_s, hi_s = loss.support()
    if isinstance(loss, GaussianMixtureLoss):
        # a mixture's finite end can lie far out where P has almost no mass (a group of 1000 at rate 1/2: -693, the
        # grid of [-693, 7] at mesh 5e-3 cost a minute over 1001 components): the grid stops at the tail points
        # instead, the mass beyond counted as for an infinite end (raised to the grid / dropped, to +inf / lowered)
        s_lo = max(lo_s, loss.tail_point(t_lo, upper=False))
        s_hi = min(hi_s, loss.tail_point(t_hi, upper=True))
    else:
        s_lo = lo_s if math.isfinite(lo_s) else loss.lower_quantile(t_lo)
        s_hi = hi_s if math.isfinite(hi_s) else loss.upper_quantile(t_hi)
    return s_lo, s_hi


def _cells_uncached(loss: PrivacyLoss, h: float, tail: Tail) -> Cells:
    if not supports_dominance(loss):
        raise UnsupportedMechanismError(f"no dominance discretisation for {type(loss).__name__}")
    t_lo, t_hi = _tails(tail)
    s_lo, s_hi = grid_ends(loss, tail)
    if math.isnan(s_lo) or math.isnan(s_hi) or (math.isinf(s_lo) and math.isinf(s_hi)):
        raise PrecisionError(
            f"cannot locate the privacy loss quantiles for a tail mass of {min(t_lo, t_hi):.3g} "
            "(below what double precision resolves): delta is too small"
        )
    if not (abs(s_lo) <= _LOSS_RANGE and abs(s_hi) <= _LOSS_RANGE):
        raise LossRangeError(
            f"one step's privacy loss reaches {max(abs(s_lo), abs(s_hi)):.4g}, beyond the "
            f"+-{_LOSS_RANGE:g} that the dominance cells can exponentiate in double precision "
            "(the step alone has an epsilon in the hundreds)"
        )
    c = grid_offset(loss, h)
    i0 = math.floor((s_lo - c) / h)
    i1 = max(i0 + 1, math.ceil((s_hi - c) / h))
    generic = not isinstance(loss, (GaussianLoss, GaussianMixtureLoss))
    if generic:  # one cell of margin on each side: atoms at the ends of the support fall inside the grid
        i0, i1 = i0 - 1, i1 + 1
    if i1 - i0 > _MAX_CELLS:
        raise GridTooLargeError(
            f"the dominance grid of one step would need {i1 - i0:,} points "
            f"(cap {_MAX_CELLS:,}; mesh {h:.3g} over losses [{s_lo:.4g}, {s_hi:.4g}])"
        )
    s = np.arange(i0, i1 + 1) * h + c
    if generic:
        return (*_cells_from_cdfs(loss, s, i0), c)
    if isinstance(loss, GaussianLoss):
        m, sd = loss.mean, loss.mu
        x = s
        p_par: tuple[tuple[float, ...], tuple[float, ...]] = ((m,), (1.0,))
        q_par: tuple[tuple[float, ...], tuple[float, ...]] = ((-m,), (1.0,))
        sigma, edge_err, inf_p = sd, 0.0, 0.0
    else:
        assert isinstance(loss, GaussianMixtureLoss)  # (not generic)
        x, edge_err = loss.outputs_at(s)
        p_par = (tuple(loss.p_means), tuple(loss.p_weights))
        q_par = (tuple(loss.q_means), tuple(loss.q_weights))
        sigma, inf_p = loss.sigma, loss.infinity_mass
    xf = np.where(np.isfinite(x), x, 0.0)
    out: list[tuple[Any, ...]] = []
    distinct = {float(a) for a in (*p_par[0], *q_par[0])}
    if len(distinct) <= _SHARED_COMPONENTS:
        # each distinct component once (DP-SGD's P and Q share the component at 0): unit-weight cell masses
        # with absolute error bounds, CDF and survival values at the edges; then a weighted sum of K
        # non-negative terms per side, (K + 1) u of the sum on top of the terms' own errors
        comps: dict[float, tuple[Any, ...]] = {}
        for m in distinct:
            z = (xf - m) / sigma
            cdf = np.where(x == -np.inf, 0.0, np.where(x == np.inf, 1.0, special.ndtr(z)))
            sf = np.where(x == -np.inf, 1.0, np.where(x == np.inf, 0.0, special.ndtr(-z)))
            comps[m] = (*gaussian_cell_masses_and_errors(x, (m,), (1.0,), sigma, cdf, sf), float(cdf[0]), float(sf[-1]))
        for means, weights in (p_par, q_par):
            parts = [(float(w), comps[float(m)]) for m, w in zip(means, weights)]
            masses = sum(w * c[0] for w, c in parts)
            err = sum(w * c[1] for w, c in parts) + (len(parts) + 1) * _U * masses
            out.append(
                (masses, *split_errors(masses, err), sum(w * c[2] for w, c in parts), sum(w * c[3] for w, c in parts))
            )
    else:  # many components (group privacy's mixtures): each side's mixture vectorised over its components
        for means, weights in (p_par, q_par):
            a = np.asarray(means, float)
            w = np.asarray(weights, float)
            z = (xf[:, None] - a[None, :]) / sigma
            tot = float(w.sum())
            cdf = np.where(x == -np.inf, 0.0, np.where(x == np.inf, tot, special.ndtr(z) @ w))
            sf = np.where(x == -np.inf, tot, np.where(x == np.inf, 0.0, special.ndtr(-z) @ w))
            masses, err = gaussian_cell_masses_and_errors(x, means, weights, sigma, cdf, sf)
            out.append((masses, *split_errors(masses, err), float(cdf[0]), float(sf[-1])))
    (P, rp, lp, p_below, p_above), (Q, rq, lq, _, _) = out
    if edge_err > 1e-6 * h:
        raise PrecisionError(f"loss inversion error {edge_err:.2g} too large for the dominance grid (mesh {h:.2g})")
    # realised cell edges x_i may sit where the loss is s_i +- edge: edge_err as measured, plus the
    # rounding of that measurement (the loss evaluated in floats, its argument up to |x| / sigma^2)
    xf_max = float(np.max(np.abs(xf))) if xf.size else 0.0
    edge = (
        0.0 if isinstance(loss, GaussianLoss) else _edge_margin(max(edge_err, _U), s, xf_max * xf_max / (sigma * sigma))
    )
    # mixture weights known only up to a factor 1 + w (rounded up: group privacy's certified
    # hypergeometric/binomial weights, ``mechanisms.mixture._WeightError``) are a relative mass error
    rel = max(rp, rq) + float(getattr(loss, "weight_error", 0.0) or 0.0) * (1.0 + 1e-6)
    return s, P, Q, rel, lp + lq, p_below, p_above, inf_p, i0, edge, c


def grid_offset(loss: PrivacyLoss, h: float) -> float:
    """The offset ``c`` of the grid ``c + h Z`` a loss is discretised on: one that puts its lowest atom
    (``PrivacyLoss.lattice_atoms``) on a grid point, so that on a mesh dividing the distances between its
    atoms every atom is a grid point (subsampled Laplace's two support ends, which are not multiples of
    a common mesh, but whose difference is). 0 for losses without atoms, and where ``h Z`` already holds
    the lowest one. A composition's grid is offset by the sum of its steps' offsets (the ``shift`` of
    ``DiscretisedLoss``), so every step may have its own."""
    atoms = [a for a in loss.lattice_atoms() if math.isfinite(a)]
    if not atoms:
        return 0.0
    a = min(atoms)
    c = a - h * math.floor(a / h + 0.5)
    return 0.0 if abs(c) <= 1e-12 * (1.0 + abs(a)) else c


def _cells_from_cdfs(loss: PrivacyLoss, s: FloatArray, i0: int) -> tuple[Any, ...]:
    """``_cells`` for any loss that gives the CDFs of both sides in loss space (``has_q_side``):
    Laplace, subsampled Laplace, atoms (randomized response, pure and approximate DP). Cell ``i`` is
    ``(s_i, s_(i+1)]``, its P- and Q-masses are differences of the CDFs (or survival functions, on
    the side without cancellation), so atoms and densities are handled alike and no output space
    needs inverting (edge error 0)."""
    p_below, p_above, P, (rp, lp), edge_err = loss.cell_masses(s)
    Q, (rq, lq) = loss.q_cell_masses(s)
    return (s, P, Q, max(rp, rq), lp + lq, p_below, p_above, float(loss.infinity_mass), i0, _edge_margin(edge_err, s))


def _edge_margin(edge_err: float, s: FloatArray, x_scale: float = 0.0) -> float:
    """The loss distance ``e`` the realised cell edges may sit from the grid: the measured ``edge_err``
    doubled, plus the rounding of that measurement (the loss evaluated in floats at losses up to
    ``max |s|``, its argument up to ``x_scale``); 0 where the edges are exact (``edge_err == 0``)."""
    if edge_err <= 0.0:
        return 0.0
    return 2.0 * edge_err + 64.0 * _U * (1.0 + float(np.max(np.abs(s))) + x_scale)

"""Dominating and dominated discrete pairs on the grid ``h Z`` (no coupling term).

For a privacy loss with both distributions known (Gaussian mixtures), cut the
loss axis into cells ``C_i = (s_i, s_{i+1}]`` with ``s_i = i h``, with P- and
Q-masses ``P_i, Q_i`` (so ``e^{s_i} Q_i <= P_i <= e^{s_{i+1}} Q_i``).

* **Upper bound** (pessimistic "connect-the-dots", Doroshenko et al. 2022):
  each cell becomes two atoms at ``s_i`` and ``s_{i+1}`` with the same total
  P and Q masses. Its hockey-stick curve is the chord of the true (convex) curve
  between grid points, so the discrete pair *dominates* the true one, and
  dominance survives composition (Blackwell; 000 App. C.6).
* **Lower bound** ("merge to the grid"): sweeping the cells upwards, a carry
  with likelihood ratio below the next grid value ``alpha_T = e^{s_T}`` is
  merged with (a proportional part of) the following cells until the merged
  ratio is exactly ``alpha_T``. Merging outputs is a post-processing, so the
  result is *dominated* by the true pair, and its atoms sit exactly on the
  grid (no rounding bias). The final carry is rounded down to the grid.

Neither needs the Hoeffding shift of 003 Thm 5.5, so the grid does not have to
shrink like ``1/sqrt(k)``. Floating point: cell masses carry a relative error
``r`` (``tightdp.losses.gaussian_cell_masses_and_errors``); the split is
moved to the safe side by its worst-case error, the merged atoms' losses are
lowered by ``2r`` plus a margin, and both results carry ``rel_error = r`` so the
composition's ``(1 +- r)^k`` factors apply (``tightdp.pld.curve``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any, Protocol, TypeGuard

import numpy as np
from scipy import special

from .._caches import register as _register_cache
from .._types import FloatArray, IntArray
from ..errors import GridTooLargeError, LossRangeError, PrecisionError, UnsupportedMechanismError
from ..losses import GaussianLoss, GaussianMixtureLoss, PrivacyLoss, gaussian_cell_masses_and_errors, split_errors
from .discretise import DiscretisedLoss

__all__ = [
    "dominating",
    "dominated",
    "is_swapped_pair",
    "loss_excess_kurtosis",
    "loss_spread",
    "merge_cells",
    "own_pairs",
    "split_cells",
    "supports_dominance",
]

_U = float(np.finfo(float).eps) / 2
#: up to this many distinct Gaussian components, each is integrated once for P and Q together (per-component
#: calls: DP-SGD's 2 instead of 3); more (group privacy's binomial mixtures, 65 at a group of 64), each side's
#: mixture in one vectorised call (per-component calls were 18 % slower there)
_SHARED_COMPONENTS = 4
_LOSS_RANGE = 700.0  # exp(700) ~ 1e304: the largest step loss the cell arithmetic can exponentiate
#: A merged carry whose ratio falls short of its grid value by at most this factor (an atom sitting on a
#: grid point, off by the rounding of ``i * h`` and of its Q-mass) is placed on that grid point, not a mesh
#: below; ``dominated`` lowers every loss by ``_SNAP_LOSS`` more to pay for it. Without it, pure DP's atoms
#: lost a whole mesh per step in the lower bound (width growing like ``k h``, eight passes at k = 1e4).
_SNAP_TOL = 1e-12
_SNAP_LOSS = 2e-12  # >= log(1 + _SNAP_TOL) plus the rounding of the ratio test and of log(cp / cq)
_MAX_CELLS = 20_000_000

#: the P-mass a step's grid may leave outside it: one number for both sides, or ``(below, above)``
Tail = float | tuple[float, float]
#: ``_cells``: ``(s, P, Q, r, l1, p_below, p_above, inf_p, i0, e, c)`` (``split_cells``' arguments after ``h``)
Cells = tuple[FloatArray, FloatArray, FloatArray, float, float, float, float, float, int, float, float]
#: the items a merge sweeps: ``(P, Q, start)`` (``_merge_items``; ``start`` ``None``: cell ``i`` aims at ``i + 1``)
MergeItems = tuple[FloatArray, FloatArray, "IntArray | None"]


class OwnPairsLoss(Protocol):
    """A privacy loss that discretises itself (``own_pairs``)."""

    def dominating_pld(self, h: float, tail: float) -> DiscretisedLoss: ...

    def dominated_pld(self, h: float, tail: float) -> DiscretisedLoss: ...

    def spread(self) -> float: ...


def supports_dominance(loss: PrivacyLoss) -> bool:
    """Whether both distributions of ``loss`` are known well enough for these constructions: Gaussian
    losses and mixtures (by their outputs), every loss that gives Q's side in loss space, and every
    loss that brings its own certified pairs (``own_pairs``)."""
    return (
        isinstance(loss, (GaussianLoss, GaussianMixtureLoss))
        or bool(getattr(loss, "has_q_side", False))
        or own_pairs(loss)
    )


def own_pairs(loss: object) -> TypeGuard[OwnPairsLoss]:
    """Whether ``loss`` discretises itself: ``dominating_pld(h, tail)`` / ``dominated_pld(h, tail)``
    return certified dominating / dominated ``DiscretisedLoss`` pairs on the mesh ``h`` and ``spread()``
    its loss standard deviation (random allocation's epoch, truncated Poisson's flagged mixture:
    losses with no closed-form CDF whose pairs are built by their own dominance arguments)."""
    return callable(getattr(loss, "dominating_pld", None)) and callable(getattr(loss, "dominated_pld", None))


def is_swapped_pair(a: PrivacyLoss, b: PrivacyLoss) -> bool:
    """Whether ``b`` is the privacy loss of ``a``'s pair with P and Q exchanged (up to a reflection of
    the output space, which leaves privacy curves unchanged): ``b``'s P is ``a``'s Q and vice versa.

    Poisson subsampling's add direction is the remove direction swapped, which lets the add
    direction's curve be bounded from the remove direction's composition
    (``H_a(Q || P) = 1 - a + a H_{1/a}(P || Q)``).
    """
    if not (isinstance(a, GaussianMixtureLoss) and isinstance(b, GaussianMixtureLoss)):
        return False
    if a.sigma != b.sigma or a.infinity_mass != 0.0 or b.infinity_mass != 0.0:
        return False

    def comps(means: Sequence[float], weights: Sequence[float]) -> list[tuple[float, float]]:
        return sorted((float(m), float(w)) for m, w in zip(means, weights) if w > 0)

    ap, aq = comps(a.p_means, a.p_weights), comps(a.q_means, a.q_weights)
    bp, bq = comps(b.p_means, b.p_weights), comps(b.q_means, b.q_weights)
    if not (ap and aq and bp and bq):
        return False
    tol = 1e-12 * (1.0 + max(abs(m) for m, _ in ap + aq + bp + bq))

    def maps(src: list[tuple[float, float]], dst: list[tuple[float, float]], f: Callable[[float], float]) -> bool:
        img = sorted((f(m), w) for m, w in src)
        return len(img) == len(dst) and all(
            abs(x[0] - y[0]) <= tol and abs(x[1] - y[1]) <= 1e-15 * max(1.0, y[1]) for x, y in zip(img, dst)
        )

    reflect = bp[-1][0] + aq[0][0]  # x -> reflect - x maps the smallest Q mean of a to the largest P mean of b
    translate = bp[0][0] - aq[0][0]  # x -> x + translate maps smallest to smallest
    return any(maps(aq, bp, f) and maps(ap, bq, f) for f in (lambda m: reflect - m, lambda m: m + translate))


_HE_NODES, _HE_WEIGHTS = np.polynomial.hermite_e.hermegauss(60)
_HE_WEIGHTS = _HE_WEIGHTS / _HE_WEIGHTS.sum()


@_register_cache
@lru_cache(maxsize=64)
def loss_spread(loss: PrivacyLoss) -> float:
    """Standard deviation of the (finite) privacy loss under P: exact for a Gaussian loss,
    60-point Gauss-Hermite quadrature per component of P for a Gaussian mixture. An estimate for
    choosing meshes, never part of a bound (memoised: the accountant asks for it on every pass)."""
    if isinstance(loss, GaussianLoss):
        return float(loss.mu)
    if own_pairs(loss):
        return float(loss.spread())
    if not isinstance(loss, GaussianMixtureLoss):
        if not supports_dominance(loss):
            raise UnsupportedMechanismError(f"no dominance discretisation for {type(loss).__name__}")
        return _spread_from_cdf(loss)
    return math.sqrt(_mixture_central_moments(loss)[0])


@_register_cache
@lru_cache(maxsize=64)
def _mixture_central_moments(loss: GaussianMixtureLoss) -> tuple[float, float]:
    """Second and fourth central moments of a Gaussian mixture's finite loss under P (60-point Gauss-Hermite
    quadrature per component of P; estimates)."""
    a = np.asarray(loss.p_means, float)
    w = np.asarray(loss.p_weights, float)
    w = w / w.sum()
    x = a[:, None] + loss.sigma * _HE_NODES[None, :]
    vals = loss.loss(x.ravel()).reshape(x.shape)
    vals = np.where(np.isfinite(vals), vals, 0.0)
    weights = w[:, None] * _HE_WEIGHTS[None, :]
    c = vals - float(np.sum(weights * vals))
    c2 = c * c
    return max(float(np.sum(weights * c2)), 0.0), max(float(np.sum(weights * c2 * c2)), 0.0)


@_register_cache
@lru_cache(maxsize=64)
def loss_excess_kurtosis(loss: PrivacyLoss) -> float:
    """Excess kurtosis of one step's finite privacy loss under P (Gaussian mixtures: quadrature; 0 for every
    other loss, where it is not estimated). Composing ``k`` steps divides it by ``k``; a large value means the
    composition is far from Gaussian (rare sampled steps: about ``1 / (q k)``). An estimate for choosing
    meshes, never part of a bound."""
    if not isinstance(loss, GaussianMixtureLoss):
        return 0.0
    m2, m4 = _mixture_central_moments(loss)
    return m4 / (m2 * m2) - 3.0 if m2 > 0.0 else 0.0


def _spread_from_cdf(loss: PrivacyLoss) -> float:
    """The P-standard deviation of a loss from its CDF on 4001 points (finite part; an estimate)."""
    lo, hi = loss.support()
    lo = lo if math.isfinite(lo) else loss.lower_quantile(1e-12)
    hi = hi if math.isfinite(hi) else loss.upper_quantile(1e-12)
    if not hi > lo:
        return 0.0
    e = np.linspace(lo - 1e-9 * (1 + abs(lo)), hi, 4001)
    p = np.diff(loss.cdf(e))
    mid = np.concatenate([[lo], 0.5 * (e[1:-1] + e[2:])])  # the first cell holds the atom at lo
    tot = float(p.sum())
    if tot <= 0:
        return 0.0
    m = float(np.dot(p, mid)) / tot
    return math.sqrt(max(float(np.dot(p, (mid - m) ** 2)) / tot, 0.0))


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


def _cells_uncached(loss: PrivacyLoss, h: float, tail: Tail) -> Cells:
    if not supports_dominance(loss):
        raise UnsupportedMechanismError(f"no dominance discretisation for {type(loss).__name__}")
    t_lo, t_hi = _tails(tail)
    lo_s, hi_s = loss.support()
    s_lo = lo_s if math.isfinite(lo_s) else loss.lower_quantile(t_lo)
    s_hi = hi_s if math.isfinite(hi_s) else loss.upper_quantile(t_hi)
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


def dominating(loss: PrivacyLoss, h: float, tail: Tail) -> DiscretisedLoss:
    """Connect-the-dots pair (P-masses at ``s_i``) whose curve lies above the true one everywhere.

    The realised cell ``i`` holds losses in ``[s_i - e, s_(i+1) + e]``, ``e`` the inversion error of
    its edges. Its connect-the-dots split is taken on that widened cell (atoms at ``s_i - e`` and
    ``s_(i+1) + e``: exact dominance), and then every atom is placed at its grid point plus ``e``
    (``shift = +e``): the upper atom exactly, the lower one raised by ``2e``. Raising a loss can only
    raise ``delta(eps) = E_P[(1 - e^(eps - L))_+]``, of one step and of any composition, so the pair
    still dominates; the edge error costs a loss shift of ``e`` (about 1e-15) per step instead of a
    relative mass error of ``e / h`` per cell, which grew without bound as the mesh shrank.
    """
    if own_pairs(loss):
        return loss.dominating_pld(h, max(_tails(tail)))
    return split_cells(h, *_cells(loss, h, tail))


def split_cells(
    h: float,
    s: FloatArray,
    P: FloatArray,
    Q: FloatArray,
    r: float,
    l1: float,
    p_below: float,
    p_above: float,
    inf_p: float,
    i0: int,
    e: float,
    c: float,
) -> DiscretisedLoss:
    """The connect-the-dots pair of the cells ``(s_i, s_(i+1)]``, ``s = c + (i0 + arange) h``, with P- and
    Q-masses ``P, Q`` (relative error ``r``, l1 error ``l1``; ``p_below``/``p_above`` the P-mass below/above
    the grid, ``inf_p`` at +inf, ``i0`` the index of ``s_0``, ``e`` the cells' edge margin, ``c`` the grid's
    offset): ``dominating``'s construction for any cells, those of a mechanism's loss or of a composed block
    (``tightdp.pld.hierarchy.dominating_block``)."""
    alpha = np.exp(s[:-1] - e)
    den = -math.expm1(-(h + 2.0 * e))
    b = (P - alpha * Q) / den
    # worst-case error of the computed upper atom, pushed to the safe (upper) side
    b_err = (r * (P + alpha * Q) + 4 * _U * (P + alpha * Q)) / den
    upper = np.clip(b + b_err, 0.0, P)
    lower = P - upper
    pmf = np.zeros(s.size)
    pmf[1:] += upper
    pmf[:-1] += lower
    pmf[0] += p_below  # below the grid: rounded up to the lowest grid value
    return DiscretisedLoss(
        h=h,
        start=i0,
        pmf=pmf,
        shift=c + e,
        infinity_mass=min(1.0, inf_p + p_above),
        truncated_mass=0.0,
        mean_error=0.0,
        coupling_range=0.0,
        tv_error=l1,
        rel_error=r + 4 * _U,
    )


def dominated(loss: PrivacyLoss, h: float, tail: Tail, *, top_down: bool = False) -> DiscretisedLoss:
    """Merge-to-the-grid pair (P-masses at ``s_i``) whose curve lies below the true one everywhere.

    The default sweep runs upwards (each carry is lifted to its upper grid
    point with mass from above). ``top_down=True`` sweeps downwards instead:
    each carry is lowered to its lower grid point with a sliver of the cells
    below, which keeps light tail cells apart from the bulk (the upward sweep
    can swallow a whole tail into one carry when delta is decided ten standard
    deviations out). Both are post-processings, so both are dominated.

    Returned with ``shift = -(2r + 1e-13)``: every loss is lowered by the worst
    misplacement the floating-point cell masses allow (lowering losses can only
    lower delta, so the result stays a lower bound). For the same reason the P-mass
    above the grid (finite losses beyond the top grid value ``s_top``) is kept as an
    atom at ``s_top``: ``delta(eps) = E_P[(1 - e^(eps - L))_+]`` is non-decreasing in
    every step's loss, so lowering those losses to ``s_top`` lowers delta, of one
    step and, coupling the steps, of any composition. (Dropping that mass, as the
    mass below the grid is dropped, cost up to the whole truncation budget in delta:
    a bias of 1 % of epsilon at delta = 0.3 that no mesh removed.)
    """
    if own_pairs(loss):
        return loss.dominated_pld(h, max(_tails(tail)))
    # the merges use only the realised cells' own masses and the ratios computed from them, so where the
    # cell edges sit does not matter, except for atoms moved onto a grid point (``moved``: charged below)
    s, P, Q, r, l1, _p_below, p_above, inf_p, i0, _, c = _cells(loss, h, tail)
    if not loss.infinity_is_exact:  # mass sent to +inf on the safe side of the *upper* bound: dropped here
        inf_p = 0.0
    ip, iq, start, moved = _merge_items(loss, s, P, Q)
    return merge_cells(h, s, (ip, iq, start), r, l1, p_above, inf_p, i0, c, moved=moved, top_down=top_down)


def merge_cells(
    h: float,
    s: FloatArray,
    items: MergeItems,
    r: float,
    l1: float,
    p_above: float,
    inf_p: float,
    i0: int,
    c: float,
    *,
    moved: float = 0.0,
    top_down: bool = False,
) -> DiscretisedLoss:
    """The merge-to-the-grid pair of the grid ``s = c + (i0 + arange) h`` from the items ``(P, Q, start)``
    (``_merge_items``: cells, and atoms on grid points, in increasing order of ratio; relative error ``r``,
    l1 error ``l1``), ``p_above`` the P-mass above the grid, ``inf_p`` at +inf (the P-mass below the grid is
    dropped): ``dominated``'s construction for any cells, those of a mechanism's loss or of a composed block
    (``tightdp.pld.hierarchy.dominated_block``)."""
    # an atom moved up onto its grid point by ``moved`` is placed there: lower every loss by that much more
    margin = 2.0 * r + 1e-13 + _SNAP_LOSS + 2.0 * moved
    if top_down:
        pmf = _merge_down(items[0], items[1], items[2], np.exp(s), s)
    else:
        # the P-mass below the grid is dropped (sent to -inf): a lower bound may only lose mass or loss
        pmf, cp, cq, target = merge_up(items[0], items[1], np.exp(s), tol=_SNAP_TOL, start=items[2])
        # the last carry: ratio below alpha_target, round its loss down to the grid point below
        j = _grid_index_below(cp, cq, s, target)
        if j >= 0 and cp > 0.0:  # below the grid it is dropped (loss -inf): moving it up would be optimistic
            pmf[j] += cp
    pmf[-1] += p_above  # finite losses above the grid, lowered to its top value (``dominated``)
    return DiscretisedLoss(
        h=h,
        start=i0,
        pmf=np.asarray(pmf),
        shift=c - margin,
        infinity_mass=inf_p,
        truncated_mass=0.0,
        mean_error=0.0,
        coupling_range=0.0,
        tv_error=l1,
        rel_error=r + 4 * _U,
    )


def _merge_items(
    loss: PrivacyLoss, s: FloatArray, P: FloatArray, Q: FloatArray
) -> tuple[FloatArray, FloatArray, IntArray | None, float]:
    """The outputs the merges sweep, in increasing order of likelihood ratio: ``(P, Q, start, moved)``, ``start``
    the grid index a carry beginning with that item aims at (``None``: ``i + 1`` for every cell). Cell ``i`` (ratio in ``[alpha_i, alpha_(i+1)]``)
    aims at ``i + 1``. A loss with atoms on grid points (pure DP, randomized response, Laplace's ``+-r``;
    ``edge_atoms``) gives them as items of their own between the cells, aiming at their own grid point:
    a merge then keeps them there instead of merging them with the density of their cell (Laplace's atom
    at ``r``, half the mass, went a mesh down with its cell's sliver of density: a width growing like
    ``k h``). ``moved``: the largest distance an atom was moved onto its grid point (0 without atoms)."""
    split = getattr(loss, "edge_atoms", None)
    n = P.size
    if split is None:
        return P, Q, None, 0.0  # merge_up's default: cell i aims at i + 1
    Pc, Qc, Pa, Qa, moved = split(s)
    ip, iq, start = np.empty(2 * n + 1), np.empty(2 * n + 1), np.empty(2 * n + 1, dtype=np.int64)
    ip[0::2], ip[1::2] = Pa, Pc
    iq[0::2], iq[1::2] = Qa, Qc
    start[0::2], start[1::2] = np.arange(n + 1), np.arange(1, n + 1)
    keep = (ip > 0.0) | (iq > 0.0)
    keep[0] = True  # the sweep starts with the first item
    return ip[keep], iq[keep], start[keep], moved


def merge_up(
    P: FloatArray, Q: FloatArray, alpha: FloatArray, tol: float = 0.0, start: IntArray | None = None
) -> tuple[list[float], float, float, int]:
    """The upward merge-to-the-grid sweep on any increasing lattice of ratios ``alpha``.

    Item ``i`` (masses ``P[i], Q[i]``; by default cell ``i``, ratio in ``[alpha[i], alpha[i+1]]``) has
    likelihood ratio at least ``alpha[start[i] - 1]`` and at most ``alpha[start[i]]`` (``start[i] = i + 1``
    by default; an atom on grid point ``g`` has ``start = g``). Sweeping upwards, the carry (ratio below
    ``alpha[T]``) takes the fraction of the next items that brings its ratio to exactly ``alpha[T]``: a
    randomised merge of outputs, a post-processing, so the result is dominated; an item whose ratio is
    ``alpha[T]`` itself (an atom on the grid) is placed there on its own. Only the items' own masses
    are used. Returns the ``P``-masses at the targets (a list; ``Q = P / alpha``) and the final carry
    ``(cp, cq, T)``, whose ratio lies below ``alpha[T]``: the caller places it. ``tol``: ratios within a
    factor ``1 + tol`` of ``alpha[T]`` count as ``alpha[T]`` (the caller lowers every loss by
    ``log(1 + tol)`` more). Used by ``dominated`` (ratios ``e^(s_i)``) and by random allocation's ratio
    lattices.
    """
    n = P.size
    al = alpha.tolist()
    st = list(range(1, n + 1)) if start is None else np.asarray(start).tolist()
    pmf = [0.0] * alpha.size  # a Python list: this sequential sweep is the hot loop
    Pl, Ql = P.tolist(), Q.tolist()
    cp, cq, target = Pl[0], Ql[0], st[0]
    for pi, qi, si in zip(Pl[1:], Ql[1:], st[1:]):  # (zip, not indexing: this loop is the lower bound's cost)
        if pi <= 0.0 and qi <= 0.0:
            continue
        a = al[target]
        deficit = a * cq - cp  # >= 0: the carry's ratio is below alpha_T
        if deficit <= tol * cp:  # the carry reached alpha_T (up to tol): emit it there
            pmf[target] += cp
            cp, cq, target = pi, qi, si
            continue
        surplus = pi - a * qi  # >= 0: item i lies at or above alpha_T
        if surplus <= tol * pi:  # item i sits at alpha_T (an atom on the grid point): it stays there
            pmf[target] += pi
            continue
        if surplus > deficit:
            f = deficit / surplus
            pmf[target] += cp + f * pi
            cp, cq = (1.0 - f) * pi, (1.0 - f) * qi
            target = si
        else:
            cp, cq = cp + pi, cq + qi
    return pmf, cp, cq, target


def _grid_index_below(cp: float, cq: float, s: FloatArray, cap: int) -> int:
    """Index of the grid point of ``s`` at or below the loss ``log(cp / cq) + _SNAP_TOL`` (at most ``cap``;
    -1: below the grid, or no P-mass). The tolerance puts an atom that sits on a grid point up to
    rounding on that point (``dominated`` lowers every loss by ``_SNAP_LOSS`` to pay for it)."""
    if cq <= 0.0:
        return cap
    if cp <= 0.0:  # no P-mass to place (its loss would be -inf)
        return -1
    return min(cap, int(np.searchsorted(s, math.log(cp / cq) + _SNAP_TOL, side="right")) - 1)


def _merge_down(P: FloatArray, Q: FloatArray, start: IntArray | None, alpha: FloatArray, s: FloatArray) -> list[float]:
    """The downward merge-to-the-grid sweep of ``dominated(top_down=True)`` (P-masses at ``s``).

    The items are ``_merge_items``' (increasing ratio; cell ``i`` spans ``(s_i, s_(i+1)]``, an atom on
    grid point ``g`` has ``start = g``) swept from the top. The carry's ratio is at least
    ``alpha_T = e^(s_T)``; an item below, whose ratio is at most ``alpha_T``, gives the fraction of itself
    that brings the merged ratio down to exactly ``alpha_T``; the merged atom goes to ``s_T`` and the rest
    of the item carries on with its own lower grid point as target (a cell whose ratio is its upper edge's,
    up to rounding, aims there). An item at ``alpha_T`` itself stays there on its own. A carry found below
    its target by more than the rounding tolerance, and the last carry, go to the grid point at or below
    their ratio (never up).
    """
    n = P.size
    al = alpha.tolist()
    Pl, Ql = P.tolist(), Q.tolist()
    st = list(range(1, n + 1)) if start is None else np.asarray(start).tolist()
    pmf = [0.0] * s.size

    cp, cq, target = Pl[n - 1], Ql[n - 1], _aim_down(Pl[n - 1], Ql[n - 1], st[n - 1], al)
    for i in range(n - 2, -1, -1):
        pi, qi = Pl[i], Ql[i]
        if pi <= 0.0 and qi <= 0.0:
            continue
        a = al[target]
        surplus = cp - a * cq  # >= 0: the carry's ratio is at least alpha_T
        if surplus <= 0.0:  # the carry is at alpha_T, or below it by rounding: never round up beyond tol
            j = target if surplus >= -_SNAP_TOL * cp else _grid_index_below(cp, cq, s, target - 1)
            if j >= 0 and cp > 0.0:
                pmf[j] += cp
            cp, cq, target = pi, qi, _aim_down(pi, qi, st[i], al)
            continue
        deficit = a * qi - pi  # >= 0: item i lies at or below alpha_T
        if deficit <= _SNAP_TOL * pi:  # item i sits at alpha_T (an atom on the grid point): it stays there
            pmf[target] += pi
            continue
        if deficit > surplus:
            f = surplus / deficit
            pmf[target] += cp + f * pi
            cp, cq = (1.0 - f) * pi, (1.0 - f) * qi
            target = _aim_down(pi, qi, st[i], al)
        else:
            cp, cq = cp + pi, cq + qi
    if cp > 0.0:  # the last carry: ratio at least alpha_target (up to rounding), so s_target or below
        j = _grid_index_below(cp, cq, s, target)
        if j >= 0:
            pmf[j] += cp
    return pmf


def _aim_down(p: float, q: float, start: int, alpha: list[float]) -> int:
    """The grid point a downward carry beginning with an item aims at: the top of the item's ratio range
    (``start``) if its ratio is there up to rounding (an atom, or a cell whose mass sits at its upper
    edge), else the bottom (``start - 1``, a cell's lower edge)."""
    return start if p > 0.0 and p >= alpha[start] * q * (1.0 - _SNAP_TOL) else max(start - 1, 0)

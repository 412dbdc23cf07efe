"""Dominating and dominated discrete pairs on the grid ``h Z`` (no coupling term).

For a privacy loss with both distributions known (Gaussian mixtures), cut the
loss axis into cells ``C_i = (s_i, s_{i+1}]`` with ``s_i = i h``, with P- and
Q-masses ``P_i, Q_i`` (so ``e^{s_i} Q_i <= P_i <= e^{s_{i+1}} Q_i``).

* **Upper bound** (pessimistic "connect-the-dots", Doroshenko et al. 2022):
  each cell becomes two atoms at ``s_i`` and ``s_{i+1}`` with the same total
  P and Q masses. Its hockey-stick curve is the chord of the true (convex) curve
  between grid points, so the discrete pair *dominates* the true one, and
  dominance survives composition (Blackwell; Koskela et al. 2023, App. C.6).
* **Lower bound** ("merge to the grid"): sweeping the cells upwards, a carry
  with likelihood ratio below the next grid value ``alpha_T = e^{s_T}`` is
  merged with (a proportional part of) the following cells until the merged
  ratio is exactly ``alpha_T``. Merging outputs is a post-processing, so the
  result is *dominated* by the true pair, and its atoms sit exactly on the
  grid (no rounding bias). The final carry is rounded down to the grid.

Neither needs the Hoeffding shift of Gopi et al. 2021, Thm 5.5, so the grid does not have to
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

import numpy as np

from .._caches import register as _register_cache
from .._types import FloatArray, IntArray
from ..errors import UnsupportedMechanismError
from ..losses import GaussianLoss, GaussianMixtureLoss, PrivacyLoss
from ._cells import Cells as Cells
from ._cells import OwnPairsLoss as OwnPairsLoss
from ._cells import Tail as Tail
from ._cells import _cells, _tails
from ._cells import grid_offset as grid_offset
from ._cells import own_pairs as own_pairs
from ._cells import supports_dominance as supports_dominance
from ._merge import _SNAP_LOSS, _SNAP_TOL, _grid_index_below, _merge_down
from ._merge import merge_up as merge_up
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

#: the largest loss whose likelihood ratio ``e^s`` is a finite double (``e^709 ~ 8e307``)
_EXP_MAX = 709.0

_U = float(np.finfo(float).eps) / 2

#: the items a merge sweeps: ``(P, Q, start)`` (``_merge_items``; ``start`` ``None``: cell ``i`` aims at ``i + 1``)
MergeItems = tuple[FloatArray, FloatArray, "IntArray | None"]


def is_swapped_pair(a: PrivacyLoss, b: PrivacyLoss) -> bool:
    """Whether ``b`` is the privacy loss of ``a``'s pair with P and Q exchanged (up to a reflection of
    the output space, which leaves privacy curves unchanged): ``b``'s P is ``a``'s Q and vice versa.

    Poisson subsampling's add direction is the remove direction swapped, which lets the add
    direction's curve be bounded from the remove direction's composition
    (``H_a(Q || P) = 1 - a + a H_{1/a}(P || Q)``).

    Parameters
    ----------
    a, b : PrivacyLoss
        The two losses (only Gaussian mixtures of one ``sigma`` without mass at infinity can be swapped).

    Returns
    -------
    bool
        Whether ``b`` is ``a`` with P and Q exchanged (means within 1e-12 relative, weights within 1e-15).

    Raises
    ------
    TypeError
        If a mixture's means or weights are not numbers.
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
    choosing meshes, never part of a bound (memoised: the accountant asks for it on every pass).

    Parameters
    ----------
    loss : PrivacyLoss
        The loss (hashable: memoised).

    Returns
    -------
    float
        The standard deviation estimate (>= 0).

    Raises
    ------
    UnsupportedMechanismError
        If ``loss`` supports no dominance discretisation (``supports_dominance``).
    """
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
    quadrature per component of P; estimates). Components lighter than 1e-16 of the heaviest are left out: the
    estimate cannot see them (a group of 1000 has 1001, 6 s of loss evaluations; about 260 count)."""
    a = np.asarray(loss.p_means, float)
    w = np.asarray(loss.p_weights, float)
    keep = w >= 1e-16 * w.max()
    a, w = a[keep], w[keep]
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
    meshes, never part of a bound.

    Parameters
    ----------
    loss : PrivacyLoss
        The loss (hashable: memoised).

    Returns
    -------
    float
        The excess kurtosis estimate (0 for losses other than Gaussian mixtures).

    Raises
    ------
    TypeError
        If ``loss`` is not hashable (the memo).
    """
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


def dominating(loss: PrivacyLoss, h: float, tail: Tail) -> DiscretisedLoss:
    """Connect-the-dots pair (P-masses at ``s_i``) whose curve lies above the true one everywhere.

    The realised cell ``i`` holds losses in ``[s_i - e, s_(i+1) + e]``, ``e`` the inversion error of
    its edges. Its connect-the-dots split is taken on that widened cell (atoms at ``s_i - e`` and
    ``s_(i+1) + e``: exact dominance), and then every atom is placed at its grid point plus ``e``
    (``shift = +e``): the upper atom exactly, the lower one raised by ``2e``. Raising a loss can only
    raise ``delta(eps) = E_P[(1 - e^(eps - L))_+]``, of one step and of any composition, so the pair
    still dominates; the edge error costs a loss shift of ``e`` (about 1e-15) per step instead of a
    relative mass error of ``e / h`` per cell, which grew without bound as the mesh shrank.

    Parameters
    ----------
    loss : PrivacyLoss
        The step's loss (``supports_dominance``).
    h : float
        The mesh (> 0).
    tail : float or tuple of float
        The P-mass the grid may leave outside it: one number for both sides, or ``(below, above)``.

    Returns
    -------
    DiscretisedLoss
        The dominating pair's P-masses on the grid (``coupling_range`` 0: no Hoeffding term).

    Raises
    ------
    UnsupportedMechanismError
        If ``loss`` supports no dominance discretisation.
    PrecisionError
        If the loss quantiles cannot be located (delta too small), or the loss inversion error is too large
        for the mesh.
    LossRangeError
        If one step's loss exceeds ``+-700`` (beyond what the cells can exponentiate).
    GridTooLargeError
        If one step's grid would exceed 2e7 points.

    References
    ----------
    Doroshenko, Ghazi, Kamath, Kumar, Manurangsi 2022, "Connect the dots: tighter discrete approximations of
    privacy loss distributions" (the pessimistic connect-the-dots pair); Koskela et al. 2023, App. C.6
    (dominance survives composition).
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
    (``tightdp.pld.hierarchy.dominating_block``).

    Parameters
    ----------
    h : float
        The mesh.
    s : FloatArray
        The grid ``c + (i0 + arange) h`` (one more point than cells).
    P, Q : FloatArray
        The cells' P- and Q-masses.
    r : float
        Relative error of the masses.
    l1 : float
        l1 error of the masses.
    p_below, p_above : float
        P-mass below and above the grid.
    inf_p : float
        P-mass at ``+inf``.
    i0 : int
        Grid index of ``s[0]``.
    e : float
        The cells' edge margin (every atom raised by it).
    c : float
        The grid's offset.

    Returns
    -------
    DiscretisedLoss
        The dominating pair's P-masses on the grid (mass below the grid raised onto ``s[0]``, above it at
        ``+inf``).

    Raises
    ------
    ValueError
        If ``P``, ``Q`` and ``s`` do not have matching lengths (numpy broadcasting).

    References
    ----------
    Doroshenko, Ghazi, Kamath, Kumar, Manurangsi 2022, "Connect the dots: tighter discrete approximations of
    privacy loss distributions" (the pessimistic connect-the-dots pair); Koskela et al. 2023, App. C.6
    (dominance survives composition).
    """
    arg = s[:-1] - e
    aq = np.exp(np.minimum(arg, 700.0)) * Q  # alpha Q, alpha = e^(s - e)
    extra = np.zeros_like(aq)
    big = arg > 700.0
    if np.any(big):  # e^(s - e) would overflow, alpha Q (at most P) would be inf * 0: take it in logs
        with np.errstate(divide="ignore"):
            log_q = np.log(Q[big])
        x = arg[big] + log_q
        aq[big] = np.exp(x)
        # the exponent's rounding (a few operations on terms of size |arg| and |log Q|), relative to alpha Q
        extra[big] = np.where(np.isfinite(x), (np.abs(arg[big]) + np.abs(log_q) + 4.0) * 4 * _U, 0.0) * aq[big]
    den = -math.expm1(-(h + 2.0 * e))
    b = (P - aq) / den
    # worst-case error of the computed upper atom, pushed to the safe (upper) side
    b_err = (r * (P + aq) + 4 * _U * (P + aq) + extra) / den
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

    Parameters
    ----------
    loss : PrivacyLoss
        The step's loss (``supports_dominance``).
    h : float
        The mesh (> 0).
    tail : float or tuple of float
        The P-mass the grid may leave outside it: one number for both sides, or ``(below, above)``.
    top_down : bool, default False
        Sweep downwards instead of upwards.

    Returns
    -------
    DiscretisedLoss
        The dominated pair's P-masses on the grid.

    Raises
    ------
    UnsupportedMechanismError
        If ``loss`` supports no dominance discretisation.
    PrecisionError
        As ``dominating``.
    LossRangeError
        As ``dominating``.
    GridTooLargeError
        As ``dominating``.

    References
    ----------
    Koskela et al. 2023, App. C.6 (dominance and post-processing); the merge is a randomised post-processing
    of the outputs.
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
    (``tightdp.pld.hierarchy.dominated_block``).

    Parameters
    ----------
    h : float
        The mesh.
    s : FloatArray
        The grid ``c + (i0 + arange) h``.
    items : tuple
        ``(P, Q, start)``: the items' masses and the grid index each aims at (``None``: cell ``i`` at ``i + 1``).
    r : float
        Relative error of the masses.
    l1 : float
        l1 error of the masses.
    p_above : float
        P-mass above the grid (lowered onto its top point).
    inf_p : float
        P-mass at ``+inf``.
    i0 : int
        Grid index of ``s[0]``.
    c : float
        The grid's offset.
    moved : float, default 0.0
        The largest distance an atom was moved onto its grid point (every loss lowered by twice it).
    top_down : bool, default False
        Sweep downwards instead of upwards.

    Returns
    -------
    DiscretisedLoss
        The dominated pair's P-masses on the grid.

    Raises
    ------
    IndexError
        If an item's ``start`` lies outside the grid.
    """
    # an atom moved up onto its grid point by ``moved`` is placed there: lower every loss by that much more
    margin = 2.0 * r + 1e-13 + _SNAP_LOSS + 2.0 * moved
    full = s
    P_in, Q_in, start = items
    lifted = 0.0
    top = int(np.searchsorted(s, _EXP_MAX, side="right")) - 1
    if 0 <= top < s.size - 1:
        # grid points whose ratio e^s overflows (a coarse mesh over losses near 700, a composed block): the items
        # aiming above the last finite point have ratios at least its own (a cell above it, or an atom on a point
        # above it), so they go there, lowered (safe for a lower bound); the sweep runs on the finite points
        aims = np.arange(1, P_in.size + 1) if start is None else np.asarray(start)
        above = aims > top
        lifted = float(np.sum(P_in[above]))
        P_in, Q_in, s = P_in[~above], Q_in[~above], s[: top + 1]
        start = None if items[2] is None else aims[~above]
    if P_in.size == 0:
        pmf: list[float] = [0.0] * s.size
    elif top_down:
        pmf = _merge_down(P_in, Q_in, start, np.exp(s), s)
    else:
        # the P-mass below the grid is dropped (sent to -inf): a lower bound may only lose mass or loss
        pmf, cp, cq, target = merge_up(P_in, Q_in, np.exp(s), tol=_SNAP_TOL, start=start)
        # the last carry: ratio below alpha_target, round its loss down to the grid point below
        j = _grid_index_below(cp, cq, s, target)
        if j >= 0 and cp > 0.0:  # below the grid it is dropped (loss -inf): moving it up would be optimistic
            pmf[j] += cp
    pmf = list(pmf) + [0.0] * (full.size - len(pmf))
    if lifted:
        pmf[top] += lifted
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

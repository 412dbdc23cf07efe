"""Random allocation's two far ends, beyond the per-coordinate ratio lattice: the upper tail of the remove
direction and the bottom cell of the add direction.

At small noise the likelihood ratio ``W = exp((2 x - 1) / (2 sigma^2))`` of one coordinate has a heavy
upper tail under ``P_1 = N(1, sigma^2)``: for ``sigma = 0.52`` its ``P_1``-mass beyond ``2.6e4`` is
``7e-6``. A uniform lattice that long in the ratio does not fit in memory, and sending that mass to an
infinite loss spends most of a delta of ``1e-5`` on it. The add direction's bottom cell is the same story
at the other end: where every coordinate sits in it the lattice sum is 0, an infinite add loss (fifty
epochs of ``sigma = 0.55``, eight steps each, would put ``4e-4`` at ``+inf``, above such a delta, and no
finite epsilon could be certified). This module accounts for both ends on geometric grids instead.

**Proof (remove direction, both ends).** With ``S = (1/t) sum_b W_b`` and every coordinate under ``Q``,
``H_a(P || Q) = E_Q[(S - a)_+]`` for every ``a >= 0``. Call a coordinate *in the tail* when
``W_b > w0``, and let ``R`` be the sum of the other ``t - 1`` ratios (independent of ``W_1``).

*Upper end.* ``1 <= 1[no coordinate in the tail] + sum_b 1[W_b in the tail]``, and by symmetry

    H_a <= E_Q[(S - a)_+; none in the tail] + t E_Q[(S - a)_+; W_1 in the tail].

The first term is the lattice construction with every coordinate's top cell removed (a sub-measure;
the spreads inside the other cells raise it, as in ``tightdp.mechanisms.allocation``). The second, with
``dQ(w) = dP_1(w) / w``, is

    int_{w > w0} dP_1(w) E[(1 + R / w) (1 - a t / (w + R))_+],

and on a cell ``v_i <= w < v_(i+1)`` the integrand is at most ``(1 + R / v_i)(1 - a t / (v_(i+1) + R))_+``,
non-decreasing in ``R``, so any ``R_up`` stochastically larger than ``R`` bounds it. The law with the
survival bound of the next paragraph is one (``_others_up``). So the second term is the
``P``-law of atoms at ratio ``(v_(i+1) + r_j) / t`` with mass ``P_1(cell i) Q(R_up = r_j) (1 + r_j / v_i)``,
plus, at ``+inf``, what ``(S - a)_+ <= S`` leaves where ``R_up`` or ``W_1`` runs off the grids. Past
``R_up``'s top level ``r_top``: ``t E_Q[S; W_1 > w0, R > r_top] <= P_1(W > w0) G(r_top) + Q(W > w0)
E_Q[R; R > r_top]``, and ``E_Q[R; R > r_top] <= (t - 1) (P_1(W > r') + (t - 2) Q(W > r'))`` with
``r' = r_top / (t - 1)`` (some term of ``R`` exceeds ``r'``: that term, or another one, independent
with mean 1). Past the last cell: ``P_1(W > v_K) + (t - 1) Q(W > v_K)``. Each piece bounds ``E[phi_a]`` with ``phi_a(s) = (1 - a / s)_+``
for every ``a >= 0``, and compositions are mixtures of such ``phi_a`` (``tightdp.mechanisms._allocation_epoch``),
so the bound composes.

*The others' sum.* ``R_up`` has survival function ``G(r)``, the least of three upper bounds on ``Q(R > r)``:
1; the union bound ``(t - 1) Q(W > r / (t - 1))`` (if ``R > r`` some term exceeds ``r / (t - 1)``); and, for
any split ``c < r`` and ``theta >= 0``, "one big jump or many moderate terms" (``_jump_or_many``):
``R > r`` means some term exceeds ``c``, or else ``R = sum_b min(W_b, c) > r``, so ``Q(R > r) <= (t - 1)
Q(W > c) + e^(-theta r) M_c(theta)^(t - 1)`` (Chernoff), ``M_c(theta) = E_Q[e^(theta min(W, c))] = 1 +
int_0^c theta e^(theta x) Q(W > x) dx`` (layer cake), bounded above on a grid ``0 = x_0 < x_1 < ... < x_K =
c`` by taking each layer's survival at its left end. The union bound alone charges every large ``R`` to
a single term of size ``r / (t - 1)``: at noise 0.33, 196 steps and an epoch likelihood ratio ``e^11.8`` it
puts ``Q(R > 2.6e7)`` at 6.5e-6, where the truth is about 1e-10, which leaves the upper end 0.2 above the
lower one; the split bound brings it within 0.003.

*Lower end.* The events "only coordinate ``b`` in the tail" are disjoint, so

    H_a >= E_Q[(S - a)_+; none in the tail] + t E_Q[(S - a)_+; W_1 in the tail, no other],

and, dropping ``R >= 0``, the second term is at least ``(1 - Q(W > w0))^(t - 1) int_{w > w0} dP_1(w)
(1 - a t / w)_+``: atoms at ratio ``v_i / t`` with mass ``P_1(cell i)`` (from below) times that factor. The
first term is at least the merged lattice of the bulk cells (a garbling of the sub-pair on the event).

**Add direction, upper end.** ``H_a(Q || P) = E_Q[(1 - a S)_+]``, convex in each coordinate's ratio. The
lattice spreads the bottom cell ``(0, eta]`` onto 0 and ``eta``; where every coordinate lies in it, the
lattice sum can be 0 and the add loss ``-log S`` infinite. At small noise and few steps that event is
likely (sigma 0.55, 8 steps, mesh 0.11: ``8e-6`` per epoch at ``+inf``, fifty epochs above a delta of
``1e-5``). Expand the product measure over the set ``A`` of coordinates in the bottom cell: every term
is a product of sub-measures, so each is raised by the spreads, and the lattice law minus its
all-bottom term (``all_bottom_lattice``: ``C(t, k) b1^k b0^(t - k)`` at ``k eta``, subtracted from below)
bounds every term but ``A = all``. That one is at most ``E_Q[(1 - a max_b W_b / t)_+; all in the
bottom cell]`` (``S >= max_b W_b / t``, and ``(1 - a s)_+`` decreases), so ``bottom_atoms`` puts the
``Q``-mass ``F(v_(i+1))^t - F(v_i)^t <= (F(v_(i+1)) - F(v_i)) t F(v_(i+1))^(t - 1)`` of each geometric
cell of the largest ratio at ``S = v_i / t`` (``F`` the ``Q``-law of one ratio), and ``F(v_0)^t`` at an
infinite loss.

Cell masses come from ``tightdp.losses.gaussian_cell_masses_and_errors``, taken with their error bound
on the safe side. A cell's float edges realise ratios within about ``1e-14`` (relative) of ``v_i``; the
epoch's losses are moved by at least ``1e-12`` to the safe side (``_epoch_pld``'s margin), which covers it.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy import special

from .._caches import register as _register_cache
from .._types import ArrayLike, FloatArray
from ..losses import gaussian_cell_masses_and_errors

__all__ = ["all_bottom_lattice", "bottom_atoms", "needs_bottom", "tail_atoms"]

#: the tail's geometric cells end where ``P_1``'s mass beyond them is this share of the epoch's tail budget
_FAR_SHARE = 1e-3
#: ratio step (in the logarithm) of the grid ``R_up`` lives on; its rounding moves an atom's loss by at most
#: ``r (1 - e^-step) / w0``, small beside the mesh wherever ``R_up`` has mass
_OTHERS_STEP = 0.5
#: ``R_up``'s levels reach ``w0 e^reach``; beyond, ``(S - a)_+ <= S`` is paid at ``+inf``
_OTHERS_REACH = 10.0
#: ``_jump_or_many``: the splits ``c = s r`` tried, the Chernoff exponents ``kappa = theta c`` tried, and the
#: layer grid of ``M_c`` (``_LAYERS`` layers of ``_LAYER_STEP`` in the logarithm below ``c``)
_SPLITS = (0.5, 0.7, 0.85, 0.95)
_KAPPAS = tuple(float(k) for k in np.geomspace(0.05, 60.0, 24))
_LAYERS = 960
_LAYER_STEP = 0.05
#: the union bound is inflated by this factor for the rounding of ``ndtr`` and of its arguments
_ROUND_UP = 1.0 + 1e-12
_U = float(np.finfo(float).eps) / 2


def _q_tail(sigma: float, log_w: float) -> float:
    """``Q(W > e^log_w)``, ``W`` the ratio of one coordinate under ``N(0, sigma^2)`` (rounded up)."""
    return min(1.0, float(special.ndtr(-(sigma * log_w + 0.5 / sigma))) * _ROUND_UP)


def _p_tail(sigma: float, log_w: float) -> float:
    """``P_1(W > e^log_w)`` under ``N(1, sigma^2)`` (rounded up)."""
    return min(1.0, float(special.ndtr(-(sigma * log_w - 0.5 / sigma))) * _ROUND_UP)


def _log_truncated_mgf(sigma: float, log_c: FloatArray, kappas: tuple[float, ...]) -> FloatArray:
    """Upper bounds on ``log M_c(theta) = log E_Q[e^(theta min(W, c))]`` at ``theta = kappa / c``, for every
    ``c = e^log_c`` (any shape) and every ``kappa`` (a last axis): the layer-cake formula ``M_c(theta) = 1 +
    int_0^c theta e^(theta x) Q(W > x) dx`` on the geometric grid ``x_k = c e^(-(K - k) step)`` (``_LAYERS``,
    ``_LAYER_STEP``; ``x_0 = 0``), each layer's survival taken at its left end (the survival decreases),
    rounded up."""
    log_c = np.asarray(log_c, float)[..., None]
    steps = np.arange(-_LAYERS, 1, dtype=float) * _LAYER_STEP
    log_x = log_c + steps  # x_1 .. x_K = c
    surv = np.minimum(special.ndtr(-(sigma * log_x + 0.5 / sigma)) * _ROUND_UP, 1.0)  # Q(W > x_k)
    out = np.empty(log_c.shape[:-1] + (len(kappas),))
    for i, kappa in enumerate(kappas):
        ex = np.expm1(kappa * np.exp(steps))  # e^(theta x_k) - 1, rising to e^kappa - 1
        # layers: [0, x_1] with survival at most 1, then [x_k, x_(k+1)] with survival at most Q(W > x_k)
        out[..., i] = ex[0] + np.sum((ex[1:] - ex[:-1]) * surv[..., :-1], axis=-1)
    result: FloatArray = np.log1p(out) * (1.0 + 1e-12) + 1e-15  # the sum's round-off, and log1p's
    return result


def _jump_or_many(sigma: float, others: int, log_r: FloatArray) -> FloatArray:
    """Upper bounds on ``Q(R > r)`` at ``r = e^log_r``, ``R`` the sum of ``others`` independent ratios under
    ``Q``: one big jump or many moderate terms (module docstring, "The others' sum").

    For every split ``c = s r`` (``s`` in ``_SPLITS``) and ``theta = kappa / c`` (``kappa`` in ``_KAPPAS``):
    ``Q(R > r) <= others Q(W > c) + e^(-theta r) M_c(theta)^others`` (``_log_truncated_mgf``). The least bound
    over the grid is returned (any of them is one)."""
    lr = np.asarray(log_r, float)[:, None]
    ratio = np.asarray(_SPLITS)[None, :]
    log_c = lr + np.log(ratio)  # (levels, splits)
    jump = np.minimum(others * np.minimum(special.ndtr(-(sigma * log_c + 0.5 / sigma)) * _ROUND_UP, 1.0), 1.0)
    # theta r = kappa r / c = kappa / s (theta = kappa / c exactly as in the mgf's layers)
    kappas = np.asarray(_KAPPAS)
    log_chernoff = -kappas / ratio[..., None] + others * _log_truncated_mgf(sigma, log_c, _KAPPAS)
    bound = jump[..., None] + np.exp(np.minimum(log_chernoff, 0.0))  # (levels, splits, kappas)
    out: FloatArray = np.minimum(np.min(bound, axis=(1, 2)) * _ROUND_UP, 1.0)
    return out


def _others_up(sigma: float, others: int, w0: float) -> tuple[FloatArray, FloatArray, float, float]:
    """A law ``R_up`` stochastically larger than the sum ``R`` of ``others`` ratios under ``Q``: levels
    ``r_j`` (geometric, up to ``w0 e^_OTHERS_REACH``), their masses, and the mass at ``+inf``. Survival function
    ``G(r)``: the least of 1, the union bound ``others Q(W > r / others)`` (if ``R > r`` some term exceeds
    ``r / others``) and ``_jump_or_many`` (module docstring, "The others' sum"); the mass of
    ``(r_(j-1), r_j]`` is placed at ``r_j``, so ``R_up``'s survival is ``G(r_(j-1)) >= G(r)`` there. The
    fourth value is the top level: ``R_up`` is infinite exactly where ``R`` exceeds it."""
    if others == 0:
        return np.zeros(1), np.ones(1), 0.0, 0.0
    top = math.log(w0) + _OTHERS_REACH
    # far below R's bulk (ten standard deviations below the median e^(-1 / (2 sigma^2)) of each term)
    bottom = math.log(others) - 0.5 / sigma**2 - 10.0 / sigma - 10.0
    n = max(2, math.ceil((top - bottom) / _OTHERS_STEP))
    log_r = np.linspace(bottom, top, n + 1)
    levels = np.exp(log_r)
    surv = np.array([min(1.0, others * _q_tail(sigma, lr - math.log(others))) for lr in log_r])
    if others > 1:
        surv = np.minimum(surv, _jump_or_many(sigma, others, log_r))
    surv = np.maximum.accumulate(surv[::-1])[::-1]  # non-increasing, still above G
    # R_up = r_0 when R <= r_0, r_j for R in (r_(j-1), r_j], +inf beyond r_n
    mass = np.concatenate([[1.0 - surv[0]], surv[:-1] - surv[1:]])
    keep = mass > 0
    return levels[keep], mass[keep], float(surv[-1]), float(levels[-1])


@_register_cache
@lru_cache(maxsize=16)
def _tail_cells(sigma: float, w0: float, step: float, tail: float) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Geometric cells ``[v_i, v_(i+1))``, ``v_i = w0 e^(i step)``, of the ratio beyond ``w0`` under ``P_1``:
    ``(v, p_up, p_lo)``, ``v`` the ``K + 1`` edges, the masses of the ``K`` cells and of ``(v_K, inf)``
    from above and from below."""
    z = float(-special.ndtri(max(_FAR_SHARE * tail, 1e-300)))
    v_far = math.exp((z + 0.5 / sigma) / sigma)
    k = max(1, math.ceil(math.log(max(v_far, w0 * math.e) / w0) / step))
    v = w0 * np.exp(np.arange(k + 1) * step)
    x_edges = np.concatenate([sigma * sigma * np.log(v) + 0.5, [np.inf]])
    zz = (x_edges - 1.0) / sigma
    m, err = gaussian_cell_masses_and_errors(x_edges, (1.0,), (1.0,), sigma, special.ndtr(zz), special.ndtr(-zz))
    return v, np.minimum(m + err, 1.0), np.maximum(m - err, 0.0)


def tail_atoms(
    sigma: float, t: int, w0: float, step: float, tail: float, upper: bool
) -> tuple[FloatArray, FloatArray, float]:
    """The remove direction's atoms for the ratios beyond the lattice's last point ``w0`` (module docstring).

    Parameters
    ----------
    sigma : float
        Noise per step.
    t : int
        Steps per epoch.
    w0 : float
        The lattice's last ratio; the tail is ``W_1 > w0``.
    step : float
        Ratio step of the tail's cells, in the logarithm.
    tail : float
        The epoch's tail budget: cells reach where ``P_1``'s mass beyond is ``1e-3`` of it.
    upper : bool
        Atoms of the upper end (else of the lower end).

    Returns
    -------
    tuple
        ``(ratio, pmass, inf_mass)``: epoch likelihood ratios ``S``, their ``P``-masses, and the ``P``-mass
        at an infinite loss (0 for the lower end).
    """
    v, p_up, p_lo = _tail_cells(sigma, w0, step, tail)
    q0 = _q_tail(sigma, math.log(w0))
    if not upper:
        keep_each = (1.0 - q0) ** (t - 1) * (1.0 - 1e-15)
        return v / t, p_lo * keep_each, 0.0
    r, mass, r_inf, r_top = _others_up(sigma, t - 1, w0)
    cells = p_up[:-1]
    ratio = (v[1:, None] + r[None, :]) / t
    pmass = cells[:, None] * mass[None, :] * (1.0 + r[None, :] / v[:-1, None]) * (1.0 + 1e-15)
    far = float(p_up[-1]) + (t - 1) * _q_tail(sigma, math.log(float(v[-1])))
    # E_Q[R; R > r_top] <= (t - 1) (P_1(W > r_top / (t - 1)) + (t - 2) Q(W > r_top / (t - 1))): some term
    # of R exceeds r_top / (t - 1), itself or another one (independent, mean 1)
    inf_mass = _p_tail(sigma, math.log(w0)) * r_inf + far
    if t > 1:
        share = math.log(r_top) - math.log(t - 1)
        inf_mass += q0 * (t - 1) * (_p_tail(sigma, share) + (t - 2) * _q_tail(sigma, share))
    return ratio.ravel(), pmass.ravel(), min(1.0, inf_mass)


# --------------------------------------------------------------------------- the add direction's bottom cell
def _q_below(sigma: float, log_w: ArrayLike) -> FloatArray:
    """``Q(W <= e^log_w)`` (rounded up), at one or many levels."""
    out: FloatArray = np.minimum(special.ndtr(sigma * np.asarray(log_w, float) + 0.5 / sigma) * _ROUND_UP, 1.0)
    return out


def needs_bottom(sigma: float, t: int, eta: float, tail: float) -> bool:
    """Whether every coordinate lies in the bottom cell ``(0, eta]`` with a probability that matters
    (above ``1e-3`` of the epoch's tail budget); else the lattice's spread onto 0 is kept."""
    return float(_q_below(sigma, math.log(eta))) ** t > _FAR_SHARE * tail


def all_bottom_lattice(b0: float, b1: float, t: int) -> FloatArray:
    """From below, the lattice sum's masses at ``k eta`` (``k = 0..t``) that come from every coordinate's
    bottom cell: ``C(t, k) b1^k b0^(t - k)``, ``b0`` and ``b1`` the cell's spread onto 0 and ``eta`` (from
    below)."""
    k = np.arange(t + 1)
    with np.errstate(divide="ignore"):
        log_terms = (
            special.gammaln(t + 1.0)
            - special.gammaln(k + 1.0)
            - special.gammaln(t - k + 1.0)
            + k * np.log(b1)
            + (t - k) * np.log(b0)
        )
    finite = np.isfinite(log_terms)
    out = np.zeros(t + 1)
    # relative rounding of a few units per unit of |log|: taken off
    lt = log_terms[finite]
    out[finite] = np.exp(lt) * np.maximum(1.0 - 1e-12 - 64 * _U * (t + np.abs(lt)), 0.0)
    return out


@_register_cache
@lru_cache(maxsize=16)
def bottom_atoms(sigma: float, t: int, eta: float, step: float, tail: float) -> tuple[FloatArray, FloatArray, float]:
    """The add direction's upper end where every coordinate lies in the bottom cell ``(0, eta]`` (module
    docstring, "Add direction"): ``(s, qmass, inf_mass)``, lower ends ``v_i / t`` of ``S`` on the cells
    ``[v_i, v_(i+1))`` of the largest ratio, their ``Q``-masses from above, and the mass below ``v_0``.

    Parameters
    ----------
    sigma : float
        Noise per step.
    t : int
        Steps per epoch.
    eta : float
        The lattice's mesh: the bottom cell is ``(0, eta]``.
    step : float
        Ratio step of the cells, in the logarithm.
    tail : float
        The epoch's tail budget: ``v_0`` is where ``Q(max <= v_0)`` is ``1e-3`` of it.

    Returns
    -------
    tuple
        ``(s, qmass, inf_mass)``.
    """
    # Q(W <= v)^t <= share * tail  <=>  sigma log v + 1/(2 sigma) <= ndtri((share * tail)^(1/t))
    z = float(special.ndtri((_FAR_SHARE * tail) ** (1.0 / t)))
    log_v0 = min((z - 0.5 / sigma) / sigma, math.log(eta) - step)
    k = max(1, math.ceil((math.log(eta) - log_v0) / step))
    log_v = math.log(eta) - step * np.arange(k, -1, -1)
    v = eta * np.exp(-step * np.arange(k, -1, -1))  # v[-1] = eta exactly: the lattice's own edge
    x_edges = sigma * sigma * np.log(v) + 0.5
    zz = x_edges / sigma
    m, err = gaussian_cell_masses_and_errors(x_edges, (0.0,), (1.0,), sigma, special.ndtr(zz), special.ndtr(-zz))
    below = _q_below(sigma, log_v)  # F(v_i), rounded up
    # Q(max in cell i) = F_(i+1)^t - F_i^t <= (F_(i+1) - F_i) t F_(i+1)^(t - 1)
    qmass = (m + err) * t * below[1:] ** (t - 1) * (1.0 + 64 * _U * t)
    return v[:-1] / t, qmass, min(1.0, float(below[0]) ** t * (1.0 + 64 * _U * t))

"""The certified discrete pairs of one epoch of 1-out-of-``t`` random allocation of a Gaussian.

The construction (per-coordinate ratio lattice, the lattice sum by FFT with a tilted second pass for the
far tail, and the spread / merge onto the privacy-loss grid) and its proof are in the docstring of
``tightdp.mechanisms.allocation``; ``_epoch_pld`` is what ``AllocationLoss`` hands the engine.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import special

from .._caches import register as _register_cache
from .._types import FloatArray, IntArray
from ..errors import PrecisionError
from ..losses import gaussian_cell_masses_and_errors, split_errors
from ._allocation_tail import all_bottom_lattice, bottom_atoms, needs_bottom, tail_atoms

if TYPE_CHECKING:
    from ..pld import DiscretisedLoss

#: lattice terms of a sum: ``(pmf on j eta, mass at +inf, count)``
_Terms = Sequence[tuple[FloatArray, float, int]]

_U = float(np.finfo(float).eps) / 2
#: the largest per-coordinate ratio lattice (points); a longer one is cut (see ``_coordinate``)
_MAX_LATTICE = 2_000_000
#: the lattice's reach in ratio units: a coarse mesh (a coarse accuracy asked) must not carry the ratio's far
#: tail into the lattice sum, whose Chernoff window then outgrows the engine (noise 0.41, 100 steps, mesh 0.05:
#: 1.6e8 points); past the reach the capped lattice's tail accounting takes over (as past ``_MAX_LATTICE``)
_MAX_REACH = 4e5
#: the relative-error caps tried, smallest first, for the dominating lattice's per-point errors (``_coordinate``)
_REL_CAPS = (1e-9, 1e-8, 1e-7, 1e-6)
#: lattice mesh (ratio units) per loss-grid mesh and sqrt(t): the lattice spread adds about eta^2/(4t) of
#: loss variance per epoch near S = 1, the loss-grid spread about h^2/6; this keeps the two comparable
_ETA_PER_H = 0.8
#: Chernoff level of the lattice sum's FFT window: the aliased mass (2 tau per epoch, charged as l1 on both
#: ends) must stay far below the engine's per-epoch ``tail`` (about delta / epochs); tau = 1e-2 tail,
#: clipped to this range (a smaller tau widens the window)
_SUM_TAU = (1e-20, 1e-15)
#: the far-tail tilted composition is run when the first window has at most this many points and its round-off
#: exceeds a hundredth of the per-epoch tail budget ...
_TILT_MAX_POINTS = 1 << 17
#: ... or at most this many and a thousand times the budget (a tiny delta: noise 1, 196 steps, 10 epochs, delta
#: 1e-12, a window of 345600 points, round-off 3.7e5 times the budget: the wide [2.612, 4.411] -> [2.7494,
#: 2.7503]); at 12 times (noise 0.78, 7772 steps, 468 epochs, delta 2.5e-5) the tilt cost 4 s and changed nothing
_TILT_MAX_POINTS_FAR = 1 << 20
_TILT_FAR_RATIO = 1e3


# --------------------------------------------------------------------------- merge-to-the-grid sweep
def _merge_up(P: FloatArray, Q: FloatArray, alpha: FloatArray) -> tuple[FloatArray, float, float, int]:
    """``tightdp.pld.dominance.merge_up`` on a ratio lattice, the P-masses as an array."""
    from ..pld.dominance import merge_up

    pmf, cp, cq, target = merge_up(P, Q, alpha)
    return np.asarray(pmf), cp, cq, target


# --------------------------------------------------------------------------- one coordinate
def _split(masses: FloatArray, err: FloatArray, cap: float = 1e-9) -> tuple[float, float]:
    """Per-point absolute errors as ``(rel, l1)``: a relative error ``<= cap`` on the points where that
    holds (composed multiplicatively: ``(1 + rel)^t`` over a sum of ``t`` coordinates) and the l1 error of
    the others (``tightdp.losses.split_errors`` with a looser cap; counted twice, to be safe)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(masses > 0, err / masses, np.inf)
    ok = r <= cap
    return (float(np.max(r[ok])) if np.any(ok) else 0.0), float(2.0 * np.sum(err[~ok]))


@_register_cache
@lru_cache(maxsize=16)
def _coordinate(sigma: float, eta: float, tail: float) -> dict[str, Any]:
    """Dominating and dominated discrete pairs of ``(N(1, s^2), N(0, s^2))`` with lattice-valued ratios.

    Returns a dict with the lattice mesh ``eta``, the lattice length ``M`` (at most
    ``_MAX_LATTICE`` points and ``_MAX_REACH`` in ratio units; ``cut`` is the P_1-mass beyond it) and, on lattice
    indices ``0..M+1``:

    * ``up_q``, ``up_p``, ``up_inf``: the dominating pair's Q- and P-masses and its
      P-mass at ratio ``+inf``; ``up_rel_*``, ``up_l1_*``: relative and l1 error bounds;
    * ``lo_q_rm``, ``lo_p_rm``: the dominated pair, final carry rounded down
      (for the remove direction, where lower ratios mean lower losses);
      ``lo_q_add``: its Q-masses with the carry rounded up (add direction);
      ``lo_rel``, ``lo_l1``, ``lo_l1_add``, ``lo_margin``: error bounds;
    * ``rho``: relative error of the realised lattice ratios (float edges).
    """
    # P_1(W > w) = ndtr(-(sigma log w - 1/(2 sigma))): choose w_max with that tail <= `tail`
    z = float(-special.ndtri(tail))
    w_max = math.exp((z + 0.5 / sigma) / sigma)
    # a lattice longer than _MAX_LATTICE points or reaching past _MAX_REACH is cut there: the dominating pair
    # then sends more P-mass to +inf and the dominated pair pays more for its final carry (both still bounds)
    top = min(_MAX_LATTICE, max(2, math.floor(_MAX_REACH / eta)))
    capped = math.ceil(w_max / eta) > top
    M = max(2, min(math.ceil(w_max / eta), top))
    w = np.arange(M + 2) * eta  # lattice values 0..(M+1) eta
    with np.errstate(divide="ignore"):
        xe = sigma * sigma * np.log(w[1 : M + 1]) + 0.5  # W <= w  <=>  x <= sigma^2 log w + 1/2
    x_edges = np.concatenate([[-np.inf], xe, [np.inf]])  # cells 0..M, the last one (w_M, inf)
    realised = np.exp((2.0 * xe - 1.0) / (2.0 * sigma * sigma))
    rho = float(np.max(np.abs(realised / w[1 : M + 1] - 1.0))) + 8 * _U
    out: dict[str, Any] = {
        "eta": eta,
        "M": M,
        "rho": rho,
        "cut": float(special.ndtr(-(sigma * math.log(M * eta) - 0.5 / sigma))),
        "capped": capped,
    }
    masses = []
    for mean in (1.0, 0.0):
        zz = (x_edges - mean) / sigma
        cdf, sf = special.ndtr(zz), special.ndtr(-zz)
        m, err = gaussian_cell_masses_and_errors(x_edges, (mean,), (1.0,), sigma, cdf, sf)
        masses.append((m, err, *split_errors(m, err)))
    (P, eP, rp, lp), (Q, eQ, rq, lq) = masses  # eP, eQ: each cell's own absolute error bound

    # -- dominating: spread each cell (w_j, w_j+1] onto its end points; the top cell onto w_M and +inf
    wl, wr = w[:M], w[1 : M + 1]
    a = (P[:M] - wl * Q[:M]) / eta  # Q-mass sent to the upper end point
    da = (eP[:M] + wl * eQ[:M] + 4 * _U * (P[:M] + wl * Q[:M])) / eta + rho * (wr / eta) * Q[:M]
    a = np.clip(a, 0.0, Q[:M])
    up_q = np.zeros(M + 2)
    up_q[:M] += Q[:M] - a
    up_q[1 : M + 1] += a
    up_q[M] += Q[M]
    up_inf = max(float(P[M] - w[M] * Q[M]), 0.0) + eP[M] + w[M] * eQ[M]
    up_p = w * up_q
    # per lattice point: the errors of the two spreads that feed it and of the cell masses; relative
    # where small (they compose multiplicatively), l1 elsewhere (split_errors)
    err_q = np.zeros(M + 2)
    err_q[:M] += da + eQ[:M]
    err_q[1 : M + 1] += da
    err_q[M] += eQ[M]
    # relative where the errors are at most a cap, l1 elsewhere; near a long lattice's top the ratios' float
    # edges (rho w / eta) leave errors up to about 1.3e-7 of the masses, whose l1 at the cap 1e-9 (3e-9 at noise
    # 0.355) can exceed the whole tail budget of a tiny delta: the cap then rises until the l1 fits in it (the
    # relative error composes as (1 + rel)^t over a sum, cheaper there; both are bounds)
    err_p = w * err_q + 4 * _U * up_p
    for cap in _REL_CAPS:
        rel_q, l1_q = _split(up_q, err_q, cap)
        rel_p, l1_p = _split(up_p, err_p, cap)
        if l1_q + l1_p <= tail:
            break
    out.update(
        up_q=up_q, up_p=up_p, up_inf=min(up_inf, 1.0), up_rel_q=rel_q, up_l1_q=l1_q, up_rel_p=rel_p, up_l1_p=l1_p
    )
    # the bottom cell (0, eta]'s spread, from below: ``eta`` takes ``a[0]``, 0 the rest (``_allocation_tail``)
    b1 = max(float(a[0] - da[0]), 0.0)
    out["bottom"] = (max(float(Q[0] - a[0]) - float(eQ[0] + da[0]), 0.0), b1)
    if capped:
        # the remove direction's bulk: every cell but the top one, whose ratios are accounted beyond the
        # lattice by ``tightdp.mechanisms._allocation_tail`` (the same spreads, a sub-measure)
        bulk_q = np.zeros(M + 2)
        bulk_q[:M] += Q[:M] - a
        bulk_q[1 : M + 1] += a
        out.update(bulk_q=bulk_q, bulk_p=w * bulk_q)

    # -- dominated: merge to the lattice (cell j has ratio in [w_j, w_j+1]; the top cell at least w_M). A
    # capped lattice merges the bulk cells only (a sub-pair: the event that no coordinate is in the tail)
    if capped:
        pm, cp, cq, T = _merge_up(P[:M], Q[:M], w[: M + 1])
        pm = np.concatenate([pm, [0.0]])
    else:
        pm, cp, cq, T = _merge_up(P, Q, w)
    lo_p = pm.copy()
    with np.errstate(divide="ignore", invalid="ignore"):
        lo_q = np.where(w > 0, pm / np.where(w > 0, w, 1.0), 0.0)
    lo_p_rm, lo_q_rm, lo_q_add = lo_p.copy(), lo_q.copy(), lo_q.copy()
    l1_add = 0.0
    if cq > 0.0 or cp > 0.0:
        # the final carry (ratio below alpha_T; or the part of the top cell beyond the lattice) goes to the
        # lattice point below its ratio for the remove direction (S and the remove loss only go down) and
        # above it for the add direction (S up, the add loss -log S down); if its ratio lies beyond the
        # lattice there is no point above, and its Q-mass is charged to the add direction's l1 error
        r = cp / cq if cq > 0 else math.inf
        j_dn = min(T - 1, int(math.floor(r / eta))) if math.isfinite(r) else T - 1
        j_up = min(M + 1, max(j_dn + 1, int(math.ceil(r / eta)))) if math.isfinite(r) else M + 1
        lo_p_rm[j_dn] += cp
        lo_q_rm[j_dn] += cq
        lo_q_add[j_up] += cq
        if not r <= w[M + 1]:
            l1_add = 2.0 * cq
    # rounding (as tightdp.pld.dominance.dominated): merged atoms are sums of cell masses, within a factor
    # 1 +- r of the exact ones; the merged ratios may miss their lattice point by the fractions' rounding,
    # a relative error below 2 r (1 + w / eta), covered by lowering the epoch's losses (``lo_margin``)
    r_lo = max(rp, rq) + 4 * _U
    out.update(
        lo_p_rm=lo_p_rm,
        lo_q_rm=lo_q_rm,
        lo_q_add=lo_q_add,
        lo_rel=r_lo,
        lo_l1=lp + lq,
        lo_l1_add=lp + lq + l1_add,
        lo_margin=2.0 * r_lo * (M + 2) + 1e-13,
    )
    return out


def _lattice_loss(q: FloatArray, eta: float, inf_mass: float = 0.0) -> DiscretisedLoss:
    from ..pld import DiscretisedLoss

    return DiscretisedLoss(
        h=eta,
        start=0,
        pmf=np.asarray(q, float),
        shift=0.0,
        infinity_mass=inf_mass,
        truncated_mass=0.0,
        mean_error=0.0,
        coupling_range=0.0,
    )


def _tilt_for_mean(terms: _Terms, eta: float, target: float) -> float:
    """The exponential tilt ``theta`` under which the sum of ``terms`` (lattice pmfs on ``j eta``, counts)
    has mean ``target`` (bisection on the tilted means; 0 when the target is outside the support)."""
    vals = [(np.arange(np.asarray(q).size) * eta, np.asarray(q, float), c) for q, _, c in terms]

    def mean(th: float) -> float:
        tot = 0.0
        for v, q, c in vals:
            with np.errstate(divide="ignore"):
                lw = np.where(q > 0, np.log(np.where(q > 0, q, 1.0)), -np.inf) + th * v
            w = np.exp(lw - np.max(lw))
            tot += c * float(np.sum(w * v) / np.sum(w))
        return tot

    m0 = mean(0.0)
    if not math.isfinite(target) or target == m0:
        return 0.0
    sign = 1.0 if target > m0 else -1.0
    lo, hi = 0.0, 1.0
    while sign * (mean(sign * hi) - target) < 0.0:
        lo, hi = hi, 2.0 * hi
        if hi > 1e6:
            return 0.0
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        if sign * (mean(sign * mid) - target) < 0.0:
            lo = mid
        else:
            hi = mid
    return sign * 0.5 * (lo + hi)


def _sum_law(
    terms: _Terms, eta: float, focus: str | None = None, tau: float = 1e-15, tail: float = 0.0
) -> tuple[FloatArray, FloatArray, FloatArray, float, float]:
    """Law of a sum of independent lattice variables ``terms = [(pmf, inf_mass, count)]``:
    ``(values, masses, pointwise, l1, inf_mass)`` by ``tightdp.pld.compose`` (FFT): ``pointwise`` (an array)
    bounds the error of every mass (the engine's certified ``pointwise_error``, else its l1 ``float_error``,
    and the direct convolution's relative error), ``l1`` the aliased mass, and the masses are within
    ``1 +- 8u`` of the rescaled FFT output.

    ``focus`` (``"high"`` or ``"low"``): the FFT's round-off is an absolute floor (about ``1e-16`` of the
    largest mass), so the far tail of the sum, where a small delta is decided, is lost in it. A second
    composition with an exponential tilt ``theta`` (``tightdp.pld.compose``'s tilted FFT: it computes
    ``m(x) e^{theta x}`` normalised, with the same absolute floor in *tilted* units) puts that tail near the
    tilted mode; each of its masses has the error bound ``(round-off + aliasing + inputs) e^{log_norm -
    theta x}``. Both runs bound the same exact masses, so every atom takes the estimate with the smaller
    bound (sound atom by atom; the first run's aliased mass stays charged as l1)."""
    from ..pld import compose

    parts = [(_lattice_loss(q, eta, inf), c) for q, inf, c in terms]
    comp = compose(parts, tilt=0.0, tau=tau)
    scale = math.exp(comp.log_norm)
    masses = comp.tilted * scale
    pw = comp.float_error if comp.pointwise_error is None else min(comp.pointwise_error, comp.float_error)
    # the direct convolution (no FFT) reports a relative error instead: charged here per atom
    g = max(comp.up_rel, 1.0 / comp.low_factor - 1.0 if comp.low_factor > 0 else 1.0)
    pointwise = (pw + comp.input_round_off[1]) * scale * (1.0 + 8 * _U) + g * masses
    l1 = (2.0 * comp.alias_mass + comp.input_error) * scale
    x = comp.x
    # the tilted run only where the floor matters: its total exceeds a hundredth of the per-epoch tail on short
    # sums, a thousand times it on longer ones (the tilted window of a heavy-tailed sum can be many times the
    # first one, and where the floor is near the budget the first run already answers)
    floor = float(np.sum(pointwise)) if x.size <= _TILT_MAX_POINTS_FAR else 0.0  # (longer: never tilted)
    tilt_pays = floor > (1e-2 if x.size <= _TILT_MAX_POINTS else _TILT_FAR_RATIO) * tail
    if focus is not None and pw > 0.0 and tilt_pays:
        ok = masses > 1e4 * pointwise
        if np.count_nonzero(ok) >= 2:
            idx = np.flatnonzero(ok)
            mode = int(np.argmax(masses))
            edge = int(idx[-1] if focus == "high" else idx[0])
            if edge != mode:
                # the tilt whose tilted sum has its mean half the mode-to-edge distance beyond the last
                # reliable atom (the choice affects accuracy only, never soundness)
                theta = _tilt_for_mean(terms, eta, x[edge] + 0.5 * (x[edge] - x[mode]))
                if math.isfinite(theta) and theta != 0.0:
                    c2 = compose(parts, tilt=theta, tau=tau)
                    pw2 = c2.float_error if c2.pointwise_error is None else min(c2.pointwise_error, c2.float_error)
                    g2 = max(c2.up_rel, 1.0 / c2.low_factor - 1.0 if c2.low_factor > 0 else 1.0)
                    x2 = c2.x
                    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
                        f = np.exp(c2.log_norm - c2.tilt * x2)
                        m2 = c2.tilted * f
                        e2 = (
                            (pw2 + c2.input_round_off[1] + 2.0 * c2.alias_mass + c2.input_error) * f * (1.0 + 8 * _U)
                            + g2 * m2
                            + 8 * _U * m2
                        )
                    k = np.rint((x2 - x[0]) / eta).astype(np.int64)
                    inside = (k >= 0) & (k < x.size) & np.isfinite(e2) & np.isfinite(m2)
                    k, m2, e2 = k[inside], m2[inside], e2[inside]
                    better = e2 < pointwise[k]
                    masses = masses.copy()
                    masses[k[better]] = m2[better]
                    pointwise[k[better]] = e2[better]
    return x, masses, pointwise, l1, comp.infinity_mass


# --------------------------------------------------------------------------- onto the loss grid
def _cell_of(ratio: FloatArray, h: float) -> tuple[IntArray, FloatArray, int]:
    """Each ratio's loss cell: ``i`` with ``e^{ih} <= r <= e^{(i+1)h}`` in floating point, and the grid values
    ``table[k - k0] = e^{kh}`` that decided it: one ``exp`` per grid point, not several per atom. The callers
    split and pool masses with these same table values, so the cell test and the masses agree."""
    i = np.floor(np.log(ratio) / h).astype(np.int64)
    k0 = int(i.min()) - 1
    table = np.exp(np.arange(k0, int(i.max()) + 3) * h)
    i = np.where(table[i - k0] > ratio, i - 1, i)
    i = np.where(table[i + 1 - k0] < ratio, i + 1, i)
    return i, table, k0


def _spread_to_grid(ratio: FloatArray, pmass: FloatArray, h: float) -> tuple[int, FloatArray]:
    """Connect-the-dots in the likelihood ratio: each atom (ratio ``r``, P-mass ``m``, Q-mass ``m/r``)
    is split onto ``e^{ih} <= r < e^{(i+1)h}`` preserving both masses (a spread: dominating).
    Returns ``(i0, pmf)`` on loss values ``(i0 + j) h``; the upper share is rounded up."""
    i, table, k0 = _cell_of(ratio, h)
    a = table[i - k0]
    b = table[i + 1 - k0]
    frac = np.clip((ratio - a) / (b - a), 0.0, 1.0)
    up = pmass * (b / ratio) * frac
    up = np.minimum(pmass, up + pmass * 16 * _U * b / (b - a))  # rounding: to the safe (upper) side
    i0 = int(i.min())
    n = int(i.max()) - i0 + 2
    pmf = np.bincount(i - i0, weights=pmass - up, minlength=n) + np.bincount(i - i0 + 1, weights=up, minlength=n)
    return i0, np.asarray(pmf, dtype=np.float64)  # (bincount with float weights: already float64)


def _merge_to_grid(ratio: FloatArray, pmass: FloatArray, h: float) -> tuple[int, FloatArray]:
    """Merge-to-the-grid in the likelihood ratio (dominated): atoms are pooled into loss cells
    ``[ih, (i+1)h)`` (a garbling), and the cells merged so that each merged ratio is exactly
    ``e^{ih}``; the final carry is rounded down to the grid. Returns ``(i0, pmf)``."""
    i, _table, _k0 = _cell_of(ratio, h)
    i0 = int(i.min())
    n = int(i.max()) - i0 + 1
    Pc = np.asarray(np.bincount(i - i0, weights=pmass, minlength=n), dtype=np.float64)
    Qc = np.asarray(np.bincount(i - i0, weights=pmass / ratio, minlength=n), dtype=np.float64)
    alpha = np.exp((i0 + np.arange(n + 1)) * h)
    pm, cp, cq, T = _merge_up(Pc, Qc, alpha)
    pmf = np.zeros(n + 1)
    pmf[:] = pm
    if cp > 0.0:
        j = int(math.floor(math.log(cp / cq) / h)) - i0 if cq > 0 else T - 1
        j = min(j, T - 1)
        if j >= 0:
            pmf[j] += cp
    return i0, pmf


@_register_cache
@lru_cache(maxsize=24)
def _epoch_pld(sigma: float, t: int, h: float, tail: float, direction: str, upper: bool) -> DiscretisedLoss:
    """The epoch's dominating (``upper``) or dominated discretised privacy loss on ``h Z``."""
    from ..pld import DiscretisedLoss

    eta = _ETA_PER_H * h * math.sqrt(t)
    c = _coordinate(sigma, eta, tail)
    eta = c["eta"]
    # a capped lattice: the remove direction's ratios beyond it are atoms on a geometric grid
    beyond = c["capped"] and direction == "remove"
    if upper:
        if beyond:
            terms = [(c["bulk_q"], 0.0, t - 1), (c["bulk_p"], 0.0, 1)]
            l1 = (t - 1) * c["up_l1_q"] + c["up_l1_p"]
            rel = math.expm1((t - 1) * math.log1p(c["up_rel_q"]) + math.log1p(c["up_rel_p"]))
        elif direction == "remove":
            terms = [(c["up_q"], 0.0, t - 1), (c["up_p"], c["up_inf"], 1)]
            l1 = (t - 1) * c["up_l1_q"] + c["up_l1_p"]
            rel = math.expm1((t - 1) * math.log1p(c["up_rel_q"]) + math.log1p(c["up_rel_p"]))
        else:
            terms = [(c["up_q"], 0.0, t)]
            l1 = t * c["up_l1_q"]
            rel = math.expm1(t * math.log1p(c["up_rel_q"]))
    else:
        rel = math.expm1(t * math.log1p(c["lo_rel"]))
        if direction == "remove":
            terms = [(c["lo_q_rm"], 0.0, t - 1), (c["lo_p_rm"], 0.0, 1)]
            l1 = t * c["lo_l1"]
        else:
            terms = [(c["lo_q_add"], 0.0, t)]
            l1 = t * c["lo_l1_add"]
    x, m, pointwise, alias, inf_mass = _sum_law(
        terms, eta, "high" if direction == "remove" else "low", min(_SUM_TAU[1], max(_SUM_TAU[0], 1e-2 * tail)), tail
    )
    # the FFT's round-off is paid where it sits, not as an absolute floor: each computed mass is within
    # ``pointwise`` of the exact sum law of the lattice pair, so the dominating pair takes ``m + pointwise``
    # (more P-mass at any loss can only raise delta, of one epoch and of any composition: delta is
    # multilinear in the epochs' P-laws with a non-negative integrand) and the dominated pair
    # ``max(m - pointwise, 0)``, a sub-measure of the exact pair with the same ratios (its hockey-stick
    # divergence, composed and after any garbling, is at most the exact pair's)
    m = m + pointwise if upper else np.maximum(m - pointwise, 0.0)
    l1 += alias
    # the add direction's upper end: where every coordinate lies in the bottom cell, S is bounded below by
    # the largest ratio / t on a geometric grid, not by the lattice's 0 (``_allocation_tail``)
    rel = math.expm1(math.log1p(rel) + math.log1p(8 * _U))
    bottom = upper and direction == "add" and needs_bottom(sigma, t, eta, tail)
    if bottom:
        k = np.rint(x / eta).astype(np.int64)
        low = (k >= 0) & (k <= t)
        m = m.copy()
        b0, b1 = c["bottom"]
        # the engine reads these masses as within 1 + rel of the lattice's: what is taken off is divided by it,
        # so that the rest times (1 + rel) still covers the lattice law less its (exact) all-bottom term
        cut = all_bottom_lattice(b0, b1, t) / (1.0 + rel + 16 * _U) * (1.0 - 4 * _U)
        m[low] = np.maximum(m[low] - cut[k[low]], 0.0)
    s = x / t  # the likelihood ratio S of each atom of the sum
    keep = (m > 0) & (s > 0)
    if direction == "remove":
        ratio, pmass = s[keep], m[keep]  # P-law of S; loss log S
    else:
        ratio, pmass = 1.0 / s[keep], m[keep]  # add pair: its P is Q, its loss -log S = log(1/S)
        if upper:  # Q-mass at S <= 0 (all coordinates at ratio 0): infinite add loss
            inf_mass += float(np.sum(m[(s <= 0) & (m > 0)]))
        if bottom:
            low_s, low_mass, low_inf = bottom_atoms(sigma, t, eta, 0.25 * h, tail)
            ratio, pmass = np.concatenate([ratio, 1.0 / low_s]), np.concatenate([pmass, low_mass])
            inf_mass += low_inf
    if beyond:
        far_ratio, far_mass, far_inf = tail_atoms(sigma, t, c["M"] * eta, 0.25 * h, tail, upper)
        ratio, pmass = np.concatenate([ratio, far_ratio]), np.concatenate([pmass, far_mass])
        inf_mass += far_inf
    if ratio.size == 0:
        raise PrecisionError("random allocation: no privacy-loss mass left on the grid")
    if upper:
        i0, pmf = _spread_to_grid(ratio, pmass, h)
    else:
        i0, pmf = _merge_to_grid(ratio, pmass, h)
    # float edges of the ratio lattice (and the merged ratios' rounding): losses moved to the safe side
    margin = 2.0 * c["rho"] + 1e-12 + (0.0 if upper else c["lo_margin"])
    # the spread / merge onto the loss grid only adds and splits masses: relative errors carry through
    # (16 u for the fractions); the aliased mass is l1
    return DiscretisedLoss(
        h=h,
        start=i0,
        pmf=pmf,
        shift=margin if upper else -margin,
        infinity_mass=min(1.0, inf_mass),
        truncated_mass=0.0,
        mean_error=0.0,
        coupling_range=0.0,
        tv_error=l1,
        rel_error=_checked_rel(rel + 16 * _U, t),
    )


def _checked_rel(rel: float, t: int) -> float:
    """The epoch's relative mass error, refused (``PrecisionError``, so that the caller answers the wide interval)
    where it would be too large to certify anything: never clipped, which would understate it."""
    if not rel <= 0.5:
        raise PrecisionError(
            f"random allocation: the lattice's relative mass error over {t} steps is {rel:.3g} (above 0.5): "
            "too many steps per epoch for this noise and delta"
        )
    return rel


def clear_allocation_caches() -> None:
    """Empty this module's memos (benchmarks call it with ``tightdp.clear_caches()``)."""
    _coordinate.cache_clear()
    _epoch_pld.cache_clear()

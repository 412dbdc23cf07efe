"""Random allocation ("balls and bins"): each record is used in exactly ``k`` of ``t`` steps.

One epoch of ``t`` Gaussian steps (noise ``sigma`` per step, unit sensitivity) in
which every record contributes to ``num_selected = k`` steps chosen uniformly at
random (Chua et al. 2024, "Balls-and-bins sampling for DP-SGD", arXiv 2412.16802;
Feldman & Shenfeld 2025, "Privacy amplification by random allocation",
arXiv 2502.08202). Output of the epoch: ``x in R^t``.

**k = 1, remove direction** (the differing record is present in ``P``, absent in ``Q``):
``P = (1/t) sum_i N(e_i, sigma^2 I)`` and ``Q = N(0, sigma^2 I)``, so the likelihood ratio is

    S(x) = dP/dQ (x) = (1/t) sum_i W_i,    W_i = exp((2 x_i - 1) / (2 sigma^2)),

and the epoch's privacy loss is ``log S`` (Feldman & Shenfeld 2026, "Efficient
privacy loss accounting for subsampling and random allocation", arXiv
2602.17284: the PLD of random allocation as a log-sum-exp of ``t`` one-step
losses, realised by a ``t``-wise convolution in the exponentiated domain). The
add direction is the same pair with ``P`` and ``Q`` exchanged. Under ``Q`` the
``W_i`` are i.i.d. and ``E_Q[W_i] = 1``; under ``P`` (by symmetry) one of them
has the law of ``W`` under ``N(1, sigma^2)``.

**How this module certifies both ends (no coupling term).** Write
``(P_1, Q_1) = (N(1, sigma^2), N(0, sigma^2))`` for one coordinate. If a discrete
pair ``(P_1', Q_1')`` Blackwell-dominates ``(P_1, Q_1)`` (``P_1 = K P_1'``,
``Q_1 = K Q_1'`` for a Markov kernel ``K``), applying ``K`` to every coordinate
turns the random-allocation pair built from ``(P_1', Q_1')`` into the true one,
so the former dominates the latter; and a garbling of ``(P_1, Q_1)`` yields a
dominated random-allocation pair (Blackwell; 000 App. C.6). Hence:

1. *per coordinate*, on the lattice ``W in {0, eta, 2 eta, ...}``: the
   **dominating** pair splits each cell ``(j eta, (j+1) eta]`` of the likelihood
   ratio onto its two end points (a mean-preserving spread, the connect-the-dots
   construction of Doroshenko et al. 2022 applied to the ratio instead of its
   logarithm; the cell above the last lattice point is split onto that point and
   ``+inf``); the **dominated** pair merges neighbouring cells so that each
   merged likelihood ratio is exactly a lattice point (a garbling; the
   merge-to-the-grid sweep of ``tightdp.pld.dominance``);
2. *per epoch*: for a pair built from lattice-valued ratios, ``t S`` is a sum of
   ``t`` independent lattice variables (``t - 1`` drawn from ``Q_1'`` and one from
   ``P_1'`` for the ``P``-law of the remove direction; ``t`` from ``Q_1'`` for the
   add direction), computed exactly up to the certified FFT round-off and
   aliasing of ``tightdp.pld.compose``; the FFT's round-off is an absolute floor (about 1e-16 of the
   largest mass), so the tail that decides a tiny delta is computed a second time with an exponential
   tilt (``compose(tilt=theta)``, whose floor is in tilted units) and every atom keeps the estimate with
   the smaller certified error (``_sum_law``);
3. *onto the privacy-loss grid* ``h Z``: the same spread (upper) and merge
   (lower) once more, now between the points ``e^{ih}`` of ``S``, which gives
   ``DiscretisedLoss`` objects the composition engine composes over epochs.

Every operation is either a Blackwell step (spread or garbling of a valid
pair) or, at the very end, a first-order move of the ``P``-law of the loss in
the safe direction (rounding of float edges, a final merged carry that is not
on the grid); ``delta(eps) = E_P[(1 - e^{eps - L})_+]`` of a composition is
non-decreasing in each epoch's loss, so those keep the bounds. Floating-point
error of the cell masses, of the spreads and of the FFT is carried as an
``l1`` error (``tv_error``), which the engine pays on both sides.

**k > 1.** For ``num_selected = k`` with ``1 < k < t`` the upper bound uses the
k-to-1 reduction of Feldman & Shenfeld (2502.08202; the decomposition that their
pld-accounting 2.0 implements for 2602.17284 — its value for t = 10, k = 3, sigma 1,
delta 1e-5, [5.4773, 5.4801], contains tightdp's upper end 5.4786):
``k``-out-of-``t`` allocation is dominated by the composition of ``k - r``
allocations of one out of ``floor(t/k)`` steps and ``r = t mod k`` allocations of
one out of ``ceil(t/k)``. Feldman & Shenfeld prove this for the non-adaptive pair;
it covers adaptive steps through the domination of the adaptive pair by the
non-adaptive one ("Adaptive steps" below). The lower bound is the larger of two post-processings:
``sum_i x_i ~ N(k, t sigma^2)`` against ``N(0, t sigma^2)``, a Gaussian with
``mu = k / (sigma sqrt(t))``, and ``max_i x_i`` (``max_statistic_pld(shifted=k)``); both loose,
reported as such. ``k = t`` is the
Gaussian mechanism composed ``t`` times, exactly ``sqrt(t)/sigma``-GDP, and
``t = 1`` is one Gaussian step.

**Adaptive steps (DP-SGD).** Everything above is about the *non-adaptive* pair,
in which the target's clipped gradient is the same unit vector at every step.
DP-SGD is adaptive: step ``s`` releases ``x_s = f_s(x_<s) + 1[s in U] g_s(x_<s) + Z_s``
with ``||g_s|| <= 1``, ``Z_s ~ N(0, sigma^2 I_d)`` and ``U`` the random set of steps
the target joins, drawn independently of the data (any law: ``k`` of ``t`` per
epoch, fresh each epoch, or one slot repeated every cycle as in
``tightdp.schemes.cyclic_allocation_epsilon``). Claim: for every ``a >= 0`` both
``H_a(P||Q)`` and ``H_a(Q||P)`` are at most those of the non-adaptive pair (so the
upper bounds here hold for adaptive DP-SGD). Proof. Subtracting ``f_s`` is the
same invertible map under both laws, so take ``f_s = 0``. Let ``u_s`` be a unit
vector fixed by ``x_<s`` (``g_s / ||g_s||``, or any one if ``g_s = 0``),
``y_s = <u_s, x_s>`` and ``n_s = ||g_s||``. By the chain rule of conditional
densities ``L = dP/dQ = E_U[prod_{s in U} M_s]`` with
``M_s = exp((n_s y_s - n_s^2 / 2) / sigma^2)``; under ``Q`` each ``y_s`` is
``N(0, sigma^2)`` independently of ``x_<s``. ``L`` is affine in each ``M_s`` with
non-negative coefficients fixed by the other factors, and both divergences are
``E_Q[phi(L)]`` with ``phi`` convex (``(L - a)_+``, and ``(1 - a L)_+`` for
``H_a(Q||P)``). For ``n <= 1``, ``M_1`` has the law of ``M_n M'`` with ``M'`` an
independent log-normal of mean 1, so ``M_1`` dominates ``M_n`` in convex order.
Backward induction on ``s``: let ``W_s`` be the expected ``phi(L)`` given
``x_<=s`` when every later step has ``n = 1``; it is ``E[phi(affine in the
later M's)]``, a convex function of each of the current factors. Given
``x_<s``, step ``s`` chooses ``n_s`` and draws a fresh ``y_s``; replacing
``M_{n_s}`` by ``M_1`` can only raise ``E[W_s]`` (convex order). So no adaptive
choice of ``(n_s)`` beats ``n_s = 1`` for every ``s``, which is the non-adaptive
pair with all ``y_s`` i.i.d. ``N(0, sigma^2)`` under ``Q``. The k-to-1 reduction
of 2502.08202 is a statement about that non-adaptive pair, so it covers adaptive
steps through this claim. Lower bounds need no argument: the non-adaptive pair is
attained by a pair of data sets (one coordinate, the target's gradient ``+1``
at every step, every other record's 0).

**Range.** The lattice must reach the ratio where ``N(1, sigma^2)``'s tail is
below the delta budget (``exp(z / sigma + 1 / (2 sigma^2))``), so it grows quickly as
``sigma`` falls below about 0.6; and the lattice sum's FFT round-off (about 1e-11
per epoch, charged as absolute error) must stay small against delta (above
about 1e-10). Outside that range ``tightdp.schemes.allocation_epsilon`` answers a wide certified
interval with a ``note``: the upper bound without amplification (for every
allocation the epoch is one Gaussian step of sensitivity 1, so by joint
convexity it is ``1/sigma``-GDP) and the lower bound of ``max_i x_i``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import special

from .._caches import register as _register_cache
from .._validation import check_count
from ..errors import PrecisionError, UnsupportedMechanismError
from ..losses import GaussianLoss, SelfDiscretisingLoss, gaussian_mixture_cell_masses
from .base import LossPair, Mechanism
from .basic import Gaussian

__all__ = ["RandomAllocation", "AllocationLoss", "clear_allocation_caches"]

_U = float(np.finfo(float).eps) / 2
#: the largest per-coordinate ratio lattice (points); a longer one is cut (see ``_coordinate``)
_MAX_LATTICE = 2_000_000
#: lattice mesh (ratio units) per loss-grid mesh and sqrt(t): the lattice spread adds about eta^2/(4t) of
#: loss variance per epoch near S = 1, the loss-grid spread about h^2/6; this keeps the two comparable
_ETA_PER_H = 0.8
#: Chernoff level of the lattice sum's FFT window: the aliased mass (2 tau per epoch, charged as l1 on both
#: ends) must stay far below the engine's per-epoch ``tail`` (about delta / epochs); tau = 1e-2 tail,
#: clipped to this range (a smaller tau widens the window)
_SUM_TAU = (1e-20, 1e-15)
#: the far-tail tilted composition is run only when the first window has at most this many points
_TILT_MAX_POINTS = 1 << 17


# --------------------------------------------------------------------------- merge-to-the-grid sweep
def _merge_up(P: np.ndarray, Q: np.ndarray, alpha: np.ndarray) -> tuple[np.ndarray, float, float, int]:
    """``tightdp.pld.dominance.merge_up`` on a ratio lattice, the P-masses as an array."""
    from ..pld.dominance import merge_up

    pmf, cp, cq, target = merge_up(P, Q, alpha)
    return np.asarray(pmf), cp, cq, target


# --------------------------------------------------------------------------- one coordinate
def _split(masses: np.ndarray, err: np.ndarray, cap: float = 1e-9) -> tuple[float, float]:
    """Per-point absolute errors as ``(rel, l1)``: a relative error ``<= cap`` on the points where that
    holds (composed multiplicatively: ``(1 + rel)^t`` over a sum of ``t`` coordinates) and the l1 error of
    the others (``tightdp.losses.split_errors`` with a looser cap; counted twice, to be safe)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(masses > 0, err / masses, np.inf)
    ok = r <= cap
    return (float(np.max(r[ok])) if np.any(ok) else 0.0), float(2.0 * np.sum(err[~ok]))


@_register_cache
@lru_cache(maxsize=16)
def _coordinate(sigma: float, eta: float, tail: float):
    """Dominating and dominated discrete pairs of ``(N(1, s^2), N(0, s^2))`` with lattice-valued ratios.

    Returns a dict with the lattice mesh ``eta``, the lattice length ``M`` (at most
    ``_MAX_LATTICE``; ``cut`` is the P_1-mass beyond it) and, on lattice indices ``0..M+1``:

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
    # a lattice longer than _MAX_LATTICE is cut there: the dominating pair then sends more P-mass to
    # +inf and the dominated pair pays more for its final carry (both reported, both still bounds)
    M = max(2, min(math.ceil(w_max / eta), _MAX_LATTICE))
    w = np.arange(M + 2) * eta  # lattice values 0..(M+1) eta
    with np.errstate(divide="ignore"):
        xe = sigma * sigma * np.log(w[1 : M + 1]) + 0.5  # W <= w  <=>  x <= sigma^2 log w + 1/2
    x_edges = np.concatenate([[-np.inf], xe, [np.inf]])  # cells 0..M, the last one (w_M, inf)
    realised = np.exp((2.0 * xe - 1.0) / (2.0 * sigma * sigma))
    rho = float(np.max(np.abs(realised / w[1 : M + 1] - 1.0))) + 8 * _U
    out = {"eta": eta, "M": M, "rho": rho, "cut": float(special.ndtr(-(sigma * math.log(M * eta) - 0.5 / sigma)))}
    masses = []
    for mean in (1.0, 0.0):
        zz = (x_edges - mean) / sigma
        cdf, sf = special.ndtr(zz), special.ndtr(-zz)
        m, (rel, l1) = gaussian_mixture_cell_masses(x_edges, (mean,), (1.0,), sigma, cdf, sf)
        masses.append((m, rel, l1))
    (P, rp, lp), (Q, rq, lq) = masses
    eP = rp * P + lp  # per-cell absolute error bounds (l1 parts counted on every cell: safe)
    eQ = rq * Q + lq

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
    rel_q, l1_q = _split(up_q, err_q)
    rel_p, l1_p = _split(up_p, w * err_q + 4 * _U * up_p)
    out.update(
        up_q=up_q, up_p=up_p, up_inf=min(up_inf, 1.0), up_rel_q=rel_q, up_l1_q=l1_q, up_rel_p=rel_p, up_l1_p=l1_p
    )

    # -- dominated: merge to the lattice (cell j has ratio in [w_j, w_j+1]; the top cell at least w_M)
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


def _lattice_loss(q: np.ndarray, eta: float, inf_mass: float = 0.0):
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


def _tilt_for_mean(terms, eta: float, target: float) -> float:
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


def _sum_law(terms, eta: float, focus: str | None = None, tau: float = 1e-15, tail: float = 0.0):
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
    # the tilted run only where the floor matters: its total exceeds a hundredth of the per-epoch tail
    # (and only on short sums: the tilted window of a heavy-tailed sum can be many times the first one)
    if focus is not None and pw > 0.0 and x.size <= _TILT_MAX_POINTS and float(np.sum(pointwise)) > 1e-2 * tail:
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
def _spread_to_grid(ratio: np.ndarray, pmass: np.ndarray, h: float):
    """Connect-the-dots in the likelihood ratio: each atom (ratio ``r``, P-mass ``m``, Q-mass ``m/r``)
    is split onto ``e^{ih} <= r < e^{(i+1)h}`` preserving both masses (a spread: dominating).
    Returns ``(i0, pmf)`` on loss values ``(i0 + j) h``; the upper share is rounded up."""
    lr = np.log(ratio)
    i = np.floor(lr / h).astype(np.int64)
    a = np.exp(i * h)
    i = np.where(a > ratio, i - 1, i)
    a = np.exp(i * h)
    b = np.exp((i + 1) * h)
    i = np.where(b < ratio, i + 1, i)
    a = np.exp(i * h)
    b = np.exp((i + 1) * h)
    frac = np.clip((ratio - a) / (b - a), 0.0, 1.0)
    up = pmass * (b / ratio) * frac
    up = np.minimum(pmass, up + pmass * 16 * _U * b / (b - a))  # rounding: to the safe (upper) side
    i0 = int(i.min())
    n = int(i.max()) - i0 + 2
    pmf = np.bincount(i - i0, weights=pmass - up, minlength=n) + np.bincount(i - i0 + 1, weights=up, minlength=n)
    return i0, pmf


def _merge_to_grid(ratio: np.ndarray, pmass: np.ndarray, h: float):
    """Merge-to-the-grid in the likelihood ratio (dominated): atoms are pooled into loss cells
    ``[ih, (i+1)h)`` (a garbling), and the cells merged so that each merged ratio is exactly
    ``e^{ih}``; the final carry is rounded down to the grid. Returns ``(i0, pmf)``."""
    lr = np.log(ratio)
    i = np.floor(lr / h).astype(np.int64)
    i = np.where(np.exp(i * h) > ratio, i - 1, i)
    i = np.where(np.exp((i + 1) * h) < ratio, i + 1, i)
    i0 = int(i.min())
    n = int(i.max()) - i0 + 1
    Pc = np.bincount(i - i0, weights=pmass, minlength=n)
    Qc = np.bincount(i - i0, weights=pmass / ratio, minlength=n)
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
def _epoch_pld(sigma: float, t: int, h: float, tail: float, direction: str, upper: bool):
    """The epoch's dominating (``upper``) or dominated discretised privacy loss on ``h Z``."""
    from ..pld import DiscretisedLoss

    eta = _ETA_PER_H * h * math.sqrt(t)
    c = _coordinate(sigma, eta, tail)
    eta = c["eta"]
    if upper:
        if direction == "remove":
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
    rel = math.expm1(math.log1p(rel) + math.log1p(8 * _U))
    s = x / t  # the likelihood ratio S of each atom of the sum
    keep = (m > 0) & (s > 0)
    if direction == "remove":
        ratio, pmass = s[keep], m[keep]  # P-law of S; loss log S
    else:
        ratio, pmass = 1.0 / s[keep], m[keep]  # add pair: its P is Q, its loss -log S = log(1/S)
        if upper:  # Q-mass at S <= 0 (all coordinates at ratio 0): infinite add loss
            inf_mass += float(np.sum(m[(s <= 0) & (m > 0)]))
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
        rel_error=min(rel + 16 * _U, 0.5),
    )


def clear_allocation_caches() -> None:
    """Empty this module's memos (benchmarks call it with ``tightdp.clear_caches()``)."""
    _coordinate.cache_clear()
    _epoch_pld.cache_clear()


# --------------------------------------------------------------------------- the privacy loss and mechanism
@dataclass(frozen=True)
class AllocationLoss(SelfDiscretisingLoss):
    """The privacy loss of one epoch of 1-out-of-``t`` random allocation of a Gaussian (``sigma`` per unit
    sensitivity), in ``direction`` ``"remove"`` or ``"add"``.

    Its distribution has no closed form; the engine uses ``dominating_pld`` and
    ``dominated_pld`` (certified discrete pairs on the loss grid, see the module
    docstring) instead of ``cdf``/``sf``, which refuse: a coupling-based
    accountant (PRV, Fourier) needs an exact CDF and cannot be handed one.
    """

    how_to = "the dominance accountant, connect-dots (allocation_epsilon, dpsgd_epsilon(sampling='random-allocation'))"

    sigma: float
    num_steps: int
    direction: str

    def dominating_pld(self, h: float, tail: float):
        """A discretised loss on ``h Z`` whose composition bounds delta from above (any mesh)."""
        return _epoch_pld(self.sigma, self.num_steps, float(h), float(tail), self.direction, True)

    def dominated_pld(self, h: float, tail: float):
        """A discretised loss on ``h Z`` whose composition bounds delta from below (any mesh)."""
        return _epoch_pld(self.sigma, self.num_steps, float(h), float(tail), self.direction, False)

    def spread(self) -> float:
        """Rough standard deviation of the loss under P (sets the first mesh only, never a bound):
        ``log S`` with ``Var_Q(W) = e^{1/sigma^2} - 1``, so about ``sqrt(Var(W) / t)`` when that is small."""
        v = math.expm1(min(1.0 / self.sigma**2, 700.0)) / self.num_steps
        return math.sqrt(math.log1p(v))


@dataclass(frozen=True, kw_only=True)
class RandomAllocation(Mechanism):
    """One epoch of ``num_steps`` steps in which each record is used in exactly ``num_selected`` of them,
    chosen uniformly at random (balls-and-bins for ``num_selected = 1``; Chua et al. 2412.16802,
    Feldman & Shenfeld 2502.08202 / 2602.17284). Add/remove neighbouring.

    Compose it once per epoch. ``privacy_losses()`` returns exact Gaussian losses
    for ``num_steps = 1`` and ``num_selected = num_steps`` and ``AllocationLoss``
    pairs otherwise.

    Attained pair: the differing record's clipped gradient is a fixed unit vector at every step and every
    other record's is 0. For ``num_selected = 1`` the epoch's outputs are then ``(1/t) sum_i N(e_i)`` against
    ``N(0)`` (``AllocationLoss``, certified from both sides); for ``num_selected = num_steps`` the record is
    in every step: the Gaussian of ``mu = sqrt(t) / sigma``. For ``1 < num_selected < num_steps`` no pair is
    returned (the epoch is bounded above through its dominating blocks, which are *not* attained by it);
    ``attained_mechanism()`` gives the post-processing ``sum_i x_i`` of the same data sets,
    ``N(k, t sigma^2)`` against ``N(0, t sigma^2)``: a Gaussian of noise ``sigma sqrt(t) / k``.
    """

    type_name = "random_allocation"
    pair_attained = True
    mechanism: Mechanism
    num_steps: int
    num_selected: int = 1

    def __post_init__(self):
        if not isinstance(self.mechanism, Gaussian):
            raise UnsupportedMechanismError(
                f"random allocation of {type(self.mechanism).__name__} is not supported; only Gaussian"
            )
        object.__setattr__(self, "num_steps", check_count("num_steps", self.num_steps))
        object.__setattr__(self, "num_selected", check_count("num_selected", self.num_selected))
        if self.num_selected > self.num_steps:
            raise ValueError(f"num_selected ({self.num_selected}) must be <= num_steps ({self.num_steps})")
        if self.num_steps > 1_000_000:
            raise ValueError(f"num_steps must be at most 1,000,000 per epoch, got {self.num_steps}")

    @property
    def sigma(self) -> float:
        g: Gaussian = self.mechanism  # type: ignore[assignment]
        return g.noise_multiplier / g.sensitivity

    def blocks(self) -> list[tuple[int, int]]:
        """``[(steps, count)]``: the 1-out-of-``steps`` allocations whose composition dominates the epoch
        (2502.08202's reduction for ``k > 1``: ``k - r`` of ``floor(t/k)`` steps, ``r`` of ``ceil(t/k)``)."""
        t, k = self.num_steps, self.num_selected
        lo, r = divmod(t, k)
        return [(s, c) for s, c in ((lo, k - r), (lo + 1, r)) if c > 0]

    def attained_mechanism(self) -> Mechanism:
        """``self`` for ``num_selected`` 1 or ``num_steps``; else the post-processing ``sum_i x_i`` (see above)."""
        t, k = self.num_steps, self.num_selected
        if k == 1 or k == t:
            return self
        return Gaussian(noise_multiplier=self.sigma * math.sqrt(t) / k)

    def privacy_losses(self) -> LossPair:
        t, k, sigma = self.num_steps, self.num_selected, self.sigma
        if k == t:
            loss = GaussianLoss(mu=math.sqrt(t) / sigma)
            return LossPair(loss, loss)
        if k == 1:
            return LossPair(AllocationLoss(sigma, t, "remove"), AllocationLoss(sigma, t, "add"))
        raise UnsupportedMechanismError(
            "random allocation with 1 < num_selected < num_steps is composed as its dominating blocks: use "
            "allocation_epsilon(), which also reports the Gaussian lower bound"
        )


#: below this noise multiplier (per unit sensitivity) 1-of-t allocation gets the wide interval at once
_WIDE_SIGMA = 0.5


# --------------------------------------------------------------------------- a one-dimensional lower bound
#: cells whose computed mass may be off by more than this factor are dropped (a dominated pair may lose atoms)
_CELL_REL_MAX = 1e-7


def max_statistic_cells(
    sigma: float, t: int, mean_p: float = 1.0, mean_q: float = 0.0, cells: int = 20000, shifted: int = 1
):
    """Cell masses of ``M = max_i x_i`` under ``P`` and ``Q`` (see ``max_statistic_pld``) on ``cells``
    equal cells, each with a certified relative error bound.

    ``log F(m) = k log_ndtr((m - mean)/s) + (t - k) log_ndtr(m/s)`` is computed with absolute error at most
    ``a(m)``: each ``log Phi(x)`` with the error bound of ``log_ndtr_and_error`` below (the upper tail's
    relative error grows like ``x^2 u``: scipy's own ``log_ndtr`` is off by 2e-9 relative at ``x = 12``, so
    it is not used there), then the sum's rounding. Where ``F(m_{i+1}) <= 1/2`` the cell mass is taken from the CDF in log space,
    ``F(m_{i+1}) (-expm1(log F(m_i) - log F(m_{i+1})))``: with ``D = log F(m_{i+1}) - log F(m_i) > 0``,
    ``|d log(1 - e^{-D}) / dD| = 1 / (e^D - 1) <= 1 / D``, so its relative error is at most
    ``a_{i+1} + (a_i + a_{i+1}) / D`` (first order, doubled) plus a few ulps. Elsewhere it is a difference
    of survival values ``S = -expm1(log F)``, each with absolute error ``a (1 - S) + 2 u S``: relative error
    ``(err_i + err_{i+1}) / mass + 2 u``. (The lower tail is no longer a difference of values near 1.)

    Returns ``(edges, P, Q, rel_p, rel_q)``: the ``cells + 1`` edges and, per cell, the masses and their
    relative error bounds (infinite where the mass is 0).
    """
    if not 1 <= shifted <= t:
        raise ValueError(f"shifted must be in 1..t = {t}, got {shifted!r}")
    lo = min(mean_p, mean_q) - 9.0 * sigma
    hi = max(mean_p, mean_q) + 10.0 * sigma + sigma * math.sqrt(2.0 * math.log(max(t, 2)))
    m = np.linspace(lo, hi, cells + 1)

    def log_ndtr_and_error(mean: float):
        # log Phi(x) and an absolute error bound. x <= 0: scipy's log_ndtr (within 4.5 ulps of its value,
        # checked against mpmath); x > 0: log1p(-ndtr(-x)), ndtr(-x) within 3.4 u (1 + x^2) relative (x's
        # conditioning; checked against mpmath), bounded here by 8 u (1 + x^2). Plus the rounding of x
        # itself, dx = u (2|x| + (|m| + |mean|) / s), times the slope phi(x) / Phi(x): at most |x| + 1 for
        # x <= 0 (Mills ratio), at most 2 Phi(-x) (x + 1) for x > 0.
        x = (m - mean) / sigma
        ax = np.abs(x)
        dx = _U * (2.0 * ax + (np.abs(m) + abs(mean)) / sigma)
        tail = special.ndtr(-ax)
        neg = x <= 0
        v = np.where(neg, special.log_ndtr(np.minimum(x, 0.0)), np.log1p(-tail))
        err = np.where(
            neg,
            8 * _U * np.abs(v) + (ax + 1.0) * dx,
            2.0 * tail * (8 * _U * (1.0 + ax * ax) + (ax + 1.0) * dx) + 2 * _U * np.abs(v) + 1e-300,
        )
        return v, err

    rest, rest_err = log_ndtr_and_error(0.0)
    out = []
    for mean in (mean_p, mean_q):
        own, own_err = log_ndtr_and_error(mean)
        log_f = shifted * own + (t - shifted) * rest
        a = (
            shifted * own_err
            + (t - shifted) * rest_err
            + 4 * _U * (shifted * np.abs(own) + (t - shifted) * np.abs(rest))
        )
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            # lower part: from the CDF in log space
            d = log_f[1:] - log_f[:-1]
            low = np.exp(log_f[1:]) * -np.expm1(-d)
            rel_low = 2.0 * (a[1:] + (a[:-1] + a[1:]) / d) + 8 * _U
            # upper part: differences of survival values
            sf = -np.expm1(log_f)
            err = a * (1.0 - sf) + 2 * _U * sf
            high = sf[:-1] - sf[1:]
            rel_high = (err[:-1] + err[1:]) / high + 2 * _U
        use_low = log_f[1:] <= -math.log(2.0)
        mass = np.maximum(np.where(use_low, low, high), 0.0)
        rel = np.where(use_low, rel_low, rel_high)
        # subnormal masses have no relative accuracy: dropped with the infinite bounds
        rel = np.where((mass > 1e-290) & np.isfinite(rel) & (rel >= 0), rel, np.inf)
        out.append((mass, rel))
    (P, rp), (Q, rq) = out
    return m, P, Q, rp, rq


@_register_cache
@lru_cache(maxsize=8)
def max_statistic_pld(
    sigma: float,
    t: int,
    h: float,
    mean_p: float = 1.0,
    mean_q: float = 0.0,
    reverse: bool = False,
    cells: int = 20000,
    shifted: int = 1,
):
    """A discretised loss on ``h Z`` *dominated* by the pair ``P = (1/t) sum_i N(mean_p e_i, s^2 I)``
    against ``Q = (1/t) sum_i N(mean_q e_i, s^2 I)`` (``reverse``: ``Q`` against ``P``); with
    ``shifted = k``, ``P`` and ``Q`` are the uniform mixtures over the ``k``-subsets ``S`` of the steps of
    ``N(mean 1_S, s^2 I)`` (``mean_q = 0``: one epoch of k-out-of-``t`` allocation, remove direction).

    ``mean_q = 0`` is one epoch of 1-out-of-``t`` allocation (remove direction);
    ``(2, 1)`` is Chua et al.'s shuffling pair (2403.17673). The post-processing
    ``M = max_i x_i`` is a garbling, so its pair ``F(m) = Phi((m - mean)/s) Phi(m/s)^(t-1)``
    is dominated (Blackwell); its cells are merged into atoms (a garbling) and
    onto the loss grid (merge-to-the-grid), so the result is dominated for any
    mesh (``k`` shifted coordinates: ``Phi((m - mean)/s)^k Phi(m/s)^(t-k)``, the same for every ``S``).

    Floating point (``max_statistic_cells``): every cell mass carries a certified relative error; cells
    whose bound exceeds ``_CELL_REL_MAX`` are dropped with the mass outside the cell range (dropping atoms
    of a pair only lowers its hockey-stick divergence), the others' ratios are within ``1 +- (r_P + r_Q)``
    of the exact ones, so every loss is lowered by ``2 (r_P + r_Q)`` (lowering losses lowers delta), and the
    masses carry ``rel_error = r_P`` (the composition's ``(1 +- r)^k`` factors). Cheap for any ``sigma``.
    """
    from ..pld import DiscretisedLoss

    _, P, Q, rp, rq = max_statistic_cells(sigma, t, mean_p, mean_q, cells, shifted)
    if reverse:
        P, Q, rp, rq = Q, P, rq, rp
    keep = (P > 0) & (Q > 0) & (rp <= _CELL_REL_MAX) & (rq <= _CELL_REL_MAX)
    if not np.any(keep):
        raise PrecisionError("max statistic: no cell mass is certified")
    r_p, r_q = float(np.max(rp[keep])), float(np.max(rq[keep]))
    i0, pmf = _merge_to_grid(P[keep] / Q[keep], P[keep], h)
    return DiscretisedLoss(
        h=h,
        start=i0,
        pmf=pmf,
        shift=-(2.0 * (r_p + r_q) + 1e-12),
        infinity_mass=0.0,
        truncated_mass=0.0,
        mean_error=0.0,
        coupling_range=0.0,
        tv_error=0.0,
        rel_error=r_p + 16 * _U,
    )


def lower_bound_epsilon(dominated_fn, epochs: int, delta: float, h0: float, passes: int = 3) -> float:
    """The best certified lower bound on epsilon from compositions of ``dominated_fn(h)`` over ``epochs``
    on meshes ``h0, h0/2, ...`` (each pass is a bound on its own; the largest is kept)."""
    from ..pld import chernoff_epsilon, compose, epsilon_bounds

    best, h = 0.0, h0
    for _ in range(passes):
        d = dominated_fn(h)
        parts = [(d, epochs)]
        tilt = chernoff_epsilon(parts, delta)[1] if delta < 1e-6 else 0.0
        comp = compose(parts, tilt=tilt, tau=1e-13 if tilt else min(1e-6, 5e-5 * delta))
        lo = epsilon_bounds(comp, delta, 1e-300, need="lower").lower
        if lo <= best + 1e-3:
            best = max(best, lo)
            break
        best = max(best, lo)
        h /= 2.0
    return best

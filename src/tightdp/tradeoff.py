"""Operational views of a privacy curve, certified: the f-DP trade-off curve, the best
membership-inference attack's true-positive rate at a given false-positive rate, and the
tightest mu-GDP statement.

Notation (Dong, Roth, Su 2022, "Gaussian differential privacy", JRSS-B; DRS below). For a pair
of output distributions ``(P, Q)`` of neighbouring datasets, a test of ``H0: P`` against
``H1: Q`` has type-I error ``alpha`` and type-II error ``beta``; the trade-off function
``T(P, Q)(alpha)`` is the smallest ``beta`` at level ``alpha`` (DRS Def. 2.1). It is convex,
continuous, non-increasing, ``T(alpha) <= 1 - alpha`` and ``T(1) = 0`` (DRS Prop. 2.2). The
attacker's true-positive rate at false-positive rate ``alpha`` is ``1 - T(alpha)``.

**Which curve is certified (add/remove).** tightdp's accountants answer
``delta(eps) = max_d H_{e^eps}(P_d || Q_d)``, the worse of the two orders of the neighbouring
pair (remove and add; ``accountants._pld.PLDAccountant``). The curve certified here is
``f = conv(min(T(P, Q), T(Q, P)))``, DRS's symmetrisation (their Prop. 2.4 and Sec. 2.3): the
largest trade-off function ``f`` such that the run is ``f``-DP for both orders. It is symmetric
and its convex conjugate is exactly that delta: ``delta(eps) = 1 + f*(-e^eps)`` for ``eps >= 0``
(DRS Prop. 2.12; the conjugate of a convex hull of a minimum is the maximum of the conjugates).
For a ledger whose two directions coincide (Gaussian, Laplace, randomized response, pure DP)
``f = T(P, Q)`` itself.

**Lower curve** (``beta_lower``; DRS Prop. 2.5 and 2.12). For every ``eps``, ``f`` lies above
its supporting lines: ``f(a) >= 1 - delta(eps) - e^eps a`` and, by symmetry,
``f(a) >= e^-eps (1 - delta(eps) - a)``. Replacing ``delta`` by a certified *upper* bound keeps
both inequalities, so ``beta_lower = max(0, max_i lines_i)`` over the finite grid is a certified
lower bound on ``f``: no test does better.

**Upper curve** (``beta_upper``). A *lower* bound on delta does **not** give
``f(a) <= 1 - delta_lower(eps) - e^eps a`` for all ``a`` (that line lies above the supporting line,
and ``f`` lies above the supporting line, so nothing follows pointwise). What it gives is a
*witness*: ``f*(-e^eps) = delta(eps) - 1 >= delta_lower(eps) - 1`` means
``sup_a [1 - e^eps a - f(a)] >= delta_lower(eps)``, and the supremum of a continuous function on
``[0, 1]`` is attained, so **some** ``a_i`` has ``f(a_i) <= W_i(a_i)`` with
``W_i(a) = 1 - delta_lower(eps_i) - e^eps_i a``. Since also ``f >= beta_lower``, that ``a_i`` lies in
``A_i = {a in [0, 1]: beta_lower(a) <= W_i(a)}``, an interval (an intersection of half-lines,
computed exactly up to rounding and then widened). So each grid point yields a *witness
segment* ``S_i = {(a, W_i(a)): a in A_i}`` holding a point on or above the graph of ``f``, and by
the symmetry of ``f`` its mirror ``{(b, a)}`` does too (if ``b >= f(a)`` then
``f(b) <= f(f(a)) <= a``). The points ``(0, 1)`` and ``(1, 0)`` are witnesses too. ``f`` is
convex, so below every chord between two witnesses that bracket ``a``. At each ``a`` the upper
curve is the largest chord value over the unknown positions of the witnesses on their segments:
for a segment wholly left (right) of ``a`` the worst chord value is attained at a corner (the
chord's value at ``a`` is a linear-fractional, hence monotone, function of the position along a
straight segment); a segment straddling ``a`` is split into the case "its witness is left of
``a``" and "right of ``a``" and the bound is the worse of the two. Taking the best bound over
the nearest few segments on each side gives ``beta_upper``; with exact delta on a grid it is
within a chord across two grid cells of the truth, so the gap shrinks quadratically with
the grid spacing, and it is never below the truth.

The membership-inference view follows: the best attack at FPR ``alpha`` has TPR at most
``1 - beta_lower(alpha)``, and the symmetrised curve reaches at least ``1 - beta_upper(alpha)``
(for a ledger with one direction that is a single likelihood-ratio test on the run; for two
directions the symmetrised curve may mix the two orders of the pair, DRS Sec. 2.3).

**mu-GDP.** The tightest ``mu`` with ``G_mu <= f``, ``G_mu(a) = Phi(Phi^-1(1 - a) - mu)``
(DRS Def. 2.7). ``mu_lower``: at any ``a``, ``G_mu(a) <= f(a) <= beta_upper(a)`` forces
``mu >= Phi^-1(1 - a) - Phi^-1(beta_upper(a))``; the maximum over the witness corners and the
alpha grid is certified. ``mu_upper``: ``G_mu <= beta_lower`` implies ``G_mu <= f``; ``beta_lower``
is piecewise linear and ``G_mu`` convex, so it suffices that ``G_mu`` lies below each line at the
two (widened) ends of the interval where that line is the maximum. A finite grid with
``delta_upper > 0`` everywhere leaves ``beta_lower(0) < 1 = G_mu(0)``, so then no finite ``mu`` is
certified (``mu_upper = inf``, with a note): certifying GDP needs the whole tail of delta. A
ledger of plain Gaussians (every step's privacy loss Gaussian, both directions equal) is
exactly mu-GDP with ``mu^2 = sum count * mu_step^2`` (DRS Cor. 3.3), and is answered in closed
form, curves included, with only rounding in the intervals.

Rounding: every computed value carries a margin (relative 1e-9 for the upper curve's chords,
16 ulp for the lower curve's lines, 1e-9 relative for the closed form), far above the float
error of the few operations involved and far below anything a user reads.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.special import ndtr, ndtri

from ._validation import check_real_array
from .bounds import Bounds, _jsonable

__all__ = ["TradeoffCurve", "tradeoff_curve", "tradeoff_lower_curve", "tradeoff_from_accountant", "DEFAULT_ALPHAS"]

_U = float(np.finfo(float).eps)  # 2.2e-16, one ulp at 1
#: Where the curves are reported by default: dense near 0 (the attack regime) and over [0, 1].
DEFAULT_ALPHAS = np.unique(np.concatenate([[0.0], np.geomspace(1e-6, 1e-2, 25), np.linspace(0.0, 1.0, 101)]))
#: Lines with e^eps beyond this overflow; leaving grid points out is safe for both curves.
_EPS_CAP = 700.0
_NEAR = 4  # witness segments used on each side of an alpha
_LOWER_REL = 16 * _U  # relative margin on the lower curve's lines (c-space)
_UPPER_REL = 1e-9  # relative margin on the upper curve's chords (c-space)


# ============================================================================== lines and intervals
def _monotone(eps: np.ndarray, d_up: np.ndarray, d_lo: np.ndarray | None):
    """Sort by eps; tighten with monotonicity (delta is non-increasing in eps): an upper bound at
    eps_j bounds delta at every eps_i >= eps_j, a lower bound at eps_j every eps_i <= eps_j."""
    order = np.argsort(eps, kind="stable")
    eps, d_up = eps[order], np.minimum.accumulate(d_up[order])
    if d_lo is not None:
        d_lo = np.maximum.accumulate(d_lo[order][::-1])[::-1]
    return eps, d_up, d_lo


def _upper_lines(eps: np.ndarray, d_up: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The lower curve's lines in TPR space ``c = 1 - beta``: ``c <= D + S a`` for every line.

    ``1 - delta - e^eps a`` becomes ``D = delta, S = e^eps``; its mirror ``e^-eps (1 - delta - a)``
    becomes ``D = -expm1(-eps) + e^-eps delta, S = e^-eps``; ``beta >= 0`` is ``D = 1, S = 0``.
    """
    s = np.exp(eps)
    si = np.exp(-eps)
    d = np.concatenate([d_up, -np.expm1(-eps) + si * d_up, [1.0]])
    return d, np.concatenate([s, si, [0.0]])


def _intervals(dq: np.ndarray, sq: np.ndarray, d: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each query line ``dq + sq a``: ``[lo, hi]``, the set of ``a`` in [0, 1] where it is at most
    every line ``d + s a``, widened by a bound on the rounding of the crossing points (so it contains
    the exact set). Empty when ``lo > hi``."""
    ds = sq[:, None] - s[None, :]
    dd = d[None, :] - dq[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        x = dd / ds
        tol = (
            8 * _U * (np.abs(d)[None, :] + np.abs(dq)[:, None] + (sq[:, None] + s[None, :]) * np.abs(x)) / np.abs(ds)
            + 1e-300
        )
    pos, neg = ds > 0, ds < 0
    with np.errstate(invalid="ignore"):
        hi = np.min(np.where(pos, x + tol, np.inf), axis=1, initial=np.inf)
        lo = np.max(np.where(neg, x - tol, -np.inf), axis=1, initial=-np.inf)
    flat_tol = 8 * _U * (np.abs(d)[None, :] + np.abs(dq)[:, None]) + 1e-300
    bad = np.any((ds == 0) & (dd < -flat_tol), axis=1)
    lo = np.maximum(lo, 0.0)
    hi = np.minimum(hi, 1.0)
    hi = np.where(bad, -1.0, hi)
    return lo, hi


def _c_upper(alpha: np.ndarray, d: np.ndarray, s: np.ndarray) -> np.ndarray:
    """``1 - beta_lower``: the best attack's TPR is at most this (rounded up, at most 1)."""
    c = np.min(d[None, :] + s[None, :] * alpha[:, None], axis=1)
    return np.minimum(1.0, c * (1.0 + _LOWER_REL) + 1e-300)


# ============================================================================== witness segments
@dataclass(frozen=True)
class _Segments:
    """Witness segments in (alpha, c = 1 - beta) space: from ``(a0, c0)`` to ``(a1, c1)``, ``a0 <= a1``;
    each holds a point on or below the concave curve ``c = 1 - f``."""

    a0: np.ndarray
    c0: np.ndarray
    a1: np.ndarray
    c1: np.ndarray


def _segments(eps, d_up, d_lo) -> _Segments:
    d, s = _upper_lines(eps, d_up)
    se = np.exp(eps)
    lo, hi = _intervals(d_lo, se, d, s)
    if np.any(lo > hi):
        i = int(np.flatnonzero(lo > hi)[0])
        raise ValueError(
            f"delta_lower is not consistent with delta_upper: at epsilon={eps[i]:g} the lower bound "
            f"{d_lo[i]:.17g} exceeds what the upper bounds allow"
        )
    a0, a1 = lo, hi
    c0, c1 = d_lo + se * a0, d_lo + se * a1
    # mirrors (b, a) in beta space are (1 - c, 1 - a) in c space; reversed so that a0 <= a1
    ma0, mc0, ma1, mc1 = 1.0 - c1, 1.0 - a1, 1.0 - c0, 1.0 - a0
    keep = ma0 <= ma1
    anchors_a = np.array([0.0, 1.0])
    anchors_c = np.array([0.0, 1.0])
    return _Segments(
        np.concatenate([a0, ma0[keep], anchors_a]),
        np.concatenate([c0, mc0[keep], anchors_c]),
        np.concatenate([a1, ma1[keep], anchors_a]),
        np.concatenate([c1, mc1[keep], anchors_c]),
    )


def _chord(al, cl, ar, cr, x):
    """The chord's value at ``x`` (``al <= x <= ar``); both values when the two points sit at ``x``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        v = cl + (x - al) * (cr - cl) / (ar - al)
    return np.where(ar > al, v, np.minimum(cl, cr))


def _pair_value(L, R, x):
    """Worst chord value at ``x`` over the corners of a left piece ``L`` and right piece ``R``
    (each ``(a0, c0, a1, c1)`` arrays broadcastable with ``x``)."""
    la0, lc0, la1, lc1 = L
    ra0, rc0, ra1, rc1 = R
    return np.minimum(
        np.minimum(_chord(la0, lc0, ra0, rc0, x), _chord(la0, lc0, ra1, rc1, x)),
        np.minimum(_chord(la1, lc1, ra0, rc0, x), _chord(la1, lc1, ra1, rc1, x)),
    )


def _c_lower(alpha: np.ndarray, seg: _Segments) -> np.ndarray:
    """``1 - beta_upper``: a certified lower bound on the best attack's TPR (see the module docstring)."""
    out = np.empty(alpha.shape)
    for start in range(0, alpha.size, 256):  # bounded memory: (256, segments, K, K)
        out[start : start + 256] = _c_lower_block(alpha[start : start + 256], seg)
    return np.clip(out * (1.0 - _UPPER_REL), 0.0, 1.0)


def _c_lower_block(x: np.ndarray, seg: _Segments) -> np.ndarray:
    a0, c0, a1, c1 = seg.a0, seg.c0, seg.a1, seg.c1
    X = x[:, None]
    left = a1[None, :] <= X
    right = a0[None, :] >= X
    amb = ~left & ~right
    n = a0.size
    k = min(_NEAR, n)

    def nearest(mask, key):
        kk = np.where(mask, key, -np.inf)
        idx = np.argpartition(-kk, k - 1, axis=1)[:, :k]
        ok = np.isfinite(np.take_along_axis(kk, idx, axis=1))
        return idx, ok

    li, lok = nearest(left, a1[None, :])
    ri, rok = nearest(right, -a0[None, :])
    X3 = x[:, None, None]
    Lp = (a0[li][:, :, None], c0[li][:, :, None], a1[li][:, :, None], c1[li][:, :, None])
    Rp = (a0[ri][:, None, :], c0[ri][:, None, :], a1[ri][:, None, :], c1[ri][:, None, :])
    pv = _pair_value(Lp, Rp, X3)
    pv = np.where(lok[:, :, None] & rok[:, None, :], pv, -np.inf)
    sure = pv.max(axis=(1, 2))

    # straddling segments: the narrowest few, each split at x into its left and right parts
    ai, aok = nearest(amb, -(a1 - a0)[None, :])
    if not aok.any():
        return sure
    ka0, kc0, ka1, kc1 = a0[ai], c0[ai], a1[ai], c1[ai]
    mid = _chord(ka0, kc0, ka1, kc1, X)  # the segment's value at x (a straight segment)
    kl = (ka0[:, :, None], kc0[:, :, None], X3, mid[:, :, None])  # witness in [a0, x]
    kr = (X3, mid[:, :, None], ka1[:, :, None], kc1[:, :, None])  # witness in [x, a1]
    Rk = (a0[ri][:, None, :], c0[ri][:, None, :], a1[ri][:, None, :], c1[ri][:, None, :])
    Lk = (a0[li][:, None, :], c0[li][:, None, :], a1[li][:, None, :], c1[li][:, None, :])
    case_left = np.where(rok[:, None, :], _pair_value(kl, Rk, X3), -np.inf).max(axis=2)
    case_right = np.where(lok[:, None, :], _pair_value(Lk, kr, X3), -np.inf).max(axis=2)
    s2 = sure[:, None]
    bound = np.minimum(np.maximum(s2, case_left), np.maximum(s2, case_right))
    bound = np.where(aok, bound, -np.inf)
    return np.maximum(sure, bound.max(axis=1))


# ============================================================================== mu-GDP
def _mu_upper(eps, d_up) -> tuple[float, str | None]:
    """Smallest certified mu with ``G_mu <= beta_lower`` (checked at the widened ends of each line's
    active interval), or ``inf`` with the reason."""
    d, s = _upper_lines(eps, d_up)
    # a line at or above another on all of [0, 1] never shapes beta_lower: leave it out (else its
    # widened one-point interval, e.g. at alpha = 0 where lines with delta = 0 meet, asks too much)
    le = (d[None, :] <= d[:, None]) & (d[None, :] + s[None, :] <= d[:, None] + s[:, None])
    strict = (d[None, :] < d[:, None]) | (d[None, :] + s[None, :] < d[:, None] + s[:, None])
    idx = np.arange(d.size)
    dominated = np.any(le & (strict | (idx[None, :] < idx[:, None])), axis=1)
    lo, hi = _intervals(d, s, d[~dominated], s[~dominated])
    n = eps.size
    reqs = [0.0]
    for j in np.flatnonzero((lo <= hi) & ~dominated):
        l, h = float(lo[j]), float(hi[j])
        if j == 2 * n:  # beta = 0 active somewhere before 1: no finite mu
            if l < 1.0 - 1e-9:  # (delta_upper > 0 everywhere is caught at alpha = 0 below)
                return math.inf, f"the certified lower curve reaches beta = 0 at alpha = {l:.6g} < 1"
            continue
        for a in (l, h):
            if j < n:  # 1 - delta - e^eps a: need Phi(mu + Phi^-1(a)) >= delta + e^eps a
                c = float(d[j] + s[j] * a) * (1 + _LOWER_REL)
                if a <= 0.0:
                    if c > 0.0:
                        return math.inf, (
                            f"delta_upper > 0 at every epsilon of the grid (down to {d_up[j]:.3g} "
                            f"at epsilon = {eps[j]:.6g}): a finite grid cannot certify a Gaussian tail"
                        )
                    continue
                if c >= 1.0:
                    return math.inf, "the certified lower curve reaches 0 before alpha = 1"
                z1, z2 = float(ndtri(c)), float(ndtri(a))
            else:  # e^-eps (1 - delta - a): need Phi(Phi^-1(1 - a) - mu) <= that
                i = j - n
                if a >= 1.0:
                    continue  # both are 0 at alpha = 1 (the line is active there only when delta = 0)
                b = float(math.exp(-eps[i]) * ((1.0 - a) - d_up[i])) * (1 - _LOWER_REL) - 4 * _U * math.exp(-eps[i])
                if b <= 0.0:
                    return math.inf, "the certified lower curve reaches 0 before alpha = 1"
                z1, z2 = float(-ndtri(a)) if a <= 0.5 else float(ndtri(1.0 - a)), float(ndtri(b))
            r = z1 - z2
            reqs.append(r + 1e-12 * (abs(z1) + abs(z2)) + 1e-15)
    return max(reqs), None


def _mu_lower(alpha: np.ndarray, c_low: np.ndarray) -> float:
    """Largest ``Phi^-1(c_low(a)) - Phi^-1(a)`` (the curve's TPR lower bound forces mu at least this)."""
    ok = (alpha > 0) & (alpha < 1) & (c_low > 0) & (c_low < 1)
    if not ok.any():
        return 0.0
    z1, z2 = ndtri(c_low[ok]), ndtri(alpha[ok])
    r = z1 - z2 - 1e-12 * (np.abs(z1) + np.abs(z2)) - 1e-15
    return float(max(0.0, np.max(r)))


# ============================================================================== the curve
@dataclass(frozen=True)
class TradeoffCurve:
    """A certified f-DP trade-off curve: ``beta_lower <= f(alpha) <= beta_upper`` at every ``alpha``.

    ``f`` is the symmetrised trade-off function of the run over both orders of the neighbouring
    pair (module docstring; Dong, Roth, Su 2022, Prop. 2.12). ``mu_lower <= mu <= mu_upper``
    brackets the tightest mu-GDP statement (``mu_upper`` may be ``inf``: not certifiable from the
    grid, see ``details["mu_note"]``). ``epsilons`` / ``delta_lower`` / ``delta_upper`` are the grid
    the curves come from; ``at(alphas)`` and ``tpr(fpr)`` evaluate anywhere in [0, 1].
    """

    alpha: np.ndarray
    beta_lower: np.ndarray
    beta_upper: np.ndarray
    mu_lower: float
    mu_upper: float
    epsilons: np.ndarray
    delta_lower: np.ndarray
    delta_upper: np.ndarray
    method: str
    details: Mapping[str, Any] = field(default_factory=dict)

    @property
    def max_gap(self) -> float:
        """``max(beta_upper - beta_lower)`` over ``alpha``."""
        return float(np.max(self.beta_upper - self.beta_lower))

    def at(self, alphas) -> tuple[np.ndarray, np.ndarray]:
        """``(beta_lower, beta_upper)`` at ``alphas`` (each in [0, 1])."""
        a = _check_alphas("alphas", alphas)
        c_up, c_low = self._tpr_bounds(a)
        return _beta_from_c(c_up, down=True), _beta_from_c(c_low, down=False, alpha=a)

    def tpr(self, fpr) -> tuple[np.ndarray, np.ndarray]:
        """``(lower, upper)`` on the best membership-inference attack's TPR at false-positive rate ``fpr``.

        ``upper = 1 - beta_lower(fpr)``: no attack does better. ``lower = 1 - beta_upper(fpr)``: the
        (symmetrised) optimal test reaches at least this. Scalars in, scalars out.
        """
        a = _check_alphas("fpr", fpr)
        c_up, c_low = self._tpr_bounds(a)
        if np.ndim(fpr) == 0:
            return float(c_low[0]), float(c_up[0])
        return c_low, c_up

    def _tpr_bounds(self, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        mu = self.details.get("mu_exact")
        if mu is not None:
            return _gdp_c(a, self.mu_upper, up=True), _gdp_c(a, self.mu_lower, up=False)
        d, s = _upper_lines(self.epsilons, self.delta_upper)
        c_up = _c_upper(a, d, s)
        c_low = _monotone_up(a, _c_lower(a, _segments(self.epsilons, self.delta_upper, self.delta_lower)))
        return c_up, np.minimum(c_low, c_up)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the curves, the mu interval (``None`` for inf) and the grid."""
        return {
            "alpha": _jsonable(self.alpha),
            "beta_lower": _jsonable(self.beta_lower),
            "beta_upper": _jsonable(self.beta_upper),
            "max_gap": self.max_gap,
            "mu": {"lower": _jsonable(self.mu_lower), "upper": _jsonable(self.mu_upper)},
            "epsilons": _jsonable(self.epsilons),
            "delta_lower": _jsonable(self.delta_lower),
            "delta_upper": _jsonable(self.delta_upper),
            "method": self.method,
            "details": _jsonable(dict(self.details)),
        }


def _monotone_up(a: np.ndarray, c_low: np.ndarray) -> np.ndarray:
    """The best TPR is non-decreasing in the FPR, so a lower bound at ``a'`` holds at every ``a >= a'``:
    replace ``c_low`` by its running maximum over the sorted ``a``."""
    order = np.argsort(a, kind="stable")
    out = np.empty_like(c_low)
    out[order] = np.maximum.accumulate(c_low[order])
    return out


def _beta_from_c(c: np.ndarray, *, down: bool, alpha: np.ndarray | None = None) -> np.ndarray:
    """``1 - c`` rounded to the safe side (``1 - c`` is exact to half an ulp of 1). An upper curve is
    also capped by ``1 - alpha`` (every trade-off function is, Dong, Roth, Su 2022 Prop. 2.2) and is
    0 at ``alpha = 1``."""
    if down:
        return np.clip(1.0 - c - _U, 0.0, 1.0)
    b = 1.0 - c + _U
    if alpha is not None:
        b = np.where(alpha >= 1.0, 0.0, np.minimum(b, 1.0 - alpha + _U))
    return np.clip(b, 0.0, 1.0)


def _check_alphas(name: str, alphas) -> np.ndarray:
    a = np.atleast_1d(check_real_array(name, alphas, low=0.0)).astype(float)
    if a.size == 0:
        raise ValueError(f"{name} must not be empty")
    if np.any(a > 1):
        raise ValueError(f"{name} must be in [0, 1], got {float(np.max(a))!r}")
    return a


def _gdp_c(a: np.ndarray, mu: float, *, up: bool) -> np.ndarray:
    """``1 - G_mu(a) = Phi(Phi^-1(a) + mu)`` with a relative margin (``up``: rounded up)."""
    with np.errstate(divide="ignore"):
        z = np.where(a <= 0.5, ndtri(a), -ndtri(1.0 - a))  # 1 - a is exact for a >= 0.5
        c = ndtr(z + mu)
    c = c * (1.0 + 1e-9) + 1e-300 if up else c * (1.0 - 1e-9)
    return np.clip(np.where(a >= 1.0, 1.0, np.where(a <= 0.0, 0.0, c)), 0.0, 1.0)


# ============================================================================== building curves
def _gaussian_ledger_mu(accountant) -> float | None:
    """``mu`` when every step of the ledger has a Gaussian privacy loss, equal in both directions
    (then exactly mu-GDP, DRS Cor. 3.3), else ``None`` (an empty ledger and an overflowing mu too)."""
    from .accountants._gdp_math import gaussian_ledger_mu

    mu = gaussian_ledger_mu(accountant.ledger) if accountant.ledger else None
    return mu if mu is not None and math.isfinite(mu) else None


def _closed_form(mu: float, alphas: np.ndarray) -> TradeoffCurve:
    lo, hi = mu * (1 - 1e-12), mu * (1 + 1e-12)  # sqrt(sum c mu_i^2) is off by a few ulp at most
    c_up, c_low = _gdp_c(alphas, hi, up=True), _gdp_c(alphas, lo, up=False)
    empty = np.empty(0)
    return TradeoffCurve(
        alphas,
        _beta_from_c(c_up, down=True),
        _beta_from_c(c_low, down=False, alpha=alphas),
        lo,
        hi,
        empty,
        empty,
        empty,
        "closed form: exact mu-GDP (Dong, Roth, Su 2022, Cor. 2.13 / 3.3)",
        {"mu_exact": mu},
    )


def _from_grid(eps, d_lo, d_up, alphas, method, details) -> TradeoffCurve:
    eps, d_up, d_lo = _monotone(eps, d_up, d_lo)
    d, s = _upper_lines(eps, d_up)
    c_up = _c_upper(alphas, d, s)
    seg = _segments(eps, d_up, d_lo)
    c_low = np.minimum(_monotone_up(alphas, _c_lower(alphas, seg)), c_up)
    corners = np.concatenate([seg.a0, seg.a1])
    mu_lo = _mu_lower(
        np.concatenate([alphas, corners]),
        np.concatenate([c_low, np.minimum(_c_lower(corners, seg), _c_upper(corners, d, s))]),
    )
    if eps.size and eps[0] == 0.0 and d_up[0] == 0.0:
        # delta(0) = 0 certified: total variation 0, P = Q, the curve is 1 - alpha and mu = 0 exactly (the
        # grid check below would ask G_mu <= beta_lower within rounding of alpha = 1, where beta_lower is 0)
        mu_hi, why = 0.0, None
    else:
        mu_hi, why = _mu_upper(eps, d_up)
    details = dict(details)
    if why:
        details["mu_note"] = f"no finite mu-GDP statement certified: {why}"
    return TradeoffCurve(
        alphas,
        _beta_from_c(c_up, down=True),
        _beta_from_c(c_low, down=False, alpha=alphas),
        mu_lo,
        max(mu_hi, mu_lo),
        eps,
        d_lo,
        d_up,
        method,
        details,
    )


def _default_grid() -> np.ndarray:
    return np.unique(np.concatenate([np.linspace(0.0, 2.0, 17), np.geomspace(2.25, 64.0, 24)]))


def _refine(curve: TradeoffCurve, target: float, room: int) -> np.ndarray:
    """New epsilons: midpoints around the lines active where the gap exceeds ``target``."""
    eps = curve.epsilons
    gap = curve.beta_upper - curve.beta_lower
    bad = gap > target
    if not bad.any() or eps.size < 2 or room <= 0:
        return np.empty(0)
    a = curve.alpha[bad]
    d, s = _upper_lines(eps, curve.delta_upper)
    vals = d[None, :] + s[None, :] * a[:, None]
    j = np.argmin(vals, axis=1) % eps.size  # a mirror line's epsilon is its own
    # where the gap is mostly the accountant's own delta width, a finer grid cannot help
    j = np.unique(j[gap[bad] > 2.0 * (curve.delta_upper[j] - curve.delta_lower[j])])
    mids = []
    for i in j:
        if i > 0:
            mids.append(0.5 * (eps[i - 1] + eps[i]))
        if i + 1 < eps.size:
            mids.append(0.5 * (eps[i] + eps[i + 1]))
    new = np.setdiff1d(np.unique(mids), eps)
    if new.size > room:  # spread the budget over the whole curve
        new = new[np.linspace(0, new.size - 1, room).astype(int)]
    return new


def tradeoff_curve(
    source, *, epsilons=None, alphas=None, max_gap: float = 2e-3, max_points: int = 400, rounds: int = 4
) -> TradeoffCurve:
    """The certified f-DP trade-off curve of ``source`` (module docstring for what is certified).

    ``source``: a composed accountant whose ``delta`` answers are bounds (``kind == "bound"``), or
    the ``Bounds`` an accountant returned for ``delta(epsilons)`` (then ``epsilons`` is required
    and no refinement happens). ``alphas``: where the curves are reported (default
    ``DEFAULT_ALPHAS``, 131 points dense near 0). ``epsilons``: the starting grid (default 0..2 in
    steps of 1/8 and 24 points up to 64); for an accountant it is refined, in at most ``rounds``
    batched ``delta`` queries and ``max_points`` epsilons, until ``beta_upper - beta_lower <=
    max_gap`` on ``alphas`` (``max_gap = 0`` or ``rounds = 0``: no refinement). The gap cannot fall
    below ``delta_upper - delta_lower``; ``details["max_gap"]`` reports what was reached.

    A ledger of plain Gaussians is answered exactly (closed-form mu-GDP, Dong, Roth, Su 2022
    Cor. 2.13 / 3.3); so is an empty ledger (the identity trade-off ``1 - alpha``).
    """
    from .accountants.base import Accountant

    a = DEFAULT_ALPHAS.copy() if alphas is None else np.unique(_check_alphas("alphas", alphas))
    max_gap = float(max_gap)
    if not math.isfinite(max_gap) or max_gap < 0:
        raise ValueError(f"max_gap must be a finite number >= 0, got {max_gap!r}")
    if isinstance(max_points, bool) or not isinstance(max_points, (int, np.integer)) or max_points < 2:
        raise ValueError(f"max_points must be an integer >= 2, got {max_points!r}")
    if isinstance(rounds, bool) or not isinstance(rounds, (int, np.integer)) or rounds < 0:
        raise ValueError(f"rounds must be an integer >= 0, got {rounds!r}")
    if isinstance(source, Bounds):
        if epsilons is None:
            raise ValueError("epsilons must be given with a Bounds source (the epsilons its delta answers are for)")
        eps = check_real_array("epsilons", epsilons, low=0.0).reshape(-1)
        lo, up = _bounds_arrays(source, eps.shape)
        ok = np.isfinite(eps) & (eps <= _EPS_CAP)
        if not ok.any():
            raise ValueError("epsilons must contain a finite value <= 700")
        return _from_grid(eps[ok], lo[ok], up[ok], a, "given delta bounds", {"source": "Bounds"})
    if not isinstance(source, Accountant):
        raise ValueError(f"source must be a tightdp accountant or a delta Bounds, got {type(source).__name__}")
    if not source.ledger:
        one = np.clip(1.0 - a, 0.0, 1.0)
        return TradeoffCurve(
            a,
            one,
            one,
            0.0,
            0.0,
            np.empty(0),
            np.empty(0),
            np.empty(0),
            "nothing composed",
            {"max_gap": 0.0, "mu_exact": 0.0},
        )  # G_0(a) = 1 - a
    mu = _gaussian_ledger_mu(source)
    if mu is not None:
        out = _closed_form(mu, a)
        return TradeoffCurve(
            out.alpha,
            out.beta_lower,
            out.beta_upper,
            out.mu_lower,
            out.mu_upper,
            out.epsilons,
            out.delta_lower,
            out.delta_upper,
            out.method,
            {**out.details, "max_gap": out.max_gap, "accountant": source.name},
        )
    if source.kind != "bound":
        raise ValueError(f"source: accountant {source.name!r} gives approximations, not certified delta bounds")
    eps = _default_grid() if epsilons is None else np.unique(check_real_array("epsilons", epsilons, low=0.0))
    kinks = getattr(source, "_curve_kinks", None)
    kinks = kinks(_EPS_CAP, max_points // 2) if epsilons is None and kinks is not None else None
    if kinks is not None:  # an atoms-only ledger: delta at its kinks makes the curve exact
        eps = np.concatenate([eps, kinks])
    eps = eps[np.isfinite(eps) & (eps <= _EPS_CAP)]
    if eps.size == 0:
        raise ValueError("epsilons must contain a finite value <= 700")
    eps = np.unique(np.concatenate([[0.0], eps]))
    source = _absolute_slack_twin(source, max_gap)
    lo, up = _bounds_arrays(source.delta(eps.tolist()), eps.shape)
    queries = 1
    # past the grid's last epsilon the curves can be apart by about delta there: extend the grid until that
    # is far below the target (k = 1e6 DP-SGD steps have delta(64) = 0.92: the default grid left a gap of 0.92)
    negligible = 1e-3 * max_gap if max_gap > 0 else 1e-12
    while up[-1] > negligible and eps[-1] < _EPS_CAP and queries <= rounds:
        new = np.geomspace(max(eps[-1], 1.0), min(_EPS_CAP, 4.0 * max(eps[-1], 1.0)), 13)[1:]
        nlo, nup = _bounds_arrays(source.delta(new.tolist()), new.shape)
        queries += 1
        eps, lo, up = np.concatenate([eps, new]), np.concatenate([lo, nlo]), np.concatenate([up, nup])
    while True:
        curve = _from_grid(
            eps, lo, up, a, f"{source.name}: certified delta(eps) on {eps.size} epsilons", {"accountant": source.name}
        )
        new = _refine(curve, max_gap, min(max_points - eps.size, 4 * eps.size)) if queries <= rounds else np.empty(0)
        if new.size == 0:
            break
        nlo, nup = _bounds_arrays(source.delta(new.tolist()), new.shape)
        queries += 1
        eps, lo, up = np.concatenate([eps, new]), np.concatenate([lo, nlo]), np.concatenate([up, nup])
        o = np.argsort(eps)
        eps, lo, up = eps[o], lo[o], up[o]
    details = {
        **dict(curve.details),
        "max_gap": curve.max_gap,
        "delta_queries": queries,
        "target_gap": max_gap,
        "reached": bool(curve.max_gap <= max_gap),
    }
    if not details["reached"]:
        width = float(np.max(curve.delta_upper - curve.delta_lower))
        details["gap_note"] = (
            f"max gap {curve.max_gap:.3g} > target {max_gap:g}: the accountant's delta intervals "
            f"are up to {width:.3g} wide (a tighter accuracy option narrows them), and the grid "
            f"has {eps.size} epsilons after {queries} delta queries (max_points, rounds)"
        )
    return TradeoffCurve(
        curve.alpha,
        curve.beta_lower,
        curve.beta_upper,
        curve.mu_lower,
        curve.mu_upper,
        curve.epsilons,
        curve.delta_lower,
        curve.delta_upper,
        curve.method,
        details,
    )


def _absolute_slack_twin(source, max_gap: float):
    """``source`` with an absolute delta slack of ``1e-4 max_gap`` when it has a ``delta_error`` option
    left at its default (the same ledger and accuracy otherwise). The curves need every delta only to
    about ``max_gap``; a relative default answers each tiny delta again with tilted compositions (four
    passes for each of the default grid's epsilons in the 1e-100 region of 1000 DP-SGD steps)."""
    opts = source.options()
    if max_gap <= 0 or "delta_error" not in opts or opts["delta_error"] is not None:
        return source
    return type(source)(**{**opts, "delta_error": 1e-4 * max_gap}).compose(source.ledger)


def _bounds_arrays(b: Bounds, shape) -> tuple[np.ndarray, np.ndarray]:
    """Certified ``(lower, upper)`` delta arrays from an accountant's answer: a missing or
    non-finite lower end becomes 0, a missing or non-finite upper end 1 (both always true)."""
    if b.kind != "bound" or getattr(b, "quantity", "delta") != "delta":
        raise ValueError("source must be certified delta bounds (quantity 'delta', kind 'bound')")
    up = np.broadcast_to(np.asarray(1.0 if b.upper is None else b.upper, float), shape).copy()
    lo = np.broadcast_to(np.asarray(0.0 if b.lower is None else b.lower, float), shape).copy()
    up = np.where(np.isfinite(up), np.clip(up, 0.0, 1.0), 1.0)
    lo = np.where(np.isfinite(lo), np.clip(lo, 0.0, 1.0), 0.0)
    if np.any(lo > up):
        raise ValueError("source: a delta lower bound exceeds its upper bound")
    return lo, up


# ============================================================================== the report's lower curve
def tradeoff_lower_curve(epsilons, delta_upper, alphas=None) -> tuple[np.ndarray, np.ndarray]:
    """A certified lower bound on the f-DP trade-off curve beta(alpha) from certified upper delta(epsilon).

    An (eps, delta)-DP guarantee holding for both orders of the neighbouring pair
    gives, for every test of type-I error alpha, type-II error at least
    ``f_(eps,delta)(alpha) = max(0, 1 - delta - e^eps alpha, e^-eps (1 - delta - alpha))``
    (Dong, Roth, Su 2022, Prop. 2.5); a mechanism that is (eps, delta(eps))-DP for
    every eps has trade-off ``sup_eps f_(eps, delta(eps))`` (their Prop. 2.12;
    for mu-GDP exactly ``Phi(Phi^-1(1 - alpha) - mu)``, Cor. 2.13). Taking the
    supremum over the finite set ``epsilons`` with *upper* bounds on delta can only
    lower each term, so the result is a certified lower bound on the true trade-off
    curve (the attacker's best test errs at least this often). Computed in TPR space
    (``1 - beta``) with a 16-ulp relative margin, then rounded down.

    ``epsilons`` >= 0 and ``delta_upper`` in [0, 1] are same-length arrays;
    ``alphas`` defaults to 201 points in [0, 1]. Returns ``(alphas, betas)``.
    """
    eps = check_real_array("epsilons", epsilons, low=0.0)
    dl = np.asarray(delta_upper, float)
    if dl.shape != eps.shape:
        raise ValueError(f"delta_upper must have the shape of epsilons {eps.shape}, got {dl.shape}")
    if eps.size == 0:
        raise ValueError("epsilons must not be empty")
    if not np.all(np.isfinite(dl)) or np.any(dl < 0) or np.any(dl > 1):
        raise ValueError("delta_upper must be finite numbers in [0, 1] (certified upper bounds on delta)")
    a = np.linspace(0.0, 1.0, 201) if alphas is None else check_real_array("alphas", alphas, low=0.0)
    if np.any(a > 1):
        raise ValueError("alphas must be in [0, 1]")
    eps, dl = eps.reshape(-1), dl.reshape(-1)
    keep = np.isfinite(eps) & (eps <= _EPS_CAP)  # leaving lines out keeps a lower bound
    if not keep.any():
        return a, np.zeros(np.shape(a))
    e, d_up, _ = _monotone(eps[keep], dl[keep], None)
    d, s = _upper_lines(e, d_up)
    flat = np.asarray(a, float).reshape(-1)
    return a, _beta_from_c(_c_upper(flat, d, s), down=True).reshape(np.shape(a))


def tradeoff_from_accountant(accountant, epsilons=None, alphas=None) -> tuple[np.ndarray, np.ndarray]:
    """``tradeoff_lower_curve`` from a composed accountant's certified upper delta(epsilon).

    ``epsilons`` defaults to 120 points in [0, 40] (denser near 0). Entries whose
    upper delta is not certified (missing or not finite) are left out, which keeps
    the curve a lower bound. Needs an accountant whose ``delta`` answers are bounds.
    """
    eps = (
        np.concatenate([np.linspace(0.0, 4.0, 60, endpoint=False), np.geomspace(4.0, 40.0, 60)])
        if epsilons is None
        else check_real_array("epsilons", epsilons, low=0.0)
    )
    b = accountant.delta(eps.tolist())
    if b.kind != "bound":
        raise ValueError(f"accountant {accountant.name!r} gives approximations, not certified delta bounds")
    up = np.asarray(b.upper, float).reshape(-1)
    ok = np.isfinite(up) & (up <= 1) & (up >= 0)
    if not ok.any():
        raise ValueError("no certified upper delta at any of the epsilons")
    return tradeoff_lower_curve(eps[ok], up[ok], alphas)


def _normal_tradeoff_for_tests(mu: float, alphas) -> np.ndarray:
    """Phi(Phi^-1(1 - alpha) - mu), the mu-GDP trade-off (Dong, Roth, Su 2022, Def. 2.7); for tests."""
    return ndtr(ndtri(1.0 - np.asarray(alphas, float)) - mu)

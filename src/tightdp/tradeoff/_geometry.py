"""The geometry behind the certified trade-off curves: the lines ``beta >= 1 - delta - e^eps alpha`` of a
delta(epsilon) curve, the witness segments of the lower curve, the mu-GDP interval, and the maps between
the c-space the curves are computed in and beta."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import overload

import numpy as np
from scipy.special import ndtr, ndtri

from .._types import ArrayLike, BoolArray, FloatArray, IntArray
from .._validation import check_real_array

_U = float(np.finfo(float).eps)  # 2.2e-16, one ulp at 1
#: Where the curves are reported by default: dense near 0 (the attack regime) and over [0, 1].
DEFAULT_ALPHAS = np.unique(np.concatenate([[0.0], np.geomspace(1e-6, 1e-2, 25), np.linspace(0.0, 1.0, 101)]))
#: Lines with e^eps beyond this overflow; leaving grid points out is safe for both curves.
_EPS_CAP = 700.0
_NEAR = 4  # witness segments used on each side of an alpha
_LOWER_REL = 16 * _U  # relative margin on the lower curve's lines (c-space)
_UPPER_REL = 1e-9  # relative margin on the upper curve's chords (c-space)


# ============================================================================== lines and intervals
@overload
def _monotone(eps: FloatArray, d_up: FloatArray, d_lo: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]: ...
@overload
def _monotone(eps: FloatArray, d_up: FloatArray, d_lo: None) -> tuple[FloatArray, FloatArray, None]: ...
def _monotone(
    eps: FloatArray, d_up: FloatArray, d_lo: FloatArray | None
) -> tuple[FloatArray, FloatArray, FloatArray | None]:
    """Sort by eps; tighten with monotonicity (delta is non-increasing in eps): an upper bound at
    eps_j bounds delta at every eps_i >= eps_j, a lower bound at eps_j every eps_i <= eps_j."""
    order = np.argsort(eps, kind="stable")
    eps, d_up = eps[order], np.minimum.accumulate(d_up[order])
    if d_lo is not None:
        d_lo = np.maximum.accumulate(d_lo[order][::-1])[::-1]
    return eps, d_up, d_lo


def _upper_lines(eps: FloatArray, d_up: FloatArray) -> tuple[FloatArray, FloatArray]:
    """The lower curve's lines in TPR space ``c = 1 - beta``: ``c <= D + S a`` for every line.

    ``1 - delta - e^eps a`` becomes ``D = delta, S = e^eps``; its mirror ``e^-eps (1 - delta - a)``
    becomes ``D = -expm1(-eps) + e^-eps delta, S = e^-eps``; ``beta >= 0`` is ``D = 1, S = 0``.
    """
    s = np.exp(eps)
    si = np.exp(-eps)
    d = np.concatenate([d_up, -np.expm1(-eps) + si * d_up, [1.0]])
    return d, np.concatenate([s, si, [0.0]])


def _intervals(dq: FloatArray, sq: FloatArray, d: FloatArray, s: FloatArray) -> tuple[FloatArray, FloatArray]:
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


def _c_upper(alpha: FloatArray, d: FloatArray, s: FloatArray) -> FloatArray:
    """``1 - beta_lower``: the best attack's TPR is at most this (rounded up, at most 1)."""
    c = np.min(d[None, :] + s[None, :] * alpha[:, None], axis=1)
    result: FloatArray = np.minimum(1.0, c * (1.0 + _LOWER_REL) + 1e-300)
    return result


# ============================================================================== witness segments
@dataclass(frozen=True)
class _Segments:
    """Witness segments in (alpha, c = 1 - beta) space: from ``(a0, c0)`` to ``(a1, c1)``, ``a0 <= a1``;
    each holds a point on or below the concave curve ``c = 1 - f``."""

    a0: FloatArray
    c0: FloatArray
    a1: FloatArray
    c1: FloatArray


def _segments(eps: FloatArray, d_up: FloatArray, d_lo: FloatArray) -> _Segments:
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


def _chord(al: FloatArray, cl: FloatArray, ar: FloatArray, cr: FloatArray, x: FloatArray) -> FloatArray:
    """The chord's value at ``x`` (``al <= x <= ar``); both values when the two points sit at ``x``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        v = cl + (x - al) * (cr - cl) / (ar - al)
    out: FloatArray = np.where(ar > al, v, np.minimum(cl, cr))
    return out


_Piece = tuple[FloatArray, FloatArray, FloatArray, FloatArray]


def _pair_value(L: _Piece, R: _Piece, x: FloatArray) -> FloatArray:
    """Worst chord value at ``x`` over the corners of a left piece ``L`` and right piece ``R``
    (each ``(a0, c0, a1, c1)`` arrays broadcastable with ``x``)."""
    la0, lc0, la1, lc1 = L
    ra0, rc0, ra1, rc1 = R
    out: FloatArray = np.minimum(
        np.minimum(_chord(la0, lc0, ra0, rc0, x), _chord(la0, lc0, ra1, rc1, x)),
        np.minimum(_chord(la1, lc1, ra0, rc0, x), _chord(la1, lc1, ra1, rc1, x)),
    )
    return out


def _c_lower(alpha: FloatArray, seg: _Segments) -> FloatArray:
    """``1 - beta_upper``: a certified lower bound on the best attack's TPR (see the module docstring)."""
    out = np.empty(alpha.shape)
    for start in range(0, alpha.size, 256):  # bounded memory: (256, segments, K, K)
        out[start : start + 256] = _c_lower_block(alpha[start : start + 256], seg)
    return np.clip(out * (1.0 - _UPPER_REL), 0.0, 1.0)


def _c_lower_block(x: FloatArray, seg: _Segments) -> FloatArray:
    a0, c0, a1, c1 = seg.a0, seg.c0, seg.a1, seg.c1
    X = x[:, None]
    left = a1[None, :] <= X
    right = a0[None, :] >= X
    amb = ~left & ~right
    n = a0.size
    k = min(_NEAR, n)

    def nearest(mask: BoolArray, key: FloatArray) -> tuple[IntArray, BoolArray]:
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
    sure: FloatArray = pv.max(axis=(1, 2))

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
    result: FloatArray = np.maximum(sure, bound.max(axis=1))
    return result


# ============================================================================== mu-GDP
def _mu_upper(eps: FloatArray, d_up: FloatArray) -> tuple[float, str | None]:
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


def _mu_lower(alpha: FloatArray, c_low: FloatArray) -> float:
    """Largest ``Phi^-1(c_low(a)) - Phi^-1(a)`` (the curve's TPR lower bound forces mu at least this)."""
    ok = (alpha > 0) & (alpha < 1) & (c_low > 0) & (c_low < 1)
    if not ok.any():
        return 0.0
    z1, z2 = ndtri(c_low[ok]), ndtri(alpha[ok])
    r = z1 - z2 - 1e-12 * (np.abs(z1) + np.abs(z2)) - 1e-15
    return float(max(0.0, np.max(r)))


def _monotone_up(a: FloatArray, c_low: FloatArray) -> FloatArray:
    """The best TPR is non-decreasing in the FPR, so a lower bound at ``a'`` holds at every ``a >= a'``:
    replace ``c_low`` by its running maximum over the sorted ``a``."""
    order = np.argsort(a, kind="stable")
    out = np.empty_like(c_low)
    out[order] = np.maximum.accumulate(c_low[order])
    return out


def _beta_from_c(c: FloatArray, *, down: bool, alpha: FloatArray | None = None) -> FloatArray:
    """``1 - c`` rounded to the safe side (``1 - c`` is exact to half an ulp of 1). An upper curve is
    also capped by ``1 - alpha`` (every trade-off function is, Dong, Roth, Su 2022 Prop. 2.2) and is
    0 at ``alpha = 1``."""
    if down:
        return np.clip(1.0 - c - _U, 0.0, 1.0)
    b = 1.0 - c + _U
    if alpha is not None:
        b = np.where(alpha >= 1.0, 0.0, np.minimum(b, 1.0 - alpha + _U))
    return np.clip(b, 0.0, 1.0)


def _check_alphas(name: str, alphas: ArrayLike) -> FloatArray:
    a = np.atleast_1d(check_real_array(name, alphas, low=0.0)).astype(float)
    if a.size == 0:
        raise ValueError(f"{name} must not be empty")
    if np.any(a > 1):
        raise ValueError(f"{name} must be in [0, 1], got {float(np.max(a))!r}")
    result: FloatArray = a
    return result


def _gdp_c(a: FloatArray, mu: float, *, up: bool) -> FloatArray:
    """``1 - G_mu(a) = Phi(Phi^-1(a) + mu)`` with a relative margin (``up``: rounded up)."""
    with np.errstate(divide="ignore"):
        z = np.where(a <= 0.5, ndtri(a), -ndtri(1.0 - a))  # 1 - a is exact for a >= 0.5
        c = ndtr(z + mu)
    c = c * (1.0 + 1e-9) + 1e-300 if up else c * (1.0 - 1e-9)
    return np.clip(np.where(a >= 1.0, 1.0, np.where(a <= 0.0, 0.0, c)), 0.0, 1.0)

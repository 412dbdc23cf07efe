"""Small numerical helpers shared by the core (kept free of scipy's array-API dispatch overhead)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import overload

import numpy as np
import numpy.typing as npt

from ._caches import clear_caches  # the registry lives in _caches: this module imports no engine module
from .errors import PrecisionError  # a leaf module, like _caches

__all__ = ["bisect_boundary", "clear_caches", "falling_index", "falling_root", "geometric_suffix", "logsumexp"]

_U = float(np.finfo(float).eps) / 2

#: ``tightdp._types``' aliases spelt out: this module imports only ``_caches`` and ``errors`` (``tests/core/test_layout.py``)
FloatArray = npt.NDArray[np.float64]
ArrayLike = npt.ArrayLike


@overload
def logsumexp(a: ArrayLike, axis: None = None) -> float: ...
@overload
def logsumexp(a: ArrayLike, axis: int) -> FloatArray: ...
def logsumexp(a: ArrayLike, axis: int | None = None) -> float | FloatArray:
    """``log(sum(exp(a)))`` along ``axis`` without overflow (``-inf`` where every term is ``-inf``).

    Same values as ``scipy.special.logsumexp`` for real input; it is called in
    the inner loops of the engine, where scipy's per-call dispatch costs more
    than the arithmetic.
    """
    arr: FloatArray = np.asarray(a, float)
    m = np.max(arr, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        out = np.log(np.sum(np.exp(arr - m), axis=axis, keepdims=True)) + m
    if axis is None:
        return float(out.reshape(()))
    squeezed: FloatArray = np.squeeze(out, axis=axis)
    return squeezed


def geometric_suffix(a: ArrayLike, r: float) -> FloatArray:
    """``S`` with ``S_j = a_j + r S_(j+1)`` (``S_(n-1) = a_(n-1)``): ``S_j = sum_(i >= j) a_i r^(i - j)``,
    for non-negative ``a`` and ``0 <= r <= 1``, in O(n) numpy work (no scipy.signal: its import costs
    seconds of a cold start).

    Blocks of ``L`` entries with ``r^L >= e^-30``: inside a block ``S_j = T_j / r^(j - s) +
    r^(e - j) S_e`` with ``T_j = sum_(i >= j) a_i r^(i - s)`` a reversed cumulative sum (block
    ``[s, e)``), so no power under- or overflows (terms below about 1e-295 may underflow: a loss
    below 1e-290 of any sum). Rounding: each entry's sum has at most ``n`` non-negative terms, each
    with ``O(1) u`` relative error from the powers and the division, so ``S_j`` is within
    ``(n + 4) u S_j`` (callers charge ``3 n u`` or more).
    """
    v: FloatArray = np.asarray(a, float)
    n = v.size
    out: FloatArray = np.empty(n)
    if n == 0:
        return out
    if r <= 0.0:  # e^-h underflowed (a mesh above about 745): every carried term is below 1e-300 of a_(j+1)
        return v.copy()
    lr = -math.log(r) if r < 1.0 else 0.0
    block = n if lr == 0.0 else max(1, min(n, int(30.0 / lr)))
    powers = r ** np.arange(block, dtype=float)  # r^0 .. r^(L-1)
    carry = 0.0
    end = n
    while end > 0:
        start = max(0, end - block)
        m = end - start
        p = powers[:m]
        t = np.cumsum((v[start:end] * p)[::-1])[::-1]
        s = t / p
        if carry:
            s += carry * (r * p[::-1])  # r^(end - j) for j = start .. end-1
        out[start:end] = s
        carry = float(out[start])
        end = start
    return out


def falling_root(
    g: Callable[[float], float], lo: float, hi: float, *, xtol: float, rtol: float = 4.0 * _U, max_iter: int = 500
) -> float:
    """A point ``x`` in ``(lo, hi]`` with ``g(x) <= 0``, within ``xtol + rtol |x|`` of where ``g`` crosses 0,
    for a non-increasing ``g`` with ``g(lo) > 0 >= g(hi)`` (the caller checks both).

    Brent's method (``zeroin``, Brent 1973, ch. 4: inverse quadratic interpolation, secant and bisection steps
    on a bracket that never loses the root), stopped when the bracket ``[b, c]`` is at most
    ``xtol + rtol |b|`` wide. Unlike ``scipy.optimize.brentq``, which returns its best estimate ``b`` (within the
    tolerance on either side of the root), the answer is the bracket's end where ``g`` was evaluated and found
    ``<= 0``: for an upper bound the safe side, certified by that evaluation. (Written out here because the
    import of scipy.optimize costs a cold start 0.15-0.4 s: more than a whole long-horizon epsilon.)

    Raises
    ------
    PrecisionError
        If ``g`` returns NaN anywhere it is evaluated (NaN is neither side of 0: treating it as one would
        certify a point nothing was computed at).
    """
    raw = g

    def checked(x: float) -> float:
        v = raw(x)
        if v != v:
            raise PrecisionError(
                f"root finding: the function is NaN at {x!r} (bracket [{lo!r}, {hi!r}]); "
                "no bound can be certified from it"
            )
        return v

    g = checked
    a, b = lo, hi
    fa, fb = g(a), g(b)
    c, fc = a, fa
    d = e = b - a
    probed = False
    for _ in range(max_iter):
        if (fb > 0) == (fc > 0):  # c on b's side: take the other end of the bracket back
            c, fc = a, fa
            d = e = b - a
        if abs(fc) < abs(fb):
            a, b, c = b, c, b
            fa, fb, fc = fb, fc, fb
        tol1 = 0.5 * (rtol * abs(b) + xtol)
        xm = 0.5 * (c - b)
        if abs(xm) <= tol1:
            break
        if fb == 0:  # an exact zero: one minimal step across towards c closes the bracket, unless g = 0
            # on a whole stretch (then bisect towards its left end)
            d = e = math.copysign(tol1, xm) if not probed else xm
            probed = not probed
        elif abs(e) >= tol1 and abs(fa) > abs(fb):
            s = fb / fa
            if a == c:  # secant
                p, q = 2.0 * xm * s, 1.0 - s
            else:  # inverse quadratic interpolation
                q, r = fa / fc, fb / fc
                p = s * (2.0 * xm * q * (q - r) - (b - a) * (r - 1.0))
                q = (q - 1.0) * (r - 1.0) * (s - 1.0)
            if p > 0:
                q = -q
            p = abs(p)
            if 2.0 * p < min(3.0 * xm * q - abs(tol1 * q), abs(e * q)):
                e, d = d, p / q
            else:
                d = e = xm
        else:
            d = e = xm
        a, fa = b, fb
        b = b + d if abs(d) > tol1 else b + math.copysign(tol1, xm)
        fb = g(b)
    else:  # Brent's steps did not close the bracket (never seen): plain bisection does, on any g
        if (fb > 0) == (fc > 0):
            c, fc = a, fa
        lo_, hi_ = (b, c) if fb > 0 else (c, b)
        return bisect_boundary(
            lambda x: g(x) <= 0, lo_, hi_, width=lambda lo, hi: 0.5 * (rtol * abs(hi) + xtol), max_iter=_BISECT_MAX
        )[1]
    # the crossing lies between b and c; the one where g <= 0 is the answer
    return b if fb <= 0 else c


#: more halvings than any bracket of floats admits (about 2100 from the largest float to the smallest)
_BISECT_MAX = 1 << 12


def bisect_boundary(
    ok: Callable[[float], bool],
    lo: float,
    hi: float,
    *,
    width: Callable[[float, float], float] | None = None,
    max_iter: int = _BISECT_MAX,
) -> tuple[float, float]:
    """``(lo, hi)`` narrowed by bisection around the boundary of a monotone predicate: ``ok`` false at ``lo``,
    true at ``hi`` (the caller's invariant; neither end is evaluated here).

    Each step halves the bracket at ``mid = 0.5 (lo + hi)`` and keeps the side ``ok`` decides; it stops after
    ``max_iter`` steps, when ``mid`` no longer separates the ends (adjacent floats), or when
    ``hi - lo <= width(lo, hi)``. The end to use is the caller's choice: ``hi`` where ``ok`` was seen to hold
    (the safe side when ``ok`` means "certified"), ``lo`` where it was seen to fail. A deterministic ``ok``
    gives the same bracket as any loop that makes the same halvings (a non-separating ``mid`` would leave it
    unchanged). ``falling_root`` is the faster finder for a real-valued ``g``; this one serves predicates.
    """
    for _ in range(max_iter):
        if width is not None and hi - lo <= width(lo, hi):
            break
        mid = 0.5 * (lo + hi)
        if not lo < mid < hi:
            break
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return lo, hi


def falling_index(ok: Callable[[int], bool], lo: int, hi: int) -> int:
    """The smallest index ``i`` in ``(lo, hi]`` where the monotone predicate ``ok`` holds, given that it fails at
    ``lo`` and holds at ``hi`` (the caller's invariant; neither end is evaluated here): integer bisection, at most
    ``ceil(log2(hi - lo))`` evaluations (the discrete counterpart of ``falling_root``, e.g. for grid cells)."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi

"""Small numerical helpers shared by the core (kept free of scipy's array-API dispatch overhead)."""

from __future__ import annotations

import math

import numpy as np

from ._caches import clear_caches  # the registry lives in _caches: this module imports no engine module

__all__ = ["clear_caches", "geometric_suffix", "logsumexp"]


def logsumexp(a, axis=None):
    """``log(sum(exp(a)))`` along ``axis`` without overflow (``-inf`` where every term is ``-inf``).

    Same values as ``scipy.special.logsumexp`` for real input; it is called in
    the inner loops of the engine, where scipy's per-call dispatch costs more
    than the arithmetic.
    """
    a = np.asarray(a, float)
    m = np.max(a, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        out = np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)) + m
    if axis is None:
        return float(out.reshape(()))
    return np.squeeze(out, axis=axis)


def geometric_suffix(a: np.ndarray, r: float) -> np.ndarray:
    """``S`` with ``S_j = a_j + r S_(j+1)`` (``S_(n-1) = a_(n-1)``): ``S_j = sum_(i >= j) a_i r^(i - j)``,
    for non-negative ``a`` and ``0 < r <= 1``, in O(n) numpy work (no scipy.signal: its import costs
    seconds of a cold start).

    Blocks of ``L`` entries with ``r^L >= e^-30``: inside a block ``S_j = T_j / r^(j - s) +
    r^(e - j) S_e`` with ``T_j = sum_(i >= j) a_i r^(i - s)`` a reversed cumulative sum (block
    ``[s, e)``), so no power under- or overflows (terms below about 1e-295 may underflow: a loss
    below 1e-290 of any sum). Rounding: each entry's sum has at most ``n`` non-negative terms, each
    with ``O(1) u`` relative error from the powers and the division, so ``S_j`` is within
    ``(n + 4) u S_j`` (callers charge ``3 n u`` or more).
    """
    a = np.asarray(a, float)
    n = a.size
    out = np.empty(n)
    if n == 0:
        return out
    lr = -math.log(r) if r < 1.0 else 0.0
    block = n if lr == 0.0 else max(1, min(n, int(30.0 / lr)))
    powers = r ** np.arange(block, dtype=float)  # r^0 .. r^(L-1)
    carry = 0.0
    end = n
    while end > 0:
        start = max(0, end - block)
        m = end - start
        p = powers[:m]
        t = np.cumsum((a[start:end] * p)[::-1])[::-1]
        s = t / p
        if carry:
            s += carry * (r * p[::-1])  # r^(end - j) for j = start .. end-1
        out[start:end] = s
        carry = float(out[start])
        end = start
    return out


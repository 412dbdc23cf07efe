"""Small numerical helpers shared by the core (kept free of scipy's array-API dispatch overhead)."""

from __future__ import annotations

import numpy as np

from ._caches import clear_caches  # the registry lives in _caches: this module imports no engine module

__all__ = ["clear_caches", "logsumexp"]


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

"""Small numerical helpers shared by the core (kept free of scipy's array-API dispatch overhead)."""

from __future__ import annotations

import numpy as np

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


def clear_caches() -> None:
    """Empty every process-wide memo of the engine (discretisations, dominance cells, RDP/Edgeworth terms).

    The caches only save time when the same mechanism is accounted again; they
    can hold grids of up to about a million points each. Benchmarks call this
    between repetitions so that a repeated call does the whole computation.
    """
    from .accountants.edgeworth import _mechanism_moments
    from .accountants.rdp import _rdp_curve_cached
    from .pld.discretise import _blocks_cached, discretise
    from .pld.dominance import _cells

    for fn in (discretise, _blocks_cached, _cells, _mechanism_moments, _rdp_curve_cached):
        fn.cache_clear()

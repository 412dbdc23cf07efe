"""Weighted block noise splitting for a ``b``-banded strategy: each row's noise is shared among the blocks whose
row windows cover it in proportion to their signal there, not in equal parts.

Cut the steps into blocks ``B_m = [m L, (m + 1) L)``. A ``b``-banded lower-triangular ``C`` has ``C[i, s] = 0``
unless ``s <= i < s + b``, so block ``m``'s columns live in the row window ``W_m = [m L, m L + L + b - 1)``, at
offsets ``t = i - m L`` in ``[0, L + b - 1)``. Take weights ``w(t) > 0`` whose sum over each residue class
``t = r (mod L)`` is at most 1: the windows covering a row ``i`` are those of the blocks ``m`` with
``i - m L`` in range, one offset of each class member, so the weights a row gives out sum to at most 1.

**Claim.** With the gradients fixed (the reduction to non-adaptive gradients of ``tightdp.matrix.accounting``'s
module docstring), the release ``Y = C X + Z``, ``Z ~ N(0, sigma^2 I)`` row-wise, is a post-processing of the
releases ``Y_m = C[:, B_m] X[B_m] + Z_m``, independent given the data, with ``Z_m`` Gaussian of row variances
``sigma^2 w(i - m L)`` on ``W_m`` (zero elsewhere). *Proof.* Write ``Z = sum_m Z_m + Z_0`` with independent
parts; the row variances left for ``Z_0``, ``sigma^2 (1 - sum_m w(i - m L))``, are non-negative by the class
constraint. Then ``Y = sum_m Y_m + Z_0`` with ``Z_0`` independent of the data.

Whitening ``Y_m`` on its window by ``w^(-1/2)`` (invertible) leaves noise ``N(0, sigma^2 I)`` and a record's
signal ``sum_(s in S) w^(-1/2) C[:, s] g_s`` for its participations ``S`` in the block, of norm at most
``|S| A_m`` (triangle inequality, ``||g_s|| <= 1``), with ``A_m = max_(s in B_m) ||w^(-1/2) C[:, s]||``. Equal
weights ``1 / k``, ``k = 1 + ceil((b - 1) / L)``, are the plain block splitting (noise ``sigma / sqrt(k)``,
column norms); the samplers' arguments from there on (Poisson domination, mixtures over the participation
count, random allocation of blocks) use only "noise ``sigma``, shift at most ``|S| A_m``", so they hold
unchanged with ``A_m``.

**The weights** only decide how tight ``A_m`` is, never whether it holds: the minimax
``min_w max_s sum_j a_j / w(s + j)`` over a block's columns ``s`` (``a_j`` the largest squared entry on the
``j``-th subdiagonal) is convex; for column weights ``lambda`` its inner problem has the closed form
``w(t) ~ sqrt(beta_t)`` within each class, ``beta_t = sum_s lambda_s a_(t - s)``, and ``lambda`` follows a
multiplicative ascent (``_weights``; not above ``_MAX_SEARCH``). Equal weights are kept when they give a smaller
largest ``A_m``.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from .._caches import register as _register_cache
from .._types import FloatArray
from .strategies import Strategy

__all__ = ["weighted_block_norms"]

_U = float(np.finfo(float).eps) / 2
_ITERATIONS = 400  # of the dual ascent; it stalls within a few hundred at the bands and lengths met
#: the largest ``length * bands`` whose weights are searched (each ascent step costs that much; beyond, equal
#: shares: a dense strategy of 1000 bands at blocks of 512 steps took 2.4 s)
_MAX_SEARCH = 1 << 17


def _envelope(strategy: Strategy, n: int, bands: int) -> FloatArray:
    """``a_j``: the largest squared entry on the ``j``-th subdiagonal of ``C``, ``j < bands`` (a Toeplitz ``C``:
    ``c_j^2``)."""
    coefs = strategy.toeplitz_coefs(n)
    if coefs is not None:
        a = np.zeros(bands)
        m = min(bands, coefs.size)
        a[:m] = np.asarray(coefs[:m], dtype=float) ** 2
        return a
    c = strategy.matrix(n)
    return np.array([float(np.max(np.diagonal(c, -j) ** 2)) if j < n else 0.0 for j in range(bands)])


def _feasible(w: FloatArray, length: int) -> FloatArray:
    """``w`` scaled down per residue class so that each class's exact sum is at most 1 (``math.fsum`` is correctly
    rounded, so a computed sum at most ``1 - 4u`` leaves the exact sum below 1)."""
    cls = np.arange(w.size) % length
    out = w.copy()
    for r in range(length):
        members = cls == r
        total = math.fsum(out[members].tolist())
        if total > 1.0 - 4.0 * _U:
            out[members] = out[members] / total * (1.0 - 8.0 * _U * (1 + int(members.sum())))
    return out


def _weights(a: FloatArray, length: int) -> FloatArray:
    """Weights ``w(t) > 0`` on the offsets ``[0, length + b - 1)``, feasible (``_feasible``), chosen by dual ascent
    on the column weights ``lambda`` (module docstring); the best primal value seen is kept."""
    b = a.size
    size = length + b - 1
    idx = np.arange(length)[:, None] + np.arange(b)[None, :]
    cls = np.arange(size) % length
    floor = 1e-30 * float(a.max())  # every offset keeps some weight: no division by zero below

    def closed_form(lam: FloatArray) -> FloatArray:
        beta = np.full(size, floor)
        np.add.at(beta, idx, lam[:, None] * a[None, :])
        root = np.sqrt(beta)
        return np.asarray(root / np.bincount(cls, root, minlength=length)[cls], dtype=float)

    lam = np.full(length, 1.0 / length)
    best, best_w = math.inf, closed_form(lam)
    stall = 0
    for it in range(_ITERATIONS):
        w = closed_form(lam)
        v = (a[None, :] / w[idx]).sum(axis=1)
        top = float(v.max())
        if top < best * (1.0 - 1e-6):
            best, best_w, stall = top, w, 0
        else:
            stall += 1
            if stall > 40:
                break
        lam = lam * np.exp(2.5 * (v / top - 1.0) / math.sqrt(it + 1.0))
        lam /= lam.sum()
    return _feasible(best_w, length)


def _block_norms(strategy: Strategy, n: int, bands: int, length: int, w: FloatArray) -> FloatArray:
    """``A_m`` for every block under weights ``w`` (module docstring), rounded up: each square is a sum of at most
    ``bands`` positive terms, each within ``2u`` (a square and a division), so the factor ``1 + 2 (b + 3) u``
    covers the sum's rounding; the root adds ``2u``."""
    blocks = -(-n // length)
    coefs = strategy.toeplitz_coefs(n)
    out = np.empty(blocks)
    if coefs is not None:
        c2 = np.zeros(bands)
        m = min(bands, coefs.size)
        c2[:m] = np.asarray(coefs[:m], dtype=float) ** 2
        full: float | None = None  # the value of every block whose window the last row does not cut
        for blk in range(blocks):
            start = blk * length
            if start + length + bands - 1 <= n:
                if full is None:
                    full = _toeplitz_block(c2, w, start, length, n, bands)
                out[blk] = full
            else:
                out[blk] = _toeplitz_block(c2, w, start, length, n, bands)
    else:
        c = strategy.matrix(n)
        for blk in range(blocks):
            start = blk * length
            stop = min(start + length, n)
            rows = slice(start, min(start + length + bands - 1, n))
            sub = c[rows, start:stop] ** 2 / w[: rows.stop - start][:, None]
            out[blk] = float(sub.sum(axis=0).max())
    return np.asarray(np.sqrt(out * (1.0 + 2.0 * (bands + 3) * _U)) * (1.0 + 2.0 * _U), dtype=float)


def _toeplitz_block(c2: FloatArray, w: FloatArray, start: int, length: int, n: int, bands: int) -> float:
    """The squared ``A_m`` of the Toeplitz block starting at ``start`` (columns cut at the last row)."""
    best = 0.0
    for s in range(start, min(start + length, n)):
        rows = min(bands, n - s)
        best = max(best, float(np.sum(c2[:rows] / w[s - start : s - start + rows])))
    return best


@_register_cache
@lru_cache(maxsize=64)
def weighted_block_norms(strategy: Strategy, n: int, bands: int, length: int) -> FloatArray:
    """The weighted norms ``A_m`` of the blocks ``[m L, (m + 1) L)`` of a ``bands``-banded ``C`` (module
    docstring), each rounded up; read-only and memoised (calibration asks at many noises).

    Parameters
    ----------
    strategy : Strategy
        The strategy ``C``, ``bands``-banded.
    n : int
        Steps.
    bands : int
        The band count ``b``.
    length : int
        The block length ``L >= 1``.

    Returns
    -------
    numpy.ndarray
        ``ceil(n / L)`` norms: with noise ``sigma``, a record's shift in block ``m`` is at most ``|S| A_m``.

    Raises
    ------
    ValueError
        A non-positive ``length`` or ``bands``.
    """
    if length < 1 or bands < 1:
        raise ValueError(f"length and bands must be positive, got length={length}, bands={bands}")
    a = _envelope(strategy, n, bands)
    size = length + bands - 1
    parts = 1 + -(-(bands - 1) // length)
    equal = np.full(size, 1.0 / parts)
    candidates = [_block_norms(strategy, n, bands, length, _feasible(equal, length))]
    if a.max() > 0.0 and parts > 1 and length * bands <= _MAX_SEARCH:
        candidates.append(_block_norms(strategy, n, bands, length, _weights(a, length)))
    out = min(candidates, key=lambda x: float(x.max()))
    out.flags.writeable = False
    return out

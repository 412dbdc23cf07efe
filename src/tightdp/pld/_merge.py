"""The merge-to-the-grid sweeps behind ``pld.dominance.dominated``: upward (``merge_up``) and downward.

Merging outputs is a post-processing, so a pair built by these sweeps is dominated by the pair it merges
(Koskela et al. 2023, App. C.6); only the items' own masses and the ratios computed from them are used.
"""

from __future__ import annotations

import math

import numpy as np

from .._types import FloatArray, IntArray

__all__ = ["merge_up"]

#: A merged carry whose ratio falls short of its grid value by at most this factor (an atom sitting on a
#: grid point, off by the rounding of ``i * h`` and of its Q-mass) is placed on that grid point, not a mesh
#: below; ``dominated`` lowers every loss by ``_SNAP_LOSS`` more to pay for it. Without it, pure DP's atoms
#: lost a whole mesh per step in the lower bound (width growing like ``k h``, eight passes at k = 1e4).
_SNAP_TOL = 1e-12
_SNAP_LOSS = 2e-12  # >= log(1 + _SNAP_TOL) plus the rounding of the ratio test and of log(cp / cq)


def merge_up(
    P: FloatArray, Q: FloatArray, alpha: FloatArray, tol: float = 0.0, start: IntArray | None = None
) -> tuple[list[float], float, float, int]:
    """The upward merge-to-the-grid sweep on any increasing lattice of ratios ``alpha``.

    Item ``i`` (masses ``P[i], Q[i]``; by default cell ``i``, ratio in ``[alpha[i], alpha[i+1]]``) has
    likelihood ratio at least ``alpha[start[i] - 1]`` and at most ``alpha[start[i]]`` (``start[i] = i + 1``
    by default; an atom on grid point ``g`` has ``start = g``). Sweeping upwards, the carry (ratio below
    ``alpha[T]``) takes the fraction of the next items that brings its ratio to exactly ``alpha[T]``: a
    randomised merge of outputs, a post-processing, so the result is dominated; an item whose ratio is
    ``alpha[T]`` itself (an atom on the grid) is placed there on its own. Only the items' own masses
    are used. Returns the ``P``-masses at the targets (a list; ``Q = P / alpha``) and the final carry
    ``(cp, cq, T)``, whose ratio lies below ``alpha[T]``: the caller places it. ``tol``: ratios within a
    factor ``1 + tol`` of ``alpha[T]`` count as ``alpha[T]`` (the caller lowers every loss by
    ``log(1 + tol)`` more). Used by ``dominated`` (ratios ``e^(s_i)``) and by random allocation's ratio
    lattices.
    """
    n = P.size
    al = alpha.tolist()
    st = list(range(1, n + 1)) if start is None else np.asarray(start).tolist()
    pmf = [0.0] * alpha.size  # a Python list: this sequential sweep is the hot loop
    Pl, Ql = P.tolist(), Q.tolist()
    cp, cq, target = Pl[0], Ql[0], st[0]
    for pi, qi, si in zip(Pl[1:], Ql[1:], st[1:]):  # (zip, not indexing: this loop is the lower bound's cost)
        if pi <= 0.0 and qi <= 0.0:
            continue
        a = al[target]
        deficit = a * cq - cp  # >= 0: the carry's ratio is below alpha_T
        if deficit <= tol * cp:  # the carry reached alpha_T (up to tol): emit it there
            pmf[target] += cp
            cp, cq, target = pi, qi, si
            continue
        surplus = pi - a * qi  # >= 0: item i lies at or above alpha_T
        if surplus <= tol * pi:  # item i sits at alpha_T (an atom on the grid point): it stays there
            pmf[target] += pi
            continue
        if surplus > deficit:
            f = deficit / surplus
            pmf[target] += cp + f * pi
            cp, cq = (1.0 - f) * pi, (1.0 - f) * qi
            target = si
        else:
            cp, cq = cp + pi, cq + qi
    return pmf, cp, cq, target


def _grid_index_below(cp: float, cq: float, s: FloatArray, cap: int) -> int:
    """Index of the grid point of ``s`` at or below the loss ``log(cp / cq) + _SNAP_TOL`` (at most ``cap``;
    -1: below the grid, or no P-mass). The tolerance puts an atom that sits on a grid point up to
    rounding on that point (``dominated`` lowers every loss by ``_SNAP_LOSS`` to pay for it)."""
    if cq <= 0.0:
        return cap
    if cp <= 0.0:  # no P-mass to place (its loss would be -inf)
        return -1
    return min(cap, int(np.searchsorted(s, math.log(cp / cq) + _SNAP_TOL, side="right")) - 1)


def _merge_down(P: FloatArray, Q: FloatArray, start: IntArray | None, alpha: FloatArray, s: FloatArray) -> list[float]:
    """The downward merge-to-the-grid sweep of ``dominated(top_down=True)`` (P-masses at ``s``).

    The items are ``_merge_items``' (increasing ratio; cell ``i`` spans ``(s_i, s_(i+1)]``, an atom on
    grid point ``g`` has ``start = g``) swept from the top. The carry's ratio is at least
    ``alpha_T = e^(s_T)``; an item below, whose ratio is at most ``alpha_T``, gives the fraction of itself
    that brings the merged ratio down to exactly ``alpha_T``; the merged atom goes to ``s_T`` and the rest
    of the item carries on with its own lower grid point as target (a cell whose ratio is its upper edge's,
    up to rounding, aims there). An item at ``alpha_T`` itself stays there on its own. A carry found below
    its target by more than the rounding tolerance, and the last carry, go to the grid point at or below
    their ratio (never up).
    """
    n = P.size
    al = alpha.tolist()
    Pl, Ql = P.tolist(), Q.tolist()
    st = list(range(1, n + 1)) if start is None else np.asarray(start).tolist()
    pmf = [0.0] * s.size

    cp, cq, target = Pl[n - 1], Ql[n - 1], _aim_down(Pl[n - 1], Ql[n - 1], st[n - 1], al)
    for i in range(n - 2, -1, -1):
        pi, qi = Pl[i], Ql[i]
        if pi <= 0.0 and qi <= 0.0:
            continue
        a = al[target]
        surplus = cp - a * cq  # >= 0: the carry's ratio is at least alpha_T
        if surplus <= 0.0:  # the carry is at alpha_T, or below it by rounding: never round up beyond tol
            j = target if surplus >= -_SNAP_TOL * cp else _grid_index_below(cp, cq, s, target - 1)
            if j >= 0 and cp > 0.0:
                pmf[j] += cp
            cp, cq, target = pi, qi, _aim_down(pi, qi, st[i], al)
            continue
        deficit = a * qi - pi  # >= 0: item i lies at or below alpha_T
        if deficit <= _SNAP_TOL * pi:  # item i sits at alpha_T (an atom on the grid point): it stays there
            pmf[target] += pi
            continue
        if deficit > surplus:
            f = surplus / deficit
            pmf[target] += cp + f * pi
            cp, cq = (1.0 - f) * pi, (1.0 - f) * qi
            target = _aim_down(pi, qi, st[i], al)
        else:
            cp, cq = cp + pi, cq + qi
    if cp > 0.0:  # the last carry: ratio at least alpha_target (up to rounding), so s_target or below
        j = _grid_index_below(cp, cq, s, target)
        if j >= 0:
            pmf[j] += cp
    return pmf


def _aim_down(p: float, q: float, start: int, alpha: list[float]) -> int:
    """The grid point a downward carry beginning with an item aims at: the top of the item's ratio range
    (``start``) if its ratio is there up to rounding (an atom, or a cell whose mass sits at its upper
    edge), else the bottom (``start - 1``, a cell's lower edge)."""
    return start if p > 0.0 and p >= alpha[start] * q * (1.0 - _SNAP_TOL) else max(start - 1, 0)

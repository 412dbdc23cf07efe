"""The base of the discrete noises' exact privacy losses: ``_LatticeLoss``, a loss with countably many atoms
enumerated once (``_finish``: sorted losses, both sides' masses, their prefix and suffix sums, the errors carried),
its CDFs from the prefix sums and its cells for the dominance engine; equal losses share one enumeration
(``_SharedArrays``, a memo that ``tightdp.clear_caches()`` empties). The losses themselves are in
``_discrete_losses`` (the discrete Gaussian, its distributed sum, Skellam) and ``_atom_blocks`` (blocks of a
few-atom step).
"""

from __future__ import annotations

from abc import abstractmethod
from functools import cached_property
from typing import Any, NamedTuple

import numpy as np

from .._caches import register as _register_cache
from .._types import ArrayLike, BoolArray, FloatArray, IntArray
from ..losses import PrivacyLoss, split_errors
from ..losses._cells import _atom_cells

_U = float(np.finfo(float).eps) / 2

#: what a ``_LatticeLoss`` works from (``_finish``): losses, P- and Q-masses, their prefix sums (P, Q) and suffix
#: sums (P, Q), the atoms' relative mass error, their loss error and the mass outside the window
_Arrays = tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray, FloatArray, FloatArray, float, float, float]


def _finish(v: ArrayLike, pm: ArrayLike, qm: ArrayLike, atom_rel: float, l_err: float, tail: float) -> _Arrays:
    """The arrays a ``_LatticeLoss`` works from: atoms in increasing order of loss ``v`` with P- and Q-masses,
    their prefix and suffix sums, the atoms' relative mass error, their loss error and the outside mass."""
    va, pa, qa = (np.ascontiguousarray(t, dtype=float) for t in (v, pm, qm))
    cp, cq = np.cumsum(pa), np.cumsum(qa)
    sp, sq = np.cumsum(pa[::-1])[::-1], np.cumsum(qa[::-1])[::-1]
    for t in (va, pa, qa, cp, cq, sp, sq):
        t.flags.writeable = False
    return va, pa, qa, cp, cq, sp, sq, atom_rel, l_err, tail


class _SharedArrays:
    """The enumerated atoms of the last few lattice losses, shared by equal instances (a process-wide memo that
    ``tightdp.clear_caches()`` empties).

    An accountant asks the mechanism for its losses more than once per query (the support ceiling, the
    directions), and each ask builds a new, equal loss whose atoms would be enumerated again (for Skellam, one
    30-digit Bessel function per output). Only windows of at most ``_SHARED_MAX_ATOMS`` outputs are kept."""

    def __init__(self, maxsize: int) -> None:
        self._maxsize = maxsize
        self._memo: dict[_LatticeLoss, _Arrays] = {}
        self._hits = self._misses = 0

    def __call__(self, loss: _LatticeLoss) -> _Arrays:
        hit = self._memo.pop(loss, None)
        if hit is None:
            self._misses += 1
            hit = loss._enumerate()
            if hit[0].size > _SHARED_MAX_ATOMS:
                return hit
        else:
            self._hits += 1
        self._memo[loss] = hit  # most recent last
        while len(self._memo) > self._maxsize:
            del self._memo[next(iter(self._memo))]
        return hit

    def cache_clear(self) -> None:
        """Forget every kept enumeration."""
        self._memo.clear()
        self._hits = self._misses = 0

    def cache_info(self) -> _MemoInfo:
        """Hits, misses, capacity and entries kept (as ``functools.lru_cache``'s ``cache_info``)."""
        return _MemoInfo(self._hits, self._misses, self._maxsize, len(self._memo))


class _MemoInfo(NamedTuple):
    """``_SharedArrays.cache_info()``: the fields of ``functools.lru_cache``'s."""

    hits: int
    misses: int
    maxsize: int
    currsize: int


#: the most atoms an enumeration shared between equal losses may hold (about 56 MB)
_SHARED_MAX_ATOMS = 1_000_000
_shared_arrays = _register_cache(_SharedArrays(maxsize=4))


class _LatticeLoss(PrivacyLoss):
    """A privacy loss with countably many atoms, enumerated on a window of integer outputs (subclasses give
    ``_arrays``, built by ``_finish``): CDFs of both sides from prefix / suffix sums, cells by summing atoms
    (relative error ``atom_rel`` plus ``n u`` for ``n`` atoms), the window's outside mass at ``+inf`` for
    upper bounds only."""

    infinity_is_exact = False  # the window's outside mass, sent to +inf on the upper side only
    #: an l1 error of the masses on top of their relative error (the distributed discrete Gaussian's trimming)
    _l1 = 0.0

    @abstractmethod
    def _enumerate(self) -> _Arrays:
        """The enumerated atoms and their prefix / suffix sums (each subclass builds them with ``_finish``)."""

    @cached_property
    def _arrays(self) -> _Arrays:
        """``_enumerate()``, shared with equal losses (``_SharedArrays``)."""
        return _shared_arrays(self)

    @property
    def infinity_mass(self) -> float:  # type: ignore[override]  # a computed attribute of the base class
        return self._arrays[-1]

    # ---------------------------------------------------------------- the distribution in loss space
    def _below(self, s: ArrayLike, prefix: FloatArray) -> FloatArray:
        """The mass outside the enumerated window, sent to ``+inf`` for upper bounds (not an exact atom)."""
        v = self._arrays[0]
        i = np.searchsorted(v, np.asarray(s, float), side="right")
        return np.where(i > 0, prefix[np.maximum(i - 1, 0)], 0.0)

    def _above(self, s: ArrayLike, suffix: FloatArray) -> FloatArray:
        v = self._arrays[0]
        i = np.searchsorted(v, np.asarray(s, float), side="right")
        return np.where(i < v.size, suffix[np.minimum(i, v.size - 1)], 0.0)

    def cdf(self, s: ArrayLike) -> FloatArray:
        return self._below(s, self._arrays[3])

    def sf(self, s: ArrayLike) -> FloatArray:
        return self._above(s, self._arrays[5])

    has_q_side = True

    def q_cdf(self, s: ArrayLike) -> FloatArray:
        return self._below(s, self._arrays[4])

    def q_sf(self, s: ArrayLike) -> FloatArray:
        return self._above(s, self._arrays[6])

    def partial_mean(self, a: float, b: float) -> tuple[float, float]:
        v, pm = self._arrays[:2]
        m = (v > a) & (v <= b)
        val = float(np.sum(v[m] * pm[m]))
        n = int(np.count_nonzero(m))
        return val, (n + 4) * (self._arrays[7] + 2 * _U) * float(np.sum(np.abs(v[m]) * pm[m])) + 1e-300

    def lower_quantile(self, mass: float) -> float:
        """The largest atom-free point ``a`` with ``P(Y <= a) <= mass`` (below the first atom it exceeds).

        Parameters
        ----------
        mass : float
            Tail mass in ``[0, 1)``.

        Returns
        -------
        float
            The point ``a``.

        Raises
        ------
        ValueError
            Not raised for a real ``mass``; ``mass`` is the engine's to choose.
        """
        v, _, _, cp = self._arrays[:4]
        i = int(np.searchsorted(cp, mass, side="right"))  # atoms 0..i-1 have cumulative mass <= mass
        if i >= v.size:
            return float(v[-1])
        return float(v[i]) - 1e-9 * (1.0 + abs(float(v[i])))

    def upper_quantile(self, mass: float) -> float:
        """A point ``b`` with ``P(b < Y < inf) <= mass``: an atom at or below which the rest is that light.

        Parameters
        ----------
        mass : float
            Tail mass in ``[0, 1)``.

        Returns
        -------
        float
            The point ``b``.

        Raises
        ------
        ValueError
            Not raised for a real ``mass``; ``mass`` is the engine's to choose.
        """
        v, sp = self._arrays[0], self._arrays[5]
        ok = np.nonzero(sp <= mass)[0]  # suffix sums decrease: atoms j.. with sp[j] <= mass may lie above b
        j = int(ok[0]) if ok.size else v.size
        return float(v[max(j - 1, 0)]) if j > 0 else float(v[0]) - 1.0

    # ---------------------------------------------------------------- cells for the dominance engine
    def _placed(self, e: FloatArray, v: FloatArray) -> tuple[int, int, IntArray, BoolArray, float]:
        """``(lo, hi, cell, on_edge, moved)``: ``_atom_cells(e, v[lo:hi])`` for the atoms near the grid, those below
        ``lo`` lying below it and those from ``hi`` above it, none of them within ``_atom_cells``' snapping distance
        of an edge (so the result is ``_atom_cells(e, v)``'s); kept for the last edges asked: both dominance
        constructions and both sides' cell masses place the same atoms on the same grid."""
        memo: tuple[FloatArray, tuple[int, int, IntArray, BoolArray, float]] | None = self.__dict__.get("_placed_memo")
        if memo is not None and memo[0].shape == e.shape and np.array_equal(memo[0], e):
            return memo[1]
        lo, hi = 0, v.size
        if e.size >= 2 and v.size:
            # 1e-12 (1 + |v|) is the snapping distance (``_ATOM_SNAP``); twice the largest, and 1e-9 more
            margin = 1e-9 + 2e-12 * (
                1.0 + max(abs(float(v[0])), abs(float(v[-1])), abs(float(e[0])), abs(float(e[-1])))
            )
            lo = int(np.searchsorted(v, float(e[0]) - margin, side="left"))
            hi = max(int(np.searchsorted(v, float(e[-1]) + margin, side="right")), lo)
        out = (lo, hi, *_atom_cells(e, v[lo:hi]))
        self.__dict__["_placed_memo"] = (e.copy(), out)  # not a field: eq and hash ignore it
        return out

    def _cells(self, edges: ArrayLike, apart: bool) -> dict[str, Any]:
        e = np.asarray(edges, float)
        v, pm_all, qm_all, *_ = self._arrays
        atom_rel, l_err = self._arrays[7], self._arrays[8]
        n = max(e.size - 1, 0)
        lo, hi, idx, on_edge, moved = self._placed(e, v)
        pm, qm = pm_all[lo:hi], qm_all[lo:hi]
        below_m, above_m = idx < 0, idx >= n
        inside = ~(below_m | above_m)
        edge_m = inside & on_edge if apart else np.zeros_like(inside)
        cell_m = inside & ~edge_m
        ci = idx[cell_m]
        P = np.bincount(ci, weights=pm[cell_m], minlength=n)[:n]
        Q = np.bincount(ci, weights=qm[cell_m], minlength=n)[:n]
        count = np.bincount(ci, minlength=n)[:n]
        rel = atom_rel + (count + 2) * _U
        out = dict(
            # every atom below the grid, in order (those before ``lo`` first), summed as one array
            below=float(np.sum(np.concatenate([pm_all[:lo], pm[below_m]]))),
            above=float(np.sum(np.concatenate([pm[above_m], pm_all[hi:]]))),
            P=P,
            Q=Q,
            p_err=rel * P,
            q_err=rel * Q,
            edge=moved + l_err,
        )
        if apart:
            ei = idx[edge_m] + 1
            out["Pa"] = np.bincount(ei, weights=pm[edge_m], minlength=n + 1)[: n + 1]
            out["Qa"] = np.bincount(ei, weights=qm[edge_m], minlength=n + 1)[: n + 1]
            # on-edge atoms merged as atoms: their ratio errs by atom_rel, a loss error of about 2 atom_rel
            out["edge"] = moved + l_err + 2.5 * atom_rel
        return out

    def total_variation(self) -> float | None:
        """``sum_x (P_x - Q_x)_+`` over the enumerated atoms, each within ``atom_rel`` of the truth and the sum within
        ``(n + 4) u`` (so ``atom_rel + (n + 4) u`` of ``sum (P_x + Q_x)`` is added), plus the mass outside the window
        and the masses' l1 error (``infinity_mass`` and ``_l1``).

        Returns
        -------
        float or None
            The bound.
        """
        _, pm, qm, *_ = self._arrays
        atom_rel = self._arrays[7]
        d = float(np.sum(np.maximum(pm - qm, 0.0)))
        err = (atom_rel + (pm.size + 4) * _U) * float(np.sum(pm) + np.sum(qm))
        return min(1.0, (d + err + self.infinity_mass + self._l1) * (1.0 + 1e-12))

    def event_masses(self, t: ArrayLike) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray] | None:
        """As the base's (the atoms above each threshold and the others), with the atoms' relative error and the prefix
        and suffix sums' (``atom_rel + (n + 64) u``), and the masses' l1 error (``_l1``) added to both of Q's.

        Parameters
        ----------
        t : array_like of float
            The loss thresholds, one-dimensional.

        Returns
        -------
        tuple of FloatArray or None
            ``(p, q, p_out, q_out)``, each the shape of ``t``.

        Raises
        ------
        ValueError
            Not raised: every real ``t`` is answered (a NaN mass reads as no bound downstream).
        """
        x = np.asarray(t, dtype=float)
        rel = self._arrays[7] + (self._arrays[0].size + 64) * _U
        p, q = np.asarray(self.sf(x), float), np.asarray(self.q_sf(x), float)
        p_out, q_out = np.asarray(self.cdf(x), float), np.asarray(self.q_cdf(x), float)
        extra = self.infinity_mass + self._l1  # Q-mass outside the window, and the masses' l1 error
        return p * (1.0 - rel), q * (1.0 + rel) + extra, p_out * (1.0 - rel), q_out * (1.0 + rel) + extra

    def cell_masses(self, edges: ArrayLike) -> tuple[float, float, FloatArray, tuple[float, float], float]:
        c = self._cells(edges, False)
        rel, l1 = split_errors(c["P"], c["p_err"])
        return c["below"], c["above"], c["P"], (rel, l1 + self._l1), c["edge"]

    def q_cell_masses(self, edges: ArrayLike) -> tuple[FloatArray, tuple[float, float]]:
        c = self._cells(edges, False)
        rel, l1 = split_errors(c["Q"], c["q_err"])
        return c["Q"], (rel, l1 + self._l1)

    def edge_atoms(self, edges: ArrayLike) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, float]:
        """Cell masses without the atoms on an edge, those per edge, and the largest distance an atom's true loss
        may lie from the edge it is placed on (as ``DiscreteLoss.edge_atoms``).

        Parameters
        ----------
        edges : array_like of float
            Increasing loss values, at least two.

        Returns
        -------
        tuple
            ``(P, Q, P_at, Q_at, moved)``.

        Raises
        ------
        ValueError
            If ``edges`` is not one-dimensional (numpy's error).
        """
        c = self._cells(edges, True)
        return c["P"], c["Q"], c["Pa"], c["Qa"], c["edge"]

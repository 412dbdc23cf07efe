"""Losses with finitely many atoms (pure DP, approximate DP, randomized response, the discrete noises) and an
optional atom at ``+inf``."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from .._types import ArrayLike, FloatArray
from ._cells import _U, AtomCells, _place_atoms
from .base import PrivacyLoss

__all__ = ["DiscreteLoss"]


@dataclass(frozen=True)
class DiscreteLoss(AtomCells, PrivacyLoss):
    """A privacy loss with finitely many atoms ``values`` (probabilities ``probs``) plus an atom at ``+inf``.

    Pure DP, approximate DP, randomized response and the discrete noises use it; the Q-mass of an atom of
    loss ``v`` is its P-mass times ``e^-v``.

    Parameters
    ----------
    values : tuple of float
        The finite losses of the atoms (any order).
    probs : tuple of float
        Their P-masses, non-negative, one per value.
    infinity_mass : float, default 0.0
        The P-mass at loss ``+inf`` (outputs Q cannot produce), in ``[0, 1]``.

    Raises
    ------
    TypeError
        If ``values`` or ``probs`` is missing.
    """

    values: tuple[float, ...]
    probs: tuple[float, ...]
    infinity_mass: float = 0.0

    @cached_property
    def _arrays(self) -> tuple[FloatArray, FloatArray]:
        v = np.asarray(self.values, float)
        p = np.asarray(self.probs, float)
        order = np.argsort(v)
        return v[order], p[order]

    def cdf(self, s: ArrayLike) -> FloatArray:
        v, p = self._arrays
        c = np.concatenate([[0.0], np.cumsum(p)])
        out: FloatArray = c[np.searchsorted(v, np.asarray(s, float), side="right")]
        return out

    def sf(self, s: ArrayLike) -> FloatArray:
        v, p = self._arrays
        c = np.concatenate([np.cumsum(p[::-1])[::-1], [0.0]])
        out: FloatArray = c[np.searchsorted(v, np.asarray(s, float), side="right")]
        return out

    def partial_mean(self, a: float, b: float) -> tuple[float, float]:
        v, p = self._arrays
        m = (v > a) & (v <= b)
        return float(np.sum(v[m] * p[m])), 1e-16 * float(np.sum(np.abs(v * p)))

    def support(self) -> tuple[float, float]:
        v, _ = self._arrays
        return float(v[0]), float(v[-1])

    has_q_side = True

    @cached_property
    def _q_atoms(self) -> tuple[FloatArray, FloatArray]:
        v, p = self._arrays
        return v, p * np.exp(-v)  # Q-mass of an atom of loss v: P-mass times e^-v

    def q_cdf(self, s: ArrayLike) -> FloatArray:
        v, q = self._q_atoms
        c = np.concatenate([[0.0], np.cumsum(q)])
        out: FloatArray = c[np.searchsorted(v, np.asarray(s, float), side="right")]
        return out

    def q_sf(self, s: ArrayLike) -> FloatArray:
        v, q = self._q_atoms
        c = np.concatenate([np.cumsum(q[::-1])[::-1], [0.0]])
        out: FloatArray = c[np.searchsorted(v, np.asarray(s, float), side="right")]
        return out

    def _cell_rel(self) -> float:
        # a cell's mass is a sum of at most len(values) atoms
        return (len(self.values) + 2) * _U

    def _cells_pq(
        self, edges: ArrayLike, apart: bool = False
    ) -> tuple[float, float, FloatArray, FloatArray, float, tuple[FloatArray, FloatArray] | None]:
        """Cell masses straight from the atoms (cell ``i`` is ``(e_i, e_(i+1)]``): empty cells are exactly
        0 and a cell's mass is a sum of at most ``len(values)`` atoms, so the relative error is
        ``len(values) u`` and there is no absolute error term at all. Atoms on an edge up to rounding go to
        the cell below it (``_atom_cells``), or with ``apart`` to per-edge arrays. Returns ``(below,
        above, P, Q, edge_err, atoms)``."""
        e = np.asarray(edges, float)
        v, p = self._arrays
        _, q = self._q_atoms
        P, Q = np.zeros(max(e.size - 1, 0)), np.zeros(max(e.size - 1, 0))
        below, above, edge_err, atoms = _place_atoms(e, v, p, q, P, Q, apart)
        return below, above, P, Q, edge_err, atoms

    def lattice_atoms(self) -> tuple[float, ...]:
        v, p = self._arrays
        return tuple(float(x) for x in v[(p > 0) & np.isfinite(v)])

    def _event_rel(self) -> float:
        return (64.0 + len(self.values) + 4) * _U  # the suffix sums of the atoms (Q's: P-masses times e^-v)

    def total_variation(self) -> float | None:
        """``P(inf) + sum_k p_k (1 - e^(-v_k))_+`` (non-negative terms), raised for their rounding.

        Returns
        -------
        float or None
            The bound.
        """
        v, p = self._arrays
        tv = float(self.infinity_mass + np.dot(p, -np.expm1(-np.maximum(v, 0.0))))
        return min(1.0, tv * (1.0 + 1e-12 + 4.0 * (v.size + 2) * _U))

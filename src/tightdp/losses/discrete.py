"""Losses with finitely many atoms (pure DP, approximate DP, randomized response, the discrete noises) and an
optional atom at ``+inf``."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ._cells import _U, _place_atoms
from .base import PrivacyLoss

__all__ = ["DiscreteLoss"]


@dataclass(frozen=True)
class DiscreteLoss(PrivacyLoss):
    """Finitely many atoms ``values`` with probabilities ``probs`` plus ``infinity_mass``."""

    values: tuple[float, ...]
    probs: tuple[float, ...]
    infinity_mass: float = 0.0

    @cached_property
    def _arrays(self):
        v = np.asarray(self.values, float)
        p = np.asarray(self.probs, float)
        order = np.argsort(v)
        return v[order], p[order]

    def cdf(self, s):
        v, p = self._arrays
        c = np.concatenate([[0.0], np.cumsum(p)])
        return c[np.searchsorted(v, np.asarray(s, float), side="right")]

    def sf(self, s):
        v, p = self._arrays
        c = np.concatenate([np.cumsum(p[::-1])[::-1], [0.0]])
        return c[np.searchsorted(v, np.asarray(s, float), side="right")]

    def partial_mean(self, a, b):
        v, p = self._arrays
        m = (v > a) & (v <= b)
        return float(np.sum(v[m] * p[m])), 1e-16 * float(np.sum(np.abs(v * p)))

    def support(self):
        v, _ = self._arrays
        return float(v[0]), float(v[-1])

    has_q_side = True

    @cached_property
    def _q_atoms(self):
        v, p = self._arrays
        return v, p * np.exp(-v)  # Q-mass of an atom of loss v: P-mass times e^-v

    def q_cdf(self, s):
        v, q = self._q_atoms
        c = np.concatenate([[0.0], np.cumsum(q)])
        return c[np.searchsorted(v, np.asarray(s, float), side="right")]

    def q_sf(self, s):
        v, q = self._q_atoms
        c = np.concatenate([np.cumsum(q[::-1])[::-1], [0.0]])
        return c[np.searchsorted(v, np.asarray(s, float), side="right")]

    def _cells_pq(self, edges, apart: bool = False):
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

    def cell_masses(self, edges):
        below, above, P, _, edge_err, _ = self._cells_pq(edges)
        return below, above, P, ((len(self.values) + 2) * _U, 0.0), edge_err

    def q_cell_masses(self, edges):
        return self._cells_pq(edges)[3], ((len(self.values) + 2) * _U, 0.0)

    def edge_atoms(self, edges):
        """``(P, Q, P_at, Q_at, moved)``: the cell masses without the atoms that sit on an edge, those atoms'
        masses per edge (for the merge-to-the-grid construction, which keeps them where they are), and the
        largest distance an atom was moved onto its edge."""
        _, _, P, Q, moved, (pa, qa) = self._cells_pq(edges, apart=True)
        return P, Q, pa, qa, moved

    def lattice_atoms(self):
        v, p = self._arrays
        return tuple(float(x) for x in v[(p > 0) & np.isfinite(v)])

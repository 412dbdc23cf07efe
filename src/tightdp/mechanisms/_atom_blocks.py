"""Few-atom privacy losses composed in exact blocks (the Poisson-subsampled discrete Laplace).

A step whose loss takes ``m`` values ``v_i`` (P-masses ``p_i``, Q-masses ``q_i``), composed ``b`` times, takes at
most ``C(b + m - 1, m - 1)`` values: ``V(n) = sum_i n_i v_i`` for each count vector ``n`` with ``sum_i n_i = b``, with
the P-mass ``b! / prod_i n_i! * prod_i p_i^(n_i)`` (the multinomial law of the counts) and the Q-mass likewise with
the ``q_i``. ``FewAtomsLoss.in_blocks`` turns ``k`` steps into ``k // b`` such blocks and one block of the rest, which
the connect-the-dots accountant composes instead of the steps (``_connect_dots_core._atoms_in_blocks``).

Why: atoms that lie on no common lattice (the subsampled losses ``log(1 - q + q e^l)``) are placed on the grid by
each composed term: connect-the-dots splits every atom between two grid points (an error that adds up over the
terms) and the merge to the grid moves the isolated atoms by up to a mesh (the lower end drifted by about a mesh per
step). In blocks of ``b`` steps both happen ``k / b`` times instead of ``k``: q = 0.05, a = 1, Delta = 3, k = 1000
took three passes down to the mesh 1.2e-3 (20 ms); in blocks of 20 one pass on the mesh 0.048 meets the accuracy (4 ms).

Errors: the step's losses are within ``loss_err`` and its masses within a factor ``1 +- mass_rel`` of the exact
ones (``FewAtomsLoss``); a block's loss sums ``b`` of them (``b loss_err`` plus the rounding of the sum), its masses
multiply ``b`` (``(1 + mass_rel)^b``) and are evaluated as ``C exp(n . log p)`` with ``C`` from float factorials
(each within ``u``): within ``(m + 2) u sum_i n_i |log p_i|`` of the exponent and ``(2 m + 6) u`` more
(``_AtomsBlockLoss``). The engine charges both (``_LatticeLoss``: relative mass error, loss error as an edge shift).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._types import IntArray
from ..losses import DiscreteLoss, PrivacyLoss
from ..pld.atoms import atom_lattice
from ._lattice_loss import _U, _Arrays, _finish, _LatticeLoss

__all__ = ["FewAtomsLoss"]

#: the most atoms a block may hold (``C(b + m - 1, m - 1)``): 21 steps of a four-atom loss (2024)
_BLOCK_ATOMS = 2048
#: the most steps a block may hold: ``170!`` is the largest factorial a double holds
_BLOCK_STEPS = 170
#: the fewest steps worth a block: fewer leave most of the mesh's error and widen each composed term's grid (eleven
#: atoms in blocks of 4: 250 ms instead of 124 ms; four atoms in blocks of 20: 4 ms instead of 20 ms)
_MIN_BLOCK = 8


def _count_vectors(m: int, b: int) -> IntArray:
    """Every ``n`` in ``N^m`` with ``sum n = b``, one per row (``C(b + m - 1, m - 1)`` rows)."""
    rows: IntArray = np.zeros((1, 0), dtype=np.int64)
    left: IntArray = np.array([b], dtype=np.int64)
    for _ in range(m - 1):
        reps = left + 1
        starts = np.cumsum(reps) - reps
        ni = np.arange(int(reps.sum()), dtype=np.int64) - np.repeat(starts, reps)
        idx = np.repeat(np.arange(rows.shape[0]), reps)
        rows = np.concatenate([rows[idx], ni[:, None]], axis=1)
        left = left[idx] - ni
    return np.concatenate([rows, left[:, None]], axis=1)


def block_size(atoms: int, count: int) -> int:
    """Steps per block: about ``sqrt(count)`` (as many blocks as steps in a block), at most as many as keep a block
    within ``_BLOCK_ATOMS`` atoms and ``_BLOCK_STEPS`` steps; a divisor of ``count`` instead if one of at least
    ``_MIN_BLOCK`` lies within a factor 2 below that (no block of the rest to compose apart)."""
    b = min(math.isqrt(count), _BLOCK_STEPS)
    while b >= 2 and math.comb(b + atoms - 1, atoms - 1) > _BLOCK_ATOMS:
        b -= 1
    for d in range(b, max((b + 1) // 2, _MIN_BLOCK) - 1, -1):
        if count % d == 0:
            return d
    return max(b, 1)


@dataclass(frozen=True)
class _AtomsBlockLoss(_LatticeLoss):
    """``count`` steps of the ``m``-atom loss ``(values, p, q)`` composed exactly (module docstring): its atoms, their
    P- and Q-masses and their errors as a ``_LatticeLoss``.

    Parameters
    ----------
    values : tuple of float
        The step's losses.
    p, q : tuple of float
        The step's P- and Q-masses (positive).
    mass_rel : float
        The step masses' relative error.
    loss_err : float
        The step losses' absolute error.
    count : int
        Steps in the block (>= 1).

    Raises
    ------
    TypeError
        A missing field (the dataclass constructor; ``FewAtomsLoss.in_blocks`` builds them).
    """

    values: tuple[float, ...]
    p: tuple[float, ...]
    q: tuple[float, ...]
    mass_rel: float
    loss_err: float
    count: int

    def _enumerate(self) -> _Arrays:
        v = np.asarray(self.values, float)
        m, b = v.size, self.count
        n = _count_vectors(m, b)
        nf = n.astype(float)
        fact = np.array([float(math.factorial(j)) for j in range(b + 1)])  # each within u (b <= 170)
        coef = fact[b] / np.prod(fact[n], axis=1)
        masses, spread = [], 0.0
        for side in (self.p, self.q):
            logs = np.log(np.asarray(side, float))
            masses.append(coef * np.exp(nf @ logs))
            spread = max(spread, float(np.max(nf @ np.abs(logs))))
        big_v = nf @ v
        # (1 + rel)^b of the step masses; the exponent's rounding (each log within u of |log|, m products and
        # sums); exp, the factorials, their m products and the quotient
        atom_rel = 1.01 * (b * self.mass_rel + (m + 2) * _U * spread + (2 * m + 6) * _U)
        l_err = b * self.loss_err + 1.01 * (m + 1) * _U * float(np.max(nf @ np.abs(v)))
        order = np.argsort(big_v, kind="stable")
        return _finish(big_v[order], masses[0][order], masses[1][order], atom_rel, l_err, 1e-300)


@dataclass(frozen=True)
class FewAtomsLoss(DiscreteLoss):
    """A ``DiscreteLoss`` whose atoms carry their Q-masses and error bounds, so that the connect-the-dots accountant
    may compose it in exact blocks (``in_blocks``; the module docstring). Every other use sees the ``DiscreteLoss``.

    Parameters
    ----------
    values : tuple of float
        The finite losses of the atoms.
    probs : tuple of float
        Their P-masses (positive).
    infinity_mass : float, default 0.0
        The P-mass at ``+inf`` (blocks only without one).
    q_probs : tuple of float, default ()
        Their Q-masses (positive), from the closed forms.
    mass_rel : float, default 0.0
        The relative error of ``probs`` and ``q_probs``.
    loss_err : float, default 0.0
        The absolute error of ``values``.

    Raises
    ------
    TypeError
        If ``values`` or ``probs`` is missing.
    """

    q_probs: tuple[float, ...] = ()
    mass_rel: float = 0.0
    loss_err: float = 0.0

    def in_blocks(self, count: int) -> list[tuple[PrivacyLoss, int]]:
        """``count`` steps as blocks of about ``sqrt(count)`` steps composed exactly, and one block of the rest.

        Parameters
        ----------
        count : int
            How many times the step is composed (>= 1).

        Returns
        -------
        list of (PrivacyLoss, int)
            ``(block, count // b)`` and ``(rest, 1)``; ``[(self, count)]`` where blocks do not apply (fewer than
            ``_MIN_BLOCK`` steps a block, an atom at ``+inf``, a mass 0, Q-masses not given, or atoms on a lattice,
            which the accountant composes exactly as they are).

        Raises
        ------
        TypeError
            If ``count`` is not an integer (``math.isqrt``).
        """
        b = block_size(len(self.values), count)
        ok = len(self.q_probs) == len(self.values) and min(self.probs + self.q_probs, default=0.0) > 0.0
        if b < _MIN_BLOCK or self.infinity_mass > 0.0 or not ok or atom_lattice(self.values) is not None:
            return [(self, count)]  # (atoms on a lattice: composed exactly on it, ``pld.atoms.SelfComposedAtoms``)

        def block(steps: int) -> PrivacyLoss:
            return _AtomsBlockLoss(self.values, self.probs, self.q_probs, self.mass_rel, self.loss_err, steps)

        out = [(block(b), count // b)]
        if count % b:
            out.append((block(count % b), 1))
        return out

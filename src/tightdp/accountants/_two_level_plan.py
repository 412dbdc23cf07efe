"""When the connect-the-dots accountant composes on two levels (``pld.hierarchy.compose_two_level``), and with
which meshes and block size: ``two_level_plan``. Read by ``ConnectDotsAccountant._composed``; the thresholds were
measured on DP-SGD (below).
"""

from __future__ import annotations

import math

from ..pld.atoms import SelfComposedAtoms
from ..pld.dominance import loss_spread, own_pairs
from ._pld import Terms

__all__ = ["BLOCK_TAU", "two_level_plan"]

#: two levels (``pld.hierarchy.compose_two_level``) for a direction of at least ``_TWO_LEVEL_MIN`` steps whose
#: one-level window would hold at least ``_TWO_LEVEL_POINTS`` points (about 13 standard deviations of the composed
#: loss at the mesh), or at least ``_TWO_LEVEL_ANY_K`` points. Below, one level is as fast or faster: its cost is
#: then the step's own cells, which the fine level has sqrt(2) times more of (measured, DP-SGD sigma 1 / 0.8,
#: q 0.01 / 4e-3: k = 3e4 default, 30 000 points, 10 % slower; k = 1e4 at eps_error 1e-3, 46 000 points, 1.4-2.5x
#: slower; k = 1e5 default, 58 000 points, 1.3x faster; k = 1e5 at eps_error 1e-3, 310 000 points, 2x faster)
_TWO_LEVEL_MIN = 1 << 15
_TWO_LEVEL_POINTS = 30_000
_TWO_LEVEL_ANY_K = 200_000
_TWO_LEVEL_STEPS = 1 << 12  # the fewest steps worth blocking at all
BLOCK_TAU = 1e-6  # a block's window level, relative to the final composition's (its lower envelope
# subtracts the wrapped mass, at most twice that, from every atom)


def two_level_plan(terms: Terms, h: float) -> tuple[float, int, float] | None:
    """``(fine mesh, block size, coarse mesh)`` for composing ``terms`` on two levels, or ``None`` for one.

    One level on the mesh ``h`` errs like ``k h^2`` in the constructions' gap; two levels with the fine
    mesh ``h / sqrt(2)`` and the coarse mesh ``sqrt(b / 2) h`` for blocks of ``b`` steps err like
    ``k h^2 / 2`` on each level, the same gap, while each window holds ``O(sqrt(b))`` and
    ``O(sqrt(k / b))`` standard deviations' worth of mesh instead of ``O(sqrt(k))``: ``b ~ sqrt(k)``
    balances them. Only for a few distinct losses without atoms (atoms on a lattice are composed exactly
    on it, ``ConnectDotsAccountant._snap``)."""
    k = sum(c for _, c in terms)
    if k < _TWO_LEVEL_STEPS or len(terms) > 3:
        return None
    if any(
        own_pairs(loss) or isinstance(loss, SelfComposedAtoms) or any(map(math.isfinite, loss.lattice_atoms()))
        for loss, _ in terms
    ):
        return None
    points = 13.0 * math.sqrt(sum(c * loss_spread(loss) ** 2 for loss, c in terms)) / h
    if points < (_TWO_LEVEL_POINTS if k >= _TWO_LEVEL_MIN else _TWO_LEVEL_ANY_K):
        return None
    block = _block_size(max(c for _, c in terms))
    fine = h / math.sqrt(2.0)
    return fine, block, fine * math.sqrt(block)


def _block_size(count: int) -> int:
    """About ``sqrt(count)``: the divisor of ``count`` nearest to it within a factor 1.5 and at most 4096
    candidates either side (no remainder block to compose), else the power of two nearest to it."""
    root = math.isqrt(count)
    lo, hi = max(2, int(root / 1.5)), int(root * 1.5)
    for d in range(min(root, 4096) + 1):
        for b in (root - d, root + d):
            if lo <= b <= hi and count % b == 0:
                return b
    return 1 << max(1, round(0.5 * math.log2(count)))

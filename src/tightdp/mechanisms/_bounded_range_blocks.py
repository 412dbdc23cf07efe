"""Adaptive epsilon-BR steps composed as blocks (``block_ledger``, ``BoundedRangeBlock``; used by
``tightdp.accountants._adaptive_groups``): each block is one pair built from the adaptive program of
``tightdp.mechanisms._bounded_range_adaptive``, so compositions too long for one program still compose the
adaptive optimum block by block.

**Why a pair.** The upper values ``V_m`` at the
grid's nodes bound the largest ``delta(eps')`` of ``m`` adaptive steps at every ``eps' = -x``; their lower convex
hull in ``a = e^(eps')`` (through ``(0, 1)``, flat beyond the last node) is convex, so it is the curve of a pair
(its Q-masses are the hull's slope changes) and it lies above every strategy's convex curve (a tangent of the
curve lies below the nodes' values, hence below the hull). Swapping P and Q maps a strategy of ``T_t`` steps to
one of ``T_(1-t)`` steps, so the same pair bounds both directions. Given the past, a block of ``m`` steps is such
a strategy, so ``B`` blocks compose as ``B`` copies of the pair (dominance survives adaptive composition).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .._caches import register as _register_cache
from .._validation import check_count
from ..losses import DiscreteLoss
from ._bounded_range_adaptive import _MAX_WORK, _value_functions, _window, _work
from .base import LossPair, Mechanism
from .selection import BoundedRange

__all__ = ["BoundedRangeBlock", "block_ledger", "block_size"]

#: cells of a block's program
_BLOCK_CELLS = 24
#: delta below which a block's curve is not resolved (the grid's reach)
_BLOCK_DELTA = 1e-14


def block_size(epsilon: float, count: int) -> int:
    """The longest block (at most ``count // 2`` steps, 0 if none) whose program fits the cost budget.

    Parameters
    ----------
    epsilon : float
        The bounded-range parameter, positive.
    count : int
        The number of steps to be cut into blocks.

    Returns
    -------
    int
        Steps per block, or 0 when even two steps per block would cost too much.
    """
    best, steps = 0, 2
    while steps <= count // 2:
        x_lo = _window(epsilon, steps, _BLOCK_DELTA)[0]
        if _work(epsilon, steps, _BLOCK_CELLS, (x_lo, x_lo))[1] > _MAX_WORK:
            break
        best, steps = steps, 2 * steps
    return best


@_register_cache
@lru_cache(maxsize=8)
def _block_loss(epsilon: float, steps: int) -> DiscreteLoss:
    """The block pair's loss: the hull of the upper values (module docstring)."""
    x_lo = _window(epsilon, steps, _BLOCK_DELTA)[0]
    reach, _ = _work(epsilon, steps, _BLOCK_CELLS, (x_lo, x_lo))
    xs, up, _ = _value_functions(epsilon, steps, _BLOCK_CELLS, reach)
    eps, v = -xs[::-1], up[::-1]  # rising epsilon, falling values
    # |eps'| <= 700 keeps e^eps' finite: the chord from (0, 1) still bounds the convex curve below the first
    # node kept, and beyond the last the curve stays below its value (the flat end of the hull)
    kept = np.abs(eps) <= 700.0
    a, v = np.exp(eps[kept]), v[kept]
    hull_a, hull_v = [0.0], [1.0]
    for ai, vi in zip(a.tolist(), v.tolist(), strict=True):
        while len(hull_a) >= 2 and (hull_a[-1] - hull_a[-2]) * (vi - hull_v[-2]) <= (hull_v[-1] - hull_v[-2]) * (
            ai - hull_a[-2]
        ):
            hull_a.pop()
            hull_v.pop()
        hull_a.append(ai)
        hull_v.append(vi)
    ha, hv = np.array(hull_a), np.array(hull_v)
    slopes = np.diff(hv) / np.diff(ha)  # rising (convex), at most 0
    q_mass = np.diff(np.r_[slopes, 0.0])  # the slope's jump at each node after the first
    keep = q_mass > 0
    values = np.log(ha[1:][keep])
    probs = q_mass[keep] * ha[1:][keep]
    # (delta is at most 1 whatever the padded values say)
    return DiscreteLoss(
        values=tuple(values.tolist()), probs=tuple(probs.tolist()), infinity_mass=min(float(hv[-1]), 1.0)
    )


@dataclass(frozen=True, kw_only=True)
class BoundedRangeBlock(Mechanism):
    """``steps`` adaptively chosen epsilon-BR mechanisms as one release, dominated by the pair whose curve is the
    hull of the adaptive program's certified upper values (module docstring). Attained pair: none as one
    pair (the program's attained strategies change with the epsilon asked), so its lower ends are 0; callers take
    lower ends from the mechanisms' own attained pairs.

    Parameters
    ----------
    epsilon : float
        The bounded-range parameter, positive.
    steps : int
        The number of mechanisms in the block, at least 2.

    Raises
    ------
    ValueError
        If ``epsilon`` is not positive and finite or ``steps`` is below 2.
    """

    pair_attained = False
    epsilon: float
    steps: int

    def __post_init__(self) -> None:
        if not (self.epsilon > 0 and math.isfinite(self.epsilon)):
            raise ValueError(f"epsilon must be positive and finite, got {self.epsilon!r}")
        object.__setattr__(self, "steps", check_count("steps", self.steps, minimum=2))

    def privacy_losses(self) -> LossPair:
        loss = _block_loss(float(self.epsilon), int(self.steps))
        return LossPair(loss, loss)

    def attained_mechanism(self) -> Mechanism | None:
        """None: no single attained pair (lower ends 0; the class docstring says why).

        Returns
        -------
        Mechanism or None
            Always ``None``.
        """
        return None


def block_ledger(epsilon: float, count: int) -> list[tuple[Mechanism, int]]:
    """``count`` adaptive epsilon-BR steps as block pairs: one block of all of them when its program fits the
    cost budget, else the longest affordable blocks and one block of the rest (module docstring).

    Parameters
    ----------
    epsilon : float
        The bounded-range parameter, positive.
    count : int
        The number of steps, at least 2.

    Returns
    -------
    list of (Mechanism, int)
        ``BoundedRangeBlock`` entries (and a ``BoundedRange`` for a single step left over); empty when no block
        fits the budget.

    Raises
    ------
    ValueError
        If ``count`` is below 2.
    """
    if count < 2:
        raise ValueError(f"count must be at least 2, got {count!r}")
    x_lo = _window(epsilon, count, _BLOCK_DELTA)[0]
    if _work(epsilon, count, _BLOCK_CELLS, (x_lo, x_lo))[1] <= _MAX_WORK:
        out: list[tuple[Mechanism, int]] = [(BoundedRangeBlock(epsilon=epsilon, steps=count), 1)]
    else:
        size = block_size(epsilon, count)
        if size < 2:
            return []
        blocks, rest = divmod(count, size)
        out = [(BoundedRangeBlock(epsilon=epsilon, steps=size), blocks)]
        if rest >= 2:
            out.append((BoundedRangeBlock(epsilon=epsilon, steps=rest), 1))
        elif rest == 1:
            out.append((BoundedRange(epsilon=epsilon), 1))
    # a block whose hull keeps no node (every node's |eps'| beyond 700: epsilon in the hundreds) is the vacuous
    # pair, delta 1 everywhere: no blocks then, the per-step pairs answer
    if any(isinstance(m, BoundedRangeBlock) and not _block_loss(m.epsilon, m.steps).values for m, _ in out):
        return []
    return out

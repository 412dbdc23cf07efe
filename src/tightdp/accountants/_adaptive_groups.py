"""The steps of one epsilon-bounded-range family in a ledger, composed as block pairs of their adaptive program
(``tightdp.mechanisms._bounded_range_adaptive``; the blocks: ``tightdp.mechanisms._bounded_range_blocks``) instead
of one dominating pair per step.

**Why it holds.** Every other step of the ledger is dominated by a fixed pair, whatever the past; the family's
steps (mechanisms proven bounded-range with one parameter, ``bounded_range_parameters``: ``BoundedRange``,
``ExponentialMechanism``, permute-and-flip at its range, ``ReportNoisyMax`` with Gumbel or exponential noise) are
each dominated by a two-point pair ``T_t`` whose ``t`` the analyst picks from the past.
Replace each fixed-pair step by its pair's output (a post-processing per step, given the past); those outputs do
not depend on the past, so releasing them all first only gives the analyst more to choose from. What is left
is the fixed pairs' composition followed by ``K`` adaptive steps of the family, chosen from the fixed outputs and
each other: given the fixed outputs the ``K`` steps are one adaptive strategy, dominated by the block pairs, and
dominance survives adaptive composition. Bounded-range steps of other parameters keep their fixed dominating pair
(``BoundedRangeLoss``, permute-and-flip's ``CappedBoundedRangeLoss``), so only the largest family is grouped.
"""

from __future__ import annotations

from typing import Self

import numpy as np

from .._types import FloatArray
from .._validation import check_delta
from ..bounds import Bounds
from ..mechanisms._bounded_range_blocks import block_ledger
from ..mechanisms.base import Mechanism
from ..mechanisms.selection import bounded_range_parameters
from ._pld import PLDAccountant

__all__ = ["AdaptiveGroups", "grouped_ledger"]


def _family(mech: Mechanism) -> float | None:
    """The bounded-range parameter of a family member (``bounded_range_parameters``), else ``None``."""
    params = bounded_range_parameters(mech)
    return params[0] if params is not None and params[0] > 0 else None


def grouped_ledger(
    ledger: tuple[tuple[Mechanism, int], ...],
) -> tuple[tuple[tuple[Mechanism, int], ...], str] | None:
    """The ledger with its largest bounded-range family as block pairs, and a description; ``None`` when no family
    has two steps or no block fits the cost budget.

    Parameters
    ----------
    ledger : tuple of (Mechanism, int)
        The accountant's ledger.

    Returns
    -------
    tuple or None
        ``(grouped ledger, description)`` or ``None``.
    """
    totals: dict[float, int] = {}
    for mech, count in ledger:
        eps = _family(mech)
        if eps is not None:
            totals[eps] = totals.get(eps, 0) + count
    if not totals:
        return None
    eps, total = max(totals.items(), key=lambda kv: kv[1])
    if total < 2:
        return None
    blocks = block_ledger(eps, total)
    if not blocks:
        return None
    rest = [(m, c) for m, c in ledger if _family(m) != eps]
    sizes = " + ".join(f"{c} x {m.steps if hasattr(m, 'steps') else 1}" for m, c in blocks)
    return tuple(rest + blocks), f"{total} adaptive {eps:g}-bounded-range steps as blocks of their program ({sizes})"


class AdaptiveGroups(PLDAccountant):
    """A PLD accountant that also answers from a twin of the same options whose ledger has its bounded-range family
    grouped (``grouped_ledger``), keeping the smaller upper end; placed before the engine in the bases
    (``ConnectDotsAccountant``)."""

    def _adaptive_twin(self) -> tuple[Self, str] | None:
        """The twin and the grouping's description, or ``None`` (memoised with the ledger)."""

        def build() -> tuple[Self, str] | None:
            grouped = grouped_ledger(self._ledger)
            if grouped is None:
                return None
            return type(self)(**self.options()).compose(list(grouped[0])), grouped[1]

        return self._memo(("adaptive-twin",), build)

    def per_step_upper(self, delta: float) -> float:
        """The certified upper end of epsilon with every step composed through its own dominating pair (no
        grouping): for callers that have already run the family's program over all its steps.

        Parameters
        ----------
        delta : float
            Target delta in ``(0, 1)``.

        Returns
        -------
        float
            The upper end (``0`` for an empty ledger).

        Raises
        ------
        ValueError
            ``delta`` out of range.
        """
        delta = check_delta("delta", delta)
        return float(super()._epsilon(delta).upper) if self._ledger else 0.0

    def _epsilon(self, delta: float) -> Bounds:
        own = super()._epsilon(delta)
        twin = self._adaptive_twin()
        if twin is None:
            return own
        grouped = twin[0]._epsilon(delta)
        if not grouped.upper < own.upper:
            return own
        details = {**dict(grouped.details), "adaptive_group": twin[1], "per_step_pairs_upper": own.upper}
        lower = min(own.lower, grouped.lower)
        return Bounds(
            lower, min(max(grouped.estimate, lower), grouped.upper), grouped.upper, "epsilon", "bound", details
        )

    def _delta(self, epsilons: FloatArray) -> Bounds:
        own = super()._delta(epsilons)
        twin = self._adaptive_twin()
        if twin is None:
            return own
        grouped = twin[0]._delta(epsilons)
        upper = np.minimum(own.upper, grouped.upper)
        lower = np.minimum(np.minimum(own.lower, grouped.lower), upper)
        estimate = np.clip(np.minimum(own.estimate, grouped.estimate), lower, upper)
        details = {**dict(own.details), "adaptive_group": twin[1]}
        return Bounds(lower, estimate, upper, "delta", own.kind, details)

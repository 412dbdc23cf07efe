"""Shared machinery of the PLD accountants (PRV and Fourier): directions, terms, answers."""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import Any

import numpy as np

from ..bounds import Bounds
from ..errors import PrecisionError
from ..mechanisms import Mechanism
from ..mechanisms.base import PrivacyLoss
from ..pld import CurveBounds, delta_bounds, epsilon_bounds
from .base import Accountant


class PLDAccountant(Accountant):
    """Base of the accountants that compose discretised PLDs.

    Under add/remove neighbouring, all steps of a composition share one
    direction, so the composed guarantee is the worse of the all-remove and
    all-add compositions (the max of their delta curves). Symmetric ledgers are
    computed once.
    """

    def _ledger_changed(self) -> None:
        self._cache: OrderedDict = OrderedDict()

    def _directions(self) -> list[list[tuple[PrivacyLoss, int]]]:
        """Per direction, the distinct losses with their total counts."""
        remove: dict[PrivacyLoss, int] = {}
        add: dict[PrivacyLoss, int] = {}
        for mech, count in self._ledger:
            pair = mech.privacy_losses()
            remove[pair.remove] = remove.get(pair.remove, 0) + count
            add[pair.add] = add.get(pair.add, 0) + count
        out = [list(remove.items())]
        if add != remove:
            out.append(list(add.items()))
        return out

    def _memo(self, key, fn):
        cache = getattr(self, "_cache", None)
        if cache is None:
            self._ledger_changed()
            cache = self._cache
        if key in cache:
            cache.move_to_end(key)
            return cache[key]
        val = fn()
        cache[key] = val
        if len(cache) > 8:  # compositions can hold windows of millions of points
            cache.popitem(last=False)
        return val

    @staticmethod
    def _combine_eps(parts: list[CurveBounds], details: dict[str, Any]) -> Bounds:
        lower = float(max(p.lower for p in parts))
        est = float(max(p.estimate for p in parts))
        upper = float(max(p.upper for p in parts))
        notes = [p.note for p in parts if p.note]
        if notes:
            details = {**details, "note": notes[0]}
        if math.isinf(upper) and not notes:
            raise PrecisionError("internal: infinite epsilon without an explanation")
        return Bounds(lower, est, upper, "epsilon", "bound", details)

    @staticmethod
    def _combine_delta(parts, details: dict[str, Any]) -> Bounds:
        lower = np.max([p[0] for p in parts], axis=0)
        est = np.max([p[1] for p in parts], axis=0)
        upper = np.max([p[2] for p in parts], axis=0)
        return Bounds(lower, est, upper, "delta", "bound", details)


def check_mechanism(mech: Mechanism) -> None:
    """Fail early (at compose time) if the mechanism cannot produce privacy losses."""
    mech.privacy_losses()

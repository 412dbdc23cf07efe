"""The exact mu-GDP parameter of a ledger of Gaussian steps (the closed form the accountants answer from)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from ..losses import GaussianLoss

__all__ = ["gaussian_ledger_mu"]


def gaussian_ledger_mu(ledger: Iterable[tuple[Any, int]]) -> float | None:
    """``mu`` of a ledger ``[(mechanism, count), ...]`` whose every step has a Gaussian privacy loss, equal in
    both directions (then the composition is exactly ``mu``-GDP with ``mu^2 = sum c mu_i^2``, Dong, Roth,
    Su 2022, Cor. 3.3; may be ``inf`` when the sum overflows), else ``None``."""
    terms = []
    for mech, count in ledger:
        pair = mech.privacy_losses()
        if not (isinstance(pair.remove, GaussianLoss) and pair.add == pair.remove):
            return None
        terms.append((count, float(pair.remove.mu)))
    top = max((m for _, m in terms), default=0.0)
    if top == 0.0 or not math.isfinite(top):
        return top
    # scaled by the largest, so that squares of tiny mu do not underflow to 0 (nor large ones overflow early)
    return top * math.sqrt(sum(c * (m / top) ** 2 for c, m in terms))

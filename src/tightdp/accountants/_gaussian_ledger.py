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
    mu2 = 0.0
    for mech, count in ledger:
        pair = mech.privacy_losses()
        if not (isinstance(pair.remove, GaussianLoss) and pair.add == pair.remove):
            return None
        mu2 += count * pair.remove.mu * pair.remove.mu
    return math.sqrt(mu2)

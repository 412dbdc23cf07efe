"""The result of an audit: an empirical lower bound with its confidence and the assumptions it needs."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .._validation import check_real

__all__ = ["AuditBound", "check_beta"]


@dataclass(frozen=True)
class AuditBound:
    """An empirical lower bound on epsilon at ``delta``, holding with probability at least ``1 - beta``.

    ``epsilon_lower``: with probability at least ``1 - beta`` over the audit's randomness, the run is
    *not* ``(e, delta)``-DP for any ``e < epsilon_lower`` (0: the audit shows nothing). ``method``
    names the statistical test; ``details`` says the assumptions under which the statement holds
    (``details["assumptions"]``, a list of sentences) and the counts it came from.

    Parameters
    ----------
    epsilon_lower : float
        The empirical lower bound, finite and >= 0.
    delta : float
        The delta of the DP claim tested.
    beta : float
        One minus the confidence level.
    method : str
        The statistical test that gave the bound.
    details : mapping, default {}
        The assumptions (``"assumptions"``) and the counts behind the bound.

    Raises
    ------
    ValueError
        If ``epsilon_lower`` is negative, NaN or infinite.
    """

    epsilon_lower: float
    delta: float
    beta: float
    method: str
    details: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not (math.isfinite(self.epsilon_lower) and self.epsilon_lower >= 0.0):
            raise ValueError(f"epsilon_lower must be a finite number >= 0, got {self.epsilon_lower!r}")

    def to_dict(self) -> dict[str, Any]:
        """The bound as a JSON-ready dict.

        Returns
        -------
        dict
            ``epsilon_lower``, ``delta``, ``beta``, ``confidence``, ``method`` and ``details`` (numpy scalars and
            arrays as Python numbers and lists, non-finite floats as ``None``).
        """
        return {
            "epsilon_lower": self.epsilon_lower,
            "delta": self.delta,
            "beta": self.beta,
            "confidence": 1.0 - self.beta,
            "method": self.method,
            "details": _plain(dict(self.details)),
        }


def _plain(x: Any) -> Any:
    """``x`` with numpy scalars and arrays turned into Python numbers and lists (JSON-ready)."""
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if hasattr(x, "item") and not isinstance(x, (str, bytes)):
        try:
            return x.item()
        except (ValueError, AttributeError):
            return x.tolist()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def check_beta(beta: float) -> float:
    """``beta`` (one minus the confidence level) must be in (0, 1).

    Parameters
    ----------
    beta : float
        One minus the confidence level.

    Returns
    -------
    float
        ``beta`` as a float.

    Raises
    ------
    ValueError
        If ``beta`` is not a real number in (0, 1) (the message names ``beta``).
    """
    return check_real("beta", beta, low=0.0, high=1.0)

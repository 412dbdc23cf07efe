"""The answer type of every accountant: an interval ``lower <= truth <= upper``.

``upper`` is a proven bound when ``kind == "bound"``; ``lower`` is a proven
lower bound whenever it is not ``None``. An ``"approximation"`` carries no
guarantee (GDP/CLT, Edgeworth AEA) and says so in its ``kind``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

__all__ = ["Bounds"]

Kind = Literal["bound", "approximation"]


def _jsonable(x: Any) -> Any:
    if x is None:
        return None
    if isinstance(x, np.ndarray):
        return [_jsonable(v) for v in x.tolist()]
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, Mapping):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (float, np.floating)):
        x = float(x)
        return x if math.isfinite(x) else None
    if isinstance(x, (np.integer,)):
        return int(x)
    return x


@dataclass(frozen=True)
class Bounds:
    """``(lower, estimate, upper)`` for one privacy quantity (``epsilon``, ``delta`` or a GDP ``mu``).

    Fields are floats (or arrays of floats for vectorised queries), or ``None``
    where a method cannot give them (RDP has no lower bound). ``math.inf`` in
    ``upper`` is never silent: ``details["note"]`` says why.

    Parameters
    ----------
    lower : float, array or None
        A proven lower bound (``None``: none known).
    estimate : float, array or None
        The method's point estimate, between the two ends.
    upper : float, array or None
        A proven upper bound when ``kind == "bound"`` (``None``: none).
    quantity : {"epsilon", "delta", "mu"}, default "epsilon"
        What is bounded (``"mu"``: a mu-GDP parameter, per-example GDP queries).
    kind : {"bound", "approximation"}, default "bound"
        ``"approximation"``: no guarantee (GDP/CLT, Edgeworth).
    details : mapping, optional
        How the answer was computed, notes.

    Raises
    ------
    TypeError
        If ``lower``, ``estimate`` or ``upper`` is missing (a plain record: the values are not checked).
    """

    lower: Any
    estimate: Any
    upper: Any
    quantity: Literal["epsilon", "delta", "mu"] = "epsilon"
    kind: Kind = "bound"
    details: Mapping[str, Any] = field(default_factory=dict)

    def __iter__(self) -> Iterator[Any]:
        yield self.lower
        yield self.estimate
        yield self.upper

    @property
    def width(self) -> Any:
        """``upper - lower`` (``None`` when either end is missing)."""
        if self.lower is None or self.upper is None:
            return None
        return (
            np.asarray(self.upper) - np.asarray(self.lower)
            if isinstance(self.upper, np.ndarray)
            else self.upper - self.lower
        )

    def contains(self, value: float, *, slack: float = 0.0) -> bool:
        """Whether ``lower - slack <= value <= upper + slack`` (missing ends are unbounded).

        Parameters
        ----------
        value : float
            The value tested.
        slack : float, default 0.0
            A tolerance added on both sides.

        Returns
        -------
        bool
            Whether the interval (every element, for arrays) contains ``value``.

        Raises
        ------
        TypeError
            If ``value`` is not a number.
        """
        lo = -math.inf if self.lower is None else self.lower
        hi = math.inf if self.upper is None else self.upper
        return bool(np.all(lo - slack <= value) and np.all(value <= hi + slack))

    def to_dict(self) -> dict[str, Any]:
        """The interval as JSON-ready data; infinities become ``None`` with the note kept in ``details``.

        Returns
        -------
        dict
            ``lower``, ``estimate``, ``upper``, ``kind`` and (if any) ``details``.
        """
        out = {
            "lower": _jsonable(self.lower),
            "estimate": _jsonable(self.estimate),
            "upper": _jsonable(self.upper),
            "kind": self.kind,
        }
        if self.details:
            out["details"] = _jsonable(dict(self.details))
        return out

    def __repr__(self) -> str:
        def f(v: Any) -> str:
            if v is None:
                return "None"
            if isinstance(v, np.ndarray):
                return str(np.array2string(v, precision=6))
            return f"{v:.6g}"

        return (
            f"Bounds({self.quantity}: lower={f(self.lower)}, estimate={f(self.estimate)}, "
            f"upper={f(self.upper)}, kind={self.kind!r})"
        )

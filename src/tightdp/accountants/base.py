"""The one interface every accountant shares.

An accountant holds a ledger of ``(mechanism, count)`` entries ("what ran")
and answers ``epsilon(delta)`` and ``delta(epsilon)`` with a ``Bounds``.
``compose`` validates everything first and only then appends, so a failed
call leaves the accountant unchanged; it returns the accountant so calls
chain. State round-trips through ``to_dict`` / ``from_dict`` (and JSON).
"""

from __future__ import annotations

import json
import math
from abc import ABC, abstractmethod
from typing import Any, ClassVar, Iterable, Self

import numpy as np

from .._validation import check_count, check_delta, check_real_array
from ..bounds import Bounds
from ..errors import GridTooLargeError, UnsupportedMechanismError
from ..mechanisms import Mechanism, mechanism_from_dict

__all__ = ["Accountant", "accountant_from_dict", "ACCOUNTANTS"]

ACCOUNTANTS: dict[str, type["Accountant"]] = {}


def _out_of_memory(what: str, exc: MemoryError) -> GridTooLargeError:
    """A refusal, with the reason, instead of numpy's MemoryError (an accountant's grid that does not fit)."""
    detail = " ".join(str(exc).split()) or "MemoryError"
    return GridTooLargeError(f"out of memory computing {what} ({detail}): the grid this accuracy needs does not fit in "
                             "this machine's memory; a looser eps_error / rel_error needs a smaller one")


class Accountant(ABC):
    """Base class: ledger, validation, serialisation. Subclasses implement the maths.

    Subclasses define ``name`` (registry key, also the CLI's ``--accountant``),
    ``kind`` (``"bound"`` or ``"approximation"``), ``options()`` (constructor
    keyword arguments, JSON-ready), ``_supports(mechanism)``, ``_epsilon(delta)``
    and ``_delta(epsilons)``.
    """

    name: ClassVar[str] = ""
    kind: ClassVar[str] = "bound"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("name"):
            ACCOUNTANTS[cls.name] = cls

    def __init__(self) -> None:
        self._ledger: tuple[tuple[Mechanism, int], ...] = ()

    # ---------------------------------------------------------------- ledger
    @property
    def ledger(self) -> tuple[tuple[Mechanism, int], ...]:
        """The composed ``(mechanism, count)`` entries, in order."""
        return self._ledger

    def compose(self, mechanism: Mechanism | Iterable, count: int = 1) -> Self:
        """Add ``count`` runs of ``mechanism`` (or a sequence of mechanisms / ``(mechanism, count)`` pairs).

        Everything is validated before the ledger changes.
        """
        entries = _normalise_entries(mechanism, count)
        for mech, _ in entries:
            if not self._supports(mech):
                raise UnsupportedMechanismError(
                    f"the {self.name} accountant cannot analyse {type(mech).__name__}")
        self._ledger = self._ledger + tuple(entries)
        self._ledger_changed()
        return self

    def _ledger_changed(self) -> None:
        """Hook: drop caches that depend on the ledger."""

    def _supports(self, mechanism: Mechanism) -> bool:
        return True

    # --------------------------------------------------------------- queries
    def epsilon(self, delta: float) -> Bounds:
        """Bounds on the smallest epsilon such that the composition is (epsilon, delta)-DP."""
        delta = check_delta("delta", delta)
        if not self._ledger:
            return Bounds(0.0, 0.0, 0.0, "epsilon", self.kind, {"note": "nothing composed"})
        try:
            return self._epsilon(delta)
        except MemoryError as exc:
            raise _out_of_memory("epsilon", exc) from None

    def delta(self, epsilon) -> Bounds:
        """Bounds on delta(epsilon), the hockey-stick divergence; ``epsilon`` may be an array."""
        eps = check_real_array("epsilon", epsilon, low=0.0)
        if np.isinf(eps).any():
            raise ValueError("epsilon must be finite")
        scalar = np.ndim(epsilon) == 0
        if not self._ledger:
            z = 0.0 if scalar else np.zeros_like(eps)
            return Bounds(z, z, z, "delta", self.kind, {"note": "nothing composed"})
        try:
            out = self._delta(eps)
        except MemoryError as exc:
            raise _out_of_memory("delta", exc) from None
        if scalar:
            pick = lambda v: None if v is None else float(np.asarray(v).reshape(-1)[0])
            out = Bounds(pick(out.lower), pick(out.estimate), pick(out.upper), "delta", out.kind, out.details)
        return out

    @abstractmethod
    def _epsilon(self, delta: float) -> Bounds: ...

    @abstractmethod
    def _delta(self, epsilons: np.ndarray) -> Bounds: ...

    # --------------------------------------------------------- serialisation
    @abstractmethod
    def options(self) -> dict[str, Any]:
        """The constructor's keyword arguments (JSON-ready)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "accountant": self.name,
            "options": self.options(),
            "ledger": [{"mechanism": m.to_dict(), "count": c} for m, c in self._ledger],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Accountant":
        return accountant_from_dict(data)

    @classmethod
    def from_json(cls, text: str) -> "Accountant":
        return accountant_from_dict(json.loads(text))

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.to_dict() == other.to_dict()  # type: ignore[union-attr]

    def __repr__(self) -> str:
        opts = ", ".join(f"{k}={v!r}" for k, v in self.options().items())
        return f"{type(self).__name__}({opts}; {sum(c for _, c in self._ledger)} compositions)"


def accountant_from_dict(data: dict[str, Any]) -> Accountant:
    """Rebuild any registered accountant from ``Accountant.to_dict`` output."""
    if not isinstance(data, dict) or "accountant" not in data:
        raise ValueError("accountant state must be a dict with an 'accountant' key")
    cls = ACCOUNTANTS.get(data["accountant"])
    if cls is None:
        raise ValueError(f"unknown accountant {data['accountant']!r}; known: {', '.join(sorted(ACCOUNTANTS))}")
    acc = cls(**data.get("options", {}))
    entries = [(mechanism_from_dict(e["mechanism"]), e["count"]) for e in data.get("ledger", [])]
    if entries:
        acc.compose(entries)
    return acc


def _normalise_entries(mechanism, count) -> list[tuple[Mechanism, int]]:
    if isinstance(mechanism, Mechanism):
        return [(mechanism, check_count("count", count))]
    if isinstance(mechanism, (str, bytes, dict)) or not hasattr(mechanism, "__iter__"):
        raise ValueError(f"mechanism must be a Mechanism or a sequence of them, got {mechanism!r}")
    if count != 1:
        raise ValueError("count applies to a single mechanism; give (mechanism, count) pairs in a sequence")
    out: list[tuple[Mechanism, int]] = []
    for item in mechanism:
        if isinstance(item, Mechanism):
            out.append((item, 1))
        elif isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[0], Mechanism):
            out.append((item[0], check_count("count", item[1])))
        else:
            raise ValueError(f"each entry must be a Mechanism or a (mechanism, count) pair, got {item!r}")
    if not out:
        raise ValueError("mechanism sequence is empty")
    return out

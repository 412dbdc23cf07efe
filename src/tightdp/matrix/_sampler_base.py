"""The sampler base classes of ``tightdp.matrix.accounting``: ``Sampler`` (each sampler answers ``epsilon`` with
its own proof) and ``LedgerSampler`` (a sampler whose ends are compositions of tightdp mechanisms)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

from ..bounds import Bounds
from ..errors import TightDPError
from ._ledgers import Ledger, Upper, _combine, _epsilon_of
from .participation import Participation
from .strategies import Strategy

__all__ = ["LedgerSampler", "Sampler"]


class Sampler(ABC):
    """How a user's participations are drawn (abstract): each sampler answers ``epsilon`` with its own proof;
    overriding methods share the documented base methods' docstrings (``__init_subclass__``)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, member in vars(cls).items():
            if callable(member) and not name.startswith("_") and not getattr(member, "__doc__", None):
                for base in cls.__mro__[1:]:
                    doc = getattr(vars(base).get(name), "__doc__", None)
                    if doc:
                        member.__doc__ = doc
                        break

    #: name in ``to_dict`` (a run description / strategy file)
    type_name: ClassVar[str] = ""

    def to_dict(self) -> dict[str, Any]:
        """The sampler as a JSON-ready dict (``sampler_from_dict`` rebuilds it).

        Returns
        -------
        dict
            ``{"type": type_name, **fields}``, a participation as its own typed dict.
        """
        out: dict[str, Any] = {"type": self.type_name}
        for k, v in self.__dict__.items():
            out[k] = v.to_dict() if isinstance(v, Participation) else v
        return out

    @abstractmethod
    def epsilon(
        self, strategy: Strategy, sigma: float, n: int, delta: float, eps_error: float | None, rel_error: float | None
    ) -> Bounds:
        """Certified ``[lower, upper]`` on epsilon of ``n`` steps of ``strategy`` at noise ``sigma``.

        Parameters
        ----------
        strategy : Strategy
            The strategy ``C``.
        sigma : float
            The noise multiplier.
        n : int
            Steps.
        delta : float
            The target delta.
        eps_error, rel_error : float or None
            Accuracy of the engine.

        Returns
        -------
        Bounds
            The certified interval with ``details``.

        Raises
        ------
        ValueError
            The sampler does not apply to the strategy (the message says why).
        PrecisionError
            No upper bound within the engine's reach.
        """

    @abstractmethod
    def describe(self) -> str:
        """A short phrase for statements and ``details``.

        Returns
        -------
        str
            The phrase.
        """


class LedgerSampler(Sampler):
    """A sampler whose ends are compositions of tightdp mechanisms: ``ledgers`` returns ``(lower, upper,
    details)``, the upper possibly a tuple of alternative upper ledgers (each a proven bound: the smallest
    answer is kept)."""

    @abstractmethod
    def ledgers(self, strategy: Strategy, sigma: float, n: int) -> tuple[Ledger, Upper, dict[str, Any]]:
        """The attained lower ledger, the dominating upper ledger(s) and their details.

        Parameters
        ----------
        strategy : Strategy
            The strategy ``C``.
        sigma : float
            The noise multiplier.
        n : int
            Steps.

        Returns
        -------
        tuple
            ``(lower ledger, upper ledger or alternatives, details)``.

        Raises
        ------
        ValueError
            The sampler does not apply to the strategy.
        """

    def epsilon(
        self, strategy: Strategy, sigma: float, n: int, delta: float, eps_error: float | None, rel_error: float | None
    ) -> Bounds:
        lower_ledger, upper_ledger, details = self.ledgers(strategy, sigma, n)
        if isinstance(upper_ledger, tuple):  # alternatives, each an upper bound: keep the smallest
            ups, failures = [], []
            for i, u in enumerate(upper_ledger):
                if u:
                    try:
                        ups.append((_epsilon_of(u, delta, eps_error, rel_error), i))
                    except TightDPError as exc:  # an alternative out of the engine's reach: the others hold
                        failures.append(exc)
            if not ups:
                raise failures[0]
            up, which = min(ups, key=lambda r: r[0].upper)
            names = details.get("upper_names", ["no amplification", "noise splitting"])
            details = {k: v for k, v in details.items() if k != "upper_names"}
            details["upper_used"] = names[which]
            used = upper_ledger[which]
        else:
            used = upper_ledger
            up = _epsilon_of(upper_ledger, delta, eps_error, rel_error)
        if lower_ledger == used:
            lo = up.lower
        else:
            lo = _epsilon_of(lower_ledger, delta, eps_error, rel_error).lower if lower_ledger else 0.0
        return _combine(lo, up, details)

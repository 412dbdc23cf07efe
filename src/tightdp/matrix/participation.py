"""Participation patterns: how often and how far apart one user (or example) may take part in a run of a
matrix mechanism. ``tightdp.matrix.sensitivity`` bounds a strategy's sensitivity over them; the samplers of
``tightdp.matrix.accounting`` use them for their no-amplification ends.
"""

from __future__ import annotations

import itertools
import math
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from .._validation import check_count
from .strategies import reject

__all__ = ["SINGLE", "Cyclic", "MinSeparation", "Participation", "PerEpoch", "participation_from_dict"]


class Participation(ABC):
    """How often and how far apart one user may take part (abstract); overriding methods share these
    docstrings (``__init_subclass__``)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, member in vars(cls).items():
            if callable(member) and not name.startswith("_") and not getattr(member, "__doc__", None):
                base = getattr(Participation, name, None)
                if base is not None and base.__doc__:
                    member.__doc__ = base.__doc__

    #: the name in ``to_dict`` (a run description / strategy file)
    type_name: ClassVar[str] = ""

    def to_dict(self) -> dict[str, Any]:
        """The participation as a JSON-ready dict (``participation_from_dict`` rebuilds it).

        Returns
        -------
        dict
            ``{"type": type_name, **fields}``.
        """
        return {"type": self.type_name, **self.__dict__}

    def count(self, n: int, limit: int) -> int:
        """The number of patterns ``patterns(n)`` yields, or ``limit + 1`` once above ``limit``.

        Parameters
        ----------
        n : int
            The number of steps.
        limit : int
            Stop counting above it.

        Returns
        -------
        int
            The count, at most ``limit + 1``.

        Raises
        ------
        TypeError
            Non-integer arguments.
        """
        return sum(1 for _ in itertools.islice(self.patterns(n), limit + 1))

    @abstractmethod
    def max_count(self, n: int) -> int:
        """The most participations of one user in ``n`` steps.

        Parameters
        ----------
        n : int
            The number of steps (``>= 1``).

        Returns
        -------
        int
            The count.

        Raises
        ------
        TypeError
            ``n`` not an integer.
        """

    @abstractmethod
    def patterns(self, n: int) -> Iterator[tuple[int, ...]]:
        """Every maximal pattern (all subsets of a pattern are dominated by it when ``M >= 0``; the exact
        search also scores the subsets, see ``_pattern_bounds``).

        Parameters
        ----------
        n : int
            The number of steps (``>= 1``).

        Yields
        ------
        tuple of int
            The steps of one pattern, increasing.

        Raises
        ------
        TypeError
            ``n`` not an integer.
        """

    @abstractmethod
    def describe(self) -> str:
        """A short phrase for statements and ``details``.

        Returns
        -------
        str
            The phrase.
        """


@dataclass(frozen=True, kw_only=True)
class MinSeparation(Participation):
    """At most ``max_participations`` steps (``None``: as many as fit), any two at least ``min_sep`` apart
    (``min_sep = 1``: any steps; multi-epoch training with ``n / k`` steps per epoch: ``min_sep = n / k``).

    Parameters
    ----------
    max_participations : int or None, optional
        The most participations (default 1; ``None``: as many as fit).
    min_sep : int, optional
        The least distance between two participations (default 1).

    Raises
    ------
    ValueError
        Counts below one.
    """

    type_name: ClassVar[str] = "min_separation"

    max_participations: int | None = 1
    min_sep: int = 1

    def __post_init__(self) -> None:
        if self.max_participations is not None:
            object.__setattr__(self, "max_participations", check_count("max_participations", self.max_participations))
        object.__setattr__(self, "min_sep", check_count("min_sep", self.min_sep))

    def max_count(self, n: int) -> int:
        fit = -(-n // self.min_sep)
        return fit if self.max_participations is None else min(fit, self.max_participations)

    def count(self, n: int, limit: int) -> int:
        # the non-empty patterns of every size up to max_count, in closed form
        total = 0
        for r in range(1, self.max_count(n) + 1):
            total += math.comb(n - (r - 1) * (self.min_sep - 1), r)
            if total > limit:
                return limit + 1
        return total

    def patterns(self, n: int) -> Iterator[tuple[int, ...]]:
        k, b = self.max_count(n), self.min_sep

        def rec(start: int, left: int, acc: tuple[int, ...]) -> Iterator[tuple[int, ...]]:
            if left == 0 or start >= n:
                yield acc
                return
            extended = False
            for i in range(start, n):
                extended = True
                yield from rec(i + b, left - 1, acc + (i,))
            if not extended:
                yield acc

        seen = set()
        for p in rec(0, k, ()):
            if p and p not in seen:
                seen.add(p)
                yield p

    def describe(self) -> str:
        k = "any number of" if self.max_participations is None else f"up to {self.max_participations}"
        return f"{k} participations at least {self.min_sep} steps apart"


#: one participation per user
SINGLE = MinSeparation(max_participations=1)


@dataclass(frozen=True, kw_only=True)
class Cyclic(Participation):
    """Cyclic participation: the data split into ``period`` groups, group ``j`` active at ``j, j + period, ...``
    (BandMF's cyclic sampling, jax_privacy's ``num_bands`` groups; multi-epoch with fixed batch order).

    Parameters
    ----------
    period : int
        The number of groups (``>= 1``).

    Raises
    ------
    ValueError
        ``period`` below one.
    """

    type_name: ClassVar[str] = "cyclic"

    period: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "period", check_count("period", self.period))

    def max_count(self, n: int) -> int:
        return -(-n // self.period)

    def patterns(self, n: int) -> Iterator[tuple[int, ...]]:
        for j in range(min(self.period, n)):
            yield tuple(range(j, n, self.period))

    def describe(self) -> str:
        return f"cyclic participation every {self.period} steps"


@dataclass(frozen=True, kw_only=True)
class PerEpoch(Participation):
    """At most one participation in each epoch ``[e t, (e + 1) t)`` of ``t = steps_per_epoch`` steps, anywhere in
    it: random reshuffling or per-epoch random allocation (``EpochAllocation``), and multi-epoch training that
    visits each example once per epoch in any order. Two participations of consecutive epochs may be adjacent
    steps, so this is not a min-separation pattern.

    Parameters
    ----------
    steps_per_epoch : int
        The epoch length ``t`` (``>= 1``; the last epoch may be shorter).

    Raises
    ------
    ValueError
        ``steps_per_epoch`` below one.
    """

    type_name: ClassVar[str] = "per_epoch"

    steps_per_epoch: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "steps_per_epoch", check_count("steps_per_epoch", self.steps_per_epoch))

    def epochs(self, n: int) -> list[range]:
        """The epochs' steps.

        Parameters
        ----------
        n : int
            The number of steps.

        Returns
        -------
        list of range
            One range per epoch, the last possibly shorter.

        Raises
        ------
        TypeError
            ``n`` not an integer.
        """
        t = self.steps_per_epoch
        return [range(a, min(a + t, n)) for a in range(0, n, t)]

    def max_count(self, n: int) -> int:
        return -(-n // self.steps_per_epoch)

    def count(self, n: int, limit: int) -> int:
        total = 1
        for e in self.epochs(n):
            total *= len(e)
            if total > limit:
                return limit + 1
        return total

    def patterns(self, n: int) -> Iterator[tuple[int, ...]]:
        # the maximal patterns: one step in every epoch (their subsets are scored by the exact search)
        yield from itertools.product(*self.epochs(n))

    def describe(self) -> str:
        return f"at most one participation per epoch of {self.steps_per_epoch} steps"


_TYPES: dict[str, type[Participation]] = {cls.type_name: cls for cls in (MinSeparation, Cyclic, PerEpoch)}


def participation_from_dict(d: dict[str, Any]) -> Participation:
    """The participation a ``to_dict`` produced.

    Parameters
    ----------
    d : dict
        ``{"type": "min_separation" | "cyclic" | "per_epoch", **fields}``.

    Returns
    -------
    Participation
        The participation.

    Raises
    ------
    ValueError
        An unknown type or bad fields (the message names them).
    """
    if not isinstance(d, dict):
        reject(f"participation must be a dict with a 'type', got {d!r}")
    fields = dict(d)
    kind = fields.pop("type", None)
    if kind not in _TYPES:
        reject(f"participation type must be one of {sorted(_TYPES)}, got {kind!r}")
    try:
        return _TYPES[kind](**fields)
    except TypeError as exc:
        raise ValueError(f"bad fields for participation type {kind!r}: {exc}") from None

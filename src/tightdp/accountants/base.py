"""The one interface every accountant shares.

An accountant holds a ledger of ``(mechanism, count)`` entries ("what ran")
and answers ``epsilon(delta)`` and ``delta(epsilon)`` with a ``Bounds``.
``compose`` validates everything first and only then appends, so a failed
call leaves the accountant unchanged; it returns the accountant so calls
chain. State round-trips through ``to_dict`` / ``from_dict`` (and JSON).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any, ClassVar, Self

import numpy as np

from .._types import ArrayLike, FloatArray
from .._validation import check_count, check_delta, check_real_array
from ..bounds import Bounds, Kind
from ..errors import GridTooLargeError, UnsupportedMechanismError
from ..mechanisms import Mechanism, mechanism_from_dict

__all__ = ["Accountant", "accountant_from_dict", "ACCOUNTANTS"]

ACCOUNTANTS: dict[str, type[Accountant]] = {}


def _out_of_memory(what: str, exc: MemoryError) -> GridTooLargeError:
    """A refusal, with the reason, instead of numpy's MemoryError (an accountant's grid that does not fit)."""
    detail = " ".join(str(exc).split()) or "MemoryError"
    return GridTooLargeError(
        f"out of memory computing {what} ({detail}): the grid this accuracy needs does not fit in "
        "this machine's memory; a looser eps_error / rel_error needs a smaller one"
    )


class Accountant(ABC):
    """Base class: ledger, validation, serialisation. Subclasses implement the maths.

    Subclasses define ``name`` (registry key, also the CLI's ``--accountant``),
    ``kind`` (``"bound"`` or ``"approximation"``), ``options()`` (constructor
    keyword arguments, JSON-ready), ``_supports(mechanism)``, ``_epsilon(delta)``
    and ``_delta(epsilons)``.
    """

    name: ClassVar[str] = ""
    kind: ClassVar[Kind] = "bound"

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

    def compose(self, mechanism: Mechanism | Iterable[Any], count: int = 1) -> Self:
        """Add ``count`` runs of ``mechanism`` (or a sequence of mechanisms / ``(mechanism, count)`` pairs).

        Everything is validated before the ledger changes.

        Parameters
        ----------
        mechanism : Mechanism or iterable
            One mechanism, or a non-empty sequence of mechanisms and ``(mechanism, count)`` pairs.
        count : int, default 1
            Number of runs of a single ``mechanism``, ``>= 1`` (a sequence carries its own counts).

        Returns
        -------
        Accountant
            ``self``, so calls chain.

        Raises
        ------
        ValueError
            A malformed entry or a count below 1.
        UnsupportedMechanismError
            A mechanism this accountant cannot analyse.
        """
        entries = _normalise_entries(mechanism, count)
        for mech, _ in entries:
            if not self._supports(mech):
                raise UnsupportedMechanismError(f"the {self.name} accountant cannot analyse {type(mech).__name__}")
        self._ledger = self._ledger + tuple(entries)
        self._ledger_changed()
        return self

    def _ledger_changed(self) -> None:  # noqa: B027 (an optional hook: most accountants keep no cache)
        """Hook: drop caches that depend on the ledger."""

    def _supports(self, mechanism: Mechanism) -> bool:
        return True

    # --------------------------------------------------------------- queries
    def epsilon(self, delta: float) -> Bounds:
        """Bounds on the smallest epsilon such that the composition is (epsilon, delta)-DP.

        Parameters
        ----------
        delta : float
            Target delta in ``(0, 1)``.

        Returns
        -------
        Bounds
            ``lower <= epsilon(delta) <= upper`` (certified for ``kind="bound"``), with an estimate and
            details; the lower end only from pairs attained by neighbouring data sets.

        Raises
        ------
        ValueError
            ``delta`` out of range.
        GridTooLargeError
            The query needs more memory than the grid cap or the machine allows.
        PrecisionError
            No certified answer in double precision.
        """
        delta = check_delta("delta", delta)
        if not self._ledger:
            return Bounds(0.0, 0.0, 0.0, "epsilon", self.kind, {"note": "nothing composed"})
        try:
            return self._attained_lower(self._query("epsilon", delta), "epsilon", delta)
        except MemoryError as exc:
            raise _out_of_memory("epsilon", exc) from None

    def delta(self, epsilon: ArrayLike) -> Bounds:
        """Bounds on delta(epsilon), the hockey-stick divergence; ``epsilon`` may be an array.

        Parameters
        ----------
        epsilon : float or array_like
            Finite epsilons, ``>= 0``.

        Returns
        -------
        Bounds
            ``(lower, estimate, upper)`` of delta at each epsilon (floats for a scalar ``epsilon``).

        Raises
        ------
        ValueError
            An epsilon negative, infinite, NaN or not real.
        GridTooLargeError
            The query needs more memory than the grid cap or the machine allows.
        """
        eps = check_real_array("epsilon", epsilon, low=0.0)
        if np.isinf(eps).any():
            raise ValueError("epsilon must be finite")
        scalar = np.ndim(epsilon) == 0
        if not scalar and eps.size == 0:  # nothing asked: an empty answer, from every accountant alike
            empty = np.zeros(0)
            return Bounds(empty, empty.copy(), empty.copy(), "delta", self.kind, {"note": "no epsilon given"})
        if not self._ledger:
            z = 0.0 if scalar else np.zeros_like(eps)
            return Bounds(z, z, z, "delta", self.kind, {"note": "nothing composed"})
        try:
            out = self._attained_lower(self._query("delta", eps), "delta", eps)
        except MemoryError as exc:
            raise _out_of_memory("delta", exc) from None
        if scalar:

            def pick(v: Any) -> float | None:
                return None if v is None else float(np.asarray(v).reshape(-1)[0])

            out = Bounds(pick(out.lower), pick(out.estimate), pick(out.upper), "delta", out.kind, out.details)
        return out

    # ------------------------------------------------ lower ends from attained pairs only
    def _attained_ledger(self) -> tuple[tuple[Mechanism, int], ...] | None:
        """The ledger whose pairs are attained (``Mechanism.attained_mechanism``): ``None`` when it is the
        ledger itself, ``()`` when some step has no attained pair (no certified lower end)."""
        entries = []
        same = True
        for mech, count in self._ledger:
            low = mech.attained_mechanism()
            if low is None:
                return ()
            same = same and low is mech
            entries.append((low, count))
        return None if same else tuple(entries)

    def epsilon_lower_end(self, delta: float) -> float:
        """The certified lower end of ``epsilon(delta)`` alone: what a search over candidate attained pairs needs,
        without the second engine query that the paid upper end of closed-form pairs costs.

        Parameters
        ----------
        delta : float
            Target delta in ``(0, 1)``.

        Returns
        -------
        float
            ``epsilon(delta).lower`` (from attained pairs only, paid for rounding), 0 where no step offers one.

        Raises
        ------
        ValueError
            ``delta`` out of range.
        PrecisionError
            No certified answer in double precision.
        """
        delta = check_delta("delta", delta)
        ledger = self._attained_ledger()
        if not self._ledger or ledger == ():
            return 0.0
        acc = self if ledger is None else type(self)(**self.options()).compose(list(ledger))
        low = acc._query("epsilon", delta, with_upper=False).lower
        return 0.0 if low is None else float(low)

    def _query(self, quantity: str, arg: Any, *, with_upper: bool = True) -> Bounds:
        """The engine's bounds (``_epsilon(delta)`` or ``_delta(epsilons)``), paid for the rounding of masses
        computed from closed forms (``Mechanism.masses_rel_error``).

        With every mass of step ``i`` within a factor ``1 +- rho_i`` of the exact pair's, the composed masses of
        ``n = sum c_i`` steps are within ``A = prod (1 + rho_i)^c_i`` above and ``B = prod (1 - rho_i)^c_i``
        below, so with ``kappa = log(A / B)`` the exact curve and the computed one ``delta~`` satisfy
        ``delta~(eps + kappa) / A <= delta(eps) <= delta~(eps - kappa) / B`` (for ``eps < kappa`` the right side
        is ``(delta~(0) + A (1 - e^(eps - kappa))) / B``). For epsilon: the lower end at ``delta A``, less
        ``kappa``; the upper end at ``delta B``, plus ``kappa``. A thousand steps at ``rho = 1e-12`` cost 2e-9.
        ``with_upper=False``: the lower end alone (one engine query instead of two), the upper end ``inf`` (or 1).
        """
        rounding = [(m.masses_rel_error(), c) for m, c in self._ledger]
        if all(rho == 0.0 for rho, _ in rounding):
            return self._epsilon(arg) if quantity == "epsilon" else self._delta(arg)
        log_a = sum(c * np.log1p(rho) for rho, c in rounding)
        log_b = sum(c * np.log1p(-rho) for rho, c in rounding)
        kappa = float(log_a - log_b)
        details: dict[str, Any] = {"closed_form_rounding": kappa}
        if quantity == "epsilon":
            delta = float(arg)
            raised = delta * float(np.exp(log_a))
            lower: Any = 0.0
            high = None
            if raised < 1.0:
                low = self._epsilon(raised)
                lower = None if low.lower is None else max(0.0, float(low.lower) - kappa)
                high = low
            upper: Any = np.inf
            if high is None and not with_upper:  # the raised delta reaches 1: lower end 0, no query needed
                return Bounds(0.0, 0.0, np.inf, "epsilon", self.kind, details)
            if with_upper:
                high = self._epsilon(delta * float(np.exp(log_b)))
                upper = None if high.upper is None else float(high.upper) + kappa
        else:
            eps = np.asarray(arg, float)
            low = high = self._delta(eps + kappa)
            lower = None if low.lower is None else np.asarray(low.lower, float) * float(np.exp(-log_a))
            upper = np.ones_like(eps)
            if with_upper:
                shifted = eps - kappa
                high = self._delta(np.maximum(shifted, 0.0))
                upper = None
                if high.upper is not None:
                    slack = np.where(shifted < 0.0, -np.expm1(np.minimum(shifted, 0.0)) * float(np.exp(log_a)), 0.0)
                    upper = np.minimum((np.asarray(high.upper, float) + slack) * float(np.exp(-log_b)), 1.0)
        assert high is not None  # every path that reaches here queried the engine
        est = high.estimate
        details.update(high.details)
        if est is not None and upper is not None:
            est = np.minimum(np.asarray(est, float), upper)
            if lower is not None:
                est = np.maximum(est, lower)
            est = float(est) if np.ndim(est) == 0 else est
        return Bounds(lower, est, upper, high.quantity, high.kind, details)

    def _attained_lower(self, out: Bounds, quantity: str, arg: Any) -> Bounds:
        """``out`` with its lower end taken from the attained ledger (``Mechanism`` says why).

        The accountant's own lower end bounds the curve of the composed dominating pairs; where some
        step's pair is not attained by neighbouring data sets, that is no lower bound on the mechanism.
        Then the lower end is the same accountant's (same options) certified lower end of the ledger of
        attained pairs, capped at ``upper``, or 0 where no step offers one; ``estimate`` is clipped into
        the new interval. A ledger of attained pairs is returned unchanged.
        """
        if out.lower is None or not np.any(np.asarray(out.lower) > 0):
            return out
        ledger = self._attained_ledger()
        if ledger is None:
            return out
        details = dict(out.details)
        details["dominating_pair_lower"] = _jsonable_end(out.lower)
        if not ledger:
            names = sorted({type(m).__name__ for m, _ in self._ledger if m.attained_mechanism() is None})
            lower = np.zeros_like(np.asarray(out.lower, float))
            details["lower"] = (
                f"0: no pair attained by neighbouring data sets is known for {', '.join(names)} "
                "(the dominating pair's lower end certifies only that pair)"
            )
        else:
            twin = type(self)(**self.options())
            try:
                low = twin.compose(list(ledger))._query(quantity, arg, with_upper=False)
                lower = np.asarray(low.lower if low.lower is not None else 0.0, float)
                details["lower"] = "certified lower end of the attained pairs: " + ", ".join(
                    sorted({m.describe() for m, _ in ledger})
                )
            except (ArithmeticError, UnsupportedMechanismError) as exc:  # PrecisionError included
                lower = np.zeros_like(np.asarray(out.lower, float))
                details["lower"] = f"0: the attained pairs could not be certified ({exc})"
        upper = np.asarray(out.upper, float)
        lower = np.minimum(lower, upper)
        est = np.minimum(np.maximum(np.asarray(out.estimate, float), lower), upper)
        if np.ndim(out.lower) == 0:
            return Bounds(float(lower), float(est), out.upper, out.quantity, out.kind, details)
        return Bounds(lower, est, out.upper, out.quantity, out.kind, details)

    @abstractmethod
    def _epsilon(self, delta: float) -> Bounds: ...

    @abstractmethod
    def _delta(self, epsilons: FloatArray) -> Bounds: ...

    # --------------------------------------------------------- serialisation
    @abstractmethod
    def options(self) -> dict[str, Any]:
        """The constructor's keyword arguments (JSON-ready)."""

    def to_dict(self) -> dict[str, Any]:
        """The accountant as JSON-ready data: its name, options and ledger.

        Returns
        -------
        dict
            ``{"accountant", "options", "ledger"}``; ``accountant_from_dict`` rebuilds it.
        """
        return {
            "accountant": self.name,
            "options": self.options(),
            "ledger": [{"mechanism": m.to_dict(), "count": c} for m, c in self._ledger],
        }

    def to_json(self) -> str:
        """``to_dict`` as a JSON string.

        Returns
        -------
        str
            The JSON text.
        """
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Accountant:
        """Rebuild an accountant from ``to_dict`` output (``accountant_from_dict``).

        Parameters
        ----------
        data : dict
            ``to_dict`` output.

        Returns
        -------
        Accountant
            The registered accountant it names, with its options and ledger.

        Raises
        ------
        ValueError
            Malformed data or an unknown accountant name.
        """
        return accountant_from_dict(data)

    @classmethod
    def from_json(cls, text: str) -> Accountant:
        """Rebuild an accountant from ``to_json`` output.

        Parameters
        ----------
        text : str
            ``to_json`` output.

        Returns
        -------
        Accountant
            The registered accountant it names, with its options and ledger.

        Raises
        ------
        ValueError
            Malformed JSON or data, or an unknown accountant name.
        """
        return accountant_from_dict(json.loads(text))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Accountant) and type(self) is type(other) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        opts = ", ".join(f"{k}={v!r}" for k, v in self.options().items())
        return f"{type(self).__name__}({opts}; {sum(c for _, c in self._ledger)} compositions)"


def _jsonable_end(value: ArrayLike) -> float | list[float]:
    """A float or a list of floats (for ``details``)."""
    arr = np.asarray(value, float)
    return float(arr) if arr.ndim == 0 else arr.tolist()


def accountant_from_dict(data: dict[str, Any]) -> Accountant:
    """Rebuild any registered accountant from ``Accountant.to_dict`` output.

    Parameters
    ----------
    data : dict
        ``{"accountant": name, "options": {...}, "ledger": [...]}``.

    Returns
    -------
    Accountant
        The accountant, with its options and ledger.

    Raises
    ------
    ValueError
        Not a dict with an ``"accountant"`` key, or an unknown accountant name.
    """
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


def _normalise_entries(mechanism: Mechanism | Iterable[Any], count: int) -> list[tuple[Mechanism, int]]:
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

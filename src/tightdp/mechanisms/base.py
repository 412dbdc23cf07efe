"""What ran (``Mechanism``): the user's vocabulary.

A ``Mechanism`` is an immutable, validated, serialisable description such as ``Gaussian(noise_multiplier=1.1)``.
It knows its dominating pairs and hands the engine one ``PrivacyLoss`` (``tightdp.losses``) per neighbouring
direction, as a ``LossPair``.
"""

from __future__ import annotations

import dataclasses
import math
from abc import ABC, abstractmethod
from typing import Any, ClassVar, NamedTuple

from ..losses import PrivacyLoss
from ..losses.base import _inherit_docstrings

__all__ = ["Mechanism", "LossPair", "mechanism_from_dict"]


class LossPair(NamedTuple):
    """The two directions of a neighbouring relation, as privacy losses.

    ``remove``: P = M(D), Q = M(D') with D' = D minus one record (Koskela et al. 2020, Sec. 6.1,
    delta_X/Y). ``add``: the reverse pair. For symmetric relations (substitute, or mechanisms without
    subsampling) both fields hold the same loss.

    Parameters
    ----------
    remove : PrivacyLoss
        The loss of the remove direction.
    add : PrivacyLoss
        The loss of the add direction.

    Raises
    ------
    TypeError
        If a field is missing (``NamedTuple``'s own check).
    """

    remove: PrivacyLoss
    add: PrivacyLoss

    @property
    def symmetric(self) -> bool:
        """Whether both directions hold the same loss (a symmetric relation)."""
        return self.remove == self.add


_REGISTRY: dict[str, type[Mechanism]] = {}
_U = 2.0**-53  # unit round-off
_TOP_ROUNDINGS = 8  # the closed-form contract of a computed loss value: within 8u (1 + |v|)


class Mechanism(ABC):
    """An immutable description of one privatised release ("what ran").

    Subclasses are frozen, keyword-only dataclasses that validate their
    parameters in ``__post_init__`` and register under ``type_name`` for
    serialisation.

    **Where lower ends come from.** An accountant's ``upper`` end bounds the curve of the pair
    ``privacy_losses()`` returns, which dominates the mechanism; its ``lower`` end is a lower bound on the
    mechanism's privacy only if that pair is *attained*: the exact output distributions of one concrete pair
    of neighbouring data sets (or a post-processing of them). Every concrete subclass declares it in its own
    class body: ``pair_attained = True`` (the pair is attained; the docstring names the data sets), or
    ``False`` with ``attained_mechanism()`` overridden to return a mechanism whose pair *is* attained by
    neighbouring data sets of this one (its curve lies below this mechanism's true curve), or ``None``
    (no certified lower end: ``lower = 0``). The accountants take lower ends only from attained pairs
    (``tightdp.accountants.base``); ``tests/mechanisms/test_attained_pairs.py`` enumerates the subclasses.

    For a ledger of several steps the attained pairs must be realised by *one* pair of data sets for all
    steps at once. Each declaration below uses the same canonical pair: the differing record's clipped
    contribution is a fixed unit vector (the query's full sensitivity) at every step and every other
    record contributes 0 (or, where the docstring says so, a fixed value), which the queries of an
    adaptive composition may choose at every step.
    """

    type_name: ClassVar[str] = ""
    #: whether ``privacy_losses()`` is attained by a concrete pair of neighbouring data sets (see above);
    #: ``None`` on the base class: undeclared, treated as "no certified lower end"
    pair_attained: ClassVar[bool | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _inherit_docstrings(cls)
        name = cls.__dict__.get("type_name")
        if name:
            _REGISTRY[name] = cls

    @abstractmethod
    def privacy_losses(self) -> LossPair:
        """The dominating pairs' privacy losses for the remove and add directions.

        Returns
        -------
        LossPair
            One ``PrivacyLoss`` per direction; an accountant's upper end bounds their curves, which dominate
            the mechanism's (the class docstring states the pair and, where attained, the data sets).

        Raises
        ------
        UnsupportedMechanismError
            If the mechanism cannot be accounted as a single pair (the message names what to use instead).
        """

    def attained_mechanism(self) -> Mechanism | None:
        """The mechanism whose pair gives this one's certified lower ends.

        Returns
        -------
        Mechanism or None
            ``self`` when ``pair_attained``; otherwise a mechanism whose ``privacy_losses()`` is the exact
            pair of one concrete pair of neighbouring data sets of *this* mechanism (same directions), so
            every lower bound on its curve is a lower bound on this mechanism's; ``None`` when there is
            none (lower ends are then 0). Subclasses with ``pair_attained = False`` override it.
        """
        return self if self.pair_attained else None

    def loss_top_error(self) -> float:
        """How far the exact largest finite loss of ``privacy_losses()``'s pair can lie above the computed one.

        The accountants' support ceiling states ``delta(eps) = P(L = inf)`` exactly for ``eps`` at or beyond
        the composed loss's largest finite value, the sum of the steps' tops (``PrivacyLoss.support``). A top
        computed in floats (a randomized response's ``log(hi / lo)``) can lie an ulp below the exact top that
        the mechanism's parameters define, where ``delta`` is not yet ``P(L = inf)``; the ceiling adds this
        error to each step's top.

        Returns
        -------
        float
            A bound on ``exact top - computed top`` over both directions: by default ``8u (1 + |top|)`` for a
            finite top (``u`` the unit round-off; the closed-form contract of every loss, which covers a
            logarithm of ratios of sums of parameters), 0 for an unbounded loss. Mechanisms whose top *is* a
            parameter (``PureDP``, ``ApproximateDP``) or an exactly checked division (``Laplace``) return 0
            where it is exact.
        """
        pair = self.privacy_losses()
        tops = [t for t in (pair.remove.support()[1], pair.add.support()[1]) if math.isfinite(t)]
        return max((_TOP_ROUNDINGS * _U * (1.0 + abs(t)) for t in tops), default=0.0)

    def pure_epsilon(self) -> float | None:
        """The epsilon of a proven pure-DP guarantee for one use, or ``None`` where none is claimed.

        ``count`` adaptive uses of an epsilon-DP mechanism are ``(count epsilon)``-DP exactly, whatever delta
        (basic composition), which a numerical upper end may miss by its discretisation;
        ``tightdp.tuning.selection_epsilon`` caps its upper end by it.

        Returns
        -------
        float or None
            ``None`` by default; subclasses with a pure-DP proof (``PureDP`` and the selection mechanisms)
            return their epsilon.
        """
        return None

    def masses_rel_error(self) -> float:
        """A bound ``rho`` on the relative error of every output mass of ``privacy_losses()`` (both laws) against
        the exact pair it stands for; the accountants pay for it at both ends (``Accountant._query``).

        Returns
        -------
        float
            0 (the default: the losses are the pair, or the engine bounds their evaluation itself); a finite
            pair from closed-form probabilities says how far its floats may be from them.
        """
        return 0.0

    def to_dict(self) -> dict[str, Any]:
        """The mechanism as plain data, ``{"type": ..., **parameters}``; nested mechanisms serialise recursively.

        Returns
        -------
        dict
            A dictionary that ``mechanism_from_dict`` turns back into an equal mechanism.
        """
        out: dict[str, Any] = {"type": self.type_name}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            v = getattr(self, f.name)
            out[f.name] = v.to_dict() if isinstance(v, Mechanism) else v
        return out

    def describe(self) -> str:
        """A short human-readable description, ``Name(param=value, ...)``.

        Returns
        -------
        str
            The class name and its parameters.
        """
        params = ", ".join(f"{k}={v}" for k, v in self.to_dict().items() if k != "type")
        return f"{type(self).__name__}({params})"


def mechanism_from_dict(data: dict[str, Any]) -> Mechanism:
    """The mechanism that ``Mechanism.to_dict`` described (the inverse of ``to_dict``).

    Parameters
    ----------
    data : dict
        ``{"type": type_name, **parameters}``; nested dictionaries with a ``"type"`` key are mechanisms too.

    Returns
    -------
    Mechanism
        The validated mechanism.

    Raises
    ------
    ValueError
        If ``data`` is not a dictionary with a ``"type"`` key, names an unknown type, or its parameters fail
        the mechanism's validation.
    TypeError
        If ``data`` holds a parameter the mechanism does not take.

    Examples
    --------
    >>> from tightdp.mechanisms import Gaussian, mechanism_from_dict
    >>> mechanism_from_dict(Gaussian(noise_multiplier=1.0).to_dict()) == Gaussian(noise_multiplier=1.0)
    True
    """
    if not isinstance(data, dict) or "type" not in data:
        raise ValueError(f"mechanism must be a dict with a 'type' key, got {data!r}")
    cls = _REGISTRY.get(data["type"])
    if cls is None:
        raise ValueError(f"unknown mechanism type {data['type']!r}; known: {', '.join(sorted(_REGISTRY))}")
    kwargs = {
        k: (mechanism_from_dict(v) if isinstance(v, dict) and "type" in v else v)
        for k, v in data.items()
        if k != "type"
    }
    return cls(**kwargs)


class EpsilonDP:
    """Mixin for a mechanism whose ``epsilon`` is a proven pure-DP guarantee for one use (its class or module
    docstring gives the proof): ``Mechanism.pure_epsilon`` returns it. List it before ``Mechanism`` in the bases."""

    epsilon: float

    def pure_epsilon(self) -> float:
        """``epsilon``, the mechanism's proven pure-DP guarantee (``Mechanism.pure_epsilon``).

        Returns
        -------
        float
            ``epsilon``.
        """
        return float(self.epsilon)

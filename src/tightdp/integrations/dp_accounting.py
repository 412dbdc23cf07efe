"""Import dp-accounting ``DpEvent``s as tightdp mechanisms.

``from_dp_event(event)`` turns a dp-accounting (0.6) event tree into a list of
``(Mechanism, count)`` pairs that any tightdp accountant's ``compose`` takes::

    acc = PRVAccountant().compose(from_dp_event(event))

dp-accounting itself is never imported: events are recognised by their class
name (duck typing), so tightdp needs no dependency on it, and handlers live in
a registry keyed by that name (one small function per event type).

Semantics follow dp-accounting's PLD accountant for the default neighbouring
relation (add-or-remove one record; replace-one for randomized response and
the fixed-size samplers, as in dp-accounting and Koskela et al. 2020, Sec. 6.2-6.3):

=================================  ===========================================
``GaussianDpEvent(s)``             ``Gaussian(noise_multiplier=s)``
``LaplaceDpEvent(b)``              ``Laplace(scale=b)``
``RandomizedResponseDpEvent``      ``RandomizedResponse(noise_parameter, num_buckets)``
``PoissonSampledDpEvent(q, G)``    ``PoissonSampled(Gaussian, sampling_rate=q)``
``SampledWithoutReplacementDpEvent``  ``SampledWithoutReplacement(Gaussian, ...)``
``SampledWithReplacementDpEvent``  ``SampledWithReplacement(Gaussian, ...)``
``MixtureOfGaussiansDpEvent``      ``mechanisms.mixture.MixtureOfGaussians``
``TruncatedSubsampledGaussianDpEvent``  ``mechanisms.truncated.TruncatedPoissonSampled``:
                                   upper end from the revealed-S pair (at most
                                   Ganesh 2025's), lower end from an attained pair
                                   (Poisson at the kept probability); any
                                   dominance accountant (connect-dots)
``SelfComposedDpEvent(e, n)``      the entries of ``e`` with counts times ``n``
``ComposedDpEvent(es)``            the entries of each ``e`` in turn
``NoOpDpEvent``                    nothing (``PureDP(epsilon=0)`` if nothing else)
``NonPrivateDpEvent``              ``NonPrivate()``: the output reveals the
                                   record (all mass at infinite privacy loss),
                                   so PLD accountants report epsilon = inf
                                   with a note
``DiscreteLaplaceDpEvent``         ``DiscreteLaplace(noise_parameter, sensitivity)``
                                   (exact PLD); Poisson-sampled: ``PoissonSampledDiscrete``
``DiscreteGaussianDpEvent``        ``DiscreteGaussian(sigma, sensitivity)`` (exact PLD)
``EpsilonDeltaDpEvent``            ``ApproximateDP`` / ``PureDP`` (dominating pair)
``SingleEpochTreeAggregationDpEvent``  ``Gaussian(s, sensitivity=sqrt(depth))``
``ExponentialMechanismDpEvent``    ``ExponentialMechanism(epsilon)`` (bounded range)
``PermuteAndFlipDpEvent``          ``PermuteAndFlip(epsilon)`` (bounded range and pure DP)
=================================  ===========================================

Refused, each with its reason (``REFUSED_EVENTS``; docs/dp_events.md): ``ZCDpEvent``,
``RepeatAndSelectDpEvent``, ``UnsupportedDpEvent``, and the 2026 event ``RandomAllocationDpEvent``.

A zero noise multiplier (dp-accounting's spelling of "no noise") is imported
as non-private — under Poisson sampling at rate q < 1 as ``PoissonSampledNonPrivate``
(delta = q exactly: the record is revealed when it is sampled); a zero sampling
probability as a no-op. Everything else (``ZCDpEvent``, repeat-and-select, ``UnsupportedDpEvent``,
Poisson-sampled Laplace, ...) raises ``UnsupportedMechanismError`` naming the event type and the reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

from .._validation import check_count
from ..errors import UnsupportedMechanismError
from ..losses import DiscreteLoss
from ..mechanisms import (
    ApproximateDP,
    Gaussian,
    Laplace,
    Mechanism,
    PoissonSampled,
    PureDP,
    RandomizedResponse,
    SampledWithoutReplacement,
    SampledWithReplacement,
)
from ..mechanisms.base import LossPair
from ..mechanisms.discrete import DiscreteGaussian, DiscreteLaplace, PoissonSampledDiscrete
from ..mechanisms.selection import ExponentialMechanism, PermuteAndFlip

__all__ = [
    "from_dp_event",
    "NonPrivate",
    "NON_PRIVATE",
    "PoissonSampledNonPrivate",
    "SUPPORTED_EVENTS",
    "REFUSED_EVENTS",
]


@dataclass(frozen=True, kw_only=True)
class NonPrivate(Mechanism):
    """A release without privacy (dp-accounting's ``NonPrivateDpEvent``).

    Its dominating pair is the identity on one bit: ``P`` puts all mass where
    ``Q`` has none, so the privacy loss is ``+inf`` with probability one and
    ``delta(eps) = 1`` for every ``eps`` (total variation 1). Accountants that
    work on privacy losses report ``epsilon = inf`` with a note.

    Attained pair: a release that outputs the differing record's bit.

    References
    ----------
    Koskela et al. 2020 (privacy loss distributions, here with all mass at infinity).
    """

    type_name = "non_private"
    pair_attained = True

    def privacy_losses(self) -> LossPair:
        """The dominating pair: all mass at privacy loss ``+inf``, both ways.

        Returns
        -------
        LossPair
            The remove and add losses.
        """
        loss = DiscreteLoss(values=(0.0,), probs=(0.0,), infinity_mass=1.0)
        return LossPair(loss, loss)


#: What a non-private release is imported as.
NON_PRIVATE = NonPrivate()


@dataclass(frozen=True, kw_only=True)
class PoissonSampledNonPrivate(Mechanism):
    """A release without privacy, run on a Poisson sample of rate ``sampling_rate`` (add/remove neighbouring):
    dp-accounting's ``PoissonSampledDpEvent(q, GaussianDpEvent(0))``, exactly.

    Remove: ``P = q (revealed) + (1 - q) R`` against ``Q = R``: privacy loss ``+inf`` with probability ``q``
    and ``log(1 - q)`` otherwise. Add: ``P = R`` against ``Q = q (revealed) + (1 - q) R``: loss ``-log(1 - q)``
    with probability one. So ``delta(eps) = q`` for every ``eps >= 0`` (the record is revealed exactly when it is
    sampled), and compositions are exact, not merely dominated (``NonPrivate`` would say ``delta = 1``, a
    "certified lower bound" above the truth).

    Attained pair: the release of the sampled records themselves, on data sets with and without the record.

    Parameters
    ----------
    sampling_rate : float
        The Poisson rate ``q``, in (0, 1].

    Raises
    ------
    ValueError
        If ``sampling_rate`` is not in (0, 1].

    References
    ----------
    Koskela et al. 2020 (privacy loss distributions; the losses here are exact).
    """

    type_name = "poisson_sampled_non_private"
    pair_attained = True
    sampling_rate: float

    def __post_init__(self) -> None:
        from .._validation import check_probability

        object.__setattr__(self, "sampling_rate", check_probability("sampling_rate", self.sampling_rate))

    def privacy_losses(self) -> LossPair:
        """The exact pair: remove, ``+inf`` with probability ``q`` and ``log(1 - q)`` otherwise; add, ``-log(1 - q)``.

        Returns
        -------
        LossPair
            The remove and add losses (``NON_PRIVATE``'s for ``q = 1``).
        """
        q = self.sampling_rate
        if q >= 1.0:
            return NON_PRIVATE.privacy_losses()
        keep = math.log1p(-q)
        remove = DiscreteLoss(values=(keep,), probs=(1.0 - q,), infinity_mass=q)
        add = DiscreteLoss(values=(-keep,), probs=(1.0,))
        return LossPair(remove, add)


_Entries = list[tuple[Mechanism, int]]
_Handler = Callable[[Any, int], _Entries]
_H = TypeVar("_H", bound=_Handler)
_HANDLERS: dict[str, _Handler] = {}


def _handles(name: str) -> Callable[[_H], _H]:
    """Register the decorated function as the converter of the dp_accounting event class ``name``."""

    def deco(fn: _H) -> _H:
        _HANDLERS[name] = fn
        return fn

    return deco


def _name(event: Any) -> str:
    """The event's class name (dp_accounting's events are matched by name, so it is imported only by callers)."""
    return type(event).__name__


def _field(event: Any, attr: str) -> Any:
    """``event.attr``, or a ``ValueError`` saying the object is not that event."""
    try:
        return getattr(event, attr)
    except AttributeError:
        raise ValueError(f"{_name(event)} has no field {attr!r}; is it a dp_accounting DpEvent?") from None


def _convert(event: Any, count: int) -> _Entries:
    """The ``(mechanism, count)`` entries of ``event`` composed ``count`` times."""
    handler = _HANDLERS.get(_name(event))
    if handler is None and _name(event) in REFUSED_EVENTS:
        raise UnsupportedMechanismError(
            f"dp-accounting event {_name(event)} is refused: {REFUSED_EVENTS[_name(event)]}"
        )
    if handler is None:
        raise UnsupportedMechanismError(
            f"dp-accounting event {_name(event)} is not supported by tightdp; supported: {', '.join(sorted(_HANDLERS))}"
        )
    return handler(event, count)


@_handles("NoOpDpEvent")
def _noop(event: Any, count: int) -> _Entries:
    return []


@_handles("NonPrivateDpEvent")
def _non_private(event: Any, count: int) -> _Entries:
    return [(NON_PRIVATE, 1)]  # composing it again changes nothing: epsilon is already infinite


@_handles("GaussianDpEvent")
def _gaussian(event: Any, count: int) -> _Entries:
    s = _field(event, "noise_multiplier")
    if s == 0:
        return [(NON_PRIVATE, 1)]
    return [(Gaussian(noise_multiplier=s), count)]


@_handles("LaplaceDpEvent")
def _laplace(event: Any, count: int) -> _Entries:
    b = _field(event, "noise_multiplier")
    if b == 0:
        return [(NON_PRIVATE, 1)]
    return [(Laplace(scale=b), count)]


@_handles("RandomizedResponseDpEvent")
def _rr(event: Any, count: int) -> _Entries:
    if _field(event, "num_buckets") == 1:  # one possible output: no information (as in dp-accounting)
        return []
    if _field(event, "noise_parameter") == 0:  # always the true bucket: non-private
        return [(NON_PRIVATE, 1)]
    return [
        (
            RandomizedResponse(
                noise_parameter=_field(event, "noise_parameter"), num_buckets=_field(event, "num_buckets")
            ),
            count,
        )
    ]


@_handles("MixtureOfGaussiansDpEvent")
def _mog(event: Any, count: int) -> _Entries:
    try:
        from ..mechanisms.mixture import MixtureOfGaussians
    except ImportError:  # pragma: no cover - only while the mixture module is absent
        raise UnsupportedMechanismError(
            "dp-accounting event MixtureOfGaussiansDpEvent needs tightdp.mechanisms.mixture, "
            "which is not available in this installation"
        ) from None
    s = _field(event, "standard_deviation")
    if s == 0:
        sens = [float(x) for x in _field(event, "sensitivities")]
        probs = [float(p) for p in _field(event, "sampling_probs")]
        p_zero = sum(p for c, p in zip(sens, probs) if c == 0)
        if p_zero >= 1.0:
            return []  # the record never moves the output: a no-op
        if p_zero > 0.0:
            _sampled_non_private(event, f"a mixture that leaves the record out with probability {p_zero:g}")
        return [(NON_PRIVATE, 1)]
    return [
        (
            MixtureOfGaussians(
                noise_multiplier=s,
                sensitivities=tuple(_field(event, "sensitivities")),
                probabilities=tuple(_field(event, "sampling_probs")),
            ),
            count,
        )
    ]


def _sampled_non_private(event: Any, what: str) -> NoReturn:
    """A release without noise run on a random sample that may leave the record out: its delta is below 1,
    and tightdp has no exact pair for it (``NonPrivate`` would state delta = 1 as a *lower* bound too)."""
    raise UnsupportedMechanismError(
        f"dp-accounting event {_name(event)} with zero noise: a non-private release on {what}; its delta is "
        "below 1 (the record may be left out) and tightdp has no exact pair for it (NonPrivate would certify "
        "delta = 1 from below, above the truth); add noise, or use PoissonSampledDpEvent, which is exact"
    )


def _sampled_gaussian(event: Any, kind: str) -> Mechanism | str | None:
    """The Gaussian inside a sampling event; ``None`` for a no-op, ``"non-private"`` for zero noise."""
    inner = _field(event, "event")
    name = _name(inner)
    if name == "NoOpDpEvent":
        return None
    if name == "GaussianDpEvent":
        s = _field(inner, "noise_multiplier")
        return "non-private" if s == 0 else Gaussian(noise_multiplier=s)
    if name == "DiscreteLaplaceDpEvent" and kind == "Poisson sampling":
        a = _field(inner, "noise_parameter")
        return "non-private" if a == 0 else DiscreteLaplace(noise_parameter=a, sensitivity=_field(inner, "sensitivity"))
    raise UnsupportedMechanismError(
        f"dp-accounting event {_name(event)} of {name} is not supported by tightdp; "
        f"{kind} is supported for GaussianDpEvent{' and DiscreteLaplaceDpEvent' if kind == 'Poisson sampling' else ''} "
        "only"
    )


@_handles("PoissonSampledDpEvent")
def _poisson(event: Any, count: int) -> _Entries:
    q = _field(event, "sampling_probability")
    inner = _sampled_gaussian(event, "Poisson sampling")
    if q == 0 or inner is None:
        return []
    if isinstance(inner, str):  # "non-private"
        return [(PoissonSampledNonPrivate(sampling_rate=q), count)] if q < 1 else [(NON_PRIVATE, 1)]
    if isinstance(inner, DiscreteLaplace):
        return [(PoissonSampledDiscrete(mechanism=inner, sampling_rate=q), count)]
    return [(PoissonSampled(mechanism=inner, sampling_rate=q), count)]


@_handles("SampledWithoutReplacementDpEvent")
def _without(event: Any, count: int) -> _Entries:
    inner = _sampled_gaussian(event, "sampling without replacement")
    m, n = _field(event, "sample_size"), _field(event, "source_dataset_size")
    if inner is None or m == 0:
        return []
    if isinstance(inner, str):  # "non-private"
        if m >= n:  # everyone is in the sample: non-private exactly
            return [(NON_PRIVATE, 1)]
        _sampled_non_private(event, f"a sample of {m} of {n} drawn without replacement")
    return [(SampledWithoutReplacement(mechanism=inner, sample_size=m, dataset_size=n), count)]


@_handles("SampledWithReplacementDpEvent")
def _with(event: Any, count: int) -> _Entries:
    inner = _sampled_gaussian(event, "sampling with replacement")
    m, n = _field(event, "sample_size"), _field(event, "source_dataset_size")
    if inner is None or m == 0:
        return []
    if isinstance(inner, str):  # "non-private"
        _sampled_non_private(event, f"{m} draws with replacement from {n}")
    return [(SampledWithReplacement(mechanism=inner, sample_size=m, dataset_size=n), count)]


@_handles("TruncatedSubsampledGaussianDpEvent")
def _truncated(event: Any, count: int) -> _Entries:
    from ..mechanisms.truncated import TruncatedPoissonSampled

    n, q = _field(event, "dataset_size"), _field(event, "sampling_probability")
    b, s = _field(event, "truncated_batch_size"), _field(event, "noise_multiplier")
    if q == 0 or b == 0 or n == 0:  # nothing sampled (as in dp-accounting)
        return []
    if s == 0:
        _sampled_non_private(event, f"Poisson batches of rate {q:g} cut to {b}")
    return [
        (
            TruncatedPoissonSampled(
                mechanism=Gaussian(noise_multiplier=s), sampling_rate=q, dataset_size=n, max_batch_size=b
            ),
            count,
        )
    ]


@_handles("SelfComposedDpEvent")
def _self_composed(event: Any, count: int) -> _Entries:
    n = check_count("count", _field(event, "count"), minimum=0)
    if n == 0:
        return []
    return _convert(_field(event, "event"), count * n)


@_handles("ComposedDpEvent")
def _composed(event: Any, count: int) -> _Entries:
    out: _Entries = []
    for sub in _field(event, "events"):
        out.extend(_convert(sub, count))
    return out


# ---------------------------------------------------------------------------------------------------------
# discrete noise, tree aggregation, pure / approximate DP, and the events refused with their reason


@_handles("DiscreteLaplaceDpEvent")
def _discrete_laplace(event: Any, count: int) -> _Entries:
    """``DiscreteLaplace(noise_parameter, sensitivity)``: the exact PLD (``mechanisms.discrete``)."""
    a = _field(event, "noise_parameter")
    if a == 0:
        return [(NON_PRIVATE, 1)]
    return [(DiscreteLaplace(noise_parameter=a, sensitivity=_field(event, "sensitivity")), count)]


def _first_field(event: Any, names: tuple[str, ...]) -> Any:
    """The first of the fields ``names`` that ``event`` has."""
    for n in names:
        if hasattr(event, n):
            return getattr(event, n)
    raise ValueError(f"{_name(event)} has none of the fields {', '.join(names)}; is it a dp_accounting DpEvent?")


@_handles("DiscreteGaussianDpEvent")
def _discrete_gaussian(event: Any, count: int) -> _Entries:
    """``DiscreteGaussian(sigma, sensitivity)`` (dp_accounting's 2026 event; its fields are read by name:
    the noise ``sigma`` / ``noise_multiplier`` / ``standard_deviation`` and an integer ``sensitivity``)."""
    s = _first_field(event, ("sigma", "noise_multiplier", "standard_deviation"))
    if s == 0:
        return [(NON_PRIVATE, 1)]
    return [(DiscreteGaussian(sigma=s, sensitivity=_first_field(event, ("sensitivity", "l2_sensitivity"))), count)]


@_handles("EpsilonDeltaDpEvent")
def _epsilon_delta(event: Any, count: int) -> _Entries:
    """``ApproximateDP(epsilon, delta)``: the dominating pair of every (epsilon, delta)-DP mechanism
    (Kairouz, Oh, Viswanath 2015), the tightest statement the event allows."""
    e, d = _field(event, "epsilon"), _field(event, "delta")
    if d == 0:
        return [(PureDP(epsilon=e), count)]
    return [(ApproximateDP(epsilon=e, delta=d), count)]


@_handles("SingleEpochTreeAggregationDpEvent")
def _tree(event: Any, count: int) -> _Entries:
    """``Gaussian(noise_multiplier=s, sensitivity=sqrt(depth))``, ``depth = ceil(log2(max steps + 1))``: one
    record enters one leaf, so ``depth`` tree nodes (each with its own noise ``s``, sensitivity 1), an
    L2 shift of ``sqrt(depth)`` of the released node vector; the pair is exactly Gaussian (dp_accounting's
    RDP of the event, ``a depth / (2 s^2)``, is that Gaussian's)."""
    s = _field(event, "noise_multiplier")
    steps = _field(event, "step_counts")
    steps = [steps] if isinstance(steps, (int, float)) else list(steps)
    if not steps or any((not float(x).is_integer()) or x < 0 for x in steps):
        raise ValueError(f"step_counts must be non-negative integers, got {steps!r}")
    if max(steps) == 0:
        return []
    if s == 0:
        return [(NON_PRIVATE, 1)]
    depth = math.ceil(math.log2(max(steps) + 1))
    return [(Gaussian(noise_multiplier=s, sensitivity=math.sqrt(depth)), count)]


@_handles("ExponentialMechanismDpEvent")
def _exponential_mechanism(event: Any, count: int) -> _Entries:
    """``ExponentialMechanism(epsilon)``: the event's epsilon-DP exponential mechanism is epsilon-bounded-range
    (its docstring, Durfee & Rogers 2019), the pair ``BoundedRangeLoss(epsilon)`` and, composed, the adaptive
    bounded-range program (dp_accounting's PLD accountant treats it as a black-box epsilon-DP mechanism)."""
    return [(ExponentialMechanism(epsilon=_field(event, "epsilon")), count)]


@_handles("PermuteAndFlipDpEvent")
def _permute_and_flip(event: Any, count: int) -> _Entries:
    """``PermuteAndFlip(epsilon)`` (McKenna & Sheldon 2020): epsilon-DP and ``2 log(2 e^(epsilon/2) - 1)``-bounded-
    range (``tightdp.mechanisms.selection``; dp_accounting accounts it with the Laplace mechanism's PLD)."""
    return [(PermuteAndFlip(epsilon=_field(event, "epsilon")), count)]


#: events tightdp refuses, with the reason (``from_dp_event`` raises ``UnsupportedMechanismError`` saying it)
REFUSED_EVENTS: dict[str, str] = {
    "UnsupportedDpEvent": "the event says the mechanism is unknown to accounting; there is nothing to certify",
    "ZCDpEvent": "a (xi, rho)-zCDP guarantee is a family of Renyi bounds, not a mechanism: no pair of "
    "distributions is known to dominate every rho-zCDP mechanism (the Gaussian with the same rho "
    "does not), so no certified PLD exists; account the mechanism that ran instead",
    "RepeatAndSelectDpEvent": "private selection with a random number of runs (Papernot & Steinke 2022) is "
    "bounded from the run's ledger; use tightdp.tuning.tuning_epsilon, whose upper end is the smaller of that "
    "RDP bound and the privacy-profile bound (Koskela, Redberg & Wang 2024) and lower end one run's certified one",
    "RandomAllocationDpEvent": "the 2026 event's fields are not known to this version; build "
    "tightdp.RandomAllocation(mechanism=..., steps_per_epoch=...) composed once per epoch instead",
}


SUPPORTED_EVENTS = tuple(sorted(_HANDLERS))


def from_dp_event(event: Any) -> list[tuple[Mechanism, int]]:
    """Convert a dp-accounting ``DpEvent`` into ``[(Mechanism, count), ...]`` for ``Accountant.compose``.

    Identical mechanisms are merged (counts added; composition is
    commutative) in order of first appearance. A tree with no privacy cost
    (only no-ops) becomes ``[(PureDP(epsilon=0), 1)]`` so that it composes
    like any other. A non-private event becomes ``NON_PRIVATE``, for which
    every accountant reports an infinite epsilon with a note.

    Parameters
    ----------
    event : dp_accounting.DpEvent
        The event tree (its classes are matched by name; dp_accounting need not be imported here).

    Returns
    -------
    list of (Mechanism, int)
        The mechanisms and their counts, merged.

    Raises
    ------
    UnsupportedMechanismError
        (a ``TypeError``) naming the event type, for events tightdp cannot analyse (``REFUSED_EVENTS`` says why).
    ValueError
        For a tightdp ``Mechanism`` instead of an event, or invalid parameters (named as in tightdp:
        ``noise_multiplier``, ``sampling_rate``...).

    References
    ----------
    Koskela et al. 2020 (the PLD accountants that compose the result); dp_accounting's ``DpEvent`` vocabulary.
    """
    if isinstance(event, Mechanism):
        raise ValueError("from_dp_event takes a dp-accounting DpEvent; this is already a tightdp Mechanism")
    entries = _convert(event, 1)
    merged: dict[Mechanism, int] = {}
    for mech, n in entries:
        if mech == NON_PRIVATE:
            merged[mech] = 1
        else:
            merged[mech] = merged.get(mech, 0) + n
    if not merged:
        return [(PureDP(epsilon=0.0), 1)]
    return list(merged.items())

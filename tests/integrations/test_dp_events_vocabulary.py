"""Every dp_accounting event class is either imported into an equivalent tightdp ledger or refused with a
reason naming it; the docs table lists each one. The test introspects ``dp_accounting.dp_event``, so an
event added by a new dp_accounting release fails here until it is handled or refused."""

from __future__ import annotations

import inspect
import math
from pathlib import Path

import pytest

de = pytest.importorskip("dp_accounting.dp_event")

from tightdp import ConnectDotsAccountant, Gaussian
from tightdp.errors import UnsupportedMechanismError
from tightdp.integrations.dp_accounting import REFUSED_EVENTS, SUPPORTED_EVENTS, from_dp_event
from tightdp.mechanisms.discrete import DiscreteLaplace, PoissonSampledDiscrete

pytestmark = pytest.mark.peers  # every test here introspects or runs dp_accounting

_DOCS = Path(__file__).resolve().parents[2] / "docs" / "dp_events.md"


def _event_classes():
    return sorted(
        name
        for name, cls in inspect.getmembers(de, inspect.isclass)
        if issubclass(cls, de.DpEvent) and cls is not de.DpEvent
    )


def test_every_event_class_is_handled_or_refused():
    names = _event_classes()
    assert len(names) >= 17  # dp_accounting 0.6 has 17 concrete events
    missing = [n for n in names if n not in SUPPORTED_EVENTS and n not in REFUSED_EVENTS]
    assert not missing, f"dp_accounting events neither imported nor refused: {missing}"
    assert not set(SUPPORTED_EVENTS) & set(REFUSED_EVENTS)


def test_docs_table_lists_every_event():
    text = _DOCS.read_text()
    for n in set(_event_classes()) | set(SUPPORTED_EVENTS) | set(REFUSED_EVENTS):
        assert f"`{n}`" in text, n


@pytest.mark.parametrize("name", sorted(n for n in REFUSED_EVENTS if hasattr(de, n)))
def test_refusals_name_the_event_and_the_reason(name):
    samples = {
        "ZCDpEvent": lambda: de.ZCDpEvent(0.5),
        "UnsupportedDpEvent": de.UnsupportedDpEvent,
        "RepeatAndSelectDpEvent": lambda: de.RepeatAndSelectDpEvent(de.GaussianDpEvent(1.0), 2.0, 1.0),
    }
    event = samples[name]()
    with pytest.raises(UnsupportedMechanismError, match=name) as err:
        from_dp_event(de.ComposedDpEvent([de.GaussianDpEvent(1.0), event]))
    assert REFUSED_EVENTS[name][:30] in str(err.value)


def test_discrete_laplace_events_import_exactly():
    assert from_dp_event(de.DiscreteLaplaceDpEvent(0.7, 2)) == [
        (DiscreteLaplace(noise_parameter=0.7, sensitivity=2), 1)
    ]
    [(m, n)] = from_dp_event(
        de.SelfComposedDpEvent(de.PoissonSampledDpEvent(0.1, de.DiscreteLaplaceDpEvent(1.0, 1)), 5)
    )
    assert m == PoissonSampledDiscrete(mechanism=DiscreteLaplace(noise_parameter=1.0), sampling_rate=0.1) and n == 5


def test_discrete_laplace_agrees_with_dp_accountings_pld():
    """dp_accounting's PLD of the discrete Laplace is exact up to its own discretisation (pessimistic: an
    upper bound); tightdp's interval holds the truth, so it lies below dp_accounting's value, and close."""
    from dp_accounting.pld import privacy_loss_distribution as pld

    peer = pld.from_discrete_laplace_mechanism(0.4, sensitivity=2, value_discretization_interval=1e-5)
    peer = peer.self_compose(20).get_epsilon_for_delta(1e-6)
    b = (
        ConnectDotsAccountant()
        .compose(from_dp_event(de.SelfComposedDpEvent(de.DiscreteLaplaceDpEvent(0.4, 2), 20)))
        .epsilon(1e-6)
    )
    assert b.lower <= peer + 1e-9 and abs(b.upper - peer) <= 2e-3 * peer, (b, peer)


def test_tree_aggregation_is_the_gaussian_of_its_depth():
    [(m, n)] = from_dp_event(de.SingleEpochTreeAggregationDpEvent(2.0, [3, 7, 4]))
    assert m == Gaussian(noise_multiplier=2.0, sensitivity=math.sqrt(3.0)) and n == 1  # ceil(log2(8)) = 3
    assert from_dp_event(de.SingleEpochTreeAggregationDpEvent(2.0, 0))[0][0].to_dict()["type"] == "pure_dp"
    with pytest.raises(ValueError, match="step_counts"):
        from_dp_event(de.SingleEpochTreeAggregationDpEvent(2.0, [1.5]))


def _event_2026(name: str, **fields):
    """A stand-in for a dp_accounting main-branch event the installed release lacks (events are matched by class
    name; the fields are those of the main branch's ``dp_event.py``)."""
    return type(name, (), fields)()


def test_selection_events_of_2026_import_as_selection_mechanisms():
    from tightdp.mechanisms.selection import ExponentialMechanism, PermuteAndFlip
    from tightdp.tuning import selection_epsilon

    em = _event_2026("ExponentialMechanismDpEvent", epsilon=0.3)
    pf = _event_2026("PermuteAndFlipDpEvent", epsilon=1.0)
    assert from_dp_event(de.SelfComposedDpEvent(em, 7)) == [(ExponentialMechanism(epsilon=0.3), 7)]
    [(m, n)] = from_dp_event(de.ComposedDpEvent([pf, pf]))
    assert m == PermuteAndFlip(epsilon=1.0) and n == 2
    with pytest.raises(ValueError, match="epsilon"):
        from_dp_event(_event_2026("PermuteAndFlipDpEvent", epsilon=-1.0))
    # dp_accounting's PLD accountant composes permute-and-flip as the Laplace mechanism of parameter 1 / epsilon
    # (its docstring); tightdp's certified upper end lies below that for a long run
    from dp_accounting.pld import privacy_loss_distribution as pld

    peer = pld.from_laplace_mechanism(1.0, value_discretization_interval=1e-4).self_compose(100)
    b = selection_epsilon(mechanism=m, delta=1e-6, count=100)
    assert b.lower <= b.upper < peer.get_epsilon_for_delta(1e-6)

"""Pairs whose masses come from closed forms are within a relative ``rho`` of the exact pair, not equal to it.
The accountants pay for that at both ends (``Accountant._query``): the interval holds every pair within ``rho``
of the floats, checked here by exact binomial enumeration of perturbed pairs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import gammaln

from tightdp.accountants.connect_dots import ConnectDotsAccountant
from tightdp.mechanisms import ReportNoisyMax
from tightdp.mechanisms._finite_pairs import CLOSED_FORM_REL_ERROR, FinitePair


def _binomial_delta(eps: float, p: float, q: float, count: int) -> float:
    """Exact ``delta(eps)`` of ``count`` compositions of the two-outcome pair ``(p, 1 - p)`` against ``(q, 1 - q)``."""
    k = np.arange(count + 1)
    log_c = gammaln(count + 1) - gammaln(k + 1) - gammaln(count - k + 1)
    log_p = log_c + k * math.log(p) + (count - k) * math.log1p(-p)
    log_q = log_c + k * math.log(q) + (count - k) * math.log1p(-q)
    return float(np.sum(np.clip(np.exp(log_p) - np.exp(eps + log_q), 0.0, None)))


def _pair(p: float, q: float, rho: float) -> FinitePair:
    return FinitePair(values=(math.log(p / q), math.log1p(-p) - math.log1p(-q)), probs=(p, 1.0 - p), mass_rel_error=rho)


def _perturbed(p: float, q: float, rho: float) -> list[tuple[float, float]]:
    """The four pairs whose first masses move by ``+- rho`` relatively (the second ones by less: ``p, q <= 1/2``)."""
    return [(p * (1 + a * rho), q * (1 + b * rho)) for a in (-1, 1) for b in (-1, 1)]


@settings(max_examples=25, deadline=None)
@given(
    p=st.floats(0.02, 0.5),
    q=st.floats(0.02, 0.5),
    count=st.integers(1, 300),
    log_delta=st.floats(-9.0, -2.0),
    rho=st.sampled_from([1e-9, 1e-7, 1e-6]),
)
def test_the_interval_holds_every_pair_within_the_rounding(p, q, count, log_delta, rho):
    if abs(p - q) < 0.01:
        return
    delta = 10.0**log_delta
    acc = ConnectDotsAccountant().compose(_pair(p, q, rho), count)
    b = acc.epsilon(delta)
    assert b.details["closed_form_rounding"] == pytest.approx(2 * count * rho, rel=1e-6)
    eps = [0.0, 0.5 * b.upper, b.upper]
    d = acc.delta(eps)
    for pp, qq in _perturbed(p, q, rho):
        assert _binomial_delta(b.upper, pp, qq, count) <= delta * (1 + 1e-9)
        if b.lower > 0:
            assert _binomial_delta(b.lower, pp, qq, count) >= delta * (1 - 1e-9)
        exact = np.array([_binomial_delta(e, pp, qq, count) for e in eps])
        assert np.all(np.asarray(d.lower) <= exact * (1 + 1e-9) + 1e-300)
        assert np.all(np.asarray(d.upper) >= exact * (1 - 1e-9))


def test_without_the_payment_the_lower_end_passes_a_pair_within_the_rounding():
    """The same floats read as exact (``rho = 0``) give a lower end above the truth of a pair 1e-6 away: the
    payment is what keeps the promise."""
    p, q, count, delta, rho = 0.3, 0.2, 200, 1e-5, 1e-6
    exact_read = ConnectDotsAccountant().compose(_pair(p, q, 0.0), count).epsilon(delta)
    paid = ConnectDotsAccountant().compose(_pair(p, q, rho), count).epsilon(delta)
    low_pair = (p * (1 - rho), q * (1 + rho))
    assert _binomial_delta(exact_read.lower, *low_pair, count) < delta  # epsilon(delta) of that pair is below it
    assert _binomial_delta(paid.lower, *low_pair, count) >= delta
    assert paid.lower < exact_read.lower <= exact_read.upper < paid.upper


def test_selection_pairs_carry_their_rounding_through_the_accountant():
    """Report-noisy-max's attained pairs are closed forms: the accountant's lower end pays for them."""
    mech = ReportNoisyMax(epsilon=0.1, num_candidates=3, noise="laplace")
    pairs = mech.attained_pairs()
    assert pairs and all(p.masses_rel_error() == CLOSED_FORM_REL_ERROR for p in pairs)
    b = ConnectDotsAccountant().compose(mech, 1000).epsilon(1e-6)
    assert 0.0 < b.lower <= b.upper
    assert b.details["lower"].startswith("certified lower end of the attained pairs")


@pytest.mark.parametrize("bad", [-1e-12, 2e-6, math.nan, math.inf])
def test_a_bad_rounding_bound_is_refused_by_name(bad):
    with pytest.raises(ValueError, match="mass_rel_error"):
        FinitePair(values=(0.1, -0.1), probs=(0.5, 0.5), mass_rel_error=bad)


def test_a_paid_delta_reaching_one_gives_lower_end_zero_without_a_query():
    """``count log1p(rho)`` of 1 raises delta 0.5 past 1: the lower end is 0 (no engine query for it), and the
    paid upper end still holds the perturbed pairs' truth."""
    p, q, count, rho = 0.3, 0.2, 10**6, 1e-6
    acc = ConnectDotsAccountant().compose(_pair(p, q, rho), count)
    assert acc.epsilon_lower_end(0.5) == 0.0
    b = acc.epsilon(0.5)
    assert b.lower == 0.0 and math.isfinite(b.upper) and b.upper > 0.0

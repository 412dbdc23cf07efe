"""The public API of tightdp.individual: keyword-only constructors and conversions, the one mu-GDP curve,
the root finders' certified sides, and the memos that clear_caches empties."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tightdp
from tightdp._gdp_math import gdp_epsilon_bounds
from tightdp.individual import (
    GDPFilter,
    IndividualAccountant,
    ShardedLedger,
    _population,
    gdp_delta,
    gdp_epsilon,
    gdp_mu,
    rdp,
)
from tightdp.individual.gdp import gdp_delta_bounds, gdp_epsilon_bounds_array


def test_constructors_are_keyword_only():
    with pytest.raises(TypeError):
        IndividualAccountant(4, 1.0, 1.0, 0.01)  # type: ignore[misc]
    with pytest.raises(TypeError):
        ShardedLedger(4, 1.0, 1.0)  # type: ignore[misc]
    acc = IndividualAccountant(num_examples=4, noise_multiplier=1.0, clip_norm=1.0)
    assert IndividualAccountant(**acc.options()) == acc


def test_gdp_conversions_are_keyword_only_in_the_accountants_order():
    with pytest.raises(TypeError):
        gdp_epsilon(1.0, 1e-5)  # type: ignore[misc]
    with pytest.raises(TypeError):
        gdp_mu(1.0, 1e-5)  # type: ignore[misc]
    with pytest.raises(TypeError):
        gdp_delta(1.0, 1.0)  # type: ignore[misc]
    from tightdp.accountants.gdp import gdp_epsilon as accountants_gdp_epsilon

    with pytest.raises(TypeError):
        accountants_gdp_epsilon(1.5, 1e-6)  # type: ignore[misc]
    lo, hi = accountants_gdp_epsilon(mu=1.5, delta=1e-6)
    assert gdp_epsilon(mu=1.5, delta=1e-6) == hi and lo <= hi
    for bad in (dict(mu=-1.0, delta=1e-5), dict(mu=1.0, delta=0.0), dict(mu=float("nan"), delta=1e-5)):
        with pytest.raises(ValueError):
            gdp_epsilon(**bad)
    with pytest.raises(ValueError, match="mu"):
        gdp_delta(mu=[-1.0], epsilon=1.0)
    with pytest.raises(ValueError, match="epsilon"):
        gdp_delta(mu=1.0, epsilon="a")


def test_filter_odometer_uses_the_accountants_query_names():
    f = GDPFilter(mu=2.0)
    assert f.admit(1.0) and f.admit(1.0)
    e = f.epsilon(1e-5)
    d = f.delta(e.upper)
    assert d.upper <= 1e-5 * (1 + 1e-12)
    assert not hasattr(f, "epsilon_spent") and not hasattr(f, "delta_spent")


@settings(deadline=None)  # timings under load vary; the examples' count is the profile's
@given(log_mu=st.floats(-3.0, 2.0), log_delta=st.floats(-12.0, -1.0))
def test_vectorised_gdp_epsilon_brackets_the_one_scalar_conversion(log_mu, log_delta):
    mu, delta = 10.0**log_mu, 10.0**log_delta
    lower, upper = gdp_epsilon_bounds_array(np.array([mu, 0.0]), delta)
    s_lo, _, s_hi = gdp_epsilon_bounds(mu, delta)
    assert upper[1] == 0.0 and lower[1] == 0.0
    # both brackets are certified brackets of the same exact root: they overlap
    assert lower[0] <= s_hi and s_lo <= upper[0]
    assert float(gdp_delta_bounds(mu=mu, epsilon=upper[0])[2]) <= delta
    if lower[0] > 0:
        assert float(gdp_delta_bounds(mu=mu, epsilon=lower[0])[0]) > delta
    # the per-example answer and the scalar one agree to their bisections' widths
    assert upper[0] == pytest.approx(s_hi, rel=1e-12, abs=1e-300)


@settings(deadline=None)  # timings under load vary; the examples' count is the profile's
@given(eps=st.floats(0.0, 20.0), log_delta=st.floats(-15.0, -0.5))
def test_gdp_mu_is_certified_and_tight(eps, log_delta):
    delta = 10.0**log_delta
    mu = gdp_mu(epsilon=eps, delta=delta)
    assert float(gdp_delta_bounds(mu=mu, epsilon=eps)[2]) <= delta  # the safe side, certified
    # at the crossing (mu = 0: the certified curve exceeds delta for every mu, near epsilon 0 and delta 1e-15)
    assert mu == 0.0 or float(gdp_delta_bounds(mu=mu * (1 + 1e-12), epsilon=eps)[2]) > delta


@settings(deadline=None)  # timings under load vary; the examples' count is the profile's
@given(eps=st.floats(0.05, 10.0), log_delta=st.floats(-12.0, -2.0))
def test_rdp_budget_is_within_budget_and_below_the_gdp_budget(eps, log_delta):
    delta = 10.0**log_delta
    b = rdp.gaussian_budget_mu(eps, delta, rdp.INDIVIDUAL_ORDERS)
    curve = rdp.gaussian_rdp(mu=b, orders=rdp.INDIVIDUAL_ORDERS)[None, :] * (1.0 + rdp._REL_MARGIN)
    assert rdp.epsilons_from_rdp_rows(rdp.INDIVIDUAL_ORDERS, curve, delta)[0][0] <= eps
    assert b <= gdp_mu(epsilon=eps, delta=delta)  # the RDP conversion is lossy (Koskela et al. 2023 Sec. 4.1)


@pytest.mark.slow
def test_clear_caches_empties_the_per_example_memos():
    acc = IndividualAccountant(num_examples=3, noise_multiplier=1.0, clip_norm=1.0, sampling_rate=0.05, num_buckets=8)
    acc.record_steps(np.tile([1.0, 0.3, 0.0], (5, 1)))
    before = acc.epsilons(1e-5).upper
    acc.rdp_curves()
    assert rdp._curve_at.cache_info().currsize > 0
    assert _population._moments_table.cache_info().currsize > 0
    tightdp.clear_caches()
    assert rdp._curve_at.cache_info().currsize == 0
    assert _population._moments_table.cache_info().currsize == 0
    acc._cache.clear()
    assert np.array_equal(acc.epsilons(1e-5).upper, before)  # recomputed from scratch, the same numbers

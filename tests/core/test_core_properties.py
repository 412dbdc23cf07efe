"""Properties of the certified accountant (hypothesis): ordering, monotonicity, width."""

import math

from _support import scaled
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tightdp

SETTINGS = settings(max_examples=scaled(12), deadline=None, suppress_health_check=[HealthCheck.too_slow])

sigmas = st.floats(0.6, 4.0)
rates = st.floats(1e-3, 0.3)
steps = st.integers(10, 3000)
deltas = st.sampled_from([1e-5, 1e-7, 1e-9])


@SETTINGS
@given(sigma=sigmas, q=rates, k=steps, delta=deltas)
def test_interval_is_ordered_and_narrow(sigma, q, k, delta):
    b = tightdp.dpsgd_epsilon(noise_multiplier=sigma, sampling_rate=q, steps=k, delta=delta)
    assert 0 <= b.lower <= b.estimate <= b.upper < math.inf
    assert b.upper - b.lower <= 2 * max(1e-3 * b.upper, 5e-5) * (1 + 1e-9)  # the default: relative 1e-3


@SETTINGS
@given(sigma=sigmas, q=rates, k=steps)
def test_epsilon_grows_as_noise_falls(sigma, q, k):
    lo = tightdp.dpsgd_epsilon(noise_multiplier=sigma * 1.25, sampling_rate=q, steps=k, delta=1e-6)
    hi = tightdp.dpsgd_epsilon(noise_multiplier=sigma, sampling_rate=q, steps=k, delta=1e-6)
    # the true epsilon is monotone, so the certified intervals can only overlap in the wrong order
    assert hi.upper >= lo.lower
    assert hi.estimate >= lo.estimate - 1e-9


@SETTINGS
@given(sigma=sigmas, q=st.floats(1e-3, 0.2), k=steps)
def test_epsilon_grows_with_rate_and_steps(sigma, q, k):
    base = tightdp.dpsgd_epsilon(noise_multiplier=sigma, sampling_rate=q, steps=k, delta=1e-6)
    more_q = tightdp.dpsgd_epsilon(noise_multiplier=sigma, sampling_rate=min(1.0, 1.5 * q), steps=k, delta=1e-6)
    more_k = tightdp.dpsgd_epsilon(noise_multiplier=sigma, sampling_rate=q, steps=2 * k, delta=1e-6)
    assert more_q.upper >= base.lower and more_k.upper >= base.lower
    assert more_q.estimate >= base.estimate - 1e-9 and more_k.estimate >= base.estimate - 1e-9


@SETTINGS
@given(sigma=st.floats(0.5, 5.0), k=st.integers(1, 500), delta=st.floats(1e-12, 0.1))
def test_gaussian_bounds_contain_exact(sigma, k, delta):
    from _support import gdp_epsilon_mp

    b = tightdp.PRVAccountant().compose(tightdp.Gaussian(noise_multiplier=sigma), k).epsilon(delta)
    exact = gdp_epsilon_mp(delta, math.sqrt(k) / sigma)
    assert b.lower <= exact <= b.upper

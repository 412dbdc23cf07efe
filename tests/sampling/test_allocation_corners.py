"""Random allocation's hard corners: small noise, tiny delta, many steps; always a certified answer."""

from __future__ import annotations

import math

import pytest
from _support import scaled
from hypothesis import given, settings
from hypothesis import strategies as st

from tightdp.schemes import allocation_epsilon


def gauss_epsilon(mu: float, delta: float) -> float:
    """Exact epsilon of mu-GDP (bisection on the closed-form delta; Dong, Roth, Su 2022, Cor. 2.13)."""
    from scipy.stats import norm

    f = lambda e: norm.cdf(-e / mu + mu / 2) - math.exp(e) * norm.cdf(-e / mu - mu / 2) - delta
    lo, hi = 0.0, 1.0
    while f(hi) > 0:
        hi *= 2
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) > 0 else (lo, mid)
    return hi


@pytest.mark.slow
def test_k_of_t_at_small_noise_beats_no_amplification():
    """sigma 0.6, 5 of 6 steps: the 1-of-t allocations of the k-to-1 reduction reach past their ratio
    lattices (``tightdp.mechanisms._allocation_tail``), so the reduction answers below the no-amplification
    bound (5 Gaussian steps, sqrt(5)/0.6-GDP), above the lower end of sum_i x_i (5/(0.6 sqrt 6)-GDP)."""
    b = allocation_epsilon(noise_multiplier=0.6, steps_per_epoch=6, num_selected=5, epochs=1, delta=1e-4)
    assert b.kind == "bound" and "note" not in b.details and "k-to-1 reduction" in b.details["upper"]
    assert b.upper < gauss_epsilon(math.sqrt(5) / 0.6, 1e-4) * (1 - 0.02)
    assert gauss_epsilon(5 / (0.6 * math.sqrt(6)), 1e-4) * (1 - 3e-3) <= b.lower <= b.upper


def test_details_say_what_is_covered():
    for k in (1, 3):
        d = allocation_epsilon(noise_multiplier=1.5, steps_per_epoch=6, num_selected=k, epochs=2, delta=1e-5).details
        assert "a fresh bin every epoch" in d["scheme"] and "adaptive steps" in d["adaptive"]


def _two_step_delta(sigma: float, eps: float) -> float:
    """Exact delta(eps) of one epoch of 1-of-2 allocation (both directions): the likelihood ratio
    is S = (W_1 + W_2) / 2, W_i = exp(Z_i), Z_i ~ N(-v/2, v) under Q (v = 1/sigma^2), and the inner
    expectation over W_2 is the log-normal call / put price (Black-Scholes), leaving one quadrature (20 digits)."""
    import mpmath

    mpmath.mp.dps = 20
    v = mpmath.mpf(1) / mpmath.mpf(sigma) ** 2
    sv, a = mpmath.sqrt(v), mpmath.exp(mpmath.mpf(eps))

    def call(c, k):  # E[(c W - k)_+]
        if k <= 0:
            return c - k
        d1 = (mpmath.log(c / k) + v / 2) / sv
        return c * mpmath.ncdf(d1) - k * mpmath.ncdf(d1 - sv)

    def put(c, k):  # E[(k - c W)_+]
        if k <= 0:
            return mpmath.mpf(0)
        d1 = (mpmath.log(c / k) + v / 2) / sv
        return k * mpmath.ncdf(-(d1 - sv)) - c * mpmath.ncdf(-d1)

    def outer(f, kink):  # split at the kink (where the strike crosses 0) and around the bulk
        dens = lambda z: mpmath.npdf(z, -v / 2, sv)
        pts = sorted(
            {
                -v / 2 - 40 * sv,
                -v / 2 - 5 * sv,
                -v / 2,
                -v / 2 + 5 * sv,
                -v / 2 + 40 * sv,
                min(max(kink, -v / 2 - 40 * sv), -v / 2 + 40 * sv),
            }
        )
        return mpmath.quad(lambda z: dens(z) * f(mpmath.exp(z)), pts)

    remove = outer(lambda w1: call(mpmath.mpf(1) / 2, a - w1 / 2), mpmath.log(2 * a))
    add = outer(lambda w1: put(a / 2, 1 - a * w1 / 2), mpmath.log(2 / a))
    return float(max(remove, add))


@pytest.mark.slow
@given(sigma=st.floats(1.0, 3.0), log_delta=st.floats(-12.0, -4.0))
@settings(deadline=None, max_examples=scaled(5))
def test_two_steps_at_tiny_delta_against_quadrature(sigma, log_delta):
    delta = 10.0**log_delta
    b = allocation_epsilon(noise_multiplier=sigma, steps_per_epoch=2, epochs=1, delta=delta)
    assert _two_step_delta(sigma, b.upper) <= delta * (1 + 1e-6)
    if b.lower > 0:
        assert _two_step_delta(sigma, b.lower) >= delta * (1 - 1e-6)


def test_where_the_realisation_cannot_answer_other_noise_levels_bound_the_run(monkeypatch):
    """When the realisation refuses at the asked noise (here forced: it raises at sigma = 23 exactly), the ends
    come from realisations at a smaller noise (upper) and a larger one (lower), which bound the run because
    adding noise is a post-processing. Checked: each end equals that realisation's, and the interval contains
    the realisation's own answer at sigma = 23 (computed without the forced refusal)."""
    from tightdp.errors import PrecisionError
    from tightdp.schemes import _allocation

    truth = allocation_epsilon(noise_multiplier=23.0, steps_per_epoch=250, epochs=8, delta=1e-6)
    real = _allocation.allocation_accountant

    class Refusing:
        def __init__(self, **kw):
            self.acc = real(**kw)
            self.sigmas = []

        def compose(self, mech, count):
            self.sigmas.append(mech.mechanism.noise_multiplier)
            self.acc.compose(mech, count)
            return self

        def epsilon(self, delta):
            if self.sigmas == [23.0]:
                raise PrecisionError("forced refusal at sigma 23")
            return self.acc.epsilon(delta)

    monkeypatch.setattr(_allocation, "allocation_accountant", Refusing)
    b = allocation_epsilon(noise_multiplier=23.0, steps_per_epoch=250, epochs=8, delta=1e-6)
    less, more = b.details["upper_noise"], b.details["lower_noise"]
    assert less < 23.0 < more
    monkeypatch.setattr(_allocation, "allocation_accountant", real)
    at_less = allocation_epsilon(noise_multiplier=less, steps_per_epoch=250, epochs=8, delta=1e-6)
    at_more = allocation_epsilon(noise_multiplier=more, steps_per_epoch=250, epochs=8, delta=1e-6)
    assert b.upper == at_less.upper and b.lower == at_more.lower
    assert 0 < b.lower <= truth.lower <= truth.upper <= b.upper

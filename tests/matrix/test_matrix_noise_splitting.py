"""Noise splitting (tightdp.matrix.accounting) against the exact privacy curve of a small matrix mechanism:
two steps, a 2-banded C, Poisson sampling at every step; the explicit pair (a fixed unit gradient) has
P = sum_B w_B N(C B, sigma^2 I) against Q = N(0, sigma^2 I), whose hockey-stick divergence is integrated on a
fine grid. The certified upper end must have delta <= target there (in both directions); the lower end, from
the DP-SGD reduction, must have delta >= target."""

from __future__ import annotations

import math

import numpy as np
from _support import scaled, two_step_banded_delta
from hypothesis import given, settings
from hypothesis import strategies as st

from tightdp import dpsgd_epsilon
from tightdp.matrix import BandedToeplitz, Identity, PoissonSampling, matrix_epsilon

DELTA = 1e-3


@settings(deadline=None, max_examples=scaled(8))
@given(st.floats(0.0, 1.0), st.floats(0.05, 0.9), st.floats(0.6, 3.0))
def test_poisson_banded_bounds_bracket_the_exact_pair(a, q, sigma):
    c = np.array([1.0, a])
    b = matrix_epsilon(
        strategy=BandedToeplitz(c_col=c) if a > 0 else Identity(),
        noise_multiplier=sigma,
        steps=2,
        delta=DELTA,
        sampler=PoissonSampling(sampling_rate=q),
    )
    # the fixed-gradient pair is one neighbouring pair of the run: the run's upper bound must hold for it
    assert two_step_banded_delta(a, q, sigma, b.upper) <= DELTA * (1 + 1e-3)
    # the lower end comes from a post-processing of the fixed-gradient pair (the DP-SGD reduction or
    # whitening): delta of that pair at the lower end is at least the target
    assert two_step_banded_delta(a, q, sigma, b.lower) >= DELTA * (1 - 1e-3)
    if a > 0:  # and it is at least the one-step DP-SGD reduction's (the other column overlaps), ||C_0||
        ref = dpsgd_epsilon(noise_multiplier=sigma / math.hypot(1.0, a), sampling_rate=q, steps=1, delta=DELTA)
        assert b.lower >= ref.lower * (1 - 1e-9)


def test_noise_splitting_tightens_poisson_with_banded_strategy():
    k = np.arange(1, 16)
    c = np.cumprod(np.r_[1.0, (2 * k - 1) / (2 * k)])
    c /= np.linalg.norm(c)
    b = matrix_epsilon(
        strategy=c, noise_multiplier=6.0, steps=512, delta=1e-6, sampler=PoissonSampling(sampling_rate=0.02)
    )
    assert b.details["upper_used"] == "noise splitting"
    ref = dpsgd_epsilon(noise_multiplier=6.0 / 4.0, sampling_rate=0.02, steps=512, delta=1e-6)
    assert b.upper <= ref.upper * (1 + 1e-6)  # column norms <= 1: DP-SGD at sigma / sqrt(16) dominates
    assert b.lower <= b.upper


def test_identity_poisson_is_dpsgd_exactly():
    b = matrix_epsilon(
        strategy=Identity(), noise_multiplier=1.1, steps=300, delta=1e-5, sampler=PoissonSampling(sampling_rate=0.01)
    )
    ref = dpsgd_epsilon(noise_multiplier=1.1, sampling_rate=0.01, steps=300, delta=1e-5)
    assert math.isclose(b.upper, ref.upper, rel_tol=1e-6) and math.isclose(b.lower, ref.lower, rel_tol=1e-6)

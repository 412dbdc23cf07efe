"""Properties of the matrix-mechanism accounting at random parameters: every answer an ordered, finite,
non-negative interval; amplification never above the deterministic run; the Loewner sandwich's constants
satisfy their semidefinite inequalities (checked here independently)."""

from __future__ import annotations

import math

import numpy as np
from _support import scaled
from hypothesis import given, settings
from hypothesis import strategies as st

from tightdp.matrix import (
    BallsInBins,
    BandedToeplitz,
    Cyclic,
    CyclicPoisson,
    EpochAllocation,
    NoAmplification,
    PoissonSampling,
    matrix_epsilon,
)
from tightdp.matrix.allocation import _Spectra, lower_sandwich, upper_sandwich


@settings(deadline=None, max_examples=scaled(8))
@given(st.integers(0, 10**6), st.integers(1, 6), st.integers(1, 4), st.floats(1.0, 10), st.floats(0.01, 1.0))
def test_intervals_are_ordered_and_amplification_helps(seed, b, epochs_factor, sigma, q):
    rng = np.random.default_rng(seed)
    c = np.sort(rng.uniform(0.05, 1.0, size=b))[::-1]
    c /= np.linalg.norm(c)
    t = b * int(rng.integers(1, 4))
    n = t * epochs_factor
    strat = BandedToeplitz(c_col=c)
    plain = matrix_epsilon(
        strategy=strat,
        noise_multiplier=sigma,
        steps=n,
        delta=1e-5,
        sampler=NoAmplification(participation=Cyclic(period=t)),
    )
    for sampler in (
        CyclicPoisson(sampling_rate=q, period=t),
        PoissonSampling(sampling_rate=q),
        BallsInBins(cycle_length=t),
        EpochAllocation(steps_per_epoch=t),
    ):
        r = matrix_epsilon(strategy=strat, noise_multiplier=sigma, steps=n, delta=1e-5, sampler=sampler)
        assert 0.0 <= r.lower <= r.estimate <= r.upper < math.inf, (sampler, r)
        if not isinstance(sampler, (PoissonSampling, EpochAllocation)):  # same patterns, random: never worse
            assert r.upper <= plain.upper * (1 + 1e-3) + 1e-9, (sampler, r, plain)


@settings(deadline=None, max_examples=scaled(40))
@given(st.integers(0, 10**6), st.integers(2, 12), st.floats(0.0, 1.0))
def test_sandwich_constants_satisfy_their_inequalities(seed, t, frac):
    rng = np.random.default_rng(seed)
    v = np.abs(rng.normal(size=(3 * t, t)))
    g = v.T @ v
    sp = _Spectra(g)
    c, d = upper_sandwich(sp, frac)
    if math.isfinite(c):
        assert np.linalg.eigvalsh(c * np.ones((t, t)) + d * np.eye(t) - g)[0] >= -1e-9 * np.abs(g).max()
    c2, d2 = lower_sandwich(sp, frac)
    assert c2 >= 0 and d2 >= 0
    assert np.linalg.eigvalsh(g - c2 * np.ones((t, t)) - d2 * np.eye(t))[0] >= -1e-9 * np.abs(g).max()

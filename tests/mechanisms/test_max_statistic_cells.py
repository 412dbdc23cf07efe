"""The max statistic's cell masses (shuffle and allocation lower bounds) against 150-digit mpmath."""

from __future__ import annotations

import math

import mpmath
import numpy as np
from _support import scaled
from hypothesis import given, settings
from hypothesis import strategies as st

from tightdp.mechanisms.allocation import lower_bound_epsilon, max_statistic_cells, max_statistic_pld


def exact_masses(edges, sigma, t, k, mean, idx):
    """Cell masses of max_i x_i, F(m) = Phi((m - mean)/s)^k Phi(m/s)^(t - k), at 150 digits (the upper tail is 1 - F with F near 1)."""
    mpmath.mp.dps = 150
    s = mpmath.mpf(sigma)

    def cdf(m):
        m = mpmath.mpf(float(m))
        return mpmath.ncdf((m - mean) / s) ** k * mpmath.ncdf(m / s) ** (t - k)

    return [cdf(edges[i + 1]) - cdf(edges[i]) for i in idx]


@settings(max_examples=scaled(20), deadline=None)
@given(
    sigma=st.floats(0.3, 5.0),
    t=st.integers(1, 2000),
    k_frac=st.floats(0.0, 1.0),
    pair=st.sampled_from([(1.0, 0.0), (2.0, 1.0)]),
    seed=st.integers(0, 2**31),
)
def test_cell_masses_within_their_certified_relative_errors(sigma, t, k_frac, pair, seed):
    k = 1 + int(k_frac * (t - 1))
    edges, P, Q, rp, rq = max_statistic_cells(sigma, t, pair[0], pair[1], 400, k)
    rng = np.random.default_rng(seed)
    # lower tail, bulk and upper tail: cells spread over every region where the masses are certified
    ok = np.flatnonzero(np.isfinite(rp) & np.isfinite(rq))
    idx = sorted(set(rng.choice(ok, size=min(6, ok.size), replace=False).tolist()) | {int(ok[0]), int(ok[-1])})
    for mean, mass, rel in ((pair[0], P, rp), (pair[1], Q, rq)):
        for i, exact in zip(idx, exact_masses(edges, sigma, t, k, mean, idx)):
            assert rel[i] < 1e-6
            assert abs(mpmath.mpf(float(mass[i])) - exact) <= rel[i] * exact, (i, mass[i], exact, rel[i])


def test_lower_tail_cells_are_not_rounding_noise():
    """sigma 0.3, t 1: the review's case (191 lower-tail cells with ratios off by up to 1.9x before)."""
    edges, P, Q, rp, rq = max_statistic_cells(0.3, 1, 1.0, 0.0, 20000, 1)
    lower = np.flatnonzero(edges[1:] < -1.0)[::997]
    for mean, mass, rel in ((1.0, P, rp), (0.0, Q, rq)):
        for i, exact in zip(lower, exact_masses(edges, 0.3, 1, 1, mean, lower)):
            assert abs(mpmath.mpf(float(mass[i])) / exact - 1) <= max(rel[i], 1e-15)
    # ratio P/Q per cell against the exact ratio of the cell masses
    i = lower[len(lower) // 2]
    ep, eq = exact_masses(edges, 0.3, 1, 1, 1.0, [i])[0], exact_masses(edges, 0.3, 1, 1, 0.0, [i])[0]
    assert abs(P[i] / Q[i] / float(ep / eq) - 1) < 1e-9


def test_lower_end_below_the_gaussian_it_garbles():
    """t = 1: max_i x_i is x_1, so the dominated pair is below (and close to) the Gaussian's exact epsilon."""
    from scipy.stats import norm

    sigma, delta = 0.5, 1e-6
    lo = lower_bound_epsilon(lambda h: max_statistic_pld(sigma, 1, h), 1, delta, 0.01)
    mu = 1 / sigma
    f = lambda e: norm.cdf(-e / mu + mu / 2) - math.exp(e) * norm.cdf(-e / mu - mu / 2)
    assert f(lo) >= delta and f(lo * 1.01) < delta

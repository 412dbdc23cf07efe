"""Balls-in-bins with banded C: tightdp's certified interval against jax_privacy's Monte Carlo estimate of the
dominating pair's delta (Choquette-Choo et al. ICLR 2025), on 20 random settings at a large delta (so a few
hundred samples give a usable confidence interval; the lower end is checked on every fourth). The Monte Carlo delta at the certified upper end must not
be confidently above the target, nor confidently below it at the certified lower end (4 standard errors)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tightdp.matrix import BallsInBins, BandedToeplitz, matrix_epsilon

pytestmark = [pytest.mark.peers, pytest.mark.slow]
DELTA = 0.05


def _mc_delta(c_col, sigma, n, t, eps, samples, seed):
    from jax_privacy import batch_selection
    from jax_privacy.experimental.monte_carlo import sample_generation

    strat = batch_selection.BallsInBinsSampling(iterations=n, cycle_length=t)
    pos, _ = sample_generation.get_privacy_loss_sample(strat, sigma, c_col, seed=seed, num_samples=samples)
    neg, _ = sample_generation.get_privacy_loss_sample(
        strat, sigma, c_col, seed=seed + 1, num_samples=samples, positive_sample=False
    )
    out = []
    # remove: L = log(p/q) under P; add: jax_privacy returns log(q/p) under Q for positive_sample=False
    for losses in (np.asarray(pos), np.asarray(neg)):
        v = -np.expm1(np.minimum(eps - losses, 0.0))
        out.append((float(v.mean()), float(v.std() / math.sqrt(v.size))))
    return max(out)


def test_balls_in_bins_interval_consistent_with_monte_carlo():
    pytest.importorskip("jax_privacy")
    rng = np.random.default_rng(2026)
    for case in range(20):
        t = int(rng.choice([4, 8, 10, 16]))
        b = int(rng.integers(1, t + 1))
        n = t * int(rng.integers(1, 6)) + int(rng.integers(0, t))
        sigma = float(np.exp(rng.uniform(np.log(0.5), np.log(10.0))))
        c_col = np.sort(rng.uniform(0.05, 1.0, size=b))[::-1]
        c_col = c_col / np.linalg.norm(c_col)
        ours = matrix_epsilon(
            strategy=BandedToeplitz(c_col=c_col),
            noise_multiplier=sigma,
            steps=n,
            delta=DELTA,
            sampler=BallsInBins(cycle_length=t),
        )
        assert 0 <= ours.lower <= ours.upper < math.inf
        m, se = _mc_delta(c_col, sigma, n, t, ours.upper, 600, 10 * case)
        assert m - 4 * se <= DELTA, (case, t, b, n, sigma, ours, m, se)
        if ours.lower > 0 and case % 4 == 0:
            m, se = _mc_delta(c_col, sigma, n, t, ours.lower, 600, 10 * case + 5)
            assert m + 4 * se >= DELTA, (case, t, b, n, sigma, ours, m, se)

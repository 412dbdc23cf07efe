"""b-min-sep sampling with banded C: tightdp's certified interval against jax_privacy's Monte Carlo estimate of
the fixed-gradient pair's delta (``BMinSepSampling``, Dong & Ganesh 2026), on 20 random settings at a large
delta (so a few hundred samples give a usable confidence interval), both ends on every setting.
For a non-negative ``C`` that pair is the one tightdp's lower end post-processes, and its epsilon is at most the
run's: the Monte Carlo delta at the certified upper end must not be confidently above the target, nor
confidently below it at the certified lower end (4 standard errors)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tightdp.matrix import BandedToeplitz, MinSepSampling, matrix_epsilon

pytestmark = [pytest.mark.peers, pytest.mark.slow]
DELTA = 0.05


def _mc_delta(c_col, sigma, n, p, b, warm, eps, samples, seed):
    from jax_privacy import batch_selection
    from jax_privacy.experimental.monte_carlo import sample_generation

    strat = batch_selection.BMinSepSampling(sampling_prob=p, iterations=n, min_sep=b, warm_start=warm)
    pos, _ = sample_generation.get_privacy_loss_sample(strat, sigma, c_col, seed=seed, num_samples=samples)
    neg, _ = sample_generation.get_privacy_loss_sample(
        strat, sigma, c_col, seed=seed + 1, num_samples=samples, positive_sample=False
    )
    out = []
    # remove: L = log(p/q) under P; add: jax_privacy returns log(q/p) under Q, the loss of the pair (Q, P)
    for losses in (np.asarray(pos), np.asarray(neg)):
        v = -np.expm1(np.minimum(eps - losses, 0.0))
        out.append((float(v.mean()), float(v.std() / math.sqrt(v.size))))
    return max(out)


def test_min_sep_interval_consistent_with_monte_carlo():
    pytest.importorskip("jax_privacy")
    rng = np.random.default_rng(2602)
    for case in range(20):
        b = int(rng.integers(1, 17))
        bands = int(rng.integers(1, b + 1))
        n = int(rng.integers(b, 300))
        p = float(rng.choice([0.05, 0.1, 0.25, 0.5, 1.0])) if case % 2 else float(rng.uniform(0.05, 1.0))
        warm = bool(case % 3)
        sigma = float(np.exp(rng.uniform(np.log(0.5), np.log(10.0))))
        c_col = np.sort(rng.uniform(0.05, 1.0, size=bands))[::-1]
        c_col = c_col / np.linalg.norm(c_col)
        ours = matrix_epsilon(
            strategy=BandedToeplitz(c_col=c_col),
            noise_multiplier=sigma,
            steps=n,
            delta=DELTA,
            sampler=MinSepSampling(sampling_rate=p, min_sep=b, warm_start=warm),
        )
        assert 0 <= ours.lower <= ours.upper < math.inf
        setting = (case, b, bands, n, p, warm, sigma, ours)
        m, se = _mc_delta(c_col, sigma, n, p, b, warm, ours.upper, 600, 10 * case)
        assert m - 4 * se <= DELTA, (setting, m, se)
        if ours.lower > 0:
            m, se = _mc_delta(c_col, sigma, n, p, b, warm, ours.lower, 600, 10 * case + 5)
            assert m + 4 * se >= DELTA, (setting, m, se)

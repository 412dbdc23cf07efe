"""Matrix-mechanism accounting against truth: C = identity is DP-SGD, one band is DP-SGD, single participation
without sampling is mu-GDP (mpmath), cyclic Poisson against dp_accounting's amplified BandMF event, and the
sensitivity against jax_privacy's Toeplitz closed form."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _support import gdp_delta_mp, scaled
from hypothesis import given, settings
from hypothesis import strategies as st

from tightdp import ConnectDotsAccountant, Gaussian, RandomAllocation, dpsgd_epsilon
from tightdp.matrix import (
    BallsInBins,
    BandedToeplitz,
    BinaryTree,
    CyclicPoisson,
    DenseStrategy,
    EpochAllocation,
    Identity,
    MinSeparation,
    NoAmplification,
    PoissonSampling,
    calibrate_matrix_noise,
    matrix_epsilon,
    sensitivity,
)


def _bandmf_coefs(b: int) -> np.ndarray:
    k = np.arange(1, b)
    c = np.cumprod(np.r_[1.0, (2 * k - 1) / (2 * k)])
    return c / np.linalg.norm(c)


def _contains_gdp(bounds, mu, delta):
    """lower <= eps* <= upper for mu-GDP's exact eps* at delta, judged by mpmath's delta at both ends."""
    assert bounds.lower <= bounds.upper
    assert gdp_delta_mp(bounds.lower, mu) >= delta * (1 - 1e-9)
    assert gdp_delta_mp(bounds.upper, mu) <= delta * (1 + 1e-9)


@settings(deadline=None, max_examples=scaled(30))
@given(st.floats(0.3, 10), st.integers(0, 10**6), st.integers(2, 12), st.sampled_from([1e-3, 1e-6, 1e-9]))
def test_single_participation_no_sampling_is_mu_gdp(sigma, seed, n, delta):
    rng = np.random.default_rng(seed)
    c = np.tril(rng.uniform(0, 1, size=(n, n))) + np.eye(n) * 0.1
    b = matrix_epsilon(strategy=DenseStrategy(array=c), noise_multiplier=sigma, steps=n, delta=delta)
    _contains_gdp(b, float(np.linalg.norm(c, axis=0).max()) / sigma, delta)


@settings(deadline=None, max_examples=scaled(30))
@given(st.floats(0.5, 5), st.integers(1, 6), st.integers(1, 4), st.sampled_from([1e-5, 1e-8]))
def test_identity_multi_participation_is_mu_gdp(sigma, k, sep, delta):
    n = 24
    b = matrix_epsilon(
        strategy=Identity(),
        noise_multiplier=sigma,
        steps=n,
        delta=delta,
        sampler=NoAmplification(participation=MinSeparation(max_participations=k, min_sep=sep)),
    )
    _contains_gdp(b, math.sqrt(min(k, -(-n // sep))) / sigma, delta)


@settings(deadline=None, max_examples=scaled(12))
@given(st.floats(0.5, 8), st.floats(1e-3, 0.5), st.integers(1, 300), st.floats(0.2, 3))
def test_identity_and_one_band_reduce_to_dpsgd(sigma, q, steps, scale):
    """C = identity is DP-SGD; C = scale * identity (one band) is DP-SGD at noise sigma / scale."""
    for strat, s in ((Identity(), 1.0), (BandedToeplitz(c_col=[scale]), scale)):
        ref = dpsgd_epsilon(noise_multiplier=sigma / s, sampling_rate=q, steps=steps, delta=1e-6)
        for sampler in (CyclicPoisson(sampling_rate=q, period=1), PoissonSampling(sampling_rate=q)):
            b = matrix_epsilon(strategy=strat, noise_multiplier=sigma, steps=steps, delta=1e-6, sampler=sampler)
            # both intervals bracket the same truth (the lower ends are DP-SGD's pairs)
            assert b.lower <= ref.upper * (1 + 1e-9) and ref.lower <= b.upper * (1 + 1e-9)
            if isinstance(sampler, CyclicPoisson):
                assert math.isclose(b.upper, ref.upper, rel_tol=1e-6, abs_tol=1e-9)


@settings(deadline=None, max_examples=scaled(5))
@given(st.floats(2.0, 6), st.integers(2, 4))
def test_identity_balls_in_bins_is_random_allocation(sigma, epochs):
    t = 20
    b = matrix_epsilon(
        strategy=Identity(), noise_multiplier=sigma, steps=t * epochs, delta=1e-6, sampler=BallsInBins(cycle_length=t)
    )
    ref = (
        ConnectDotsAccountant()
        .compose(RandomAllocation(mechanism=Gaussian(noise_multiplier=sigma / math.sqrt(epochs)), steps_per_epoch=t))
        .epsilon(1e-6)
    )
    assert b.lower <= ref.upper * (1 + 1e-9) and ref.lower <= b.upper * (1 + 1e-9)
    if sigma / math.sqrt(epochs) >= 0.8:
        assert b.upper - b.lower <= 0.01 * b.upper + 1e-4


def test_epoch_allocation_identity_is_dpsgd_random_allocation():
    b = matrix_epsilon(
        strategy=Identity(), noise_multiplier=1.5, steps=100, delta=1e-5, sampler=EpochAllocation(steps_per_epoch=10)
    )
    ref = dpsgd_epsilon(noise_multiplier=1.5, sampling_rate=0.1, steps=100, delta=1e-5, sampling="random-allocation")
    assert math.isclose(b.upper, ref.upper, rel_tol=1e-6) and math.isclose(b.lower, ref.lower, rel_tol=1e-6)


def test_cyclic_poisson_banded_brackets_one_band_per_round():
    c = _bandmf_coefs(16)
    n, q, sigma = 160, 0.2, 1.5
    b = matrix_epsilon(strategy=c, noise_multiplier=sigma, steps=n, delta=1e-6, sampler=CyclicPoisson(sampling_rate=q))
    ref = dpsgd_epsilon(noise_multiplier=sigma, sampling_rate=q, steps=n // 16, delta=1e-6)
    assert b.lower <= ref.upper and ref.lower <= b.upper
    assert b.upper - b.lower <= 2e-3 * b.upper


def test_amplification_never_above_no_amplification_and_lower_below_upper():
    c = _bandmf_coefs(8)
    plain = matrix_epsilon(
        strategy=c,
        noise_multiplier=2.0,
        steps=64,
        delta=1e-6,
        sampler=NoAmplification(participation=MinSeparation(max_participations=8, min_sep=8)),
    )
    amp = matrix_epsilon(
        strategy=c, noise_multiplier=2.0, steps=64, delta=1e-6, sampler=CyclicPoisson(sampling_rate=1.0)
    )
    assert math.isclose(amp.upper, plain.upper, rel_tol=2e-3)  # q = 1: the cyclic run is the deterministic one
    for sampler in (
        PoissonSampling(sampling_rate=0.05),
        BallsInBins(cycle_length=16),
        EpochAllocation(steps_per_epoch=16),
    ):
        b = matrix_epsilon(strategy=c, noise_multiplier=2.0, steps=64, delta=1e-6, sampler=sampler)
        assert 0 <= b.lower <= b.estimate <= b.upper < math.inf
        assert b.details["strategy"] and b.details["sampler"]


@pytest.mark.peers
def test_cyclic_poisson_contains_dp_accounting_amplified_bandmf():
    pytest.importorskip("jax_privacy")
    dp_accounting = pytest.importorskip("dp_accounting")
    from jax_privacy.experimental.accounting import amplified_bandmf_event

    rng = np.random.default_rng(7)
    for _ in range(4):
        b_ = int(rng.choice([4, 16, 64]))
        rounds = int(rng.integers(2, 30))
        sigma, q = float(rng.uniform(0.7, 6)), float(rng.uniform(0.01, 0.5))
        n = b_ * rounds  # whole rounds: every round has the full column norm, as the event assumes
        acc = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4)
        acc.compose(amplified_bandmf_event(noise_multiplier=sigma, iterations=n, num_bands=b_, sampling_prob=q))
        theirs = acc.get_epsilon(1e-6)
        ours = matrix_epsilon(
            strategy=_bandmf_coefs(b_),
            noise_multiplier=sigma,
            steps=n,
            delta=1e-6,
            sampler=CyclicPoisson(sampling_rate=q),
        )
        assert ours.lower <= theirs <= ours.upper + 2e-3 * ours.upper + 1e-3, (b_, rounds, sigma, q, ours, theirs)


@pytest.mark.peers
def test_toeplitz_sensitivity_matches_jax_privacy():
    pytest.importorskip("jax_privacy")
    from jax_privacy.matrix_factorization import toeplitz

    for b_, n, k in [(8, 64, 8), (16, 100, 3), (4, 30, 10)]:
        c = _bandmf_coefs(b_)
        theirs = float(toeplitz.minsep_sensitivity_squared(c, b_, n=n, max_participations=k)) ** 0.5
        s = sensitivity(BandedToeplitz(c_col=c), MinSeparation(max_participations=k, min_sep=b_), steps=n)
        assert s.exact and s.lower * (1 - 1e-6) <= theirs <= s.upper * (1 + 1e-6)


def test_calibration_meets_target_and_is_tight():
    c = _bandmf_coefs(16)
    r = calibrate_matrix_noise(
        target_epsilon=3.0, delta=1e-6, strategy=c, steps=320, sampler=CyclicPoisson(sampling_rate=0.1)
    )
    assert r.epsilon.upper <= 3.0
    assert r.details["tightness"]["proved_infeasible"]
    again = matrix_epsilon(
        strategy=c, noise_multiplier=r.noise_multiplier, steps=320, delta=1e-6, sampler=CyclicPoisson(sampling_rate=0.1)
    )
    assert again.upper <= 3.0


@pytest.mark.parametrize(
    "bad",
    [
        dict(noise_multiplier=0.0),
        dict(noise_multiplier=float("nan")),
        dict(steps=0),
        dict(delta=0.0),
        dict(delta=1.5),
        dict(sampler="poisson"),
        dict(strategy="tree"),
        dict(sampler=CyclicPoisson(sampling_rate=0.1), strategy=BinaryTree()),
        dict(sampler=CyclicPoisson(sampling_rate=0.1, period=2), strategy=[1.0, 0.5, 0.2]),
        dict(sampler=BallsInBins(cycle_length=100)),
        dict(sampler=EpochAllocation(steps_per_epoch=7)),
    ],
)
def test_bad_input_raises_value_error(bad):
    kw = dict(strategy=Identity(), noise_multiplier=1.0, steps=20, delta=1e-6, sampler=None)
    kw.update(bad)
    with pytest.raises(ValueError):
        matrix_epsilon(**kw)
    with pytest.raises(ValueError):
        CyclicPoisson(sampling_rate=1.5)
    with pytest.raises(ValueError):
        calibrate_matrix_noise(target_epsilon=-1.0, delta=1e-6, strategy=Identity(), steps=5)

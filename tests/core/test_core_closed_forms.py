"""Certified bounds against exact answers: mu-GDP (Gaussian), pure DP, randomized response, Laplace.

Sources: Gaussian composition is exactly mu-GDP with mu = sqrt(k)/sigma (Dong, Roth,
Su 2019; Gopi et al. 2021 eq. (10)); k-fold pure DP and randomized response have finite
privacy-loss distributions whose composition is an exact multinomial.
"""

import math

import numpy as np
import pytest
from _support import gdp_delta_mp, gdp_epsilon_mp

import tightdp
from tightdp import ApproximateDP, Gaussian, Laplace, PoissonSampled, PRVAccountant, PureDP, RandomizedResponse


@pytest.mark.parametrize("sigma,k", [(0.5, 1), (1.0, 10), (3.0, 100), (4.0, 1000)])
@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-10])
def test_gaussian_epsilon_contains_exact_gdp(sigma, k, delta):
    acc = PRVAccountant(eps_error=0.01).compose(Gaussian(noise_multiplier=sigma), k)
    b = acc.epsilon(delta)
    exact = gdp_epsilon_mp(delta, math.sqrt(k) / sigma)
    assert b.lower <= exact <= b.upper
    assert b.lower <= b.estimate <= b.upper
    assert b.upper - b.lower <= 0.025  # 2 eps_error + the delta-slack term (flat curves at large mu)


@pytest.mark.parametrize("sigma,k", [(1.0, 10), (2.0, 300)])
def test_gaussian_delta_contains_exact_gdp(sigma, k):
    acc = PRVAccountant(eps_error=0.01).compose(Gaussian(noise_multiplier=sigma), k)
    mu = math.sqrt(k) / sigma
    eps = np.array([0.0, 0.5, 1.0, 3.0, 6.0])
    b = acc.delta(eps)
    for e, lo, up in zip(eps, b.lower, b.upper):
        assert lo <= gdp_delta_mp(e, mu) <= up


def test_tiny_delta_is_answered_with_full_precision():
    # delta = 1e-30: the tilted FFT keeps relative precision where an untilted one drowns in round-off
    b = PRVAccountant(eps_error=0.01).compose(Gaussian(noise_multiplier=1.0), 4).epsilon(1e-30)
    exact = gdp_epsilon_mp(1e-30, 2.0)
    assert b.lower <= exact <= b.upper
    assert b.upper - b.lower < 0.03


def test_large_epsilon_regime():
    b = PRVAccountant(eps_error=0.01).compose(Gaussian(noise_multiplier=0.2), 1).epsilon(1e-5)
    exact = gdp_epsilon_mp(1e-5, 5.0)
    assert 20 < exact < 60
    assert b.lower <= exact <= b.upper


@pytest.mark.parametrize("sigma,k,delta", [(0.5, 325, 0.015625), (1.0, 400, 1e-3)])
def test_huge_epsilon_stays_sound(sigma, k, delta):
    # regression: exp(-x) underflowed in the suffix sums for losses above ~709 and the lower bound overshot
    b = PRVAccountant().compose(Gaussian(noise_multiplier=sigma), k).epsilon(delta)
    exact = gdp_epsilon_mp(delta, math.sqrt(k) / sigma)
    assert exact > 200
    assert b.lower <= exact <= b.upper


def test_sampling_rate_one_is_the_gaussian():
    a = PRVAccountant().compose(PoissonSampled(mechanism=Gaussian(noise_multiplier=2.0), sampling_rate=1.0), 50)
    g = PRVAccountant().compose(Gaussian(noise_multiplier=2.0), 50)
    assert a.epsilon(1e-6).estimate == pytest.approx(g.epsilon(1e-6).estimate, abs=1e-9)


def _exact_discrete_delta(values, probs, k, eps, inf_mass=0.0):
    """delta(eps) of the k-fold composition of a finite PLD, by exact enumeration of sums."""
    dist = {0.0: 1.0}
    for _ in range(k):
        new = {}
        for s, p in dist.items():
            for v, q in zip(values, probs):
                key = round(s + v, 12)
                new[key] = new.get(key, 0.0) + p * q
        dist = new
    finite = sum(p * max(0.0, 1.0 - math.exp(eps - s)) for s, p in dist.items())
    return 1.0 - (1.0 - inf_mass) ** k + finite


@pytest.mark.parametrize("eps0,k", [(0.1, 30), (1.0, 8), (0.5, 20)])
def test_pure_dp_composition(eps0, k):
    p = 1.0 / (1.0 + math.exp(-eps0))
    acc = PRVAccountant(eps_error=0.01).compose(PureDP(epsilon=eps0), k)
    eps = np.array([0.0, 0.3 * eps0 * k, 0.6 * eps0 * k])
    b = acc.delta(eps)
    for e, lo, up in zip(eps, b.lower, b.upper):
        exact = _exact_discrete_delta([eps0, -eps0], [p, 1 - p], k, e)
        assert lo <= exact <= up


def test_randomized_response_composition():
    mech = RandomizedResponse(noise_parameter=0.5, num_buckets=4)
    pair = mech.privacy_losses()
    values, probs = pair.remove.values, pair.remove.probs
    acc = PRVAccountant(eps_error=0.01).compose(mech, 12)
    for e in (0.0, 1.0, 3.0):
        b = acc.delta(e)
        exact = _exact_discrete_delta(values, probs, 12, e)
        assert b.lower <= exact <= b.upper


def test_approximate_dp_infinite_epsilon_is_explained():
    acc = PRVAccountant().compose(ApproximateDP(epsilon=1.0, delta=1e-3), 10)
    b = acc.epsilon(1e-4)  # below the 1 - (1 - 1e-3)^10 ~ 1e-2 mass at infinity
    assert math.isinf(b.upper) and math.isinf(b.lower)
    assert "infinite" in b.details["note"]
    assert b.to_dict()["upper"] is None


def test_approximate_dp_finite_when_delta_allows():
    acc = PRVAccountant().compose(ApproximateDP(epsilon=0.5, delta=1e-6), 4)
    b = acc.epsilon(1e-3)
    exact_inf = 1 - (1 - 1e-6) ** 4
    p = 1.0 / (1.0 + math.exp(-0.5))
    exact = lambda e: _exact_discrete_delta([0.5, -0.5], [(1 - 1e-6) * p, (1 - 1e-6) * (1 - p)], 4, e, 1e-6)
    assert exact(b.upper) <= 1e-3 + 1e-12
    assert exact(max(b.lower - 1e-9, 0)) >= 1e-3 - 1e-12 or b.lower == 0.0
    assert exact_inf < 1e-3


def test_laplace_single_release():
    # delta(eps) of Laplace with r = sensitivity/scale is max(0, 1 - exp((eps - r)/2))
    r = 2.0
    acc = PRVAccountant(eps_error=0.005).compose(Laplace(scale=0.5, sensitivity=1.0), 1)
    for e in (0.0, 0.5, 1.5):
        b = acc.delta(e)
        exact = max(0.0, 1.0 - math.exp((e - r) / 2.0))
        assert b.lower <= exact <= b.upper


def test_dpsgd_matches_reference_values():
    from _support import REFERENCE

    for r in REFERENCE:
        if r["mechanism"] == "poisson_subsampled_gaussian" and r["relation"] == "add_or_remove" and r["steps"] <= 1000:
            b = tightdp.dpsgd_epsilon(
                noise_multiplier=r["noise_multiplier"],
                sampling_rate=r["sampling_rate"],
                steps=r["steps"],
                delta=r["delta"],
            )
            # dp_accounting's value is a pessimistic estimate at interval 2e-5: slightly above the truth
            assert b.lower <= r["epsilon"] <= b.upper + 2e-3, r

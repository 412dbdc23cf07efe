"""Shuffling where it reduces to a known mechanism: one batch per epoch is the Gaussian mechanism."""

from __future__ import annotations

import math

import pytest
from scipy.stats import norm

from tightdp.schemes import shuffle_epsilon


def gdp_delta(eps: float, mu: float) -> float:
    return norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)


@pytest.mark.parametrize("sigma,epochs,delta", [(1.78, 30, 1.4e-12), (1.0, 1, 1e-5), (3.0, 200, 1e-9)])
def test_one_batch_is_the_gaussian_mechanism(sigma, epochs, delta):
    b = shuffle_epsilon(noise_multiplier=sigma, steps_per_epoch=1, epochs=epochs, delta=delta)
    assert b.upper - b.lower <= 2 * max(1e-3 * b.upper, 5e-5)
    mu = math.sqrt(epochs) / sigma  # sqrt(E)/sigma-GDP exactly (Dong, Roth, Su 2022, Cor. 3.3)
    assert gdp_delta(b.lower, mu) >= delta * (1 - 1e-9) and gdp_delta(b.upper, mu) <= delta * (1 + 1e-9)

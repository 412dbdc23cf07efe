"""Random allocation's hard corners: small noise, tiny delta, many steps; always a certified answer."""

from __future__ import annotations

import math

import pytest

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
def test_k_of_t_at_small_noise_falls_back_to_a_certified_wide_interval():
    b = allocation_epsilon(noise_multiplier=0.6, num_steps=6, num_selected=5, epochs=1, delta=1e-4)
    assert b.kind == "bound" and "wide interval" in b.details["note"]
    # no amplification: 5 Gaussian steps, sqrt(5)/0.6-GDP; the lower end is sum_i x_i: 5/(0.6 sqrt 6)-GDP
    assert b.upper == pytest.approx(gauss_epsilon(math.sqrt(5) / 0.6, 1e-4), rel=2e-3)
    assert gauss_epsilon(5 / (0.6 * math.sqrt(6)), 1e-4) * (1 - 3e-3) <= b.lower <= b.upper


def test_details_say_what_is_covered():
    for k in (1, 3):
        d = allocation_epsilon(noise_multiplier=1.5, num_steps=6, num_selected=k, epochs=2, delta=1e-5).details
        assert "a fresh bin every epoch" in d["scheme"] and "adaptive steps" in d["adaptive"]

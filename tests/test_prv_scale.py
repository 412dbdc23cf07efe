"""PRV at scale (issue 13 item 5) and sampling with replacement (item 2): the multi-level composition tree
(``tightdp.pld.hierarchy.compose_tree``) stays certified, and the truncated with-replacement mixture's
intervals contain the truth."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from scipy import optimize, special, stats

from tightdp import (ConnectDotsAccountant, FourierAccountant, Gaussian, PoissonSampled, PRVAccountant,
                     SampledWithReplacement)


def _gdp_delta(mu: float, eps: float) -> float:
    return float(stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2))


def _gdp_eps(mu: float, delta: float) -> float:
    # log-space root: accurate for deltas far below 1e-16
    f = lambda e: math.log(max(_gdp_delta_log(mu, e), 1e-320)) - math.log(delta)
    return optimize.brentq(f, 0.0, 200.0, xtol=1e-13)


def _gdp_delta_log(mu: float, eps: float) -> float:
    a = special.log_ndtr(-eps / mu + mu / 2)
    b = eps + special.log_ndtr(-eps / mu - mu / 2)
    return math.exp(a) * -math.expm1(b - a)


@pytest.mark.parametrize("sigma,k,delta", [(20.0, 4000, 1e-5), (30.0, 3001, 1e-20)])
def test_tree_contains_closed_form_gaussian(sigma, k, delta):
    acc = PRVAccountant().compose(Gaussian(noise_multiplier=sigma), k)
    b = acc.epsilon(delta)
    assert "tree" in b.details  # the multi-level composition answered
    truth = _gdp_eps(math.sqrt(k) / sigma, delta)
    assert b.lower <= truth <= b.upper
    assert b.upper - b.lower <= 2.2 * acc.eps_error
    d = acc.delta([0.5 * truth, truth])
    exact = [_gdp_delta(math.sqrt(k) / sigma, e) for e in (0.5 * truth, truth)]
    assert np.all(d.lower <= exact) and np.all(np.asarray(exact) <= d.upper)


def test_tree_overlaps_connect_dots_poisson():
    step = PoissonSampled(mechanism=Gaussian(noise_multiplier=1.0), sampling_rate=0.01)
    prv = PRVAccountant().compose(step, 5000).epsilon(1e-5)
    cd = ConnectDotsAccountant().compose(step, 5000).epsilon(1e-5)
    assert "tree" in prv.details
    assert prv.lower <= cd.upper and cd.lower <= prv.upper  # both certified: the truth is in both
    assert prv.upper - prv.lower <= 0.022


def test_tree_hoeffding_not_above_flat():
    """The tree's meshes keep the Hoeffding sum at or below the single-level ``k h^2``."""
    acc = PRVAccountant()
    loss = PoissonSampled(mechanism=Gaussian(noise_multiplier=0.8), sampling_rate=4e-3).privacy_losses().remove
    for k in (3000, 12345, 10 ** 6):
        eta = 5e-9
        meshes = acc._tree_plan([(loss, k)], eta)
        eta_b = acc._tree_budget(eta, eta)[0]
        h = 0.985 * acc.eps_error / math.sqrt(0.5 * k * math.log(1.0 / eta_b))
        sizes = [8 ** lvl for lvl in range(1, len(meshes))]
        H = k * meshes[0] ** 2 + sum((k // m + 1) * g * g for m, g in zip(sizes, meshes[1:]))
        assert H <= k * h * h * (1 + 1e-12)


def _with_replacement_delta(m: int, n: int, sigma: float, eps: float) -> float:
    """One step, every binomial component, to 30 digits: int (P - e^eps Q)_+ with P = sum w_l N(l, s^2),
    Q = sum w_l N(-l, s^2); the loss is increasing, so the integral starts at the root x* of L(x) = eps."""
    mpmath.mp.dps = 30
    p = mpmath.mpf(1) / n
    w = [mpmath.binomial(m, l) * p ** l * (1 - p) ** (m - l) for l in range(m + 1)]
    w = [(l, x) for l, x in enumerate(w) if x > mpmath.mpf(10) ** -60]
    s = mpmath.mpf(sigma)
    dens = lambda x, sgn: sum(x_w * mpmath.npdf(x, sgn * l, s) for l, x_w in w)
    x0 = mpmath.findroot(lambda x: mpmath.log(dens(x, 1)) - mpmath.log(dens(x, -1)) - eps, 1.0)
    tail = lambda sgn: sum(x_w * mpmath.ncdf(-(x0 - sgn * l) / s) for l, x_w in w)
    return float(tail(1) - mpmath.e ** eps * tail(-1))


@pytest.mark.parametrize("acc_factory", [PRVAccountant, lambda: FourierAccountant(n=20_000)])
def test_with_replacement_contains_truth(acc_factory):
    mech = SampledWithReplacement(mechanism=Gaussian(noise_multiplier=0.7), sample_size=100, dataset_size=1000)
    loss = mech.privacy_losses().remove
    assert len(loss.p_means) < 40 and loss.infinity_mass < 1e-15 and loss.weight_error > 0
    eps = [0.5, 1.0, 2.0]
    b = acc_factory().compose(mech, 1).delta(eps)
    for e, lo, up in zip(eps, b.lower, b.upper):
        truth = _with_replacement_delta(100, 1000, 0.7, e)
        assert lo <= truth <= up, (e, lo, truth, up)

"""Tuning runs: Papernot & Steinke 2022's printed results reproduced for two stopping laws, agreement with
dp_accounting's implementation of the same theorems, and the lower ends (one run's certified bound).

Printed results used (arXiv 2110.03620v2):
* Corollary 3: an eps-DP run tuned with a truncated negative binomial number of runs (shape eta) is
  ``(2 + eta) eps``-DP (at order ``lambda -> inf``; geometric stopping, eta = 1: ``3 eps``, Liu & Talwar 2019).
* Corollary 4: a rho-zCDP run (the Gaussian, rho = 1 / (2 sigma^2)) tuned with the truncated negative binomial
  law is ``(lambda, eps')``-RDP with ``eps' = rho (lambda - 1) + log(E K) / (lambda - 1) + 2 (1 + eta)
  sqrt(rho log(1/gamma)) - eta rho`` (for ``lambda`` above ``1 + sqrt(log(E K) / rho)``).
* Theorem 6 with a pure-DP run (Poisson law, mean mu): at ``lambda = 1 + 1 / (e^eps - 1)``, ``delta^ = 0`` and
  ``eps' = eps(lambda) + log(mu) (e^eps - 1)``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tightdp import ConnectDotsAccountant, Gaussian, PoissonSampled, PureDP
from tightdp.accountants import RDPAccountant
from tightdp.accountants import _rdp_math as rm
from tightdp.tuning import truncated_negative_binomial_mean, tuning_epsilon


@pytest.mark.parametrize("shape", [0.0, 0.5, 1.0, 3.0])
def test_corollary_3_pure_dp_truncated_negative_binomial(shape):
    """(2 + eta) eps: tuning_epsilon's RDP at a very large order approaches it; at delta = 1e-10 the
    converted epsilon lies within log(1/delta) / (lambda - 1) of it (orders up to 1e5)."""
    eps = 0.3
    b = tuning_epsilon(
        run=PureDP(epsilon=eps),
        delta=1e-10,
        distribution="negative-binomial" if shape not in (0, 1) else ("logarithmic" if shape == 0 else "geometric"),
        mean=5.0,
        shape=shape if shape not in (0, 1) else None,
    )
    printed = (2 + shape) * eps
    rdp = b.details["rdp_epsilon"]
    assert printed - 1e-9 <= rdp <= printed + 0.02, (b, printed)
    assert b.upper <= rdp  # the smaller of the Renyi and privacy-profile routes
    assert b.lower <= eps + 1e-9  # one run's certified lower end


@pytest.mark.parametrize("rho, gamma, shape", [(0.01, 0.01, 0.5), (0.1, 0.1, 1.0), (0.05, 0.2, 2.0), (0.1, 0.1, 0.0)])
def test_corollary_4_gaussian_truncated_negative_binomial(rho, gamma, shape):
    """epsilon from Corollary 4's printed RDP curve (converted on the same orders, CKS Prop. 12): tuning_epsilon
    applies Theorem 2 with the minimum over lambda^ taken on its order grid instead of exactly, so it lies
    at or just above the printed value."""
    sigma = 1.0 / math.sqrt(2 * rho)
    mean = truncated_negative_binomial_mean(gamma=gamma, shape=shape)
    dist = {0.0: "logarithmic", 1.0: "geometric"}.get(shape, "negative-binomial")
    b = tuning_epsilon(
        run=Gaussian(noise_multiplier=sigma),
        delta=1e-6,
        distribution=dist,
        mean=mean,
        shape=shape if dist == "negative-binomial" else None,
    )
    orders = RDPAccountant().orders
    lam = orders
    cut = 1 + math.sqrt(math.log(mean) / rho)
    const = 2 * (1 + shape) * math.sqrt(rho * math.log(1 / gamma)) - shape * rho
    curve = np.where(
        lam <= cut, 2 * math.sqrt(rho * math.log(mean)) + const, rho * (lam - 1) + math.log(mean) / (lam - 1) + const
    )
    printed, _ = rm.epsilon_from_rdp(orders=orders, rdp=curve, delta=1e-6)
    rdp = b.details["rdp_epsilon"]
    assert printed - 1e-9 <= rdp <= printed * (1 + 5e-4), (b, printed)
    assert b.upper == min(rdp, b.details["profile_epsilon"])


@pytest.mark.parametrize("eps, mu", [(1.0, 10.0), (0.5, 100.0)])
def test_theorem_6_pure_dp_poisson(eps, mu):
    """Poisson stopping, pure-DP run: the bound at lambda = 1 + 1/(e^eps - 1) is eps(lambda) + log(mu)(e^eps - 1)
    (delta^ = 0 there); tuning_epsilon's epsilon (the best over its own order grid, which need not hold that
    order) is at most 1 % above that order's conversion, and below it where another order does better."""
    b = tuning_epsilon(run=PureDP(epsilon=eps), delta=1e-6, distribution="poisson", mean=mu)
    lam = 1 + 1 / math.expm1(eps)
    hi, lo = 1 / (1 + math.exp(-eps)), 1 / (1 + math.exp(eps))  # the eps-DP pair: P = (lo, hi), Q = (hi, lo)
    run_rdp = math.log(hi**lam * lo ** (1 - lam) + lo**lam * hi ** (1 - lam)) / (lam - 1)
    printed = run_rdp + math.log(mu) * math.expm1(eps)
    at_lam, _ = rm.epsilon_from_rdp(orders=np.array([lam]), rdp=np.array([printed]), delta=1e-6)
    assert b.details["rdp_epsilon"] <= 1.01 * at_lam, (b, at_lam)
    assert b.upper <= b.details["rdp_epsilon"]
    # the lower end: one run at delta / (1 - e^-mu)
    one = ConnectDotsAccountant().compose(PureDP(epsilon=eps)).epsilon(1e-6 / -math.expm1(-mu))
    assert b.lower == pytest.approx(one.lower, rel=1e-12)


@pytest.mark.peers
def test_agrees_with_dp_accounting_and_improves_poisson():
    pytest.importorskip("dp_accounting")
    from dp_accounting import dp_event as de
    from dp_accounting.rdp import rdp_privacy_accountant as rpa

    run = [(PoissonSampled(mechanism=Gaussian(noise_multiplier=1.1), sampling_rate=0.01), 500)]
    for dist, shape in (("geometric", 1.0), ("poisson", math.inf)):
        acc = rpa.RdpAccountant()
        acc.compose(
            de.RepeatAndSelectDpEvent(
                de.SelfComposedDpEvent(de.PoissonSampledDpEvent(0.01, de.GaussianDpEvent(1.1)), 500), 10.0, shape
            )
        )
        peer = acc.get_epsilon(1e-6)
        b = tuning_epsilon(run=run, delta=1e-6, distribution=dist, mean=10.0)
        rdp = b.details["rdp_epsilon"]
        if dist == "geometric":
            assert abs(rdp - peer) <= 1e-3 * peer, (b, peer)
        else:  # the certified delta^ of one run instead of its RDP conversion
            assert rdp < peer, (b, peer)
        assert b.upper <= rdp
        one = ConnectDotsAccountant().compose(run).epsilon(1e-6)
        assert float(one.lower) <= b.lower <= b.upper


def test_fixed_runs_compose_and_bound_below_by_one_run():
    run = Gaussian(noise_multiplier=2.0)
    b = tuning_epsilon(run=run, delta=1e-6, runs=4)
    four = ConnectDotsAccountant().compose(run, 4).epsilon(1e-6)
    one = ConnectDotsAccountant().compose(run, 1).epsilon(1e-6)
    assert b.details["composition_epsilon"] == pytest.approx(four.upper) and float(one.lower) <= b.lower <= b.upper
    assert b.upper == min(four.upper, b.details["profile_epsilon"])
    everything = tuning_epsilon(run=run, delta=1e-6, runs=4, release="all")
    assert everything.lower == pytest.approx(four.lower) and everything.upper == pytest.approx(four.upper)


def test_bad_input_names_the_argument():
    run = Gaussian(noise_multiplier=1.0)
    for kwargs, name in (
        ({"distribution": "fixed"}, "runs"),
        ({"distribution": "poisson"}, "mean"),
        ({"distribution": "negative-binomial", "mean": 3.0}, "shape"),
        ({"distribution": "uniform", "mean": 3.0}, "distribution"),
        ({"distribution": "poisson", "mean": 0.5}, "mean"),
        ({"distribution": "geometric", "mean": 3.0, "release": "all"}, "release"),
        ({"runs": 0}, "runs"),
    ):
        with pytest.raises(ValueError, match=name):
            tuning_epsilon(run=run, delta=1e-6, **kwargs)
    with pytest.raises(ValueError, match="run"):
        tuning_epsilon(run="sgd", delta=1e-6, runs=2)

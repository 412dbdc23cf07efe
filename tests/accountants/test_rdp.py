"""RDP accountant: closed forms, MTZ 2019 against quadrature and dp_accounting, soundness, bad input."""

import json
import math
import warnings

import mpmath as mp
import numpy as np
import pytest
from _support import REFERENCE as REF
from _support import scaled
from hypothesis import given, settings
from hypothesis import strategies as st

from tightdp import (
    ApproximateDP,
    Gaussian,
    Laplace,
    PoissonSampled,
    PureDP,
    RandomizedResponse,
    RDPAccountant,
    SampledWithoutReplacement,
    SampledWithReplacement,
    UnsupportedMechanismError,
    accountant_from_dict,
)
from tightdp.accountants import _rdp_math as rm


def _mp_renyi(logp, logq, alpha, lo, hi):
    """D_alpha(P||Q) by mpmath quadrature of exp(alpha log p + (1 - alpha) log q)."""
    mp.mp.dps = 30
    f = lambda x: mp.e ** (alpha * logp(x) + (1 - alpha) * logq(x))
    pts = [lo] + [mp.mpf(v) for v in np.linspace(-12, 13, 11)] + [hi]
    return float(mp.log(mp.quad(f, pts)) / (alpha - 1))


def _lognorm(m, s):
    return lambda x: -((x - m) ** 2) / (2 * s * s) - mp.log(s * mp.sqrt(2 * mp.pi))


def _logmix(parts, s):
    return lambda x: mp.log(sum(w * mp.e ** _lognorm(m, s)(x) for m, w in parts))


def test_gaussian_closed_form():
    a = np.array([1.5, 2.0, 10.0, 1000.0])
    acc = RDPAccountant(orders=a).compose(Gaussian(noise_multiplier=2.0, sensitivity=1.0), 3)
    np.testing.assert_allclose(acc.rdp(), 3 * a / (2 * 4.0), rtol=1e-15)


def test_laplace_closed_form_against_quadrature():
    r = 0.7
    for alpha in (1.5, 3.0, 7.25):
        want = float(
            mp.log(
                alpha / (2 * alpha - 1) * mp.e ** ((alpha - 1) * r)
                + (alpha - 1) / (2 * alpha - 1) * mp.e ** (-alpha * r)
            )
            / (alpha - 1)
        )
        got = rm.laplace_rdp(r=r, orders=np.array([alpha]))[0]
        assert got == pytest.approx(want, rel=1e-13)
        # and the formula is the true divergence of Lap(0,1/r) vs Lap(1,1/r)
        b = 1 / r
        lp = lambda x: -abs(x) / b
        lq = lambda x: -abs(x - 1) / b
        mp.mp.dps = 30
        I = mp.quad(lambda x: mp.e ** (alpha * lp(x) + (1 - alpha) * lq(x)) / (2 * b), [-mp.inf, 0, 1, mp.inf])
        assert got == pytest.approx(float(mp.log(I) / (alpha - 1)), rel=1e-10)


def test_randomized_response_closed_form():
    # binary RR with truth prob 0.75: Mironov 2017 Table II
    m = RandomizedResponse(noise_parameter=0.5, num_buckets=2)
    p = 0.75
    for alpha in (2.0, 3.5):
        want = math.log(p**alpha * (1 - p) ** (1 - alpha) + (1 - p) ** alpha * p ** (1 - alpha)) / (alpha - 1)
        got = RDPAccountant(orders=[alpha]).compose(m).rdp()[0]
        assert got == pytest.approx(want, rel=1e-14)


def test_infinite_rdp_converts_to_infinite_epsilon():
    eps, order = rm.epsilon_from_rdp(orders=np.array([2.0, 3.0]), rdp=np.array([np.inf, np.inf]), delta=1e-5)
    assert eps == math.inf and math.isnan(order)


@pytest.mark.parametrize(
    "q,sigma,alpha",
    [(0.01, 1.5, 2.0), (0.05, 1.0, 1.5), (0.05, 1.0, 7.3), (1e-3, 0.8, 2.5), (0.3, 0.6, 3.0), (0.5, 2.0, 1.75)],
)
def test_sampled_gaussian_matches_quadrature(q, sigma, alpha):
    """MTZ Sec. 3.2-3.3 are exact: compare with mpmath quadrature of D_alpha(mu || mu0)."""
    want = _mp_renyi(_logmix([(1, q), (0, 1 - q)], sigma), _lognorm(0, sigma), alpha, -mp.inf, mp.inf)
    got = rm.poisson_gaussian_rdp(q=q, sigma=sigma, orders=np.array([alpha]))[0]
    assert got == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize("q,sigma,alpha", [(0.05, 1.0, 2.0), (0.2, 0.8, 3.5), (0.01, 0.5, 6.0)])
def test_add_direction_dominated(q, sigma, alpha):
    """MTZ Sec. 3.1: D_alpha(mu0 || mu) <= D_alpha(mu || mu0), so one curve bounds both directions."""
    add = _mp_renyi(_lognorm(0, sigma), _logmix([(1, q), (0, 1 - q)], sigma), alpha, -mp.inf, mp.inf)
    remove = rm.poisson_gaussian_rdp(q=q, sigma=sigma, orders=np.array([alpha]))[0]
    assert add <= remove * (1 + 1e-12)


@pytest.mark.parametrize("q,sigma,alpha", [(0.05, 1.0, 2.0), (0.1, 2.0, 3.0), (0.01, 0.8, 5.0), (0.1, 2.0, 2.5)])
def test_without_replacement_bound_is_above_truth(q, sigma, alpha):
    """WBK 2019 Thm 9 (and the convex interpolation at fractional orders) bounds the true divergence."""
    P = _logmix([(1, q), (0, 1 - q)], sigma)
    Q = _logmix([(-1, q), (0, 1 - q)], sigma)
    want = _mp_renyi(P, Q, alpha, -mp.inf, mp.inf)
    got = rm.without_replacement_gaussian_rdp(q=q, mu_base=2 / sigma, orders=np.array([alpha]))[0]
    assert got >= want * (1 - 1e-12)
    assert got <= alpha * 2 / sigma**2 + 1e-15  # never worse than no amplification


@pytest.mark.peers
def test_integer_orders_match_dp_accounting():
    from dp_accounting.rdp import rdp_privacy_accountant as rpa

    orders = np.array([2.0, 3.0, 8.0, 32.0, 256.0, 1024.0])
    for q, s in [(1e-3, 0.8), (0.01, 1.5), (0.05, 1.0), (0.3, 0.6)]:
        mine = rm.poisson_gaussian_rdp(q=q, sigma=s, orders=orders)
        theirs = rpa._compute_rdp_poisson_subsampled_gaussian(q, s, orders)
        np.testing.assert_allclose(mine, theirs, rtol=1e-6)


@pytest.mark.peers
def test_reference_epsilons_not_above_dp_accounting():
    """Our grid is finer than dp_accounting's, so we match or improve its epsilon (never by much)."""
    for r in REF:
        if "epsilon_rdp_dp_accounting" not in r:
            continue
        g = Gaussian(noise_multiplier=r["noise_multiplier"])
        mech = g if r["mechanism"] == "gaussian" else PoissonSampled(mechanism=g, sampling_rate=r["sampling_rate"])
        eps = RDPAccountant().compose(mech, r["steps"]).epsilon(r["delta"])
        assert eps.lower is None and eps.kind == "bound"
        assert eps.upper <= r["epsilon_rdp_dp_accounting"] + 1e-9
        assert eps.upper >= r["epsilon_rdp_dp_accounting"] - 2e-3


def test_000_section_4_1():
    """Koskela et al. 2023 Sec. 4.1: sigma = 100, full batch, 420 steps, delta = 1e-5 -> RDP epsilon ~ 0.8156."""
    eps = RDPAccountant().compose(Gaussian(noise_multiplier=100.0), 420).epsilon(1e-5)
    assert eps.upper == pytest.approx(0.8156299871929082, abs=2e-4)


@settings(max_examples=scaled(12), deadline=None)
@given(q=st.floats(1e-3, 0.5), sigma=st.floats(0.6, 5.0), steps=st.integers(1, 3000), log_delta=st.floats(-10, -2))
def test_never_below_gaussian_truth_or_rdp_of_substeps(q, sigma, steps, log_delta):
    """Sound: above the exact answer for q = 1 (mu-GDP), and monotone in steps and q."""
    delta = 10.0**log_delta
    from tightdp.accountants.gdp import gdp_epsilon

    exact = gdp_epsilon(mu=math.sqrt(steps) / sigma, delta=delta)[1]
    r = RDPAccountant().compose(Gaussian(noise_multiplier=sigma), steps).epsilon(delta).upper
    assert r >= exact - 1e-9
    sub = (
        RDPAccountant()
        .compose(PoissonSampled(mechanism=Gaussian(noise_multiplier=sigma), sampling_rate=q), steps)
        .epsilon(delta)
        .upper
    )
    assert sub <= r + 1e-9


@pytest.mark.peers
@pytest.mark.slow
def test_never_below_pld_lower_estimates():
    """RDP >= the certified/optimistic PLD value on random DP-SGD settings (dp_accounting PLD, optimistic)."""
    from dp_accounting.pld.privacy_loss_distribution import from_gaussian_mechanism

    rng = np.random.default_rng(3)
    for _ in range(6):
        q = float(10 ** rng.uniform(-3, -1))
        sigma = float(rng.uniform(0.7, 3))
        steps = int(rng.integers(10, 3000))
        delta = float(10 ** rng.uniform(-8, -3))
        pld = from_gaussian_mechanism(
            sigma,
            sampling_prob=q,
            value_discretization_interval=1e-3,
            pessimistic_estimate=False,
            use_connect_dots=False,
        )
        lower = pld.self_compose(steps).get_epsilon_for_delta(delta)
        r = (
            RDPAccountant()
            .compose(PoissonSampled(mechanism=Gaussian(noise_multiplier=sigma), sampling_rate=q), steps)
            .epsilon(delta)
        )
        assert r.upper >= lower - 1e-6


def test_delta_is_inverse_of_epsilon():
    acc = RDPAccountant().compose(PoissonSampled(mechanism=Gaussian(noise_multiplier=1.1), sampling_rate=0.01), 1000)
    eps = acc.epsilon(1e-5).upper
    d = acc.delta(eps)
    assert d.upper == pytest.approx(1e-5, rel=1e-6)
    arr = acc.delta(np.array([0.0, eps, 2 * eps]))
    assert np.all(np.diff(arr.upper) <= 0) and np.all((arr.upper >= 0) & (arr.upper <= 1))
    assert arr.lower is None


def test_substitute_and_without_replacement_supported():
    g = Gaussian(noise_multiplier=1.0)
    a = RDPAccountant().compose(SampledWithoutReplacement(mechanism=g, sample_size=10, dataset_size=1000), 100)
    b = RDPAccountant().compose(PoissonSampled(mechanism=g, sampling_rate=0.01, relation="substitute"), 100)
    assert a.epsilon(1e-5).upper == pytest.approx(b.epsilon(1e-5).upper, rel=1e-12)
    c = RDPAccountant().compose(PoissonSampled(mechanism=g, sampling_rate=0.01), 100)
    assert a.epsilon(1e-5).upper > c.epsilon(1e-5).upper  # substitution is the weaker guarantee


def test_heterogeneous_and_serialisation():
    acc = RDPAccountant().compose(
        [
            (Gaussian(noise_multiplier=3.0), 10),
            (Laplace(scale=5.0), 2),
            (PoissonSampled(mechanism=Gaussian(noise_multiplier=1.0), sampling_rate=0.1), 5),
        ]
    )
    back = accountant_from_dict(json.loads(acc.to_json()))
    assert back == acc and back.epsilon(1e-6).upper == acc.epsilon(1e-6).upper


def test_edge_warning():
    acc = RDPAccountant(orders=[2.0, 3.0]).compose(Gaussian(noise_multiplier=100.0), 1)
    with pytest.warns(UserWarning, match="edge"):
        acc.epsilon(1e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        RDPAccountant().compose(Gaussian(noise_multiplier=1.0), 100).epsilon(1e-5)


@pytest.mark.parametrize(
    "mech",
    [
        PureDP(epsilon=1.0),
        ApproximateDP(epsilon=1.0, delta=1e-6),
        SampledWithReplacement(mechanism=Gaussian(noise_multiplier=1.0), sample_size=2, dataset_size=10),
    ],
)
def test_unsupported(mech):
    acc = RDPAccountant()
    with pytest.raises(UnsupportedMechanismError):
        acc.compose(mech)
    assert acc.ledger == ()


@pytest.mark.parametrize("bad", [0.0, -1.0, 1.0, 2.0, float("nan"), "x"])
def test_bad_delta(bad):
    acc = RDPAccountant().compose(Gaussian(noise_multiplier=1.0))
    with pytest.raises(ValueError, match="delta"):
        acc.epsilon(bad)


def test_bad_input():
    acc = RDPAccountant()
    with pytest.raises(ValueError, match="count"):
        acc.compose(Gaussian(noise_multiplier=1.0), 2.5)
    with pytest.raises(ValueError, match="noise_multiplier"):
        Gaussian(noise_multiplier=0.0)
    with pytest.raises(ValueError, match="sampling_rate"):
        PoissonSampled(mechanism=Gaussian(noise_multiplier=1.0), sampling_rate=1.5)
    with pytest.raises(ValueError, match="orders"):
        RDPAccountant(orders=[0.5, 2.0])
    with pytest.raises(ValueError, match="orders"):
        RDPAccountant(orders=[float("nan")])
    acc.compose(Gaussian(noise_multiplier=1.0))
    with pytest.raises(ValueError, match="epsilon"):
        acc.delta(-1.0)
    with pytest.raises(ValueError, match="epsilon"):
        acc.delta(float("nan"))

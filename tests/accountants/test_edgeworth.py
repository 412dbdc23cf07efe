"""Edgeworth accountant (Wang et al. 2023): cumulants vs quadrature, AEA accuracy, EEAI soundness, O(1) in m, bad input."""

import json
import math

import mpmath as mp
import numpy as np
import pytest
from _support import REFERENCE as REF

from tightdp import (
    ApproximateDP,
    EdgeworthAccountant,
    Gaussian,
    GDPAccountant,
    Laplace,
    PoissonSampled,
    PRVAccountant,
    PureDP,
    RandomizedResponse,
    SampledWithReplacement,
    UnsupportedMechanismError,
    accountant_from_dict,
)
from tightdp.accountants import _edgeworth_math as em


def _mp_moments(logp, logq, dens, pts, kpow=(1, 2, 3, 4)):
    """Raw moments E[L^k] of L = log p - log q under the density ``dens`` by mpmath quadrature."""
    mp.mp.dps = 25
    L = lambda x: logp(x) - logq(x)
    return [float(mp.quad(lambda x: L(x) ** k * dens(x), pts)) for k in kpow]


def _central(raw):
    m1, m2, m3, m4 = raw
    return m1, m2 - m1**2, m3 - 3 * m1 * m2 + 2 * m1**3, m4 - 4 * m1 * m3 + 6 * m1**2 * m2 - 3 * m1**4


@pytest.mark.parametrize("q,sigma", [(0.05, 1.0), (0.01, 0.8), (0.3, 2.0)])
def test_subsampled_gaussian_moments_against_mpmath(q, sigma):
    pair = PoissonSampled(mechanism=Gaussian(noise_multiplier=sigma), sampling_rate=q).privacy_losses()
    P, Q = em.pllr_moments(pair.remove)
    logp = lambda x: mp.log(q * mp.npdf(x, 1, sigma) + (1 - q) * mp.npdf(x, 0, sigma))
    logq = lambda x: mp.log(mp.npdf(x, 0, sigma))
    pts = [-mp.inf, -20 * sigma, 0, 1, 20 * sigma, mp.inf]
    for mom, dens in ((P, lambda x: mp.e ** logp(x)), (Q, lambda x: mp.e ** logq(x))):
        mean, mu2, mu3, mu4 = _central(_mp_moments(logp, logq, dens, pts))
        assert mom.mean == pytest.approx(mean, rel=1e-8)
        assert mom.mu2 == pytest.approx(mu2, rel=1e-8)
        assert mom.mu3 == pytest.approx(mu3, rel=1e-6, abs=1e-14)
        assert mom.mu4 == pytest.approx(mu4, rel=1e-6)
    # the add direction is the reflected pair: its P-moments are the remove Q-moments mirrored
    P2, _Q2 = em.pllr_moments(pair.add)
    assert P2.mean == pytest.approx(-Q.mean, rel=1e-10) and P2.mu3 == pytest.approx(-Q.mu3, rel=1e-8)


def test_laplace_and_gaussian_moments():
    r = 0.6
    P, Q = em.pllr_moments(Laplace(scale=1 / r).privacy_losses().remove)
    logp = lambda x: -abs(x) - mp.log(2)
    logq = lambda x: -abs(x - r) - mp.log(2)
    for mom, lp in ((P, logp), (Q, logq)):
        mean, mu2, mu3, mu4 = _central(_mp_moments(logp, logq, lambda x, lp=lp: mp.e ** lp(x), [-mp.inf, 0, r, mp.inf]))
        assert (mom.mean, mom.mu2, mom.mu4) == pytest.approx((mean, mu2, mu4), rel=1e-9)
        assert mom.mu3 == pytest.approx(mu3, rel=1e-7, abs=1e-15)
    # closed form of the Laplace mean: KL(Lap(0,1) || Lap(r,1)) = r + e^-r - 1
    assert P.mean == pytest.approx(r + math.exp(-r) - 1, rel=1e-12)
    G, H = em.pllr_moments(Gaussian(noise_multiplier=2.0).privacy_losses().remove)
    assert (G.mean, G.mu2, H.mean) == (0.125, 0.25, -0.125)


def test_gaussian_aea_is_exact():
    """Without subsampling the PLLRs are Gaussian: every expansion order gives the exact mu-GDP answer."""
    g = Gaussian(noise_multiplier=10.0)
    exact = GDPAccountant().compose(g, 300).epsilon(1e-5).upper
    for order in (1, 2, 3):
        e = EdgeworthAccountant(order=order).compose(g, 300).epsilon(1e-5)
        assert e.estimate == pytest.approx(exact, rel=1e-9)
        assert e.kind == "approximation"


@pytest.mark.parametrize(
    "r",
    [
        r
        for r in REF
        if r["mechanism"] == "poisson_subsampled_gaussian"
        and r.get("delta", 0) >= 1e-6
        and r["steps"] >= 1000
        and "epsilon" in r
    ],
)
def test_aea_matches_reference_in_004_regimes(r):
    mech = PoissonSampled(mechanism=Gaussian(noise_multiplier=r["noise_multiplier"]), sampling_rate=r["sampling_rate"])
    acc = EdgeworthAccountant().compose(mech, r["steps"])
    if "epsilon" in r and r.get("relation") != "remove":
        assert acc.epsilon(r["delta"]).estimate == pytest.approx(r["epsilon"], rel=0.05)


@pytest.mark.slow
def test_aea_within_5_percent_of_prv_on_random_dpsgd_settings():
    """Wang et al. 2023 Fig. 2-3 regimes (m >= 1000, delta >= 1e-6); truth = certified PRV interval."""
    rng = np.random.default_rng(7)
    settings = [
        (0.4 / math.sqrt(1000), 0.8, 1000, 0.1),
        (0.4 / math.sqrt(10000), 0.8, 10000, 0.1),
        (1 / math.sqrt(2000 * math.log(2000)), 0.8, 2000, 0.1),
    ]
    for _ in range(5):
        settings.append(
            (
                float(10 ** rng.uniform(-2, -1)),
                float(rng.uniform(0.8, 2)),
                int(10 ** rng.uniform(3, 4)),
                float(10 ** rng.uniform(-6, -2)),
            )
        )
    for q, s, m, d in settings:
        mech = PoissonSampled(mechanism=Gaussian(noise_multiplier=s), sampling_rate=q)
        truth = PRVAccountant(eps_error=0.005).compose(mech, m).epsilon(d)
        e = EdgeworthAccountant().compose(mech, m).epsilon(d)
        assert truth.lower * 0.95 <= e.estimate <= truth.upper * 1.05, (q, s, m, d)
        if e.lower is not None:  # EEAI: when reported, it contains the certified truth
            assert e.lower <= truth.upper + 1e-9 and e.upper >= truth.lower - 1e-9


@pytest.mark.slow
def test_eeai_contains_truth_or_is_flagged():
    cases = [
        ([(PoissonSampled(mechanism=Gaussian(noise_multiplier=1.5), sampling_rate=0.01), 10000)], 0.0496),
        ([(PoissonSampled(mechanism=Gaussian(noise_multiplier=1.0), sampling_rate=0.05), 3000)], 1e-5),
        ([(Laplace(scale=20.0), 2000)], 1e-5),
        (
            [
                (PoissonSampled(mechanism=Gaussian(noise_multiplier=1.2), sampling_rate=0.02), 2000),
                (Gaussian(noise_multiplier=30.0), 100),
                (Laplace(scale=50.0), 500),
            ],
            1e-4,
        ),
        ([(PoissonSampled(mechanism=Gaussian(noise_multiplier=0.8), sampling_rate=1e-3), 100)], 1e-7),
    ]
    reported = 0
    for entries, d in cases:
        truth = PRVAccountant(eps_error=0.005).compose(entries).epsilon(d)
        e = EdgeworthAccountant().compose(entries).epsilon(d)
        if e.details["vacuous"]:
            assert e.lower is None and e.upper is None
            continue
        reported += 1
        assert e.lower <= truth.upper + 1e-9 and e.upper >= truth.lower - 1e-9
        assert e.lower <= e.estimate <= e.upper
        # delta(eps) interval at the certified truth's epsilon contains delta
        dd = EdgeworthAccountant().compose(entries).delta(truth.upper)
        if dd.lower is not None:
            assert dd.lower <= d * 1.001 + 1e-12
    assert reported >= 2


def test_cost_independent_of_m():
    """Cumulants scale by m; the query does the same work for m = 1e2 and m = 1e7."""
    mech = PoissonSampled(mechanism=Gaussian(noise_multiplier=1.0), sampling_rate=0.01)
    a = EdgeworthAccountant().compose(mech, 100)
    b = EdgeworthAccountant().compose(mech, 10**7)
    sa, sb = a._prepare()["dirs"][0]["sp"], b._prepare()["dirs"][0]["sp"]
    assert sb.kappa == pytest.approx(tuple(k * 1e5 for k in sa.kappa), rel=1e-12)
    e = b.epsilon(1e-5)
    assert math.isfinite(e.estimate) and e.estimate > 0


def test_heterogeneous_equals_sum_of_cumulants():
    m1 = PoissonSampled(mechanism=Gaussian(noise_multiplier=1.0), sampling_rate=0.01)
    a = EdgeworthAccountant().compose([(m1, 300), (m1, 700)])
    b = EdgeworthAccountant().compose(m1, 1000)
    assert a.epsilon(1e-5).estimate == pytest.approx(b.epsilon(1e-5).estimate, rel=1e-10)


def test_delta_interval_and_monotone_estimate():
    acc = EdgeworthAccountant().compose(
        PoissonSampled(mechanism=Gaussian(noise_multiplier=1.5), sampling_rate=0.01), 10000
    )
    d = acc.delta(1.0)
    assert d.estimate == pytest.approx(
        0.0496014103163, rel=0.02
    )  # Koskela et al. 2020 Table 1 (remove relation ~ add-remove here)
    assert d.lower is None or d.lower <= d.estimate <= d.upper
    arr = acc.delta(np.linspace(0.5, 3, 6))
    assert np.all((arr.estimate >= 0) & (arr.estimate <= 1))


def test_interval_off_and_serialisation():
    acc = EdgeworthAccountant(order=3, interval=False).compose(Laplace(scale=10.0), 1000)
    e = acc.epsilon(1e-6)
    assert e.lower is None and e.upper is None and e.estimate > 0
    back = accountant_from_dict(json.loads(acc.to_json()))
    assert back == acc and back.epsilon(1e-6).estimate == e.estimate


@pytest.mark.parametrize(
    "mech",
    [
        PureDP(epsilon=1.0),
        ApproximateDP(epsilon=1.0, delta=1e-6),
        RandomizedResponse(noise_parameter=0.5, num_buckets=2),
        SampledWithReplacement(mechanism=Gaussian(noise_multiplier=1.0), sample_size=2, dataset_size=10),
    ],
)
def test_unsupported(mech):
    acc = EdgeworthAccountant()
    with pytest.raises(UnsupportedMechanismError):
        acc.compose(mech)
    assert acc.ledger == ()


def test_bad_input():
    for bad in (0, 4, 1.5, True, "2"):
        with pytest.raises(ValueError, match="order"):
            EdgeworthAccountant(order=bad)
    with pytest.raises(ValueError, match="interval"):
        EdgeworthAccountant(interval="yes")
    acc = EdgeworthAccountant().compose(Gaussian(noise_multiplier=1.0))
    for bad in (0.0, 1.0, float("nan"), -1e-3):
        with pytest.raises(ValueError, match="delta"):
            acc.epsilon(bad)
    with pytest.raises(ValueError, match="epsilon"):
        acc.delta(float("nan"))
    with pytest.raises(ValueError, match="count"):
        acc.compose(Gaussian(noise_multiplier=1.0), -3)
    with pytest.raises(ValueError, match="sampling_rate"):
        PoissonSampled(mechanism=Gaussian(noise_multiplier=1.0), sampling_rate=0.0)


# ------------------------------------------------------------------------------- Wang et al. 2023 Prop. 4.5, O(m)
@pytest.mark.parametrize("direction", ["remove", "add"])
def test_poisson_laplace_moments_against_mpmath(direction):
    """Wang et al. 2023 Prop. 4.5: P = q Lap(1, b) + (1 - q) Lap(0, b) against Q = Lap(0, b) (remove; add swaps them)."""
    q, b = 0.1, 0.7
    loss = getattr(PoissonSampled(mechanism=Laplace(scale=b), sampling_rate=q).privacy_losses(), direction)
    P, Q = em.pllr_moments(loss)
    mp.mp.dps = 25
    lap = lambda x, loc: mp.e ** (-abs(x - loc) / b) / (2 * b)
    mix = lambda x: q * lap(x, 1) + (1 - q) * lap(x, 0)
    p_d, q_d = (mix, lambda x: lap(x, 0)) if direction == "remove" else (lambda x: lap(x, 0), mix)
    logp, logq = (lambda x: mp.log(p_d(x))), (lambda x: mp.log(q_d(x)))
    for mom, dens in ((P, p_d), (Q, q_d)):
        mean, mu2, mu3, mu4 = _central(_mp_moments(logp, logq, dens, [-mp.inf, 0, 1, mp.inf]))
        assert (mom.mean, mom.mu2, mom.mu4) == pytest.approx((mean, mu2, mu4), rel=1e-9)
        assert mom.mu3 == pytest.approx(mu3, rel=1e-7, abs=1e-15)


def test_poisson_laplace_composes_and_matches_prv():
    """Once `compose` passed and `epsilon` raised TypeError (no PLLR moments for PoissonLaplaceLoss)."""
    lap = PoissonSampled(mechanism=Laplace(scale=2.0), sampling_rate=0.05)
    e = EdgeworthAccountant().compose(lap, 500).epsilon(1e-5)
    prv = PRVAccountant(eps_error=0.01).compose(lap, 500).epsilon(1e-5)
    assert e.estimate == pytest.approx(0.5 * (prv.lower + prv.upper), rel=0.02)
    if e.lower is not None:
        assert e.lower <= prv.upper and prv.lower <= e.upper


def test_moment_generating_functions_match_closed_forms():
    """log E_P[e^(lambda L)] = lambda D_(lambda+1)(P||Q), against closed forms at lambda = 1 and for Laplace."""
    q, sigma = 0.05, 0.9
    loss = PoissonSampled(mechanism=Gaussian(noise_multiplier=sigma), sampling_rate=q).privacy_losses().remove
    lam = np.array([1.0, 2.0])
    *_, k = em.pllr_statistics(loss, lam)
    # E_Q[(p/q)^2] = 1 + q^2 (e^(1/sigma^2) - 1); order 3 by the binomial expansion
    exact2 = 1 + q * q * math.expm1(1 / sigma**2)
    exact3 = sum(math.comb(3, j) * q**j * (1 - q) ** (3 - j) * math.exp(j * (j - 1) / (2 * sigma**2)) for j in range(4))
    assert k == pytest.approx([math.log(exact2), math.log(exact3)], rel=1e-10)
    r = 0.8
    lam = np.array([0.5, 3.0, 40.0])
    *_, k = em.pllr_statistics(Laplace(scale=1 / r).privacy_losses().remove, lam)
    a = lam + 1
    exact = np.log(a / (2 * a - 1) * np.exp((a - 1) * r) + (a - 1) / (2 * a - 1) * np.exp(-a * r))
    assert k == pytest.approx(exact, rel=1e-10)


# 1000 distinct mechanisms under 10 s: tests/test_edgeworth_higher.py

"""Edgeworth accountant (Wang et al. 2023): the EEAI forms, the i.i.d. bounds of App. H, the tails.

Truth: the closed-form Gaussian (the i.i.d. Gaussian PLD is exactly normal, so every Edgeworth term
vanishes and delta(eps) is the mu-GDP curve), the certified connect-the-dots accountant (subsampled
Gaussians) and its PRV fallback (subsampled Laplace), the printed values of DGG's R package
BoundEdgeworth (README), and Hoeffding against the exact-MGF Chernoff bound.
"""

import math

import numpy as np
import pytest
from _support import scaled
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import tightdp
from tightdp import ConnectDotsAccountant, EdgeworthAccountant, Gaussian, Laplace, PoissonSampled
from tightdp.accountants import _edgeworth_math as em


def gdp_delta(mu: float, eps: float) -> float:
    """delta(eps) of mu-GDP (Dong, Roth, Su 2022, Cor. 2.13)."""
    return float(stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2))


# ------------------------------------------------------------------ the Riemann sums themselves
@settings(max_examples=scaled(40), deadline=None)
@given(mu=st.floats(0.05, 8.0), eps=st.floats(0.0, 20.0))
def test_integrated_delta_brackets_exact_gaussian(mu, eps):
    """With the exact survival function of S ~ N(mu^2/2, mu^2) (under P) the two Riemann sums bracket
    the closed-form delta and are close to each other (the integral identity delta = E_P[(1 - e^(eps-S))_+])."""
    sf = lambda x: stats.norm.sf(x, loc=mu * mu / 2, scale=mu)
    lo, up = em.integrated_delta_bounds(np.array([eps]), em.riemann_offsets(mu), sf, sf)
    truth = gdp_delta(mu, eps)
    assert lo[0] <= truth * (1 + 1e-9) + 1e-300
    assert truth <= up[0] * (1 + 1e-9) + 1e-300
    # the gap telescopes: at most the first cell's weight times P(S > eps) (plus the e^-60 remainder)
    h0 = em.riemann_offsets(mu)[1]
    assert up[0] - lo[0] <= -math.expm1(-h0) * sf(eps) * (1 + 1e-9) + 1e-25


# ------------------------------------------------------------------ the Gaussian: Edgeworth terms vanish
@pytest.mark.parametrize("sigma,m", [(10.0, 300), (3.0, 50), (30.0, 5000)])
@pytest.mark.parametrize("eeai", ["integrated", "paper"])
def test_gaussian_eeai_contains_closed_form(sigma, m, eeai):
    mu = math.sqrt(m) / sigma
    acc = EdgeworthAccountant(eeai=eeai).compose(Gaussian(noise_multiplier=sigma), m)
    eps = np.array([0.0, 0.3, 1.0, 2.5])
    d = acc.delta(eps)
    exact = np.array([gdp_delta(mu, e) for e in eps])
    assert np.allclose(d.estimate, exact, rtol=1e-9, atol=1e-15)  # the AEA is exact here
    raw = (d.lower, d.upper) if d.lower is not None else d.details["interval_raw"]
    assert np.all(np.asarray(raw[0]) <= exact * (1 + 1e-9)) and np.all(exact <= np.asarray(raw[1]) * (1 + 1e-9))
    for delta in (1e-5, 1e-3):
        e = acc.epsilon(delta)
        truth = tightdp.GDPAccountant().compose(Gaussian(noise_multiplier=sigma), m).epsilon(delta).upper
        lo, up = e.details["interval_raw"]
        assert lo <= truth <= up
        assert e.kind == "approximation"


def test_gaussian_standardized_moments_are_normal():
    """The PLLR of the Gaussian mechanism is normal: K3 = 2 sqrt(2/pi), K4 = 3, lambda3 = 0 (Wang et al. 2023 Lemma 4.3)."""
    P, _ = em.pllr_moments(Gaussian(noise_multiplier=2.0).privacy_losses().remove)
    _n, K3, K3t, K4, lam3 = em.standardized(em.SumStats.from_entries([(P, 100)]))
    assert (K3, K4, lam3) == pytest.approx((2 * math.sqrt(2 / math.pi), 3.0, 0.0), abs=1e-12)
    assert K3t == pytest.approx(K3 + math.sqrt(2 / math.pi), rel=1e-12)


# ------------------------------------------------------------------ DGG bounds against the authors' printed values
def test_dgg_iid_bounds_match_boundedgeworth_readme():
    """BoundEdgeworth README: K4 = 9, n = 1000, eps = 0.1, iid, skewed (K3 = K4^(3/4), lambda3 = 0.621 K3,
    K3tilde = K3 + 1): Thm A.3 0.1626857; Thm A.5 with kappa = 0.99: 0.1214038."""
    K4 = 9.0
    K3 = K4**0.75
    args = (1000.0, K3, K3 + 1, K4, 0.621 * K3, 0.1)
    assert em._dgg_iid(*args, None) == pytest.approx(0.1626857, abs=5e-8)
    assert em._dgg_iid(*args, 0.99) == pytest.approx(0.1214038, abs=5e-8)


def test_iid_bounds_decrease_like_one_over_m():
    """App. H: with the characteristic-function condition the i.i.d. bound falls like 1/m (Wang et al. 2023 Remark 4.4)."""
    P, _ = em.pllr_moments(
        PoissonSampled(mechanism=Gaussian(noise_multiplier=1.0), sampling_rate=0.05).privacy_losses().remove
    )
    vals = [em.edgeworth_iid_bounds(em.SumStats.from_entries([(P, m)]), 0.5)["A5"] for m in (10**6, 10**7)]
    assert vals[0] / vals[1] > 9.0  # O(1/m) or faster; an O(1/sqrt(m)) bound would give 3.2
    inid = em.edgeworth_uniform_bound(em.SumStats.from_entries([(P, 10**7)]))
    assert vals[1] < inid  # Lemma 4.3's bound is O(1/sqrt(m))


# ------------------------------------------------------------------ against the certified accountant
CASES = [
    (PoissonSampled(mechanism=Gaussian(noise_multiplier=0.8), sampling_rate=0.01), 1000, 0.015),
    (PoissonSampled(mechanism=Gaussian(noise_multiplier=1.0), sampling_rate=0.05), 200, 1e-5),
    (PoissonSampled(mechanism=Gaussian(noise_multiplier=0.8), sampling_rate=0.4 / math.sqrt(1e5)), 100_000, 0.1),
    (PoissonSampled(mechanism=Gaussian(noise_multiplier=2.0), sampling_rate=0.2), 3000, 1e-6),
    (PoissonSampled(mechanism=Laplace(scale=2.0), sampling_rate=0.05), 500, 1e-5),
    (Laplace(scale=10.0), 300, 1e-4),
]


@pytest.mark.parametrize("mech,m,delta", CASES)
@pytest.mark.parametrize("eeai", ["integrated", "paper"])
def test_eeai_contains_certified_truth(mech, m, delta, eeai):
    truth = ConnectDotsAccountant().compose(mech, m).epsilon(delta)
    assert truth.kind == "bound"
    e = EdgeworthAccountant(eeai=eeai).compose(mech, m).epsilon(delta)
    lo, up = e.details["interval_raw"]
    assert lo <= truth.upper and truth.lower <= up
    if e.lower is not None:
        assert (e.lower, e.upper) == (lo, up) and e.lower <= e.estimate <= e.upper
    # delta at the certified epsilon's ends: the EEAI of delta brackets the target
    d = EdgeworthAccountant(eeai=eeai).compose(mech, m).delta(np.array([truth.lower, truth.upper]))
    dlo, dup = (d.lower, d.upper) if d.lower is not None else d.details["interval_raw"]
    assert dlo[1] <= delta * (1 + 1e-9) and delta <= dup[0] * (1 + 1e-9)


def test_integrated_form_is_never_looser_where_the_paper_form_is_informative():
    """Fig. 3 left at m = 1e5: both informative; the integrated form pays Delta once instead of e^eps times."""
    mech = PoissonSampled(mechanism=Gaussian(noise_multiplier=0.8), sampling_rate=0.4 / math.sqrt(1e5))
    a = EdgeworthAccountant().compose(mech, 100_000).epsilon(0.1)
    b = EdgeworthAccountant(eeai="paper").compose(mech, 100_000).epsilon(0.1)
    assert a.details["informative"] and b.details["informative"]
    assert a.lower >= b.lower and a.upper <= b.upper
    assert a.width < 0.6 * b.width


def test_iid_interval_is_labelled_and_contains_truth():
    mech = PoissonSampled(mechanism=Gaussian(noise_multiplier=0.8), sampling_rate=0.01)
    e = EdgeworthAccountant().compose(mech, 3000).epsilon(0.015)
    iid = e.details["iid_interval"]
    assert iid["kind"] == "approximation" and 0 < min(iid["kappa"]) < 1
    truth = ConnectDotsAccountant().compose(mech, 3000).epsilon(0.015)
    assert iid["lower"] <= truth.upper and truth.lower <= iid["upper"]
    assert iid["lower"] > 0 and e.details["interval_raw"][0] == 0.0  # informative only through App. H
    # heterogeneous ledgers have no i.i.d. interval
    het = EdgeworthAccountant().compose([(mech, 10), (Gaussian(noise_multiplier=5.0), 10)]).epsilon(1e-3)
    assert "iid_interval" not in het.details


# ------------------------------------------------------------------ tails
@pytest.mark.parametrize("q,b", [(0.05, 2.0), (1.0, 5.0), (0.3, 0.7)])
def test_hoeffding_tail_prop45(q, b):
    """Wang et al. 2023 Prop. 4.5: the PLLR range is tau = log(1 - p + p e^mu) - log(1 - p + p e^-mu) (mu = 1/b), and Hoeffding
    is never below the Chernoff bound with the exact moment generating function (it bounds that MGF)."""
    mech = PoissonSampled(mechanism=Laplace(scale=b), sampling_rate=q) if q < 1 else Laplace(scale=b)
    loss = mech.privacy_losses().remove
    lo, hi = em.pllr_range(loss)
    mu = 1 / b
    assert hi - lo == pytest.approx(math.log(1 - q + q * math.exp(mu)) - math.log(1 - q + q * math.exp(-mu)), rel=1e-12)
    lams = np.geomspace(1e-3, 50, 400)
    P, _, K = em.pllr_statistics(loss, lams)
    m = 300
    x = m * P.mean + np.linspace(0.01, 3, 30) * math.sqrt(m) * (hi - lo)
    chern = np.exp(np.min(m * K[None, :] - lams[None, :] * x[:, None], axis=1))
    hoeff = em.hoeffding_tail(m * P.mean, m * (hi - lo) ** 2, x)
    assert np.all(chern <= hoeff * (1 + 1e-9))
    assert (
        em.pllr_range(
            PoissonSampled(mechanism=Gaussian(noise_multiplier=1.0), sampling_rate=0.1).privacy_losses().remove
        )
        is None
    )


def test_thm1_tail_as_printed():
    """Wang et al. 2023 Thm 1 (approximation): a probability, non-increasing in eps, and never tighter than the Chernoff
    bound with the exact MGF at the Fig. 2 setting (where it would matter)."""
    p, sigma, m = 0.01, 0.8, 1000
    mech = PoissonSampled(mechanism=Gaussian(noise_multiplier=sigma), sampling_rate=p)
    loss = mech.privacy_losses().remove
    _, Q, _ = em.pllr_statistics(loss)
    eps = np.linspace(0.0, 20.0, 81)
    t = em.thm1_tail(p, 1 / sigma, m, eps, eta=-Q.mean)
    assert np.all((t >= 0) & (t <= 1)) and np.all(np.diff(t) <= 0)
    # the e^eps-amplified term of Def. 4.2: e^eps P_Q(S > eps) <= Chernoff (what the accountant uses)
    cgf = m * em.pllr_statistics(loss)[2]
    chern = EdgeworthAccountant._chernoff(cgf, eps)
    assert np.all(chern[eps > 2] <= np.exp(eps[eps > 2]) * t[eps > 2])


def test_bad_eeai_option_and_serialisation():
    with pytest.raises(ValueError, match="eeai"):
        EdgeworthAccountant(eeai="exact")
    acc = EdgeworthAccountant(eeai="paper").compose(Laplace(scale=10.0), 100)
    back = tightdp.accountant_from_dict(acc.to_dict())
    assert back.eeai == "paper" and back == acc


def test_add_direction_from_remove_rule():
    """Poisson-subsampled Gaussians: the add statistics derived from the remove rule equal a direct quadrature."""
    pair = PoissonSampled(mechanism=Gaussian(noise_multiplier=0.9), sampling_rate=0.05).privacy_losses()
    assert em._is_swap(pair.remove, pair.add)
    fast = em.pllr_statistics_pair(pair.remove, pair.add)[1]
    slow = em.pllr_statistics(pair.add)
    for a, b in zip(fast[:2], slow[:2]):
        assert np.allclose(list(vars(a).values()), list(vars(b).values()), rtol=1e-12, atol=1e-15)
    assert np.allclose(fast[2], slow[2], rtol=1e-12)


@pytest.mark.slow
def test_thousand_distinct_mechanisms_under_ten_seconds():
    """1000 distinct mechanisms in under 10 s. Timed in CPU seconds of this process (all threads), so a
    loaded shared machine does not fail it; about 3.5 s here, where wall time ran to 8-15 s at load 10."""
    import time

    tightdp.clear_caches()
    t = time.process_time()
    acc = EdgeworthAccountant()
    for i in range(1000):
        acc.compose(PoissonSampled(mechanism=Gaussian(noise_multiplier=1.0 + 1e-3 * i), sampling_rate=0.01))
    e = acc.epsilon(1e-5)
    assert time.process_time() - t < 10.0
    lo, up = e.details["interval_raw"]
    assert lo <= 1.092 and up >= 1.055  # the PRV accountant's certified interval [1.055, 1.092] (test_edgeworth.py)

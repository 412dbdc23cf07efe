"""Per-example RDP / mu-GDP accounting, the filters' rules and the paper's sigma-grid (Koskela et al. 2023 Sec. 4-5, App. D.2).

Truth: an example whose norm is the same at every step is exactly the Poisson-subsampled Gaussian at that
sensitivity, composed k times; ``ConnectDotsAccountant`` gives its certified interval and
``RDPAccountant`` its RDP bound. DP-GD (sampling rate 1) has closed forms (Koskela et al. 2023 Thm 11, eq. (C.2)).
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from _support import scaled
from hypothesis import given, settings
from hypothesis import strategies as st

from tightdp import ConnectDotsAccountant, RDPAccountant
from tightdp.accountants._rdp_math import epsilon_from_rdp
from tightdp.individual import IndividualAccountant
from tightdp.individual.gdp import gdp_delta_bounds, gdp_epsilon, gdp_mu
from tightdp.individual.rdp import INDIVIDUAL_ORDERS, epsilons_from_rdp_rows, gaussian_budget_mu
from tightdp.mechanisms import Gaussian, PoissonSampled

SIGMA, Q, K, DELTA = 1.2, 0.05, 30, 1e-5
RATIOS = (0.25, 0.5, 1.0)  # on the uniform grid of 8 buckets: only the 1e-9 margin rounds them


@pytest.fixture(scope="module")
def constant_norms():
    acc = IndividualAccountant(
        num_examples=len(RATIOS),
        noise_multiplier=SIGMA,
        clip_norm=2.0,
        sampling_rate=Q,
        num_buckets=8,
        resolution=400.0,
    )
    for _ in range(K):
        acc.record_step(2.0 * np.array(RATIOS))
    return acc


def _truth(r: float):
    mech = PoissonSampled(mechanism=Gaussian(noise_multiplier=SIGMA, sensitivity=r), sampling_rate=Q)
    pld = ConnectDotsAccountant(eps_error=0.002).compose(mech, K).epsilon(DELTA)
    rdp = RDPAccountant().compose(mech, K).epsilon(DELTA)
    return pld, rdp


def test_rdp_upper_above_pld_upper_above_truth(constant_norms):
    pld = constant_norms.epsilons(DELTA)
    rdp = constant_norms.epsilons(DELTA, method="rdp")
    assert rdp.kind == "bound" and rdp.lower is None and rdp.details["method"] == "rdp"
    for i, r in enumerate(RATIOS):
        truth, truth_rdp = _truth(r)
        # the PLD interval contains the truth (both certified)
        assert pld.lower[i] <= truth.upper and pld.upper[i] >= truth.lower
        # RDP is lossy: above the PLD upper bound and above the truth
        assert rdp.upper[i] >= pld.upper[i] >= truth.lower
        # the same RDP curve as the library's RDP accountant, on a sub-grid of its orders: not below it,
        # and close (1%)
        assert truth_rdp.upper <= rdp.upper[i] * (1 + 1e-9) <= 1.01 * truth_rdp.upper + 1e-9


def test_vectorised_rdp_conversion_matches_the_library():
    rng = np.random.default_rng(3)
    curves = rng.uniform(0, 3, size=(20, INDIVIDUAL_ORDERS.size)) * INDIVIDUAL_ORDERS[None, :] ** rng.uniform(
        0, 1, size=(20, 1)
    )
    curves[0] = 0.0
    curves[1] = 1e-12  # Bretagnolle-Huber: delta above sqrt(1 - exp(-rdp)) gives 0
    for delta in (1e-9, 1e-5, 0.3):
        eps, _ = epsilons_from_rdp_rows(INDIVIDUAL_ORDERS, curves, delta)
        ref = [epsilon_from_rdp(orders=INDIVIDUAL_ORDERS, rdp=c, delta=delta)[0] for c in curves]
        np.testing.assert_allclose(eps, ref, rtol=1e-12, atol=0)


def test_dpgd_gdp_and_rdp_closed_forms():
    sigma, n = 8.0, 4
    acc = IndividualAccountant(num_examples=n, noise_multiplier=sigma, clip_norm=1.0, sampling_rate=1.0)
    norms = np.array([0.0, 0.3, 0.7, 5.0])
    for t in range(40):
        acc.record_step(norms * (1 + 0.01 * t))
    r = np.minimum(norms[None, :] * (1 + 0.01 * np.arange(40))[:, None], 1.0)
    mu = np.sqrt((r**2).sum(axis=0)) / sigma
    g = acc.epsilons(DELTA, method="gdp")
    assert g.kind == "bound"
    for i in range(n):
        assert g.upper[i] == pytest.approx(gdp_epsilon(mu=mu[i], delta=DELTA) if mu[i] else 0.0, rel=1e-9)
    np.testing.assert_allclose(acc.gdp_mus().upper, mu, rtol=1e-12)
    orders, curves = acc.rdp_curves()
    np.testing.assert_allclose(curves, 0.5 * mu[:, None] ** 2 * orders[None, :], rtol=1e-12)
    rdp = acc.epsilons(DELTA, method="rdp").upper
    assert np.all(rdp[1:] > g.upper[1:]) and rdp[0] == 0.0  # RDP's conversion is lossy (Koskela et al. 2023 Sec. 4.1)


def test_gdp_fit_dominates_the_certified_delta_curve(constant_norms):
    fit = constant_norms.gdp_mus(points=24)
    assert fit.kind == "approximation"
    mu = np.asarray(fit.upper)
    emax = fit.details["epsilon_max"]
    grid = np.linspace(0, emax, 9)
    for _j, e in enumerate(grid[:-1]):
        d = constant_norms.deltas(float(e)).upper  # certified upper deltas
        mask = d >= np.asarray(fit.details["certified_above"])
        # the fit is checked against the next point of its own (finer) grid: compare one step further
        lo = gdp_delta_bounds(mu=mu, epsilon=min(e + emax / 23, emax))[0]
        assert np.all(lo[mask] >= d[mask] * (1 - 1e-9))
    g = constant_norms.epsilons(DELTA, method="gdp")
    assert g.details["certified"].all() and g.kind == "bound"
    for i, r in enumerate(RATIOS):
        truth, _ = _truth(r)
        assert g.upper[i] >= truth.lower


def test_gdp_filter_stopping_rule_by_hand():
    # DP-GD, sigma = 10, norms at the clip: mu_t = 1/10 each step; Alg. 1 admits k steps while
    # k / 100 <= B^2, B the root of (C.2) at (eps, delta) = (1, 1e-5) (mpmath, 40 digits)
    with mpmath.workdps(40):
        f = lambda b: (mpmath.ncdf(-1 / b + b / 2) - mpmath.e * mpmath.ncdf(-1 / b - b / 2)) - mpmath.mpf("1e-5")
        lo, hi = mpmath.mpf("0.05"), mpmath.mpf(2)
        for _ in range(140):  # bisection: f is increasing in b
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if f(mid) < 0 else (lo, mid)
        B = float(lo)
    assert gdp_mu(epsilon=1.0, delta=1e-5) == pytest.approx(B, rel=1e-9)
    acc = IndividualAccountant(num_examples=2, noise_multiplier=10.0, clip_norm=1.0, sampling_rate=1.0)
    k = 0
    while acc.active(1.0, 1e-5).all():
        acc.record_step(np.ones(2))
        k += 1
    assert k == math.floor(100 * B * B)


def test_rdp_filter_stopping_rule_by_hand():
    # DP-GD, sigma = 10: each step's RDP is alpha / 200; at order a the budget that Lemma C.4 converts to
    # eps = 1 at delta = 1e-5 is b(a) = 1 - log(1 - 1/a) + (log 1e-5 + log a) / (a - 1); the filter
    # uses the order allowing the most worst-case steps and stops at floor(200 b(a) / a)
    a = INDIVIDUAL_ORDERS
    b = 1.0 - np.log1p(-1 / a) + (math.log(1e-5) + np.log(a)) / (a - 1)
    expected = int(np.max(np.floor(200 * b / a)))
    acc = IndividualAccountant(num_examples=1, noise_multiplier=10.0, clip_norm=1.0, sampling_rate=1.0)
    k = 0
    while acc.active(1.0, 1e-5, rule="rdp")[0]:
        acc.record_step(np.ones(1))
        k += 1
        assert k < 1000
    assert k == expected
    assert k < math.floor(100 * gdp_mu(epsilon=1.0, delta=1e-5) ** 2)  # GDP admits more (Koskela et al. 2023 Sec. 4.1)
    # the Gaussian budget of Sec. 5: its curve converts to at most eps = 1
    bm = gaussian_budget_mu(1.0, 1e-5, INDIVIDUAL_ORDERS)
    e = epsilons_from_rdp_rows(INDIVIDUAL_ORDERS, 0.5 * bm * bm * INDIVIDUAL_ORDERS[None, :], 1e-5)[0][0]
    assert e <= 1.0 and bm < gdp_mu(epsilon=1.0, delta=1e-5)


def test_dpsgd_rules_on_a_small_ledger():
    rng = np.random.default_rng(1)
    acc = IndividualAccountant(
        num_examples=60, noise_multiplier=1.0, clip_norm=1.0, sampling_rate=0.05, num_buckets=16, resolution=400.0
    )
    base = rng.lognormal(-1, 0.8, 60)
    for _ in range(30):
        acc.record_step(base * rng.uniform(0.7, 1.3, 60))
    pld = acc.active(2.0, 1e-5, rule="pld")
    rdp = acc.active(2.0, 1e-5, rule="rdp")
    assert np.array_equal(acc.active(2.0, 1e-5), rdp)  # the default for DP-SGD: the proven RDP filter
    assert rdp.dtype == bool and pld.shape == rdp.shape == (60,)
    # the proven RDP filter never admits an example the certified PLD odometer already rules out
    assert not np.any(rdp & ~pld)
    assert 0 < rdp.sum() <= pld.sum()
    paper = acc.active(2.0, 1e-5, rule="paper")
    assert paper.dtype == bool and paper.shape == (60,)
    # an example whose next norm is 0 adds nothing: still active under the RDP rule if it was
    nxt = np.where(rdp, 0.0, 1.0)
    assert np.all(acc.active(2.0, 1e-5, nxt, rule="rdp")[rdp])


@settings(max_examples=scaled(60), deadline=None)
@given(st.lists(st.floats(0, 10, allow_nan=False), min_size=1, max_size=20), st.integers(2, 40), st.floats(1.5, 50))
def test_paper_grid_rounds_the_noise_down(norms, buckets, smax_factor):
    sigma, clip = 0.9, 1.7
    acc = IndividualAccountant(
        num_examples=len(norms),
        noise_multiplier=sigma,
        clip_norm=clip,
        sampling_rate=0.1,
        num_buckets=buckets,
        sigma_grid="paper",
        sigma_max=sigma * smax_factor,
    )
    acc.record_step(np.array(norms))
    codes = np.argmax(acc.bucket_counts, axis=1)
    ratios = acc._nominal_ratios()
    r = np.minimum(np.array(norms), clip) / clip
    # the bucket's ratio is at least the step's (Koskela et al. 2023 Thm D.2: noise rounded down onto the grid) ...
    assert np.all(ratios[codes] * (1 + 1e-9) >= r)
    # ... and it is the grid point of eq. (D.2): sigma_i <= sigma C / min(g, C) < sigma_{i+1}
    sig_grid = sigma / ratios[1:]  # descending noise: sigma_max ... sigma
    for g, c, rr in zip(norms, codes, r):
        if g == 0:
            assert c == 0
            continue
        if rr < 1e-300:  # a subnormal norm: bucket 1, nothing finer to check
            assert c == 1
            continue
        eff = sigma / rr
        assert sig_grid[c - 1] <= eff * (1 + 1e-12)
        if c - 1 > 0:
            assert eff < sig_grid[c - 2] * (1 + 1e-12)


def test_paper_grid_is_looser_for_small_norms_and_still_certified():
    r_small = 0.05  # below sigma / sigma_max = 0.1: the paper's grid rounds it up to 0.1
    kw = dict(num_buckets=20, resolution=400.0)
    uni = IndividualAccountant(num_examples=2, noise_multiplier=SIGMA, clip_norm=1.0, sampling_rate=Q, **kw)
    pap = IndividualAccountant(
        num_examples=2, noise_multiplier=SIGMA, clip_norm=1.0, sampling_rate=Q, sigma_grid="paper", **kw
    )
    for _ in range(K):
        uni.record_step(np.array([r_small, 1.0]))
        pap.record_step(np.array([r_small, 1.0]))
    eu, ep = uni.epsilons(DELTA), pap.epsilons(DELTA)
    truth, _ = _truth(r_small)
    at_floor, _ = _truth(0.1)
    assert ep.upper[0] > eu.upper[0] >= truth.lower  # the paper grid is the looser one here
    assert ep.upper[0] >= at_floor.lower  # it accounts the step at ratio sigma / sigma_max
    assert ep.upper[1] == pytest.approx(eu.upper[1], rel=1e-6)  # the clip is on both grids
    assert pap.options()["sigma_grid"] == "paper" and pap.options()["sigma_max"] == pytest.approx(10 * SIGMA)


def test_paper_grid_save_load_round_trip(tmp_path):
    acc = IndividualAccountant(
        num_examples=3,
        noise_multiplier=1.0,
        clip_norm=1.0,
        sampling_rate=0.1,
        num_buckets=5,
        sigma_grid="paper",
        sigma_max=4.0,
    )
    acc.record_step(np.array([0.0, 0.3, 2.0]))
    acc.save(tmp_path / "l.npz")
    back = IndividualAccountant.load(tmp_path / "l.npz")
    assert back == acc and back.options()["sigma_max"] == 4.0


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(sigma_grid="log"), "sigma_grid"),
        (dict(sigma_grid="paper", sigma_max=0.5), "sigma_max"),
        (dict(sigma_grid="paper", sigma_max=math.inf), "sigma_max"),
        (dict(sigma_max=3.0), "sigma_max"),
    ],
)
def test_bad_grid_options(kwargs, match):
    with pytest.raises(ValueError, match=match):
        IndividualAccountant(num_examples=3, noise_multiplier=1.0, clip_norm=1.0, sampling_rate=0.1, **kwargs)


def test_bad_method_rule_and_fit_arguments(constant_norms):
    with pytest.raises(ValueError, match="method"):
        constant_norms.epsilons(DELTA, method="moments")
    with pytest.raises(ValueError, match="delta"):
        constant_norms.epsilons(0.0, method="rdp")
    with pytest.raises(ValueError, match="rule"):
        constant_norms.active(1.0, DELTA, rule="gdp-ish")
    with pytest.raises(ValueError, match="orders"):
        constant_norms.rdp_curves(orders=[0.5, 2.0])
    with pytest.raises(ValueError, match="points"):
        constant_norms.gdp_mus(points=1)
    with pytest.raises(ValueError, match="epsilon_max"):
        constant_norms.gdp_mus(epsilon_max=-1.0)
    with pytest.raises(ValueError, match="delta_min"):
        constant_norms.gdp_mus(delta_min=2.0)
    with pytest.raises(ValueError, match="grad_norms"):
        constant_norms.active(1.0, DELTA, np.ones(2), rule="rdp")

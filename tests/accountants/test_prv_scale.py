"""PRV at scale and sampling with replacement: the multi-level composition tree
(``tightdp.pld.hierarchy.compose_tree``) stays certified, and the truncated with-replacement mixture's
intervals contain the truth."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from scipy import optimize, special, stats

from tightdp import (
    ConnectDotsAccountant,
    FourierAccountant,
    Gaussian,
    PoissonSampled,
    PRVAccountant,
    SampledWithReplacement,
)


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


@pytest.mark.parametrize("sigma,k,delta", [(20.0, 4000, 1e-5), (30.0, 3001, 1e-20), (60.0, 100_000, 1e-5)])
def test_tree_contains_closed_form_gaussian(sigma, k, delta):
    acc = PRVAccountant().compose(Gaussian(noise_multiplier=sigma), k)
    b = acc.epsilon(delta)
    assert "tree" in b.details  # the multi-level composition answered
    if k >= 100_000:  # the fine discretisation has wide tail cells (their coupling in coupling_tails)
        fine = acc._fine_terms(acc._directions()[0], 0.5e-8, 0.25e-8)
        assert fine[0][0].coupling_tails
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
    """The tree's schedule keeps the Hoeffding sum at or below the single-level ``k h^2``, on the plan's
    formula and on the composition actually built."""
    acc = PRVAccountant()
    loss = PoissonSampled(mechanism=Gaussian(noise_multiplier=0.8), sampling_rate=4e-3).privacy_losses().remove
    for k in (3000, 12345, 10**6):
        eta = 5e-9
        radices, meshes = acc._tree_plan([(loss, k)], eta)
        assert len(meshes) == len(radices) + 1 and all(r >= 2 for r in radices)
        eta_b = acc._tree_budget(eta, eta)[0]
        h = 0.985 * acc.eps_error / math.sqrt(0.5 * k * math.log(1.0 / eta_b))
        sizes = np.cumprod(radices)
        assert sizes[-1] <= k
        H = k * meshes[0] ** 2 + sum((k // m + 1) * g * g for m, g in zip(sizes, meshes[1:]))
        assert k * h * h * (1 + 1e-12) >= H
    comp = acc.compose(PoissonSampled(mechanism=Gaussian(noise_multiplier=0.8), sampling_rate=4e-3), 12345)
    terms = comp._directions()[0]
    built = comp._composed(0, terms, eta, eta, 0.0, 1e-13)
    eta_b = acc._tree_budget(eta, eta)[0]
    assert built.hoeffding_sq <= 12345 * (0.985 * acc.eps_error) ** 2 / (0.5 * 12345 * math.log(1 / eta_b)) * 1.000001


def _with_replacement_delta(m: int, n: int, sigma: float, eps: float) -> float:
    """One step, every binomial component, to 30 digits: int (P - e^eps Q)_+ with P = sum w_l N(l, s^2),
    Q = sum w_l N(-l, s^2); the loss is increasing, so the integral starts at the root x* of L(x) = eps."""
    mpmath.mp.dps = 30
    p = mpmath.mpf(1) / n
    w = [mpmath.binomial(m, l) * p**l * (1 - p) ** (m - l) for l in range(m + 1)]
    w = [(l, x) for l, x in enumerate(w) if x > mpmath.mpf(10) ** -60]
    s = mpmath.mpf(sigma)
    dens = lambda x, sgn: sum(x_w * mpmath.npdf(x, sgn * l, s) for l, x_w in w)
    x0 = mpmath.findroot(lambda x: mpmath.log(dens(x, 1)) - mpmath.log(dens(x, -1)) - eps, 1.0)
    tail = lambda sgn: sum(x_w * mpmath.ncdf(-(x0 - sgn * l) / s) for l, x_w in w)
    return float(tail(1) - mpmath.e**eps * tail(-1))


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


# --------------------------------------------------------------------------- devices of the tree, one by one


def test_powers_by_squaring_within_charged_error():
    """``_powers`` (repeated squaring up to 2^12, exp-log beyond) stays within the round-off ``compose``
    charges, against 40-digit mpmath powers; exactly zero coefficients raise no warning and give 0."""
    import warnings

    from tightdp.pld.composition import _powers

    rng = np.random.default_rng(1)
    w = rng.random(257)
    w /= w.sum()
    phi = np.fft.rfft(w)
    phi[[3, 7]] = 0.0
    mag = np.abs(phi)
    gamma = 5.0 * np.finfo(float).eps / 2 * math.log2(257)
    u = np.finfo(float).eps / 2
    mpmath.mp.dps = 40
    for c in (2, 3, 8, 1000, 4095, 5000):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            pw, b, e = _powers(phi, mag, gamma, c)
        assert pw[3] == 0 and pw[7] == 0 and e[3] == 0
        for i in range(0, phi.size, 5):
            exact = mpmath.mpc(phi[i].real, phi[i].imag) ** c
            err = float(abs(mpmath.mpc(pw[i].real, pw[i].imag) - exact))
            assert err <= (b[i] - e[i]) + (4 * c + 800) * u * b[i] + 1e-300, (c, i, err)
            assert e[i] <= b[i]


@pytest.mark.parametrize("radices", [[3, 5, 7], [64, 2]])
def test_mixed_radix_tree_contains_closed_form(radices):
    """``compose_tree`` with odd mixed radices (every level has a remainder digit) against the closed-form
    Gaussian: the certified delta interval contains the truth at three epsilons."""
    from tightdp.losses import GaussianLoss
    from tightdp.pld import delta_bounds, discretise
    from tightdp.pld.hierarchy import compose_tree

    sigma, k, eta = 12.0, 1234, 1e-10
    mu = math.sqrt(k) / sigma
    loss = GaussianLoss(mu=1.0 / sigma)
    h = 2e-3 / math.sqrt(k)
    meshes = [h] + [h * math.sqrt(m) / 3 for m in np.cumprod(radices)]
    fine = [(discretise(loss, meshes[0], 1e-14), k)]
    comp, info = compose_tree(fine, radices, meshes, tilt=0.5, tau=1e-13, block_tau=1e-14)
    assert info["radices"] == radices and comp.compositions == k // int(np.prod(radices)) + 1
    eps = np.array([0.5, 1.5, 3.0])
    lo, _, up = delta_bounds(comp, eps, eta)
    truth = np.array([_gdp_delta(mu, e) for e in eps])
    assert np.all(lo <= truth) and np.all(truth <= up), (lo, truth, up)
    assert np.all(up - lo <= 0.05 * truth + 1e-9)  # and informative


def test_chernoff_window_closed_form_and_heavy_tail():
    """``chernoff_window`` (what the schedule search prices blocks with) is the Gaussian's closed form
    ``mean +- sqrt(2 log(1/tau)) sd`` for the Gaussian loss, and for the subsampled Gaussian's heavy
    tail a block of 512 steps needs far less than sqrt(512) times one step's window, which is why the
    plan composes hundreds of fine steps before the first split."""
    from tightdp.losses import GaussianLoss
    from tightdp.pld import discretise
    from tightdp.pld.composition import chernoff_window

    mu, tau, m = 0.05, 1e-14, 64
    d = discretise(GaussianLoss(mu=mu), 1e-4, 1e-30)
    lo, hi = chernoff_window([(d, m)], 0.0, tau)
    mean, sd = m * mu * mu / 2, math.sqrt(m) * mu
    z = math.sqrt(2 * math.log(1 / tau))
    assert hi == pytest.approx(mean + z * sd, rel=2e-3) and lo == pytest.approx(mean - z * sd, rel=2e-3)
    sub = PoissonSampled(mechanism=Gaussian(noise_multiplier=0.8), sampling_rate=4e-3).privacy_losses().remove
    ds = discretise(sub, 2e-4, 1e-20)
    w1 = np.subtract(*chernoff_window([(ds, 1)], 0.0, tau)[::-1])
    w512 = np.subtract(*chernoff_window([(ds, 512)], 0.0, tau)[::-1])
    assert w512 < 3.0 * w1 < math.sqrt(512) * w1
    acc = PRVAccountant()
    assert acc._tree_plan([(sub, 300_000)], 5e-9)[0][0] >= 64


def test_rebin_coarsen_contains_closed_form():
    """The older two-level helpers (``rebin`` / ``coarsen``, exported from ``tightdp.pld``): composing
    the re-binned blocks contains the closed-form Gaussian (the block's aliasing counted twice)."""
    from tightdp.losses import GaussianLoss
    from tightdp.pld import coarsen, compose, delta_bounds, discretise

    sigma, k, eta = 10.0, 900, 1e-10
    d = discretise(GaussianLoss(mu=1.0 / sigma), 2e-4, 1e-15)
    blocks = coarsen(d, k, 30, 2e-3)
    comp = compose(blocks, tilt=0.0, tau=1e-13)
    eps = np.array([0.5, 1.0, 2.0])
    lo, _, up = delta_bounds(comp, eps, eta)
    truth = np.array([_gdp_delta(math.sqrt(k) / sigma, e) for e in eps])
    assert np.all(lo <= truth) and np.all(truth <= up)
    assert blocks[0][0].tv_error >= 0.0 and np.all(up - lo <= 0.05 * truth)


# --------------------------------------------------------------------------- wide tail cells


def test_tail_coupling_shift_against_exact_sum():
    """The Chernoff/Bennett coupling shift of ``coupling_tails`` against the exact tail of a sum of
    near-worst-case roundings: each step's error is +-h/2 (bulk) or, with probability p, +-G/2 (tail),
    fair coins, so ``P(sum > t)`` is computed exactly by convolution; with no tails the shift is
    Hoeffding's closed form."""
    from _support import power_by_squaring
    from scipy import signal

    from tightdp.pld.composition import _tail_coupling_shift

    h, R, n, eta = 1.0, 15, 3000, 1e-6
    p = 2 * 0.01 / R**2  # the accountant's design point (both tails at tail_share 0.01)
    G = R * h
    # one step on the lattice of half-units: values -G/2..G/2 in steps of 1/2 -> indices 0..2G
    step = np.zeros(2 * R + 1)
    step[R - 1] += (1 - p) / 2
    step[R + 1] += (1 - p) / 2
    step[0] += p / 2
    step[2 * R] += p / 2
    dist = power_by_squaring(step, n, signal.fftconvolve)
    dist = np.maximum(dist, 0.0)
    values = (np.arange(dist.size) - n * R) / 2.0
    v = p * ((G + h) / 2) ** 2
    t = _tail_coupling_shift(n * h * h, ((n, v, G / 2, p, G / 2, G * G - h * h),), eta)
    exact_tail = float(dist[values > t].sum())
    assert exact_tail <= eta
    hoeff = math.sqrt(0.5 * n * h * h * math.log(1 / eta))
    assert hoeff < t < 1.1 * hoeff  # pays for the tail, but far less than Hoeffding with range G
    assert t < math.sqrt(0.5 * n * G * G * math.log(1 / eta)) / 3
    # no tails: exactly Hoeffding (through ComposedPLD.coupling_shift)
    from tightdp.pld import ComposedPLD

    c = ComposedPLD(1.0, 0.0, np.ones(1), 0.0, 0.0, 0.0, 0.0, n * h * h, 0.0, 0.0, 0.0, n)
    assert c.coupling_shift(eta) == pytest.approx(hoeff, rel=1e-15)


@pytest.mark.parametrize("share", [0.01, 0.3, 2.0])
def test_coarse_tail_gaussian_contains_closed_form(share):
    """``discretise_coarse_tail`` on the Gaussian loss with thresholds forced into the bulk (large
    ``tail_share``: wide cells from about 3.5, 2.5 and 1.7 standard deviations out), composed flat: the
    certified delta interval contains the closed form, and stays informative."""
    from tightdp.losses import GaussianLoss
    from tightdp.pld import compose, delta_bounds, discretise
    from tightdp.pld.discretise import discretise_coarse_tail

    sigma, k, eta = 8.0, 2000, 1e-10
    loss = GaussianLoss(mu=1.0 / sigma)
    h = 2e-4
    d = discretise_coarse_tail(loss, h, 1e-16, 15, share)
    plain = discretise(loss, h, 1e-16)
    assert d.coupling_tails and np.count_nonzero(d.pmf) < 0.7 * plain.pmf.size
    assert abs(d.pmf.sum() - plain.pmf.sum()) < 1e-12
    comp = compose([(d, k)], tilt=0.0, tau=1e-14)
    eps = np.array([0.5, 1.5, 3.0])
    lo, _, up = delta_bounds(comp, eps, eta)
    truth = np.array([_gdp_delta(math.sqrt(k) / sigma, e) for e in eps])
    assert np.all(lo <= truth) and np.all(truth <= up), (lo, truth, up)
    t_plain = compose([(plain, k)], tilt=0.0, tau=1e-14).coupling_shift(eta)
    assert t_plain < comp.coupling_shift(eta) < 0.5 * t_plain * 15  # far below Hoeffding with range G everywhere
    assert np.all(up - lo <= 0.01 * truth)


def test_coarse_tail_subsampled_both_directions():
    """The subsampled Gaussian's heavy tails: right in the remove direction, left in the add direction;
    wide cells cut the fine cells several times, the tail probability is below 2 share / ratio^2, and
    the tree's epsilon interval (both directions) overlaps the connect-dots accountant's."""
    from tightdp.pld import discretise
    from tightdp.pld.discretise import discretise_coarse_tail

    pair = PoissonSampled(mechanism=Gaussian(noise_multiplier=0.8), sampling_rate=4e-3).privacy_losses()
    for loss in (pair.remove, pair.add):
        d = discretise_coarse_tail(loss, 2e-5, 1e-15, 15, 0.01)
        plain = discretise(loss, 2e-5, 1e-15)
        ((_n, _v, _b, p, _a, _dsq),) = d.coupling_tails
        assert p <= 2 * 0.01 / 15**2 and np.count_nonzero(d.pmf) < plain.pmf.size / 3
        assert abs(d.pmf.sum() - plain.pmf.sum()) < 1e-12
    step = PoissonSampled(mechanism=Gaussian(noise_multiplier=0.8), sampling_rate=4e-3)
    prv = PRVAccountant().compose(step, 20_000).epsilon(1e-5)
    cd = ConnectDotsAccountant().compose(step, 20_000).epsilon(1e-5)
    assert "tree" in prv.details and prv.upper - prv.lower <= 0.022
    assert prv.lower <= cd.upper and cd.lower <= prv.upper


def test_tree_heterogeneous_overlaps_connect_dots():
    """Two distinct subsampled Gaussians in one tree (each with its own wide tail cells, merged coupling
    tails): the certified interval overlaps the connect-dots accountant's (dominance, no coupling)."""
    ledger = [
        (PoissonSampled(mechanism=Gaussian(noise_multiplier=0.8), sampling_rate=4e-3), 20_000),
        (PoissonSampled(mechanism=Gaussian(noise_multiplier=1.5), sampling_rate=1e-2), 30_000),
    ]
    prv, cd = PRVAccountant(), ConnectDotsAccountant()
    for m, k in ledger:
        prv, cd = prv.compose(m, k), cd.compose(m, k)
    b, c = prv.epsilon(1e-6), cd.epsilon(1e-6)
    assert "tree" in b.details and len(b.details["tree"]["radices"]) >= 1 and b.upper - b.lower <= 0.022
    assert b.lower <= c.upper and c.lower <= b.upper, (b, c)


@pytest.mark.parametrize("route", ["tree", "composed atoms"])
def test_tree_randomized_response_against_exact_binomial(route, monkeypatch):
    """A bounded, atomic loss through the tree: k-fold binary randomized response, whose composed loss is
    ``(2J - k) eps0`` with ``J ~ Binom(k, 1/2 + 0.005)`` under P, so ``delta(eps)`` is an exact binomial
    sum: it is at least 1e-6 at the certified lower end and at most 1e-6 at the upper end. By default the
    composed atoms above the lower end answer (``_top_atoms``); with them off, the tree does."""
    from tightdp import RandomizedResponse
    from tightdp.accountants._pld import PLDAccountant

    if route == "tree":
        monkeypatch.setattr(PLDAccountant, "_top_epsilon", lambda self, delta, out=None: out)
    k = 100_000
    acc = PRVAccountant().compose(RandomizedResponse(noise_parameter=0.99, num_buckets=2), k)
    b = acc.epsilon(1e-6)
    if route == "tree":
        assert "tree" in b.details and b.upper - b.lower <= 0.022
    else:
        assert b.details["method"] == "exact composed atoms near the top" and b.upper - b.lower <= 1e-8
    # in mpmath at 40 digits, from the parameter as given (the float 0.99, exactly): the composed atoms' interval
    # is about 2e-9 wide, finer than a float binomial sum (scipy's is off by about 1e-10 relative here)
    with mpmath.workdps(40):
        p_true = 1 - mpmath.mpf(0.99) / 2
        eps0 = mpmath.log(p_true / (1 - p_true))

        def delta(eps):
            eps = mpmath.mpf(eps)
            total, j = mpmath.mpf(0), max(0, int(mpmath.floor((eps / eps0 + k) / 2)) - 1)
            while j <= k:
                loss = (2 * j - k) * eps0
                if loss > eps:
                    term = mpmath.binomial(k, j) * p_true**j * (1 - p_true) ** (k - j) * -mpmath.expm1(eps - loss)
                    total += term
                    if term < total * mpmath.mpf(10) ** -30:
                        break
                j += 1
            return total

        assert delta(b.lower) >= 1e-6 >= delta(b.upper)

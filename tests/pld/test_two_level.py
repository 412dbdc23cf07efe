"""Two-level dominance composition (``tightdp.pld.hierarchy.compose_two_level``): blocks of steps composed on
a fine mesh, re-discretised on a coarse one by the same connect-the-dots split (upper) and merge to the grid
(lower) as single steps, then composed. Tested against truth: Gaussian steps are exactly mu-GDP, so every
upper end must lie above the exact epsilon and every lower end below it (mpmath); and against the one-level
accountant, whose certified interval must meet the two-level one."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _support import gdp_delta_mp, gdp_epsilon_mp, scaled
from hypothesis import given, settings
from hypothesis import strategies as st

import tightdp
import tightdp.accountants._two_level_plan as plan
import tightdp.accountants.connect_dots as cd
from tightdp import ConnectDotsAccountant
from tightdp.losses import GaussianLoss
from tightdp.pld import chernoff_epsilon, compose, delta_bounds, epsilon_bounds
from tightdp.pld.dominance import dominated, dominating
from tightdp.pld.hierarchy import compose_two_level, dominated_block, dominating_block

_TINY = 1e-300


def _two_level_bounds(mu_step, k, delta, h, block, tilted=True):
    """Certified (lower, upper) epsilon of k Gaussian steps of ``mu_step``, each level's constructions
    composed by ``compose_two_level`` (fine mesh h / sqrt 2, coarse mesh sqrt(block / 2) h)."""
    loss = GaussianLoss(mu=mu_step)
    tail = (1e-3 * 1e-3 * delta / k, 1e-3 * delta / k)
    fine = h / math.sqrt(2.0)
    g = fine * math.sqrt(block)
    up_parts = [(dominating(loss, fine, tail), k)]
    lo_parts = [(dominated(loss, fine, tail), k)]
    tilt = chernoff_epsilon(up_parts, delta)[1] if tilted else 0.0
    up = compose_two_level(up_parts, block, g, upper=True, tilt=tilt, tau=1e-10, block_tau=1e-16)
    lo = compose_two_level(lo_parts, block, g, upper=False, tilt=tilt, tau=1e-10, block_tau=1e-16)
    return (
        epsilon_bounds(lo, delta, _TINY, need="lower").lower,
        epsilon_bounds(up, delta, _TINY, need="upper").upper,
        up,
        lo,
    )


@pytest.mark.parametrize(
    "mu_step,k,block",
    [(0.01, 10**4, 100), (0.02, 10**5, 300), (0.003, 10**6, 1000), (0.05, 4096, 64), (0.01, 10**4 + 37, 100)],
)
def test_gaussian_steps_bracket_the_exact_mu_gdp_epsilon(mu_step, k, block):
    """k Gaussian steps are exactly sqrt(k) mu-GDP: the two-level ends bracket that epsilon (60 digits), and
    the interval is about as narrow as the one-level constructions on the same effective mesh."""
    delta = 1e-5
    mu = math.sqrt(k) * mu_step
    exact = gdp_epsilon_mp(delta, mu)
    h = 0.02 * mu / math.sqrt(k)  # a fiftieth of a step's spread
    lower, upper, _, _ = _two_level_bounds(mu_step, k, delta, h, block)
    assert lower <= exact <= upper, (lower, exact, upper)
    # the discretisation gap of one level on the mesh h, for scale (k h^2 / 4 of variance, roughly)
    loss = GaussianLoss(mu=mu_step)
    tail = (1e-9 * delta / k, 1e-6 * delta / k)
    one_up = compose(
        [(dominating(loss, h, tail), k)], tilt=chernoff_epsilon([(dominating(loss, h, tail), k)], delta)[1], tau=1e-10
    )
    one_lo = compose([(dominated(loss, h, tail), k)], tilt=one_up.tilt, tau=1e-10)
    one = epsilon_bounds(one_up, delta, _TINY).upper - epsilon_bounds(one_lo, delta, _TINY).lower
    assert upper - lower <= 1.5 * one + 1e-9, (upper - lower, one)


@settings(max_examples=scaled(25), deadline=None)
@given(
    mu_step=st.floats(1e-3, 0.1),
    log_k=st.floats(3.7, 6.0),
    log_delta=st.floats(-12.0, -3.0),
    mesh_share=st.floats(0.01, 0.1),
    tilted=st.booleans(),
)
def test_random_gaussian_ledgers_bracket_the_exact_delta(mu_step, log_k, log_delta, mesh_share, tilted):
    """Random step sizes, counts, deltas, meshes, tilted or not: the upper composition's certified delta at the
    exact epsilon is at least the exact delta, the lower one's at most (mpmath)."""
    k = int(10**log_k)
    delta = 10.0**log_delta
    mu = math.sqrt(k) * mu_step
    if mu > 30:
        return
    eps = float(gdp_epsilon_mp(delta, mu))
    h = mesh_share * mu_step
    _, _, up, lo = _two_level_bounds(mu_step, k, delta, h, plan._block_size(k), tilted=tilted)
    exact = gdp_delta_mp(eps, mu)
    up_delta = delta_bounds(up, np.array([eps]), _TINY)[2][0]
    lo_delta = delta_bounds(lo, np.array([eps]), _TINY)[0][0]
    assert lo_delta <= exact * (1 + 1e-12) and exact <= up_delta * (1 + 1e-12), (lo_delta, exact, up_delta)


def test_block_pairs_bracket_the_block_curve():
    """One block on its own: the coarse split's delta curve lies above the fine block's (up to the l1 error the
    split reports), the coarse merge's below, at every epsilon."""
    loss = GaussianLoss(mu=0.05)
    h, c, g = 2e-3, 400, 0.04
    tail = (1e-16, 1e-13)
    eps = np.linspace(-1.0, 4.0, 101)
    up = compose([(dominating(loss, h, tail), c)], tilt=0.5, tau=1e-14)
    pair, err = dominating_block(up, g)
    coarse_up = compose([(pair, 1)])
    fine_up = delta_bounds(up, eps, _TINY)
    assert np.all(delta_bounds(coarse_up, eps, _TINY)[2] + err.l1 * 10 >= fine_up[0])
    lo = compose([(dominated(loss, h, tail), c)], tilt=0.5, tau=1e-14)
    coarse_lo = compose([(dominated_block(lo, g), 1)])
    assert np.all(delta_bounds(coarse_lo, eps, _TINY)[0] <= delta_bounds(lo, eps, _TINY)[2])
    # and the pair is a real coarsening: atoms g apart, the curve within the split's O(g^2) of the block's
    assert pair.h == g and pair.pmf.size < up.tilted.size / 10
    assert np.max(delta_bounds(coarse_up, eps, _TINY)[1] - fine_up[1]) < 1e-3


@pytest.mark.parametrize(
    "sigma,q,k,kw",
    [
        (1.0, 0.01, 10**6, {}),
        (0.8, 0.004, 10**6, {}),
        (1.0, 0.01, 10**5, {"eps_error": 1e-3}),
        (2.0, 0.05, 3 * 10**5, {}),
    ],
)
def test_dpsgd_two_levels_meet_one_level(monkeypatch, sigma, q, k, kw):
    """DP-SGD at long horizons: the two-level interval (the default there) meets the one-level one (both
    certified), meets the target in one pass, and composes windows a tenth the size or less."""
    mech = tightdp.dpsgd_mechanism(noise_multiplier=sigma, sampling_rate=q)
    sizes = []
    real = cd.compose_two_level
    monkeypatch.setattr(cd, "compose_two_level", lambda *a, **k2: sizes.append(real(*a, **k2)) or sizes[-1])
    two = ConnectDotsAccountant(**kw).compose(mech, k).epsilon(1e-5)
    assert sizes and all(s is not None for s in sizes), "the two-level composition did not run"
    monkeypatch.setattr(plan, "_TWO_LEVEL_STEPS", 1 << 62)
    one = ConnectDotsAccountant(**kw).compose(mech, k).epsilon(1e-5)
    assert two.lower <= one.upper and one.lower <= two.upper, (two, one)
    assert two.details["passes"] == 1 and "fallback" not in two.details
    target = 2 * (kw["eps_error"] if kw else max(1e-3 * two.upper, 5e-5))
    assert two.upper - two.lower <= target
    assert max(s.tilted.size for s in sizes) * 10 <= one.details["mesh"] ** -1 * 13 * math.sqrt(
        k * plan.loss_spread(mech.privacy_losses().remove) ** 2
    )


def test_two_level_against_the_saddle_point_reference():
    """sigma 1, q 0.01, k = 1e7 (A of the horizon benchmark): the certified interval contains the
    independent mpmath saddle-point value of epsilon(1e-5) (BENCHMARKS.md: delta(1014.07) = 9.997e-6,
    so the truth is just below 1014.07), where one level needs 5.6e7 points at eps_error 1e-3."""
    mech = tightdp.dpsgd_mechanism(noise_multiplier=1.0, sampling_rate=0.01)
    b = ConnectDotsAccountant(eps_error=1e-3).compose(mech, 10**7).epsilon(1e-5)
    assert b.lower <= 1014.07 <= b.upper + 0.01 and b.upper - b.lower <= 2e-3, b
    assert b.details["passes"] == 1


@settings(max_examples=scaled(40), deadline=None)
@given(
    z0=st.floats(-30.0, 30.0),
    log_w=st.floats(-5.0, math.log10(0.049)),
    cells=st.integers(1, 6),
    sep=st.floats(0.0, 3.0),
    weight=st.floats(0.01, 0.99),
)
def test_cell_masses_against_mpmath(z0, log_w, cells, sep, weight):
    """Gaussian-mixture cell masses (4-point Gauss-Legendre below 0.01 sigma, 8-point up to 0.05, differenced
    beyond) against 50-digit mpmath: every cell within the relative error reported, or inside the l1 budget."""
    import mpmath
    from scipy import special

    from tightdp.losses import gaussian_mixture_cell_masses

    sigma, w = 1.3, 10**log_w
    edges = (z0 + w * np.arange(cells + 1)) * sigma
    means, weights = (0.0, sep * sigma), (weight, 1.0 - weight)
    zz = (edges[:, None] - np.asarray(means)[None, :]) / sigma
    cdf, sf = special.ndtr(zz) @ np.asarray(weights), special.ndtr(-zz) @ np.asarray(weights)
    masses, (rel, l1) = gaussian_mixture_cell_masses(edges, means, weights, sigma, cdf, sf)
    mpmath.mp.dps = 50

    def cell(lo, hi, m):  # the side without cancellation (the upper tail differenced as survival values)
        a, b = (mpmath.mpf(lo) - m) / sigma, (mpmath.mpf(hi) - m) / sigma
        return mpmath.ncdf(-a) - mpmath.ncdf(-b) if a > 0 else mpmath.ncdf(b) - mpmath.ncdf(a)

    slack = 0.0
    for i in range(cells):
        exact = sum(mpmath.mpf(wt) * cell(edges[i], edges[i + 1], m) for m, wt in zip(means, weights))
        over = abs(mpmath.mpf(masses[i]) - exact) - rel * exact
        slack += max(float(over), 0.0)
    assert slack <= l1 + 1e-300, (slack, rel, l1)


@settings(max_examples=scaled(200), deadline=None)
@given(count=st.one_of(st.integers(4096, 10**8), st.integers(10**8, 10**13)))
def test_block_size_divides_or_is_the_nearest_power_of_two(count):
    """The block size is a divisor of the count within a factor 1.5 of its square root (no remainder block),
    or, where none is found, the power of two nearest the root; checked against a direct search for counts up
    to 1e8 and at counts up to 1e13 (the search is bounded; its speed is a benchmark matter)."""
    b = plan._block_size(count)
    root = math.isqrt(count)
    assert 2 <= b <= count
    # the candidates: within a factor 1.5 of the root and 4096 of it
    cands = range(max(2, int(root / 1.5), root - 4096), min(int(root * 1.5), root + 4096) + 1)
    if count % b == 0 and b in cands:
        if count <= 10**8:  # the nearest divisor among them, found by brute force
            assert abs(b - root) == min(abs(d - root) for d in cands if count % d == 0)
    else:
        assert b == 1 << max(1, round(0.5 * math.log2(count)))
        if count <= 10**8:
            assert not any(count % d == 0 for d in cands)


@pytest.mark.parametrize("sigma,q,k", [(1.0, 0.01, 10**6), (0.8, 0.004, 10**7)])
def test_single_delta_query_of_a_long_run_is_tilted_and_consistent(sigma, q, k):
    """delta(eps) for one eps of a long run composes on two levels, tilted towards eps (untilted, one level,
    it took 1.2-3.2 s), and is consistent with epsilon(delta): for eps(1e-5) in [l, u], the certified
    delta(u) cannot start above 1e-5 nor delta(l) end below it."""
    mech = tightdp.dpsgd_mechanism(noise_multiplier=sigma, sampling_rate=q)
    e = ConnectDotsAccountant().compose(mech, k).epsilon(1e-5)
    tightdp.clear_caches()
    at_u = ConnectDotsAccountant().compose(mech, k).delta(e.upper)
    at_l = ConnectDotsAccountant().compose(mech, k).delta(e.lower)
    assert at_u.details.get("first_pass", "").startswith("tilted")
    assert at_u.lower <= 1e-5 <= at_l.upper
    assert at_u.upper - at_u.lower <= 0.05 * at_u.upper


def test_single_delta_query_without_a_holdable_tilt_falls_back_to_the_untilted_pass():
    """epsilon ~ 5e5 (sigma 0.42, q 0.31, k ~ 1e6): the window tilted towards it would span 1.8e7 loss units;
    delta(eps) then answers from the untilted first pass, as before the tilt, instead of raising."""
    mech = tightdp.dpsgd_mechanism(noise_multiplier=0.4245667220653354, sampling_rate=0.3081639783082263)
    b = ConnectDotsAccountant().compose(mech, 1012709).delta(507908.0)
    assert "first_pass" not in b.details
    assert 0.0 <= b.lower <= b.upper < 1e-6

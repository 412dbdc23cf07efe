"""The distributed discrete Gaussian beyond the exact grid (``tightdp.mechanisms._ddg_large``, ``_ddg_blocks``):
each lemma of its proof against mpmath, its cells' boundaries against exact rational losses, and its intervals
against an independent closed form (the unsampled composition and one subsampled step) and against the exact
enumeration where both run.

Truths: ``S``, the sum of ``clients`` discrete Gaussians, is enumerated by convolution in mpmath for Lemma A; elsewhere
its law is the normal density of variance ``clients sigma^2`` at the integers to within ``e^(+-T)``, ``T`` below
``1e-300`` for every ``sigma >= 10`` used, and sums of that density over integers are summed term by term or, over
half-lines, by mpmath's own Euler-Maclaurin summation (``mpmath.sumem``, from the endpoint, not the midpoint rule of
the code under test), given the integral in closed form: it then matched direct summation of up to 2e7 terms to
1e-16, 3, 14 and 18.5 standard deviations out (its own quadrature of the integral was 0.1 % off at 14). A
``k``-fold composition of the unsampled pair has a loss that depends on the outputs only through ``W``, the sum of
``k clients`` discrete Gaussians, so ``delta(eps) = P(W > w) - e^eps P(W > w + k Delta)`` with ``w = (eps - k
Delta^2 / (2 s^2)) s^2 / Delta`` (Canonne, Kamath, Steinke 2020, Thm 7's form).
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from _support import mp_convolve_power, scaled
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tightdp
from tightdp import ConnectDotsAccountant, FourierAccountant, PRVAccountant
from tightdp.errors import GridTooLargeError, PrecisionError, UnsupportedMechanismError
from tightdp.mechanisms import discrete
from tightdp.mechanisms._ddg_blocks import block_sums, sum_law_bound, unit_block_sums
from tightdp.mechanisms._ddg_large import LargeDistributedDiscreteGaussianLoss
from tightdp.mechanisms._discrete_losses import DistributedDiscreteGaussianLoss
from tightdp.mechanisms.discrete import DistributedDiscreteGaussian, PoissonSampledDiscrete

MPMATH_DPS = 40  # mpmath's working digits in every test of this module (set by conftest before each test)
_SLACK = mpmath.mpf("1e-12")  # relative: the truths' own errors (T < 1e-300, 40 digits) are far below


def _phi(y, v):
    """The normal density of variance ``v`` at ``y`` (mpmath)."""
    return mpmath.exp(-(y * y) / (2 * v)) / mpmath.sqrt(2 * mpmath.pi * v)


def _normal_mass(a, b, r):
    """``int_a^b`` of the normal density of scale ``r`` (mpmath), from the side of the tail it lies in (no
    cancellation: ``Phi(14.07) - Phi(13.93)`` at 40 digits is all rounding)."""
    if a >= 0:
        return mpmath.ncdf(-a / r) - mpmath.ncdf(-b / r)
    return mpmath.ncdf(b / r) - mpmath.ncdf(a / r)


def _tail(c, v):
    """``sum_(w > c, w integer) phi_v(w)`` by mpmath's Euler-Maclaurin summation, given the integral ``int_a^inf phi_v``
    in closed form (left to its own quadrature, ``sumem`` was 0.1 % off fourteen standard deviations out)."""
    a = int(mpmath.floor(c)) + 1
    return mpmath.sumem(lambda w: _phi(w, v), [a, mpmath.inf], integral=mpmath.ncdf(-a / mpmath.sqrt(v)))


def _delta_unsampled(sigma: float, n: int, d: int, k: int, eps: float) -> mpmath.mpf:
    """``delta(eps)`` of ``k`` compositions of the unsampled pair (module docstring)."""
    s2 = n * mpmath.mpf(sigma) ** 2
    e = mpmath.mpf(eps)
    w = (e - k * mpmath.mpf(d) ** 2 / (2 * s2)) * s2 / d
    v = k * s2
    return _tail(w, v) - mpmath.exp(e) * _tail(w + k * d, v)


def _delta_one_sampled(sigma: float, n: int, d: int, q: float, eps: float) -> mpmath.mpf:
    """``delta(eps)`` of one Poisson-subsampled step, the larger of the two directions: the loss is monotone in the
    output, so the set where it exceeds ``eps`` is a half-line ``x > c`` (remove) or ``x < c`` (add)."""
    s2 = n * mpmath.mpf(sigma) ** 2
    e, qq, dd = mpmath.mpf(eps), mpmath.mpf(q), mpmath.mpf(d)
    # remove: log(1 - q + q e^f(x)) > eps  <=>  f(x) > log((e^eps - 1 + q) / q), f(x) = (2 d x - d^2) / (2 s2)
    f = mpmath.log((mpmath.exp(e) - 1 + qq) / qq)
    c = f * s2 / dd + dd / 2
    rem = qq * _tail(c - d, s2) + (1 - qq) * _tail(c, s2) - mpmath.exp(e) * _tail(c, s2)
    # add: -log(1 - q + q e^f(x)) > eps  <=>  f(x) < log((e^-eps - 1 + q) / q), possible only for e^-eps > 1 - q;
    # P(Y < c) = P(Y > -c) by symmetry
    add = mpmath.mpf(0)
    if mpmath.exp(-e) > 1 - qq:
        f = mpmath.log((mpmath.exp(-e) - 1 + qq) / qq)
        c = f * s2 / dd + dd / 2
        add = _tail(-c, s2) - mpmath.exp(e) * (qq * _tail(-(c - d), s2) + (1 - qq) * _tail(-c, s2))
    return max(rem, add)


def _check(bounds, delta: float, delta_of_eps) -> None:
    """``[lower, upper]`` holds the truth ``eps*`` exactly when ``delta(upper) <= delta <= delta(lower)``."""
    up = delta_of_eps(bounds.upper)
    assert up <= delta * (1 + _SLACK), (bounds, float(up), delta)
    if bounds.lower > 0.0:
        lo = delta_of_eps(bounds.lower)
        assert lo >= delta * (1 - _SLACK), (bounds, float(lo), delta)
    assert bounds.upper - bounds.lower <= 2 * max(1e-3 * bounds.upper, 5e-5) + 1e-9, bounds


# ---------------------------------------------------------------- Lemma A: the law of the sum, pointwise


@pytest.mark.parametrize("sigma, n", [(0.8, 2), (0.8, 4), (1.0, 3), (1.2, 2)])
def test_sum_of_discrete_gaussians_is_pointwise_within_e_to_the_t_of_the_normal_density(sigma, n):
    """Lemma A against the law of the sum convolved in mpmath, at every integer within 25 standard deviations (tails
    included: a Rényi bound would not give this). Where ``T`` is large enough to see, the worst ratio is a fair share
    of it (the bound is not vacuous)."""
    s2 = mpmath.mpf(sigma) ** 2
    r1 = int(math.ceil(40 * sigma)) + 5
    z = mpmath.nsum(lambda x: mpmath.exp(-x * x / (2 * s2)), [-mpmath.inf, mpmath.inf])
    one = {x: mpmath.exp(-x * x / (2 * s2)) / z for x in range(-r1, r1 + 1)}
    law = mp_convolve_power(one, n)
    t = sum_law_bound(sigma, n)
    reach = 25 * sigma * math.sqrt(n)
    worst = max(abs(mpmath.log(p / _phi(w, n * s2))) for w, p in law.items() if abs(w) <= reach)
    assert worst <= t, (float(worst), t)
    if n == 2:
        assert worst >= 0.1 * t


def test_sum_law_bound_never_underflows_to_zero_and_refuses_small_sigma():
    assert sum_law_bound(30.0, 100_000) == 1e-300  # far below, but never 0: the bound is never lost
    assert sum_law_bound(0.3, 5) == math.inf  # e >= 1/2: Lemma A says nothing


# ---------------------------------------------------------------- Lemma B: block sums by a corrected midpoint rule


@settings(max_examples=scaled(40), deadline=None)
@given(
    r=st.sampled_from([2.0, 3.5, 7.0, 20.0, 100.0, 400.0]),
    at=st.floats(-14.0, 14.0),
    width=st.floats(0.0, 3.0),
)
def test_corrected_midpoint_rule_is_within_its_remainder_bound(r, at, width):
    """Lemma B in mpmath: ``|sum_(x=a..b) f(x) - J| <= sum kappa(x) f(x)`` for blocks anywhere within 14 standard
    deviations, and the bound is attained to within a factor (it is the fourth-order remainder, not a loose one)."""
    a = int(round(at * r))
    b = a + int(round(width * r))
    rr = mpmath.mpf(r)
    half = mpmath.mpf(1) / 2
    big_a, big_b = a - half, b + half
    f = lambda y: _phi(y, rr * rr)
    true = mpmath.fsum(f(x) for x in range(a, b + 1))
    j = _normal_mass(big_a, big_b, rr) + (big_b * f(big_b) - big_a * f(big_a)) / (24 * rr * rr)
    h = lambda w: w**4 + 6 * w**2 + 3
    kappa = lambda x: mpmath.mpf(13) / 5760 * mpmath.exp(abs(x) / (2 * rr * rr)) * h((abs(x) + half) / rr) / rr**4
    bound = mpmath.fsum(kappa(x) * f(x) for x in range(a, b + 1))
    assert abs(true - j) <= bound


@pytest.mark.parametrize("r", [2.0, 20.0, 400.0])
def test_corrected_midpoint_rule_bound_is_within_a_factor_of_the_error(r):
    """The remainder bound is attained to within a factor 2.5 at one output at the centre, and 25 over the central two
    standard deviations (about 7 at scales 20 and 400, 22 at scale 2, where ``He_4`` changes sign across the block):
    Lemma B's error estimate is the right order, not merely a bound."""
    rr, half = mpmath.mpf(r), mpmath.mpf(1) / 2
    f = lambda y: _phi(y, rr * rr)
    h = lambda w: w**4 + 6 * w**2 + 3
    for a, b, factor in ((0, 0, 2.5), (-int(r), int(r), 25.0)):
        true = mpmath.fsum(f(x) for x in range(a, b + 1))
        big_a, big_b = a - half, b + half
        j = _normal_mass(big_a, big_b, rr) + (big_b * f(big_b) - big_a * f(big_a)) / (24 * rr * rr)
        bound = mpmath.fsum(
            mpmath.mpf(13) / 5760 * mpmath.exp(abs(x) / (2 * rr * rr)) * h((abs(x) + half) / rr) / rr**4 * f(x)
            for x in range(a, b + 1)
        )
        assert bound / factor <= abs(true - j) <= bound


# ---------------------------------------------------------------- the floating-point block sums (Lemmas A-C)


@settings(max_examples=scaled(30), deadline=None)
@given(
    sigma=st.sampled_from([10.0, 37.0, 100.0, 3.7e2, 1e3, 4.1e3]),
    n=st.sampled_from([1, 2, 3, 7, 100]),
    at=st.floats(-19.0, 19.0),
    cuts=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=4),
    span=st.sampled_from([0.0, 0.002, 0.05, 0.3]),
    side=st.sampled_from(["zero", "shifted", "mixture"]),
)
def test_block_sums_hold_the_mpmath_sums_of_the_density_of_the_true_scale(sigma, n, at, cuts, span, side):
    """``block_sums`` against mpmath sums of the normal density of the exact scale ``sigma sqrt(n)`` (not the rounded
    one: Lemma C is what is checked with it), over blocks from the centre to 19 standard deviations out, narrow (Gauss-
    Legendre) and wide (CDF differences) and empty, and for mixtures of the two components."""
    s_hat = math.sqrt(n * (sigma * sigma))  # (small scales too: the lemmas hold at any scale)
    d = int(round(0.7 * s_hat)) + 1
    means, weights = {
        "zero": ((0.0,), (1.0,)),
        "shifted": ((float(d),), (1.0,)),
        "mixture": ((float(d), 0.0), (0.3, 0.7)),
    }[side]
    start = int(round(at * s_hat))
    length = min(int(span * s_hat), 4000)
    inner = sorted(start + int(c * length) for c in cuts)
    edges = np.array([start - 0.5] + [x + 0.5 for x in inner] + [start + length + 0.5])
    mass, err = block_sums(edges, means, weights, s_hat, sum_law_bound(sigma, n))
    s = mpmath.sqrt(n) * mpmath.mpf(sigma)
    for j in range(edges.size - 1):
        lo_i, hi_i = int(edges[j] + 0.5), int(edges[j + 1] - 0.5)
        if hi_i < lo_i:
            assert mass[j] == 0.0 and err[j] == 0.0
            continue
        true = mpmath.fsum(w * _phi(x - m, s * s) for m, w in zip(means, weights) for x in range(lo_i, hi_i + 1))
        assert abs(true - mpmath.mpf(float(mass[j]))) <= err[j], (lo_i, hi_i, float(true), mass[j], err[j])
        if true > 1e-250 and s_hat >= 1e4:  # relative accuracy (the engine's cap is 1e-12), 19 deviations out too
            assert err[j] <= 1e-12 * float(true)


@pytest.mark.parametrize("at", [-18.9, -12.0, -0.1, 5.0])
def test_wide_and_narrow_blocks_at_a_large_scale_hold_the_mpmath_sums_relatively(at):
    """At ``s = 1.08e4``: a wide block (0.3 standard deviations, CDF differences) and narrow ones (Gauss-Legendre) from
    the centre to the window's edge, each within its certified error of the mpmath sum, and that error below the
    engine's cap on relative errors (1e-12; 2.7e-13 nineteen standard deviations out, Lemma C's share)."""
    sigma, n = 4.1e3, 7
    s_hat = math.sqrt(n * (sigma * sigma))
    start = int(round(at * s_hat))
    edges = np.array([start - 0.5, start + 0.5, start + 40.5, start + 3300.5])
    mass, err = block_sums(edges, (0.0,), (1.0,), s_hat, sum_law_bound(sigma, n))
    v = n * mpmath.mpf(sigma) ** 2
    for j in range(edges.size - 1):
        true = mpmath.fsum(_phi(x, v) for x in range(int(edges[j] + 0.5), int(edges[j + 1] + 0.5)))
        assert abs(true - mpmath.mpf(float(mass[j]))) <= err[j] <= 1e-12 * float(true)


def test_unit_block_sums_of_empty_blocks_are_zero_and_the_others_unchanged():
    x = np.array([-10.5, -3.5, -3.5, 0.5, 0.5, 0.5, 7.5, 7.5])
    full = unit_block_sums(x, 0.0, 150.0)
    distinct = unit_block_sums(np.unique(x), 0.0, 150.0)
    keep = x[1:] > x[:-1]
    for a, b in zip(full, distinct):
        assert np.all(a[~keep] == 0.0)
        np.testing.assert_array_equal(a[keep], b)


# ---------------------------------------------------------------- the cells' boundaries


@settings(max_examples=scaled(20), deadline=None)
@given(
    sigma=st.floats(1e3, 1e5),
    n=st.integers(2, 1000),
    mu=st.floats(0.01, 3.0),
    q=st.sampled_from([1.0, 0.5, 0.01]),
    direction=st.sampled_from(["remove", "add"]),
    count=st.sampled_from([3, 50, 5000]),
)
def test_every_block_holds_reference_losses_within_lam_of_its_cell(sigma, n, mu, q, direction, count):
    """The boundaries' certified property (module docstring), with the reference loss computed exactly (a rational
    for ``q = 1``, 50 digits otherwise) at both sides of every boundary: ``L(b_i) <= e_i + lam`` and ``L(b_i + 1) >=
    e_i - lam``; and the boundaries never decrease. Dense edges take the per-output search, sparse ones the bisection."""
    s_hat = math.sqrt(n * (sigma * sigma))
    d = max(1, int(mu * s_hat))
    loss = LargeDistributedDiscreteGaussianLoss(sigma, n, d, q, direction)
    lo_e, hi_e = loss.lower_quantile(1e-9), loss.upper_quantile(1e-9)
    edges = np.linspace(lo_e, hi_e, count)
    b, lam = loss._boundaries(edges)
    lo, hi = loss._setup["lo"], loss._setup["hi"]
    assert np.all(np.diff(b) >= 0) and b.min() >= lo - 1 and b.max() <= hi
    s2 = 2 * n * Fraction(sigma) ** 2
    sign = 1 if direction == "remove" else -1

    def exact(x: int):
        f = Fraction(2 * d * x - d * d) / s2
        if q >= 1.0:
            return f
        with mpmath.workdps(50):
            qq = mpmath.mpf(q)
            return sign * mpmath.log(1 - qq + qq * mpmath.exp(sign * mpmath.mpf(f.numerator) / f.denominator))

    pick = np.unique(np.linspace(0, count - 1, min(count, 40)).astype(int))
    for i in pick.tolist():
        e = Fraction(float(edges[i]))
        for x, ok in ((int(b[i]), lambda v: v <= e + Fraction(lam)), (int(b[i]) + 1, lambda v: v >= e - Fraction(lam))):
            if lo <= x <= hi:
                v = exact(x)
                v = v if isinstance(v, Fraction) else Fraction(mpmath.nstr(v, 45, strip_zeros=False))
                assert ok(v), (i, x, float(v), float(e), lam)


# ---------------------------------------------------------------- intervals: beyond the grid, against closed forms


@settings(max_examples=scaled(8), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sigma=st.floats(700.0, 1e5),
    n=st.integers(10, 100_000),
    mu=st.floats(0.05, 3.0),
    k=st.sampled_from([1, 2, 5, 30]),
    delta=st.sampled_from([1e-3, 1e-6, 1e-10]),
)
def test_unsampled_composition_beyond_the_grid_contains_the_closed_form(sigma, n, mu, k, delta):
    """``sigma sqrt(clients)`` from 2.2e5 (where the enumeration refused) to 3e7: the interval holds ``eps*`` of the
    ``k``-fold composition (module docstring's closed form in mpmath) and is as narrow as the accountant aims."""
    s = sigma * math.sqrt(n)
    if s < 2.2e5:
        n = int(math.ceil((2.2e5 / sigma) ** 2))
        s = sigma * math.sqrt(n)
    d = max(1, int(round(mu * s)))
    b = ConnectDotsAccountant().compose(DistributedDiscreteGaussian(sigma=sigma, clients=n, sensitivity=d), k)
    _check(b.epsilon(delta), delta, lambda e: _delta_unsampled(sigma, n, d, k, e))


@settings(max_examples=scaled(8), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sigma=st.floats(700.0, 1e5),
    n=st.integers(100, 100_000),
    mu=st.floats(0.2, 4.0),
    q=st.sampled_from([0.5, 0.05, 1e-3]),
    delta=st.sampled_from([1e-4, 1e-8]),
)
def test_one_subsampled_step_beyond_the_grid_contains_the_closed_form(sigma, n, mu, q, delta):
    """One Poisson-subsampled step (both directions, the larger curve) beyond the grid: its loss is monotone in the
    output, so its delta is a difference of two half-line sums, in mpmath."""
    s = sigma * math.sqrt(n)
    if s < 2.2e5:
        n = int(math.ceil((2.2e5 / sigma) ** 2))
    d = max(1, int(round(mu * sigma * math.sqrt(n))))
    mech = PoissonSampledDiscrete(
        mechanism=DistributedDiscreteGaussian(sigma=sigma, clients=n, sensitivity=d), sampling_rate=q
    )
    b = ConnectDotsAccountant().compose(mech, 1).epsilon(delta)
    _check(b, delta, lambda e: _delta_one_sampled(sigma, n, d, q, e))


def test_the_fuzz_finding_answers_beyond_the_grid():
    """500 clients of sigma 1e4 (``sigma sqrt(clients)`` = 2.24e5) raised ``GridTooLargeError``: now a certified
    interval, whose width at ``eps_error = 1e-6`` is below 1e-6, around the closed form."""
    mech = DistributedDiscreteGaussian(sigma=1e4, clients=500, sensitivity=10_000)
    assert isinstance(mech.loss(), LargeDistributedDiscreteGaussianLoss)
    with pytest.raises(GridTooLargeError):  # the enumeration itself still refuses
        DistributedDiscreteGaussianLoss(1e4, 500, 10_000).cdf(0.0)
    b = ConnectDotsAccountant(eps_error=1e-6).compose(mech, 10).epsilon(1e-6)
    _check(b, 1e-6, lambda e: _delta_unsampled(1e4, 500, 10_000, 10, e))
    assert b.upper - b.lower <= 1e-6


# ---------------------------------------------------------------- intervals: against the exact enumeration


@settings(max_examples=scaled(6), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    s=st.floats(1e4, 5e4),
    n=st.sampled_from([2, 10, 100]),
    mu=st.floats(0.1, 2.5),
    q=st.sampled_from([1.0, 0.1]),
    k=st.sampled_from([1, 3, 20]),
    delta=st.sampled_from([1e-3, 1e-7]),
)
def test_blocks_and_enumeration_bound_the_same_pair_alike(s, n, mu, q, k, delta):
    """Where both routes run, their certified intervals meet (each holds the truth) and are alike in width (both
    within the accountant's aim, or the blocks' no wider than the enumeration's)."""
    sigma = s / math.sqrt(n)
    d = max(1, int(round(mu * s)))
    mech = DistributedDiscreteGaussian(sigma=sigma, clients=n, sensitivity=d)
    if q < 1.0:
        mech = PoissonSampledDiscrete(mechanism=mech, sampling_rate=q)
    out = {}
    for name, scale in (("exact", math.inf), ("blocks", 0.0)):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(discrete, "_DDG_BLOCKS_SCALE", scale)
            tightdp.clear_caches()
            loss = mech.privacy_losses()[0]
            assert isinstance(loss, LargeDistributedDiscreteGaussianLoss) == (name == "blocks")
            out[name] = ConnectDotsAccountant().compose(mech, k).epsilon(delta)
    ex, bl = out["exact"], out["blocks"]
    tol = 1e-9 * (1.0 + ex.upper)
    assert bl.lower <= ex.upper + tol and ex.lower <= bl.upper + tol, (ex, bl)
    aim = 2 * max(1e-3 * ex.upper, 5e-5) + 1e-9
    assert bl.upper - bl.lower <= max(aim, 1.01 * (ex.upper - ex.lower)), (ex, bl)


def test_cells_agree_with_the_enumerated_atoms():
    """On one grid, the blocks' P- and Q-masses equal the enumerated atoms' cell sums to within both routes' errors,
    and so do the total variation bounds."""
    for q, direction in ((1.0, "remove"), (0.3, "remove"), (0.3, "add")):
        new = LargeDistributedDiscreteGaussianLoss(1e4, 100, 50_000, q, direction)
        old = DistributedDiscreteGaussianLoss(1e4, 100, 50_000, q, direction)
        edges = np.linspace(new.lower_quantile(1e-12), new.upper_quantile(1e-12), 5001)
        (b1, a1, p1, (r1, _), _), (b2, a2, p2, (r2, _), _) = new.cell_masses(edges), old.cell_masses(edges)
        (q1, (rq1, _)), (q2, (rq2, _)) = new.q_cell_masses(edges), old.q_cell_masses(edges)
        assert np.all(np.abs(p1 - p2) <= (r1 + r2) * np.maximum(p1, p2) + 1e-300)
        assert np.all(np.abs(q1 - q2) <= (rq1 + rq2) * np.maximum(q1, q2) + 1e-300)
        assert abs(b1 - b2) <= (r1 + r2) * b2 and abs(a1 - a2) <= (r1 + r2) * a2
        assert r1 <= r2  # no larger a relative error than the enumeration's
        tv_new, tv_old = new.total_variation(), old.total_variation()
        assert tv_new is not None and tv_old is not None
        assert abs(tv_new - tv_old) <= 1e-6 * tv_old


def test_total_variation_and_event_masses_hold_the_mpmath_values():
    """The certified closed-form step bounds: ``total_variation`` at or above the truth ``q P(-Delta/2 < S <=
    Delta/2)`` and within 1e-13 of it; ``event_masses`` on the right side of each true mass (``E`` the outputs above a
    boundary, which ``_boundaries`` gives)."""
    sigma, n, d, q = 2e3, 50, 30_000, 0.2
    s2 = n * mpmath.mpf(sigma) ** 2
    loss = LargeDistributedDiscreteGaussianLoss(sigma, n, d, q, "remove")
    a, b = math.floor(-d / 2) + 1, math.floor(d / 2)
    true_tv = q * (_tail(a - 1, s2) - _tail(b, s2))
    tv = loss.total_variation()
    assert tv is not None and true_tv <= tv <= true_tv * (1 + 1e-13)
    t = np.array([-0.1, 0.05, 0.4, 1.5])
    p, qq, p_out, q_out = loss.event_masses(t)
    (bounds, _) = loss._boundaries(t)
    for i, x in enumerate(bounds.tolist()):
        p_e = q * _tail(x - d, s2) + (1 - q) * _tail(x, s2)  # P(output > x), P = q S(. - d) + (1 - q) S
        q_e = _tail(x, s2)
        assert p[i] <= p_e and qq[i] >= q_e
        assert p_out[i] <= 1 - p_e and q_out[i] >= 1 - q_e


# ---------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    "kw, name",
    [
        (dict(sigma=0.5), "sigma"),
        (dict(sigma=math.nan), "sigma"),
        (dict(sigma=math.inf), "sigma"),
        (dict(clients=0), "clients"),
        (dict(clients=2.5), "clients"),
        (dict(delta=0), "delta"),
        (dict(delta=-3), "delta"),
        (dict(q=0.0), "q"),
        (dict(q=1.5), "q"),
        (dict(direction="both"), "direction"),
    ],
)
def test_bad_arguments_raise_value_errors_naming_them(kw, name):
    args = dict(sigma=1e4, clients=10, delta=100, q=1.0, direction="remove") | kw
    with pytest.raises(ValueError, match=name):
        LargeDistributedDiscreteGaussianLoss(**args)


@pytest.mark.parametrize(
    "kw, name", [(dict(sigma=2e5), "sigma"), (dict(clients=0), "clients"), (dict(sensitivity=0), "sensitivity")]
)
def test_the_mechanism_refuses_bad_arguments_naming_them(kw, name):
    args = dict(sigma=1e4, clients=10, sensitivity=100) | kw
    with pytest.raises(ValueError, match=name):
        DistributedDiscreteGaussian(**args)


def test_unproven_regimes_refuse_with_the_term_named():
    with pytest.raises(PrecisionError, match=r"sigma \* sqrt\(clients\) >= 100"):
        LargeDistributedDiscreteGaussianLoss(2.0, 100, 5).cell_masses(np.array([0.0, 1.0]))
    with pytest.raises(GridTooLargeError, match="2\\^30"):
        LargeDistributedDiscreteGaussianLoss(1e5, 100_000, 2**30).cell_masses(np.array([0.0, 1.0]))


@pytest.mark.parametrize("accountant", [PRVAccountant, FourierAccountant])
@pytest.mark.parametrize("sigma, n, d", [(3e3, 200, 100), (3e3, 200, 40_000), (1e4, 500, 10_000)])
def test_cdf_based_accountants_contain_the_closed_form(accountant, sigma, n, d):
    """The PRV and Fourier accountants discretise the blocks with their partial mean (``partial_mean``): their
    intervals hold the closed form, at ``sigma sqrt(clients)`` of 4.2e4 and beyond the grid (2.2e5)."""
    b = accountant().compose(DistributedDiscreteGaussian(sigma=sigma, clients=n, sensitivity=d), 10).epsilon(1e-6)
    up = _delta_unsampled(sigma, n, d, 10, b.upper)
    assert up <= 1e-6 * (1 + _SLACK)
    if b.lower > 0.0:
        assert _delta_unsampled(sigma, n, d, 10, b.lower) >= 1e-6 * (1 - _SLACK)


@pytest.mark.parametrize("q, direction", [(1.0, "remove"), (0.3, "remove"), (0.3, "add")])
def test_partial_mean_holds_the_mpmath_sum_over_the_realised_cells(q, direction):
    """``partial_mean(a, b)`` against the sum, in mpmath, of the exact reference loss times the mixture of normal
    densities (the law of the sum to within ``T < 1e-300``) over the outputs of the cells ``cell_masses`` realised for
    edges from ``a`` to ``b``; and it is not vacuous (error below 1e-12 of the sum of ``|l| P``)."""
    sigma, n, d = 150.0, 5, 200  # s = 335: a few thousand outputs between the edges, summed term by term
    loss = LargeDistributedDiscreteGaussianLoss(sigma, n, d, q, direction)
    edges = np.linspace(loss.lower_quantile(1e-6), loss.upper_quantile(1e-6), 101)
    loss.cell_masses(edges)
    value, err = loss.partial_mean(float(edges[0]), float(edges[-1]))
    b, _ = loss._boundaries(edges)
    s2 = n * mpmath.mpf(sigma) ** 2
    qq, dd = mpmath.mpf(q), mpmath.mpf(d)
    total = mpmath.mpf(0)
    size = mpmath.mpf(0)
    for x in range(int(b[0]) + 1, int(b[-1]) + 1):
        f = (2 * dd * x - dd * dd) / (2 * s2)
        a_, b_ = _phi(x - dd, s2), _phi(x, s2)  # relabelled outputs: P and Q of each direction
        if q >= 1.0:
            p_x, l_x = a_, f
        elif direction == "remove":
            p_x, l_x = qq * a_ + (1 - qq) * b_, mpmath.log(1 - qq + qq * mpmath.exp(f))
        else:
            p_x, l_x = a_, -mpmath.log(1 - qq + qq * mpmath.exp(-f))
        total += l_x * p_x
        size += abs(l_x) * p_x
    assert abs(total - mpmath.mpf(value)) <= err <= 1e-12 * size


def test_partial_mean_refuses_beyond_its_cap_of_outputs():
    loss = LargeDistributedDiscreteGaussianLoss(1e5, 100_000, 10**7)
    with pytest.raises(UnsupportedMechanismError, match="partial mean"):
        loss.partial_mean(-5.0, 5.0)

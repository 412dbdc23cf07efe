"""The discrete Gaussian and discrete Laplace mechanisms, alone and Poisson-subsampled: certified intervals
against exact enumerations of the discrete privacy-loss distributions in mpmath (40 digits).

A computed ``[lower, upper]`` for ``epsilon(delta)`` contains the truth ``eps*`` exactly when
``delta_exact(upper) <= delta <= delta_exact(lower)`` (``delta(eps)`` is non-increasing), which is what the
tests check, so no root finding in high precision is needed. The references enumerate every output
within 14 standard deviations (or 80 scales) of each noise law: the mass left out is below 1e-40.
"""

from __future__ import annotations

import itertools
import math

import mpmath
import numpy as np
import pytest
from _support import mp_convolve_power, scaled
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tightdp import ConnectDotsAccountant
from tightdp.errors import UnsupportedMechanismError
from tightdp.mechanisms.base import mechanism_from_dict
from tightdp.mechanisms.discrete import (
    DiscreteGaussian,
    DiscreteLaplace,
    PoissonSampledDiscrete,
    discrete_gaussian_log_normaliser,
)

MPMATH_DPS = 40  # mpmath's working digits in every test of this module (set by conftest before each test)
_SLACK = mpmath.mpf("1e-12")  # relative: the references' own truncation and rounding are far below


def _dgauss_pmf(sigma: float, shift: int, lo: int, hi: int) -> dict[int, mpmath.mpf]:
    s2 = 2 * mpmath.mpf(sigma) ** 2
    z = mpmath.nsum(lambda x: mpmath.exp(-x * x / s2), [-mpmath.inf, mpmath.inf])
    return {x: mpmath.exp(-((x - shift) ** 2) / s2) / z for x in range(lo, hi + 1)}


def _dlap_pmf(a: float, shift: int, lo: int, hi: int) -> dict[int, mpmath.mpf]:
    r = mpmath.exp(-mpmath.mpf(a))
    c = (1 - r) / (1 + r)
    return {x: c * r ** abs(x - shift) for x in range(lo, hi + 1)}


def _window(kind: str, par: float, d: int) -> tuple[int, int]:
    m = int(math.ceil(14 * par)) + 2 if kind == "gauss" else int(math.ceil(95.0 / par)) + 2
    return -m, d + m


def _pair(kind: str, par: float, d: int, q: float, direction: str):
    """The atoms ``(loss, P-mass, Q-mass)`` of one step, in mpmath."""
    lo, hi = _window(kind, par, d)
    pmf = _dgauss_pmf if kind == "gauss" else _dlap_pmf
    a, b = pmf(par, d, lo, hi), pmf(par, 0, lo, hi)
    q = mpmath.mpf(q)
    out = []
    for x in range(lo, hi + 1):
        mix = q * a[x] + (1 - q) * b[x]
        p_, q_ = (mix, b[x]) if direction == "remove" else (b[x], mix)
        out.append((mpmath.log(p_ / q_), p_, q_))
    return out


def _delta_composed(atoms, k: int, eps: float) -> mpmath.mpf:
    """delta(eps) of k compositions of a finite pair given by its atoms (by enumeration of the sums)."""
    dist = {mpmath.mpf(0): mpmath.mpf(1)}
    for _ in range(k):
        nxt: dict = {}
        for (l0, p0), (l1, p1, _) in itertools.product(dist.items(), atoms):
            key = l0 + l1
            nxt[key] = nxt.get(key, 0) + p0 * p1
        dist = nxt
    e = mpmath.mpf(eps)
    return mpmath.fsum(p * (1 - mpmath.exp(e - l)) for l, p in dist.items() if l > e)


def _delta_lattice(kind: str, par: float, d: int, k: int, eps: float) -> mpmath.mpf:
    """Unsampled: each step's loss is ``g j + c`` for an integer ``j`` (the discrete Gaussian:
    ``(d^2 - 2 d x) / (2 sigma^2)``, ``j = -x``; the discrete Laplace: ``a (|x - d| - |x|)``, ``j`` in
    ``-d..d``), so k steps compose by convolving the integer-indexed P-masses."""
    lo, hi = _window(kind, par, d)
    if kind == "gauss":
        s2 = 2 * mpmath.mpf(par) ** 2
        g, c = 2 * d / s2, mpmath.mpf(d * d) / s2
        step = {-x: p for x, p in _dgauss_pmf(par, 0, lo, hi).items()}
    else:
        g, c = mpmath.mpf(par), 0
        step: dict = {}
        for x, p in _dlap_pmf(par, 0, lo, hi).items():
            j = abs(x - d) - abs(x)
            step[j] = step.get(j, 0) + p
    step = {j: p for j, p in step.items() if p > mpmath.mpf("1e-45")}
    dist = mp_convolve_power(step, k)
    e = mpmath.mpf(eps)
    return mpmath.fsum(p * (1 - mpmath.exp(e - (g * j + k * c))) for j, p in dist.items() if g * j + k * c > e)


def _check(bounds, delta: float, delta_of_eps):
    up = delta_of_eps(bounds.upper)
    assert up <= delta * (1 + _SLACK), (bounds, float(up), delta)
    if bounds.lower > 0.0:  # (a lower end 0 holds whatever the truth)
        lo = delta_of_eps(bounds.lower)
        assert lo >= delta * (1 - _SLACK), (bounds, float(lo), delta)
    assert bounds.upper - bounds.lower <= 2 * max(1e-3 * bounds.upper, 5e-5) + 1e-9, bounds


@settings(max_examples=scaled(12), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sigma=st.floats(0.4, 3.0), d=st.integers(1, 3), k=st.integers(1, 6), delta=st.sampled_from([1e-2, 1e-5, 1e-9]))
def test_discrete_gaussian_contains_exact_enumeration(sigma, d, k, delta):
    b = ConnectDotsAccountant().compose(DiscreteGaussian(sigma=sigma, sensitivity=d), k).epsilon(delta)
    _check(b, delta, lambda e: _delta_lattice("gauss", sigma, d, k, e))


@settings(max_examples=scaled(12), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(a=st.floats(0.3, 3.0), d=st.integers(1, 4), k=st.integers(1, 8), delta=st.sampled_from([1e-2, 1e-5, 1e-9]))
def test_discrete_laplace_contains_exact_enumeration(a, d, k, delta):
    b = ConnectDotsAccountant().compose(DiscreteLaplace(noise_parameter=a, sensitivity=d), k).epsilon(delta)
    _check(b, delta, lambda e: _delta_lattice("lap", a, d, k, e))


@settings(max_examples=scaled(10), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(["gauss", "lap"]),
    par=st.floats(0.6, 2.0),
    q=st.floats(0.01, 0.9),
    k=st.integers(1, 2),
    delta=st.sampled_from([1e-2, 1e-4, 1e-7]),
)
def test_poisson_sampled_discrete_contains_exact_enumeration(kind, par, q, k, delta):
    inner = DiscreteGaussian(sigma=par) if kind == "gauss" else DiscreteLaplace(noise_parameter=par)
    mech = PoissonSampledDiscrete(mechanism=inner, sampling_rate=q)
    b = ConnectDotsAccountant().compose(mech, k).epsilon(delta)
    rem, add = (_pair(kind, par, 1, q, r) for r in ("remove", "add"))
    rem = [t for t in rem if t[1] > mpmath.mpf("1e-42")]
    add = [t for t in add if t[1] > mpmath.mpf("1e-42")]
    _check(b, delta, lambda e: max(_delta_composed(rem, k, e), _delta_composed(add, k, e)))


@given(sigma=st.floats(1e-3, 1e5))
@settings(max_examples=scaled(25), deadline=None)
def test_normaliser_is_certified(sigma):
    log_z, err = discrete_gaussian_log_normaliser(sigma)
    mpmath.mp.dps = 40
    s = mpmath.mpf(sigma)
    # Jacobi theta_3(0, exp(-1 / (2 sigma^2))) = sum_x exp(-x^2 / (2 sigma^2))
    exact = (
        mpmath.log(mpmath.jtheta(3, 0, mpmath.exp(-1 / (2 * s * s))))
        if sigma < 30
        else mpmath.log(s * mpmath.sqrt(2 * mpmath.pi) * mpmath.jtheta(3, 0, mpmath.exp(-2 * mpmath.pi**2 * s * s)))
    )
    assert abs(mpmath.mpf(log_z) - exact) <= err, (sigma, log_z, float(exact), err)
    assert err < 1e-12


def test_large_sigma_is_close_to_the_continuous_gaussian():
    """sigma = 2000, Delta = 2000 (mu = 1): within the interval width of the continuous Gaussian's exact
    epsilon (the discrete one is a little more private; Canonne et al. 2020, Sec. 1)."""
    from tightdp import Gaussian

    d = ConnectDotsAccountant().compose(DiscreteGaussian(sigma=2000.0, sensitivity=2000), 10).epsilon(1e-6)
    g = ConnectDotsAccountant().compose(Gaussian(noise_multiplier=1.0), 10).epsilon(1e-6)
    assert d.lower <= g.upper + 1e-9 and abs(d.upper - g.upper) <= 5e-3 * g.upper, (d, g)


def test_serialisation_and_bad_input():
    m = PoissonSampledDiscrete(mechanism=DiscreteGaussian(sigma=3.0, sensitivity=2), sampling_rate=0.2)
    assert mechanism_from_dict(m.to_dict()) == m
    with pytest.raises(ValueError, match="sigma"):
        DiscreteGaussian(sigma=-1.0)
    with pytest.raises(ValueError, match="sensitivity"):
        DiscreteGaussian(sigma=1.0, sensitivity=1.5)
    with pytest.raises(ValueError, match="noise_parameter"):
        DiscreteLaplace(noise_parameter=0.0)
    with pytest.raises(ValueError, match="sampling_rate"):
        PoissonSampledDiscrete(mechanism=DiscreteLaplace(noise_parameter=1.0), sampling_rate=1.5)
    with pytest.raises(ValueError, match="relation"):
        PoissonSampledDiscrete(mechanism=DiscreteLaplace(noise_parameter=1.0), sampling_rate=0.5, relation="substitute")
    from tightdp import Gaussian

    with pytest.raises(UnsupportedMechanismError):
        PoissonSampledDiscrete(mechanism=Gaussian(noise_multiplier=1.0), sampling_rate=0.5)


def _vector_delta_exact(sigma: float, shifts, k: int, eps: float) -> mpmath.mpf:
    """delta(eps) of k releases of the product pair with coordinate shifts ``shifts`` (exact: the loss is
    sum_i (v_i^2 - 2 v_i x_i) / (2 sigma^2); enumerated over integer-indexed sums, as ``_delta_lattice``)."""
    lo, hi = _window("gauss", sigma, max(shifts))
    s2 = 2 * mpmath.mpf(sigma) ** 2
    step = {x: p for x, p in _dgauss_pmf(sigma, 0, lo, hi).items() if p > mpmath.mpf("1e-45")}
    dist = {0: mpmath.mpf(1)}  # keyed by J = sum v_i x_i over all coordinates and releases
    for v in list(shifts) * k:
        nxt: dict = {}
        for (j0, p0), (x, p1) in itertools.product(dist.items(), step.items()):
            nxt[j0 + v * x] = nxt.get(j0 + v * x, 0) + p0 * p1
        dist = nxt
    c = k * sum(v * v for v in shifts) / s2
    e = mpmath.mpf(eps)
    return mpmath.fsum(p * (1 - mpmath.exp(e - (c - 2 * j / s2))) for j, p in dist.items() if c - 2 * j / s2 > e)


@settings(max_examples=scaled(8), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sigma=st.floats(0.6, 1.5),
    linf=st.integers(1, 2),
    coords=st.integers(1, 3),
    l2sq=st.integers(1, 6),
    k=st.integers(1, 2),
    delta=st.sampled_from([1e-2, 1e-5]),
)
def test_vector_interval_contains_the_worst_admissible_shift(sigma, linf, coords, l2sq, k, delta):
    """Every admissible integer shift of a 3-dimensional discrete Gaussian, enumerated: the largest exact
    delta at the upper end is at most delta (the dominating pair holds), and the lower end is attained."""
    from tightdp.mechanisms.discrete_vector import DiscreteGaussianVector
    from tightdp.tuning import discrete_vector_epsilon

    mech = DiscreteGaussianVector(
        sigma=sigma, dimension=3, linf_sensitivity=linf, max_coordinates=coords, l2_sensitivity=math.sqrt(l2sq)
    )
    b = discrete_vector_epsilon(mechanism=mech, delta=delta, count=k)
    shifts = [
        tuple(sorted((abs(a) for a in v if a), reverse=True))
        for v in itertools.product(range(-linf, linf + 1), repeat=3)
        if 0 < sum(a * a for a in v) <= l2sq and sum(1 for a in v if a) <= coords
    ]
    worst_up = max(_vector_delta_exact(sigma, s, k, b.upper) for s in set(shifts))
    assert worst_up <= delta * (1 + _SLACK), (b, float(worst_up))
    if b.lower > 0:
        worst_lo = max(_vector_delta_exact(sigma, s, k, b.lower) for s in set(shifts))
        assert worst_lo >= delta * (1 - _SLACK), (b, float(worst_lo))


@pytest.mark.parametrize("tau", [0.3, 0.45, 0.7])
def test_theta_bound_holds_and_is_close(tau):
    """The periodised N(0, tau^2) density, summed directly in mpmath at 200 points of a period: its largest
    distance from 1 is at most ``theta_bound(tau)`` and not far below it (so a wrong bound would fail)."""
    from tightdp.mechanisms.discrete_vector import theta_bound

    t = mpmath.mpf(tau)

    def periodised(y):
        return mpmath.fsum(
            mpmath.exp(-((j - y) ** 2) / (2 * t * t)) / (t * mpmath.sqrt(2 * mpmath.pi)) for j in range(-40, 41)
        )

    worst = max(abs(periodised(mpmath.mpf(i) / 200) - 1) for i in range(200))
    bound = theta_bound(tau)
    assert worst <= bound
    assert worst >= 0.9 * bound


@pytest.mark.parametrize(("sigma", "tau", "v"), [(1.0, 0.5, 1), (2.0, 0.7, 3), (1.5, 1.0, 2)])
def test_smoothing_kernel_output_is_pointwise_close_to_the_discrete_gaussian(sigma, tau, v):
    """The envelope lemma of ``DiscreteGaussianVector``: rounding ``y ~ N(v, sigma^2 - tau^2)`` to ``k`` with
    probability ``phi_tau(k - y) / Theta(y)`` gives, at every integer ``k`` near ``v``, a mass within
    ``e^(+-r)`` of the discrete Gaussian's (adaptive quadrature; its error, below 1e-10, is far inside r)."""
    from scipy import integrate
    from scipy.stats import norm

    from tightdp.mechanisms.discrete_vector import theta_bound

    s = math.sqrt(sigma * sigma - tau * tau)
    js = np.arange(-40, 41)

    def kernel_density(y, k):
        return norm.pdf(y - v, scale=s) * norm.pdf(k - y, scale=tau) / norm.pdf(js - y, scale=tau).sum()

    target = {k: float(p) for k, p in _dgauss_pmf(sigma, v, v - 3, v + 3).items()}
    theta = theta_bound(tau)
    r = math.log1p(2 * theta / (1 - theta))
    for k in range(v - 3, v + 4):
        mass = integrate.quad(
            kernel_density, v - 14 * sigma, v + 14 * sigma, args=(k,), epsabs=0, epsrel=1e-11, limit=400
        )[0]
        ratio = target[k] / mass
        assert math.exp(-r) <= ratio <= math.exp(r), (k, ratio, r)


@settings(max_examples=scaled(6), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sigma=st.floats(2.0, 3.5), linf=st.integers(2, 3), l2sq=st.integers(4, 9), delta=st.sampled_from([1e-3, 1e-6]))
def test_vector_envelope_upper_end_holds_where_the_l2_cap_binds(sigma, linf, l2sq, delta):
    """Where the L2 cap binds (several coordinates, shifts up to 3), the interval's upper end comes from the
    continuous envelope; every admissible shift of the 4-dimensional discrete Gaussian, enumerated exactly, has
    delta at most the target there, and the lower end is attained."""
    from tightdp.mechanisms.discrete_vector import DiscreteGaussianVector
    from tightdp.tuning import discrete_vector_epsilon

    mech = DiscreteGaussianVector(
        sigma=sigma, dimension=4, linf_sensitivity=linf, max_coordinates=4, l2_sensitivity=math.sqrt(l2sq)
    )
    b = discrete_vector_epsilon(mechanism=mech, delta=delta)
    shifts = {
        tuple(sorted((abs(a) for a in v if a), reverse=True))
        for v in itertools.product(range(-linf, linf + 1), repeat=4)
        if 0 < sum(a * a for a in v) <= l2sq
    }
    worst_up = max(_vector_delta_exact(sigma, s, 1, b.upper) for s in shifts)
    assert worst_up <= delta * (1 + _SLACK), (b, float(worst_up))
    worst_lo = max(_vector_delta_exact(sigma, s, 1, b.lower) for s in shifts)
    assert worst_lo >= delta * (1 - _SLACK), (b, float(worst_lo))


def test_vector_envelope_narrows_a_federated_sum():
    """A federated-learning vector sum (sigma 10, 1000 coordinates, each moved by at most 5, L2 cap 10, 100
    rounds): the envelope brings the upper end within 1 % of the attained lower end (the ledger alone was
    15 times too high)."""
    from tightdp.mechanisms.discrete_vector import DiscreteGaussianVector
    from tightdp.tuning import discrete_vector_epsilon

    mech = DiscreteGaussianVector(
        sigma=10.0, dimension=1000, linf_sensitivity=5, max_coordinates=1000, l2_sensitivity=10.0
    )
    b = discrete_vector_epsilon(mechanism=mech, delta=1e-6, count=100)
    assert "continuous envelope" in b.details["upper_ledger"]
    assert b.lower <= b.upper <= 1.01 * b.lower


def _skellam_pair(mu: float, d: int, q: float, direction: str):
    """Atoms ``(loss, P-mass, Q-mass)`` of the (subsampled) Skellam pair, P-masses by direct 40-digit Bessel
    functions ``e^(-2 mu) I_|k|(2 mu)`` (independent of the implementation's recurrence)."""
    m = int(math.ceil(30 * math.sqrt(2 * mu))) + 12
    x2 = 2 * mpmath.mpf(mu)
    pmf = {k: mpmath.exp(-x2) * mpmath.besseli(abs(k), x2) for k in range(-m - d, m + d + 1)}
    q = mpmath.mpf(q)
    out = []
    for x in range(-m, m + d + 1):
        mix = q * pmf[x - d] + (1 - q) * pmf[x]
        p_, q_ = (mix, pmf[x]) if direction == "remove" else (pmf[x], mix)
        if p_ > mpmath.mpf("1e-42"):
            out.append((mpmath.log(p_ / q_), p_, q_))
    return out


@settings(max_examples=scaled(8), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    mu=st.floats(0.3, 4.0),
    d=st.integers(1, 2),
    q=st.sampled_from([1.0, 0.05, 0.5]),
    k=st.integers(1, 2),
    delta=st.sampled_from([1e-2, 1e-5]),
)
def test_skellam_contains_exact_enumeration(mu, d, q, k, delta):
    from tightdp.mechanisms.discrete import Skellam

    mech = Skellam(mu=mu, sensitivity=d)
    if q < 1.0:
        mech = PoissonSampledDiscrete(mechanism=mech, sampling_rate=q)
    b = ConnectDotsAccountant().compose(mech, k).epsilon(delta)
    rem, add = _skellam_pair(mu, d, q, "remove"), _skellam_pair(mu, d, q, "add")
    _check(b, delta, lambda e: max(_delta_composed(rem, k, e), _delta_composed(add, k, e)))


@settings(max_examples=scaled(8), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sigma=st.floats(0.4, 1.5),
    n=st.integers(2, 4),
    d=st.integers(1, 2),
    q=st.sampled_from([1.0, 0.3]),
    k=st.integers(1, 2),
    delta=st.sampled_from([1e-2, 1e-5]),
)
def test_distributed_discrete_gaussian_contains_exact_enumeration(sigma, n, d, q, k, delta):
    """The sum of n discrete Gaussians, convolved in mpmath, and its (subsampled) pair enumerated."""
    _check_distributed(sigma, n, d, q, k, delta)


@pytest.mark.parametrize(
    "sigma, n, d, q, k, delta", [(2.5, 3, 1, 1.0, 2, 1e-5), (3.0, 2, 2, 0.3, 1, 1e-9), (2.4, 4, 1, 1.0, 1, 1e-2)]
)
def test_distributed_discrete_gaussian_of_the_summed_variance_contains_exact_enumeration(sigma, n, d, q, k, delta):
    """From sigma about 2.3 the sum's atoms are the discrete Gaussian's of variance n sigma^2 within a certified
    factor (Poisson summation, ``_sum_law_log_error``), not a convolution: against the mpmath convolution."""
    from tightdp.mechanisms._discrete_losses import _SUM_LAW_LOG_ERROR, _sum_law_log_error

    assert _sum_law_log_error(sigma, n) <= _SUM_LAW_LOG_ERROR  # the closed-form path is the one checked
    _check_distributed(sigma, n, d, q, k, delta)


def test_distributed_discrete_gaussian_of_sigma_1e5_answers_without_a_convolution(monkeypatch):
    """Three clients of sigma 1e5, sensitivity 1000, delta 1e-15: the law of the sum was convolved directly, 3.7
    million outputs with themselves (over 100 s). Now no convolution runs, and the interval holds the Gaussian of
    the same variance's epsilon, from which the discrete one's differs by about a lattice step of the loss
    (``Delta / (n sigma^2)`` = 3.3e-8)."""
    from tightdp._gdp_math import gdp_epsilon_bounds
    from tightdp.mechanisms import _discrete_losses
    from tightdp.mechanisms.discrete import DistributedDiscreteGaussian

    def refuse(*args, **kwargs):
        raise AssertionError("the sum's law was convolved")

    monkeypatch.setattr(_discrete_losses.np, "convolve", refuse)
    mech = DistributedDiscreteGaussian(sigma=1e5, clients=3, sensitivity=1000)
    b = ConnectDotsAccountant().compose(mech).epsilon(1e-15)
    ref = gdp_epsilon_bounds(1000.0 / (1e5 * math.sqrt(3.0)), 1e-15)[1]
    assert b.lower - 2e-7 <= ref <= b.upper + 2e-7
    assert b.upper - b.lower <= 2 * max(1e-3 * b.upper, 5e-5)


def _check_distributed(sigma: float, n: int, d: int, q: float, k: int, delta: float) -> None:
    from tightdp.mechanisms.discrete import DistributedDiscreteGaussian

    mech = DistributedDiscreteGaussian(sigma=sigma, clients=n, sensitivity=d)
    if q < 1.0:
        mech = PoissonSampledDiscrete(mechanism=mech, sampling_rate=q)
    b = ConnectDotsAccountant().compose(mech, k).epsilon(delta)
    lo, hi = _window("gauss", sigma, 0)
    one = {x: p for x, p in _dgauss_pmf(sigma, 0, lo, hi).items() if p > mpmath.mpf("1e-60")}
    law = mp_convolve_power(one, n)
    qq = mpmath.mpf(q)
    atoms = {"remove": [], "add": []}
    for x in range(min(law), max(law) + d + 1):
        a, bb = law.get(x - d, 0), law.get(x, 0)
        mix = qq * a + (1 - qq) * bb
        for direction, (p_, q_) in (("remove", (mix, bb)), ("add", (bb, mix))):
            if p_ > mpmath.mpf("1e-42"):
                atoms[direction].append((mpmath.log(p_ / q_) if q_ > 0 else mpmath.inf, p_, q_))
    _check(b, delta, lambda e: max(_delta_composed(atoms["remove"], k, e), _delta_composed(atoms["add"], k, e)))


@settings(max_examples=40, deadline=None)
@given(x=st.floats(1e-3, 1e4), k=st.integers(0, 3000))
def test_bessel_ratio_upper_bound_holds_against_mpmath(x, k):
    """``U_k >= I_(k+1)(x) / I_k(x)`` and ``U_k <= 1`` (the lemma Miller's truncation bound rests on), against
    mpmath's Bessel functions at 40 digits; and it is not vacuous: within 4 % of the ratio."""
    import mpmath

    from tightdp.mechanisms._discrete_losses import _bessel_ratio_upper

    u = float(_bessel_ratio_upper(np.array([float(k)]), x)[0])
    with mpmath.workdps(40):
        xm = mpmath.mpf(x)
        r = float(mpmath.besseli(k + 1, xm) / mpmath.besseli(k, xm))
    assert r <= u * (1 + 1e-14) and u <= 1.0
    assert u <= r * 1.04


def test_miller_start_reaches_its_bound_and_the_masses_their_accuracy():
    """The start's truncation bound is at most ``2 _MILLER_REL``; a start one short of it misses the bound (the
    search is not padded), and a start far too short gives masses visibly off the Bessel function (the bound is
    what protects the masses)."""
    import mpmath

    from tightdp.mechanisms import _discrete_losses as dl

    x, top = 500.0, 300
    n, bound = dl._miller_start(x, top)
    assert n > top and bound <= 2 * dl._MILLER_REL
    u = dl._bessel_ratio_upper(np.arange(0.0, n + 1.0), x)  # U_0 .. U_n
    theta_short = float(np.prod(u[top : n - 1]))  # the start n - 1
    eta_short = (2 / (1 - u[n]) + 2 * (n - 1) + 1) * float(np.prod(u[: n - 1]))
    assert max(theta_short, eta_short) > dl._MILLER_REL
    with mpmath.workdps(30):
        j = [mpmath.mpf(0)] * (top + 12)
        j[top + 10] = mpmath.mpf(1)
        for k in range(top + 10, 0, -1):
            j[k - 1] = j[k + 1] + (2 * k / mpmath.mpf(x)) * j[k]
        short = j[top] / (j[0] + 2 * mpmath.fsum(j[1:]))
        exact = mpmath.besseli(top, mpmath.mpf(x)) * mpmath.exp(-mpmath.mpf(x))
    assert abs(short / exact - 1) > 1e-7


@settings(max_examples=12, deadline=None)
@given(mu=st.floats(0.01, 3000.0), spread=st.floats(3.0, 30.0))
def test_skellam_masses_by_miller_match_the_bessel_function_at_random_mu(mu, spread):
    """As below, at random ``mu`` and window tops ``spread`` standard deviations out (``sqrt(2 mu)``)."""
    test_skellam_masses_by_miller_match_the_bessel_function(mu, max(2, int(spread * math.sqrt(2.0 * mu))))


@pytest.mark.parametrize("mu, top", [(0.01, 12), (3.7, 40), (250.0, 200), (5000.0, 1500)])
def test_skellam_masses_by_miller_match_the_bessel_function(mu, top):
    """Miller's backward recurrence, normalised by ``sum_k I_k = e^x``, against mpmath's Bessel function (40 digits)
    where the latter converges."""
    import mpmath

    from tightdp.mechanisms._discrete_losses import _skellam_masses

    with mpmath.workdps(30):
        masses = _skellam_masses(mpmath.mpf(2 * mu), top)
    with mpmath.workdps(40):
        for k in (0, 1, top // 3, top):
            exact = mpmath.besseli(k, 2 * mpmath.mpf(mu)) * mpmath.exp(-2 * mpmath.mpf(mu))
            assert abs(masses[k] / exact - 1) < 1e-25


def test_skellam_at_the_largest_mu_answers():
    """mu = 1e6 (the largest taken): mpmath's Bessel function did not converge at 2e6 (NoConvergence after a long
    series). Three uses at sensitivity 1 sit just below the Gaussian of the same variance (2e6)."""
    from tightdp.mechanisms import Gaussian
    from tightdp.mechanisms.discrete import Skellam

    b = ConnectDotsAccountant().compose(Skellam(mu=1e6, sensitivity=1), 3).epsilon(1e-6)
    g = ConnectDotsAccountant().compose(Gaussian(noise_multiplier=math.sqrt(2e6)), 3).epsilon(1e-6)
    assert 0 < b.lower <= b.upper and b.upper <= g.upper * 1.01 and b.lower >= 0.98 * g.lower

"""The Fourier accountant (Koskela et al. 2020): grid parameters, error reports, agreement with the PRV accountant."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tightdp
from tightdp import FourierAccountant, PRVAccountant


def test_small_variance_composition_is_finite():
    # regression: q = 1e-3, sigma = 0.8 (Gopi et al. 2021 Fig. 1) once reported alias mass 1 and eps = inf
    mech = tightdp.dpsgd_mechanism(noise_multiplier=0.8, sampling_rate=1e-3)
    fa = FourierAccountant(L=12, n=200_000).compose(mech, 10).epsilon(1e-7)
    prv = PRVAccountant().compose(mech, 10).epsilon(1e-7)
    assert math.isfinite(fa.upper)
    assert fa.lower <= prv.upper and prv.lower <= fa.upper
    assert fa.details["tail_bound"] < 1e-30


def test_error_estimate_shrinks_with_n():
    mech = tightdp.PoissonSampled(
        mechanism=tightdp.Gaussian(noise_multiplier=1.5), sampling_rate=0.01, relation="remove"
    )
    coarse = FourierAccountant(L=12, n=50_000).compose(mech, 1000).delta(1.0)
    fine = FourierAccountant(L=12, n=200_000).compose(mech, 1000).delta(1.0)
    assert fine.details["discretisation_error"] < coarse.details["discretisation_error"]
    assert fine.lower >= coarse.lower - 1e-12 and fine.upper <= coarse.upper + 1e-12
    assert fine.details["tail_estimate"] is not None  # Koskela et al. 2020 eq. (7.3) applies to this ledger


def test_small_L_widens_instead_of_lying():
    # with L far too small the window cannot hold the composition: the bounds must still hold
    mech = tightdp.Gaussian(noise_multiplier=1.0)
    b = FourierAccountant(L=2.0, n=20_000).compose(mech, 16).delta(3.0)
    from _support import gdp_delta_mp

    assert b.lower <= gdp_delta_mp(3.0, 4.0) <= b.upper


@pytest.mark.parametrize("bad", [dict(L=0), dict(L=-1), dict(n=11), dict(n=0), dict(L=float("nan"))])
def test_bad_parameters(bad):
    with pytest.raises(ValueError):
        FourierAccountant(**bad)


# ------------------------------------------------------------------------- Koskela et al. 2020 Alg. 1, paper-faithful
TABLE1 = {
    50_000: 0.0491228786423,
    200_000: 0.0496013846114,
    800_000: 0.0496014103252,
}  # Koskela et al. 2020 Table 1, L = 12
TABLE1_CONVERGED = 0.0496014103163  # Koskela et al. 2020 Table 1, n = 3.2e6


def _table1_mech():
    return tightdp.PoissonSampled(
        mechanism=tightdp.Gaussian(noise_multiplier=1.5), sampling_rate=0.01, relation="remove"
    )


@pytest.mark.parametrize("n", sorted(TABLE1))
def test_paper_mode_reproduces_001_table1(n):
    """Point evaluation (Koskela et al. 2020 Alg. 1) gives the printed per-n column, not the converged value."""
    acc = FourierAccountant(L=12, n=n, discretisation="paper").compose(_table1_mech(), 10_000)
    b = acc.delta(1.0)
    assert b.kind == "approximation" and b.lower is None and b.upper is None
    assert abs(b.estimate - TABLE1[n]) <= 1e-10, (n, b.estimate)
    err = float(b.details["discretisation_error"][0])  # Koskela et al. 2020 eq. (7.4): 2 |I_n - I_2n|
    assert err >= abs(b.estimate - TABLE1_CONVERGED) * 0.5
    assert b.details["tail_estimate"] == pytest.approx(
        8.3e-24, rel=0.01
    )  # "O(1e-24)", Koskela et al. 2020 Table 1 caption


def test_paper_mode_epsilon_inverts_the_riemann_sum():
    acc = FourierAccountant(L=12, n=200_000, discretisation="paper").compose(_table1_mech(), 10_000)
    e = acc.epsilon(TABLE1[200_000])
    assert e.kind == "approximation"
    assert abs(e.estimate - 1.0) <= 1e-9
    assert e.details["discretisation_error"] > 0


def test_certified_mode_brackets_table1_and_converges_slower_than_the_paper():
    """The certified interval contains the converged value; its estimate's error is O(h^2), not the paper's."""
    errs = []
    for n in (50_000, 200_000):
        b = FourierAccountant(L=12, n=n).compose(_table1_mech(), 10_000).delta(1.0)
        assert b.lower <= TABLE1_CONVERGED <= b.upper
        errs.append(abs(b.estimate - TABLE1_CONVERGED))
    assert 8 <= errs[0] / errs[1] <= 32  # factor 4 in n: factor ~16 in the error
    assert errs[1] > 10 * abs(TABLE1[200_000] - TABLE1_CONVERGED)


def test_paper_mode_refuses_atoms_at_compose_time():
    acc = FourierAccountant(discretisation="paper")
    with pytest.raises(tightdp.errors.UnsupportedMechanismError):
        acc.compose(tightdp.Laplace(scale=1.0))
    assert acc.ledger == ()
    with pytest.raises(ValueError, match="discretisation"):
        FourierAccountant(discretisation="exact")


def test_paper_mode_gaussian_matches_closed_form():
    from _support import gdp_delta_mp

    acc = FourierAccountant(n=200_000, discretisation="paper").compose(tightdp.Gaussian(noise_multiplier=2.0), 4)
    assert float(acc.delta(1.0).estimate) == pytest.approx(gdp_delta_mp(1.0, 1.0), rel=1e-6)


def test_default_L_answers_the_cifar_demo_run():
    """q = 256/50000, sigma = 1.1, 19600 steps, delta = 1e-5 once answered [0, inf] at L = 12 (block CGF
    bounds put the mass outside the window at 1.77); the exact Chernoff bound and the chosen L certify it."""
    mech = tightdp.dpsgd_mechanism(noise_multiplier=1.1, sampling_rate=256 / 50_000)
    b = FourierAccountant().compose(mech, 19_600).epsilon(1e-5)
    ref = tightdp.dpsgd_epsilon(noise_multiplier=1.1, sampling_rate=256 / 50_000, steps=19_600, delta=1e-5)
    assert math.isfinite(b.upper) and b.upper - b.lower < 0.05
    assert b.lower <= ref.upper and ref.lower <= b.upper
    assert b.details["L_chosen"] and b.details["tail_bound"] < 1e-10
    assert b.details["seconds"] < 30


def test_too_small_explicit_L_names_the_L_it_needs():
    mech = tightdp.Gaussian(noise_multiplier=0.5)
    b = FourierAccountant(L=3.0, n=20_000).compose(mech, 10).epsilon(1e-6)
    assert math.isinf(b.upper) and "asks for L >= 68.75" in b.details["note"]  # eps ~ 49 needs L ~ 69
    auto = FourierAccountant(n=20_000).compose(mech, 10).epsilon(1e-6)
    assert math.isfinite(auto.upper) and auto.details["L"] > 3.0


@pytest.mark.parametrize("delta", [1e-12, 1e-15])
def test_tiny_delta_tilts_the_fft_and_brackets_the_closed_form(delta):
    """Below delta 1e-9 the untilted FFT's round-off (about 1e-16 of the whole mass per grid point) left the
    upper end at inf for a single Gaussian (truth 7.24 at 1e-12, 8.17 at 1e-15); the tilted FFT certifies it."""
    import mpmath as mp
    from _support import gdp_delta_mp

    truth = float(mp.findroot(lambda e: gdp_delta_mp(float(e), 1.0) - delta, (5.0, 10.0), solver="bisect"))
    b = FourierAccountant().compose(tightdp.Gaussian(noise_multiplier=1.0), 1).epsilon(delta)
    assert b.lower <= truth <= b.upper
    assert b.upper - b.lower < 1e-3
    assert b.details["tilts"][0] > 0


def test_tiny_delta_dpsgd_agrees_with_the_connect_dots_interval():
    mech = tightdp.dpsgd_mechanism(noise_multiplier=1.0, sampling_rate=0.01)
    b = FourierAccountant().compose(mech, 1000).epsilon(1e-12)
    ref = tightdp.ConnectDotsAccountant().compose(mech, 1000).epsilon(1e-12)
    assert math.isfinite(b.upper) and b.upper - b.lower < 0.05
    assert b.lower <= ref.upper and ref.lower <= b.upper


@settings(max_examples=8, deadline=None)
@given(
    noise=st.floats(0.5, 4.0),
    steps=st.integers(1, 50),
    log_delta=st.floats(-15.0, -9.5),
)
def test_tilted_queries_bracket_the_gaussian_closed_form(noise, steps, log_delta):
    """The tilted path (delta below 1e-9) at random Gaussian ledgers against mu-GDP's exact curve (mpmath)."""
    from _support import gdp_delta_mp

    delta, mu = 10.0**log_delta, math.sqrt(steps) / noise
    b = FourierAccountant().compose(tightdp.Gaussian(noise_multiplier=noise), steps).epsilon(delta)
    assert math.isfinite(b.upper) and b.details["tilts"][0] > 0
    # delta(eps) falls in eps: the interval holds the truth iff delta(upper) <= delta <= delta(lower)
    assert gdp_delta_mp(b.upper, mu) <= delta * (1 + 1e-9)
    assert b.lower == 0.0 or gdp_delta_mp(b.lower, mu) >= delta * (1 - 1e-9)
    assert b.upper - b.lower <= 2e-3 * max(1.0, b.upper)


def _gaussian_rr_delta(mu, p, k, uses, eps):
    """Exact delta of ``Gaussian(mu-GDP) x RandomizedResponse(p, k)^uses`` at ``eps`` (mpmath, 40 digits): the
    response's loss is ``+l``, ``-l`` or ``0`` with ``P``-masses ``1 - p + p/k``, ``p/k``, ``(k-2) p/k``
    (``l = log((1 - p + p/k) / (p/k))``), and given the atoms' total ``a`` the Gaussian's curve at ``eps - a``
    (mu-GDP's closed form holds at negative arguments too). The pair is symmetric: one direction suffices."""
    import mpmath

    with mpmath.workdps(40):
        p, mu, eps = mpmath.mpf(p), mpmath.mpf(mu), mpmath.mpf(eps)
        top, bot = 1 - p + p / k, p / k
        ell = mpmath.log(top / bot)
        mid = (k - 2) * p / k
        total = mpmath.mpf(0)
        for up in range(uses + 1):
            for down in range(uses - up + 1):
                zero = uses - up - down
                w = mpmath.factorial(uses) / (mpmath.factorial(up) * mpmath.factorial(down) * mpmath.factorial(zero))
                mass = w * top**up * bot**down * mid**zero
                x = eps - (up - down) * ell
                total += mass * (mpmath.ncdf(-x / mu + mu / 2) - mpmath.exp(x) * mpmath.ncdf(-x / mu - mu / 2))
        return total


def test_tiny_delta_aims_the_tilt_by_the_saddle_point_beside_bounded_losses():
    """A Gaussian beside randomized responses at delta 8.7e-12: the normal approximation aimed the tilt near 29
    (tilt 14) against an answer of 18.53, the FFT lost the answer to round-off, and the interval was [0, 20.44].
    The saddle-point aim (``tightdp.pld.saddle_epsilon``) brackets the exact value tightly."""
    import mpmath

    mu = math.sqrt(5) / 1.8714
    delta = 8.741627152863823e-12
    acc = FourierAccountant().compose(tightdp.Gaussian(noise_multiplier=1.8714), 5)
    acc.compose(tightdp.RandomizedResponse(noise_parameter=0.3897, num_buckets=3), 6)
    b = acc.epsilon(delta)
    f = lambda e: _gaussian_rr_delta(mu, 0.3897, 3, 6, e) - delta
    exact = float(mpmath.findroot(f, (17.0, 20.0), solver="bisect", tol=1e-20))
    assert b.lower <= exact <= b.upper
    assert b.upper - b.lower <= 2e-3 * exact

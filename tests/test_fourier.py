"""The Fourier accountant (paper 001): grid parameters, error reports, agreement with the PRV accountant."""

import math

import pytest

import tightdp
from tightdp import FourierAccountant, PRVAccountant


def test_small_variance_composition_is_finite():
    # regression: q = 1e-3, sigma = 0.8 (003 Fig. 1) once reported alias mass 1 and eps = inf
    mech = tightdp.dpsgd_mechanism(noise_multiplier=0.8, sampling_rate=1e-3)
    fa = FourierAccountant(L=12, n=200_000).compose(mech, 10).epsilon(1e-7)
    prv = PRVAccountant().compose(mech, 10).epsilon(1e-7)
    assert math.isfinite(fa.upper)
    assert fa.lower <= prv.upper and prv.lower <= fa.upper
    assert fa.details["tail_bound"] < 1e-30


def test_error_estimate_shrinks_with_n():
    mech = tightdp.PoissonSampled(mechanism=tightdp.Gaussian(noise_multiplier=1.5), sampling_rate=0.01,
                                  relation="remove")
    coarse = FourierAccountant(L=12, n=50_000).compose(mech, 1000).delta(1.0)
    fine = FourierAccountant(L=12, n=200_000).compose(mech, 1000).delta(1.0)
    assert fine.details["discretisation_error"] < coarse.details["discretisation_error"]
    assert fine.lower >= coarse.lower - 1e-12 and fine.upper <= coarse.upper + 1e-12
    assert fine.details["tail_estimate"] is not None  # 001 eq. (7.3) applies to this ledger


def test_small_L_widens_instead_of_lying():
    # with L far too small the window cannot hold the composition: the bounds must still hold
    mech = tightdp.Gaussian(noise_multiplier=1.0)
    b = FourierAccountant(L=2.0, n=20_000).compose(mech, 16).delta(3.0)
    from tests.conftest import gdp_delta_mp
    assert b.lower <= gdp_delta_mp(3.0, 4.0) <= b.upper


@pytest.mark.parametrize("bad", [dict(L=0), dict(L=-1), dict(n=11), dict(n=0), dict(L=float("nan"))])
def test_bad_parameters(bad):
    with pytest.raises(ValueError):
        FourierAccountant(**bad)

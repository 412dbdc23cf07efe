"""GDP accountant: exact mu-GDP when q = 1, CLT labelled an approximation, robust root finding."""

import json
import math

import mpmath as mp
import numpy as np
import pytest
from _support import REFERENCE as REF
from _support import scaled
from hypothesis import given, settings
from hypothesis import strategies as st

from tightdp import (
    Gaussian,
    GDPAccountant,
    Laplace,
    PoissonSampled,
    RDPAccountant,
    UnsupportedMechanismError,
    accountant_from_dict,
)
from tightdp.accountants.gdp import gdp_delta


def _mp_delta(mu, eps):
    mp.mp.dps = 50
    mu, eps = mp.mpf(mu), mp.mpf(eps)
    return mp.ncdf(-eps / mu + mu / 2) - mp.e**eps * mp.ncdf(-eps / mu - mu / 2)


@pytest.mark.parametrize("mu,eps", [(0.5, 0.1), (1.0, 3.0), (2.0, 10.0), (0.05, 1.0), (5.0, 40.0)])
def test_delta_curve_matches_mpmath_including_far_tail(mu, eps):
    want = float(_mp_delta(mu, eps))
    assert gdp_delta(mu=mu, epsilon=np.array([eps]))[0] == pytest.approx(want, rel=1e-9)


def test_exact_when_q_is_one():
    g = Gaussian(noise_multiplier=2.0)
    a = GDPAccountant().compose(PoissonSampled(mechanism=g, sampling_rate=1.0), 30)
    b = GDPAccountant().compose(g, 30)
    for acc in (a, b):
        e = acc.epsilon(1e-6)
        assert e.kind == "bound" and e.lower <= e.upper and e.upper - e.lower < 1e-10
        assert float(_mp_delta(math.sqrt(30) / 2.0, e.upper)) <= 1e-6 * (1 + 1e-9)
        assert float(_mp_delta(math.sqrt(30) / 2.0, e.lower)) >= 1e-6 * (1 - 1e-9)


def test_reference_values_000():
    for r in REF:
        if "epsilon_exact_gdp" in r:
            e = (
                GDPAccountant()
                .compose(Gaussian(noise_multiplier=r["noise_multiplier"]), r["steps"])
                .epsilon(r["delta"])
            )
            assert e.upper == pytest.approx(r["epsilon_exact_gdp"], rel=1e-9)


def test_420_to_495():
    """Koskela et al. 2023 Sec. 4.1: RDP's epsilon at 420 steps is first exceeded by exact GDP at step 496."""
    g = Gaussian(noise_multiplier=100.0)
    target = RDPAccountant().compose(g, 420).epsilon(1e-5).upper
    assert target == pytest.approx(0.8156, abs=2e-4)
    assert GDPAccountant().compose(g, 495).epsilon(1e-5).upper <= target
    assert GDPAccountant().compose(g, 496).epsilon(1e-5).upper > target


def test_clt_is_an_approximation():
    m = PoissonSampled(mechanism=Gaussian(noise_multiplier=0.8), sampling_rate=1e-3)
    acc = GDPAccountant().compose(m, 2000).compose(Gaussian(noise_multiplier=50.0), 3)
    e = acc.epsilon(1e-7)
    assert e.kind == "approximation" and e.lower is None and e.upper is None and e.estimate > 0
    d = acc.delta([0.5, 1.0])
    assert d.kind == "approximation" and d.lower is None and d.upper is None
    mu = acc.mu()[0]
    assert mu == pytest.approx(math.sqrt(2000 * 1e-6 * math.expm1(1 / 0.64) + 3 / 2500), rel=1e-12)


@settings(max_examples=scaled(40), deadline=None)
@given(mu=st.floats(1e-3, 300.0), log_delta=st.floats(-14, -0.01))
def test_root_finder_never_fails(mu, log_delta):
    delta = 10.0**log_delta
    e = GDPAccountant().compose(Gaussian(noise_multiplier=1.0 / mu)).epsilon(delta)
    assert e.upper >= 0 and not math.isnan(e.upper)
    if math.isfinite(e.upper) and e.upper > 0:
        assert gdp_delta(mu=mu, epsilon=np.array([e.upper]))[0] <= delta * (1 + 1e-9)


def test_opacus_failure_case_eps_10():
    """Opacus' GDP eps(delta) fails at eps = 10 with a sign error; we answer."""
    acc = GDPAccountant().compose(PoissonSampled(mechanism=Gaussian(noise_multiplier=0.7), sampling_rate=0.2), 50)
    mu = acc.mu()[0]
    d = float(gdp_delta(mu=mu, epsilon=np.array([10.0]))[0])
    e = acc.epsilon(d)
    assert e.estimate == pytest.approx(10.0, rel=1e-8)


def test_serialisation_and_unsupported():
    acc = GDPAccountant().compose(Gaussian(noise_multiplier=1.0), 3)
    assert accountant_from_dict(json.loads(acc.to_json())) == acc
    with pytest.raises(UnsupportedMechanismError):
        GDPAccountant().compose(Laplace(scale=1.0))
    with pytest.raises(UnsupportedMechanismError):
        GDPAccountant().compose(
            PoissonSampled(mechanism=Gaussian(noise_multiplier=1.0), sampling_rate=0.1, relation="substitute")
        )


def test_bad_input():
    acc = GDPAccountant().compose(Gaussian(noise_multiplier=1.0))
    for bad in (0.0, 1.0, -0.5, float("nan")):
        with pytest.raises(ValueError, match="delta"):
            acc.epsilon(bad)
    with pytest.raises(ValueError, match="epsilon"):
        acc.delta(-2.0)
    with pytest.raises(ValueError, match="count"):
        acc.compose(Gaussian(noise_multiplier=1.0), 0)
    with pytest.raises(ValueError, match="noise_multiplier"):
        Gaussian(noise_multiplier=float("nan"))

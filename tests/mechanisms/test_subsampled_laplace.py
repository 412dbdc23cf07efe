"""Poisson-subsampled Laplace: exact single-step curve by quadrature, composition against dp-accounting."""

import math

import pytest
from _support import scaled
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import integrate

from tightdp import Laplace, PoissonSampled, PRVAccountant, UnsupportedMechanismError


def exact_single_delta(eps, q, b):
    """max over both directions of the hockey-stick divergence, by adaptive quadrature."""
    p = lambda x: q * math.exp(-abs(x - 1) / b) / (2 * b) + (1 - q) * math.exp(-abs(x) / b) / (2 * b)
    r = lambda x: math.exp(-abs(x) / b) / (2 * b)
    # the integrands' kinks: where p/r = 1 - q + q exp((|x| - |x - 1|) / b) crosses e^eps (remove) or e^-eps (add)
    kinks = [0.0, 1.0]
    for level in (math.exp(eps), math.exp(-eps)):
        if level - 1 + q > 0:
            x = (b * math.log((level - 1 + q) / q) + 1) / 2
            if 0 < x < 1:
                kinks.append(x)
    kw = dict(points=sorted(set(kinks)), limit=400, epsabs=1e-14, epsrel=1e-11)
    rem = integrate.quad(lambda x: max(p(x) - math.exp(eps) * r(x), 0.0), -60 * b, 60 * b, **kw)[0]
    add = integrate.quad(lambda x: max(r(x) - math.exp(eps) * p(x), 0.0), -60 * b, 60 * b, **kw)[0]
    return max(rem, add)


@pytest.mark.parametrize("q,b", [(0.1, 1.0), (0.3, 0.5), (0.02, 0.2)])
@pytest.mark.parametrize("eps", [0.0, 0.05, 0.2])
def test_single_step_contains_exact(q, b, eps):
    bd = PRVAccountant(eps_error=0.005).compose(PoissonSampled(mechanism=Laplace(scale=b), sampling_rate=q)).delta(eps)
    exact = exact_single_delta(eps, q, b)
    assert bd.lower <= exact <= bd.upper


@pytest.mark.peers
@pytest.mark.parametrize("q,b,k", [(0.05, 2.0, 50), (0.01, 0.5, 300)])
def test_composition_agrees_with_dp_accounting(q, b, k):
    pl = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    acc = PRVAccountant().compose(PoissonSampled(mechanism=Laplace(scale=b), sampling_rate=q), k)
    ref = pl.from_laplace_mechanism(
        parameter=b, sensitivity=1, sampling_prob=q, value_discretization_interval=1e-4
    ).self_compose(k)
    for eps in (0.1, 0.5):
        bd = acc.delta(eps)
        d = ref.get_delta_for_epsilon(eps)  # pessimistic estimate: at or slightly above the truth
        assert bd.lower <= d <= bd.upper * 1.001 + 1e-9


def test_laplace_substitute_is_refused():
    with pytest.raises(UnsupportedMechanismError):
        PoissonSampled(mechanism=Laplace(scale=1.0), sampling_rate=0.1, relation="substitute")


@pytest.mark.parametrize("q,b", [(0.1, 1.0), (0.3, 0.5), (0.02, 0.2)])
@pytest.mark.parametrize("eps", [0.0, 0.05, 0.2])
def test_default_accountant_single_step_contains_exact(q, b, eps):
    """The dominance grids are offset so that both atoms (outputs x <= 0 and x >= 1) are grid points."""
    from tightdp import ConnectDotsAccountant

    bd = ConnectDotsAccountant().compose(PoissonSampled(mechanism=Laplace(scale=b), sampling_rate=q)).delta(eps)
    assert "fallback" not in bd.details
    exact = exact_single_delta(eps, q, b)
    assert bd.lower <= exact <= bd.upper


@pytest.mark.peers
@pytest.mark.parametrize("q,b,k,delta", [(0.01, 1.0, 3000, 1.1e-4), (0.05, 5.0, 2000, 6e-6), (0.2, 0.7, 500, 1e-9)])
def test_default_accountant_composition_one_pass_between_dp_accounting_estimates(q, b, k, delta):
    """Subsampled Laplace fell back to PRV after four passes whose lower end stalled (its atoms were off the
    grid, and each step's merge swallowed tens of cells of density): now one or two passes, and the interval
    meets dp-accounting's optimistic and pessimistic estimates (a lower and an upper estimate of the truth)."""
    from tightdp import ConnectDotsAccountant

    pl = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    b_ = ConnectDotsAccountant().compose(PoissonSampled(mechanism=Laplace(scale=b), sampling_rate=q), k).epsilon(delta)
    assert "fallback" not in b_.details and b_.details["passes"] <= 2, b_.details
    assert b_.upper - b_.lower <= 2 * max(1e-3 * b_.upper, 5e-5)
    est = {}
    for pessimistic in (True, False):
        ref = pl.from_laplace_mechanism(
            parameter=b,
            sensitivity=1,
            sampling_prob=q,
            value_discretization_interval=2e-4,
            pessimistic_estimate=pessimistic,
        ).self_compose(k)
        est[pessimistic] = ref.get_epsilon_for_delta(delta)
    assert est[False] <= b_.upper and b_.lower <= est[True], (b_, est)


@settings(max_examples=scaled(20), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(q=st.floats(0.001, 1.0), b=st.floats(0.2, 30.0), frac=st.floats(0.0, 0.95))
def test_default_accountant_single_step_random_contains_exact(q, b, frac):
    """Random sampling rates and scales, epsilon anywhere below the loss support's top (where delta > 0):
    the single-step interval contains the quadrature."""
    from tightdp import ConnectDotsAccountant

    mech = PoissonSampled(mechanism=Laplace(scale=b), sampling_rate=q)
    top = mech.privacy_losses().remove.support()[1]
    eps = frac * top
    bd = ConnectDotsAccountant().compose(mech).delta(eps)
    exact = exact_single_delta(eps, q, b)
    assert bd.lower <= exact * (1 + 1e-9) + 1e-13 and exact <= bd.upper * (1 + 1e-9) + 1e-13, (bd, exact)


@pytest.mark.parametrize("b,frac", [(11.0, 0.4515128871326898), (0.7, 0.1), (3.0, 0.9)])
def test_quadrature_reference_matches_laplace_closed_form_at_q_one(b, frac):
    """The reference itself against truth: at q = 1, delta(eps) = 1 - exp((eps - 1/b) / 2) (mpmath). Without the
    integrands' kinks among the quadrature's break points it was 7e-9 high at b = 11 (found by CI's random draw)."""
    import mpmath as mp

    eps = frac / b
    with mp.workdps(40):
        truth = float(1 - mp.exp((mp.mpf(eps) - mp.mpf(1) / b) / 2))
    assert exact_single_delta(eps, 1.0, b) == pytest.approx(truth, rel=1e-11, abs=1e-15)

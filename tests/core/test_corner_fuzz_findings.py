"""Corners a fuzz of every mechanism and accountant at extreme parameters found (twenty-first session): each query
now answers a certified interval or refuses with a ``TightDPError`` / ``ValueError`` that says why, instead of a
``math domain error``, an ``AttributeError`` or an ``OverflowError`` from deep inside."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tightdp import ConnectDotsAccountant
from tightdp.errors import PrecisionError, TightDPError, UnsupportedMechanismError


def test_sampling_without_replacement_at_tiny_noise_answers():
    """Noise 0.01: the closed-form inverse took log(0) (``q e^(-1 / (2 sigma^2))`` underflowed). At rate 1/2 the
    sampled-or-not pair is nearly disjoint: delta(1) is the rate, 0.5."""
    from tightdp import Gaussian, SampledWithoutReplacement

    mech = SampledWithoutReplacement(mechanism=Gaussian(noise_multiplier=0.01), sample_size=500, dataset_size=1000)
    b = ConnectDotsAccountant().compose(mech).delta(1.0)
    assert b.lower <= 0.5 <= b.upper and b.upper - b.lower < 1e-5


@settings(max_examples=30, deadline=None)
@given(q=st.floats(0.001, 0.999), sigma=st.floats(0.05, 20.0))
def test_the_without_replacement_inverse_inverts_the_loss(q, sigma):
    from tightdp.losses.mixture import _WithoutReplacementLoss

    loss = _WithoutReplacementLoss((1.0, 0.0), (q, 1.0 - q), (0.0, -1.0), (1.0 - q, q), sigma)
    x = np.linspace(-3.0, 3.0, 25)
    y = loss.loss(x)
    back = loss.inverse(y)
    # a right inverse (the loss is flat in double precision on a plateau at small sigma)
    assert np.allclose(loss.loss(back), y, rtol=1e-9, atol=1e-9)


def test_sampling_with_replacement_past_double_precision_is_refused_by_name():
    from tightdp.mechanisms import Gaussian, SampledWithReplacement

    mech = SampledWithReplacement(mechanism=Gaussian(noise_multiplier=0.5), sample_size=8000, dataset_size=10)
    with pytest.raises(PrecisionError, match="sample_size=8000"):
        ConnectDotsAccountant().compose(mech).epsilon(1e-6)


@pytest.mark.parametrize("delta", [1e-15, 1e-6, 0.5])
def test_a_non_private_step_is_infinite_at_every_delta(delta):
    """At delta below 1e-12 the query reached an empty array (numpy's message); the mass at infinite loss alone
    exceeds delta, so epsilon is infinite, before any grid is built."""
    from tightdp import Gaussian, PRVAccountant
    from tightdp.integrations.dp_accounting import NonPrivate

    for acc in (ConnectDotsAccountant(), PRVAccountant()):
        b = acc.compose([(NonPrivate(), 1), (Gaussian(noise_multiplier=1.0), 3)]).epsilon(delta)
        assert b.lower == b.upper == math.inf and "exceeds delta" in b.details["note"]


def test_rdp_and_gdp_refuse_a_subsampled_laplace_at_compose():
    """They accepted it and every query failed with AttributeError (no ``noise_multiplier``, no ``mu``)."""
    from tightdp.accountants.gdp import GDPAccountant
    from tightdp.accountants.rdp import RDPAccountant
    from tightdp.mechanisms import Laplace, PoissonSampled

    for acc in (RDPAccountant(), GDPAccountant()):
        with pytest.raises(UnsupportedMechanismError, match="PoissonSampled"):
            acc.compose(PoissonSampled(mechanism=Laplace(scale=1.0), sampling_rate=0.5))


def test_rdp_of_a_perfectly_private_randomized_response():
    """Noise parameter 1 (every output uniform): a Renyi divergence rounded to -1e-17 took sqrt of a negative."""
    from tightdp.accountants.rdp import RDPAccountant
    from tightdp.mechanisms import RandomizedResponse

    acc = RDPAccountant().compose(RandomizedResponse(noise_parameter=1.0, num_buckets=2))
    with pytest.warns(UserWarning, match="edge of the order grid"):
        assert acc.delta(1.0).upper == 0.0


@pytest.mark.parametrize("kw", [dict(noise_multiplier=1.0, sensitivity=1e-170), dict(noise_multiplier=1e-300)])
def test_edgeworth_refuses_a_vanishing_or_exploding_mu(kw):
    """ZeroDivisionError (a variance of 0) and OverflowError (moments of mu = inf) before."""
    from tightdp.accountants.edgeworth import EdgeworthAccountant
    from tightdp.mechanisms import Gaussian

    with pytest.raises(TightDPError, match=r"variance|overflow double precision"):
        EdgeworthAccountant().compose(Gaussian(**kw)).epsilon(1e-6)


@pytest.mark.parametrize(
    "kw",
    [
        dict(distribution="fixed", runs=1000),
        dict(distribution="poisson", mean=1.0),
    ],
)
def test_tuning_with_a_per_run_epsilon_in_the_hundreds_answers(kw):
    """``math.expm1`` of a profile point past 709 overflowed (OverflowError); such points hold nothing a double
    can and are skipped."""
    from tightdp.mechanisms import PureDP
    from tightdp.tuning import tuning_epsilon

    b = tuning_epsilon(run=PureDP(epsilon=500.0), delta=0.3, **kw)
    assert 0.0 <= b.lower <= b.upper < math.inf


def test_selection_never_answers_above_pure_dp():
    """Permute-and-flip at 1.0, three uses: 3.0023 from the grids, though three uses of a 1-DP mechanism are
    3-DP exactly; at epsilon 1e-6, one use: 2e-6."""
    from tightdp.mechanisms.selection import PermuteAndFlip, ReportNoisyMax
    from tightdp.tuning import selection_epsilon

    assert selection_epsilon(mechanism=PermuteAndFlip(epsilon=1.0), delta=1e-6, count=3).upper <= 3.0 + 1e-15
    for mech in (PermuteAndFlip(epsilon=1e-6), ReportNoisyMax(epsilon=1e-6, noise="exponential")):
        b = selection_epsilon(mechanism=mech, delta=1e-15, count=1)
        assert b.lower <= b.upper <= 1e-6 * (1 + 1e-15)


def test_pure_epsilon_is_claimed_by_the_pure_mechanisms_only():
    """``Mechanism.pure_epsilon``: what ``selection_epsilon`` caps its upper end by (an isinstance list before)."""
    from tightdp import Gaussian, Laplace, PureDP
    from tightdp.mechanisms.selection import (
        BoundedRange,
        ExponentialMechanism,
        PermuteAndFlip,
        ReportNoisyMax,
        SparseVector,
    )

    pure = (
        PureDP(epsilon=0.7),
        BoundedRange(epsilon=0.7),
        ExponentialMechanism(epsilon=0.7),
        PermuteAndFlip(epsilon=0.7),
        *(ReportNoisyMax(epsilon=0.7, noise=n) for n in ("gumbel", "laplace", "exponential")),
        SparseVector(epsilon=0.7, cutoff=2),
    )
    assert all(m.pure_epsilon() == 0.7 for m in pure)
    assert Gaussian(noise_multiplier=1.0).pure_epsilon() is None
    assert Laplace(scale=1.0).pure_epsilon() is None  # not claimed (the dominating pair carries it)


def test_an_atoms_only_ledger_of_negligible_total_variation_answers_delta_at_once():
    """A pair with an atom of 1e-12 at loss 0.25 (a sparse vector stream far above the threshold): its delta at
    every epsilon is below the total variation bound, which answers without a grid (a rarer atom at a loss of 800
    ran the PRV fallback for minutes). Checked against the exact delta by enumeration of the composed atoms."""
    import itertools
    import time

    from tightdp.mechanisms._finite_pairs import FinitePair

    values = (-3.010924842783878e-13, 0.24999999999527742)
    probs = (1.0 - 1.3617981666529696e-16, 1.3617981666529696e-16)
    t0 = time.perf_counter()
    b = ConnectDotsAccountant().compose(FinitePair(values=values, probs=probs), 3).delta([0.0, 0.1, 1.0])
    assert time.perf_counter() - t0 < 1.0
    for e, lo, hi in zip([0.0, 0.1, 1.0], b.lower, b.upper):
        exact = 0.0
        for combo in itertools.product(range(2), repeat=3):
            loss = sum(values[i] for i in combo)
            exact += math.prod(probs[i] for i in combo) * max(0.0, -math.expm1(e - loss))
        assert lo <= exact <= hi


@pytest.mark.parametrize("delta", [0.3, 1e-3, 1e-15])
def test_a_step_beyond_the_cells_reach_keeps_a_lower_end_from_its_top_mass(delta):
    """A Laplace step of epsilon 1000 (its loss beyond the +-700 the dominance cells exponentiate) answered [0, 1000]:
    the lower end is now the mass at the top of the support, half the P-mass at loss 1000. Exact: a Laplace step's
    ``delta(eps) = 1 - e^((eps - epsilon) / 2)``, so ``eps(delta) = epsilon + 2 log(1 - delta)``."""
    from tightdp import ConnectDotsAccountant, Laplace

    b = ConnectDotsAccountant().compose(Laplace(scale=1e-3)).epsilon(delta)
    truth = 1000.0 + 2.0 * math.log1p(-delta)
    assert 1000.0 + math.log1p(-2.0 * delta) - 1e-5 <= b.lower <= truth <= b.upper == 1000.0


@pytest.mark.parametrize(("distribution", "kw"), [("poisson", dict(mean=1.0)), ("geometric", dict(mean=50.0))])
def test_tuning_a_run_past_double_precision_raises_no_warning(distribution, kw):
    """Per-run epsilon 1000 (Laplace of scale 1e-3): e^c and e^(eps - e1) overflowed in the lower search and the
    two-region bound (inf * 0 = NaN, skipped by luck of min's argument order); such levels are now left out by name."""
    import warnings

    from tightdp import Laplace
    from tightdp.tuning import tuning_epsilon

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        b = tuning_epsilon(run=[(Laplace(scale=1e-3), 1)], delta=0.3, distribution=distribution, **kw)
    assert 990.0 < b.lower <= b.upper < 1010.0


def test_delta_equal_to_the_mass_at_infinity_is_decided_exactly():
    """One (1, 1e-5)-DP step asked at delta 1e-5 answered an upper end of inf (the float comparison with the mass at
    infinity allowed 1e-12 either way); exactly, delta(1) = 1e-5, so epsilon is 1. Just below, epsilon is infinite."""
    from fractions import Fraction

    from tightdp import ApproximateDP, ConnectDotsAccountant

    for d0 in (1e-5, 0.3):
        one = ConnectDotsAccountant().compose(ApproximateDP(epsilon=1.0, delta=d0))
        b = one.epsilon(d0)
        assert b.lower <= 1.0 == b.upper
        assert math.isinf(one.epsilon(math.nextafter(d0, 0.0)).lower)
    two = ConnectDotsAccountant().compose(ApproximateDP(epsilon=1.0, delta=1e-5), 2)
    exact = 1 - (1 - Fraction(1e-5)) ** 2
    above = float(exact)
    if Fraction(above) < exact:
        above = math.nextafter(above, 1.0)
    assert two.epsilon(above).upper == 2.0
    assert math.isinf(two.epsilon(math.nextafter(above, 0.0)).lower)


def test_a_truncated_tail_at_infinity_certifies_no_infinite_lower_end():
    """A discrete Gaussian's loss is finite everywhere, but its pair sends a truncated tail (2.8e-86 over ten steps)
    to +inf. Asked below that mass, the answer was [inf, inf]: an infinite lower end no data set attains."""
    from tightdp import ApproximateDP
    from tightdp.mechanisms.discrete import DiscreteGaussian

    acc = ConnectDotsAccountant().compose(DiscreteGaussian(sigma=2.0), 10)
    p_inf = acc._support_ceiling()[1]
    assert p_inf > 0.0
    b = acc.epsilon(0.5 * p_inf)
    assert b.lower == 0.0 and math.isinf(b.upper)
    one = ConnectDotsAccountant().compose(ApproximateDP(epsilon=1.0, delta=1e-5))  # a true atom stays infinite
    assert math.isinf(one.epsilon(5e-6).lower)


@pytest.mark.parametrize("name", ["ConnectDotsAccountant", "PRVAccountant", "FourierAccountant"])
def test_delta_lower_end_at_the_mass_at_infinity_is_rounded_down(name):
    """Just above the exact top of the support delta is exactly ``P(L = inf) = 1 - (1 - d1)^4 (1 - d2)``; the
    composition's float of it was the nearest, half an ulp above, and connect-dots' lower end returned it (a fuzz
    against mpmath enumeration found it)."""
    from fractions import Fraction

    import tightdp.accountants as accs
    from tightdp import ApproximateDP, Laplace, RandomizedResponse

    d1, d2 = 1.55560800633376e-12, 2.4860459944935956e-08
    acc = getattr(accs, name)().compose(Laplace(scale=0.8228980307527678))
    for m, c in (
        (ApproximateDP(epsilon=2.3160846217338666, delta=d1), 4),
        (RandomizedResponse(noise_parameter=0.2049947976407279, num_buckets=3), 4),
        (ApproximateDP(epsilon=0.04461257949044075, delta=d2), 1),
    ):
        acc = acc.compose(m, c)
    b = acc.delta(np.array([20.669898741857057]))  # above the exact top by 1.3e-15 (mpmath)
    exact = 1 - (1 - Fraction(d1)) ** 4 * (1 - Fraction(d2))
    assert Fraction(float(b.lower[0])) <= exact <= Fraction(float(b.upper[0]))

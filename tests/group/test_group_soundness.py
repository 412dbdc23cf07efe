"""Soundness of group-level epsilon: ``lower <= truth <= upper``.

One step: the truth is the exact epsilon of the mixture-of-Gaussians pair
(Ganesh 2024 Thm 3.1 / 3.3), computed here independently: exact rational
probabilities (``math.comb``, the double ``q`` taken exactly), 40-digit
mpmath hockey-stick divergences of both directions, and a root in epsilon.
A few steps: the dominance (connect-dots) and PRV (coupling) accountants are
two independent certified constructions, so their intervals must meet; and
dp_accounting 0.6.0's pessimistic PLD of the same mixture (slow, marked) is
an upper estimate our certified lower bound must not exceed.

Default runs are small; ``HYPOTHESIS_PROFILE=explore`` runs ten times as many examples, fresh ones.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath as mp
import numpy as np
import pytest
from _support import scaled
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tightdp.group import group_epsilon, group_mechanism
from tightdp.mechanisms.mixture import (
    GroupFixedBatchSampled,
    GroupPoissonSampled,
    certified_binomial,
    certified_hypergeometric,
)

ONE_STEP_EXAMPLES = scaled(6)
FEW_STEP_EXAMPLES = scaled(3)
SLACK = 1e-9  # the reference's own root-finding tolerance


# ------------------------------------------------------------------------- exact references
def exact_hypergeometric(k: int, b: int, n: int) -> list[Fraction]:
    total = math.comb(n + k, b)
    return [Fraction(math.comb(k, m) * math.comb(n, b - m), total) for m in range(min(k, b) + 1)]


def exact_binomial(k: int, q: float) -> list[Fraction]:
    qq = Fraction(q)
    return [math.comb(k, m) * qq**m * (1 - qq) ** (k - m) for m in range(k + 1)]


def _mpf(x: Fraction) -> mp.mpf:
    return mp.mpf(x.numerator) / x.denominator


def _root(f, target, lo: float, hi: float):
    """``x`` with ``f(x) = target`` for an increasing ``f``, after widening ``[lo, hi]`` to a bracket."""
    lo, hi = mp.mpf(lo), mp.mpf(hi)
    while f(lo) >= target:
        lo = 2 * lo - 1
    while f(hi) <= target:
        hi = 2 * hi + 1
    for _ in range(400):
        mid = (lo + hi) / 2
        if f(mid) > target:
            hi = mid
        else:
            lo = mid
        if hi - lo < mp.mpf(10) ** (-mp.mp.dps + 8) * (1 + abs(mid)):
            break
    return (lo + hi) / 2


def mp_one_step_epsilon(sens, probs: list[Fraction], sigma: float, delta: float, dps: int = 40) -> float:
    """Exact epsilon(delta) of one MoG step under add-or-remove adjacency (Ganesh 2024 Def. 2.8), 40 digits.

    remove: ``P = sum p_i N(c_i, s^2)``, ``Q = N(0, s^2)``; add: the pair swapped. With
    ``g(x) = log sum p_i exp((c_i x - c_i^2 / 2) / s^2)`` (increasing, convex), the remove loss
    is ``g(x)`` and the add loss ``-g(x)``, so ``delta(eps) = P(L > eps) - e^eps Q(L > eps)``
    is a Gaussian tail sum at the root of ``g = eps`` (remove) or ``g = -eps`` (add).
    """
    with mp.workdps(dps):
        s = mp.mpf(sigma)
        c = [mp.mpf(x) for x in sens]
        p = [_mpf(x) for x in probs]
        p0 = sum((pi for ci, pi in zip(c, p) if ci == 0), mp.mpf(0))

        def g(x):
            return mp.log(mp.fsum(pi * mp.exp((ci * x - ci * ci / 2) / s**2) for ci, pi in zip(c, p)))

        def d_remove(eps):
            x = _root(g, eps, -1.0, 1.0)
            return mp.fsum(pi * mp.ncdf((ci - x) / s) for ci, pi in zip(c, p)) - mp.exp(eps) * mp.ncdf(-x / s)

        def d_add(eps):
            if p0 > 0 and mp.log(p0) >= -eps:  # the add loss -g <= -log p0 <= eps everywhere
                return mp.mpf(0)
            x = _root(g, -eps, -1.0, 1.0)  # {-g > eps} = {x < root}
            return mp.ncdf(x / s) - mp.exp(eps) * mp.fsum(pi * mp.ncdf((x - ci) / s) for ci, pi in zip(c, p))

        def d(eps):
            return max(d_remove(eps), d_add(eps))

        target = mp.mpf(delta)
        if d(mp.mpf(0)) <= target:
            return 0.0
        lo, hi = mp.mpf(0), mp.mpf(1)
        while d(hi) > target:
            lo, hi = hi, 2 * hi
        for _ in range(60):  # delta(eps) is decreasing
            mid = (lo + hi) / 2
            if d(mid) > target:
                lo = mid
            else:
                hi = mid
            if hi - lo < 1e-13:
                break
        return float((lo + hi) / 2)


def dp_accounting_pessimistic(sens, probs: list[Fraction], sigma: float, steps: int, delta: float) -> float:
    """dp_accounting's pessimistic (connect-the-dots, interval 1e-3) epsilon of ``steps`` MoG steps: above
    the truth up to its tail truncation (its optimistic variant is far looser and far slower here)."""
    from dp_accounting.pld import privacy_loss_distribution as pld

    d = pld.from_mixture_gaussian_mechanism(
        sigma, list(sens), [float(x) for x in probs], value_discretization_interval=1e-3
    )
    return float(d.self_compose(steps).get_epsilon_for_delta(delta))


def _case(sampling: str, k: int, sigma: float, rate_or_batch, n: int | None):
    if sampling == "poisson":
        kw = dict(sampling="poisson", sampling_rate=rate_or_batch)
        return kw, [float(m) for m in range(k + 1)], exact_binomial(k, rate_or_batch)
    kw = dict(sampling="fixed-batch", batch_size=rate_or_batch, dataset_size=n)
    return kw, [2.0 * m for m in range(min(k, rate_or_batch) + 1)], exact_hypergeometric(k, rate_or_batch, n)


def assert_contains(b, truth: float, what: str) -> None:
    assert b.lower <= truth + SLACK, f"{what}: certified lower {b.lower!r} above the truth {truth!r}"
    assert truth <= b.upper + SLACK, f"{what}: certified upper {b.upper!r} below the truth {truth!r}"


# ------------------------------------------------------------------------------------- regression
def test_fixed_batch_lower_bound_is_below_the_truth():
    """Reported: lower 1.11473 > exact 1.112716 (scipy's hypergeometric pmf summed to 1 - 3.3e-11 and
    the deficit was counted as mass at infinite privacy loss, for the lower bound too)."""
    sigma, delta, n, b = 3.239931265054172, 1.1613840608290985e-09, 71175, 5285
    truth = mp_one_step_epsilon([0.0, 2.0], exact_hypergeometric(1, b, n), sigma, delta)
    assert truth == pytest.approx(1.112716, abs=2e-6)
    got = group_epsilon(
        noise_multiplier=sigma, steps=1, delta=delta, group_size=1, sampling="fixed-batch", dataset_size=n, batch_size=b
    )
    assert_contains(got, truth, "fixed batch")
    assert got.upper - got.lower <= 0.02 + 1e-9


@pytest.mark.parametrize("k", [4, 12])
def test_fixed_batch_groups_one_step_against_mpmath(k):
    sigma, delta, n, b = 3.239931265054172, 1.1613840608290985e-09, 71175, 5285
    kw, sens, probs = _case("fixed-batch", k, sigma, b, n)
    truth = mp_one_step_epsilon(sens, probs, sigma, delta)
    got = group_epsilon(noise_multiplier=sigma, steps=1, delta=delta, group_size=k, **kw)
    assert_contains(got, truth, f"k={k}")


def test_certified_probabilities_bracket_the_exact_ones():
    for k, b, n in [(1, 5285, 71175), (12, 5285, 71175), (30, 7, 40), (5, 100, 100), (64, 10_000, 10**6)]:
        pmf, exact = certified_hypergeometric(k, b, n), exact_hypergeometric(k, b, n)
        assert len(pmf.upper) == len(exact)
        for lo, hi, x in zip(pmf.lower, pmf.upper, exact):
            assert Fraction(lo) <= x <= Fraction(hi)
            if x >= 2.0**-1021:
                assert Fraction(hi) <= x * (1 + Fraction(pmf.rel_error))
        assert 0 < pmf.rel_error < 1e-15
    for k, q in [(1, 0.01), (9, 0.01), (40, 0.37), (200, 1e-3), (3, 1.0)]:
        pmf, exact = certified_binomial(k, q), exact_binomial(k, q)
        for lo, hi, x in zip(pmf.lower, pmf.upper, exact):
            assert Fraction(lo) <= x <= Fraction(hi)
            if x >= 2.0**-1021:
                assert Fraction(hi) <= x * (1 + Fraction(pmf.rel_error))


def test_group_losses_carry_the_weight_error():
    rem, add = GroupFixedBatchSampled(
        noise_multiplier=1.0, batch_size=5285, dataset_size=71175, group_size=3
    ).privacy_losses()
    for loss in (rem, add):
        assert 0 < loss.weight_error < 1e-15
        assert loss.infinity_mass == 0.0
        _, err = loss.outputs_at(np.array([0.5]))
        assert err >= math.log1p(loss.weight_error)
    exact = exact_hypergeometric(3, 5285, 71175)
    assert all(Fraction(w) >= x for w, x in zip(rem.p_weights, exact))  # remove: P at least the true one


# ------------------------------------------------------------------------- property tests
_sigma = st.floats(0.6, 6.0)
_log_delta = st.floats(-12.0, -3.0)


@st.composite
def _group_cases(draw):
    sampling = draw(st.sampled_from(["poisson", "fixed-batch"]))
    k = draw(st.integers(1, 16))
    sigma = draw(_sigma)
    if sampling == "poisson":
        q = 10 ** draw(st.floats(-4.0, math.log10(0.5)))
        assume(k / sigma <= 25.0)
        return sampling, k, sigma, q, None
    n = draw(st.integers(max(k, 20), 10**6))
    b = draw(st.integers(1, min(n, 20_000)))
    # one step's loss reaches about c^2 / (2 s^2) + 10 c / s: beyond ~700 (epsilon in the hundreds) the
    # dominance cells refuse with LossRangeError, a refusal rather than a wrong answer
    assume(2 * min(k, b) / sigma <= 25.0)
    return sampling, k, sigma, b, n


@settings(max_examples=ONE_STEP_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_group_cases(), log_delta=_log_delta)
def test_one_step_interval_contains_the_mpmath_truth(case, log_delta):
    sampling, k, sigma, rate_or_batch, n = case
    delta = 10**log_delta
    kw, sens, probs = _case(sampling, k, sigma, rate_or_batch, n)
    truth = mp_one_step_epsilon(sens, probs, sigma, delta)
    got = group_epsilon(noise_multiplier=sigma, steps=1, delta=delta, group_size=k, **kw)
    assert_contains(got, truth, f"{case}, delta={delta:.3g}")


@pytest.mark.slow
@settings(max_examples=FEW_STEP_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_group_cases(), log_delta=st.floats(-10.0, -4.0), steps=st.integers(2, 60))
def test_few_steps_dominance_and_prv_intervals_meet(case, log_delta, steps):
    """Two independent certified constructions (dominance pairs; PRV coupling) must overlap."""
    sampling, k, sigma, rate_or_batch, n = case
    delta = 10**log_delta
    kw, _, _ = _case(sampling, k, sigma, rate_or_batch, n)
    args = dict(noise_multiplier=sigma, steps=steps, delta=delta, group_size=k, **kw)
    cd, prv = group_epsilon(**args), group_epsilon(accountant="prv", **args)
    assert cd.lower <= prv.upper + SLACK and prv.lower <= cd.upper + SLACK, (case, steps, delta, cd, prv)


@pytest.mark.peers
@pytest.mark.slow
@pytest.mark.parametrize(
    "sampling, k, sigma, rate_or_batch, n, steps, delta",
    [
        ("fixed-batch", 12, 3.239931265054172, 5285, 71175, 20, 1.1613840608290985e-09),
        ("poisson", 8, 1.0, 0.01, None, 30, 1e-6),
    ],
)
def test_few_steps_against_dp_accounting(sampling, k, sigma, rate_or_batch, n, steps, delta):
    kw, sens, probs = _case(sampling, k, sigma, rate_or_batch, n)
    pess = dp_accounting_pessimistic(sens, probs, sigma, steps, delta)
    got = group_epsilon(noise_multiplier=sigma, steps=steps, delta=delta, group_size=k, **kw)
    assert got.lower <= pess + 1e-9, (got, pess)
    assert abs(got.estimate - pess) <= 0.01 + 1e-3 * pess  # same quantity; their mesh 1e-3


# ------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(batch_size=200, dataset_size=100, group_size=2), "batch_size"),
        (dict(batch_size=10, dataset_size=100, group_size=0), "group_size"),
        (dict(batch_size=10, dataset_size=100, group_size=-3), "group_size"),
        (dict(batch_size=10, dataset_size=100, group_size=2.5), "group_size"),
        (dict(batch_size=10, dataset_size=100, group_size=True), "group_size"),
        (dict(batch_size=True, dataset_size=100, group_size=2), "batch_size"),
        (dict(batch_size=10.5, dataset_size=100, group_size=2), "batch_size"),
        (dict(batch_size=10, dataset_size=False, group_size=2), "dataset_size"),
        (dict(batch_size=10, dataset_size=100.5, group_size=2), "dataset_size"),
        (dict(batch_size=10, dataset_size="100", group_size=2), "dataset_size"),
        (dict(batch_size=10, dataset_size=100, group_size=float("nan")), "group_size"),
    ],
)
def test_fixed_batch_bad_input_names_the_argument(kwargs, name):
    with pytest.raises(ValueError, match=name):
        GroupFixedBatchSampled(noise_multiplier=1.0, **kwargs)
    with pytest.raises(ValueError, match=name):
        group_mechanism(noise_multiplier=1.0, sampling="fixed-batch", **kwargs)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(sampling_rate=0.01, group_size=True), "group_size"),
        (dict(sampling_rate=0.01, group_size=1.5), "group_size"),
        (dict(sampling_rate=True, group_size=2), "sampling_rate"),
        (dict(sampling_rate=1.01, group_size=2), "sampling_rate"),
        (dict(sampling_rate=float("nan"), group_size=2), "sampling_rate"),
    ],
)
def test_poisson_bad_input_names_the_argument(kwargs, name):
    with pytest.raises(ValueError, match=name):
        GroupPoissonSampled(noise_multiplier=1.0, **kwargs)


def test_group_larger_than_the_batch_is_fine():
    """At most min(k, B) members are drawn: k > B is valid, with sensitivities up to 2 B."""
    m = GroupFixedBatchSampled(noise_multiplier=2.0, batch_size=3, dataset_size=50, group_size=10)
    c, _w = m.as_mixture().support
    assert c.tolist() == [0.0, 2.0, 4.0, 6.0]
    truth = mp_one_step_epsilon([0.0, 2.0, 4.0, 6.0], exact_hypergeometric(10, 3, 50), 2.0, 1e-6)
    got = group_epsilon(
        noise_multiplier=2.0, steps=1, delta=1e-6, group_size=10, sampling="fixed-batch", batch_size=3, dataset_size=50
    )
    assert_contains(got, truth, "k > B")

"""Atoms composed exactly before discretising (``tightdp.pld.atoms``): ledgers whose atoms lie on no
common lattice (randomized response with subsampled Laplace, pure DP of unrelated epsilons) used to
drift by a mesh per step in the lower construction and fall back to PRV (150 s on one sweep ledger)."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from _support import scaled
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tightdp import ApproximateDP, ConnectDotsAccountant, Laplace, PoissonSampled, PureDP, RandomizedResponse
from tightdp.mechanisms._finite_pairs import FinitePair
from tightdp.pld.atoms import SelfComposedAtoms, atom_lattice
from tightdp.pld.composition import convolution_power


def _two_binary_delta_mp(eps, terms):
    """delta(eps) of ``c1`` steps of (eps1, d1)-DP and ``c2`` of (eps2, d2)-DP (Kairouz et al. 2015, Thm 3.3
    per term: a binomial number of +eps_i atoms; the masses at +inf compose to ``1 - prod (1 - d_i)^c_i``),
    summed over both binomials in 30 digits."""
    mpmath.mp.dps = 30
    (e1, d1, c1), (e2, d2, c2) = terms
    e1, e2, eps = mpmath.mpf(e1), mpmath.mpf(e2), mpmath.mpf(eps)
    p1, p2 = 1 / (1 + mpmath.exp(-e1)), 1 / (1 + mpmath.exp(-e2))
    w1 = [mpmath.binomial(c1, j) * p1**j * (1 - p1) ** (c1 - j) for j in range(c1 + 1)]
    w2 = [mpmath.binomial(c2, j) * p2**j * (1 - p2) ** (c2 - j) for j in range(c2 + 1)]
    total = mpmath.mpf(0)
    for j1 in range(c1 + 1):
        l1 = (2 * j1 - c1) * e1
        for j2 in range(c2, -1, -1):
            loss = l1 + (2 * j2 - c2) * e2
            if loss <= eps:
                break
            total += w1[j1] * w2[j2] * (1 - mpmath.exp(eps - loss))
    a = (1 - mpmath.mpf(d1)) ** c1 * (1 - mpmath.mpf(d2)) ** c2
    return 1 - a + a * total


def _ledger(terms):
    return [((ApproximateDP(epsilon=e, delta=d) if d else PureDP(epsilon=e)), c) for e, d, c in terms]


@pytest.mark.parametrize(
    "terms,delta",
    [
        (((0.069, 0.0, 300), (math.sqrt(2) / 10, 0.0, 200)), 1e-6),
        (((0.586, 0.0, 40), (1.657, 1e-12, 25)), 1e-9),  # a sweep fallback (seed 1)
        (((0.01 * math.pi, 1e-10, 500), (0.05, 0.0, 120)), 1e-3),
    ],
)
def test_incommensurate_atom_ledgers_contain_exact(terms, delta):
    b = ConnectDotsAccountant().compose(_ledger(terms)).epsilon(delta)
    assert "fallback" not in b.details, b.details
    assert b.upper - b.lower <= 2 * max(1e-3 * b.upper, 5e-5), b
    # delta(eps) is non-increasing: the exact epsilon lies in [lower, upper] iff these two hold
    assert _two_binary_delta_mp(b.upper, terms) <= delta
    assert _two_binary_delta_mp(b.lower, terms) >= delta


@settings(max_examples=scaled(12), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    e1=st.floats(0.01, 1.5),
    e2=st.floats(0.01, 1.5),
    c1=st.integers(2, 150),
    c2=st.integers(2, 150),
    log_delta=st.floats(-10, -2),
)
def test_random_two_epsilon_ledgers_contain_exact(e1, e2, c1, c2, log_delta):
    terms = ((e1, 0.0, c1), (e2, 0.0, c2))
    delta = 10.0**log_delta
    b = ConnectDotsAccountant().compose(_ledger(terms)).epsilon(delta)
    assert _two_binary_delta_mp(b.upper, terms) <= delta * (1 + 1e-9)
    assert b.lower <= 0.0 or _two_binary_delta_mp(b.lower, terms) >= delta * (1 - 1e-9)


def test_randomized_response_with_subsampled_laplace_one_pass():
    """The sweep ledger (seed 1) that took 150 s: the dominance interval stalled 7.4 wide (epsilon 2969),
    then PRV. Now one pass, inside dp-accounting's optimistic and pessimistic estimates at a 1e-3 interval
    (2968.33, 2970.36, measured once; see the peers test below for the live comparison)."""
    rr = RandomizedResponse(noise_parameter=0.43810407389966555, num_buckets=9)
    sl = PoissonSampled(mechanism=Laplace(scale=20.91937495521402), sampling_rate=0.010601911431897471)
    b = ConnectDotsAccountant().compose(rr, 1859).compose(sl, 1447).epsilon(7.816702928133526e-08)
    assert "fallback" not in b.details and b.details["passes"] == 1, b.details
    assert b.upper - b.lower <= 2e-3 * b.upper
    assert b.lower >= 2968.33 and b.upper <= 2970.36


@pytest.mark.peers
def test_randomized_response_with_subsampled_laplace_between_dp_accounting_estimates():
    pl = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    rr = RandomizedResponse(noise_parameter=0.3, num_buckets=4)
    sl = PoissonSampled(mechanism=Laplace(scale=3.0), sampling_rate=0.05)
    delta = 1e-7
    b = ConnectDotsAccountant().compose(rr, 300).compose(sl, 500).epsilon(delta)
    assert "fallback" not in b.details, b.details
    est = {}
    for pessimistic in (True, False):
        kw = dict(value_discretization_interval=2e-4, pessimistic_estimate=pessimistic)
        a = pl.from_randomized_response(noise_parameter=0.3, num_buckets=4, **kw).self_compose(300)
        c = pl.from_laplace_mechanism(parameter=3.0, sensitivity=1, sampling_prob=0.05, **kw).self_compose(500)
        est[pessimistic] = a.compose(c).get_epsilon_for_delta(delta)
    assert est[False] <= b.upper and b.lower <= est[True], (b, est)


def test_commensurate_ledgers_keep_the_exact_lattice():
    """Atoms on one lattice (0.1 and 0.3) are not composed first: the grid holds them all."""
    acc = ConnectDotsAccountant().compose([(PureDP(epsilon=0.1), 400), (PureDP(epsilon=0.3), 100)])
    assert not any(isinstance(loss, SelfComposedAtoms) for terms in acc._directions() for loss, _ in terms)
    acc = ConnectDotsAccountant().compose([(PureDP(epsilon=0.1), 400), (PureDP(epsilon=0.1 * math.e), 100)])
    assert all(isinstance(loss, SelfComposedAtoms) for terms in acc._directions() for loss, _ in terms)


def test_atom_lattice():
    assert atom_lattice([-0.5, 0.0, 0.5]) == (0.5, (0, 1, 2))
    g, m = atom_lattice([-0.3, 0.1, 0.3])
    assert m == (0, 2, 3) and g == pytest.approx(0.2)
    assert atom_lattice([0.0, 1.0, math.pi]) is None
    assert atom_lattice([2.5]) == (1.0, (0,))


@pytest.mark.parametrize("c", [1, 2, 7, 40])
def test_convolution_power_relative_error_within_its_count(c):
    """Against exact rational arithmetic: every entry within the certified relative factor."""
    rng = np.random.default_rng(c)
    base = rng.uniform(0.01, 1.0, size=3)
    base /= base.sum()
    out, g, lead = convolution_power(base, c, 4 * 2.0**-53)
    assert lead == 0 and out.size == 2 * c + 1
    exact = [Fraction(1)]
    fb = [Fraction(float(x)) for x in base]
    for _ in range(c):
        nxt = [Fraction(0)] * (len(exact) + 2)
        for i, a in enumerate(exact):
            for j, b in enumerate(fb):
                nxt[i + j] += a * b
        exact = nxt
    rel = g / (1 - g)
    for x, e in zip(out, exact):
        assert abs(Fraction(float(x)) - e) <= Fraction(rel) * e


def test_convolution_power_trimming_keeps_the_entries_above_the_floor():
    base = np.array([0.2, 0.5, 0.3])
    full, _, _ = convolution_power(base, 300)
    trimmed, _, lead = convolution_power(base, 300, floor=1e-200)
    assert lead > 0 and trimmed.size < full.size
    np.testing.assert_allclose(trimmed, full[lead : lead + trimmed.size], rtol=1e-12, atol=0)
    assert full[:lead].max() < 1e-150 * full.max()


@pytest.mark.parametrize("p0,p1,c", [(0.3, 0.7, 50), (0.4999, 0.5, 1000), (0.73, 0.27 - 1e-9, 100_000)])
def test_binomial_power_within_its_relative_error(p0, p1, c):
    """The ratio recurrence for two atoms (pure / approximate DP) against mpmath's binomial terms."""
    from tightdp.pld.atoms import _binomial_power

    w, rel, lead = _binomial_power(p0, p1, c)
    mpmath.mp.dps = 40
    for i in np.unique(np.linspace(0, w.size - 1, 25).astype(int)):
        j = lead + int(i)
        exact = mpmath.binomial(c, j) * mpmath.mpf(p1) ** j * mpmath.mpf(p0) ** (c - j)
        assert abs(mpmath.mpf(float(w[i])) - exact) <= mpmath.mpf(rel) * exact, (j, w[i], exact)
    assert rel < 1e-9


def test_long_pure_dp_run_mixed_with_laplace_is_fast_and_contains_the_stepwise_answer():
    """1e7 pure-DP steps composed first (binomial recurrence, was a 5.6 s convolution power) with Laplace on an
    incommensurate lattice: one pass."""
    b = ConnectDotsAccountant().compose([(PureDP(epsilon=0.01), 10**7), (Laplace(scale=math.pi), 100)]).epsilon(1e-6)
    assert "fallback" not in b.details and b.details["passes"] == 1
    assert b.upper - b.lower <= 2e-3 * b.upper
    assert 654.5 < b.lower < b.upper < 654.7


@settings(max_examples=scaled(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    log_odds=st.floats(-25.0, 25.0), log_d=st.floats(-16.0, -6.0), c=st.integers(1, 200_000), with_delta=st.booleans()
)
def test_random_binomial_powers_within_their_relative_error(log_odds, log_d, c, with_delta):
    """Any two-atom step (pure DP's e^eps odds up to e^25 either way; approximate DP's masses summing to 1 - d),
    any count: every kept term within the claimed factor of mpmath's, and the trimmed ends below 1e-280 of
    the largest."""
    from tightdp.pld.atoms import _TRIM, _binomial_power

    d = 10.0**log_d if with_delta else 0.0
    p1 = (1.0 - d) / (1.0 + math.exp(-log_odds))
    p0 = (1.0 - d) / (1.0 + math.exp(log_odds))
    w, rel, lead = _binomial_power(p0, p1, c)
    assert lead >= 0 and lead + w.size - 1 <= c and rel < 1e-8
    mpmath.mp.dps = 40
    exact = lambda j: mpmath.binomial(c, j) * mpmath.mpf(p1) ** j * mpmath.mpf(p0) ** (c - j)
    for i in np.unique(np.linspace(0, w.size - 1, 12).astype(int)):
        e = exact(lead + int(i))
        assert abs(mpmath.mpf(float(w[i])) - e) <= mpmath.mpf(rel) * e
    top = max(exact(lead + int(np.argmax(w))), mpmath.mpf(1e-300))
    for j in (lead - 1, lead + w.size):  # the first terms left out
        if 0 <= j <= c:
            assert exact(j) < 2 * _TRIM * top


@settings(max_examples=scaled(10), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    e1=st.floats(0.01, 1.5),
    e2=st.floats(0.01, 1.5),
    c1=st.integers(2, 120),
    c2=st.integers(2, 120),
    log_d1=st.floats(-15, -9),
    log_delta=st.floats(-8, -2),
)
def test_random_approximate_dp_two_term_ledgers_contain_exact(e1, e2, c1, c2, log_d1, log_delta):
    """As the pure-DP test above, with a mass at +inf in one term (approximate DP)."""
    terms = ((e1, 10.0**log_d1, c1), (e2, 0.0, c2))
    delta = 10.0**log_delta
    b = ConnectDotsAccountant().compose(_ledger(terms)).epsilon(delta)
    if math.isinf(b.upper):
        assert delta <= -math.expm1(c1 * math.log1p(-terms[0][1])) * (1 + 1e-3)
        return
    assert _two_binary_delta_mp(b.upper, terms) <= delta * (1 + 1e-9)
    assert b.lower <= 0.0 or _two_binary_delta_mp(b.lower, terms) >= delta * (1 - 1e-9)


@settings(max_examples=scaled(60), deadline=None)
@given(
    unit=st.floats(1e-3, 10.0), mult=st.lists(st.integers(1, 64), min_size=1, max_size=5), base=st.floats(-50.0, 50.0)
)
def test_atom_lattice_finds_integer_multiples(unit, mult, base):
    """Atoms at base + m_i * unit (m_i <= 64) always lie on a lattice whose unit divides every gap."""
    values = [base] + [base + m * unit for m in mult]
    lat = atom_lattice(values)
    assert lat is not None
    g, m = lat
    gaps = sorted(v - min(values) for v in values)
    for gap, mi in zip(gaps, sorted(m)):
        assert abs(gap - mi * g) <= 1e-8 * max(1.0, abs(gap))


def _trinomial_delta(eps: float, values: tuple[float, ...], probs: tuple[float, ...], count: int) -> float:
    """Exact ``delta(eps) = E_P[(1 - e^(eps - L))_+]`` of ``count`` compositions of a three-atom pair, by
    enumerating the trinomial counts (log-space weights, float sums of at most 1e5 non-negative terms)."""
    from scipy.special import gammaln

    n1, n2 = np.meshgrid(np.arange(count + 1), np.arange(count + 1), indexing="ij")
    ok = n1 + n2 <= count
    n1, n2 = n1[ok], n2[ok]
    n3 = count - n1 - n2
    logw = gammaln(count + 1) - gammaln(n1 + 1) - gammaln(n2 + 1) - gammaln(n3 + 1)
    logw = logw + n1 * math.log(probs[0]) + n2 * math.log(probs[1]) + n3 * math.log(probs[2])
    loss = n1 * values[0] + n2 * values[1] + n3 * values[2]
    return float(np.sum(np.exp(logw) * np.clip(-np.expm1(eps - loss), 0.0, None)))


def test_near_duplicate_atoms_are_no_lattice_and_compose():
    """Two atoms 1e-12 apart beside a third (an attained pair of report-noisy-max over three candidates with two
    tied ones) lie on no usable lattice: the 1e-9 relative test would take unit 1e-12 and offsets 1e11, and the
    grid refused (GridTooLargeError). Now the pair composes, and its interval holds the exact trinomial answer."""
    values = (0.06988542697786841, -0.04133150033483491, -0.04133150033598261)
    probs = (0.3846739817354772, 0.30766300922259426, 0.3076630090419288)
    assert atom_lattice(values) is None  # (was a lattice of unit 1.1e-12)
    assert atom_lattice((0.0, 0.1, 0.1 + 1e-7)) is None
    assert atom_lattice((0.0, 1e-4, 1.0)) == (1e-4, (0, 1, 10000))  # a fine but real lattice stays
    count, delta = 300, 1e-6
    b = ConnectDotsAccountant().compose(FinitePair(values=values, probs=probs), count).epsilon(delta)
    assert _trinomial_delta(b.upper, values, probs, count) <= delta * (1 + 1e-9)
    assert _trinomial_delta(b.lower, values, probs, count) >= delta * (1 - 1e-9)
    assert b.upper - b.lower <= 2e-3 * b.upper


def test_delta_above_the_total_variation_answers_zero_without_a_grid():
    """An atoms-only ledger whose composed total variation lies below delta has epsilon 0 exactly. A stream pair of
    the sparse vector technique far above the threshold (all mass at a loss of -3e-13, 1.4e-12 at 0.25) took 14 s
    on a mesh of 1.5e-7 for that answer; now no grid is built. Just above the bound the grid answers as before."""
    import time

    values = (-3.010924842783878e-13, 0.24999999999527742, 0.49076066491542814)
    probs = (0.9999999999986383, 1.3617981666529696e-12, 2.809567476815191e-23)
    pair = FinitePair(values=values, probs=probs)
    tv = sum(p * -math.expm1(-max(v, 0.0)) for v, p in zip(values, probs))
    t0 = time.perf_counter()
    b = ConnectDotsAccountant().compose(pair, 10).epsilon(1e-6)
    assert (b.lower, b.upper) == (0.0, 0.0) and time.perf_counter() - t0 < 1.0
    assert 10 * tv < 1e-10  # the composition's delta(0) is below the delta asked, so epsilon 0 is exact
    # pure DP at epsilon 1e-3: delta(0) = tanh(5e-4) per step; the bound decides on either side of it
    per_step = math.tanh(5e-4)
    assert ConnectDotsAccountant().compose(PureDP(epsilon=1e-3), 4).epsilon(4.01 * per_step).upper == 0.0
    above = ConnectDotsAccountant().compose(PureDP(epsilon=1e-3), 4).epsilon(3.9 * per_step)  # the grid's answer
    assert "delta(0)" not in str(above.details) and _pure_delta_mp(above.upper, 1e-3, 4) <= 3.9 * per_step * (1 + 1e-9)


def _pure_delta_mp(eps: float, e0: float, k: int) -> float:
    """delta(eps) of k compositions of epsilon-DP randomized response (Kairouz et al. 2015, Thm 3.3), mpmath."""
    mpmath.mp.dps = 30
    e0, eps = mpmath.mpf(e0), mpmath.mpf(eps)
    p = 1 / (1 + mpmath.exp(-e0))
    total = mpmath.mpf(0)
    for j in range(k + 1):
        loss = (2 * j - k) * e0
        if loss > eps:
            total += mpmath.binomial(k, j) * p**j * (1 - p) ** (k - j) * (1 - mpmath.exp(eps - loss))
    return float(total)


@settings(max_examples=scaled(25), deadline=None)
@given(
    p=st.lists(st.floats(0.02, 1.0), min_size=3, max_size=3),
    q=st.lists(st.floats(0.02, 1.0), min_size=3, max_size=3),
    count=st.integers(1, 30),
    factor=st.floats(0.3, 3.0),
)
def test_total_variation_shortcut_at_random_pairs(p, q, count, factor):
    """Random three-outcome pairs, delta on either side of the shortcut's bound ``count * delta_1(0)``: where the
    answer is 0 the exact composed delta(0) (trinomial enumeration) is below delta, and every upper end leaves
    the exact delta below delta."""
    pm, qm = np.array(p) / sum(p), np.array(q) / sum(q)
    values = tuple(float(v) for v in np.log(pm / qm))
    probs = tuple(float(x) for x in pm)
    tv1 = float(np.dot(pm, -np.expm1(-np.maximum(values, 0.0))))
    assume(tv1 > 1e-6)
    delta = min(0.5, factor * count * tv1)
    b = ConnectDotsAccountant().compose(FinitePair(values=values, probs=probs), count).epsilon(delta)
    if b.upper == 0.0:
        assert _trinomial_delta(0.0, values, probs, count) <= delta * (1 + 1e-9)
    assert _trinomial_delta(b.upper, values, probs, count) <= delta * (1 + 1e-9)

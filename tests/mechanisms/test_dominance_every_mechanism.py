"""Dominance for every mechanism: Laplace, subsampled Laplace, randomized response, pure
and approximate DP are discretised by the connect-the-dots / merge-to-the-grid constructions from
closed-form cell masses, without the PRV fallback, and their intervals contain exact references.

References are exact enumerations (pure DP and randomized response compose as binomials, computed
here with mpmath) and the PRV accountant (certified by coupling, an independent construction).
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from _support import scaled
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tightdp
from tightdp import ConnectDotsAccountant, Laplace, PoissonSampled, PRVAccountant, PureDP, RandomizedResponse
from tightdp.losses import LaplaceLoss, PoissonLaplaceLoss
from tightdp.pld.dominance import supports_dominance


def _binary_delta_mp(eps: float, r: float, p_hi: float, k: int) -> float:
    """delta(eps) of k compositions of the pair with atoms -r (P-mass 1 - p_hi) and r (P-mass p_hi):
    E_P[(1 - e^(eps - L))_+] over the binomial number of +r atoms (exact, 50 digits)."""
    mpmath.mp.dps = 50
    total = mpmath.mpf(0)
    for j in range(k + 1):
        loss = (2 * j - k) * mpmath.mpf(r)
        if loss <= eps:
            continue
        w = mpmath.binomial(k, j) * mpmath.mpf(p_hi) ** j * (1 - mpmath.mpf(p_hi)) ** (k - j)
        total += w * (1 - mpmath.exp(mpmath.mpf(eps) - loss))
    return float(total)


def _binary_epsilon_mp(delta: float, r: float, p_hi: float, k: int) -> float:
    lo, hi = 0.0, k * r
    if _binary_delta_mp(0.0, r, p_hi, k) <= delta:
        return 0.0
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if _binary_delta_mp(mid, r, p_hi, k) > delta else (lo, mid)
    return hi


@pytest.mark.parametrize(
    "loss", [LaplaceLoss(r=1.0), PoissonLaplaceLoss(0.1, 1.0, "remove"), PoissonLaplaceLoss(0.1, 1.0, "add")]
)
def test_closed_form_cells_match_cdf_differences(loss):
    lo, hi = loss.support()
    e = np.arange(math.floor(lo / 1e-3) - 1, math.ceil(hi / 1e-3) + 2) * 1e-3
    _, _, P, _, _ = loss.cell_masses(e)
    Q, _ = loss.q_cell_masses(e)
    assert np.allclose(P, np.diff(loss.cdf(e)), rtol=0, atol=1e-15)
    assert np.allclose(Q, np.diff(loss.q_cdf(e)), rtol=0, atol=1e-15)
    mid = 0.5 * (e[1:] + e[:-1])
    assert np.allclose(Q, P * np.exp(-mid), rtol=2e-3, atol=1e-15)  # Q = e^-L dP, cell by cell


@settings(max_examples=scaled(15), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(eps0=st.floats(0.05, 2.0), k=st.integers(1, 60), delta=st.sampled_from([1e-3, 1e-6, 1e-10]))
def test_pure_dp_composition_contains_exact_binomial(eps0, k, delta):
    b = ConnectDotsAccountant().compose(PureDP(epsilon=eps0), k).epsilon(delta)
    assert "fallback" not in b.details
    exact = _binary_epsilon_mp(delta, eps0, 1.0 / (1.0 + math.exp(-eps0)), k)
    assert b.lower <= exact + 1e-9 and exact <= b.upper + 1e-9, (b, exact)
    assert b.upper - b.lower <= 2 * max(1e-3 * b.upper, 5e-5) + 1e-9  # the default: relative 1e-3


def test_randomized_response_without_fallback():
    rr = RandomizedResponse(noise_parameter=0.5, num_buckets=2)  # binary: ratio 3
    b = ConnectDotsAccountant().compose(rr, 20).epsilon(1e-6)
    assert "fallback" not in b.details
    exact = _binary_epsilon_mp(1e-6, math.log(3.0), 0.75, 20)
    assert b.lower <= exact <= b.upper


def _approx_dp_delta_mp(eps: float, eps0: float, delta0: float, k: int) -> mpmath.mpf:
    """Kairouz et al. (2015) Thm 3.3: delta(eps) of k-fold (eps0, delta0)-DP, the binomial sum over the
    number of +eps0 atoms (the mass delta0 at +inf composes to 1 - (1 - delta0)^k), in 40 digits. Only the
    terms with loss above eps are summed, so it is fast where eps is far in the tail."""
    mpmath.mp.dps = 40
    e0, d0 = mpmath.mpf(eps0), mpmath.mpf(delta0)
    p_hi = 1 / (1 + mpmath.exp(-e0))
    j0 = max(0, math.floor((k + eps / eps0) / 2) - 2)
    total = mpmath.mpf(0)
    w = mpmath.binomial(k, j0) * p_hi**j0 * (1 - p_hi) ** (k - j0)
    for j in range(j0, k + 1):
        loss = (2 * j - k) * e0
        if loss > eps:
            total += w * (1 - mpmath.exp(mpmath.mpf(eps) - loss))
        w = w * (k - j) / (j + 1) * p_hi / (1 - p_hi)
    a = (1 - d0) ** k
    return 1 - a + a * total


@pytest.mark.parametrize(
    "eps0,delta0,k,delta",
    [
        (0.01, 1e-7, 10_000, 1e-2),
        (0.1, 0.0, 1000, 1e-6),
        (0.05, 1e-13, 20_000, 1e-8),
        (1.0, 1e-6, 300, 1e-3),
        (1.875, 1e-13, 301, 1e-10),  # epsilon 534 near the support top 564: fell back to PRV (the FFT hid the tail)
    ],
)
@pytest.mark.parametrize("route", ["grid", "composed atoms"])
def test_atom_ledgers_are_enumerated_exactly(eps0, delta0, k, delta, route, monkeypatch):
    """Pure and approximate DP compose on the coarsest lattice holding every atom, where both
    constructions are the exact composition: one pass, the exact epsilon (Kairouz et al.) inside, and
    the width only rounding and the delta slack. (The lower construction used to place an atom a mesh
    below its grid point when ``i * h`` rounded above it: a width growing like ``k h``, 8 passes, 23 s.)
    By default a ledger whose composed atoms near the answer are few is answered from them
    (``accountants._top_atoms``); with that off, the grid answers."""
    from tightdp.accountants._pld import PLDAccountant

    if route == "grid":
        monkeypatch.setattr(PLDAccountant, "_top_epsilon", lambda self, delta, out=None: out)
    mech = tightdp.ApproximateDP(epsilon=eps0, delta=delta0) if delta0 else PureDP(epsilon=eps0)
    b = ConnectDotsAccountant().compose(mech, k).epsilon(delta)
    assert "fallback" not in b.details
    if route == "grid" or b.details.get("method") != "exact composed atoms near the top":
        assert b.details["passes"] == 1, b.details
        assert b.details["mesh"] == pytest.approx(2 * eps0, rel=1e-12)  # atoms at +-eps0, the grid offset by -eps0
    else:
        assert b.upper - b.lower <= 1e-9 * (1 + b.upper), b
    assert b.upper - b.lower <= 2 * max(1e-3 * b.upper, 5e-5), b
    # delta(eps) is non-increasing: the exact epsilon lies in [lower, upper] iff these two hold
    assert _approx_dp_delta_mp(b.upper, eps0, delta0, k) <= delta
    assert _approx_dp_delta_mp(b.lower, eps0, delta0, k) >= delta


@settings(max_examples=scaled(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(eps0=st.floats(0.003, 2.0), log_d0=st.floats(-16, -8), k=st.integers(1, 30_000), log_delta=st.floats(-12, -2))
def test_random_approximate_dp_ledgers_contain_kairouz(eps0, log_d0, k, log_delta):
    """Random (eps0, delta0, k, delta) against the exact composition (Kairouz et al., mpmath): the true
    epsilon lies in the certified interval (or, where k delta0 reaches delta, the answer is infinite)."""
    delta0, delta = 10.0**log_d0, 10.0**log_delta
    b = ConnectDotsAccountant().compose(tightdp.ApproximateDP(epsilon=eps0, delta=delta0), k).epsilon(delta)
    inf_mass = -math.expm1(k * math.log1p(-delta0))
    if delta <= inf_mass * (1 + 1e-9):
        assert math.isinf(b.upper)
        return
    if math.isinf(b.upper):  # delta barely above the mass at +inf: epsilon is genuinely enormous
        assert delta <= inf_mass * (1 + 1e-3)
        return
    assert "fallback" not in b.details
    assert _approx_dp_delta_mp(b.upper, eps0, delta0, k) <= delta
    assert b.lower <= 0.0 or _approx_dp_delta_mp(b.lower, eps0, delta0, k) >= delta


def test_atom_ledger_on_a_common_lattice():
    """Different epsilons on one lattice (0.1 and 0.3) are still composed exactly in one pass."""
    ledger = [(PureDP(epsilon=0.1), 400), (tightdp.ApproximateDP(epsilon=0.3, delta=1e-10), 100)]
    b = ConnectDotsAccountant().compose(ledger).epsilon(1e-6)
    assert b.details["passes"] == 1 and b.details["mesh"] == pytest.approx(0.2, rel=1e-12)
    ref = PRVAccountant().compose(ledger).epsilon(1e-6)
    assert b.lower <= ref.upper and ref.lower <= b.upper and b.upper - b.lower <= 2e-3 * b.upper


@pytest.mark.parametrize(
    "ledger,delta",
    [
        ([(Laplace(scale=1.0), 3), (Laplace(scale=2.0), 2)], 1e-14),
        ([(Laplace(scale=20.0), 1000)], 1e-7),
        ([(PoissonSampled(mechanism=Laplace(scale=1.0), sampling_rate=0.1), 100)], 1e-14),
        ([(PoissonSampled(mechanism=Laplace(scale=1.0), sampling_rate=0.1), 100)], 1e-5),
        ([(tightdp.ApproximateDP(epsilon=0.1, delta=1e-8), 100)], 1e-5),
    ],
)
def test_laplace_family_is_narrow_and_meets_prv(ledger, delta):
    """These answered [0, inf] (delta 1e-14) or were 0.031 wide (1000 x Laplace(20))."""
    b = ConnectDotsAccountant().compose(ledger).epsilon(delta)
    assert math.isfinite(b.upper) and b.upper - b.lower <= 0.02 + 1e-9, b
    ref = PRVAccountant().compose(ledger).epsilon(delta)
    if math.isfinite(ref.upper):
        assert b.lower <= ref.upper and ref.lower <= b.upper, (b, ref)


def test_every_mechanism_has_a_dominance_discretisation():
    mechs = [
        Laplace(scale=1.0),
        RandomizedResponse(noise_parameter=0.3, num_buckets=4),
        PureDP(epsilon=1.0),
        tightdp.ApproximateDP(epsilon=1.0, delta=1e-6),
        PoissonSampled(mechanism=Laplace(scale=1.0), sampling_rate=0.2),
        PoissonSampled(mechanism=tightdp.Gaussian(noise_multiplier=1.0), sampling_rate=0.2),
        tightdp.SampledWithoutReplacement(
            mechanism=tightdp.Gaussian(noise_multiplier=1.0), sample_size=10, dataset_size=100
        ),
        tightdp.SampledWithReplacement(
            mechanism=tightdp.Gaussian(noise_multiplier=1.0), sample_size=10, dataset_size=100
        ),
    ]
    for m in mechs:
        pair = m.privacy_losses()
        assert supports_dominance(pair.remove) and supports_dominance(pair.add), type(m).__name__


@settings(max_examples=scaled(60), deadline=None)
@given(k=st.integers(1, 40), h=st.sampled_from([1e-3, 0.01, 0.1, 1 / 3]), shift=st.integers(-5, 5), data=st.data())
def test_atoms_land_in_their_cell_at_the_edges(k, h, shift, data):
    """Atoms binned into cells (e_i, e_(i+1)]: an atom on an edge, up to 1e-12 relative (rounding of
    ``i * h``), belongs to the cell below it, atoms at or below the first edge go 'below', above the last
    edge 'above'; nothing is lost or double-counted, each Q-mass is the P-mass times e^-v, and the
    reported edge error covers every atom moved onto an edge."""
    from tightdp.losses import DiscreteLoss

    edges = (np.arange(0, 41) + shift) * h
    # atoms on edges, just either side of them (rounding), between edges, and outside the grid
    idx = data.draw(st.lists(st.integers(-3, 43), min_size=1, max_size=6))
    frac = data.draw(st.lists(st.sampled_from([0.0, 0.5, 1e-9, 1e-14, -1e-14]), min_size=len(idx), max_size=len(idx)))
    values = tuple(float((i + shift) * h + f * h) for i, f in zip(idx, frac))
    probs = tuple(1.0 / len(values) for _ in values)
    loss = DiscreteLoss(values=values, probs=probs)
    below, above, P, _, edge_err = loss.cell_masses(edges)
    Q, _ = loss.q_cell_masses(edges)
    assert below + above + P.sum() == pytest.approx(1.0, abs=1e-15)
    want_p, want_q = np.zeros(edges.size - 1), np.zeros(edges.size - 1)
    want_below = want_above = 0.0
    moved = 0.0
    for v, p in zip(values, probs):
        near = int(np.argmin(np.abs(edges - v)))
        at = v
        if abs(edges[near] - v) <= 1e-12 * (1 + abs(v)):  # on an edge up to rounding
            moved, at = max(moved, abs(edges[near] - v)), edges[near]
        cell = np.flatnonzero((edges[:-1] < at) & (at <= edges[1:]))
        if at <= edges[0]:
            want_below += p
        elif at > edges[-1]:
            want_above += p
        else:
            assert cell.size == 1
            want_p[cell[0]] += p
            want_q[cell[0]] += p * math.exp(-v)
    assert below == pytest.approx(want_below, abs=1e-15) and above == pytest.approx(want_above, abs=1e-15)
    assert np.allclose(P, want_p, rtol=1e-15, atol=0) and np.allclose(Q, want_q, rtol=1e-14, atol=0)
    assert edge_err == moved


def test_safe_side_infinity_is_not_counted_by_lower_bounds():
    """Sampling with replacement sends its binomial tail (components below 1e-300) to +inf for the upper
    bound; those losses are finite, so the lower constructions must drop that mass, not count it (the
    group-privacy defect, in another mechanism)."""
    from tightdp.pld import discretise
    from tightdp.pld.dominance import dominated, dominating

    mech = tightdp.SampledWithReplacement(
        mechanism=tightdp.Gaussian(noise_multiplier=1.0), sample_size=600, dataset_size=60000
    )
    loss = mech.privacy_losses().remove
    assert loss.infinity_mass > 0 and not loss.infinity_is_exact
    assert dominating(loss, 0.01, 1e-12).infinity_mass >= loss.infinity_mass
    assert dominated(loss, 0.01, 1e-12).infinity_mass == 0.0
    assert discretise(loss, 0.01, 1e-12).truncated_mass >= loss.infinity_mass  # PRV's lower bound subtracts it
    exact_atom = tightdp.ApproximateDP(epsilon=1.0, delta=1e-6).privacy_losses().remove
    assert dominated(exact_atom, 0.01, 1e-12).infinity_mass == exact_atom.infinity_mass

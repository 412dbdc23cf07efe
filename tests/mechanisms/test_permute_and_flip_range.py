"""Permute-and-flip is ``eta``-bounded-range with ``eta = 2 log(2 e^(epsilon/2) - 1)`` and is dominated by
``CappedBoundedRangeLoss(eta, epsilon)`` (``tightdp.mechanisms.selection``'s docstring): checked against the
mechanism itself, enumerated over every candidate order, and against the two-point pairs ``T_t`` the cap allows."""

from __future__ import annotations

import itertools
import math

import mpmath
import numpy as np
import pytest
from _support import scaled
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate

from tightdp.mechanisms.basic import PureDP
from tightdp.mechanisms.selection import (
    BoundedRange,
    BoundedRangeLoss,
    CappedBoundedRangeLoss,
    ExponentialMechanism,
    PermuteAndFlip,
    ReportNoisyMax,
    SparseVector,
    bounded_range_parameters,
    permute_and_flip_range,
)
from tightdp.tuning import selection_epsilon


def _pf_law(scores: tuple[float, ...], eps: float) -> np.ndarray:
    """Permute-and-flip's output law (Delta = 1), by enumerating every order of the candidates."""
    top, k = max(scores), len(scores)
    out = np.zeros(k)
    orders = list(itertools.permutations(range(k)))
    for order in orders:
        stay = 1.0
        for i in order:
            acc = math.exp(eps * (scores[i] - top) / 2.0)
            out[i] += stay * acc / len(orders)
            stay *= 1.0 - acc
            if stay == 0.0:
                break
    return out


def _hockey(values, p, q, alpha: float) -> float:
    return float(np.sum(np.maximum(np.asarray(p) - alpha * np.asarray(q), 0.0)))


def _capped_curve(eta: float, cap: float, alpha: float) -> float:
    """``H_alpha`` of the capped pair from the docstring's formulas (atoms at +-cap, the BR density between), by
    quadrature: independent of the class's cell code."""
    big = math.exp(eta)
    q_atom = math.expm1(eta - cap) / math.expm1(eta)
    p_atom = math.exp(cap) * q_atom
    w = 2 * cap - eta
    val = p_atom * max(1 - alpha * math.exp(-cap), 0.0) + q_atom * max(1 - alpha * math.exp(cap), 0.0)
    if w > 0:
        dens = lambda l: math.sqrt(big) * math.exp(l / 2) / (2 * (big - 1)) * max(1 - alpha * math.exp(-l), 0.0)
        kink = [math.log(alpha)] if -w < math.log(alpha) < w else []
        val += integrate.quad(dens, -w, w, points=kink, epsabs=1e-15, epsrel=1e-12)[0]
    return val


def _t_curves(eta: float, t: np.ndarray, alpha: float) -> np.ndarray:
    """``H_alpha(T_t)`` for every ``t`` (the two-point pairs of ``two_point_pair``)."""
    p_hi = np.expm1(t * eta) * np.exp((1 - t) * eta) / math.expm1(eta)
    q_hi = p_hi * np.exp(-(1 - t) * eta)
    return np.maximum(p_hi - alpha * q_hi, 0) + np.maximum((1 - p_hi) - alpha * (1 - q_hi), 0)


def test_range_closed_form_and_bounds():
    for eps in (1e-12, 1e-4, 0.1, 1.0, 3.0, 40.0, 500.0):
        eta = permute_and_flip_range(eps)
        with mpmath.workdps(60):
            exact = 2 * mpmath.log(2 * mpmath.exp(mpmath.mpf(eps) / 2) - 1)
        assert eps <= eta <= 2 * eps
        assert eta >= exact * (1 - 1e-15) and eta <= exact * (1 + 1e-14) + 1e-300
    assert permute_and_flip_range(0.0) == 0.0


@settings(max_examples=scaled(40), deadline=None)
@given(
    eps=st.floats(0.05, 4.0),
    scores=st.lists(st.floats(-3.0, 3.0), min_size=2, max_size=5),
    moves=st.lists(st.floats(-1.0, 1.0), min_size=5, max_size=5),
)
def test_every_pair_of_outputs_has_log_odds_moving_by_at_most_eta(eps, scores, moves):
    """The theorem, on the mechanism: for neighbours (each score moved by at most Delta) the log ratios of the
    output laws range over at most eta."""
    p = _pf_law(tuple(scores), eps)
    q = _pf_law(tuple(s + m for s, m in zip(scores, moves, strict=False)), eps)
    keep = (p > 1e-300) & (q > 1e-300)
    loss = np.log(p[keep]) - np.log(q[keep])
    assert np.max(loss) - np.min(loss) <= permute_and_flip_range(eps) * (1 + 1e-9) + 1e-12
    assert np.max(np.abs(loss)) <= eps * (1 + 1e-9) + 1e-12  # and epsilon-DP


@pytest.mark.parametrize("eps", [0.1, 1.0, 2.5])
def test_the_swap_of_two_tied_candidates_attains_eta(eps):
    p, q = _pf_law((0.0, -1.0), eps), _pf_law((-1.0, 0.0), eps)
    loss = np.log(p / q)
    assert math.isclose(loss.max() - loss.min(), permute_and_flip_range(eps), rel_tol=1e-12)


@settings(max_examples=scaled(20), deadline=None)
@given(eta=st.floats(0.05, 6.0), share=st.floats(0.0, 1.0), frac=st.floats(-0.99, 0.99))
def test_capped_curve_is_the_supremum_over_the_allowed_two_point_pairs(eta, share, frac):
    cap = eta / 2 + share * eta / 2
    alpha = math.exp(frac * eta)
    t = np.linspace(1 - cap / eta, cap / eta, 200001)
    sup = float(np.max(_t_curves(eta, t, alpha)))
    curve = _capped_curve(eta, cap, alpha)
    assert sup <= curve + 1e-12 and curve - sup <= 1e-6


@settings(max_examples=scaled(30), deadline=None)
@given(
    eps=st.floats(0.05, 4.0),
    scores=st.lists(st.floats(-3.0, 3.0), min_size=2, max_size=4),
    moves=st.lists(st.floats(-1.0, 1.0), min_size=4, max_size=4),
    frac=st.floats(-1.2, 1.2),
)
def test_the_capped_pair_dominates_the_mechanism(eps, scores, moves, frac):
    """Every neighbouring pair of permute-and-flip (enumerated) has a hockey-stick divergence below the capped
    pair's, at alphas on both sides of 1, and below randomized response's at epsilon."""
    p = _pf_law(tuple(scores), eps)
    q = _pf_law(tuple(s + m for s, m in zip(scores, moves, strict=False)), eps)
    eta = permute_and_flip_range(eps)
    alpha = math.exp(frac * eps)
    curve = _capped_curve(eta, eps, alpha)
    for a, b in ((p, q), (q, p)):
        assert _hockey(None, a, b, alpha) <= curve + 1e-12
    rr = math.exp(eps) / (1 + math.exp(eps))
    assert curve <= max(rr - alpha * (1 - rr), 0) + max(1 - rr - alpha * rr, 0) + 1e-12


@pytest.mark.parametrize(("eta", "cap"), [(1.3, 1.0), (0.2, 0.1), (2.0, 2.0), (4.0, 2.5), (1.0, 0.5)])
def test_capped_loss_is_a_consistent_pair(eta, cap):
    loss = CappedBoundedRangeLoss(eta, cap)
    e = np.concatenate(([-cap - 0.5], np.linspace(-cap, cap, 401), [cap + 0.5]))
    assert np.allclose(loss.cdf(e) + loss.sf(e), 1.0, atol=1e-15)
    assert np.allclose(loss.q_cdf(e) + loss.q_sf(e), 1.0, atol=1e-15)
    below, above, P, _, _ = loss.cell_masses(e)
    Q, _ = loss.q_cell_masses(e)
    assert math.isclose(below + P.sum() + above, 1.0, rel_tol=1e-13)
    assert math.isclose(Q.sum(), 1.0, rel_tol=1e-13)
    mid = 0.5 * (e[1:] + e[:-1])
    inner = (mid > -(2 * cap - eta)) & (mid < 2 * cap - eta) & (P > 0)
    assert np.allclose(Q[inner], P[inner] * np.exp(-mid[inner]), rtol=5e-3)
    # partial mean against quadrature of the same law
    mean, _ = loss.partial_mean(-10.0, 10.0)
    q_atom = math.expm1(eta - cap) / math.expm1(eta)
    w = 2 * cap - eta
    cont = integrate.quad(lambda l: l * math.exp((l + eta) / 2) / (2 * math.expm1(eta)), -w, w)[0] if w > 0 else 0.0
    assert math.isclose(mean, cap * math.exp(cap) * q_atom - cap * q_atom + cont, rel_tol=1e-10, abs_tol=1e-14)
    # the atoms apart: P, Q and the per-edge atoms add up again
    P2, Q2, pa, qa, _ = loss.edge_atoms(e)
    assert math.isclose(P2.sum() + pa.sum(), P.sum(), rel_tol=1e-13)
    assert math.isclose(Q2.sum() + qa.sum(), Q.sum(), rel_tol=1e-13)


def test_capped_loss_reduces_to_its_two_ends():
    e = np.linspace(-1.4, 1.4, 57)
    full, br = CappedBoundedRangeLoss(1.3, 1.3), BoundedRangeLoss(1.3)
    assert np.allclose(full.cdf(e), br.cdf(e), atol=1e-15) and np.allclose(full.q_sf(e), br.q_sf(e), atol=1e-15)
    rr = CappedBoundedRangeLoss(1.0, 0.5)  # randomized response at 0.5
    assert math.isclose(float(rr.sf(np.array([0.0]))[0]), math.exp(0.5) / (1 + math.exp(0.5)), rel_tol=1e-14)
    with pytest.raises(ValueError, match="cap"):
        CappedBoundedRangeLoss(1.0, 0.4)


def test_bounded_range_parameters_name_each_mechanism():
    assert bounded_range_parameters(ExponentialMechanism(epsilon=0.7)) == (0.7, 0.7)
    assert bounded_range_parameters(BoundedRange(epsilon=0.3)) == (0.3, 0.3)
    assert bounded_range_parameters(ReportNoisyMax(epsilon=0.7)) == (0.7, 0.7)
    eta = permute_and_flip_range(0.7)
    assert bounded_range_parameters(PermuteAndFlip(epsilon=0.7)) == (eta, 0.7)
    assert bounded_range_parameters(ReportNoisyMax(epsilon=0.7, noise="exponential")) == (eta, 0.7)
    laplace = bounded_range_parameters(ReportNoisyMax(epsilon=0.7, noise="laplace"))  # (18/11) epsilon-BR
    assert laplace is not None and laplace[1] == 0.7 and laplace[0] == pytest.approx(18 * 0.7 / 11, rel=1e-15)
    for m in (SparseVector(epsilon=0.7), PureDP(epsilon=0.7)):
        assert bounded_range_parameters(m) is None


def test_composed_permute_and_flip_beats_pure_dp_and_keeps_its_attained_lower_end():
    pf = selection_epsilon(mechanism=PermuteAndFlip(epsilon=0.5), delta=1e-6, count=100)
    rnm = selection_epsilon(mechanism=ReportNoisyMax(epsilon=0.5, noise="exponential"), delta=1e-6, count=100)
    pure = selection_epsilon(mechanism=PureDP(epsilon=0.5), delta=1e-6, count=100)
    assert pf.upper == rnm.upper and pf.lower == rnm.lower
    assert pf.lower <= pf.upper < 0.93 * pure.upper
    assert "attained pair" in pf.details["lower_method"]
    one = selection_epsilon(mechanism=PermuteAndFlip(epsilon=1.0), delta=1e-3, count=1)
    assert one.lower <= one.upper <= 1.0


def _restricted_adaptive_delta(eta: float, cap: float, steps: int, eps: float) -> float:
    """sup over adaptive strategies of ``T_t`` steps with ``t`` in ``[1 - cap / eta, cap / eta]`` of delta(eps), by
    nested suprema over a fine grid of ``t`` (a lower estimate of the optimum, smooth in ``t``)."""
    t = np.linspace(1 - cap / eta, cap / eta, 1201)
    p = np.exp((1.0 - t) * eta) * np.expm1(t * eta) / math.expm1(eta)

    def value(m: int, x: np.ndarray) -> np.ndarray:
        if m == 0:
            return np.maximum(-np.expm1(-x), 0.0)
        up = value(m - 1, x[..., None] + (1.0 - t) * eta)
        down = value(m - 1, x[..., None] - t * eta)
        return np.max(p * up + (1.0 - p) * down, axis=-1)

    return float(value(steps, np.array([-eps]))[0])


@settings(max_examples=scaled(6), deadline=None)
@given(eta=st.floats(0.1, 3.0), share=st.floats(0.0, 0.9), delta=st.sampled_from([1e-2, 1e-4, 1e-6]))
def test_the_capped_program_bounds_the_capped_adaptive_optimum(eta, share, delta):
    from tightdp.mechanisms._bounded_range_adaptive import adaptive_bounded_range_epsilon

    cap = eta * (0.5 + 0.5 * share)
    b = adaptive_bounded_range_epsilon(eta, 2, delta, attained=False, cap=cap)
    free = adaptive_bounded_range_epsilon(eta, 2, delta, attained=False)
    assert b is not None and free is not None and b.lower == 0.0
    assert _restricted_adaptive_delta(eta, cap, 2, b.upper) <= delta * (1.0 + 1e-6)
    assert b.upper <= free.upper * (1 + 1e-12)


def test_the_capped_program_sits_between_the_extreme_pair_and_bounded_range_alone():
    """Permute-and-flip at epsilon 1, 100 uses: the restricted program's upper end lies above the extreme allowed
    pair composed (``T_t`` with loss epsilon, attained by no known data set but allowed by the proof) and below
    the program over every ``t``."""
    from tightdp.accountants.connect_dots import ConnectDotsAccountant
    from tightdp.mechanisms._bounded_range_adaptive import adaptive_bounded_range_epsilon
    from tightdp.mechanisms.selection import FinitePair, two_point_pair

    eps = 1.0
    eta = permute_and_flip_range(eps)
    b = selection_epsilon(mechanism=PermuteAndFlip(epsilon=eps), delta=1e-6, count=100)
    edge = two_point_pair(eta, 1 - eps / eta)
    fixed = ConnectDotsAccountant().compose(FinitePair(values=edge.values, probs=edge.probs), 100).epsilon(1e-6)
    free = adaptive_bounded_range_epsilon(eta, 100, 1e-6, attained=False)
    assert free is not None
    assert fixed.lower <= b.upper < free.upper * 0.995
    assert b.upper <= fixed.upper * 1.002  # the extreme pair is nearly the worst strategy here


def test_cap_is_validated():
    from tightdp.mechanisms._bounded_range_adaptive import adaptive_bounded_range_epsilon

    with pytest.raises(ValueError, match="cap"):
        adaptive_bounded_range_epsilon(1.0, 5, 1e-6, attained=False, cap=0.4)
    with pytest.raises(ValueError, match="attained"):
        adaptive_bounded_range_epsilon(1.0, 5, 1e-6, attained=True, cap=0.8)

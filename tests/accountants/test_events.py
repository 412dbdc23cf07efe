"""The composed events' lower ends (``accountants._events``): the union (the step bounds) and the intersection (the
PLD accountants' top-mass lower end) against mpmath evaluated at the very inputs, so a float rounded the wrong way, or
a Q-mass that underflowed and was read as an upper bound, fails; and ``event_masses`` at an array of thresholds
against one threshold at a time."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from _support import scaled
from hypothesis import given, settings
from hypothesis import strategies as st

from tightdp.accountants._events import StepEvent, event_delta_lower, event_epsilon_lower
from tightdp.mechanisms import (
    DiscreteGaussian,
    Gaussian,
    GroupPoissonSampled,
    Laplace,
    PoissonSampled,
    SampledWithReplacement,
)

M = mpmath.mpf
DPS = 80  # (set per reference: other modules change mpmath's global precision)


def _q_ref(q: float, p: float, floor: float) -> mpmath.mpf:
    """The largest ``Q(E_i)`` the inputs allow: at most ``e^-floor P(E_i)`` at ``P(E_i) = p``, and at most ``q``
    where ``q`` is in the normal range (an underflowed one bounds nothing)."""
    ratio = mpmath.exp(-M(floor)) * M(p)
    return min(M(q), ratio) if q >= 1e-290 else ratio


def _union_ref(steps: list[tuple[float, float, float, float, float, int]], eps: float) -> mpmath.mpf:
    """``max(0, P(E) - e^eps Q(E))`` over the union and each step alone, in mpmath, at ``P = p``, ``P(E^c) = po``,
    ``Q = _q_ref``, ``Q(E^c) = qo``."""
    with mpmath.workdps(DPS):
        return _union_ref_mp(steps, eps)


def _union_ref_mp(steps, eps):
    ps = [(M(p), M(po), c) for p, q, po, qo, f, c in steps]
    qs = [(_q_ref(q, p, f), M(qo), c) for p, q, po, qo, f, c in steps]

    def union(side):
        return mpmath.fprod((a + b) ** c for a, b, c in side) - mpmath.fprod(b**c for _, b, c in side)

    def alone(side, j):
        a, b, c = side[j]
        rest = mpmath.fprod((x + y) ** k for i, (x, y, k) in enumerate(side) if i != j)
        return a * (a + b) ** (c - 1) * rest

    cands = [(union(ps), union(qs))] + [(alone(ps, j), alone(qs, j)) for j in range(len(steps))]
    return max([M(0)] + [p - mpmath.exp(M(eps)) * q for p, q in cands])


def _intersection_ref(steps, eps: float) -> mpmath.mpf:
    """``max(0, P - e^eps Q, P (1 - e^(eps - T)))`` for the intersection, in mpmath."""
    with mpmath.workdps(DPS):
        return _intersection_ref_mp(steps, eps)


def _intersection_ref_mp(steps, eps):
    p = mpmath.fprod(M(s[0]) ** s[5] for s in steps)
    q = mpmath.fprod(_q_ref(s[1], s[0], s[4]) ** s[5] for s in steps)
    t = mpmath.fsum(M(s[4]) * s[5] for s in steps)
    return max(M(0), p - mpmath.exp(M(eps)) * q, p * (1 - mpmath.exp(M(eps) - t)))


def _events(rows):
    """``StepEvent``s from per-epsilon rows ``[(p, q, po, qo, floor, count) per step]``."""
    k = len(rows[0])
    return [StepEvent(*(np.array([r[i][f] for r in rows]) for f in range(5)), rows[0][i][5]) for i in range(k)]


@st.composite
def _step(draw, eps: float, count: int):
    """A step's masses at threshold ``eps``: ``P(E)`` somewhat above ``e^eps Q(E)``; sometimes ``q`` underflowed
    (0 or subnormal) or the complement's masses off 1, and the floor just below ``eps``."""
    p = draw(st.floats(1e-9, 0.6))
    po = (1.0 - p) * draw(st.floats(0.5, 1.0))
    gap = draw(st.floats(0.01, 30.0))
    q = draw(st.sampled_from([p * math.exp(-eps - gap), 0.0, 1e-310, p * math.exp(-eps - gap) * 1e-3]))
    qo = draw(st.floats(0.5, 1.2))
    return (p, q, po, qo, eps - 1e-9 * (1.0 + abs(eps)), count)


@st.composite
def _case(draw):
    eps = draw(st.lists(st.floats(-1.0, 40.0), min_size=1, max_size=4))
    counts = draw(st.lists(st.integers(1, 2000), min_size=1, max_size=3))
    rows = [[draw(_step(e, c)) for c in counts] for e in eps]
    return np.array(eps), rows


@settings(max_examples=scaled(150), deadline=None)
@given(case=_case())
def test_the_union_is_never_above_its_exact_value(case):
    """Without the charges for rounding (``_composed_masses``, ``_hockey_stick``) some lower end exceeds the exact
    value of its own formula; without ``_q_upper`` an underflowed ``q`` reads as ``Q(E) = 0``."""
    eps, rows = case
    out = event_delta_lower(_events(rows), eps, "union")
    for e, row, lo in zip(eps, rows, out):
        ref = _union_ref(row, float(e))
        assert lo <= ref, (lo, ref)
        if all(step[1] >= 1e-290 for step in row):  # (an underflowed q is replaced by e^-floor (1 - p_out): looser)
            assert lo >= ref * (1 - 1e-9) - 1e-300  # and tight: rounding only


@settings(max_examples=scaled(150), deadline=None)
@given(case=_case())
def test_the_intersection_is_never_above_its_exact_value(case):
    eps, rows = case
    out = event_delta_lower(_events(rows), eps, "intersection")
    for e, row, lo in zip(eps, rows, out):
        ref = _intersection_ref(row, float(e))
        assert lo <= ref, (lo, ref)
        if all(step[1] >= 1e-290 for step in row):
            assert lo >= ref * (1 - 1e-9) - 1e-300


@settings(max_examples=scaled(150), deadline=None)
@given(
    tops=st.lists(
        st.tuples(st.floats(0.01, 1000.0), st.floats(1e-6, 1.0), st.integers(1, 300)), min_size=1, max_size=3
    ),
    delta=st.floats(1e-300, 0.999),
)
def test_the_intersections_epsilon_is_never_above_the_exact_root(tops, delta):
    """``event_epsilon_lower`` as the top-mass lower end uses it (no Q-masses, each step's floor ``x``): the exact
    root ``T + log(1 - delta / P)``; without its rounding charges the float root exceeds it about half the time."""
    steps = [
        StepEvent(np.array([p]), np.array([math.inf]), np.zeros(1), np.array([math.inf]), np.array([x]), c)
        for x, p, c in tops
    ]
    out = event_epsilon_lower(steps, delta)
    with mpmath.workdps(DPS):
        p = mpmath.fprod(M(p) ** c for _, p, c in tops)
        t = mpmath.fsum(M(x) * c for x, _, c in tops)
        ref = max(M(0), t + mpmath.log(1 - M(delta) / p)) if p > delta else M(0)
    assert out <= ref, (out, ref)
    assert out >= ref - 1e-12 * (1 + abs(ref))


@pytest.mark.parametrize("event", ["union", "intersection"])
@pytest.mark.parametrize("eps", [999.0, 1.0])
def test_an_underflowed_q_mass_is_not_an_upper_bound(event, eps):
    """A Laplace step of epsilon 1000 at threshold 999: ``Q(E) = e^-1000 / 2`` computes as 0. Read as an upper bound
    it gives ``delta(999) >= P(E) = 0.70`` against the exact ``1 - e^(-1/2) = 0.39``; ``e^-floor (1 - p_out)`` is
    used instead. (At 999 the absolute ``1e-300`` charged to Q-masses alone would catch it; a Q-mass of 0 at
    threshold 1, as if underflowed, is caught only by the floor: ``P(E) - e^eps Q(E) <= P(E) (1 - e^(eps - floor))``,
    about 0, not ``P(E)``.)"""
    t = np.array([eps])
    p = -math.expm1(-0.5) / 2 + 0.5 if eps > 1.0 else 0.5  # P(L > 999) = 1 - e^-0.5 / 2
    step = StepEvent(np.array([p]), np.zeros(1), np.array([1.0 - p]), np.ones(1), t - 1e-9 * (1.0 + eps), 1)
    out = event_delta_lower([step], t, event)
    assert 0.0 <= out[0] <= (-math.expm1(-0.5) if eps > 1.0 else 1e-8)


def test_the_top_mass_lower_end_of_a_laplace_step():
    """5021f7c's case through the shared routine: a Laplace step of epsilon 1000 at delta 0.3, exactly 999.287."""
    from tightdp import PRVAccountant

    lo = PRVAccountant().compose(Laplace(scale=1e-3))._top_mass_lower(0.3)
    assert 999.08 < lo <= 1000.0 + math.log1p(-0.3 / 0.5)


@pytest.mark.parametrize(
    "mech",
    [
        Gaussian(noise_multiplier=1.3),
        Laplace(scale=0.7),
        PoissonSampled(mechanism=Gaussian(noise_multiplier=0.8), sampling_rate=0.05),
        PoissonSampled(mechanism=Laplace(scale=1e-3), sampling_rate=1e-9),
        SampledWithReplacement(mechanism=Gaussian(noise_multiplier=0.5), sample_size=1, dataset_size=10**9),
        GroupPoissonSampled(noise_multiplier=2.0, sampling_rate=0.3, group_size=4),
        DiscreteGaussian(sigma=1.5),
    ],
)
def test_event_masses_at_many_thresholds_are_those_at_each(mech):
    """One call at every threshold (the step bounds' batch) answers as one call per threshold did, outside the
    support too: up to the order of a mixture's sums, and the numerical inversion of a general mixture's loss, whose
    iterations run on the whole array (the output, and so the event, moves by about an ulp; near a loss of 0 behind a
    rate of 1e-9 the output is ill-conditioned, and both calls' events are certified but differ)."""
    ts = np.array([-1e3, -5.0, -0.3, 0.0, 1e-3, 0.4, 2.0, 30.0, 999.0, 1e3])
    pair = mech.privacy_losses()
    for loss in (pair.remove, pair.add):
        many = loss.event_masses(ts)
        assert many is not None
        for j, t in enumerate(ts):
            one = loss.event_masses(np.array([t]))
            assert one is not None
            for a, b in zip(many, one):
                assert a.shape == ts.shape and b.shape == (1,)
                assert a[j] == pytest.approx(b[0], rel=1e-12, abs=1e-300)

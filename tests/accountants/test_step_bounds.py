"""Each step alone bounds a composition's delta (``accountants._step_bounds``): total variation above, tail events
below. Checked against closed forms and mpmath, exact enumeration of finite pairs, and the grids; and the corners a
fuzz found where these bounds, or the grids' window and mesh choices, turned minutes into milliseconds."""

from __future__ import annotations

import itertools

import mpmath
import numpy as np
import pytest
from _support import mixture_delta_mp, scaled
from hypothesis import given, settings
from hypothesis import strategies as st

from tightdp import ConnectDotsAccountant
from tightdp.accountants._pld import PLDAccountant
from tightdp.accountants._step_bounds import step_delta_bounds
from tightdp.mechanisms import (
    Gaussian,
    GroupPoissonSampled,
    Laplace,
    PoissonSampled,
    SampledWithReplacement,
)
from tightdp.mechanisms._finite_pairs import FinitePair

MPMATH_DPS = 50


def _steps(mech, k, eps):
    acc = ConnectDotsAccountant().compose(mech, k)
    return step_delta_bounds(PLDAccountant._directions(acc), np.asarray(eps, float))


@pytest.mark.parametrize(
    "mech, exact",
    [
        (Gaussian(noise_multiplier=2.0), lambda: 2 * mpmath.ncdf(0.25) - 1),
        (Laplace(scale=2.0), lambda: 1 - mpmath.exp(-0.25)),
        (PoissonSampled(mechanism=Laplace(scale=0.5), sampling_rate=0.01), lambda: 0.01 * (1 - mpmath.exp(-1))),
        (
            PoissonSampled(mechanism=Gaussian(noise_multiplier=0.7), sampling_rate=0.02),
            lambda: mpmath.mpf(0.02) * (2 * mpmath.ncdf(1 / (2 * mpmath.mpf(0.7))) - 1),
        ),
        (
            SampledWithReplacement(mechanism=Gaussian(noise_multiplier=0.5), sample_size=1, dataset_size=10**9),
            lambda: mpmath.mpf(1) / 10**9 * (2 * mpmath.ncdf(2) - 1),
        ),
        (
            GroupPoissonSampled(noise_multiplier=2.0, sampling_rate=0.3, group_size=4),
            lambda: mixture_delta_mp(
                [(i, mpmath.binomial(4, i) * mpmath.mpf(0.3) ** i * mpmath.mpf(0.7) ** (4 - i)) for i in range(5)],
                [(0, 1)],
                2.0,
                0.0,
            ),
        ),
    ],
)
def test_total_variation_of_one_step_bounds_the_exact_one_tightly(mech, exact):
    pair = mech.privacy_losses()
    truth = exact()
    for loss in (pair.remove, pair.add):
        tv = loss.total_variation()
        # (a mixture's: plus the loss's rounding where it is 0, 64u absolute, and the sum's)
        assert truth <= tv <= truth * (1 + 1e-9) + 2e-14


@settings(max_examples=scaled(40), deadline=None)
@given(
    values=st.lists(st.floats(-3.0, 3.0), min_size=1, max_size=4),
    weights=st.lists(st.floats(1e-6, 1.0), min_size=4, max_size=4),
    k=st.integers(1, 3),
    eps=st.sampled_from([0.0, 0.3, 1.0, 2.5]),
)
def test_step_bounds_contain_the_exact_delta_of_finite_pairs(values, weights, k, eps):
    """The composed atoms enumerated in mpmath (the pair's Q-masses are P's times e^-loss, summing to about 1)."""
    w = weights[: len(values)]
    probs = [x / sum(w) for x in w]
    mech = FinitePair(values=tuple(values), probs=tuple(probs))
    lo, up = _steps(mech, k, [eps])
    exact = mpmath.mpf(0)
    for combo in itertools.product(range(len(values)), repeat=k):
        loss = mpmath.fsum(mpmath.mpf(values[i]) for i in combo)
        prob = mpmath.fprod(mpmath.mpf(probs[i]) for i in combo)
        if loss > eps:
            exact += prob * (1 - mpmath.exp(eps - loss))
    assert lo[0] <= exact * (1 + mpmath.mpf(1e-14)) and exact <= up[0] * (1 + mpmath.mpf(1e-14))


@settings(max_examples=scaled(10), deadline=None)
@given(sigma=st.floats(0.4, 3.0), q=st.floats(1e-4, 0.5), k=st.integers(1, 50))
def test_step_bounds_meet_the_grids_on_dpsgd(sigma, q, k):
    """Two certified constructions (each step alone; the dominance grids, run without the steps' bounds) must
    intersect at every epsilon."""
    mech = PoissonSampled(mechanism=Gaussian(noise_multiplier=sigma), sampling_rate=q)
    eps = np.array([0.0, 0.5, 2.0])
    lo, up = _steps(mech, k, eps)
    grid = ConnectDotsAccountant().compose(mech, k)._delta_dominance(eps)
    assert np.all(lo <= grid.upper * (1 + 1e-12)) and np.all(grid.lower <= up * (1 + 1e-12))


def test_a_laplace_step_of_loss_1000_behind_a_rate_of_1e_9():
    """A fuzz corner: Laplace of scale 1e-3 Poisson-sampled at rate 1e-9, three steps. The step's loss reaches 979
    (beyond the cells' +-700): the grids refused and the PRV fallback ran for over 100 s, to answer [0, 1] at
    best. Now each step alone answers, with no grid: the mpmath truth lies within 1e-9 relative of ``3 q``, between
    the union of three rare events ``{x_i > 0.6}`` and three times a step's total variation."""
    q, b = mpmath.mpf(1) / 10**9, mpmath.mpf("0.001")
    mech = PoissonSampled(mechanism=Laplace(scale=0.001), sampling_rate=1e-9)
    eps = [0.0, 1.0, 100.0]
    out = ConnectDotsAccountant().compose(mech, 3).delta(eps)
    assert "fallback" not in out.details and out.details["method"].startswith("each step alone")
    p1 = q * (1 - mpmath.exp(-mpmath.mpf("0.4") / b) / 2) + (1 - q) * mpmath.exp(-mpmath.mpf("0.6") / b) / 2
    q1 = mpmath.exp(-mpmath.mpf("0.6") / b) / 2
    for e, lo, up in zip(eps, out.lower, out.upper):
        truth_lo = (1 - (1 - p1) ** 3) - mpmath.exp(e) * (1 - (1 - q1) ** 3)
        truth_hi = 3 * q * (1 - mpmath.exp(-1 / (2 * b)))
        assert lo <= truth_hi and truth_lo <= up
        assert up - lo <= 1e-8 * up
    # and epsilon at any delta above 3e-9 is 0, from the total variation alone
    assert ConnectDotsAccountant().compose(mech, 3).epsilon(1e-6).upper == 0.0


def test_sampling_with_replacement_once_in_a_billion_draws(monkeypatch):
    """A fuzz corner: one draw from 1e9 records, noise 0.5, three steps, delta at 0, 1 and 100: 94 s. The passes
    tilted towards each epsilon divided their slack by 1e3 at a time while the curve there was far below it (1e-31,
    or none at all), at a mesh the variance model set from the common outputs' loss (1e-9): 5 million cells a step.
    Now the next slack is sized from the estimate without the mass sent to +inf (or from the lower end), a pass in a
    ledger far from Gaussian spans at most 2^18 cells a step, and a pass whose upper end is the tilted FFT's error
    spends the whole estimate next. delta(0) had the lower end 1.06e-11: now a step's own total variation (the
    truth, 2.33e-9 by Monte Carlo, lies within a factor 2.5)."""
    from tightdp.accountants import connect_dots
    from tightdp.accountants._connect_dots_core import _PASS_CELLS
    from tightdp.pld import dominance

    s, q = mpmath.mpf("0.5"), mpmath.mpf(1) / 10**9
    passes, cells = [], []
    real_pass, real_cells = connect_dots.ConnectDotsAccountant._delta_pass, dominance._cells

    def counting(self, *args, **kwargs):
        passes.append(args[3])
        return real_pass(self, *args, **kwargs)

    def measuring(loss, h, tail):
        out = real_cells(loss, h, tail)
        cells.append(out[0].size)
        return out

    monkeypatch.setattr(connect_dots.ConnectDotsAccountant, "_delta_pass", counting)
    monkeypatch.setattr(dominance, "_cells", measuring)
    mech = SampledWithReplacement(mechanism=Gaussian(noise_multiplier=0.5), sample_size=1, dataset_size=10**9)
    out = ConnectDotsAccountant().compose(mech, 3).delta([0.0, 1.0, 100.0])
    assert len(passes) <= 6 and max(cells) <= _PASS_CELLS + 4
    d0 = mixture_delta_mp([(1, q), (0, 1 - q)], [(0, 1 - q), (-1, q)], s, 0.0)
    d1 = mixture_delta_mp([(1, q), (0, 1 - q)], [(0, 1 - q), (-1, q)], s, 1.0)
    # the composition's delta lies between one step's and three steps' sum (total variation is subadditive); the
    # lower end is one step's, less the rounding charged to masses of 1/2 (2e-14 absolute)
    assert d0 * (1 - 1e-4) <= out.lower[0] <= 3 * d0 and d0 <= out.upper[0] <= 3 * d0 * (1 + 1e-4)
    # at epsilon 1 the rare steps decide: about three times one step's delta (1.48e-31), within 2e-31
    assert 2.99 * d1 <= out.lower[1] <= 3 * d1 * (1 + 1e-6) and 3 * d1 * (1 - 1e-9) <= out.upper[1] <= 3 * d1 + 2e-31
    assert out.lower[2] == 0.0 and out.upper[2] <= 1e-280


@pytest.mark.parametrize("eps", [999.0, 990.0, 700.0, 300.0])
def test_an_underflowing_q_mass_never_lifts_the_lower_end_above_the_truth(eps):
    """A Laplace step of epsilon 1000: ``Q(L > 999) = e^-1000 / 2`` computed as 0, and the event's lower end read
    ``delta(999) >= P(L > 999) = 0.70`` against the exact ``1 - e^((eps - 1000) / 2) = 0.39``."""
    import math

    import numpy as np

    from tightdp import ConnectDotsAccountant, Laplace
    from tightdp.accountants._step_bounds import step_delta_bounds

    directions = ConnectDotsAccountant().compose(Laplace(scale=1e-3))._directions()
    lower, upper = step_delta_bounds(directions, np.array([eps]))
    assert lower[0] <= -math.expm1((eps - 1000.0) / 2.0) <= upper[0]


def test_a_fallback_answer_is_intersected_with_the_step_bounds(monkeypatch):
    """A rate of 1e-9 before a Laplace loss of 979, delta at 970: the grids fail, the steps' interval [0, 3e-9] is
    too wide to answer alone, and the PRV fallback's [0, 1] was the answer (after 35 s). The fallback is stubbed
    here with that answer: the result must be the intersection."""
    from tightdp import Laplace, PoissonSampled
    from tightdp.bounds import Bounds

    acc = ConnectDotsAccountant().compose(PoissonSampled(mechanism=Laplace(scale=1e-3), sampling_rate=1e-9), 3)

    def vacuous(self, delta, reason, *, epsilons=None):
        return Bounds(np.zeros(1), np.full(1, 0.5), np.ones(1), "delta", "bound", {"note": reason})

    monkeypatch.setattr(type(acc), "_fallback", vacuous)
    b = acc.delta(np.array([970.0]))
    assert b.lower[0] == 0.0 and 1.4e-9 < b.upper[0] <= 3.0000001e-9
    assert b.details["step_bounds"] == "intersected"

"""b-min-sep sampling (``MinSepSampling``, jax_privacy's ``BMinSepSampling``): validation, the exact renewal law
of the participation count against brute-force enumeration (with exact rationals), the reductions
(``min_sep = 1`` is Poisson sampling, ``p = 1`` with a warm start is balls-in-bins), and the interval against the
fixed-gradient pair's epsilon computed by brute force (all patterns, Monte Carlo over the Gaussian noise)."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from _support import scaled
from hypothesis import given, settings
from hypothesis import strategies as st

from tightdp.matrix import (
    BallsInBins,
    BandedToeplitz,
    BinaryTree,
    Identity,
    MinSepSampling,
    PoissonSampling,
    matrix_epsilon,
    sampler_from_dict,
)
from tightdp.matrix._min_sep import block_lengths
from tightdp.matrix._renewal import law_error, participation_law


# ---------------------------------------------------------------- brute force of the renewal process
def _pattern_probability(x: tuple[int, ...], p: Fraction, m: int, warm: bool) -> Fraction:
    """jax_privacy's definition: the last participation before the run at ``-m + k`` (warm start: ``k = 0`` with
    ``1 / (1 + (m - 1) p)``, ``k >= 1`` with ``p / (1 + (m - 1) p)``; cold: ``k = 0``); the next one at
    ``last + m - 1 + G``, ``G ~ Geom(p)`` on ``1, 2, ...``."""
    n = len(x)
    starts = {0: Fraction(1)}
    if warm and m > 1:
        z = 1 + (m - 1) * p
        starts = {k: (p if k else Fraction(1)) / z for k in range(m)}
    times = [t for t in range(n) if x[t]]
    total = Fraction(0)
    for k, pk in starts.items():
        last, prob = -m + k, pk
        for t in times:
            g = t - last - m + 1
            if g < 1:
                prob = Fraction(0)
                break
            prob *= p * (1 - p) ** (g - 1)
            last = t
        gap = n - last - m  # no participation at last + m - 1 + G < n, i.e. G <= n - last - m
        total += prob * ((1 - p) ** gap if gap > 0 else 1)
    return total


def _patterns(n: int, p: float, m: int, warm: bool) -> list[tuple[tuple[int, ...], Fraction]]:
    return [(x, _pattern_probability(x, Fraction(p), m, warm)) for x in itertools.product((0, 1), repeat=n)]


@settings(deadline=None, max_examples=scaled(30))
@given(st.integers(1, 9), st.floats(0.01, 1.0), st.integers(1, 5), st.booleans(), st.data())
def test_participation_law_matches_enumeration(n, p, m, warm, data):
    a = data.draw(st.integers(0, n))
    z = data.draw(st.integers(a, n))
    pats = _patterns(n, p, m, warm)
    assert sum(pr for _, pr in pats) == 1
    exact = [Fraction(0)] * (-(-(z - a) // m) + 1)
    for x, pr in pats:
        if pr:  # patterns closer than min_sep have probability 0
            exact[sum(x[a:z])] += pr
    law = participation_law(n, p, m, warm, a, z)
    assert law.size == len(exact)
    rho = Fraction(law_error(n, m))
    for v, e in zip(law, exact):  # every probability within relative law_error
        assert abs(Fraction(float(v)) - e) <= rho * e, (law, exact)


def test_stationary_start_keeps_every_step_at_the_stationary_rate():
    p, m, n = 0.3, 4, 12
    rate = p / (1 + (m - 1) * p)
    for s in range(n):
        assert participation_law(n, p, m, True, s, s + 1)[1] == pytest.approx(rate, rel=1e-12)
    assert participation_law(n, p, m, False, 0, 1)[1] == pytest.approx(p)


# ---------------------------------------------------------------- validation
@pytest.mark.parametrize(
    ("kw", "name"),
    [
        (dict(sampling_rate=0.0, min_sep=2), "sampling_rate"),
        (dict(sampling_rate=1.5, min_sep=2), "sampling_rate"),
        (dict(sampling_rate=float("nan"), min_sep=2), "sampling_rate"),
        (dict(sampling_rate=0.1, min_sep=0), "min_sep"),
        (dict(sampling_rate=0.1, min_sep=2.5), "min_sep"),
        (dict(sampling_rate=0.1, min_sep=2, warm_start="yes"), "warm_start"),
        (dict(sampling_rate=0.1, min_sep=2, warm_start=1), "warm_start"),
    ],
)
def test_bad_arguments_name_the_argument(kw, name):
    with pytest.raises(ValueError, match=name):
        MinSepSampling(**kw)


def test_round_trip_through_a_dict():
    for s in (
        MinSepSampling(sampling_rate=0.25, min_sep=8),
        MinSepSampling(sampling_rate=1, min_sep=3, warm_start=False),
    ):
        d = s.to_dict()
        assert d["type"] == "min_sep"
        assert sampler_from_dict(d) == s
    with pytest.raises(ValueError, match="min_sep"):
        sampler_from_dict({"type": "min_sep", "sampling_rate": 0.1, "min_sep": -1})
    with pytest.raises(ValueError, match="min_sep"):
        sampler_from_dict({"type": "min_sep", "sampling_rate": 0.1, "period": 3})


# ---------------------------------------------------------------- reductions
def test_min_sep_one_is_poisson_sampling():
    for warm in (True, False):
        ours = matrix_epsilon(
            strategy=Identity(),
            noise_multiplier=1.2,
            steps=60,
            delta=1e-5,
            sampler=MinSepSampling(sampling_rate=0.1, min_sep=1, warm_start=warm),
        )
        dpsgd = matrix_epsilon(
            strategy=Identity(), noise_multiplier=1.2, steps=60, delta=1e-5, sampler=PoissonSampling(sampling_rate=0.1)
        )
        assert ours.lower >= dpsgd.lower - 1e-12
        assert ours.upper <= dpsgd.upper + 1e-12
        assert ours.upper - ours.lower <= 0.01 * ours.upper  # DP-SGD is certified tightly


def test_identity_upper_end_is_poisson_dpsgd_at_the_same_rate():
    ours = matrix_epsilon(
        strategy=Identity(),
        noise_multiplier=1.0,
        steps=80,
        delta=1e-5,
        sampler=MinSepSampling(sampling_rate=0.1, min_sep=4),
    )
    dpsgd = matrix_epsilon(
        strategy=Identity(), noise_multiplier=1.0, steps=80, delta=1e-5, sampler=PoissonSampling(sampling_rate=0.1)
    )
    assert ours.upper == pytest.approx(dpsgd.upper, rel=1e-9)
    assert 0 < ours.lower < ours.upper
    assert "Poisson domination" in ours.details["upper"]


def test_rate_one_warm_start_is_balls_in_bins():
    c = np.array([1.0, 0.6, 0.3])
    c /= np.linalg.norm(c)
    strat = BandedToeplitz(c_col=c)
    ours = matrix_epsilon(
        strategy=strat, noise_multiplier=2.0, steps=40, delta=1e-5, sampler=MinSepSampling(sampling_rate=1, min_sep=5)
    )
    bins = matrix_epsilon(
        strategy=strat, noise_multiplier=2.0, steps=40, delta=1e-5, sampler=BallsInBins(cycle_length=5)
    )
    assert bins.lower - 1e-12 <= ours.lower <= ours.upper <= bins.upper + 1e-12


def test_rate_one_cold_start_is_one_deterministic_pattern():
    out = matrix_epsilon(
        strategy=Identity(),
        noise_multiplier=2.0,
        steps=20,
        delta=1e-5,
        sampler=MinSepSampling(sampling_rate=1, min_sep=5, warm_start=False),
    )
    assert out.upper == pytest.approx(out.lower, rel=1e-6)  # the Gaussian of sensitivity 2 = ||(1, 0, 0, 0, 0) x 4||


@pytest.mark.parametrize("strategy", [BinaryTree(), BandedToeplitz(c_col=np.array([0.8, -0.6]))])
def test_other_strategies_give_ordered_intervals(strategy):
    for warm in (True, False):
        out = matrix_epsilon(
            strategy=strategy,
            noise_multiplier=1.5,
            steps=32,
            delta=1e-5,
            sampler=MinSepSampling(sampling_rate=0.2, min_sep=3, warm_start=warm),
        )
        assert 0 < out.lower <= out.estimate <= out.upper < math.inf
        assert "lower" in out.details and "upper" in out.details


# ---------------------------------------------------------------- against the pair's epsilon by brute force
def _pair_delta(pats, c, sigma, eps, seed, samples=40_000):
    """Monte Carlo delta (both directions, the larger; with its standard error) of the record with a fixed unit
    gradient at every step: ``P = sum_x w_x N(C x, sigma^2 I)``, ``Q = N(0, sigma^2 I)`` (``c`` a scalar: ``C =
    c I``)."""
    xs = np.array([x for x, _ in pats], float)
    n = xs.shape[1]
    cm = c * np.eye(n) if np.ndim(c) == 0 else np.asarray(c, float)
    means = xs @ cm.T  # row i: C x_i
    lw = np.log(np.array([float(w) for _, w in pats]) + 1e-300)
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(samples, n)) * sigma

    def loss(y):
        a = lw + (y @ means.T - (means * means).sum(axis=1) / 2) / sigma**2
        m = a.max(axis=1, keepdims=True)
        return (m + np.log(np.exp(a - m).sum(axis=1, keepdims=True)))[:, 0]

    which = rng.choice(len(pats), p=np.exp(lw) / np.exp(lw).sum(), size=samples)
    l_p = loss(means[which] + z)
    l_q = loss(z)
    out = []
    for v in (-np.expm1(np.minimum(eps - l_p, 0.0)), -np.expm1(np.minimum(eps + l_q, 0.0))):
        out.append((float(v.mean()), float(v.std() / math.sqrt(samples))))
    return max(out)


@settings(deadline=None, max_examples=scaled(6))
@given(st.integers(4, 8), st.floats(0.1, 0.9), st.integers(1, 4), st.booleans(), st.floats(0.5, 2.0))
def test_banded_interval_contains_the_pair_epsilon(n, p, m, warm, sigma):
    """Two bands of either sign: the fixed-gradient pair's epsilon is at most the run's, so below the upper end;
    and at least the lower end (which post-processes that pair)."""
    delta = 0.1
    c_col = np.array([0.8, 0.6 if m % 2 else -0.6])
    strat = BandedToeplitz(c_col=c_col)
    out = matrix_epsilon(
        strategy=strat,
        noise_multiplier=sigma,
        steps=n,
        delta=delta,
        sampler=MinSepSampling(sampling_rate=p, min_sep=m, warm_start=warm),
    )
    assert 0 <= out.lower <= out.upper < math.inf
    pats = _patterns(n, p, m, warm)
    seed = int(1000 * n + 100 * m + 1000 * p)
    mean, se = _pair_delta(pats, strat.matrix(n), sigma, out.upper, seed)
    assert mean - 5 * se <= delta, (out, mean, se)
    if out.lower > 0:
        mean, se = _pair_delta(pats, strat.matrix(n), sigma, out.lower, seed + 1)
        assert mean + 5 * se >= delta, (out, mean, se)


@settings(deadline=None, max_examples=scaled(10))
@given(
    st.integers(2, 8),
    st.floats(0.05, 1.0),
    st.integers(1, 4),
    st.booleans(),
    st.floats(0.6, 3.0),
    st.floats(0.5, 1.0),
)
def test_interval_contains_the_pair_epsilon(n, p, m, warm, sigma, c):
    delta = 0.1
    out = matrix_epsilon(
        strategy=BandedToeplitz(c_col=np.array([c])),
        noise_multiplier=sigma,
        steps=n,
        delta=delta,
        sampler=MinSepSampling(sampling_rate=p, min_sep=m, warm_start=warm),
    )
    assert 0 <= out.lower <= out.upper < math.inf
    pats = _patterns(n, p, m, warm)
    seed = int(1000 * n + 100 * m + 1000 * p)
    mean, se = _pair_delta(pats, c, sigma, out.upper, seed)
    assert mean - 5 * se <= delta, (out, mean, se)  # the pair's delta at the upper end is at most delta
    if out.lower > 0:
        mean, se = _pair_delta(pats, c, sigma, out.lower, seed + 1)
        assert mean + 5 * se >= delta, (out, mean, se)  # and at least delta at the lower end


def test_block_lengths_cover_the_plain_split_and_stay_within_min_sep():
    assert block_lengths(64, 64, 2000)[0] == 1
    assert max(block_lengths(64, 64, 2000)) <= 64
    assert 63 in block_lengths(64, 64, 2000)  # two noise parts
    assert block_lengths(1, 1, 10) == [1]


def test_blocks_tighten_the_banded_upper_end():
    k = np.arange(1, 16)
    c = np.cumprod(np.r_[1.0, (2 * k - 1) / (2 * k)])
    out = matrix_epsilon(
        strategy=BandedToeplitz(c_col=c / np.linalg.norm(c)),
        noise_multiplier=4.0,
        steps=400,
        delta=1e-6,
        sampler=MinSepSampling(sampling_rate=1 / 16, min_sep=8),
    )
    # min_sep below the bands: participations share rows, so the count mixture pays K A and the blocks win
    # (at min_sep = 16 the count mixture wins: tests/matrix/test_min_sep_count_mixture.py)
    assert out.details["upper"].startswith("block noise splitting"), out.details
    assert 0 < out.lower < out.upper


def test_lower_end_survives_a_large_epsilon():
    """The rounding of the count's law is paid relatively (a tiny shift of the lower end), not as an additive
    delta multiplied by e^eps, so a large epsilon keeps a positive lower end."""
    out = matrix_epsilon(
        strategy=Identity(),
        noise_multiplier=1.0,
        steps=400,
        delta=1e-8,
        sampler=MinSepSampling(sampling_rate=0.5, min_sep=2),
    )
    assert out.lower > 50, out  # the count statistic alone certifies about 61
    assert out.lower <= out.upper


def test_many_band_back_substitution_matches_the_banded_solver(monkeypatch):
    import tightdp.matrix._min_sep_lower as lower

    kw = dict(
        strategy=BandedToeplitz(c_col=np.array([1.0, 0.5, 0.3, 0.2])),
        noise_multiplier=3.0,
        steps=120,
        delta=1e-6,
        sampler=MinSepSampling(sampling_rate=0.2, min_sep=6),
    )
    banded = matrix_epsilon(**kw)
    monkeypatch.setattr(lower, "BANDED_SOLVE_MAX", 0)
    back = matrix_epsilon(**kw)
    assert back.lower == pytest.approx(banded.lower, rel=1e-9)
    assert back.upper == banded.upper

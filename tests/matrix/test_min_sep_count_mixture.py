"""The count mixture upper end of b-min-sep sampling (``MinSepSampling``'s docstring, 3): sound against the exact
three-step run (its patterns enumerated from the renewal chain here, the release integrated by quadrature), and
far below the splitting bounds for BandMF with ``min_sep`` equal to the bands."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from _support import scaled
from hypothesis import given, settings
from hypothesis import strategies as st

from tightdp.matrix import BandedToeplitz, MinSepSampling, matrix_epsilon
from tightdp.matrix._min_sep import count_mixture
from tightdp.matrix.strategies import as_strategy


def _pattern_laws(n: int, p: float, min_sep: int, warm: bool) -> dict[tuple[int, ...], float]:
    """Every participation pattern of the renewal chain and its probability, by enumerating the coins."""
    starts = (
        [(0, 1.0 / (1 + (min_sep - 1) * p))] + [(d, p / (1 + (min_sep - 1) * p)) for d in range(1, min_sep)]
        if warm
        else [(0, 1.0)]
    )
    out: dict[tuple[int, ...], float] = {}
    for d0, w0 in starts:
        for coins in itertools.product((0, 1), repeat=n):
            d, prob, pattern = d0, w0, []
            for t, coin in enumerate(coins):
                if d > 0:  # not eligible: the coin is not used (count it once: only coin 0 is kept)
                    if coin:
                        prob = 0.0
                        break
                    d -= 1
                    continue
                prob *= p if coin else 1 - p
                if coin:
                    pattern.append(t)
                    d = min_sep - 1
            if prob > 0:
                out[tuple(pattern)] = out.get(tuple(pattern), 0.0) + prob
    return out


def _run_deltas(c: np.ndarray, laws: dict, sigma: float, eps: float, nodes: int = 60) -> tuple[float, float]:
    """Both deltas at ``eps`` of the run with a fixed unit gradient (a mixture over the patterns of N(C x_S, sigma^2
    I) against N(0, sigma^2 I)), by a tensor Gauss-Hermite rule over the ``n`` released rows."""
    n = c.shape[0]
    x, w = np.polynomial.hermite_e.hermegauss(nodes)
    w = w / math.sqrt(2 * math.pi)
    grid = np.stack(np.meshgrid(*([x] * n), indexing="ij"), axis=-1).reshape(-1, n)
    weight = np.prod(np.stack(np.meshgrid(*([w] * n), indexing="ij"), axis=-1).reshape(-1, n), axis=1)
    ratio = np.zeros(grid.shape[0])
    for pattern, prob in laws.items():
        xs = np.zeros(n)
        xs[list(pattern)] = 1.0
        mean = c @ xs / sigma
        ratio += prob * np.exp(grid @ mean - mean @ mean / 2)
    a = math.exp(eps)
    return float(weight @ np.maximum(ratio - a, 0.0)), float(weight @ np.maximum(1.0 - a * ratio, 0.0))


@pytest.mark.parametrize(
    ("col", "p", "warm", "sigma", "delta"),
    [((1.0,), 0.5, True, 1.0, 1e-2), ((1.0, 0.6), 0.7, False, 1.2, 1e-2), ((0.8, 0.6), 0.4, True, 0.9, 1e-3)],
)
def test_count_mixture_bounds_the_exact_three_step_run(col, p, warm, sigma, delta):
    strategy = BandedToeplitz(c_col=np.array(col))
    n, min_sep = 3, 2
    c = as_strategy(strategy).matrix(n)
    laws = _pattern_laws(n, p, min_sep, warm)
    assert sum(laws.values()) == pytest.approx(1.0)
    cap = max(float(np.linalg.norm(c @ np.isin(np.arange(n), s).astype(float))) for s in laws) + 1e-12
    b, how = count_mixture(strategy, sigma, n, p, min_sep, warm, cap, delta, None, None)
    assert "sqrt(K)" in how  # min_sep >= bands: participations on disjoint rows
    assert max(_run_deltas(c, laws, sigma, b.upper)) <= delta * (1 + 1e-3)


def test_bandmf_with_min_sep_at_the_bands_uses_the_count_mixture():
    k = np.arange(1, 16)
    col = np.cumprod(np.r_[1.0, (2 * k - 1) / (2 * k)])
    b = matrix_epsilon(
        strategy=col / np.linalg.norm(col),
        noise_multiplier=4.0,
        steps=480,
        delta=1e-6,
        sampler=MinSepSampling(sampling_rate=1 / 16, min_sep=16),
    )
    assert b.lower <= b.upper and b.details["upper"].startswith("count mixture"), b.details


def test_epoch_statistic_lower_end_is_below_the_exact_two_epoch_run():
    """Per-epoch allocation, two epochs of two steps, a two-band C: the lower end (the epoch-weighted linear
    statistic's Gaussian pair) lies below the exact run's epsilon (a record with a fixed unit gradient: a uniform
    mixture over the four draws, integrated over the four rows)."""
    from tightdp.matrix import EpochAllocation

    col, sigma, delta = np.array([1.0, 0.7]), 0.8, 1e-3
    b = matrix_epsilon(
        strategy=BandedToeplitz(c_col=col),
        noise_multiplier=sigma,
        steps=4,
        delta=delta,
        sampler=EpochAllocation(steps_per_epoch=2),
    )
    assert "linear statistic" in b.details["lower"], b.details
    c = as_strategy(BandedToeplitz(c_col=col)).matrix(4)
    laws = {(i, 2 + j): 0.25 for i in (0, 1) for j in (0, 1)}
    # the exact run's delta at the lower end is at least delta (within the quadrature's accuracy)
    assert max(_run_deltas(c, laws, sigma, b.lower, nodes=32)) >= delta * (1 - 1e-2)


@settings(deadline=None, max_examples=scaled(8))
@given(
    c1=st.floats(0.0, 0.95),
    p=st.floats(0.1, 0.9),
    warm=st.booleans(),
    sigma=st.floats(1.0, 2.5),
    delta=st.sampled_from([1e-2, 1e-3]),
)
def test_min_sep_interval_brackets_the_exact_three_step_run_at_random(c1, p, warm, sigma, delta):
    """Two bands, min_sep 2, three steps, random rate, start and noise: the certified interval brackets the exact
    run of a record with a fixed unit gradient (an attained pair)."""
    col = np.array([1.0, c1])
    b = matrix_epsilon(
        strategy=BandedToeplitz(c_col=col),
        noise_multiplier=sigma,
        steps=3,
        delta=delta,
        sampler=MinSepSampling(sampling_rate=p, min_sep=2, warm_start=warm),
    )
    c = as_strategy(BandedToeplitz(c_col=col)).matrix(3)
    laws = _pattern_laws(3, p, 2, warm)
    assert 0.0 <= b.lower <= b.upper
    # to the quadrature's accuracy (a few %; p = 1, a single Gaussian, is left to the exact tests)
    assert max(_run_deltas(c, laws, sigma, b.upper, nodes=90)) <= delta * 1.03
    if b.lower > 0:
        assert max(_run_deltas(c, laws, sigma, b.lower, nodes=90)) >= delta * 0.97

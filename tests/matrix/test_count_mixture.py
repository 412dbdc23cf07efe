"""The count mixture upper end of Poisson sampling with a matrix mechanism (``PoissonSampling``'s docstring, (v)):
sound against the exact two-step tree run (quadrature over its three nodes), and far below no amplification for
tree aggregation at a low rate."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from _support import scaled
from hypothesis import given, settings
from hypothesis import strategies as st

from tightdp.matrix import BinaryTree, PoissonSampling, matrix_epsilon
from tightdp.matrix._ledger_samplers import _count_mixture
from tightdp.matrix._ledgers import _epsilon_of
from tightdp.matrix.sensitivity import MinSeparation, sensitivity


def _tree_run_deltas(q: float, sigma: float, eps: float, nodes: int = 70) -> tuple[float, float]:
    """Both deltas at ``eps`` of the two-step tree (leaves and root, ``C = [[1, 0], [0, 1], [1, 1]]``) run by a record
    with a fixed unit gradient under Poisson sampling at ``q``: a mixture over its four participation patterns,
    against pure noise, by a tensor Gauss-Hermite rule over the three released nodes."""
    c = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    x, w = np.polynomial.hermite_e.hermegauss(nodes)
    w = w / math.sqrt(2 * math.pi)
    grid = np.stack(np.meshgrid(x, x, x, indexing="ij"), axis=-1).reshape(-1, 3)  # Q's output / sigma
    weight = np.prod(np.stack(np.meshgrid(w, w, w, indexing="ij"), axis=-1).reshape(-1, 3), axis=1)
    ratio = np.zeros(grid.shape[0])
    for pattern in itertools.product((0, 1), repeat=2):
        mean = c @ np.array(pattern, float) / sigma
        prob = q ** sum(pattern) * (1 - q) ** (2 - sum(pattern))
        ratio += prob * np.exp(grid @ mean - mean @ mean / 2)
    a = math.exp(eps)
    return float(weight @ np.maximum(ratio - a, 0.0)), float(weight @ np.maximum(1.0 - a * ratio, 0.0))


@pytest.mark.parametrize(("q", "sigma", "delta"), [(0.3, 1.5, 1e-2), (0.1, 1.0, 1e-3), (0.5, 2.0, 1e-2)])
def test_count_mixture_bounds_the_exact_two_step_tree(q, sigma, delta):
    # each step's column (leaf and root) has norm sqrt 2; both steps at once: ||(1, 1, 2)|| = sqrt(6), the cap
    mix = _count_mixture(sigma, 2, q, math.sqrt(2.0), math.sqrt(6.0))
    up = _epsilon_of([(mix, 1)], delta, None, None).upper
    assert max(_tree_run_deltas(q, sigma, up)) <= delta * (1 + 1e-3)
    # the counts and their shifts: 0, sqrt 2 (one step, its column), sqrt 6 (both, the cap)
    assert mix.sensitivities[-1] == pytest.approx(math.sqrt(6.0)) and sum(mix.probabilities) == pytest.approx(1.0)
    assert mix.sensitivities[1] == pytest.approx(math.sqrt(2.0))  # one step: its column, below the cap


def test_tree_aggregation_at_a_low_rate_count_mixture_far_below_no_amplification():
    # 2048 steps: 12 levels, every column of norm sqrt(12); the cap is the sensitivity over all patterns
    cap = sensitivity(BinaryTree(), MinSeparation(max_participations=None, min_sep=1), steps=2048).upper
    mix = _count_mixture(30.0, 2048, 1 / 256, math.sqrt(12.0) * (1 + 1e-12), cap)
    assert 5.0 < _epsilon_of([(mix, 1)], 1e-6, None, None).upper < 7.0  # no amplification: 42.1
    b = matrix_epsilon(
        strategy=BinaryTree(),
        noise_multiplier=30.0,
        steps=2048,
        delta=1e-6,
        sampler=PoissonSampling(sampling_rate=1 / 256),
    )
    assert b.lower <= b.upper < 2.6  # the pattern-norm mixture (tests/matrix/test_pattern_norms.py) is below it
    assert b.details["upper_used"].startswith("pattern-norm mixture")


def test_count_mixture_moves_the_negligible_tail_to_the_largest_count():
    mix = _count_mixture(1.0, 2000, 0.01, 1.0)  # counts above ~345 have mass below 1e-300
    assert mix.sensitivities[-1] == 2000.0 and mix.probabilities[-1] > 0.0
    assert mix.sensitivities[-2] < 400.0
    assert abs(sum(mix.probabilities) - 1.0) <= 1e-11
    assert mix.probabilities[0] <= 0.99**2000  # the counts >= 1 rounded up, so the count 0 never gains


@pytest.mark.parametrize(("q", "sigma", "delta"), [(0.3, 0.7, 1e-2), (0.5, 1.0, 1e-3)])
def test_count_statistic_lower_end_is_below_the_exact_two_step_tree(q, sigma, delta):
    """The lower end (here the count statistic: the root node) is at most the exact run's epsilon: the true delta
    there is at least delta (within the quadrature's accuracy)."""
    b = matrix_epsilon(
        strategy=BinaryTree(), noise_multiplier=sigma, steps=2, delta=delta, sampler=PoissonSampling(sampling_rate=q)
    )
    assert b.lower <= b.upper
    assert max(_tree_run_deltas(q, sigma, b.lower)) >= delta * (1 - 1e-2), b.details


def test_count_statistic_lifts_the_lower_end_of_trees_at_a_low_rate():
    b = matrix_epsilon(
        strategy=BinaryTree(),
        noise_multiplier=30.0,
        steps=2048,
        delta=1e-6,
        sampler=PoissonSampling(sampling_rate=1 / 256),
    )
    assert (
        "counting the participations" in b.details["lower"] and 1.5 < b.lower <= b.upper
    )  # DP-SGD's reduction alone: 0.019


@settings(deadline=None, max_examples=scaled(8))
@given(q=st.floats(0.05, 0.6), sigma=st.floats(1.0, 3.0), delta=st.sampled_from([1e-2, 1e-3]))
def test_both_ends_bracket_the_exact_two_step_tree_at_random(q, sigma, delta):
    """At random rate and noise, the interval of the two-step tree under Poisson sampling brackets the exact run of
    a record with a fixed unit gradient (an attained pair: the upper end bounds it, the lower end is a
    post-processing of it): true delta at most delta at the upper end, at least delta at the lower, to the
    quadrature's accuracy (1 %; the interval is often that tight here)."""
    b = matrix_epsilon(
        strategy=BinaryTree(), noise_multiplier=sigma, steps=2, delta=delta, sampler=PoissonSampling(sampling_rate=q)
    )
    assert 0.0 <= b.lower <= b.upper
    assert max(_tree_run_deltas(q, sigma, b.upper, nodes=160)) <= delta * 1.01
    if b.lower > 0:
        assert max(_tree_run_deltas(q, sigma, b.lower, nodes=160)) >= delta * 0.99


def test_count_statistic_screen_stays_finite_far_beyond_epsilon_700():
    """The uncertified screen of the window statistics (shared with b-min-sep) brackets epsilon below 700, where
    e^eps is finite: a statistic of noise 0.01 used to overflow; a heavily sampled run returns its interval."""
    from tightdp.matrix._min_sep_lower import _mixture_epsilon_estimate

    assert 0.0 < _mixture_epsilon_estimate(np.array([0.5, 0.5]), 0.01, 1e-6) <= 700.0
    b = matrix_epsilon(
        strategy=BinaryTree(), noise_multiplier=2.0, steps=256, delta=1e-6, sampler=PoissonSampling(sampling_rate=0.5)
    )
    assert 0.0 <= b.lower <= b.upper

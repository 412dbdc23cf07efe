"""Whitening (``tightdp.matrix._whitening``): the certified smallest singular value of a Toeplitz strategy
against numpy's SVD, and the whitened lower ends against exact two-step references by quadrature."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _support import scaled
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from tightdp.matrix import BandedToeplitz, BinaryTree, EpochAllocation, Identity, PoissonSampling, matrix_epsilon
from tightdp.matrix._whitening import toeplitz_min_singular_lower


def _bandmf(b: int) -> np.ndarray:
    k = np.arange(1, b)
    c = np.cumprod(np.r_[1.0, (2 * k - 1) / (2 * k)])
    return c / np.linalg.norm(c)


@settings(max_examples=scaled(25), deadline=None)
@given(
    coefs=st.lists(st.floats(-1.0, 1.0), min_size=1, max_size=8),
    lead=st.floats(0.05, 2.0),
    n=st.integers(1, 120),
)
def test_certified_smallest_singular_value_is_below_the_svd(coefs, lead, n):
    """Random banded Toeplitz strategies (any signs): the certified value never exceeds the SVD's smallest
    singular value (up to the SVD's own rounding)."""
    c = np.array([lead, *coefs])
    strategy = BandedToeplitz(c_col=c / np.linalg.norm(c))
    lower = toeplitz_min_singular_lower(strategy, n)
    svd = float(np.linalg.svd(strategy.matrix(n), compute_uv=False).min())
    assert 0.0 <= lower <= svd * (1 + 1e-9) + 1e-12


@pytest.mark.parametrize(("b", "n"), [(4, 60), (16, 200), (64, 400)])
def test_certified_smallest_singular_value_is_close_for_bandmf(b, n):
    """BandMF's coefficients: the certificate is within 1 % of the SVD (so a loose or broken bound fails)."""
    strategy = BandedToeplitz(c_col=_bandmf(b))
    svd = float(np.linalg.svd(strategy.matrix(n), compute_uv=False).min())
    assert 0.99 * svd <= toeplitz_min_singular_lower(strategy, n) <= svd


def test_identity_and_non_toeplitz():
    assert toeplitz_min_singular_lower(Identity(), 30) == pytest.approx(1.0, rel=1e-9)
    assert toeplitz_min_singular_lower(BinaryTree(), 16) == 0.0


def _two_step_delta(
    c: np.ndarray, sigma: float, eps: float, points: int = 2401, gradient: tuple[float, float] = (1.0, 1.0)
) -> float:
    """Exact delta(eps) of the pair of a 2-step run whose record has the scalar gradient ``gradient[s]`` at step
    ``s`` (default: the fixed unit gradient), one step drawn uniformly (one epoch of random allocation):
    P = (N(g_0 C e_0) + N(g_1 C e_1)) / 2 against Q = N(0), both directions, by quadrature on the plane."""
    cm = np.array([[c[0], 0.0], [c[1], c[0]]]) * np.asarray(gradient, dtype=float)
    g = np.linspace(-12 * sigma, 12 * sigma + 3, points)
    x, y = np.meshgrid(g, g, indexing="ij")
    q = norm.pdf(x, scale=sigma) * norm.pdf(y, scale=sigma)
    p = 0.5 * sum(norm.pdf(x - cm[0, j], scale=sigma) * norm.pdf(y - cm[1, j], scale=sigma) for j in range(2))
    cell = (g[1] - g[0]) ** 2
    e = math.exp(eps)
    return float(max(np.sum(np.maximum(p - e * q, 0.0)), np.sum(np.maximum(q - e * p, 0.0))) * cell)


@pytest.mark.parametrize(("c1", "sigma"), [(0.6, 0.8), (-0.5, 1.0), (0.9, 1.5)])
def test_whitened_lower_end_is_below_the_exact_two_step_run(c1, sigma):
    """Two steps, C = [[c0, 0], [c1, c0]] (unit first column), random allocation of one of the two steps: the
    certified lower end (whitening or the older reductions) has exact delta at least the target."""
    c = np.array([1.0, c1]) / math.hypot(1.0, c1)
    delta = 1e-3
    b = matrix_epsilon(
        strategy=BandedToeplitz(c_col=c),
        noise_multiplier=sigma,
        steps=2,
        delta=delta,
        sampler=EpochAllocation(steps_per_epoch=2),
    )
    assert b.lower > 0
    assert _two_step_delta(c, sigma, b.lower) >= delta * (1 - 1e-3), b
    assert _two_step_delta(c, sigma, b.upper) <= delta * (1 + 1e-3), b


def test_bandmf_under_per_epoch_allocation_whitening_below_block_splitting_above():
    """BandMF, 64 bands, 2000 steps in epochs of 250, sigma 4: the lower end is above the whitened one (0.069,
    DP-SGD with per-epoch allocation at sigma / s_min) and the first-step reduction's 0.0101 (the epoch-weighted
    linear statistic: a Gaussian pair, about 1.08), and block splitting brings the upper end from no
    amplification's 8.58 to below 2.2."""
    b = matrix_epsilon(
        strategy=BandedToeplitz(c_col=_bandmf(64)),
        noise_multiplier=4.0,
        steps=2000,
        delta=1e-6,
        sampler=EpochAllocation(steps_per_epoch=250),
    )
    assert "linear statistic" in b.details["lower"]
    assert 1.0 < b.lower <= b.upper
    assert "block splitting" in b.details["upper"]
    assert b.upper < 2.2


def _poisson_delta_mc(c: np.ndarray, n: int, q: float, sigma: float, eps: float, samples: int, seed: int):
    """Monte Carlo delta(eps) (and its standard error) of the fixed-unit-gradient pair of ``n`` Poisson-sampled
    steps of C = T(c), the likelihood ratio summed exactly over all 2^n participation patterns; both directions."""
    import itertools

    rng = np.random.default_rng(seed)
    cm = np.zeros((n, n))
    for k, v in enumerate(c[:n]):
        cm += np.diag(np.full(n - k, v), -k)
    pats = np.array(list(itertools.product((0.0, 1.0), repeat=n)))
    means = pats @ cm.T
    logw = pats.sum(axis=1) * math.log(q) + (n - pats.sum(axis=1)) * math.log1p(-q)
    half = (means**2).sum(axis=1) / 2

    def loss(y):
        z = logw + (y @ means.T - half) / sigma**2
        m = z.max(axis=1, keepdims=True)
        return m[:, 0] + np.log(np.exp(z - m).sum(axis=1))

    rem, add = [], []
    for _ in range(samples // 10_000):  # in chunks: the pattern sums hold 10 000 x 2^n numbers
        x = (rng.random((10_000, n)) < q).astype(float)
        y_p = x @ cm.T + sigma * rng.standard_normal((10_000, n))
        y_q = sigma * rng.standard_normal((10_000, n))
        rem.append(-np.expm1(np.minimum(eps - loss(y_p), 0.0)))
        add.append(-np.expm1(np.minimum(eps + loss(y_q), 0.0)))
    out = []
    for vals in (np.concatenate(rem), np.concatenate(add)):
        out.append((float(vals.mean()), float(vals.std() / math.sqrt(vals.size))))
    return max(out)


@pytest.mark.parametrize(("q", "n"), [(0.05, 10), (0.1, 8)])
def test_poisson_block_splitting_is_consistent_with_monte_carlo(q, n):
    """Poisson-sampled steps of an eight-band C at noise 1 (block splitting or the count mixture wins here): Monte
    Carlo delta
    (100 000 samples, both directions, the likelihood ratio exact over all patterns) at the upper end is not
    confidently above the target, at the lower end not confidently below."""
    c = np.linspace(1.0, 0.3, 8)
    c = c / np.linalg.norm(c)
    delta = 0.02
    b = matrix_epsilon(
        strategy=BandedToeplitz(c_col=c),
        noise_multiplier=1.0,
        steps=n,
        delta=delta,
        sampler=PoissonSampling(sampling_rate=q),
    )
    assert b.details["upper_used"].startswith(("block splitting", "count mixture")), b.details
    m, se = _poisson_delta_mc(c, n, q, 1.0, b.upper, 100_000, seed=3)
    assert m - 5 * se <= delta, (b, m, se)
    m, se = _poisson_delta_mc(c, n, q, 1.0, b.lower, 100_000, seed=4)
    assert m + 5 * se >= delta, (b, m, se)


@settings(max_examples=scaled(4), deadline=None)
@given(c1=st.floats(-0.9, 0.9), sigma=st.floats(0.8, 3.0))
@example(c1=-0.5, sigma=2.0)  # the lower end is the first-step-only pair's, above the fixed gradient's epsilon
def test_epoch_allocation_two_steps_bracket_the_exact_pair_at_random(c1, sigma):
    """Random two-band strategies (either sign) and noise: one epoch of random allocation over two steps; the
    certified ends (whitening, reductions, block and noise splitting, no amplification) bracket the run's exact
    pairs computed by quadrature of the plane."""
    c = np.array([1.0, c1]) / math.hypot(1.0, c1)
    delta = 1e-3
    b = matrix_epsilon(
        strategy=BandedToeplitz(c_col=c),
        noise_multiplier=sigma,
        steps=2,
        delta=delta,
        sampler=EpochAllocation(steps_per_epoch=2),
    )
    # the run's pairs: a record whose gradient is +-1 or 0 at each step; the upper end holds for all of them, and
    # the lower end is below the largest of their epsilons (it may come from the first-step-only pair)
    pairs = [(1.0, 1.0), (1.0, 0.0), (0.0, 1.0), (1.0, -1.0)]
    assert max(_two_step_delta(c, sigma, b.upper, 1201, g) for g in pairs) <= delta * (1 + 1e-3), b
    if b.lower > 0:
        assert max(_two_step_delta(c, sigma, b.lower, 1201, g) for g in pairs) >= delta * (1 - 1e-3), b

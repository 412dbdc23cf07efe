"""MMCC (tightdp.matrix.mmcc): each certified step checked against an exact answer.

C = identity is DP-SGD; sampling rate 1 is the Gaussian mechanism of ||C 1|| (mu-GDP); two steps of a 2-banded C
have an exact privacy curve (the fixed-gradient pair, integrated on a grid) that MMCC's upper end must dominate;
the Chernoff and grid tail quantiles, the row laws and their coarsening are checked against brute-force enumeration. The
pre-check's floor stays below MMCC's answer (so skipping never loses a win), and the aligned-gradient model is
passed through ``PoissonSampling``."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from tightdp import dpsgd_epsilon
from tightdp.accountants.gdp import gdp_epsilon
from tightdp.matrix import BandedToeplitz, BinaryTree, DenseStrategy, Identity, PoissonSampling, matrix_epsilon
from tightdp.matrix._mmcc_tails import MAX_COMPONENTS, _tilde_p, grid_quantile
from tightdp.matrix.accounting import sampler_from_dict
from tightdp.matrix.mmcc import (
    _Law,
    _laws_of_sums,
    _mixture,
    chernoff_quantile,
    ledger_epsilon_floor,
    mmcc_epsilon,
    mmcc_row_laws,
)
from tightdp.matrix.strategies import as_strategy

DELTA = 1e-3


def _delta_pair(a: float, q: float, sigma: float, eps: float) -> float:
    """Exact delta(eps) (max of both directions) of two steps of C = [[1, 0], [a, 1]], fixed unit gradient,
    Poisson rate q, by a 2D Riemann sum (error << 1e-6)."""
    lo, hi, m = -9 * sigma, 2 + a + 9 * sigma, 1601
    x = np.linspace(lo, hi, m)
    h = x[1] - x[0]
    px = [norm.pdf(x, loc=mu, scale=sigma) for mu in (0.0, 1.0)]
    py = {mu: norm.pdf(x, loc=mu, scale=sigma) for mu in (0.0, 1.0, a, 1.0 + a)}
    p = np.zeros((m, m))
    for b0, b1 in itertools.product((0, 1), repeat=2):
        w = (q if b0 else 1 - q) * (q if b1 else 1 - q)
        p += w * np.outer(px[b0], py[a * b0 + b1])
    qd = np.outer(px[0], py[0.0])
    e = math.exp(eps)
    return max(float(np.maximum(p - e * qd, 0).sum() * h * h), float(np.maximum(qd - e * p, 0).sum() * h * h))


@settings(deadline=None, max_examples=6)
@given(st.floats(0.7, 4.0), st.floats(0.001, 0.3), st.integers(1, 200))
def test_identity_brackets_dpsgd_everywhere(sigma, q, n):
    ref = dpsgd_epsilon(noise_multiplier=sigma, sampling_rate=q, steps=n, delta=1e-5)
    b = mmcc_epsilon(strategy=Identity(), noise_multiplier=sigma, steps=n, sampling_rate=q, delta=1e-5)
    assert ref.lower <= b.upper * (1 + 1e-9) + 1e-12


def test_identity_is_dpsgd():
    ref = dpsgd_epsilon(noise_multiplier=1.2, sampling_rate=0.02, steps=300, delta=1e-5)
    b = mmcc_epsilon(strategy=Identity(), noise_multiplier=1.2, steps=300, sampling_rate=0.02, delta=1e-5)
    assert b.details["tail_events"] == 0 and b.details["delta_bad"] == 0.0
    assert ref.lower <= b.upper <= ref.upper * (1 + 2e-3)


@pytest.mark.parametrize("strategy", [BandedToeplitz(c_col=[1.0, 0.6, 0.3]), BinaryTree()])
def test_rate_one_is_the_gaussian_of_the_all_steps_sensitivity(strategy):
    n, sigma = 8, 4.0
    mu = float(np.linalg.norm(strategy.matrix(n) @ np.ones(n))) / sigma
    exact = gdp_epsilon(mu=mu, delta=1e-5)
    b = mmcc_epsilon(strategy=strategy, noise_multiplier=sigma, steps=n, sampling_rate=1.0, delta=1e-5)
    assert exact[1] <= b.upper * (1 + 1e-9) and b.upper <= exact[1] * 1.01 + 1e-3


@settings(deadline=None, max_examples=6)
@given(st.floats(0.05, 1.0), st.floats(0.05, 0.9), st.floats(1.0, 4.0), st.booleans())
def test_two_steps_upper_dominates_the_exact_pair(a, q, sigma, aligned):
    b = mmcc_epsilon(
        strategy=BandedToeplitz(c_col=[1.0, a]),
        noise_multiplier=sigma,
        steps=2,
        sampling_rate=q,
        delta=DELTA,
        aligned_gradients=aligned,
    )
    assert _delta_pair(a, q, sigma, b.upper) <= DELTA * (1 + 1e-3)


@settings(deadline=None, max_examples=25)
@given(
    st.lists(st.floats(0.0, 3.0), min_size=1, max_size=6),
    st.floats(0.0, 2.0),
    st.floats(0.01, 1.0),
    st.floats(2.0, 20.0),
)
def test_chernoff_quantile_bounds_the_exact_tail(w, s, p, log_inv):
    w = np.array(w)
    if s == 0.0 and not np.any(w > 0):
        return
    tau = chernoff_quantile(w, np.ones_like(w), s, p, log_inv)
    tail = 0.0
    for bits in itertools.product((0, 1), repeat=w.size):
        pr = math.prod(p if b else 1 - p for b in bits)
        mean = float(np.dot(w, bits))
        tail += pr * (float(norm.sf((tau - mean) / s)) if s > 0 else float(mean > tau))
    assert tail <= math.exp(-log_inv) * (1 + 1e-9)


@settings(deadline=None, max_examples=25)
@given(st.lists(st.tuples(st.floats(0.01, 2.0), st.floats(0.0, 1.0)), min_size=1, max_size=7))
def test_row_law_and_its_mixture_are_stochastically_above_the_exact_law(terms):
    c = np.array([t[0] for t in terms])
    q = np.array([t[1] for t in terms])
    h = float(c.sum()) / 97.0
    m = np.ceil(c / h).astype(np.int64)
    law = _laws_of_sums(m, q, h, [c.size - 1])[0]
    mog, eta = _mixture(law, 1.0, 1e-12)
    sens, probs = np.array(mog.sensitivities), np.array(mog.probabilities)
    for bits in itertools.product((0, 1), repeat=c.size):
        v = float(np.dot(c, bits))
        exact = sum(
            math.prod(qq if bb else 1 - qq for bb, qq in zip(bb2, q, strict=True))
            for bb2 in itertools.product((0, 1), repeat=c.size)
            if float(np.dot(c, bb2)) >= v
        )
        k = int(math.ceil(v / h * (1 - 1e-12)))  # the grid law is pointwise above: P(T_grid >= v) >= P(T >= v)
        above = float(law.surv[k]) if k < law.surv.size else 0.0  # beyond the support: impossible
        assert above >= exact * (1 - 1e-9) - 1e-15
        assert float(probs[sens >= v].sum()) + eta >= exact * (1 - 1e-9) - 1e-15


def test_mixture_cut_charges_its_tail():
    law = _Law(1.0, np.array([1.0, 0.5, 1e-12, 1e-14]))
    mog, eta = _mixture(law, 1.0, 1e-11)
    assert eta == pytest.approx(1e-12) and max(mog.sensitivities) < 2.0 + 1e-12


def _tree_array(n: int) -> DenseStrategy:
    """Tree aggregation as a plain array: the same matrix, but no pattern-norm law (``BinaryTree``'s dynamic
    program, tests/matrix/test_pattern_norms.py, beats MMCC on the tree itself)."""
    return DenseStrategy(array=BinaryTree().matrix(n), lower_triangular=False)


def test_poisson_sampler_uses_mmcc_for_the_tree():
    # at rate 0.2 MMCC wins over the count mixture; at low rates such as 0.01 the count mixture does
    # (tests/matrix/test_count_mixture.py)
    b = matrix_epsilon(
        strategy=_tree_array(64),
        noise_multiplier=20.0,
        steps=64,
        delta=1e-6,
        sampler=PoissonSampling(sampling_rate=0.2),
    )
    assert b.details["upper_used"] == "MMCC conditional composition"
    assert b.details["mmcc"]["upper"] == b.upper < 9.5  # the count mixture: 9.6 or more
    ref = dpsgd_epsilon(noise_multiplier=20.0, sampling_rate=0.2, steps=64, delta=1e-6)  # the leaf rows alone
    assert ref.lower * (1 - 1e-9) <= b.lower <= b.upper  # the count statistic (the root) may do better


def test_negative_strategy_is_refused_and_the_sampler_falls_back():
    c = DenseStrategy(array=[[1.0, 0.0], [-0.5, 1.0]])
    with pytest.raises(ValueError, match="non-negative"):
        mmcc_epsilon(strategy=c, noise_multiplier=2.0, steps=2, sampling_rate=0.1, delta=1e-5)
    b = matrix_epsilon(
        strategy=c, noise_multiplier=2.0, steps=2, delta=1e-5, sampler=PoissonSampling(sampling_rate=0.1)
    )
    assert b.details["mmcc"].startswith("not used") and 0.0 <= b.lower <= b.upper


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        (dict(sampling_rate=0.0), "sampling_rate"),
        (dict(delta=0.0), "delta"),
        (dict(noise_multiplier=-1.0), "noise_multiplier"),
        (dict(steps=0), "steps"),
        (dict(tail_fraction=1.0), "tail_fraction"),
    ],
)
def test_bad_arguments_name_themselves(kwargs, name):
    args = dict(strategy=Identity(), noise_multiplier=1.0, steps=4, sampling_rate=0.1, delta=1e-5) | kwargs
    with pytest.raises(ValueError, match=name):
        mmcc_epsilon(**args)


def _optimal_coefs(b: int) -> np.ndarray:
    k = np.arange(1, b)
    c = np.cumprod(np.r_[1.0, (2 * k - 1) / (2 * k)])
    return c / np.linalg.norm(c)


@pytest.mark.parametrize(
    ("strategy", "sigma", "n", "q", "aligned"),
    [
        (BinaryTree(), 15.0, 64, 0.01, False),
        (BinaryTree(), 15.0, 64, 0.01, True),
        (BandedToeplitz(c_col=[1.0, 0.5, 0.25]), 3.0, 200, 0.02, False),
        (BandedToeplitz(c_col=_optimal_coefs(16)), 4.0, 300, 1 / 16, True),
        (Identity(), 1.0, 100, 0.05, False),
    ],
)
def test_floor_is_below_mmccs_answer(strategy, sigma, n, q, aligned):
    res = mmcc_row_laws(as_strategy(strategy), sigma, n, q, 1e-6, aligned_gradients=aligned)
    floor = ledger_epsilon_floor(res, sigma, 1e-6)
    m = mmcc_epsilon(
        strategy=strategy, noise_multiplier=sigma, steps=n, sampling_rate=q, delta=1e-6, aligned_gradients=aligned
    )
    assert 0.0 <= floor <= m.upper


def test_floor_proves_something_where_mmcc_loses():
    # BandMF at low noise: the posterior bounds are several times the rate and MMCC's answer is far above the
    # other bounds; the floor must see it (the pre-check's purpose)
    res = mmcc_row_laws(as_strategy(BandedToeplitz(c_col=_optimal_coefs(16))), 2.0, 400, 1 / 16, 1e-6)
    m = mmcc_epsilon(
        strategy=BandedToeplitz(c_col=_optimal_coefs(16)),
        noise_multiplier=2.0,
        steps=400,
        sampling_rate=1 / 16,
        delta=1e-6,
    )
    assert 0.5 * m.upper <= ledger_epsilon_floor(res, 2.0, 1e-6) <= m.upper


def test_precheck_skips_mmcc_only_when_it_cannot_win():
    c = BandedToeplitz(c_col=_optimal_coefs(16))
    b = matrix_epsilon(
        strategy=c, noise_multiplier=2.0, steps=400, delta=1e-6, sampler=PoissonSampling(sampling_rate=1 / 16)
    )
    m = mmcc_epsilon(strategy=c, noise_multiplier=2.0, steps=400, sampling_rate=1 / 16, delta=1e-6)
    assert isinstance(b.details["mmcc"], str) and "ledger_epsilon_floor" in b.details["mmcc"]
    assert m.upper >= b.upper  # skipping lost nothing
    # where MMCC wins, the pre-check lets it through (the tree, both gradient models)
    for aligned in (False, True):
        t = matrix_epsilon(
            strategy=_tree_array(64),
            noise_multiplier=20.0,
            steps=64,
            delta=1e-6,
            sampler=PoissonSampling(sampling_rate=0.2, aligned_gradients=aligned),
        )
        assert t.details["upper_used"] == "MMCC conditional composition"
        assert t.details["mmcc"]["gradients"] == ("aligned" if aligned else "any")


def test_aligned_gradients_tighten_the_tree_and_keep_the_lower_end():
    kw = dict(strategy=_tree_array(64), noise_multiplier=20.0, steps=64, delta=1e-6)
    anyg = matrix_epsilon(**kw, sampler=PoissonSampling(sampling_rate=0.2))
    aligned = matrix_epsilon(**kw, sampler=PoissonSampling(sampling_rate=0.2, aligned_gradients=True))
    assert aligned.lower == anyg.lower <= aligned.upper < anyg.upper
    smp = PoissonSampling(sampling_rate=0.01, aligned_gradients=True)
    assert sampler_from_dict(smp.to_dict()) == smp and "aligned" in smp.describe()
    with pytest.raises(ValueError, match="aligned_gradients"):
        PoissonSampling(sampling_rate=0.01, aligned_gradients="yes")


def test_events_with_equal_weights_share_the_exact_posterior_bound():
    # the tree's general path memoises p~ by (||c||^2, sorted positive w): the bound it stores must be the one a
    # direct computation on the unsorted, zero-padded w gives (up to the summation order's last bits)
    rng = np.random.default_rng(0)
    w = np.zeros(40)
    w[rng.choice(40, 9, replace=False)] = rng.uniform(0.1, 2.0, 9)
    jw = float(w[w > 0][0])
    for aligned in (False, True):
        direct = _tilde_p(w, jw, 3.0, 0.05, 20.0, aligned)
        memo = _tilde_p(np.sort(w[w > 0.0]), jw, 3.0, 0.05, 20.0, aligned)
        assert memo == pytest.approx(direct, rel=1e-12)


@settings(deadline=None, max_examples=25)
@given(
    st.lists(st.tuples(st.floats(0.01, 3.0), st.integers(1, 3)), min_size=1, max_size=4),
    st.floats(0.05, 2.0),
    st.floats(0.01, 0.9),
    st.floats(2.0, 20.0),
    st.floats(0.0, 0.5),
)
def test_grid_quantile_bounds_the_exact_tail(terms, s, p, log_inv, shift):
    w = np.array([t[0] for t in terms])
    mult = np.array([t[1] for t in terms], dtype=float)
    tau = grid_quantile(w, mult, shift, s, p, log_inv)
    full = np.repeat(w, mult.astype(int))
    tail = 0.0
    for bits in itertools.product((0, 1), repeat=full.size):
        pr = math.prod(p if b else 1 - p for b in bits)
        tail += pr * float(norm.sf((tau - shift - float(np.dot(full, bits))) / s))
    assert tail <= math.exp(-log_inv) * (1 + 1e-9)
    # and it is the tighter of the two tail bounds here (the Chernoff bound is not attained)
    assert tau <= chernoff_quantile(w, mult, s, p, log_inv) + shift + 1e-9


@settings(deadline=None, max_examples=20)
@given(st.integers(70, 400), st.integers(0, 2**31 - 1))
def test_coarsened_mixture_only_moves_mass_up(size, seed):
    rng = np.random.default_rng(seed)
    pmf = rng.exponential(size=size) * rng.binomial(1, 0.7, size=size)
    pmf[0] += 1.0
    pmf /= pmf.sum()
    surv = np.cumsum(pmf[::-1])[::-1]
    law = _Law(0.01, surv)
    mog, eta = _mixture(law, 1.0, 1e-14)
    sens, probs = np.array(mog.sensitivities), np.array(mog.probabilities)
    assert sens.size <= MAX_COMPONENTS and sens.max() >= (np.nonzero(pmf > 1e-14)[0].max()) * 0.01 * (1 - 1e-12)
    for i in range(size):  # P(T >= i h) can only grow
        assert float(probs[sens >= i * 0.01 * (1 - 1e-12)].sum()) + eta >= surv[i] * (1 - 1e-9) - 1e-15

"""The pattern-norm mixture of Poisson sampling with tree aggregation (``PoissonSampling``'s docstring, (vi);
``tightdp.matrix._pattern_norms``): its law against exhaustive enumeration of the participation patterns, its
ledger's shift law above the true one in the usual stochastic order, and its upper end against the exact four-step
tree run (quadrature over the span of the modes)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from _support import scaled
from hypothesis import given, settings
from hypothesis import strategies as st

from tightdp.matrix import BinaryTree, MinSepSampling, PoissonSampling, matrix_epsilon
from tightdp.matrix._ledger_samplers import _count_mixture
from tightdp.matrix._ledgers import _epsilon_of
from tightdp.matrix._pattern_norms import tree_norm_law, tree_norm_mixture
from tightdp.mechanisms.basic import ApproximateDP
from tightdp.mechanisms.mixture import MixtureOfGaussians


def _enumerated_law(n: int, q: float) -> dict[int, float]:
    """The exact law of ``||C x||^2`` by listing all ``2^n`` patterns through the strategy's own matrix."""
    c = BinaryTree().matrix(n)
    x = np.array(list(itertools.product((0.0, 1.0), repeat=n)))
    squares = np.rint(((x @ c.T) ** 2).sum(axis=1)).astype(int)
    k = x.sum(axis=1)
    probs = q**k * (1 - q) ** (n - k)
    out: dict[int, float] = {}
    for s, p in zip(squares.tolist(), probs.tolist(), strict=True):
        out[s] = out.get(s, 0.0) + p
    return out


@settings(deadline=None, max_examples=scaled(30))
@given(n=st.integers(1, 12), q=st.floats(0.01, 0.95))
def test_law_matches_exhaustive_enumeration(n, q):
    law = tree_norm_law(n, q)
    exact = _enumerated_law(n, q)
    got = dict(zip(law.squares.astype(int).tolist(), law.masses.tolist(), strict=True))
    assert set(got) <= set(exact)
    for s, p in exact.items():
        g = got.get(s, 0.0)
        assert g <= p * (1 + 1e-12)  # never above the truth (the certificate)
        if p > 1e-20:
            assert g >= p * (1 - 1e-9)  # and not far below it
    assert 0.0 <= law.missing <= 1e-11
    assert law.missing >= 1.0 - math.fsum(law.masses.tolist())


@settings(deadline=None, max_examples=scaled(20))
@given(n=st.integers(1, 12), q=st.floats(0.01, 0.95), ratio=st.sampled_from([1e-3, 3e-3, 3e-2]))
def test_ledger_shift_law_dominates_the_true_norm(n, q, ratio):
    """For every threshold, the ledger's mixture puts at least the true mass above it, counting the
    ``ApproximateDP`` part's mass as above every threshold: the usual stochastic order."""
    cap = math.sqrt(max(_enumerated_law(n, q)))  # the all-ones pattern, the largest norm
    ledger = tree_norm_mixture(tree_norm_law(n, q), 1.0, cap * (1 + 1e-12), ratio)
    mix = ledger[0][0]
    assert isinstance(mix, MixtureOfGaussians)
    extra = ledger[1][0].delta if len(ledger) > 1 else 0.0
    if len(ledger) > 1:
        assert isinstance(ledger[1][0], ApproximateDP) and ledger[1][0].epsilon == 0.0
    shifts, probs = np.array(mix.sensitivities), np.array(mix.probabilities) * (1 - extra)
    assert max(shifts) <= cap * (1 + 1e-12)
    for s, _ in _enumerated_law(n, q).items():
        true_above = sum(p for t, p in _enumerated_law(n, q).items() if t >= s)
        ledger_above = float(probs[shifts >= math.sqrt(s) * (1 - 1e-15)].sum()) + extra
        assert ledger_above >= true_above * (1 - 1e-12) - 1e-15


def _poisson(q: float, b: tuple[float, ...]) -> float:
    k = int(sum(b))
    return q**k * (1 - q) ** (len(b) - k)


def _min_sep_2(q: float, b: tuple[float, ...]) -> float:
    """The cold-start b-min-sep chain with ``min_sep = 2``: eligible unless it took part at the step before."""
    prob, eligible = 1.0, True
    for bit in b:
        if not eligible:
            if bit:
                return 0.0
            eligible = True
            continue
        prob *= q if bit else 1 - q
        eligible = not bit
    return prob


def _four_step_deltas(q: float, sigma: float, eps: float, nodes: int = 36, law=_poisson) -> tuple[float, float]:
    """Both deltas at ``eps`` of the four-step tree (seven nodes) run by a record with a fixed unit gradient whose
    pattern has the given law (default Poisson sampling): the release enters the likelihood ratio only through ``W
    = C^T y / sigma`` (covariance ``G = C^T C``), integrated by a tensor Gauss-Hermite rule in ``W = L xi``."""
    c = BinaryTree().matrix(4)
    g = c.T @ c
    chol = np.linalg.cholesky(g)
    x, w = np.polynomial.hermite_e.hermegauss(nodes)
    w = w / math.sqrt(2 * math.pi)
    xi = np.stack(np.meshgrid(x, x, x, x, indexing="ij"), axis=-1).reshape(-1, 4)
    weight = np.prod(np.stack(np.meshgrid(w, w, w, w, indexing="ij"), axis=-1).reshape(-1, 4), axis=1)
    wv = xi @ chol.T
    ratio = np.zeros(xi.shape[0])
    for pattern in itertools.product((0.0, 1.0), repeat=4):
        b = np.array(pattern)
        ratio += law(q, pattern) * np.exp(wv @ b / sigma - float(b @ g @ b) / (2 * sigma**2))
    a = math.exp(eps)
    return float(weight @ np.maximum(ratio - a, 0.0)), float(weight @ np.maximum(1.0 - a * ratio, 0.0))


@settings(deadline=None, max_examples=scaled(6))
@given(q=st.floats(0.05, 0.5), sigma=st.floats(1.2, 3.0), delta=st.sampled_from([1e-2, 1e-3]))
def test_upper_end_bounds_the_exact_four_step_tree(q, sigma, delta):
    """The pattern-norm ledger's upper end is above the exact run (true delta at most delta there), and below the
    count mixture's (two participations cost ``||C x||^2`` of 8 or 10, not ``(2 sqrt 3)^2 = 12``)."""
    cap = math.sqrt(28.0)  # all four steps: leaves 4, two parents of 2, the root 4
    up = _epsilon_of(tree_norm_mixture(tree_norm_law(4, q), sigma, cap), delta, None, None).upper
    assert max(_four_step_deltas(q, sigma, up)) <= delta * 1.01
    count = _epsilon_of([(_count_mixture(sigma, 4, q, math.sqrt(3.0), cap), 1)], delta, None, None).upper
    assert up < count


@settings(deadline=None, max_examples=scaled(4))
@given(q=st.floats(0.1, 0.6), sigma=st.floats(1.2, 3.0), delta=st.sampled_from([1e-2, 1e-3]))
def test_poisson_mixture_bounds_the_exact_four_step_min_sep_tree(q, sigma, delta):
    """b-min-sep's pattern lies below a Poisson one, so the Poisson pattern-norm mixture capped at the min-sep
    sensitivity bounds the exact four-step tree under b-min-sep (``min_sep = 2``, cold start)."""
    from tightdp.matrix._ledgers import _column_norms, _pattern_norm_ledger
    from tightdp.matrix.sensitivity import MinSeparation, sensitivity

    tree = BinaryTree()
    cap = sensitivity(tree, MinSeparation(max_participations=2, min_sep=2), steps=4).upper  # steps 0 and 2 (or 3)
    ledger = _pattern_norm_ledger(tree, sigma, 4, q, cap, _column_norms(tree, 4))
    up = _epsilon_of(ledger, delta, None, None).upper
    assert max(_four_step_deltas(q, sigma, up, law=_min_sep_2)) <= delta * 1.01
    b = matrix_epsilon(
        strategy=tree, noise_multiplier=sigma, steps=4, delta=delta, sampler=MinSepSampling(sampling_rate=q, min_sep=2)
    )
    assert b.lower <= b.upper <= up * (1 + 1e-9)
    if b.lower > 0:
        assert max(_four_step_deltas(q, sigma, b.lower, law=_min_sep_2)) >= delta * 0.99


def test_tree_at_a_low_rate_is_far_below_the_count_mixture():
    b = matrix_epsilon(
        strategy=BinaryTree(),
        noise_multiplier=10.0,
        steps=2048,
        delta=1e-6,
        sampler=PoissonSampling(sampling_rate=1 / 256),
    )
    assert b.details["upper_used"].startswith("pattern-norm mixture")
    assert 8.0 < b.lower <= b.upper < 10.5  # the count mixture: 37.98; the lower end is the count statistic


def test_law_mass_and_mean_at_2048_steps():
    law = tree_norm_law(2048, 1 / 256)
    # E ||C x||^2 = sum over nodes of (m q (1 - q) + m^2 q^2), m the node's leaves: 12 levels, 2^(11 - l) nodes
    q = 1 / 256
    mean = sum(2 ** (11 - lev) * (2**lev * q * (1 - q) + 4**lev * q * q) for lev in range(12))
    assert float(law.squares @ law.masses) == pytest.approx(mean, rel=1e-9)
    assert law.missing < 1e-9 and law.masses.min() > 0.0  # missing: the rounding bound, about 4e-11


def test_work_budget_and_bad_input():
    assert tree_norm_law(512, 0.3, max_work=1e6) is None  # past the budget: no law (the other upper ends stand)
    for n, q in [(0, 0.1), (4, 0.0), (4, 1.5), (2.5, 0.1)]:
        with pytest.raises(ValueError, match=r"n must|q must"):
            tree_norm_law(n, q)


def test_min_sep_tree_uses_the_poisson_mixture():
    b = matrix_epsilon(
        strategy=BinaryTree(),
        noise_multiplier=10.0,
        steps=512,
        delta=1e-6,
        sampler=MinSepSampling(sampling_rate=1 / 64, min_sep=8),
    )
    assert b.details["upper"].startswith("pattern-norm mixture of Poisson sampling")
    assert b.lower <= b.upper


def test_out_of_range_mixture_is_not_attempted():
    # E ||C x||^2 / sigma^2 far beyond the engine's range: the other upper ends answer without the program
    b = matrix_epsilon(
        strategy=BinaryTree(), noise_multiplier=2.0, steps=256, delta=1e-6, sampler=PoissonSampling(sampling_rate=0.5)
    )
    assert 0.0 <= b.lower <= b.upper and not b.details["upper_used"].startswith("pattern-norm")


@settings(deadline=None, max_examples=scaled(20))
@given(k=st.integers(1, 12), off=st.sampled_from([-1, 0, 1]), q=st.floats(1e-3, 0.05))
def test_law_mean_at_powers_of_two_and_their_neighbours(k, off, q):
    """The law's mean equals ``sum over nodes (m q (1 - q) + m^2 q^2)`` with the nodes' leaf counts ``m`` taken
    from the tree's rows (starts ``0, 2^l, ...`` cut at ``n``), at ``n = 2^k - 1, 2^k, 2^k + 1``, where the level
    count changes; and the matrix has as many rows as those nodes."""
    n = max(1, 2**k + off)
    law = tree_norm_law(n, q)
    if law is None:
        return
    levels = (n - 1).bit_length() + 1
    sizes = [min(2**lev, n - a) for lev in range(levels) for a in range(0, n, 2**lev)]
    mean = sum(m * q * (1 - q) + m * m * q * q for m in sizes)
    assert float(law.squares @ law.masses) == pytest.approx(mean, rel=1e-9)
    if n <= 1100:
        c = BinaryTree().matrix(n)
        assert sorted(c.sum(axis=1).tolist()) == sorted(float(m) for m in sizes)

"""Sensitivity of strategy matrices against brute force over every participation pattern (small n),
for non-negative and signed strategies, and the strategies' validation."""

from __future__ import annotations

import importlib
import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tightdp.matrix import (
    BLT,
    SINGLE,
    BandedToeplitz,
    BinaryTree,
    Cyclic,
    DenseStrategy,
    Identity,
    MinSeparation,
    PerEpoch,
    as_strategy,
    pattern_value,
    sensitivity,
    strategy_from_dict,
)


def _all_patterns(n, k, sep):
    for r in range(1, k + 1):
        for p in itertools.combinations(range(n), r):
            if all(b - a >= sep for a, b in itertools.pairwise(p)):
                yield p


def _truth_interval(c, pats):
    """(max attained value over patterns and sign vectors, max proven upper value): brute force, squared."""
    m = c.T @ c
    lo = hi = 0.0
    for p in pats:
        mp = m[np.ix_(p, p)]
        for signs in itertools.product((1.0, -1.0), repeat=len(p)):
            s = np.array(signs)
            lo = max(lo, float(s @ mp @ s))
        hi = max(hi, min(float(np.abs(mp).sum()), len(p) * float(np.linalg.eigvalsh(mp)[-1])))
    return lo, hi


def _check(strategy, participation, n, pats):
    c = strategy.matrix(n)
    s = sensitivity(strategy, participation, steps=n)
    lo2, hi2 = _truth_interval(c, pats)
    assert s.lower <= s.upper
    # the lower end is attained by its explicit pattern and signs
    assert s.lower**2 <= pattern_value(c, s.worst_pattern, s.signs) * (1 + 1e-12) + 1e-12
    assert s.lower**2 <= hi2 * (1 + 1e-12) + 1e-12
    assert s.upper**2 >= lo2 * (1 - 1e-12) - 1e-12
    if np.all(c.T @ c >= 0):  # F1: the truth is the brute-force maximum
        assert s.lower**2 <= lo2 * (1 + 1e-12) <= s.upper**2 * (1 + 2e-12)
        if s.exact:
            assert math.isclose(s.lower**2, lo2, rel_tol=1e-9)
    return s


@pytest.mark.parametrize("k,sep", [(1, 1), (2, 1), (2, 2), (3, 2), (2, 3), (4, 1)])
def test_tree_minsep_brute_force(k, sep):
    n = 8
    s = _check(BinaryTree(), MinSeparation(max_participations=k, min_sep=sep), n, list(_all_patterns(n, k, sep)))
    assert s.exact


@given(
    st.lists(st.floats(-2, 2, allow_nan=False), min_size=1, max_size=5).filter(lambda c: abs(c[0]) > 0.05),
    st.integers(1, 3),
    st.integers(1, 4),
    st.integers(4, 9),
)
@settings(deadline=None)
def test_toeplitz_minsep_brute_force(coefs, k, sep, n):
    strat = BandedToeplitz(c_col=coefs)
    _check(strat, MinSeparation(max_participations=k, min_sep=sep), n, list(_all_patterns(n, k, sep)))


@settings(deadline=None)
@given(st.integers(0, 10**6), st.integers(1, 3), st.integers(1, 3), st.integers(3, 8), st.booleans())
def test_dense_minsep_brute_force(seed, k, sep, n, signed):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(n, n)) if signed else rng.uniform(0, 1, size=(n, n))
    a = np.tril(a)
    a[np.diag_indices(n)] += 0.1 * np.sign(a[np.diag_indices(n)] + 1e-9)
    _check(DenseStrategy(array=a), MinSeparation(max_participations=k, min_sep=sep), n, list(_all_patterns(n, k, sep)))


@settings(deadline=None)
@given(st.integers(0, 10**6), st.integers(1, 4), st.integers(3, 7))
def test_cyclic_brute_force(seed, period, n):
    rng = np.random.default_rng(seed)
    a = np.tril(rng.normal(size=(n, n)) + 0.5)
    pats = [tuple(range(j, n, period)) for j in range(min(period, n))]
    subs = [q for p in pats for r in range(1, len(p) + 1) for q in itertools.combinations(p, r)]
    _check(DenseStrategy(array=a), Cyclic(period=period), n, subs)


def test_monotone_toeplitz_closed_form_matches_brute_force():
    coefs = [1.0, 0.8, 0.5, 0.5, 0.1]
    n, k, sep = 9, 3, 2
    s = sensitivity(BandedToeplitz(c_col=coefs), MinSeparation(max_participations=k, min_sep=sep), steps=n)
    assert s.exact and "F4" in s.method
    lo2, _ = _truth_interval(BandedToeplitz(c_col=coefs).matrix(n), list(_all_patterns(n, k, sep)))
    assert math.isclose(s.lower**2, lo2, rel_tol=1e-12)


def test_banded_dynamic_programme_exact():
    rng = np.random.default_rng(3)
    n, b = 12, 3
    a = np.tril(rng.normal(size=(n, n))) * (np.tri(n) - np.tri(n, k=-b))
    a[np.diag_indices(n)] = 1.0
    s = _check(DenseStrategy(array=a), MinSeparation(max_participations=3, min_sep=b), n, list(_all_patterns(n, 3, b)))
    assert s.exact and "F3" in s.method


def test_large_dense_reports_bounds_not_exact_claims():
    rng = np.random.default_rng(0)
    c = np.tril(rng.normal(size=(60, 60)))
    s = sensitivity(DenseStrategy(array=c), MinSeparation(max_participations=4, min_sep=5), steps=60)
    assert s.lower < s.upper and not s.exact
    assert s.lower**2 <= pattern_value(c, s.worst_pattern, s.signs) * (1 + 1e-12)


def test_closed_forms():
    assert math.isclose(
        sensitivity(Identity(), MinSeparation(max_participations=5, min_sep=2), steps=20).upper,
        math.sqrt(5),
        rel_tol=1e-9,
    )
    assert math.isclose(sensitivity(BinaryTree(), SINGLE, steps=16).lower, math.sqrt(5), rel_tol=1e-9)
    # BLT with one buffer: c_t = w d^(t-1)
    s = sensitivity(BLT(buf_decay=[0.5], output_scale=[0.5]), SINGLE, steps=30)
    c = np.array([1.0] + [0.5 * 0.5 ** (t - 1) for t in range(1, 30)])
    assert math.isclose(s.upper, float(np.linalg.norm(c)), rel_tol=1e-9)


@pytest.mark.parametrize(
    "bad",
    [
        lambda: BandedToeplitz(c_col=[]),
        lambda: BandedToeplitz(c_col=[0.0, 1.0]),
        lambda: BandedToeplitz(c_col=[1.0, float("nan")]),
        lambda: BandedToeplitz(c_col=[1.0, 0.5], num_bands=1),
        lambda: BandedToeplitz(c_col=[1.0], num_bands=0),
        lambda: BLT(buf_decay=[0.5], output_scale=[0.1, 0.2]),
        lambda: BLT(buf_decay=[1.5], output_scale=[0.1]),
        lambda: DenseStrategy(array=[[1.0, 1.0], [0.0, 1.0]]),
        lambda: DenseStrategy(array=[[1.0, 0.0], [1.0, 0.0]]),
        lambda: DenseStrategy(array=[1.0, 2.0]),
        lambda: MinSeparation(max_participations=0),
        lambda: Cyclic(period=0),
        lambda: sensitivity(Identity(), steps=0),
        lambda: sensitivity(Identity(), "single", steps=3),
        lambda: sensitivity(DenseStrategy(array=np.eye(3)), steps=4),
        lambda: strategy_from_dict({"type": "nope"}),
        lambda: as_strategy("tree"),
    ],
)
def test_bad_input_raises_value_error(bad):
    with pytest.raises(ValueError):
        bad()


def test_round_trip_and_interop():
    s = BandedToeplitz(c_col=[1.0, 0.5])
    assert strategy_from_dict(s.to_dict()) == s
    assert as_strategy(np.array([1.0, 0.5])) == s

    class FakeBLT:  # jax_privacy's BufferedToeplitz has these two arrays
        buf_decay = np.array([0.9])
        output_scale = np.array([0.1])

    assert as_strategy(FakeBLT()) == BLT(buf_decay=[0.9], output_scale=[0.1])


def _per_epoch_patterns(n, t):
    """Every non-empty pattern with at most one step in each epoch [e t, (e + 1) t)."""
    choices = [(None, *range(a, min(a + t, n))) for a in range(0, n, t)]
    for pick in itertools.product(*choices):
        p = tuple(i for i in pick if i is not None)
        if p:
            yield p


@pytest.mark.parametrize("forced", [False, True])
@settings(deadline=None, max_examples=30)
@given(seed=st.integers(0, 10**6), n=st.integers(2, 9), t=st.integers(1, 4), signed=st.booleans(), banded=st.booleans())
def test_per_epoch_brute_force(forced, seed, n, t, signed, banded, monkeypatch_module):
    """Both ends of the one-per-epoch sensitivity against brute force over every pattern and sign vector, on the
    exact search and (``forced``: no pattern enumerated) on the separable bound or the banded chain programme."""
    import tightdp

    sens_module = importlib.import_module("tightdp.matrix.sensitivity")  # the package shadows it by the function

    monkeypatch_module.setattr(sens_module, "BRUTE_FORCE_LIMIT", 0 if forced else 20_000)
    tightdp.clear_caches()
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(n, n)) if signed else rng.uniform(0, 1, size=(n, n))
    a = np.tril(a)
    if banded:  # at most t + 1 bands: only consecutive epochs interact (the chain programme)
        a *= np.tri(n) - np.tri(n, k=-(t + 1))
    a[np.diag_indices(n)] = 1.0
    s = _check(DenseStrategy(array=a), PerEpoch(steps_per_epoch=t), n, list(_per_epoch_patterns(n, t)))
    if banded and not signed:
        assert s.exact  # F1 with the chain programme (or the exact search)
    tightdp.clear_caches()


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def test_per_epoch_tree_over_whole_subtrees_is_exact_and_far_below_any_steps():
    # epochs of 256 steps are whole subtrees: every full pattern has ||C x||^2 = 8 * 9 + 16 + 32 + 64 = 184
    s = sensitivity(BinaryTree(), PerEpoch(steps_per_epoch=256), steps=2048)
    assert s.exact and math.isclose(s.upper**2, 184.0, rel_tol=1e-9)
    any_steps = sensitivity(BinaryTree(), MinSeparation(max_participations=8, min_sep=1), steps=2048)
    assert any_steps.upper > 25.0  # eight adjacent steps, which no per-epoch pattern is


def test_per_epoch_round_trip_and_bad_input():
    from tightdp.matrix import NoAmplification, participation_from_dict, sampler_from_dict

    smp = NoAmplification(participation=PerEpoch(steps_per_epoch=5))
    assert sampler_from_dict(smp.to_dict()) == smp and "per epoch" in smp.describe()
    with pytest.raises(ValueError, match="steps_per_epoch"):
        PerEpoch(steps_per_epoch=0)
    with pytest.raises(ValueError, match="participation type"):
        participation_from_dict({"type": "weekly"})
    with pytest.raises(ValueError, match="bad fields"):
        participation_from_dict({"type": "per_epoch", "period": 3})


@settings(deadline=None, max_examples=30)
@given(seed=st.integers(0, 10**6), rows=st.integers(1, 4), n=st.integers(1, 40), sep=st.integers(1, 9))
def test_min_sep_programme_without_a_binding_count_equals_the_layered_one(seed, rows, n, sep):
    """When the count cannot bind (``k >= ceil(n / sep)``) the two-stage programme's single backward pass gives
    the layered programme's values exactly."""
    sens_module = importlib.import_module("tightdp.matrix.sensitivity")
    x = np.random.default_rng(seed).uniform(0.0, 1.0, size=(rows, n))
    k = -(-n // sep)
    fast = sens_module._dp_max(x, sep, k)
    layered = sens_module._dp_max(x, sep, k, keep=True)[-1]
    assert np.array_equal(fast, layered)

"""Weighted block noise splitting (``tightdp.matrix._row_weights``): the weights are feasible (each row gives out
at most its whole noise variance, checked in exact rationals), the block norms match an independent dense
computation in mpmath, equal shares are never beaten by the weighted choice in the wrong direction, and the
samplers' answers still bracket an exact pair."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from _support import scaled, two_step_banded_delta
from hypothesis import given, settings
from hypothesis import strategies as st

from tightdp.matrix import BandedToeplitz, DenseStrategy, PoissonSampling, matrix_epsilon
from tightdp.matrix._row_weights import _block_norms, _feasible, _weights, weighted_block_norms


def _banded(rng: np.random.Generator, n: int, b: int, signed: bool) -> np.ndarray:
    c = np.zeros((n, n))
    for j in range(b):
        vals = rng.uniform(-1.0 if signed else 0.05, 1.0, n - j) if j < n else []
        c[np.arange(j, n), np.arange(n - j)] = vals
    c[np.arange(n), np.arange(n)] = rng.uniform(0.5, 1.5, n)  # no all-zero column
    return c


@settings(deadline=None, max_examples=scaled(30))
@given(
    b=st.integers(1, 24),
    length=st.integers(1, 30),
    seed=st.integers(0, 2**31),
    decay=st.floats(0.0, 2.0),
)
def test_weights_are_feasible_in_exact_arithmetic(b, length, seed, decay):
    """Every residue class of offsets sums to at most 1 exactly, and every weight is positive."""
    rng = np.random.default_rng(seed)
    a = (rng.uniform(0.1, 1.0, b) / (1.0 + np.arange(b)) ** decay) ** 2
    w = _weights(a, length)
    assert w.size == length + b - 1 and np.all(w > 0)
    for r in range(length):
        assert sum(Fraction(float(x)) for x in w[r::length]) <= 1


@settings(deadline=None, max_examples=scaled(12))
@given(
    n=st.integers(4, 40),
    b=st.integers(2, 8),
    length=st.integers(1, 10),
    signed=st.booleans(),
    seed=st.integers(0, 2**31),
)
def test_block_norms_match_a_dense_computation_in_mpmath(n, b, length, signed, seed):
    """``A_m^2 = max over the block's columns s of sum_i C[i, s]^2 / w(i - m L)``, recomputed at 40 digits from
    the dense matrix (the non-Toeplitz path and, for a Toeplitz ``C``, the coefficient path): the returned
    norms are upper bounds within 1e-12 relative."""
    b = min(b, n)
    rng = np.random.default_rng(seed)
    c = _banded(rng, n, b, signed)
    coefs = c[:b, 0].copy()
    toeplitz = np.zeros((n, n))
    for j in range(b):
        toeplitz[np.arange(j, n), np.arange(n - j)] = coefs[j]
    w = _feasible(rng.uniform(0.05, 1.0, length + b - 1), length)
    for strategy, dense in ((DenseStrategy(array=c), c), (BandedToeplitz(c_col=coefs), toeplitz)):
        got = _block_norms(strategy, n, b, length, w)
        with mpmath.workdps(40):
            for m in range(-(-n // length)):
                exact = max(
                    mpmath.fsum(
                        mpmath.mpf(float(dense[i, s])) ** 2 / mpmath.mpf(float(w[i - m * length]))
                        for i in range(s, min(s + b, n))
                    )
                    for s in range(m * length, min((m + 1) * length, n))
                )
                root = mpmath.sqrt(exact)
                assert got[m] >= root and got[m] <= root * (1 + 1e-12)


@settings(deadline=None, max_examples=scaled(15))
@given(b=st.integers(2, 40), length=st.integers(1, 48), decay=st.floats(0.0, 1.5))
def test_weighted_norms_never_exceed_equal_shares(b, length, decay):
    """Equal shares ``1 / k`` give ``sqrt(k)`` times the largest column norm; the chosen weights never do worse."""
    n = 3 * (b + length)
    c = 1.0 / (1.0 + np.arange(b)) ** decay
    got = weighted_block_norms(BandedToeplitz(c_col=c), n, b, length)
    k = 1 + -(-(b - 1) // length)
    assert float(got.max()) <= math.sqrt(k) * float(np.linalg.norm(c)) * (1 + 1e-12)


def test_a_decaying_column_gains_a_lot():
    """The optimal max-error coefficients (64 bands) at blocks of 8 steps: the weighted square is about 5.71
    against 9 equal shares."""
    k = np.arange(1, 64)
    c = np.cumprod(np.r_[1.0, (2 * k - 1) / (2 * k)])
    c /= np.linalg.norm(c)
    got = weighted_block_norms(BandedToeplitz(c_col=c), 2000, 64, 8)
    assert 5.6 < float(got.max()) ** 2 < 5.8


@settings(deadline=None, max_examples=scaled(20))
@given(b=st.integers(2, 30), length=st.integers(1, 30), decay=st.floats(0.0, 1.5), seed=st.integers(0, 2**31))
def test_no_weights_beat_the_dual_lower_bound(b, length, decay, seed):
    """Weak duality: for column weights ``lambda`` on the simplex, ``min_w sum_s lambda_s sum_j a_j / w(s + j)``
    is ``sum over classes (sum_t sqrt(beta_t))^2`` with ``beta_t = sum_s lambda_s a_(t - s)``, a lower bound on
    every feasible ``w``'s largest column value. A returned square below it would be an unsound norm."""
    rng = np.random.default_rng(seed)
    c = 1.0 / (1.0 + np.arange(b)) ** decay
    a = c**2
    got = float(weighted_block_norms(BandedToeplitz(c_col=c), 4 * (b + length), b, length).max()) ** 2
    size = length + b - 1
    for lam in (np.full(length, 1.0 / length), rng.dirichlet(np.ones(length))):
        beta = np.zeros(size)
        for s_ in range(length):
            beta[s_ : s_ + b] += lam[s_] * a
        dual = sum(float(np.sqrt(beta[r::length]).sum()) ** 2 for r in range(length))
        assert got >= dual * (1 - 1e-12)


@pytest.mark.parametrize("a, q, sigma", [(0.2, 0.5, 1.0), (0.5, 0.2, 0.8), (0.05, 0.9, 2.0)])
def test_weighted_splits_hold_for_an_exact_pair(a, q, sigma):
    """Two steps, ``c = (1, a)``: each weighted split on its own (noise splitting, shares ``1 / (1 + a)`` and
    ``a / (1 + a)``, square ``(1 + a)^2`` against ``2 (1 + a^2)`` for equal halves; and blocks of two steps) is
    an upper bound: the exact pair's delta at its epsilon is at most the target."""
    from tightdp.matrix._ledgers import _epsilon_of
    from tightdp.matrix.strategies import as_strategy

    delta = 1e-3
    ledgers = PoissonSampling(sampling_rate=q).ledgers(as_strategy(np.array([1.0, a])), sigma, 2)
    names, ups = ledgers[2]["upper_names"], ledgers[1]
    checked = 0
    for name, ledger in zip(names, ups, strict=True):
        if ledger and ("splitting" in name):
            eps = _epsilon_of(ledger, delta, None, None).upper
            assert two_step_banded_delta(a, q, sigma, eps) <= delta * (1 + 1e-3), name
            checked += 1
    assert checked == 2


def test_poisson_bandmf_upper_end_tightens():
    """The benchmark's setting (64 bands, 2000 steps, noise 4, Poisson at 1/64): the upper end was 10.43 with
    equal shares; weighted blocks of 8 steps give about 7.34."""
    k = np.arange(1, 64)
    c = np.cumprod(np.r_[1.0, (2 * k - 1) / (2 * k)])
    c /= np.linalg.norm(c)
    b = matrix_epsilon(
        strategy=c, noise_multiplier=4.0, steps=2000, delta=1e-6, sampler=PoissonSampling(sampling_rate=1 / 64)
    )
    assert 5.1 < b.lower < b.upper < 7.5

"""``BandedInverseToeplitz`` (a banded ``C^(-1)``: BISR, DP-lambda-CGD): its coefficients are the inverse's first
column (numpy's dense inverse, jax_privacy's ``inverse_coef``), DP-lambda-CGD is BLT with one buffer, and its
sensitivity matches brute force."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tightdp.cli import main
from tightdp.matrix import (
    BLT,
    BandedInverseToeplitz,
    MinSeparation,
    PoissonSampling,
    matrix_epsilon,
    sensitivity,
    strategy_from_dict,
)


def _banded(coef: list[float], n: int) -> np.ndarray:
    out = np.zeros((n, n))
    for k, v in enumerate(coef[:n]):
        out += np.diag(np.full(n - k, v), -k)
    return out


@settings(deadline=None, max_examples=40)
@given(
    coef=st.lists(st.floats(-0.6, 0.6), min_size=1, max_size=5).map(lambda c: [1.0, *c[1:]]),
    n=st.integers(1, 40),
)
def test_coefficients_are_the_inverse_first_column(coef, n):
    inv = np.linalg.inv(_banded(coef, n))
    assume(np.all(np.abs(inv) < 1e6))
    c = BandedInverseToeplitz(noising_coef=coef).toeplitz_coefs(n)
    assert np.allclose(c, inv[:, 0], rtol=1e-9, atol=1e-12)
    assert np.allclose(BandedInverseToeplitz(noising_coef=coef).matrix(n), inv, rtol=1e-9, atol=1e-12)


def test_dp_lambda_cgd_is_blt_with_one_buffer():
    lam = 0.6
    a, b = BandedInverseToeplitz(noising_coef=[1.0, -lam]), BLT(buf_decay=[lam], output_scale=[lam])
    assert np.allclose(a.toeplitz_coefs(300), b.toeplitz_coefs(300), rtol=1e-13, atol=0.0)
    run = dict(noise_multiplier=3.0, steps=200, delta=1e-6, sampler=PoissonSampling(sampling_rate=0.05))
    ra, rb = matrix_epsilon(strategy=a, **run), matrix_epsilon(strategy=b, **run)
    assert ra.lower == pytest.approx(rb.lower, rel=1e-9) and ra.upper == pytest.approx(rb.upper, rel=1e-9)


def test_agrees_with_jax_privacy_inverse_coef():
    toeplitz = pytest.importorskip("jax_privacy.matrix_factorization.toeplitz")
    coef = [1.0, -0.7, 0.2, -0.05]
    theirs = np.asarray(toeplitz.inverse_coef(np.array(coef), 64), dtype=float)
    ours = BandedInverseToeplitz(noising_coef=coef).toeplitz_coefs(64)
    assert np.allclose(ours, theirs, rtol=1e-5, atol=1e-7)  # jax computes in float32 by default


@settings(deadline=None, max_examples=25)
@given(
    coef=st.lists(st.floats(-0.7, 0.7), min_size=1, max_size=4).map(lambda c: [1.0, *c[1:]]),
    k=st.integers(1, 3),
    sep=st.integers(1, 4),
    n=st.integers(2, 10),
)
def test_min_sep_sensitivity_against_brute_force(coef, k, sep, n):
    """Both ends against the maximum over every min-sep pattern and sign vector of ``||C x||^2`` (signed ``C``
    included: the attained value needs the signs, the upper end must cover them)."""
    strat = BandedInverseToeplitz(noising_coef=coef)
    c = np.linalg.inv(_banded(coef, n))  # the truth from numpy's inverse, not from the strategy's recurrence
    best = 0.0
    for r in range(1, k + 1):
        for p in itertools.combinations(range(n), r):
            if all(b - a >= sep for a, b in itertools.pairwise(p)):
                for signs in itertools.product((1.0, -1.0), repeat=len(p)):
                    v = c[:, list(p)] @ np.array(signs)
                    best = max(best, float(v @ v))
    s = sensitivity(strat, MinSeparation(max_participations=k, min_sep=sep), steps=n)
    assert s.lower**2 <= best * (1 + 1e-9) + 1e-12 and best <= s.upper**2 * (1 + 1e-9) + 1e-12


def test_round_trip_cli_and_bad_input(tmp_path, capsys):
    strat = BandedInverseToeplitz(noising_coef=[1.0, -0.5])
    assert strategy_from_dict(strat.to_dict()) == strat and "banded-inverse" in strat.describe()
    path = tmp_path / "s.json"
    path.write_text(json.dumps(strat.to_dict()))
    assert (
        main(["matrix", "--strategy-file", str(path), "--noise-multiplier", "2", "--steps", "20", "--delta", "1e-5"])
        == 0
    )
    assert "banded-inverse" in capsys.readouterr().out
    with pytest.raises(ValueError, match="noising_coef"):
        BandedInverseToeplitz(noising_coef=[0.0, 1.0])
    with pytest.raises(ValueError, match="noising_coef"):
        BandedInverseToeplitz(noising_coef=[])
    with pytest.raises(ValueError, match="overflows"):
        BandedInverseToeplitz(noising_coef=[1.0, -3.0]).toeplitz_coefs(2000)

"""``privacy_statement(strategy=..., sampler=...)`` and ``tightdp statement --strategy ...``: the statement of a
correlated-noise run states its strategy, participation and sampler and the certified interval of
``tightdp.matrix.matrix_epsilon`` (checked against the Gaussian mechanism's closed form where it is one)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from tightdp import privacy_statement
from tightdp.cli import main
from tightdp.matrix import (
    BandedToeplitz,
    BinaryTree,
    CyclicPoisson,
    Identity,
    MinSeparation,
    NoAmplification,
    matrix_epsilon,
)


def _gaussian_delta(eps: float, mu: float) -> float:
    """Exact delta(eps) of the Gaussian mechanism with mu = sensitivity / sigma (Balle & Wang 2018, Thm 8)."""
    return norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)


def test_tree_statement_brackets_the_gaussian_closed_form_and_names_the_run():
    # binary tree over 64 steps, two participations 32 apart: sensitivity exactly 4 (they share only the root)
    sampler = NoAmplification(participation=MinSeparation(max_participations=2, min_sep=32))
    s = privacy_statement(
        strategy=BinaryTree(), sampler=sampler, noise_multiplier=3.0, steps=64, delta=1e-5, group_sizes=[1, 3]
    )
    lo, up = s.epsilon.lower, s.epsilon.upper
    assert 0 < lo <= up and _gaussian_delta(up, 4 / 3) <= 1e-5 * (1 + 1e-9) <= _gaussian_delta(lo, 4 / 3) * (1 + 2e-9)
    text = s.to_text()
    assert "binary_tree" in text and "up to 2 participations at least 32 steps apart" in text
    assert "no amplification" in text and f"certified interval [{lo:.4f}, {up:.4f}]" in text
    assert s.groups[0].epsilon is s.epsilon and s.groups[1].epsilon is None
    assert "not applicable" in s.groups[1].not_applicable
    d = json.loads(json.dumps(s.to_dict()))
    assert d["parameters"]["mechanism"] == "matrix" and d["certified"] is True
    assert d["parameters"]["sampler"]["participation"]["min_sep"] == 32


def test_bandmf_statement_is_matrix_epsilon():
    kw = dict(
        strategy=BandedToeplitz(c_col=[1.0, 0.5, 0.25]),
        sampler=CyclicPoisson(sampling_rate=0.1),
        noise_multiplier=1.0,
        steps=300,
        delta=1e-5,
    )
    s = privacy_statement(**kw)
    b = matrix_epsilon(**kw)
    assert (s.epsilon.lower, s.epsilon.upper) == (b.lower, b.upper)
    assert "cyclic Poisson sampling at rate 0.1" in s.to_text() and "3 bands" in s.to_text()


def test_default_sampler_is_one_participation():
    s = privacy_statement(strategy=Identity(), noise_multiplier=1.0, steps=10, delta=1e-6)
    assert _gaussian_delta(s.epsilon.upper, 1.0) <= 1e-6 * (1 + 1e-9)
    assert "up to 1 participations" in s.to_text()


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(strategy=Identity(), noise_multiplier=1.0, steps=10, sampling_rate=0.1), "sampling_rate"),
        (dict(strategy=Identity(), noise_multiplier=1.0, steps=10, epochs=2), "epochs"),
        (dict(strategy=Identity(), noise_multiplier=1.0, steps=10, sampling="poisson"), "sampling"),
        (dict(sampler=NoAmplification(), noise_multiplier=1.0, steps=10), "strategy"),
        (dict(strategy=Identity(), sampler="poisson", noise_multiplier=1.0, steps=10), "sampler"),
        (dict(strategy=Identity(), steps=10), "noise_multiplier"),
        (dict(strategy=Identity(), noise_multiplier=1.0), "steps"),
        (dict(strategy=Identity(), noise_multiplier=-1.0, steps=10), "noise_multiplier"),
        (dict(strategy="tree", noise_multiplier=1.0, steps=10), "strategy"),
    ],
)
def test_bad_matrix_run_names_the_argument(kwargs, name):
    with pytest.raises(ValueError, match=name):
        privacy_statement(delta=1e-5, **kwargs)


def test_cli_statement_matches_tightdp_matrix(capsys):
    run = [
        "--strategy",
        "banded",
        "--c-col",
        "1,0.5,0.25",
        "--sampler",
        "cyclic-poisson",
        "--sampling-rate",
        "0.1",
        "--noise-multiplier",
        "1",
        "--steps",
        "300",
        "--delta",
        "1e-5",
        "--json",
    ]
    assert main(["statement", *run]) == 0
    s = json.loads(capsys.readouterr().out)
    assert main(["matrix", *run]) == 0
    m = json.loads(capsys.readouterr().out)
    assert s["epsilon"] == m["epsilon"]
    assert "cyclic Poisson" in s["text"] and "banded Toeplitz" in s["text"]


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--strategy", "tree", "--dataset-size", "100", "--noise-multiplier", "1", "--steps", "8"], "--dataset-size"),
        (["--strategy", "tree", "--config", "x.toml", "--steps", "8"], "--config"),
        (["--strategy", "tree", "--noise-multiplier", "1"], "--steps"),
        (["--strategy", "banded", "--noise-multiplier", "1", "--steps", "8"], "--c-col"),
        (["--sampler", "balls-in-bins", "--noise-multiplier", "1", "--steps", "8"], "--cycle-length"),
    ],
)
def test_cli_bad_matrix_statement_exits_2(capsys, argv, needle):
    assert main(["statement", *argv, "--delta", "1e-5"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err, err


@given(
    sigma=st.floats(0.5, 5.0),
    steps=st.integers(1, 40),
    log_delta=st.floats(-9.0, -3.0),
    c_col=st.lists(st.floats(0.05, 1.0), min_size=1, max_size=4),
)
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_banded_single_participation_statement_brackets_the_closed_form(sigma, steps, log_delta, c_col):
    """One participation of a banded Toeplitz run is the Gaussian mechanism at the largest column norm,
    ``||c_col[:min(steps, bands)]||`` (the first column; later ones are its truncations)."""
    delta = 10.0**log_delta
    s = privacy_statement(strategy=BandedToeplitz(c_col=c_col), noise_multiplier=sigma, steps=steps, delta=delta)
    mu = float(np.linalg.norm(c_col[: min(steps, len(c_col))])) / sigma
    lo, up = s.epsilon.lower, s.epsilon.upper
    assert 0 <= lo <= up and math.isfinite(up)
    assert _gaussian_delta(up, mu) <= delta * (1 + 1e-6) + 1e-300
    assert lo == 0 or _gaussian_delta(lo, mu) >= delta * (1 - 1e-6)
    assert s.certified and f"{steps:,} steps" in s.to_text()


def test_poisson_tree_statement_says_the_count_is_revealed():
    from tightdp.matrix import BinaryTree, PoissonSampling

    stmt = privacy_statement(
        strategy=BinaryTree(), sampler=PoissonSampling(sampling_rate=0.05), noise_multiplier=5.0, steps=64, delta=1e-6
    )
    assert any("counts how often the example took part" in n for n in stmt.notes), stmt.notes
    plain = privacy_statement(strategy=BinaryTree(), noise_multiplier=5.0, steps=64, delta=1e-6)
    assert not any("counts how often" in n for n in plain.notes)

"""``tightdp matrix``: the certified epsilon of a correlated-noise run, checked against closed forms and against
``tightdp epsilon`` where the matrix run is DP-SGD; bad input exits 2 with one line naming the option."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest
from scipy.stats import norm

from tightdp.cli import main


def _json(capsys, argv) -> dict:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _gaussian_delta(eps: float, mu: float) -> float:
    """Exact delta(eps) of the Gaussian mechanism with mu = sensitivity / sigma (Balle & Wang 2018, Thm 8)."""
    return norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)


def _brackets_exact(d: dict, mu: float, delta: float) -> None:
    lo, up = d["epsilon"]["lower"], d["epsilon"]["upper"]
    assert 0 <= lo <= up
    assert _gaussian_delta(up, mu) <= delta * (1 + 1e-9)  # the upper end is at least the exact epsilon
    assert lo == 0 or _gaussian_delta(lo, mu) >= delta * (1 - 1e-9)  # the lower end at most


def test_identity_single_participation_is_the_gaussian_mechanism(capsys):
    d = _json(
        capsys, ["matrix", "--strategy", "identity", "--noise-multiplier", "0.8", "--steps", "50", "--delta", "1e-5"]
    )
    _brackets_exact(d, 1 / 0.8, 1e-5)
    assert d["kind"] == "bound" and d["parameters"]["strategy"] == {"type": "identity"}


def test_tree_with_two_participations_matches_its_exact_sensitivity(capsys):
    # binary tree over 64 steps: each step lies in log2(64) + 1 = 7 nodes; two participations 32 apart share only
    # the root, so ||C(e_0 + e_32)||^2 = 6 + 6 + 4 = 16 and the run is the Gaussian mechanism with mu = 4 / sigma
    d = _json(
        capsys,
        [
            "matrix",
            "--strategy",
            "tree",
            "--participations",
            "2",
            "--min-sep",
            "32",
            "--noise-multiplier",
            "3",
            "--steps",
            "64",
            "--delta",
            "1e-5",
        ],
    )
    _brackets_exact(d, 4 / 3, 1e-5)
    assert d["details"]["sensitivity"]["worst_pattern"] == [0, 32]


def test_banded_single_participation_from_a_file(tmp_path, capsys):
    col = np.array([1.0, 0.6, 0.3])
    path = tmp_path / "c.npy"
    np.save(path, col)
    d = _json(
        capsys,
        [
            "matrix",
            "--strategy",
            "banded",
            "--c-col",
            str(path),
            "--noise-multiplier",
            "2",
            "--steps",
            "40",
            "--delta",
            "1e-6",
        ],
    )
    _brackets_exact(d, float(np.linalg.norm(col)) / 2, 1e-6)
    txt = tmp_path / "c.txt"
    txt.write_text("1.0\n0.6\n0.3\n")
    js = tmp_path / "c.json"
    js.write_text(json.dumps({"c_col": [1.0, 0.6, 0.3]}))
    for source in (str(txt), str(js), "1,0.6,0.3"):
        e = _json(
            capsys,
            [
                "matrix",
                "--strategy",
                "banded",
                "--c-col",
                source,
                "--noise-multiplier",
                "2",
                "--steps",
                "40",
                "--delta",
                "1e-6",
            ],
        )
        assert e["epsilon"] == d["epsilon"]


def test_cyclic_poisson_with_period_one_is_dp_sgd(capsys):
    run = ["--noise-multiplier", "1.0", "--steps", "200", "--delta", "1e-5"]
    m = _json(
        capsys,
        [
            "matrix",
            "--strategy",
            "identity",
            "--sampler",
            "cyclic-poisson",
            "--sampling-rate",
            "0.05",
            "--period",
            "1",
            *run,
        ],
    )
    s = _json(capsys, ["epsilon", "--sampling-rate", "0.05", *run])
    assert max(m["epsilon"]["lower"], s["epsilon"]["lower"]) <= min(m["epsilon"]["upper"], s["epsilon"]["upper"])
    assert m["epsilon"]["upper"] - m["epsilon"]["lower"] < 0.05


def test_strategy_file_and_calibration(tmp_path, capsys):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"type": "banded_toeplitz", "c_col": [1.0, 0.4], "num_bands": 2}))
    d = _json(
        capsys,
        [
            "matrix",
            "--strategy-file",
            str(path),
            "--sampler",
            "cyclic-poisson",
            "--sampling-rate",
            "0.1",
            "--target-epsilon",
            "2",
            "--steps",
            "100",
            "--delta",
            "1e-5",
        ],
    )
    assert d["epsilon"]["upper"] <= 2 and d["target_epsilon"] == 2
    sigma = d["noise_multiplier"]
    below = _json(
        capsys,
        [
            "matrix",
            "--strategy-file",
            str(path),
            "--sampler",
            "cyclic-poisson",
            "--sampling-rate",
            "0.1",
            "--noise-multiplier",
            str(sigma * 0.98),
            "--steps",
            "100",
            "--delta",
            "1e-5",
        ],
    )
    assert below["epsilon"]["upper"] > 2  # the calibrated noise is (nearly) the smallest that meets the target


def test_text_output_names_strategy_and_sampler(capsys):
    assert (
        main(
            [
                "matrix",
                "--strategy",
                "blt",
                "--buf-decay",
                "0.9",
                "--output-scale",
                "0.2",
                "--sampler",
                "balls-in-bins",
                "--cycle-length",
                "4",
                "--noise-multiplier",
                "2",
                "--steps",
                "16",
                "--delta",
                "1e-5",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "BLT" in out and "balls-in-bins, cycle length 4" in out and "epsilon" in out


def test_aligned_gradients_reach_the_poisson_sampler(capsys):
    """``--aligned-gradients`` is MMCC's scalar model: the run's description says so."""
    argv = ["matrix", "--strategy", "tree", "--sampler", "poisson", "--sampling-rate", "0.05", "--aligned-gradients"]
    assert main([*argv, "--noise-multiplier", "3", "--steps", "8", "--delta", "1e-5"]) == 0
    assert "gradients assumed aligned" in capsys.readouterr().out


def test_min_sep_sampler_matches_the_library(capsys):
    """``--sampler min-sep`` (b-min-sep) gives the library's interval for the same run, warm and cold start."""
    import json

    from tightdp.matrix import BandedToeplitz, MinSepSampling, matrix_epsilon

    for cold in (False, True):
        argv = [
            "matrix", "--strategy", "banded", "--c-col", "1,0.5", "--sampler", "min-sep", "--sampling-rate", "0.2",
            "--min-sep", "2", "--noise-multiplier", "2", "--steps", "12", "--delta", "1e-5", "--json",
        ]  # fmt: skip
        assert main(argv + (["--cold-start"] if cold else [])) == 0
        got = json.loads(capsys.readouterr().out)
        want = matrix_epsilon(
            strategy=BandedToeplitz(c_col=[1, 0.5]),
            noise_multiplier=2.0,
            steps=12,
            delta=1e-5,
            sampler=MinSepSampling(sampling_rate=0.2, min_sep=2, warm_start=not cold),
        )
        assert got["epsilon"]["upper"] == pytest.approx(want.upper, rel=1e-12)
        assert got["epsilon"]["lower"] == pytest.approx(want.lower, rel=1e-12)


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--strategy", "banded"], "--c-col"),
        (["--strategy", "identity", "--bands", "3"], "--bands"),
        (["--strategy", "blt", "--buf-decay", "0.9"], "--output-scale"),
        (["--sampler", "poisson"], "--sampling-rate"),
        (["--sampler", "poisson", "--sampling-rate", "0.1", "--cycle-length", "4"], "--cycle-length"),
        (["--sampler", "poisson", "--sampling-rate", "1.5"], "--sampling-rate"),
        (["--sampler", "balls-in-bins", "--cycle-length", "0"], "--cycle-length"),
        (["--sampler", "min-sep", "--sampling-rate", "0.1"], "--min-sep"),
        (["--sampler", "min-sep", "--sampling-rate", "0.1", "--min-sep", "0"], "--min-sep"),
        (["--sampler", "poisson", "--sampling-rate", "0.1", "--cold-start"], "--cold-start"),
        (["--sampler", "balls-in-bins", "--cycle-length", "4", "--aligned-gradients"], "--aligned-gradients"),
        (["--period", "4", "--participations", "2"], "--period"),
        (["--steps-per-epoch", "5", "--min-sep", "2"], "--steps-per-epoch"),
        (["--steps-per-epoch", "0"], "--steps-per-epoch"),
        (["--participations", "1.5"], "--participations"),
        (["--strategy", "banded", "--c-col", "1,x"], "--c-col"),
        (["--strategy", "banded", "--c-col", "/nonexistent/c.npy"], "/nonexistent/c.npy"),
        (["--strategy-file", "/nonexistent/s.json"], "/nonexistent/s.json"),
        (["--strategy", "tree", "--strategy-file", "x.json"], "--strategy-file"),
    ],
)
def test_bad_input_exits_2_naming_the_option(capsys, argv, needle):
    base = ["--noise-multiplier", "1", "--steps", "20", "--delta", "1e-5"]
    assert main(["matrix", *argv, *base]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("tightdp: error:") and needle in err, err


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--steps", "20", "--delta", "1e-5"], "--noise-multiplier"),
        (["--noise-multiplier", "1", "--target-epsilon", "1", "--steps", "20", "--delta", "1e-5"], "--target-epsilon"),
        (["--noise-multiplier", "-1", "--steps", "20", "--delta", "1e-5"], "--noise-multiplier"),
        (["--noise-multiplier", "1", "--steps", "0", "--delta", "1e-5"], "--steps"),
        (["--noise-multiplier", "1", "--steps", "20", "--delta", "2"], "--delta"),
    ],
)
def test_bad_run_exits_2(capsys, argv, needle):
    assert main(["matrix", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err, err


def test_bad_strategy_file_contents(tmp_path, capsys):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"type": "nonsense"}))
    assert (
        main(["matrix", "--strategy-file", str(path), "--noise-multiplier", "1", "--steps", "5", "--delta", "1e-5"])
        == 2
    )
    assert "--strategy-file" in capsys.readouterr().err
    path.write_text("{not json")
    assert (
        main(["matrix", "--strategy-file", str(path), "--noise-multiplier", "1", "--steps", "5", "--delta", "1e-5"])
        == 2
    )
    assert "not JSON" in capsys.readouterr().err


def test_subprocess_bad_sampler_is_one_line_exit_2():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "tightdp",
            "matrix",
            "--sampler",
            "shuffle",
            "--noise-multiplier",
            "1",
            "--steps",
            "5",
            "--delta",
            "1e-5",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "--sampler" in out.stderr


@pytest.mark.parametrize(
    "participation",
    [["--participations", "0", "--min-sep", "10"], ["--period", "10"], ["--steps-per-epoch", "10"]],
)
def test_every_tenth_step_is_five_participations(capsys, participation):
    # identity strategy over 50 steps, a user in every 10th step (as many as fit, or cyclic): sensitivity sqrt(5)
    d = _json(
        capsys,
        [
            "matrix",
            "--strategy",
            "identity",
            *participation,
            "--noise-multiplier",
            "2",
            "--steps",
            "50",
            "--delta",
            "1e-5",
        ],
    )
    _brackets_exact(d, math.sqrt(5) / 2, 1e-5)

"""`tightdp epsilon --sampling` for the schemes answered by `dpsgd_epsilon(sampling=...)`."""

import json

import pytest

import tightdp
from tightdp.cli import main


def _run(argv, capsys):
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_balls_and_bins_from_epochs_matches_the_api(capsys):
    code, out, _ = _run(
        [
            "epsilon",
            "--noise-multiplier",
            "1.1",
            "--sampling",
            "random-allocation",
            "--dataset-size",
            "50000",
            "--batch-size",
            "256",
            "--epochs",
            "100",
            "--delta",
            "1e-5",
            "--json",
        ],
        capsys,
    )
    assert code == 0
    got = json.loads(out)["epsilon"]
    # 196 batches an epoch (ceil(50000 / 256)), as the epochs are counted: t = 196, 100 epochs
    ref = tightdp.dpsgd_epsilon(
        noise_multiplier=1.1, sampling_rate=1 / 196, steps=19600, delta=1e-5, sampling="random-allocation"
    )
    assert (got["lower"], got["upper"]) == (ref.lower, ref.upper)


@pytest.mark.parametrize(
    "extra",
    [
        ["--sampling", "shuffle", "--sampling-rate", "0.01", "--steps", "200"],
        [
            "--sampling",
            "truncated-poisson",
            "--sampling-rate",
            "0.005",
            "--dataset-size",
            "50000",
            "--max-batch-size",
            "300",
            "--steps",
            "200",
        ],
    ],
)
def test_other_schemes_answer(extra, capsys):
    code, out, _ = _run(["epsilon", "--noise-multiplier", "1.1", *extra, "--delta", "1e-5", "--json"], capsys)
    assert code == 0
    eps = json.loads(out)["epsilon"]
    assert 0 <= eps["lower"] <= eps["upper"]


@pytest.mark.parametrize(
    "argv,needle",
    [
        (
            ["delta", "--epsilon", "1", "--sampling", "shuffle", "--sampling-rate", "0.01", "--steps", "100"],
            "tightdp epsilon",
        ),
        (
            ["epsilon", "--delta", "1e-5", "--sampling", "shuffle", "--sampling-rate", "0.003", "--steps", "100"],
            "--sampling-rate",
        ),
        (
            [
                "epsilon",
                "--delta",
                "1e-5",
                "--sampling",
                "truncated-poisson",
                "--sampling-rate",
                "0.01",
                "--steps",
                "100",
            ],
            "--max-batch-size",
        ),
        (
            [
                "epsilon",
                "--delta",
                "1e-5",
                "--sampling",
                "random-allocation",
                "--sampling-rate",
                "0.01",
                "--steps",
                "100",
                "--relation",
                "remove",
            ],
            "--relation",
        ),
        (
            [
                "epsilon",
                "--delta",
                "1e-5",
                "--sampling",
                "random-allocation",
                "--sampling-rate",
                "0.01",
                "--steps",
                "100",
                "--accountant",
                "prv",
            ],
            "--accountant",
        ),
    ],
)
def test_scheme_misuse_is_one_line_exit_2(argv, needle, capsys):
    code, _, err = _run([argv[0], "--noise-multiplier", "1.0", *argv[1:]], capsys)
    assert code == 2 and needle in err and err.count("\n") == 1

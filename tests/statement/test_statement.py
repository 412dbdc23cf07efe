"""``tightdp.privacy_statement`` / ``tightdp statement``: the certified one-call privacy statement, and the
f-DP trade-off lower curve (``tightdp.tradeoff.tradeoff_lower_curve``)."""

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.special import ndtr, ndtri

import tightdp
from tightdp.bounds import Bounds
from tightdp.cli import main
from tightdp.statement import privacy_statement
from tightdp.tradeoff import tradeoff_from_accountant, tradeoff_lower_curve

ROOT = Path(__file__).resolve().parents[2]
CIFAR = [
    "--noise-multiplier",
    "1.1",
    "--dataset-size",
    "50000",
    "--batch-size",
    "256",
    "--epochs",
    "100",
    "--delta",
    "1e-5",
]


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def interval(d):
    return d["lower"], d["estimate"], d["upper"]


def test_cifar_statement_agrees_with_epsilon_and_group_commands(capsys):
    code, out, err = run(capsys, "statement", *CIFAR, "--group-size", "2", "--group-size", "4", "--json")
    assert code == 0 and err == ""
    s = json.loads(out)
    code, out, _ = run(capsys, "epsilon", *CIFAR, "--json")
    assert code == 0
    e = json.loads(out)
    assert interval(s["epsilon"]) == interval(e["epsilon"])  # the same certified interval, to the last digit
    assert s["parameters"]["steps"] == e["parameters"]["steps"] == 19_600
    assert s["kind"] == "bound" and s["certified"] and s["accountant"] == e["accountant"]
    assert s["epsilon"]["upper"] - s["epsilon"]["lower"] <= 2 * 0.01 + 1e-12
    for row in s["groups"]:
        code, out, _ = run(
            capsys,
            "group",
            "--noise-multiplier",
            "1.1",
            "--sampling-rate",
            str(256 / 50000),
            "--steps",
            "19600",
            "--delta",
            "1e-5",
            "--group-size",
            str(row["group_size"]),
            "--json",
        )
        assert code == 0
        g = json.loads(out)
        assert interval(row["epsilon"]) == interval(g["epsilon"])
    ups = [s["epsilon"]["upper"]] + [r["epsilon"]["upper"] for r in s["groups"]]
    assert ups == sorted(ups) and ups[-1] > 4 * s["epsilon"]["lower"]  # groups cost more, k = 4 more than 4x


def test_text_spells_out_the_assumptions(capsys):
    code, out, err = run(capsys, "statement", *CIFAR, "--group-size", "2")
    assert code == 0 and err == ""
    for phrase in (
        "Example-level DP at delta = 1e-05",
        "certified interval",
        "k = 2",
        "Sampling: Poisson",
        "adding or removing one example",
        "Hyper-parameter tuning",
        "Adaptive composition",
        "every intermediate model",
        "What it does not cover",
    ):
        assert phrase in " ".join(out.split()), phrase


def test_statement_from_the_report_config_matches_the_flags(capsys):
    config = str(ROOT / "examples" / "report_config.toml")
    code, out, _ = run(capsys, "statement", "--config", config, "--json")
    assert code == 0
    s = json.loads(out)
    flags = privacy_statement(
        noise_multiplier=1.1, dataset_size=50000, batch_size=256, epochs=100, delta=1e-5, group_sizes=[2, 4]
    )
    assert interval(s["epsilon"]) == (flags.epsilon.lower, flags.epsilon.estimate, flags.epsilon.upper)
    assert [r["group_size"] for r in s["groups"]] == [2, 4]
    assert [r["epsilon"]["upper"] for r in s["groups"]] == [g.epsilon.upper for g in flags.groups]
    code, out, _ = run(capsys, "statement", "--config", config, "--delta", "1e-6", "--group-size", "3", "--json")
    s6 = json.loads(out)
    assert s6["delta"] == 1e-6 and s6["epsilon"]["lower"] > s["epsilon"]["upper"]
    assert [r["group_size"] for r in s6["groups"]] == [3]


def test_fixed_batch_is_the_group_engine_at_k_1():
    s = privacy_statement(
        noise_multiplier=2.0,
        sampling="fixed-batch",
        dataset_size=50_000,
        batch_size=500,
        steps=2000,
        delta=1e-6,
        group_sizes=[4],
    )
    ref1 = tightdp.group_epsilon(
        noise_multiplier=2.0,
        sampling="fixed-batch",
        dataset_size=50_000,
        batch_size=500,
        steps=2000,
        delta=1e-6,
        group_size=1,
    )
    ref4 = tightdp.group_epsilon(
        noise_multiplier=2.0,
        sampling="fixed-batch",
        dataset_size=50_000,
        batch_size=500,
        steps=2000,
        delta=1e-6,
        group_size=4,
    )
    assert (s.epsilon.lower, s.epsilon.upper) == (ref1.lower, ref1.upper)
    assert (s.groups[0].epsilon.lower, s.groups[0].epsilon.upper) == (ref4.lower, ref4.upper)
    assert "twice the clipping norm" in " ".join(s.to_text().split())


@pytest.mark.parametrize("sampling", ["random-allocation", "shuffle"])
def test_epoch_schemes_use_dpsgd_epsilon_and_group_epsilon(sampling):
    s = privacy_statement(
        noise_multiplier=1.0,
        dataset_size=10_000,
        batch_size=100,
        epochs=2,
        delta=1e-5,
        sampling=sampling,
        group_sizes=[1, 2],
    )
    ref = tightdp.dpsgd_epsilon(noise_multiplier=1.0, sampling_rate=0.01, steps=200, delta=1e-5, sampling=sampling)
    assert (s.epsilon.lower, s.epsilon.upper) == (ref.lower, ref.upper)
    assert s.groups[0].epsilon is s.epsilon  # k = 1 is the example level
    g = tightdp.group_epsilon(
        noise_multiplier=1.0, sampling_rate=0.01, steps=200, delta=1e-5, group_size=2, sampling=sampling
    )
    assert (s.groups[1].epsilon.lower, s.groups[1].epsilon.upper) == (g.lower, g.upper)
    assert "Group privacy" in s.to_text() and s.certified


def test_truncated_poisson_groups_are_not_applicable():
    s = privacy_statement(
        noise_multiplier=1.0,
        dataset_size=10_000,
        sampling_rate=0.01,
        steps=100,
        delta=1e-5,
        sampling="truncated-poisson",
        max_batch_size=130,
        group_sizes=[2],
    )
    assert s.groups[0].epsilon is None and s.groups[0].not_applicable.startswith("not applicable: Ganesh")
    assert "not applicable" in s.to_text() and s.certified


def test_without_replacement_is_the_substitute_relation(capsys):
    s = privacy_statement(
        noise_multiplier=1.0, sampling="without-replacement", sampling_rate=0.01, steps=1000, delta=1e-5
    )
    code, out, _ = run(
        capsys,
        "epsilon",
        "--noise-multiplier",
        "1.0",
        "--sampling",
        "without-replacement",
        "--sampling-rate",
        "0.01",
        "--steps",
        "1000",
        "--delta",
        "1e-5",
        "--json",
    )
    assert code == 0
    assert (s.epsilon.lower, s.epsilon.upper) == (
        json.loads(out)["epsilon"]["lower"],
        json.loads(out)["epsilon"]["upper"],
    )
    assert "substitute relation" in " ".join(s.to_text().split())


def test_schedule_composes_the_segments():
    sched = [(2.0, 0.01, 1000), (1.5, 0.02, 500)]
    s = privacy_statement(schedule=sched, delta=1e-6, group_sizes=[4])
    ref = tightdp.group_epsilon_schedule(schedule=sched, delta=1e-6, group_size=4)
    assert (s.groups[0].epsilon.lower, s.groups[0].epsilon.upper) == (ref.lower, ref.upper)
    acc = tightdp.ConnectDotsAccountant()
    for sigma, q, k in sched:
        acc.compose(tightdp.dpsgd_mechanism(noise_multiplier=sigma, sampling_rate=q), k)
    e = acc.epsilon(1e-6)
    assert (s.epsilon.lower, s.epsilon.upper) == (e.lower, e.upper)
    assert s.parameters["steps"] == 1500


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(noise_multiplier=0.0, sampling_rate=0.01, steps=10, delta=1e-5), "noise_multiplier"),
        (dict(noise_multiplier=1.0, sampling_rate=0.01, steps=10, delta=1.5), "delta"),
        (dict(noise_multiplier=1.0, sampling_rate=0.01, steps=10, delta=1e-5, group_sizes=[0]), "group_sizes[0]"),
        (dict(noise_multiplier=1.0, sampling_rate=0.01, steps=10, delta=1e-5, sampling="bogus"), "sampling"),
        (
            dict(noise_multiplier=1.0, sampling_rate=0.02, dataset_size=100, batch_size=1, steps=10, delta=1e-5),
            "sampling_rate",
        ),
        (dict(noise_multiplier=1.0, dataset_size=100, batch_size=1, steps=10, epochs=1, delta=1e-5), "steps"),
        (dict(noise_multiplier=1.0, sampling="fixed-batch", sampling_rate=0.01, steps=10, delta=1e-5), "fixed-batch"),
        (dict(schedule=[(1.0, 0.01)], delta=1e-5), "schedule[0]"),
        (dict(noise_multiplier=1.0, schedule=[(1.0, 0.01, 10)], delta=1e-5), "schedule replaces noise_multiplier"),
    ],
)
def test_bad_input_names_the_argument(kwargs, name):
    with pytest.raises(ValueError, match=name.replace("[", r"\[").replace("]", r"\]")):
        privacy_statement(**kwargs)


def test_cli_bad_input_is_one_line_exit_2(capsys):
    for argv, option in (
        [
            ["--noise-multiplier", "-1", "--sampling-rate", "0.01", "--steps", "10", "--delta", "1e-5"],
            "--noise-multiplier",
        ],
        [["--config", "examples/report_config.toml", "--steps", "3"], "--steps"],
        [["--noise-multiplier", "1", "--sampling-rate", "0.01", "--steps", "10"], "--delta"],
        [["--config", "does-not-exist.toml"], "config"],
    ):
        code, out, err = run(capsys, "statement", *argv)
        assert code == 2 and out == ""
        assert err.count("\n") == 1 and option in err, err


def test_uncertified_epsilon_exits_1(capsys, monkeypatch):
    from tightdp.runs import TrainingRun

    def no_bound(self, **kwargs):
        return Bounds(1.0, float("inf"), float("inf"), "epsilon", "bound", {"note": "grid too small (test stub)"})

    monkeypatch.setattr(TrainingRun, "epsilon", no_bound)
    code, out, err = run(
        capsys, "statement", "--noise-multiplier", "1", "--sampling-rate", "0.01", "--steps", "10", "--delta", "1e-5"
    )
    assert code == 1 and "inf" in out
    assert err.count("\n") == 1 and "no certified upper bound" in err and "test stub" in err


# ----------------------------------------------------------------------------------------- f-DP trade-off
@pytest.mark.parametrize("sigma, count", [(1.0, 1), (2.0, 9), (0.7, 3)])
def test_tradeoff_lower_curve_of_a_gaussian_ledger_against_the_mu_gdp_closed_form(sigma, count):
    """A plain Gaussian ledger is mu-GDP, mu = sqrt(count) / sigma, with trade-off Phi(Phi^-1(1 - a) - mu)
    (Dong, Roth, Su 2022, Def. 2.7 / Cor. 2.13): the curve from the certified upper delta(eps) must lie
    below it (certified) and close to it (the envelope over 120 epsilons)."""
    acc = tightdp.ConnectDotsAccountant().compose(tightdp.Gaussian(noise_multiplier=sigma), count)
    alphas = np.linspace(0.0, 1.0, 401)
    _a, beta = tradeoff_from_accountant(acc, alphas=alphas)
    mu = np.sqrt(count) / sigma
    exact = ndtr(ndtri(1.0 - alphas) - mu)
    assert np.all(beta <= exact + 1e-12)
    assert np.max(exact - beta) < 0.02
    assert beta[0] == pytest.approx(1.0, abs=1e-6) and beta[-1] == 0.0
    assert np.all(np.diff(beta) <= 1e-15)  # a trade-off curve is non-increasing


def test_tradeoff_lower_curve_of_one_pure_dp_guarantee():
    """eps-DP alone: f(a) = max(0, 1 - e^eps a, e^-eps (1 - a)) (Dong, Roth, Su 2022, Eq. (3))."""
    _a, beta = tradeoff_lower_curve([1.0], [0.0], alphas=[0.0, 0.1, 0.5, 1.0])
    e = np.e
    expected = [1.0, max(1 - e * 0.1, (1 - 0.1) / e), max(0.0, (1 - 0.5) / e), 0.0]
    assert beta == pytest.approx(expected, abs=1e-14)
    assert np.all(beta <= np.array(expected))


@pytest.mark.parametrize(
    "args, name",
    [
        (([-1.0], [0.1]), "epsilons"),
        (([1.0], [1.5]), "delta_upper"),
        (([1.0, 2.0], [0.1]), "delta_upper"),
        (([1.0], [float("nan")]), "delta_upper"),
    ],
)
def test_tradeoff_bad_input(args, name):
    with pytest.raises(ValueError, match=name):
        tradeoff_lower_curve(*args)

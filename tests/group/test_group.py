"""Group-level privacy of DP-SGD (Ganesh 2024): MoG accounting, baselines, API and CLI.

Reference values: dp_accounting 0.6.0 ``MixtureOfGaussiansDpEvent`` (pessimistic
PLD, interval 1e-3) in tests/data/public_reference.json, Ganesh 2024 Sec. 4
(sigma = 1, k = 9 is finite by MoG; the linear reference k * eps_1 lies below).
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import mpmath as mp
import pytest

import tightdp
from tightdp.cli import main
from tightdp.group import (
    ExampleCurve,
    _log_group_factor,
    group_curve,
    group_epsilon,
    group_epsilon_schedule,
    group_ledger,
    group_mechanism,
    group_privacy_lemma_epsilon,
    group_report,
)
from tightdp.mechanisms import GroupFixedBatchSampled, GroupPoissonSampled

REFERENCE = Path(__file__).resolve().parents[1] / "data" / "public_reference.json"
FIG1 = dict(sampling_rate=0.01, steps=2000, delta=1e-6)  # Ganesh 2024 Sec. 4


def _mog_references():
    if not REFERENCE.exists():
        return []
    rows = json.loads(REFERENCE.read_text())
    return [r for r in rows if r.get("mechanism") == "group_poisson_subsampled_gaussian"]


# ------------------------------------------------------------------------------- truth
def test_group_size_one_equals_the_example_level_answer():
    ex = tightdp.dpsgd_epsilon(noise_multiplier=2.0, **FIG1)
    g = group_epsilon(noise_multiplier=2.0, group_size=1, **FIG1)
    assert g.kind == "bound"
    assert abs(g.estimate - ex.estimate) <= 0.005
    assert g.lower <= ex.upper and ex.lower <= g.upper


@pytest.mark.parametrize("row", _mog_references(), ids=lambda r: f"k={r['group_size']}")
def test_against_dp_accounting_reference_values(row):
    """dp_accounting's answer is a pessimistic estimate: our certified lower bound must not exceed it."""
    g = group_epsilon(
        noise_multiplier=row["noise_multiplier"],
        sampling_rate=row["sampling_rate"],
        steps=row["steps"],
        delta=row["delta"],
        group_size=row["group_size"],
    )
    ref = row["epsilon"]
    assert g.lower <= ref
    assert abs(g.estimate - ref) <= 0.01 + 1e-3 * ref  # same quantity, their grid 1e-3 vs our eps_error 0.01
    assert g.upper - g.lower <= 0.03


def test_reference_file_has_the_group_rows():
    assert {r["group_size"] for r in _mog_references()} == {1, 2, 4, 8}


@pytest.mark.slow
def test_sigma_one_k_nine_is_finite_monotone_and_above_linear():
    """Ganesh 2024 Sec. 4: TF Privacy's lemma route gives eps = inf here; the MoG route is finite."""
    sizes = [1, 2, 5, 9]
    res = [group_epsilon(noise_multiplier=1.0, group_size=k, **FIG1) for k in sizes]
    assert all(b.kind == "bound" and math.isfinite(b.upper) and b.upper > 0 for b in res)
    for a, b in itertools.pairwise(res):
        assert b.lower > a.upper  # strictly increasing in k, beyond the error bars
    eps1 = res[0]
    for k, b in zip(sizes, res):
        assert b.lower >= k * eps1.lower - 1e-9
        assert b.estimate >= k * eps1.estimate - 1e-9
    assert 30.0 < res[-1].upper < 60.0  # Ganesh 2024 Fig. 1 (sigma = 1, k = 9): tens, not infinity


@pytest.mark.parametrize("k", [2, 4])
def test_fixed_batch_with_doubled_noise_matches_poisson(k):
    """Ganesh 2024 Sec. 4: with n >> B >> k, 2 Hypergeom(B, n + k, k) at 2 sigma ~ Binom(k, B / n) at sigma."""
    p = group_epsilon(noise_multiplier=2.0, group_size=k, **FIG1)
    f = group_epsilon(
        noise_multiplier=4.0,
        steps=2000,
        delta=1e-6,
        group_size=k,
        sampling="fixed-batch",
        dataset_size=50_000,
        batch_size=500,
    )
    assert abs(f.estimate / p.estimate - 1.0) < 0.03


def test_fixed_batch_without_doubling_is_much_worse():
    """Each drawn member moves the batch gradient by up to 2 (it displaces another example)."""
    p = group_epsilon(noise_multiplier=2.0, group_size=2, **FIG1)
    f = group_epsilon(
        noise_multiplier=2.0,
        steps=2000,
        delta=1e-6,
        group_size=2,
        sampling="fixed-batch",
        dataset_size=50_000,
        batch_size=500,
    )
    assert f.lower > 1.5 * p.upper


def test_schedule_composes_segments():
    whole = group_epsilon(noise_multiplier=2.0, sampling_rate=0.01, steps=1000, delta=1e-6, group_size=3)
    halves = group_epsilon_schedule(schedule=[(2.0, 0.01, 500), (2.0, 0.01, 500)], delta=1e-6, group_size=3)
    assert abs(halves.estimate - whole.estimate) <= 0.005
    mixed = group_epsilon_schedule(schedule=[(2.0, 0.01, 500), (3.0, 0.01, 500)], delta=1e-6, group_size=3)
    quiet = group_epsilon(noise_multiplier=3.0, sampling_rate=0.01, steps=1000, delta=1e-6, group_size=3)
    assert quiet.upper < mixed.lower and mixed.upper < whole.lower
    fixed = group_epsilon_schedule(
        schedule=[(4.0, 500, 500), (4.0, 250, 500)],
        delta=1e-6,
        group_size=2,
        sampling="fixed-batch",
        dataset_size=50_000,
    )
    assert math.isfinite(fixed.upper) and len(fixed.details["mechanisms"]) == 2


# ------------------------------------------------------------------------------- baselines
@pytest.mark.parametrize("eps, k", [(0.0, 1), (0.0, 7), (1e-12, 5), (0.3, 2), (2.0, 9), (40.0, 64), (700.0, 64)])
def test_log_group_factor_matches_mpmath(eps, k):
    with mp.workdps(40):
        ref = mp.log(mp.fsum(mp.exp(j * mp.mpf(eps)) for j in range(k)))
    assert _log_group_factor(eps, k) == pytest.approx(float(ref), rel=1e-13, abs=1e-15)


def test_group_privacy_lemma_is_certified_and_above_the_tight_answer():
    acc = tightdp.PRVAccountant(eps_error=0.01).compose(
        GroupPoissonSampled(noise_multiplier=2.0, sampling_rate=0.01, group_size=1), 2000
    )
    curve = ExampleCurve(acc)
    one = group_privacy_lemma_epsilon(curve, delta=1e-6, group_size=1)
    assert one.epsilon == pytest.approx(acc.epsilon(1e-6).upper)
    for k in (2, 4):
        lemma = group_privacy_lemma_epsilon(curve, delta=1e-6, group_size=k)
        assert lemma.epsilon is not None and lemma.note is None
        # the certificate: (eps', delta') holds for one example and delta' S(eps') <= delta
        assert acc.epsilon(lemma.example_delta).upper <= lemma.example_epsilon
        assert lemma.example_delta * math.exp(_log_group_factor(lemma.example_epsilon, k)) <= 1e-6 * (1 + 1e-9)
        assert lemma.epsilon == pytest.approx(k * lemma.example_epsilon)
        tight = group_epsilon(noise_multiplier=2.0, group_size=k, **FIG1)
        assert lemma.epsilon >= tight.lower  # a valid bound can never beat the tight answer


def test_unattainable_lemma_says_so():
    """A delta' below what can be represented is reported as None with a note, never NaN or inf."""
    acc = tightdp.PRVAccountant(eps_error=0.05).compose(
        GroupPoissonSampled(noise_multiplier=1.0, sampling_rate=0.01, group_size=1), 100
    )
    res = group_privacy_lemma_epsilon(acc, delta=1e-250, group_size=64)
    assert res.epsilon is None and res.example_epsilon is None
    assert "Lemma 1.1" in res.note and "delta'" in res.note


def test_report_json_shape():
    r = group_report(noise_multiplier=2.0, group_size=2, **FIG1)
    d = json.loads(json.dumps(r.to_dict()))
    assert set(d["epsilon"]) == {"lower", "estimate", "upper"}
    assert d["epsilon"]["lower"] <= d["epsilon"]["estimate"] <= d["epsilon"]["upper"]
    assert d["linear_lower_bound"] == pytest.approx(2 * d["example_epsilon"]["lower"])
    assert d["group_privacy_lemma_epsilon"] >= d["epsilon"]["lower"]
    assert d["linear_lower_bound"] <= d["epsilon"]["upper"]
    assert d["group_size"] == 2 and d["sampling"] == "poisson" and d["kind"] == "bound"


# ------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(group_size=0), "group_size"),
        (dict(group_size=-3), "group_size"),
        (dict(group_size=2.5), "group_size"),
        (dict(noise_multiplier=0.0), "noise_multiplier"),
        (dict(noise_multiplier=float("nan")), "noise_multiplier"),
        (dict(sampling_rate=0.0), "sampling_rate"),
        (dict(sampling_rate=1.5), "sampling_rate"),
        (dict(sampling_rate=None), "sampling_rate"),
        (dict(steps=10.5), "steps"),
        (dict(steps=0), "steps"),
        (dict(delta=0.0), "delta"),
        (dict(delta=1.0), "delta"),
        (dict(delta=float("nan")), "delta"),
        (dict(eps_error=0.0), "eps_error"),
        (dict(sampling="shuffle"), "sampling"),
        (dict(batch_size=10), "batch_size"),
        (dict(dataset_size=3, group_size=4), "group_size"),
        (dict(sampling="fixed-batch", sampling_rate=None, dataset_size=100), "batch_size"),
        (dict(sampling="fixed-batch", sampling_rate=None, dataset_size=100, batch_size=200), "batch_size"),
        (
            dict(sampling="fixed-batch", sampling_rate=None, dataset_size=100, batch_size=10, group_size=101),
            "group_size",
        ),
        (dict(sampling="fixed-batch", sampling_rate=0.5, dataset_size=100, batch_size=10), "sampling_rate"),
        (dict(accountant="nope"), "accountant"),
    ],
)
def test_group_epsilon_rejects_bad_input(kwargs, match):
    base = dict(noise_multiplier=1.0, sampling_rate=0.01, steps=10, delta=1e-6, group_size=2)
    base.update(kwargs)
    with pytest.raises(ValueError, match=match):
        group_epsilon(**base)


@pytest.mark.parametrize(
    "schedule, match",
    [
        ([], "at least one"),
        ("abc", "schedule"),
        ([(1.0, 0.01)], r"schedule\[0\]"),
        ([(1.0, 0.01, 10), (1.0, 2.0, 10)], r"schedule\[1\].*sampling_rate"),
        ([(1.0, 0.01, 10.5)], r"schedule\[0\] steps"),
    ],
)
def test_schedule_rejects_bad_input(schedule, match):
    with pytest.raises(ValueError, match=match):
        group_epsilon_schedule(schedule=schedule, delta=1e-6, group_size=2)


def test_mechanism_builders():
    assert group_mechanism(noise_multiplier=1.0, group_size=3, sampling_rate=0.1) == GroupPoissonSampled(
        noise_multiplier=1.0, sampling_rate=0.1, group_size=3
    )
    m = group_mechanism(
        noise_multiplier=1.0, group_size=3, sampling="fixed-batch", dataset_size=100, batch_size=10, sampling_rate=0.1
    )
    assert m == GroupFixedBatchSampled(noise_multiplier=1.0, batch_size=10, dataset_size=100, group_size=3)
    ledger = group_ledger(schedule=[(1.0, 0.1, 5), (2.0, 0.2, 7)], group_size=2)
    assert [c for _, c in ledger] == [5, 7]
    with pytest.raises(ValueError, match="group_sizes"):
        group_curve(noise_multiplier=1.0, sampling_rate=0.01, steps=10, delta=1e-6, group_sizes=[])


# ------------------------------------------------------------------------------- CLI
def test_cli_json(capsys):
    code = main(
        [
            "group",
            "--noise-multiplier",
            "2",
            "--sampling-rate",
            "0.01",
            "--steps",
            "2000",
            "--delta",
            "1e-6",
            "--group-size",
            "2",
            "--json",
        ]
    )
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["epsilon"]) == {"lower", "estimate", "upper"}
    assert isinstance(out["group_privacy_lemma_epsilon"], float)
    assert isinstance(out["linear_lower_bound"], float)
    assert out["epsilon"]["lower"] <= 2.2019 <= out["epsilon"]["upper"] + 0.01  # dp_accounting, reference file


def test_cli_table_fixed_batch(capsys):
    code = main(
        [
            "group",
            "--noise-multiplier",
            "4",
            "--steps",
            "500",
            "--delta",
            "1e-6",
            "--group-size",
            "2",
            "--sampling",
            "fixed-batch",
            "--dataset-size",
            "50000",
            "--batch-size",
            "500",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "Hypergeom" in out and "group-privacy lemma" in out and "linear reference" in out


def test_cli_plot(tmp_path, capsys):
    path = tmp_path / "group.png"
    code = main(
        [
            "group",
            "--noise-multiplier",
            "2",
            "--sampling-rate",
            "0.01",
            "--steps",
            "200",
            "--delta",
            "1e-5",
            "--group-size",
            "2",
            "--plot",
            str(path),
            "--max-group-size",
            "3",
            "--eps-error",
            "0.05",
            "--json",
        ]
    )
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert path.stat().st_size > 1000
    assert [p["group_size"] for p in out["curve"]] == [1, 2, 3]


@pytest.mark.parametrize(
    "argv, name",
    [
        (["--group-size", "0"], "--group-size"),
        (
            ["--group-size", "2", "--sampling", "fixed-batch", "--dataset-size", "10", "--batch-size", "20"],
            "--batch-size",
        ),
        (
            ["--group-size", "20", "--sampling", "fixed-batch", "--dataset-size", "10", "--batch-size", "5"],
            "--group-size",
        ),
        (["--group-size", "2", "--max-group-size", "4"], "--max-group-size"),
        (["--group-size", "2", "--sampling", "bogus"], "--sampling"),
        (["--group-size", "2", "--delta", "2"], "--delta"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(argv, name, capsys):
    base = ["group", "--noise-multiplier", "1", "--sampling-rate", "0.01", "--steps", "10", "--delta", "1e-6"]
    code = main(base + argv)
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and name in err


# ------------------------------------------------------------------------------- peers
@pytest.mark.peers
@pytest.mark.parametrize("k, sigma", [(3, 1.5), (6, 1.0)])
def test_agrees_with_dp_accounting_mog(k, sigma):
    from dp_accounting import dp_event
    from dp_accounting.pld import pld_privacy_accountant

    from tightdp.mechanisms.mixture import binomial_sensitivity

    steps, q, delta = 100, 0.05, 1e-6
    c, p = binomial_sensitivity(k, q)
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-3)
    acc.compose(dp_event.MixtureOfGaussiansDpEvent(sigma, c.tolist(), p.tolist()), steps)
    theirs = acc.get_epsilon(delta)
    ours = group_epsilon(noise_multiplier=sigma, sampling_rate=q, steps=steps, delta=delta, group_size=k)
    assert ours.lower <= theirs  # their pessimistic estimate is above the truth
    assert abs(ours.estimate - theirs) <= 0.02 + 2e-3 * theirs

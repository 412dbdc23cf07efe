"""The privacy statement of a tuning procedure: privacy_statement(tuning=...) and tightdp statement --tuning-*.

Truth: the K-fold composition of the run's step mechanism (fixed K; the connect-the-dots accountant's own
interval, a dominating pair), and tuning_epsilon called directly on the same ledger (random K)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tightdp import ConnectDotsAccountant
from tightdp.dpsgd import dpsgd_mechanism
from tightdp.statement import privacy_statement
from tightdp.tuning import Tuning, tuning_epsilon

SIGMA, Q, STEPS, DELTA = 1.1, 0.01, 300, 1e-5
RUN = dict(noise_multiplier=SIGMA, sampling_rate=Q, steps=STEPS, delta=DELTA)


def _mech():
    return dpsgd_mechanism(noise_multiplier=SIGMA, sampling_rate=Q)


def test_fixed_runs_equal_the_composition():
    k = 4
    s = privacy_statement(**RUN, tuning=Tuning(distribution="fixed", runs=k))
    comp = ConnectDotsAccountant().compose(_mech(), k * STEPS).epsilon(DELTA)
    one = ConnectDotsAccountant().compose(_mech(), STEPS).epsilon(DELTA)
    assert s.epsilon.upper == pytest.approx(float(comp.upper), rel=1e-12)
    assert float(one.lower) <= s.epsilon.lower <= s.epsilon.upper  # best released: at least one run's pair
    assert s.epsilon.upper > privacy_statement(**RUN).epsilon.upper  # K runs cost more than one
    s_all = privacy_statement(**RUN, tuning={"distribution": "fixed", "runs": k, "release": "all"})
    assert s_all.epsilon.lower == pytest.approx(float(comp.lower), rel=1e-12)
    assert s.certified and "4 fixed runs" in s.to_text()


def test_poisson_matches_tuning_epsilon():
    s = privacy_statement(**RUN, tuning={"distribution": "poisson", "mean": 5})
    direct = tuning_epsilon(run=[(_mech(), STEPS)], delta=DELTA, distribution="poisson", mean=5)
    assert (s.epsilon.lower, s.epsilon.upper) == (direct.lower, direct.upper)
    text = s.guarantees[-1]
    assert direct.details["method"] in text and "poisson law, mean 5" in text
    assert "Renyi DP (Papernot & Steinke 2022)" in text and "privacy profile (Koskela, Redberg & Wang 2024)" in text
    assert ("rdp" in s.accountant) == direct.details["method"].startswith("Renyi")
    assert "Tuned:" in s.to_text() and "width is not controlled" in s.to_text()
    assert s.parameters["tuning"]["mean"] == 5.0
    assert 0.0 < s.epsilon.lower <= s.epsilon.upper


def test_schedule_with_tuning_is_the_ledger_of_its_segments():
    segs = [(1.0, 0.01, 100), (2.0, 0.02, 200)]
    s = privacy_statement(schedule=segs, delta=DELTA, tuning={"distribution": "fixed", "runs": 3})
    acc = ConnectDotsAccountant()
    for sig, q, n in segs:
        acc.compose(dpsgd_mechanism(noise_multiplier=sig, sampling_rate=q), 3 * n)
    assert s.epsilon.upper == pytest.approx(float(acc.epsilon(DELTA).upper), rel=1e-12)


def test_not_covered_list_drops_tuning_only_when_given():
    plain = privacy_statement(**RUN)
    tuned = privacy_statement(**RUN, tuning={"distribution": "geometric", "mean": 3})
    item = [x for x in plain.not_covered if x.startswith("Hyper-parameter tuning")]
    assert len(item) == 1 and "tuning=" in item[0]
    assert not any(x.startswith("Hyper-parameter tuning") for x in tuned.not_covered)
    assert len(tuned.not_covered) == len(plain.not_covered) - 1
    assert any(g.startswith("Hyper-parameter tuning") for g in tuned.guarantees)


def test_group_rows_beyond_one_are_not_applicable_under_tuning():
    s = privacy_statement(**RUN, group_sizes=[1, 2], tuning={"distribution": "fixed", "runs": 2})
    assert s.groups[0].epsilon == s.epsilon
    assert s.groups[1].epsilon is None and "tuning" in s.groups[1].not_applicable


@pytest.mark.parametrize(
    "tuning, field",
    [
        ({"distribution": "uniform", "runs": 2}, "tuning.distribution"),
        ({"distribution": "fixed"}, "tuning.runs"),
        ({"distribution": "fixed", "runs": 0}, "tuning.runs"),
        ({"distribution": "fixed", "runs": 2, "mean": 3}, "tuning.mean"),
        ({"distribution": "poisson"}, "tuning.mean"),
        ({"distribution": "poisson", "mean": 0.5}, "tuning.mean"),
        ({"distribution": "poisson", "mean": 3, "release": "all"}, "tuning.release"),
        ({"distribution": "negative-binomial", "mean": 3}, "tuning.shape"),
        ({"distribution": "geometric", "mean": 3, "shape": 2}, "tuning.shape"),
        ({"distribution": "fixed", "runs": 2, "colour": 1}, "tuning.colour"),
        ({"runs": 2}, "tuning.distribution"),
        ("fixed", "tuning"),
    ],
)
def test_bad_tuning_names_the_field(tuning, field):
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        privacy_statement(**RUN, tuning=tuning)


def test_tuning_refused_for_correlated_noise():
    with pytest.raises(ValueError, match="tuning"):
        privacy_statement(
            strategy=[[1.0]], noise_multiplier=1.0, steps=1, delta=DELTA, tuning={"distribution": "fixed", "runs": 2}
        )


def _cli(*args):
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "tightdp",
            "statement",
            "--noise-multiplier",
            str(SIGMA),
            "--sampling-rate",
            str(Q),
            "--steps",
            str(STEPS),
            "--delta",
            str(DELTA),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow
def test_cli_round_trip():
    r = _cli("--tuning-distribution", "poisson", "--tuning-mean", "5", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    s = privacy_statement(**RUN, tuning={"distribution": "poisson", "mean": 5})
    assert d["epsilon"]["upper"] == s.epsilon.upper and d["epsilon"]["lower"] == s.epsilon.lower
    assert d["parameters"]["tuning"]["distribution"] == "poisson"
    assert not any(x.startswith("Hyper-parameter tuning") for x in d["not_covered"])
    r = _cli("--tuning-runs", "3")
    assert r.returncode == 0 and "3 fixed runs" in r.stdout


@pytest.mark.parametrize(
    "args, word",
    [
        (("--tuning-runs", "2.5"), "--tuning-runs"),
        (("--tuning-runs", "2", "--tuning-distribution", "poisson"), "--tuning-distribution"),
        (("--tuning-distribution", "poisson"), "--tuning-mean"),
        (("--tuning-mean", "3"), "--tuning-mean"),
        (("--tuning-distribution", "geometric", "--tuning-mean", "3", "--tuning-release", "all"), "--tuning-release"),
        (("--tuning-distribution", "negative-binomial", "--tuning-mean", "3"), "--tuning-shape"),
        (("--tuning-distribution", "poisson", "--tuning-mean", "0.5"), "--tuning-mean"),
    ],
)
def test_cli_bad_input_one_line_exit_2(args, word):
    r = _cli(*args)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and word in r.stderr

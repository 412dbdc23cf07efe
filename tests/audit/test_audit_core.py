"""tightdp.audit: closed forms, jax_privacy's numbers on the same scores, the expected audit against a
direct simulation, the verdict, the CLI and bad input."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import special

from tightdp import Bounds
from tightdp.audit import (
    AuditBound,
    audit_run,
    audit_section,
    audit_verdict,
    canaries_needed,
    clopper_pearson_epsilon_at,
    epsilon_clopper_pearson,
    epsilon_fdp_from_guesses,
    epsilon_from_guesses,
    epsilon_one_run,
    epsilon_one_run_fdp,
    expected_audit,
    fdp_one_run_test,
    fdp_rejects,
    gdp_epsilon,
    gdp_mu_for,
    one_run_p_value,
    read_scores_csv,
)
from tightdp.cli import main

DATA = Path(__file__).parents[1] / "data"


# ============================================================================== closed forms
@pytest.mark.parametrize("n", [1, 10, 100, 1000])
def test_all_guesses_right_without_delta_is_the_closed_form(n):
    """r = v = n, delta = 0: P[Bin(n, q) >= n] = q^n <= beta gives q = beta^(1/n) (SNJ Thm. 5.2)."""
    b = epsilon_from_guesses(canaries=2 * n, guesses=n, correct=n, delta=0.0, beta=0.05)
    exact = float(special.logit(0.05 ** (1.0 / n)))
    assert b.epsilon_lower <= max(exact, 0.0) and b.epsilon_lower == pytest.approx(max(exact, 0.0), rel=1e-8, abs=1e-12)


def test_gdp_conversions_match_mpmath(gdp):
    _, eps_mp = gdp
    for mu in (0.5, 1.0, 2.0, 4.0):
        e = gdp_epsilon(mu, 1e-5)
        assert e == pytest.approx(eps_mp(1e-5, mu), rel=1e-9)
        assert gdp_mu_for(e, 1e-5) == pytest.approx(mu, rel=1e-8)


@given(
    m=st.integers(2, 3000),
    frac_r=st.floats(0.01, 1.0),
    frac_v=st.floats(0.0, 1.0),
    delta=st.sampled_from([0.0, 1e-6, 1e-4, 1e-2]),
    beta=st.sampled_from([0.01, 0.05, 0.2]),
)
def test_one_run_bound_is_a_rejected_epsilon(m, frac_r, frac_v, delta, beta):
    """The returned epsilon is one at which the claim is rejected (p <= beta), and more right guesses never
    lower the bound."""
    r = max(1, int(frac_r * m))
    v = int(frac_v * r)
    e = epsilon_from_guesses(canaries=m, guesses=r, correct=v, delta=delta, beta=beta).epsilon_lower
    assert math.isfinite(e) and e >= 0
    if e > 0:
        assert one_run_p_value(canaries=m, guesses=r, correct=v, epsilon=e, delta=delta) <= beta
        assert one_run_p_value(canaries=m, guesses=r, correct=v, epsilon=e * 1.01 + 1e-3, delta=delta) > beta
    if v < r:
        e2 = epsilon_from_guesses(canaries=m, guesses=r, correct=v + 1, delta=delta, beta=beta).epsilon_lower
        assert e2 >= e - 1e-6


# ============================================================================== jax_privacy
def _counts(ins, outs, t):
    return int(np.sum(ins >= t)), int(np.sum(outs >= t))


def _jax_rows():
    return json.loads((DATA / "jax_privacy_audit.json").read_text())["rows"]


def _scores(row):
    rng = np.random.default_rng(row["seed"])
    ins = np.round(rng.standard_normal(row["n_in"]) + row["mu"], 6)
    outs = np.round(rng.standard_normal(row["n_out"]), 6)
    return ins, outs


@pytest.mark.parametrize("row", _jax_rows(), ids=lambda r: f"s{r['seed']}-t{r['threshold']:g}-d{r['delta']:g}")
def test_recorded_jax_privacy_numbers(row):
    """jax_privacy 2.0.0's CanaryScoreAuditor at explicit thresholds (tests/data/jax_privacy_audit.py); its
    root finders stop at xtol 1e-6."""
    ins, outs = _scores(row)
    tp, fp = _counts(ins, outs, row["threshold"])
    m, d, s = ins.size + outs.size, row["delta"], row["significance"]
    one = epsilon_from_guesses(canaries=m, guesses=tp + fp, correct=tp, delta=d, beta=s).epsilon_lower
    fdp = epsilon_fdp_from_guesses(canaries=m, guesses=tp + fp, correct=tp, delta=d, beta=s).epsilon_lower
    cp = clopper_pearson_epsilon_at(
        in_scores=ins, out_scores=outs, threshold=row["threshold"], delta=d, beta=s
    ).epsilon_lower
    assert one == pytest.approx(row["epsilon_one_run"], abs=3e-6)
    assert fdp == pytest.approx(row["epsilon_one_run_fdp"], abs=3e-6)
    assert cp == pytest.approx(row["epsilon_clopper_pearson"], rel=1e-9, abs=1e-12)


@pytest.mark.peers
def test_live_jax_privacy_on_fresh_scores():
    A = pytest.importorskip("jax_privacy.auditing")
    rng = np.random.default_rng(11)
    ins, outs = rng.standard_normal(700) + 1.7, rng.standard_normal(900)
    au = A.CanaryScoreAuditor(ins, outs)
    for t in (1.0, 2.0, 3.0):
        tp, fp = _counts(ins, outs, t)
        ex = A.Explicit(t)
        assert epsilon_from_guesses(
            canaries=1600, guesses=tp + fp, correct=tp, delta=1e-5
        ).epsilon_lower == pytest.approx(au.epsilon_one_run(0.05, 1e-5, threshold_strategy=ex), abs=3e-6)
        assert epsilon_fdp_from_guesses(
            canaries=1600, guesses=tp + fp, correct=tp, delta=1e-5
        ).epsilon_lower == pytest.approx(au.epsilon_one_run_fdp(0.05, 1e-5, threshold_strategy=ex), abs=3e-6)
        assert clopper_pearson_epsilon_at(
            in_scores=ins, out_scores=outs, threshold=t, delta=1e-5
        ).epsilon_lower == pytest.approx(au.epsilon_clopper_pearson(0.05, 1e-5, threshold_strategy=ex), rel=1e-9)
    # the held-out split: the same permutation convention gives the same number
    assert epsilon_clopper_pearson(in_scores=ins, out_scores=outs, delta=1e-5, seed=5).epsilon_lower == pytest.approx(
        au.epsilon_clopper_pearson(0.05, 1e-5, threshold_strategy=A.Split(seed=5)), rel=1e-9
    )


# ============================================================================== expected audit and verdict
def test_expected_audit_matches_a_direct_gaussian_simulation():
    """The expected audit from the certified mu-GDP curve against audits of simulated N(0,1) / N(mu,1) scores."""
    mu, m, draws = 1.5, 400, 101
    e = expected_audit(canaries=m, delta=1e-5, mu=mu, draws=draws, seed=3)
    assert e.epsilon_lower <= e.epsilon_upper <= e.certified.upper
    rng = np.random.default_rng(7)
    direct = []
    for _ in range(draws):
        s = rng.random(m) < 0.5
        x = rng.standard_normal(m) + mu * s
        direct.append(epsilon_one_run(in_scores=x[s], out_scores=x[~s], delta=1e-5).epsilon_lower)
    lo, hi = e.details["median_rank_interval"]
    med = float(np.median(direct))
    assert lo - 0.15 <= med <= hi + 0.15


def test_canaries_needed_grows_with_the_target():
    small = canaries_needed(delta=1e-5, target=0.5, mu=1.0, candidates=(50, 100, 200, 400), draws=21)
    big = canaries_needed(delta=1e-5, target=1.0, mu=1.0, candidates=(50, 100, 200, 400, 800, 1600), draws=21)
    assert small["canaries"] is not None and big["canaries"] is not None and big["canaries"] > small["canaries"]


def _cert(lo, up):
    return Bounds(lo, None, up)


def test_verdicts():
    emp = AuditBound(2.0, 1e-5, 0.05, "test", {})
    assert audit_verdict(emp, certified=_cert(3.0, 3.1)).verdict == "consistent"
    assert audit_verdict(AuditBound(3.2, 1e-5, 0.05, "test", {}), certified=_cert(3.0, 3.1)).verdict == "violates"
    exp = expected_audit(canaries=50, delta=1e-5, mu=1.0, draws=21)
    v = audit_verdict(emp, certified=_cert(4.37, 4.38), expected=exp, needed=5000)
    assert v.verdict == "too weak" and "5000" in v.message


def test_fdp_curve_test_flags_a_weaker_mechanism_and_not_the_claimed_one():
    from tightdp import ConnectDotsAccountant, Gaussian, tradeoff_curve

    curve = tradeoff_curve(ConnectDotsAccountant().compose(Gaussian(noise_multiplier=1.0), 1))
    rng = np.random.default_rng(0)
    s = rng.random(2000) < 0.5
    z = rng.standard_normal(2000)
    ok = fdp_one_run_test(in_scores=(z + s)[s], out_scores=(z + s)[~s], curve=curve)
    bad = fdp_one_run_test(in_scores=(z + 4 * s)[s], out_scores=(z + 4 * s)[~s], curve=curve)
    assert not ok.rejected and bad.rejected


# ============================================================================== CLI and bad input
def _csv(tmp_path, mu=2.0, m=400):
    rng = np.random.default_rng(0)
    s = rng.random(m) < 0.5
    x = rng.standard_normal(m) + mu * s
    p = tmp_path / "scores.csv"
    p.write_text("score,in\n" + "".join(f"{a:.6f},{int(b)}\n" for a, b in zip(x, s)))
    return p, x[s], x[~s]


def test_cli_json_matches_the_api(tmp_path, capsys):
    p, ins, outs = _csv(tmp_path)
    assert main(["audit", str(p), "--delta", "1e-5", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    ref = epsilon_one_run(in_scores=ins, out_scores=outs, delta=1e-5)
    assert d["empirical"]["epsilon_lower"] == pytest.approx(ref.epsilon_lower, abs=1e-5)
    assert (
        main(
            [
                "audit",
                str(p),
                "--delta",
                "1e-5",
                "--method",
                "fdp-eps-delta",
                "--noise-multiplier",
                "1",
                "--sampling-rate",
                "1",
                "--steps",
                "1",
                "--json",
            ]
        )
        == 0
    )
    d = json.loads(capsys.readouterr().out)
    assert d["verdict"] in ("consistent", "too weak", "violates") and d["certified_epsilon"]["upper"] > 4


@pytest.mark.parametrize(
    "argv, word",
    [
        (["--delta", "-1"], "--delta"),
        (["--delta", "1e-5", "--beta", "1.5"], "--beta"),
        (["--delta", "1e-5", "--method", "nope"], "--method"),
        (["--delta", "1e-5", "--steps", "3"], "--steps"),
        (["--delta", "1e-5", "--guess-counts", "0"], "--guess-counts"),
    ],
)
def test_cli_bad_input_is_one_line_exit_2(tmp_path, capsys, argv, word):
    p, _, _ = _csv(tmp_path)
    assert main(["audit", str(p), *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and word in err


def test_cli_bad_file(tmp_path, capsys):
    p = tmp_path / "bad.csv"
    p.write_text("score,in\n1.0,maybe\n")
    assert main(["audit", str(p), "--delta", "1e-5"]) == 2
    assert "line 2" in capsys.readouterr().err
    assert main(["audit", str(tmp_path / "none.csv"), "--delta", "1e-5"]) == 2


@pytest.mark.parametrize(
    "call, word",
    [
        (lambda: epsilon_from_guesses(canaries=10, guesses=11, correct=1, delta=0.0), "guesses"),
        (lambda: epsilon_from_guesses(canaries=10, guesses=5, correct=6, delta=0.0), "correct"),
        (lambda: epsilon_from_guesses(canaries=10, guesses=5, correct=1, delta=0.0, beta=0), "beta"),
        (lambda: epsilon_one_run(in_scores=[], out_scores=[1.0], delta=1e-5), "in_scores"),
        (lambda: epsilon_one_run(in_scores=[np.nan], out_scores=[1.0], delta=1e-5), "in_scores"),
        (lambda: epsilon_one_run(in_scores=[1.0], out_scores=[1.0], delta=1.5), "delta"),
        (lambda: epsilon_one_run_fdp(in_scores=[1.0], out_scores=[0.0], delta=0.0), "delta"),
        (lambda: epsilon_one_run_fdp(in_scores=[1.0], out_scores=[0.0], delta=1e-5, family="x"), "family"),
        (
            lambda: epsilon_clopper_pearson(in_scores=[1.0], out_scores=[0.0], delta=1e-5, strategy="bonferroni"),
            "thresholds",
        ),
        (lambda: epsilon_clopper_pearson(in_scores=[1.0], out_scores=[0.0], delta=1e-5), "split_fraction"),
        (lambda: expected_audit(canaries=1, delta=1e-5, mu=1.0), "canaries"),
        (lambda: expected_audit(canaries=10, delta=1e-5), "give exactly one"),
        (lambda: audit_verdict(1.0, certified=_cert(1, 2)), "empirical"),
    ],
)
def test_bad_input_names_the_argument(call, word):
    with pytest.raises(ValueError, match=word):
        call()


def test_read_scores_csv(tmp_path):
    p = tmp_path / "s.csv"
    p.write_text("# comment\nscore,in\n1.5,in\n0.2,out\n3,true\n")
    s = read_scores_csv(p)
    assert list(s.in_scores) == [1.5, 3.0] and list(s.out_scores) == [0.2]


@given(
    m=st.integers(2, 600),
    frac_r=st.floats(0.01, 1.0),
    frac_v=st.floats(0.0, 1.0),
    family=st.sampled_from(["gdp", "eps-delta"]),
    beta=st.sampled_from([0.01, 0.05, 0.2]),
)
def test_fdp_bound_is_a_rejected_epsilon(m, frac_r, frac_v, family, beta):
    """The f-DP bound's curve is rejected by the counts (MMC's test), and the curve a little above is not."""
    from tightdp.audit.fdp import _family_g

    r = max(1, int(frac_r * m))
    v = int(frac_v * r)
    e = epsilon_fdp_from_guesses(canaries=m, guesses=r, correct=v, delta=1e-5, beta=beta, family=family).epsilon_lower
    assert math.isfinite(e) and e >= 0
    fam = _family_g(family, 1e-5)
    if e > 0:
        assert fdp_rejects(fam(e), canaries=m, guesses=r, correct=v, level=beta)
        assert not fdp_rejects(fam(e * 1.01 + 1e-3), canaries=m, guesses=r, correct=v, level=beta)


def test_audit_section_for_the_report():
    rng = np.random.default_rng(2)
    s = rng.random(600) < 0.5
    x = rng.standard_normal(600) + s
    sec = audit_section(in_scores=x[s], out_scores=x[~s], delta=1e-5, mu=1.0)
    assert sec["verdict"] in ("consistent", "too weak") and sec["certified_epsilon"]["upper"] > 4.3
    assert all(len(r) == 2 for r in sec["rows"]) and sec["rows"][-1][0] == "verdict"
    json.dumps(sec)
    with pytest.raises(ValueError, match="fdp-gdp"):
        audit_run(
            in_scores=x[s],
            out_scores=x[~s],
            delta=1e-5,
            method="fdp-gdp",
            noise_multiplier=1.0,
            sampling_rate=0.1,
            steps=10,
        )

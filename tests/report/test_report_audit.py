"""The privacy report's optional "Audit" section: canary scores from a simulated Gaussian mechanism.

One Gaussian step at noise multiplier sigma is exactly mu-GDP with mu = 1/sigma (Dong, Roth, Su 2022,
Thm. 2.7): an optimal attack's scores are N(mu, 1) for the canaries that were in and N(0, 1) for those
that were out. Scores drawn at the run's own mu are a correct implementation ("consistent"); scores
drawn at a much larger mu than the run's noise allows are a broken one ("violates").
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from tightdp.audit import read_scores_csv
from tightdp.report import ReportConfig, build_report, load_config


def _write_scores(path, *, mu: float, m: int, seed: int = 7) -> None:
    rng = np.random.default_rng(seed)
    lines = (
        ["score,in"]
        + [f"{float(x)!r},1" for x in rng.normal(mu, 1.0, m)]
        + [f"{float(x)!r},0" for x in rng.normal(0.0, 1.0, m)]
    )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _config(tmp_path, *, sigma: float, audit: dict | None, training: dict | None = None) -> ReportConfig:
    data = {
        "title": "audited run",
        "training": training or {"sampling_rate": 1.0, "steps": 1, "noise_multiplier": sigma},
        "privacy": {"deltas": [1e-5], "target_epsilons": []},
        "report": {"accountants": ["connect-dots"], "plots": False, "formats": ["markdown", "html", "json"]},
    }
    if audit is not None:
        data["audit"] = audit
    path = tmp_path / "report.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return load_config(path)


@pytest.fixture
def scores_at_mu2(tmp_path):
    p = tmp_path / "scores.csv"
    _write_scores(p, mu=2.0, m=500)
    return p


def test_correct_run_is_consistent_in_every_format(tmp_path, scores_at_mu2):
    cfg = _config(tmp_path, sigma=0.5, audit={"scores": "scores.csv", "beta": 0.05, "method": "one-run"})
    assert cfg.audit is not None and len(cfg.audit.in_scores) == 500 and cfg.audit.delta == 1e-5
    report = build_report(cfg)
    audit = report.audit
    assert audit["computed"] and audit["verdict"] == "consistent"
    # the empirical lower bound is below the certified upper end, and the certified interval is the report's band
    _lo, up = report.band[1e-5]
    assert audit["empirical"]["epsilon_lower"] <= audit["certified_epsilon"]["upper"]
    assert audit["certified_epsilon"]["upper"] == pytest.approx(up, rel=1e-6)
    # the same scores through the audit CLI's reader give the same section
    s = read_scores_csv(scores_at_mu2)
    assert len(s.in_scores) == len(cfg.audit.in_scores)
    written = report.write(tmp_path / "out")
    md = written["markdown"].read_text(encoding="utf-8")
    html = written["html"].read_text(encoding="utf-8")
    data = json.loads(written["json"].read_text(encoding="utf-8"))
    assert "## Audit" in md and audit["message"] in md
    assert "<h2>Audit</h2>" in html and "empirical epsilon lower bound" in html
    assert data["audit"]["verdict"] == "consistent" and data["audit"]["rows"] == audit["rows"]
    for label, value in audit["rows"]:
        assert label in md and value.replace("|", "\\|") in md


def test_broken_run_violates(tmp_path):
    _write_scores(tmp_path / "scores.csv", mu=4.0, m=500)  # mu = 4 scores from a run certified at mu = 0.5
    report = build_report(_config(tmp_path, sigma=2.0, audit={"scores": "scores.csv"}))
    assert report.audit["verdict"] == "violates"
    assert report.audit["empirical"]["epsilon_lower"] > report.band[1e-5][1]
    assert "violates its accounting" in report.to_markdown()


def test_no_audit_table_no_section(tmp_path):
    report = build_report(_config(tmp_path, sigma=0.5, audit=None))
    assert report.config.audit is None and not report.audit
    assert "## Audit" not in report.to_markdown() and report.to_dict()["audit"] is None


def test_unsupported_scheme_says_so(tmp_path, scores_at_mu2):
    cfg = _config(
        tmp_path,
        sigma=1.0,
        audit={"scores": "scores.csv"},
        training={"dataset_size": 1000, "batch_size": 10, "steps": 100, "noise_multiplier": 1.0, "sampling": "shuffle"},
    )
    report = build_report(cfg)
    assert not report.audit["computed"] and "verdict" not in report.audit
    assert "shuffle" in report.audit["note"]
    md = report.to_markdown()
    assert "## Audit" in md and "Not computed" in md


@pytest.mark.parametrize(
    "audit, key",
    [
        ({"scores": "scores.csv", "beta": 1.5}, "audit.beta"),
        ({"scores": "scores.csv", "beta": "x"}, "audit.beta"),
        ({"scores": "scores.csv", "method": "magic"}, "audit.method"),
        ({"scores": "scores.csv", "delta": 2.0}, "audit.delta"),
        ({"scores": "missing.csv"}, "audit.scores"),
        ({"beta": 0.05}, "audit.scores"),
        ({"scores": "scores.csv", "canaries": 3}, "audit"),
    ],
)
def test_bad_audit_values_are_refused_by_key(tmp_path, scores_at_mu2, audit, key):
    with pytest.raises(ValueError, match=key.replace(".", r"\.")):
        _config(tmp_path, sigma=0.5, audit=audit)


def test_bad_scores_file_is_refused(tmp_path):
    (tmp_path / "scores.csv").write_text("score,in\n1.0,maybe\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"audit\.scores.*line 2"):
        _config(tmp_path, sigma=0.5, audit={"scores": "scores.csv"})


def test_fdp_gdp_refused_for_a_subsampled_run(tmp_path, scores_at_mu2):
    with pytest.raises(ValueError, match=r"audit\.method"):
        _config(
            tmp_path,
            sigma=1.0,
            audit={"scores": "scores.csv", "method": "fdp-gdp"},
            training={"sampling_rate": 0.1, "steps": 10, "noise_multiplier": 1.0},
        )


def test_cli_prints_the_verdict_and_refuses_a_bad_key(tmp_path, scores_at_mu2, capsys):
    from tightdp.cli import main

    cfg = tmp_path / "run.toml"
    base = (
        "[training]\nsampling_rate = 1.0\nsteps = 1\nnoise_multiplier = 0.5\n[privacy]\ndeltas = [1e-5]\n"
        'target_epsilons = []\n[report]\naccountants = ["connect-dots"]\n[audit]\nscores = "scores.csv"\n'
    )
    cfg.write_text(base, encoding="utf-8")
    assert main(["report", str(cfg), "--out", str(tmp_path / "out"), "--format", "markdown", "--no-plots"]) == 0
    out = capsys.readouterr().out
    assert "audit: consistent" in out
    assert "## Audit" in (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    cfg.write_text(base + "beta = 0\n", encoding="utf-8")
    assert main(["report", str(cfg), "--out", str(tmp_path / "out2")]) == 2
    err = capsys.readouterr().err.strip()
    assert "audit.beta" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize(
    "training",
    [
        {"sampling_rate": 0.05, "steps": 20, "noise_multiplier": 1.0},
        {
            "sampling_rate": 0.05,
            "schedule": [{"noise_multiplier": 1.0, "steps": 10}, {"noise_multiplier": 2.0, "steps": 10}],
        },
    ],
    ids=["poisson", "poisson-schedule"],
)
def test_poisson_runs_are_audited_against_their_own_certified_interval(tmp_path, scores_at_mu2, training):
    report = build_report(_config(tmp_path, sigma=1.0, audit={"scores": "scores.csv"}, training=training))
    audit = report.audit
    assert audit["computed"] and audit["verdict"] in ("consistent", "too weak", "violates")
    # the verdict's certified interval is the report's (connect-dots) certified interval of the same run
    lo, up = report.band[1e-5]
    assert audit["certified_epsilon"]["upper"] == pytest.approx(up, rel=1e-6)
    assert audit["certified_epsilon"]["lower"] == pytest.approx(lo, rel=1e-6)

"""The privacy report for the sampling schemes: "what you ran vs what Poisson accounting says".

The scheme's interval must be ``dpsgd_epsilon(sampling=...)``'s, the Poisson one ``dpsgd_epsilon``'s at the
same noise, rate and steps; the published epsilon and the certified band are the scheme's (never
Poisson's for a run that did not sample that way); each scheme's caveat is shown; bad configs name the key.
"""

from __future__ import annotations

import json

import pytest

import tightdp
from tightdp.report import ReportConfig, build_report


def _config(sampling: str, **extra) -> ReportConfig:
    training = {"dataset_size": 2000, "batch_size": 40, "epochs": 2, "noise_multiplier": 1.0, "sampling": sampling}
    training.update(extra)
    return ReportConfig.from_dict(
        {
            "title": f"{sampling} run",
            "training": training,
            "privacy": {"deltas": [1e-5, 1e-6], "target_epsilons": [], "group_sizes": [2]},
            "report": {"accountants": ["connect-dots"], "plots": False, "formats": ["markdown"]},
        }
    )


@pytest.mark.slow
@pytest.mark.parametrize("sampling, verdict", [("shuffle", "less private"), ("random_allocation", "more private")])
def test_scheme_section_against_dpsgd_epsilon(sampling, verdict, tmp_path):
    cfg = _config(sampling)
    assert cfg.segments[0].sampling_rate == 1 / 50 and cfg.total_steps == 100 and cfg.scheme
    rep = build_report(cfg)
    kw = dict(noise_multiplier=1.0, sampling_rate=1 / 50, steps=100)
    for row in rep.scheme["rows"]:
        s = tightdp.dpsgd_epsilon(**kw, delta=row["delta"], sampling=cfg.scheme)
        p = tightdp.dpsgd_epsilon(**kw, delta=row["delta"])
        assert (row["scheme"]["lower"], row["scheme"]["upper"]) == (s.lower, s.upper)
        assert (row["poisson"]["lower"], row["poisson"]["upper"]) == (p.lower, p.upper)
        assert row["verdict"].startswith(verdict)
        assert rep.band[row["delta"]] == (s.lower, s.upper)  # the band of what ran, not Poisson's
    # the accountant table is Poisson accounting, labelled so
    assert rep.results[0].bounds[1e-5].upper == pytest.approx(rep.scheme["rows"][0]["poisson"]["upper"])
    md = rep.to_markdown()
    assert "## What you ran vs what Poisson accounting says" in md
    assert "Poisson accounting (not what ran)" in md
    publish = next(line for line in md.splitlines() if line.startswith("Publish:"))
    assert f"{rep.scheme['rows'][0]['scheme']['upper']:.4g}" in publish and cfg.scheme in publish
    assert "mixture-of-Gaussians" not in md  # Ganesh 2024's group analysis does not cover these schemes
    if sampling == "shuffle":
        assert "no theorem closes the gap" in md
        assert "trade-off curve is not drawn" in md  # Poisson's band would over-state privacy
    data = json.loads(json.dumps(rep.to_dict()))
    assert data["scheme_vs_poisson"]["sampling"] == cfg.scheme
    assert data["run"]["sampling"] == sampling
    # group privacy under the scheme (tightdp.group_epsilon(sampling=...))
    g = tightdp.group_epsilon(**kw, delta=1e-5, group_size=2, sampling=cfg.scheme)
    assert rep.groups[0]["epsilon"][repr(1e-5)] == g.upper


def test_truncated_poisson_report_and_group_not_applicable():
    cfg = _config("truncated_poisson", max_batch_size=48, epochs=1)
    assert cfg.max_batch_size == 48 and cfg.segments[0].sampling_rate == 40 / 2000
    rep = build_report(cfg)
    row = rep.scheme["rows"][0]
    ref = tightdp.dpsgd_epsilon(
        noise_multiplier=1.0,
        sampling_rate=0.02,
        steps=50,
        delta=1e-5,
        sampling="truncated-poisson",
        dataset_size=2000,
        max_batch_size=48,
    )
    assert (row["scheme"]["lower"], row["scheme"]["upper"]) == (ref.lower, ref.upper)
    assert rep.groups == [] and "not applicable" in rep.group_note
    assert "Ganesh 2025" in rep.to_markdown()


def test_poisson_config_has_no_scheme_section():
    rep = build_report(_config("poisson"))
    assert rep.scheme == {} and "What you ran vs" not in rep.to_markdown()


@pytest.mark.parametrize(
    "training, name",
    [
        ({"sampling": "truncated_poisson"}, "max_batch_size"),
        ({"max_batch_size": 10}, "max_batch_size"),
        ({"sampling": "shuffle", "batch_size": None, "sampling_rate": 0.03}, "sampling_rate"),
        ({"sampling": "shuffle", "epochs": None, "steps": 75}, "steps"),
        ({"sampling": "truncated_poisson", "max_batch_size": 5000}, "max_batch_size"),
        (
            {
                "sampling": "shuffle",
                "epochs": None,
                "noise_multiplier": None,
                "schedule": [{"noise_multiplier": 1.0, "epochs": 1}],
            },
            "schedule",
        ),
    ],
)
def test_bad_scheme_config_names_the_key(training, name):
    base = {"dataset_size": 2000, "batch_size": 40, "epochs": 2, "noise_multiplier": 1.0}
    base.update(training)
    base = {k: v for k, v in base.items() if v is not None}
    with pytest.raises(ValueError, match=name):
        ReportConfig.from_dict({"training": base})

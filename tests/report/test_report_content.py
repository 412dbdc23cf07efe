"""What the privacy report says (in-process, small runs)."""

import math

from tightdp.bounds import Bounds
from tightdp.report import REFERENCES, ReportConfig, build_report
from tightdp.report._jobs import _row_job
from tightdp.report._sections import _f


def _config(**report):
    return ReportConfig.from_dict(
        {
            "title": "small run",
            "training": {"dataset_size": 1000, "batch_size": 100, "epochs": 3, "noise_multiplier": 2.0},
            "privacy": {"deltas": [1e-5], "target_epsilons": [2.0]},
            "report": {"accountants": ["connect-dots", "rdp"], "plots": False, **report},
        }
    )


def test_report_content():
    rep = build_report(_config())
    md = rep.to_markdown()
    assert "PRV upper bound" not in md and "connect-dots upper bound at accuracy relative 0.001" in md
    assert "## References" in md and all(ref.split(".")[0] in md for ref in REFERENCES) and len(REFERENCES) == 5
    assert "## Settings" in md and "rel_error = 0.001" in md and "numpy" in md and "tightdp" in md
    assert "| setting | value |" in md and "|  |  |" not in md  # no empty header row
    hint = next(h for h in rep.calibration if h["answer"].startswith("σ"))
    assert hint["answer"] == f"σ = {hint['noise_multiplier']:.6g}"  # the certified (rounded-up) value itself
    assert "paper 00" not in md


def test_consistent_significant_digits():
    assert _f(3.82) == "3.820" and _f(4.245) == "4.245" and _f(12.5) == "12.50" and _f(math.inf) == "∞"


def test_uncertifiable_row_keeps_its_note(monkeypatch):
    import tightdp.report._jobs as report

    class Acc:
        kind = "bound"

        def compose(self, ledger):
            return self

        def epsilon(self, delta):
            return Bounds(0.0, 3.5, math.inf, "epsilon", "bound", {"note": "the composition window ended early"})

    monkeypatch.setattr(report, "_make_accountant", lambda name: Acc())
    _res, notes = _row_job(_config(), "fourier", (1e-5,))
    assert any("not certified" in n and "composition window" in n for n in notes)

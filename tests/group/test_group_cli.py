"""``tightdp group`` CLI: the README example answers without the PRV fallback; unwritable plots exit 2."""

from __future__ import annotations

import json

import pytest

from tightdp.cli import main
from tightdp.group import ExampleCurve, _lemma_accountant, _LemmaConnectDots, _make_accountant, group_mechanism


def test_plot_to_a_missing_folder_is_one_line_and_exit_2(tmp_path, capsys):
    rc = main(
        [
            "group",
            "--noise-multiplier",
            "1",
            "--sampling-rate",
            "0.01",
            "--steps",
            "20",
            "--delta",
            "1e-6",
            "--group-size",
            "2",
            "--plot",
            str(tmp_path / "missing" / "g.png"),
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1 and err.startswith("tightdp: error: --plot") and "Traceback" not in err


def test_lemma_accountant_never_falls_back_to_prv():
    m = group_mechanism(noise_multiplier=1.0, group_size=1, sampling_rate=0.01)
    acc = _lemma_accountant(_make_accountant("connect-dots", 0.01).compose(m, 10))
    assert isinstance(acc, _LemmaConnectDots) and acc.ledger
    with pytest.raises(ArithmeticError, match="PRV fallback"):
        acc._fallback(1e-200, "test")
    curve = ExampleCurve(acc)
    val, note = curve.upper(-20.0)
    assert val > 0 and note == ""


@pytest.mark.slow
def test_readme_group_example_answers_and_the_lemma_says_what_it_could_certify(capsys):
    """README: sigma 1, q 0.01, T 2000, delta 1e-6, k 9. The lemma needs delta' = exp(-605) < 1e-250:
    unavailable, said so; the group epsilon itself is certified (Ganesh 2024, Sec. 4: finite by MoG)."""
    rc = main(
        [
            "group",
            "--noise-multiplier",
            "1",
            "--sampling-rate",
            "0.01",
            "--steps",
            "2000",
            "--delta",
            "1e-6",
            "--group-size",
            "9",
            "--json",
        ]
    )
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    eps = out["epsilon"]
    assert 0 < eps["lower"] <= eps["estimate"] <= eps["upper"] < 100
    assert out["group_privacy_lemma_epsilon"] is None
    note = out["group_privacy_lemma"]["note"]
    assert "no certified epsilon" in note and "1e-250" in note
    assert out["details"]["accountant"] == "connect-dots"

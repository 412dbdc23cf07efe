"""Every subcommand: --help ends with examples that parse, and --json prints the one documented shape.

The shape (README, "JSON output"): one JSON document; each privacy quantity is an object
``{"lower", "estimate", "upper"}`` (null where a method gives none) next to a ``"kind"``
(``"bound"`` or ``"approximation"``); a single answer also names the ``"accountant"``, the
``"parameters"`` or inputs, and ``"seconds"``. ``compare`` prints a list of such answers.
"""

from __future__ import annotations

import json
import shlex

import pytest

from tightdp.cli import COMMANDS, EXAMPLES, build_parser, main


def _help(capsys, command: str) -> str:
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("command", COMMANDS)
def test_help_shows_examples_that_parse(capsys, command):
    text = _help(capsys, command)
    assert "examples:" in text
    lines = [ln.strip() for ln in text.split("examples:", 1)[1].splitlines() if ln.strip()]
    examples, current = [], ""
    for ln in lines:  # join continuation lines ending in a backslash
        current = (current + " " + ln.rstrip("\\").strip()).strip()
        if not ln.endswith("\\"):
            examples.append(current)
            current = ""
    assert examples and all(e.startswith(f"tightdp {command}") for e in examples)
    parser = build_parser()
    for e in examples:
        args = parser.parse_args(shlex.split(e)[1:])  # argparse accepts every option shown
        assert args.command == command


def test_every_command_has_examples_registered():
    assert set(EXAMPLES) | {"statement"} == set(COMMANDS)


def _quantity(d: dict, key: str) -> None:
    q = d[key]
    assert set(q) == {"lower", "estimate", "upper"}, q
    assert d["kind"] in ("bound", "approximation")
    for v in q.values():
        assert v is None or isinstance(v, (int, float))


RUN = ["--noise-multiplier", "1.0", "--sampling-rate", "0.01", "--steps", "100"]


@pytest.mark.parametrize(
    "argv, key",
    [
        (["epsilon", *RUN, "--delta", "1e-5"], "epsilon"),
        (["delta", *RUN, "--epsilon", "1.0"], "delta"),
        (["statement", *RUN, "--delta", "1e-5", "--group-size", "2"], "epsilon"),
        (["group", *RUN, "--delta", "1e-5", "--group-size", "2"], "epsilon"),
        (
            ["calibrate", "--target-epsilon", "3", "--delta", "1e-5", "--sampling-rate", "0.01", "--steps", "100"],
            "epsilon",
        ),
        (["tradeoff", *RUN, "--fpr", "0.01", "--max-gap", "0.01"], "mu"),
    ],
)
def test_json_shape(capsys, argv, key):
    assert main([*argv, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert isinstance(d, dict)
    if argv[0] == "calibrate":
        assert set(d[key]) >= {"lower", "estimate", "upper", "kind"}  # the kind sits inside the quantity here
    else:
        _quantity(d, key)
    assert "accountant" in d and "seconds" in d


def test_compare_json_is_a_list_of_answers(capsys):
    assert main(["compare", *RUN, "--delta", "1e-5", "--accountants", "connect-dots,rdp,gdp", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["accountant"] for r in rows] == ["connect-dots", "rdp", "gdp"]
    for r in rows:
        _quantity(r, "epsilon")


def test_report_json(tmp_path, capsys):
    cfg = tmp_path / "run.toml"
    cfg.write_text(
        "[training]\nsampling_rate = 0.1\nsteps = 30\nnoise_multiplier = 2.0\n"
        "[privacy]\ndeltas = [1e-5]\ntarget_epsilons = []\n[report]\naccountants = ['connect-dots', 'rdp']\n"
        "plots = false\nformats = ['markdown']\n"
    )
    assert main(["report", str(cfg), "--out", str(tmp_path / "o"), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    _quantity(d, "epsilon")
    assert d["epsilon"]["lower"] <= d["epsilon"]["upper"] and d["delta"] == 1e-5
    assert set(d["files"]) == {"markdown", "json"}

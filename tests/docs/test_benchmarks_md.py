"""BENCHMARKS.md is generated from ``benchmarks/results/*.json`` and is up to date with them.

Every results file follows the schema of ``benchmarks/results_schema.py`` (command, machine, date, rows with
tightdp's figures and each peer's); regenerating BENCHMARKS.md gives the file in the repository; a results file
in a script's older shape is converted on reading; a file missing a field is refused.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import render_benchmarks_md
import results_schema

RESULTS = sorted((ROOT / "benchmarks" / "results").glob("*.json"))


def test_there_are_results_files():
    assert len(RESULTS) >= 10


@pytest.mark.parametrize("path", RESULTS, ids=[p.stem for p in RESULTS])
def test_results_file_follows_the_schema(path):
    doc = results_schema.load(path)
    assert results_schema.validate(doc) == []
    assert doc["benchmark"] == path.stem
    assert doc["command"] and doc["machine"] and str(doc["date"])[:4] == "2026"


def test_benchmarks_md_is_up_to_date():
    text = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    assert text == render_benchmarks_md.render(), "BENCHMARKS.md is out of date: run `make benchmarks-md`"
    for path in RESULTS:
        assert f"benchmarks/results/{path.stem}.json" in text


def test_a_peer_column_shows_each_peer_figure(tmp_path):
    doc = {
        "schema": results_schema.SCHEMA,
        "benchmark": "toy",
        "title": "Toy",
        "what": "what",
        "command": "python benchmarks/bench_toy.py",
        "machine": "2 cores",
        "date": "2026-11-26",
        "rows": [
            {"setting": "k = 1", "tightdp": {"epsilon": [1.0, 1.5], "s": 0.01}, "peers": {"peer": {"s": 0.2}}},
            {"setting": "k = 2", "tightdp": {"epsilon": [2.0, 2.5], "s": 0.02}, "peers": {}},
        ],
        "notes": ["a note"],
    }
    (tmp_path / "toy.json").write_text(json.dumps(doc))
    text = render_benchmarks_md.render(tmp_path)
    assert "| setting | tightdp: epsilon | tightdp: s | peer: s |" in text
    assert "| k = 1 | [1, 1.5] | 0.01 | 0.2 |" in text and "| k = 2 | [2, 2.5] | 0.02 | — |" in text
    assert "* Command: `python benchmarks/bench_toy.py`" in text and "* Date: 2026-11-26" in text


def test_a_file_in_a_scripts_older_shape_is_converted_and_a_broken_one_refused(tmp_path):
    matrix = {
        "date": "2026-11-25",
        "python": "3.11.7",
        "setting": {"steps": 20, "bands": 2, "noise_multiplier": 4.0, "delta": 1e-6, "strategy": "toy"},
        "rows": [{"sampler": "single participation", "lower": 1.0, "upper": 1.1, "seconds": 0.1}],
    }
    (tmp_path / "matrix.json").write_text(json.dumps(matrix))
    doc = results_schema.load(tmp_path / "matrix.json")
    assert results_schema.validate(doc) == [] and doc["rows"][0]["tightdp"]["epsilon"] == [1.0, 1.1]
    del doc["machine"]
    assert results_schema.validate(doc) == ["missing 'machine'"]
    (tmp_path / "matrix.json").write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="machine"):
        render_benchmarks_md.render(tmp_path)


def test_write_keeps_the_previous_run_in_history(tmp_path):
    out = tmp_path / "matrix.json"
    raw = {
        "date": "2026-11-25",
        "setting": {"steps": 20, "bands": 2, "noise_multiplier": 4.0, "delta": 1e-6, "strategy": "toy"},
        "rows": [{"sampler": "x", "lower": 1.0, "upper": 1.1, "seconds": 0.1}],
    }
    results_schema.write("matrix", raw, out)
    results_schema.write("matrix", {**raw, "date": "2026-11-26"}, out)
    doc = json.loads(out.read_text())
    assert doc["date"] == "2026-11-26" and [h["date"] for h in doc["history"]] == ["2026-11-25"]

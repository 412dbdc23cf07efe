"""Smoke test of benchmarks/bench_horizon.py (the long-horizon benchmark): it runs in its quick mode
and writes results whose tightdp intervals are ordered and whose peer answers agree with them.

Agreement means: dp-accounting's pessimistic epsilon (connect-the-dots, an upper bound if correct) is not
below tightdp's certified lower bound and, at the interval the ladder search chose for a target, within that
target's ``err`` of tightdp's interval; prv-accountant's stated interval ``[lower, upper]`` (its estimate
+- its eps_error) meets tightdp's certified interval.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.peers  # the benchmark runs dp_accounting and prv_accountant

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_horizon.py"

pytest.importorskip("dp_accounting")
pytest.importorskip("prv_accountant")


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = tmp_path_factory.mktemp("horizon") / "results.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--quick",
            "--settings",
            "A",
            "--ks",
            "100",
            "--reps",
            "0",
            "--peer-cap",
            "120",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(out.read_text())
    # the results file follows the benchmarks' schema; the script's own output is its "raw" entry
    assert doc["schema"] == "tightdp-benchmark/1" and doc["benchmark"] == "horizon" and doc["rows"]
    return doc["raw"]


def test_shape(results):
    for key in ("command", "date", "nproc", "loadavg_start", "versions", "settings", "default_accuracy", "checks"):
        assert key in results
    assert results["quick"] is True
    (setting,) = results["settings"]
    assert (setting["sigma"], setting["q"]) == (1.0, 0.01)
    (row,) = setting["rows"]
    assert row["k"] == 100
    assert set(row["tightdp"]) == {"rel", "abs", "default"}
    for t in ("rel", "abs"):
        assert row["tightdp"][t]["first_call_s"] > 0
        assert row["tightdp"][t]["met_width"] is True
        assert row["dpa"][t]["interval"] in results["ladder"]
        assert row["prv"][t]["eps_error"] > 0
        assert isinstance(row["ratios"][t]["dpa_warm"], float)
    assert row["tightdp"]["rel"]["cold"]["runs"] == 1
    assert "python -c" in row["tightdp"]["rel"]["cold_cmd"]
    # the default of dpsgd_epsilon is recorded (a relative or an absolute accuracy)
    assert results["default_accuracy"] and {"eps_error", "rel_error"} <= set(results["default_accuracy"][0])
    assert set(setting["growth"]) == {"rel", "abs", "default"}


def test_intervals_and_peers(results):
    (row,) = results["settings"][0]["rows"]
    for t, r in row["tightdp"].items():
        assert 0 < r["lower"] <= r["estimate"] <= r["upper"], t
        # the k = 100 truth is about 0.7180 (tightdp's interval at eps_error 1e-4; prv-accountant agrees)
        assert r["lower"] <= 0.71805 and r["upper"] >= 0.71795, t
    lo, up = row["bracket"]
    assert lo <= up
    assert not row.get("bracket_error")
    for t in ("rel", "abs"):
        err = row["err"][t]
        eps = row["dpa"][t]["epsilon"]
        assert lo <= eps <= up + err, (t, eps, lo, up, err)
        p = row["prv"][t]
        assert "lower" in p, p  # prv-accountant answered (no cap, no error)
        assert p["lower"] <= p["estimate"] <= p["upper"]
        assert p["lower"] <= up and p["upper"] >= lo, (t, p, lo, up)
    default = row["dpa"]["default"]
    assert lo <= default["epsilon"] <= up + row["err"]["abs"]
    assert results["checks"] == []


def test_within_criterion():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import bench_horizon
    finally:
        sys.path.remove(str(SCRIPT.parent))
    # narrow bracket: within err of every point
    assert bench_horizon.within(1.0009, (1.0, 1.0), 1e-3)[0]
    assert not bench_horizon.within(1.0011, (1.0, 1.0), 1e-3)[0]
    assert not bench_horizon.within(1.0009, (0.9998, 1.0), 1e-3)[0]  # 1.1e-3 from the bracket's lower end
    # the half-width of a target
    assert bench_horizon.half_width("rel", 10.0) == pytest.approx(1e-2)
    assert bench_horizon.half_width("rel", 0.01) == 5e-5
    assert bench_horizon.half_width("abs", 100.0) == 1e-3

"""Audit benchmark: the one-run audits at 10^4 canaries, and the Opacus digits demonstration.

One command (from the repository root)::

    .venv/bin/python benchmarks/bench_audit.py [--quick] [--seeds N] [--out benchmarks/results/audit.json]

1. ``epsilon_one_run`` / ``epsilon_one_run_fdp`` (both families) / ``epsilon_clopper_pearson`` on 10^4
   simulated Gaussian canaries (mu = 2; default 12 candidate guess counts, Bonferroni), warm (imports
   and a first call excluded), median of 5 calls. Target: <= 1 s each.
2. The demonstration ``examples/audit_digits.py`` (2000 canaries, 20 steps, q = 1/2, sigma = 2, correct
   and broken, with the expected audit), wall clock. Target: <= 5 min on 2 cores.
3. Flag rates over ``--seeds`` seeds of the small demonstration (400 canaries, 6 steps; the test's
   size): the broken run must be flagged in >= 95 %, the correct one in <= beta = 5 %.

``--quick``: part 1 only with 3 calls each. Writes JSON and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib.util
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import results_schema  # benchmarks/results_schema.py: the results files' schema

ROOT = Path(__file__).resolve().parent.parent


def _timed(fn, reps):
    fn()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts)), out


def part_one(reps: int) -> list[dict]:
    from tightdp.audit import (
        epsilon_clopper_pearson,
        epsilon_one_run,
        epsilon_one_run_fdp,
    )

    rng = np.random.default_rng(0)
    m = 10_000
    s = rng.random(m) < 0.5
    x = rng.standard_normal(m) + 2.0 * s
    kw = dict(in_scores=x[s], out_scores=x[~s], delta=1e-5, beta=0.05)
    rows = []
    for name, fn in (
        ("epsilon_one_run", lambda: epsilon_one_run(**kw)),
        ("epsilon_one_run_fdp (eps-delta)", lambda: epsilon_one_run_fdp(**kw, family="eps-delta")),
        ("epsilon_one_run_fdp (gdp)", lambda: epsilon_one_run_fdp(**kw, family="gdp")),
        ("epsilon_clopper_pearson (split)", lambda: epsilon_clopper_pearson(**kw)),
    ):
        sec, b = _timed(fn, reps)
        rows.append(
            {
                "call": name,
                "canaries": m,
                "seconds": sec,
                "epsilon_lower": b.epsilon_lower,
                "target_seconds": 1.0,
                "ok": sec <= 1.0,
            }
        )
    return rows


def _demo():
    spec = importlib.util.spec_from_file_location("audit_digits", ROOT / "examples" / "audit_digits.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def part_two() -> dict:
    demo = _demo()
    t = time.perf_counter()
    out = {}
    for name, broken in (("correct", False), ("broken", True)):
        v, info = demo.audit(broken, seed=0)
        out[name] = {
            "verdict": v.verdict,
            "message": v.message,
            "epsilon_lower": v.empirical.epsilon_lower,
            "certified": [v.certified_lower, v.certified_upper],
            "expected": [v.expected.epsilon_lower, v.expected.epsilon_upper],
            **info,
        }
    out["seconds"] = time.perf_counter() - t
    out["target_seconds"] = 300.0
    out["ok"] = (
        out["seconds"] <= 300.0 and out["correct"]["verdict"] == "consistent" and out["broken"]["verdict"] == "violates"
    )
    return out


def part_three(seeds: int) -> dict:
    demo = _demo()
    t = time.perf_counter()
    flagged = {"correct": 0, "broken": 0}
    for seed in range(seeds):
        for name, broken in (("correct", False), ("broken", True)):
            v, _ = demo.audit(broken, seed=1000 + seed, canaries=400, steps=6, expected=False)
            flagged[name] += v.verdict == "violates"
    return {
        "seeds": seeds,
        "flagged_correct": flagged["correct"],
        "flagged_broken": flagged["broken"],
        "rate_correct": flagged["correct"] / seeds,
        "rate_broken": flagged["broken"] / seeds,
        "ok": flagged["broken"] >= 0.95 * seeds and flagged["correct"] <= 0.05 * seeds,
        "seconds": time.perf_counter() - t,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "audit.json"))
    args = ap.parse_args(argv)
    res = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "nproc": os.cpu_count(),
        "loadavg_start": os.getloadavg(),
        "python": platform.python_version(),
        "quick": args.quick,
    }
    res["one_run_1e4"] = part_one(3 if args.quick else 5)
    if not args.quick:
        res["demonstration"] = part_two()
        res["flag_rates"] = part_three(args.seeds)
    res["loadavg_end"] = os.getloadavg()
    if not args.quick:  # the results file holds full runs (the converter needs the demonstration)
        results_schema.write("audit", res, args.out)
    print("| call | canaries | seconds | epsilon lower |\n|---|---|---|---|")
    for r in res["one_run_1e4"]:
        print(f"| {r['call']} | {r['canaries']} | {r['seconds']:.3f} | {r['epsilon_lower']:.4f} |")
    if "demonstration" in res:
        d = res["demonstration"]
        print(
            f"\ndemonstration: {d['seconds']:.1f} s; correct: {d['correct']['verdict']} "
            f"(eps >= {d['correct']['epsilon_lower']:.3f}); broken: {d['broken']['verdict']} "
            f"(eps >= {d['broken']['epsilon_lower']:.3f}); certified {d['correct']['certified']}"
        )
        f = res["flag_rates"]
        print(
            f"flag rates over {f['seeds']} seeds: broken {f['rate_broken']:.0%}, correct {f['rate_correct']:.0%} "
            f"({f['seconds']:.0f} s)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

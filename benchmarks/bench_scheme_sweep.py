"""Sampling schemes at random settings: share within the default accuracy, time and peak memory.

One command (from the repository root)::

    .venv/bin/python benchmarks/bench_scheme_sweep.py [--n 60] [--seed 0] [--timeout 120]
        [--out benchmarks/results/scheme_sweep.json]

Draws ``--n`` settings (seeded) spread evenly over three schemes:

* random allocation with a fresh bin every epoch (``allocation_epsilon``, k = 1);
* one bin for the whole run, repeated every cycle (``cyclic_allocation_epsilon``, jax_privacy's
  ``BallsInBinsSampling``), ``E`` cycles;
* shuffled fixed batches (``shuffle_epsilon``);

with noise multiplier ``sigma`` log-uniform in [0.5, 10], steps per epoch (cycle) ``t`` log-uniform in
[1, 1e4], epochs (cycles) ``E`` log-uniform in [1, 1000] and ``delta`` log-uniform in [1e-12, 1e-3].
Each setting runs in a fresh Python process (imports excluded from the time); the peak resident set
size is the process's ``ru_maxrss`` (``resource``), reported with the post-import baseline. A setting is
*within accuracy* when ``upper - lower <= 2 max(1e-3 upper, 5e-5)`` (``tightdp._accuracy``'s default).
Shuffle's upper end is the Gaussian bound without amplification (no tighter certified bound is known),
so its width is reported but it is counted separately. Prints a summary and writes JSON.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import results_schema  # benchmarks/results_schema.py: the results files' schema

ROOT = Path(__file__).resolve().parent.parent
SCHEMES = ("allocation", "cyclic", "shuffle")


def draw(n: int, seed: int) -> list[dict]:
    import numpy as np

    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        out.append(
            {
                "scheme": SCHEMES[i % 3],
                "sigma": float(round(math.exp(rng.uniform(math.log(0.5), math.log(10.0))), 4)),
                "t": int(round(math.exp(rng.uniform(0.0, math.log(1e4))))),
                "epochs": int(round(math.exp(rng.uniform(0.0, math.log(1000.0))))),
                "delta": float(f"{10.0 ** rng.uniform(-12.0, -3.0):.3g}"),
            }
        )
    return out


def worker(s: dict) -> dict:
    import resource

    import tightdp
    from tightdp.schemes import allocation_epsilon, cyclic_allocation_epsilon, shuffle_epsilon

    tightdp.clear_caches()
    base_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    if s["scheme"] == "allocation":
        b = allocation_epsilon(
            noise_multiplier=s["sigma"], steps_per_epoch=s["t"], epochs=s["epochs"], delta=s["delta"]
        )
    elif s["scheme"] == "cyclic":
        b = cyclic_allocation_epsilon(
            noise_multiplier=s["sigma"], steps_per_cycle=s["t"], cycles=s["epochs"], delta=s["delta"]
        )
    else:
        b = shuffle_epsilon(noise_multiplier=s["sigma"], steps_per_epoch=s["t"], epochs=s["epochs"], delta=s["delta"])
    dt = time.perf_counter() - t0
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "lower": b.lower,
        "upper": b.upper,
        "seconds": dt,
        "peak_rss_mb": peak_kb / 1024,
        "baseline_rss_mb": base_kb / 1024,
        "note": b.details.get("note"),
    }


def within(lower: float, upper: float) -> bool:
    return upper - lower <= 2.0 * max(1e-3 * upper, 5e-5) * (1 + 1e-9)


def spawn(s: dict, timeout: float) -> dict:
    try:
        p = subprocess.run(
            [sys.executable, __file__, "--worker", json.dumps(s)],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        )
    except subprocess.TimeoutExpired:
        return {**s, "error": f"timed out after {timeout} s"}
    if p.returncode != 0:
        lines = p.stderr.strip().splitlines()
        return {**s, "error": lines[-1] if lines else "failed"}
    r = json.loads(p.stdout.strip().splitlines()[-1])
    return {**s, **r, "within_accuracy": within(r["lower"], r["upper"])}


def summary(rows: list[dict]) -> dict:
    out = {}
    for scheme in SCHEMES + ("all",):
        rs = [r for r in rows if scheme in ("all", r["scheme"])]
        ok = [r for r in rs if "error" not in r]
        out[scheme] = {
            "settings": len(rs),
            "answered": len(ok),
            "within_accuracy": sum(r["within_accuracy"] for r in ok),
            "max_seconds": max((r["seconds"] for r in ok), default=None),
            "median_seconds": sorted(r["seconds"] for r in ok)[len(ok) // 2] if ok else None,
            "max_peak_rss_mb": max((r["peak_rss_mb"] for r in ok), default=None),
            "over_2s": sum(r["seconds"] > 2.0 for r in ok),
            "over_1gb": sum(r["peak_rss_mb"] > 1024 for r in ok),
            "errors": [r["error"] for r in rs if "error" in r],
        }
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=60, help="number of settings (>= 50 for the published figures)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds allowed per setting")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "scheme_sweep.json"))
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return
    rows = []
    for s in draw(args.n, args.seed):
        r = spawn(s, args.timeout)
        rows.append(r)
        print(json.dumps(r), file=sys.stderr, flush=True)
    meta = {
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()} {platform.processor() or ''} {os.cpu_count()} cores".strip(),
        "python": platform.python_version(),
        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
        "command": f"benchmarks/bench_scheme_sweep.py --n {args.n} --seed {args.seed} --timeout {args.timeout:g}",
    }
    out = {"meta": meta, "summary": summary(rows), "rows": rows}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    results_schema.write("scheme_sweep", out, args.out)
    for scheme, v in out["summary"].items():
        print(
            f"{scheme:10s} {v['answered']}/{v['settings']} answered, {v['within_accuracy']} within accuracy, "
            f"max {v['max_seconds']} s, median {v['median_seconds']} s, max RSS {v['max_peak_rss_mb']} MB, "
            f"{v['over_2s']} over 2 s, {v['over_1gb']} over 1 GB"
        )


if __name__ == "__main__":
    main()

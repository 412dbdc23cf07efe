"""PRV at scale: certified epsilon of sigma = 0.8, q = 4e-3 Poisson DP-SGD at delta = 1e-5.

    .venv/bin/python benchmarks/bench_prv_scale.py [K ...] [--runs N]

For each K: a fresh ``PRVAccountant()`` (default eps_error 0.01), ``tightdp.clear_caches()`` before every
run, in-process wall time of ``epsilon(1e-5)``; prints min / median seconds, the interval, its width,
the tree's schedule and the 1-minute load average (the machine is shared).
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import statistics
import sys
import time

import results_schema

import tightdp
from tightdp import Gaussian, PoissonSampled, PRVAccountant


def run(k: int, runs: int) -> dict:
    times, b = [], None
    for _ in range(runs):
        tightdp.clear_caches()
        acc = PRVAccountant().compose(PoissonSampled(mechanism=Gaussian(noise_multiplier=0.8), sampling_rate=4e-3), k)
        t0 = time.perf_counter()
        b = acc.epsilon(1e-5)
        times.append(time.perf_counter() - t0)
    tree = b.details.get("tree", {})
    return {
        "k": k,
        "lower": b.lower,
        "upper": b.upper,
        "width": b.upper - b.lower,
        "min": min(times),
        "median": statistics.median(times),
        "radices": tree.get("radices"),
        "top": tree.get("top_points"),
        "load": os.getloadavg()[0],
    }


def main(argv: list[str]) -> None:
    runs = 3
    if "--runs" in argv:
        i = argv.index("--runs")
        runs = int(argv[i + 1])
        argv = argv[:i] + argv[i + 2 :]
    ks = [int(float(a)) for a in argv] or [10**4, 10**5, 3 * 10**5, 10**6]
    print("| k | lower | upper | width | seconds (min / median) | radices | top points | load |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    rows = []
    for k in ks:
        r = run(k, runs)
        rows.append(r)
        print(
            f"| {k:.0e} | {r['lower']:.4f} | {r['upper']:.4f} | {r['width']:.4f} | {r['min']:.2f} / "
            f"{r['median']:.2f} | {r['radices']} | {r['top']} | {r['load']:.1f} |",
            flush=True,
        )
    raw = {
        "command": " ".join(["python", "benchmarks/bench_prv_scale.py", *sys.argv[1:]]),
        "machine": f"{os.cpu_count()} cores, Python {platform.python_version()}, shared",
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "rows": rows,
    }
    print("wrote", results_schema.write("prv_scale", raw))


if __name__ == "__main__":
    main(sys.argv[1:])

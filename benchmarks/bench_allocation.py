"""Random allocation (balls and bins) benchmark: tightdp vs pld-accounting 2.0 and random-allocation 1.0.5.

One command (from the repository root)::

    .venv/bin/python benchmarks/bench_allocation.py [--quick] [--out benchmarks/results/allocation.json]

The setting is CIFAR-10 with balls-and-bins batches: ``t = 196`` steps per
epoch (50,000 examples, expected batch 255), noise multiplier 1, ``delta = 1e-5``,
1 epoch and 100 epochs (``--quick``: 1 and 10). It times

* tightdp ``allocation_epsilon`` (= ``dpsgd_epsilon(sampling="random-allocation")``),
  default ``eps_error = 0.01`` (certified ``upper - lower <= 0.02``);
* pld-accounting 2.0 ``gaussian_allocation_epsilon_range(epsilon_accuracy=0.01)``
  (Feldman & Shenfeld 2602.17284, the PLD realisation; upper and lower);
* random-allocation 1.0.5 ``allocation_epsilon_decomposition`` and
  ``allocation_epsilon_RDP_DCO`` (2502.08202's analytic upper bounds);
* tightdp's Poisson epsilon at rate 1/t for reference.

Each tool runs in a fresh Python process (imports excluded): *cold* is the
first call; *warm* is the median of the next calls (3, or 1 when a call takes
more than 20 s; none for pld-accounting, whose cold call alone takes tens of
seconds or more), with ``tightdp.clear_caches()`` and the allocation module's
own caches emptied before every warm call, so a warm call redoes the whole
computation. A peer whose cold call exceeds ``--timeout`` seconds is reported
as timed out. Prints a Markdown table and writes JSON.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import results_schema  # benchmarks/results_schema.py: the results files' schema

ROOT = Path(__file__).resolve().parent.parent
SETTING = {"sigma": 1.0, "t": 196, "epochs": 100, "delta": 1e-5}


def _time(run):
    t0 = time.perf_counter()
    res = run()
    return res, time.perf_counter() - t0


def worker(job):
    tool, s = job["tool"], job["setting"]
    sigma, t, epochs, delta = s["sigma"], s["t"], s["epochs"], s["delta"]
    reset = lambda: None
    if tool.startswith("tightdp"):
        import tightdp
        from tightdp.mechanisms.allocation import clear_allocation_caches
        from tightdp.schemes import allocation_epsilon

        def reset():
            tightdp.clear_caches()
            clear_allocation_caches()

        if tool == "tightdp":

            def run():
                b = allocation_epsilon(noise_multiplier=sigma, steps_per_epoch=t, epochs=epochs, delta=delta)
                return [b.lower, b.upper]
        else:  # tightdp-poisson

            def run():
                b = tightdp.dpsgd_epsilon(noise_multiplier=sigma, sampling_rate=1 / t, steps=t * epochs, delta=delta)
                return [b.lower, b.upper]
    elif tool == "pld-accounting":
        import warnings

        warnings.filterwarnings("ignore")
        from PLD_accounting import gaussian_allocation_epsilon_range

        def run():
            up, lo = gaussian_allocation_epsilon_range(
                delta=delta, sigma=sigma, num_steps=t, num_epochs=epochs, epsilon_accuracy=0.01
            )
            return [lo, up]
    else:
        import warnings

        warnings.filterwarnings("ignore")
        from random_allocation import (
            PrivacyParams,
            SchemeConfig,
            allocation_epsilon_decomposition,
            allocation_epsilon_RDP_DCO,
        )
        from random_allocation.comparisons.definitions import Direction

        fn = allocation_epsilon_decomposition if tool == "ra-decomposition" else allocation_epsilon_RDP_DCO

        def run():
            pp = PrivacyParams(sigma=sigma, num_steps=t, num_selected=1, num_epochs=epochs, delta=delta)
            return [None, float(fn(pp, SchemeConfig(), Direction.BOTH))]

    res, cold = _time(run)
    out = {"tool": tool, "result": res, "cold_s": cold}
    if job.get("warm", True):
        reps = 3 if cold < 20 else 1
        times = []
        for _ in range(reps):
            reset()
            _, dt = _time(run)
            times.append(dt)
        out["warm_s"] = statistics.median(times)
        out["warm_times"] = times
    return out


def _spawn(job, timeout):
    try:
        p = subprocess.run(
            [sys.executable, __file__, "--worker", json.dumps(job)],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        )
    except subprocess.TimeoutExpired:
        return {"tool": job["tool"], "error": f"timed out after {timeout} s"}
    if p.returncode != 0:
        return {"tool": job["tool"], "error": p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "failed"}
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="10 epochs instead of 100")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds allowed per tool and process")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "allocation.json"))
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return
    settings = [dict(SETTING, epochs=1), dict(SETTING, epochs=10 if args.quick else SETTING["epochs"])]
    meta = {
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()} {platform.processor() or ''} {os.cpu_count()} cores".strip(),
        "python": platform.python_version(),
        "settings": settings,
        "command": "benchmarks/bench_allocation.py" + (" --quick" if args.quick else ""),
    }
    results = []
    for setting in settings:
        rows = []
        for tool in ("tightdp", "tightdp-poisson", "pld-accounting", "ra-decomposition", "ra-rdp-dco"):
            warm = tool != "pld-accounting"  # its cold call alone takes tens of seconds to minutes
            r = _spawn({"tool": tool, "setting": setting, "warm": warm}, args.timeout)
            rows.append(r)
            print(json.dumps(r), file=sys.stderr, flush=True)
        results.append({"setting": setting, "rows": rows})
    results_schema.write("allocation", {"meta": meta, "results": results}, args.out)
    fmt = lambda v: "-" if v is None else f"{v:.4f}"
    for res in results:
        s = res["setting"]
        print(
            f"\nRandom allocation, sigma {s['sigma']}, t = {s['t']} steps/epoch, {s['epochs']} epoch(s), "
            f"delta {s['delta']:g} ({meta['date']})\n"
        )
        print("| tool | lower | upper | cold (s) | warm (s) |")
        print("| --- | --- | --- | --- | --- |")
        for r in res["rows"]:
            if "error" in r:
                print(f"| {r['tool']} | - | - | {r['error']} | - |")
                continue
            lo, up = r["result"]
            warm = f"{r['warm_s']:.3f}" if "warm_s" in r else "-"
            print(f"| {r['tool']} | {fmt(lo)} | {fmt(up)} | {r['cold_s']:.3f} | {warm} |")


if __name__ == "__main__":
    main()

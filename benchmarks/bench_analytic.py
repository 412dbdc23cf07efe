"""Time against the number of compositions m for the analytic and the PLD accountants.

    .venv/bin/python benchmarks/bench_analytic.py [--out benchmarks/results/analytic.json]

Setting: Poisson-subsampled Gaussian, q = 0.01, sigma = 1.0, delta = 1e-5,
m = 1e2 ... 1e7. Each timing is the median of 3 cold runs (a fresh accountant
and cleared per-mechanism caches, so the cumulant / RDP-curve work is counted
every time). The PLD accountants are run up to ``--prv-max`` / ``--fourier-max`` compositions
and only while one query takes less than ``--pld-limit`` seconds. Goal: Edgeworth at m = 1e7 takes at
most 3x its time at m = 1e2.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import statistics
import time

import results_schema

from tightdp import Gaussian, PoissonSampled
from tightdp.accountants import create
from tightdp.accountants import edgeworth as ew_mod
from tightdp.accountants import rdp as rdp_mod

MS = [10**k for k in range(2, 8)]


def clear_caches() -> None:
    ew_mod._mechanism_moments.cache_clear()
    rdp_mod._rdp_curve_cached.cache_clear()


def one(name: str, m: int, mech, delta: float) -> tuple[float, float]:
    clear_caches()
    acc = create(name, eps_error=0.01)
    t0 = time.perf_counter()
    b = acc.compose(mech, m).epsilon(delta)
    return time.perf_counter() - t0, float(b.estimate)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None, help="results file (default benchmarks/results/analytic.json)")
    ap.add_argument("--pld-limit", type=float, default=60.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--prv-max", type=float, default=1e5, help="largest m for the PRV accountant")
    ap.add_argument("--fourier-max", type=float, default=1e4, help="largest m for the Fourier accountant")
    args = ap.parse_args()
    mech = PoissonSampled(mechanism=Gaussian(noise_multiplier=1.0), sampling_rate=0.01)
    delta = 1e-5
    rows = []
    for name in ("edgeworth", "rdp", "gdp", "prv", "fourier"):
        cap = {"prv": args.prv_max, "fourier": args.fourier_max}.get(name, float("inf"))
        for m in MS:
            if m > cap:
                break
            times, eps = [], None
            try:
                for _ in range(args.repeats if name not in ("prv", "fourier") else 1):
                    t, eps = one(name, m, mech, delta)
                    times.append(t)
            except Exception as exc:  # record and move on: a benchmark reports, it does not hide failures
                print(f"{name:10s} m={m:>9d}  failed: {type(exc).__name__}: {exc}", flush=True)
                rows.append({"accountant": name, "m": m, "error": f"{type(exc).__name__}: {exc}"})
                break
            t = statistics.median(times)
            rows.append({"accountant": name, "m": m, "seconds": t, "epsilon": eps})
            print(f"{name:10s} m={m:>9d}  {t:8.3f} s  eps={eps:.4g}", flush=True)
            if name in ("prv", "fourier") and t > args.pld_limit:
                break
    ew = {r["m"]: r["seconds"] for r in rows if r["accountant"] == "edgeworth"}
    ratio = ew[10**7] / ew[10**2]
    print(f"edgeworth time(m=1e7) / time(m=1e2) = {ratio:.2f}  (acceptance: <= 3)")
    raw = {
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "setting": {"q": 0.01, "sigma": 1.0, "delta": delta},
        "rows": rows,
        "edgeworth_ratio_1e7_over_1e2": ratio,
    }
    print("wrote", results_schema.write("analytic", raw, args.out))


if __name__ == "__main__":
    main()

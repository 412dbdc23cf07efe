"""Random ledgers of the non-Gaussian mechanisms (the goal: "Laplace, randomized response,
pure/approximate DP, subsampled Laplace: widths within the requested accuracy; no PRV fallback needed in
the default accountant on a random sweep of these mechanisms (report the count)").

    .venv/bin/python benchmarks/sweep_mechanisms.py [--seed S] [--n N] [--json OUT]

Each setting draws one mechanism family and its parameters, a number of steps and a delta, sometimes a
second family composed with it; the default accountant answers ``epsilon(delta)`` with its caches cleared
first (a full computation) and the PRV accountant answers the same query as an independent certified
interval (coupling, not dominance): the two must meet. Counted: PRV fallbacks, widths above the default
target ``2 max(1e-3 epsilon, 5e-5)``, refusals, intervals that miss PRV's, the slowest call.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
import warnings

import numpy as np

import tightdp
from tightdp import (
    ApproximateDP,
    ConnectDotsAccountant,
    Laplace,
    PoissonSampled,
    PRVAccountant,
    PureDP,
    RandomizedResponse,
)


def _draw(rng: np.random.Generator):
    """One ``(family, mechanism, steps)`` with parameters spread log-uniformly over a practical range."""
    family = str(rng.choice(["laplace", "rr", "pure", "approx", "sampled_laplace"]))
    k = int(10 ** rng.uniform(0, 5))
    if family == "laplace":
        return family, Laplace(scale=float(10 ** rng.uniform(-0.3, 2.3))), k
    if family == "rr":
        return (
            family,
            RandomizedResponse(noise_parameter=float(rng.uniform(0.05, 0.95)), num_buckets=int(rng.integers(2, 11))),
            min(k, 10_000),
        )
    if family == "pure":
        return family, PureDP(epsilon=float(10 ** rng.uniform(-2, 0.3))), k
    if family == "approx":
        return (
            family,
            ApproximateDP(epsilon=float(10 ** rng.uniform(-2, 0.3)), delta=float(10 ** rng.uniform(-16, -9))),
            k,
        )
    return (
        family,
        PoissonSampled(
            mechanism=Laplace(scale=float(10 ** rng.uniform(-0.3, 1.7))), sampling_rate=float(10 ** rng.uniform(-3, 0))
        ),
        k,
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--json", default=None, help="write the rows and the summary here")
    ap.add_argument(
        "--prv-max-epsilon",
        type=float,
        default=1e4,
        help="skip the PRV reference above this epsilon (its grid grows with epsilon: 93 151 took 236 s and 18 GB)",
    )
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    rng = np.random.default_rng(args.seed)
    rows = []
    for _ in range(args.n):
        ledger, names = [], []
        for _ in range(1 if rng.uniform() < 0.7 else 2):
            _family, mech, k = _draw(rng)
            ledger.append((mech, k))
            names.append(f"{k} x {mech!r}")
        delta = float(10 ** rng.uniform(-12, -3))
        row = {"ledger": " + ".join(names), "delta": delta}
        tightdp.clear_caches()
        t0 = time.perf_counter()
        try:
            b = ConnectDotsAccountant().compose(ledger).epsilon(delta)
        except Exception as exc:  # a refusal is a result of the sweep, counted and shown
            row.update(error=f"{type(exc).__name__}: {exc}", seconds=time.perf_counter() - t0)
            rows.append(row)
            print(f"{row['ledger'][:90]:90s} d={delta:.1e}: {row['error'][:100]}", flush=True)
            continue
        row.update(
            seconds=time.perf_counter() - t0,
            lower=b.lower,
            upper=b.upper,
            fallback=b.details.get("fallback"),
            passes=b.details.get("passes"),
        )
        target = 2 * max(1e-3 * b.upper, 5e-5)
        row["wide"] = bool(math.isfinite(b.upper) and b.upper - b.lower > target * (1 + 1e-9))
        try:
            if b.upper > args.prv_max_epsilon:
                raise RuntimeError(f"skipped: epsilon above --prv-max-epsilon {args.prv_max_epsilon:g}")
            ref = PRVAccountant().compose(ledger).epsilon(delta)
            row["prv"] = [ref.lower, ref.upper]
            row["disagree"] = bool(ref.lower > b.upper * (1 + 1e-12) or b.lower > ref.upper * (1 + 1e-12))
        except Exception as exc:
            row["prv"] = f"{type(exc).__name__}: {str(exc)[:80]}"
        rows.append(row)
        print(
            f"{row['ledger'][:90]:90s} d={delta:.1e}: [{b.lower:.6g}, {b.upper:.6g}] {row['seconds']:.3f}s "
            f"{'FALLBACK ' if row['fallback'] else ''}{'WIDE ' if row['wide'] else ''}"
            f"{'DISAGREE' if row.get('disagree') else ''}",
            flush=True,
        )
    times = [r["seconds"] for r in rows]
    summary = {
        "n": len(rows),
        "fallbacks": sum(bool(r.get("fallback")) for r in rows),
        "wider_than_target": sum(bool(r.get("wide")) for r in rows),
        "refusals": sum("error" in r for r in rows),
        "disagree_with_prv": sum(bool(r.get("disagree")) for r in rows),
        "prv_not_checked": sum(isinstance(r.get("prv"), str) for r in rows),
        "max_seconds": max(times),
        "median_seconds": float(np.median(times)),
    }
    print(json.dumps(summary))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                {
                    "command": " ".join([sys.executable.split("/")[-1], *sys.argv]),
                    "date": time.ctime(),
                    "machine": platform.machine(),
                    "summary": summary,
                    "rows": rows,
                },
                fh,
                indent=1,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())

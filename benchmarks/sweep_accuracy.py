"""Random DP-SGD settings in the fuzz space (q 1e-4..1, sigma 0.4..10, k 1..1e7, delta 1e-12..1e-3):
time, interval width (absolute and relative), PRV fallbacks and refusals of the default accountant.

    .venv/bin/python benchmarks/sweep_accuracy.py SEED N [REL_ERROR] [--rare]

``REL_ERROR`` (e.g. 1e-2) runs ``ConnectDotsAccountant(rel_error=...)`` instead of the default (relative 1e-3,
floor 5e-5; ``abs`` runs the old absolute ``eps_error=0.01``); ``tightdp.clear_caches()`` before every call, so
each time is a full computation. The last line counts the calls whose width misses the target
``2 max(rel epsilon, 5e-5)`` (the goal: width <= 0.2 % of epsilon, or <= 1e-4 below 0.05).
``--rare`` draws from the fuzz space's hardest corner instead: few sampled steps (q k between 0.01 and 3,
q 1e-4...1e-2) at a tiny delta (1e-12...1e-8), where the composition is nearly a point mass.
"""

import math
import sys
import time
import warnings

warnings.simplefilter("ignore")
import numpy as np

import tightdp
from tightdp import ConnectDotsAccountant, dpsgd_mechanism

rare = "--rare" in sys.argv[1:]
sys.argv = [a for a in sys.argv if a != "--rare"]
rng = np.random.default_rng(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
n = int(sys.argv[2]) if len(sys.argv) > 2 else 30
arg = sys.argv[3] if len(sys.argv) > 3 else None
absolute = arg == "abs"
rel = None if arg in (None, "abs") else float(arg)
target = (lambda e: 0.02) if absolute else (lambda e: 2 * max((rel or 1e-3) * e, 5e-5))
rows = []
for _i in range(n):
    if rare:
        q = float(10 ** rng.uniform(-4, -2))
        s = float(10 ** rng.uniform(math.log10(0.4), 1))
        k = max(1, int(10 ** rng.uniform(-2, math.log10(3)) / q))
        d = float(10 ** rng.uniform(-12, -8))
    else:
        q = float(10 ** rng.uniform(-4, 0))
        s = float(10 ** rng.uniform(math.log10(0.4), 1))
        k = int(10 ** rng.uniform(0, 7))
        d = float(10 ** rng.uniform(-12, -3))
    tightdp.clear_caches()
    t = time.time()
    try:
        acc = (
            ConnectDotsAccountant(eps_error=0.01)
            if absolute
            else ConnectDotsAccountant(rel_error=rel)
            if rel
            else ConnectDotsAccountant()
        )
        b = acc.compose(dpsgd_mechanism(noise_multiplier=s, sampling_rate=q), k).epsilon(d)
        dt = time.time() - t
        rows.append(
            dict(
                q=q,
                s=s,
                k=k,
                d=d,
                lo=b.lower,
                up=b.upper,
                t=dt,
                fb=b.details.get("fallback"),
                note=b.details.get("note"),
                miss=b.upper - b.lower > target(b.upper) * (1 + 1e-9),
            )
        )
        print(
            f"q={q:.2e} s={s:.2f} k={k:8d} d={d:.1e}: [{b.lower:.6g}, {b.upper:.6g}] w={b.upper - b.lower:.2e} rel={(b.upper - b.lower) / max(b.upper, 1e-300):.1e} {dt:.2f}s {'FB' if b.details.get('fallback') else ''}{' MISS' if rows[-1]['miss'] else ''}",
            flush=True,
        )
    except Exception as e:
        dt = time.time() - t
        rows.append(dict(q=q, s=s, k=k, d=d, err=f"{type(e).__name__}: {e}", t=dt))
        print(f"q={q:.2e} s={s:.2f} k={k:8d} d={d:.1e}: {type(e).__name__}: {str(e)[:120]} {dt:.2f}s", flush=True)
ts = [r["t"] for r in rows]
print(
    f"n={len(rows)} max time {max(ts):.2f}s, >10s: {sum(t > 10 for t in ts)}, errors: {sum('err' in r for r in rows)}, fallbacks: {sum(bool(r.get('fb')) for r in rows)}, "
    f"wider than the target: {sum(bool(r.get('miss')) for r in rows)}"
)

"""Warm in-process timing: tightdp at its default accuracy against dp-accounting 0.6.0 at the
discretisation interval ``bench_horizon.py`` chose for the relative target, both in one process, in turn (min of
5 runs, 3 for calls over 5 s; ``tightdp.clear_caches()`` and a new accountant before each). DP-SGD, delta = 1e-5; A: sigma 1, q 0.01; B: sigma 0.8, q 4e-3.

    .venv/bin/python benchmarks/bench_horizon_warm.py [--both-estimates] [--abs [--with-1e7]] [--k K] [--reps N]

``--both-estimates`` also times dp-accounting's interval: its pessimistic estimate (connect-the-dots, an upper
estimate) *and* its optimistic one (privacy buckets, a lower estimate), the two compositions a two-sided answer
costs there, as tightdp's certified interval needs its dominating and its dominated composition.
``--abs`` times ``ConnectDotsAccountant(eps_error=1e-3)`` instead of the default, against dp-accounting at the
interval ``bench_horizon.py`` chose for that target (k = 1e2, 1e4 and 1e6; ``--with-1e7`` adds B at 1e7, where
dp-accounting needs about 40 s a call). ``--k 100`` keeps the rows of one horizon; ``--reps`` runs each call
that many times (default 5) and keeps the fastest. ``benchmarks/one_call.py`` runs one such call in a fresh
process (cold).
"""

import datetime as _dt
import logging
import os
import platform
import sys
import time

import dp_accounting
import results_schema
from dp_accounting.pld import pld_privacy_accountant as ppa
from dp_accounting.pld import privacy_loss_distribution as pld

import tightdp
from tightdp import ConnectDotsAccountant

logging.getLogger().setLevel(logging.ERROR)
both = "--both-estimates" in sys.argv[1:]
absolute = "--abs" in sys.argv[1:]
rows = [
    ("A", 1.0, 0.01, 10**6, 0.000781),
    ("A", 1.0, 0.01, 10**7, 0.000391),
    ("B", 0.8, 0.004, 10**6, 0.000391),
    ("B", 0.8, 0.004, 10**7, 0.000391),
    ("A", 1.0, 0.01, 10**4, 0.000781),
    ("B", 0.8, 0.004, 10**4, 0.000781),
    ("A", 1.0, 0.01, 10**2, 0.00156),
    ("B", 0.8, 0.004, 10**2, 0.00156),
]
if absolute:
    # (A, 1e7: no dp-accounting interval down to 1e-4 is within 1e-3 of the truth, BENCHMARKS.md; B, 1e7 takes it
    # about 40 s per call at 2.44e-5)
    rows = [
        ("A", 1.0, 0.01, 10**4, 0.000391),
        ("B", 0.8, 0.004, 10**4, 0.000391),
        ("A", 1.0, 0.01, 10**6, 9.77e-05),
        ("B", 0.8, 0.004, 10**6, 4.88e-05),
        ("A", 1.0, 0.01, 10**2, 0.00156),
        ("B", 0.8, 0.004, 10**2, 0.00313),
    ]
    if "--with-1e7" in sys.argv[1:]:
        rows.append(("B", 0.8, 0.004, 10**7, 2.44e-05))
args = sys.argv[1:]
if "--k" in args:
    only = int(float(args[args.index("--k") + 1]))
    rows = [r for r in rows if r[3] == only]
reps = int(args[args.index("--reps") + 1]) if "--reps" in args else 5
records = []
load = os.getloadavg()[0]
for name, s, q, k, iv in rows:
    tt, tp, to = [], [], []
    for rep in range(reps):
        if rep == 3 and tp and min(tp) > 5.0:
            break
        tightdp.clear_caches()
        t = time.perf_counter()
        acc_t = ConnectDotsAccountant(eps_error=1e-3) if absolute else ConnectDotsAccountant()
        b = acc_t.compose(tightdp.dpsgd_mechanism(noise_multiplier=s, sampling_rate=q), k).epsilon(1e-5)
        tt.append(time.perf_counter() - t)
        t = time.perf_counter()
        acc = ppa.PLDAccountant(value_discretization_interval=iv)
        acc.compose(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(s)), k)
        e = acc.get_epsilon(1e-5)
        tp.append(time.perf_counter() - t)
        if both:
            t = time.perf_counter()
            try:
                opt = pld.from_gaussian_mechanism(
                    s, sampling_prob=q, value_discretization_interval=iv, pessimistic_estimate=False
                ).self_compose(k)
                e_opt = f"{opt.get_epsilon_for_delta(1e-5):.6g}"
            except (OverflowError, ValueError, FloatingPointError) as exc:  # it fails at long horizons
                e_opt = f"{type(exc).__name__}: {exc}"
            to.append(time.perf_counter() - t)
    line = (
        f"{name} k={k:.0e}: tightdp [{b.lower:.6g}, {b.upper:.6g}] {min(tt):.3f}s | dp-acc({iv}) {e:.6g} "
        f"{min(tp):.3f}s | ratio {min(tp) / min(tt):.1f}x"
    )
    if both:
        line += (
            f" | dp-acc optimistic {e_opt} {min(to):.3f}s, both {min(tp) + min(to):.3f}s: "
            f"ratio {(min(tp) + min(to)) / min(tt):.1f}x"
        )
    print(line, flush=True)
    records.append(
        {"setting": name, "sigma": s, "q": q, "k": k, "lower": b.lower, "upper": b.upper, "seconds": min(tt)}
        | {"dpa_interval": iv, "dpa_epsilon": e, "dpa_seconds": min(tp)}
    )
if not both and "--k" not in args:  # the results file holds the full table of one target
    raw = {
        "absolute": absolute,
        "command": " ".join(["python", "benchmarks/bench_horizon_warm.py", *args]),
        "machine": f"{os.cpu_count()} cores, Python {platform.python_version()}, load average {load:.1f}",
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "rows": records,
    }
    print("wrote", results_schema.write("horizon_warm_abs" if absolute else "horizon_warm", raw))

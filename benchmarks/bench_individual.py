"""Benchmark: per-example accounting of N examples x T steps, as a user runs it (000 App. D).

    python benchmarks/bench_individual.py [--examples 100000] [--steps 10000] [--repeat 1] [--sample 3]

The accountant is built with its defaults (100 buckets, default resolution) unless
``--buckets`` / ``--resolution`` are given. Synthetic gradient norms (a per-example
scale U(0.1, 1.6) times a log-normal(0, 0.3) per step, about a third of them
clipped) are generated step by step and recorded with
``IndividualAccountant.record_step``: only the ``record_step`` calls are timed
(norm generation excluded, recording included, including the final fold of
buffered steps into the counts). Then every example's epsilon at delta = 1e-5
(``epsilons``: certified lower and upper ends) is timed. ``tightdp.clear_caches()``
runs before every repetition, and each repetition builds a fresh accountant, so no
repetition reuses another's work. Reports wall and CPU times, the 1-minute load
average, peak RSS (``ru_maxrss``, includes the norm generation), and, with
``--sample K``, K examples composed one by one with dp-accounting 0.6.0 (PLD,
heterogeneous composition of the same bucketed mechanisms).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time

import numpy as np


def _rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2


def _one(args, rep: int):
    import tightdp
    from tightdp.individual import IndividualAccountant

    tightdp.clear_caches()
    N, T = args.examples, args.steps
    rng = np.random.default_rng(rep)
    scale = rng.uniform(0.1, 1.6, size=N)
    extra = {}
    if args.resolution is not None:
        extra["resolution"] = args.resolution
    if args.buckets is not None:
        extra["num_buckets"] = args.buckets
    acc = IndividualAccountant(N, args.sigma, 1.0, args.q, **extra)
    load0 = os.getloadavg()[0]
    t_rec = c_rec = 0.0
    for _ in range(T):
        norms = scale * rng.lognormal(0.0, 0.3, size=N)  # not timed
        t0, c0 = time.perf_counter(), time.process_time()
        acc.record_step(norms)
        t_rec += time.perf_counter() - t0
        c_rec += time.process_time() - c0
    t0, c0 = time.perf_counter(), time.process_time()
    acc.bucket_counts  # folds the last buffered steps into the counts (part of recording)
    t_rec += time.perf_counter() - t0
    c_rec += time.process_time() - c0
    load1 = os.getloadavg()[0]
    t1, c1 = time.perf_counter(), time.process_time()
    res = acc.epsilons(1e-5)
    t_eps = time.perf_counter() - t1
    c_eps = time.process_time() - c1
    return acc, res, {"record_seconds": round(t_rec, 2), "record_cpu_seconds": round(c_rec, 2),
                      "epsilons_seconds": round(t_eps, 2), "epsilons_cpu_seconds": round(c_eps, 2),
                      "total_seconds": round(t_rec + t_eps, 2), "total_cpu_seconds": round(c_rec + c_eps, 2),
                      "load_average_1min": [round(load0, 2), round(load1, 2), round(os.getloadavg()[0], 2)]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--examples", type=int, default=100_000)
    p.add_argument("--steps", type=int, default=10_000)
    p.add_argument("--repeat", type=int, default=1, help="repetitions (fresh accountant, caches cleared)")
    p.add_argument("--sample", type=int, default=3, help="examples composed one by one with dp-accounting")
    p.add_argument("--sigma", type=float, default=1.0)
    p.add_argument("--q", type=float, default=0.01)
    p.add_argument("--buckets", type=int, default=None, help="num_buckets (default: the accountant's, 100)")
    p.add_argument("--resolution", type=float, default=None,
                   help="IndividualAccountant resolution (default: the accountant's own)")
    args = p.parse_args(argv)
    runs = []
    for rep in range(args.repeat):
        acc, res, timing = _one(args, rep)
        runs.append(timing)
    eps = res.upper
    out = {"examples": args.examples, "steps": args.steps, "q": args.q, "sigma": args.sigma,
           "options": acc.options(), "runs": runs,
           "best_total_seconds": min(r["total_seconds"] for r in runs),
           "peak_rss_gb": round(_rss_gb(), 3), "worst_case_epsilon": res.details["worst_case_epsilon"],
           "epsilon_quantiles": {k: float(np.quantile(eps, v)) for k, v in
                                 [("min", 0), ("median", 0.5), ("max", 1)]},
           "relative_width_quantiles": {k: float(np.quantile((res.upper - res.lower) / np.maximum(res.upper, 1e-300),
                                                             v)) for k, v in [("median", 0.5), ("max", 1)]}
           if res.lower is not None else None,
           "pld": {k: v for k, v in res.details.items() if k in ("remove", "add")}}
    if args.sample > 0:
        from dp_accounting.pld import privacy_loss_distribution as P
        counts = acc.bucket_counts
        B = acc.options()["num_buckets"]
        rng = np.random.default_rng(12345)
        idx = rng.choice(args.examples, size=args.sample, replace=False)
        t2 = time.perf_counter()
        ref = []
        for i in idx:
            pld = None
            for b in np.nonzero(counts[i, 1:])[0] + 1:
                one = P.from_gaussian_mechanism(args.sigma * B / b, sampling_prob=args.q,
                                                value_discretization_interval=1e-3)
                one = one.self_compose(int(counts[i, b]))
                pld = one if pld is None else pld.compose(one)
            ref.append(pld.get_epsilon_for_delta(1e-5))
        per_example = (time.perf_counter() - t2) / args.sample
        ours_per_example = runs[-1]["total_seconds"] / args.examples
        out.update(dp_accounting_seconds_per_example=round(per_example, 3),
                   ours_seconds_per_example=ours_per_example,
                   speedup=round(per_example / ours_per_example, 1),
                   sample_comparison=[{"ours": [float(res.lower[i]) if res.lower is not None else None,
                                                float(eps[i])], "dp_accounting": float(r)}
                                      for i, r in zip(idx, ref)])
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Benchmark: per-example accounting of N examples x T steps (000 App. D).

    python benchmarks/bench_individual.py [--examples 100000] [--steps 10000] [--sample 3]

Synthetic gradient norms (a per-example scale times a log-normal per step,
about a third of the steps clipped) are recorded step by step with
``IndividualAccountant.record_step``; then every example's epsilon is computed
at delta = 1e-5. Reports wall time, peak RSS, and the ratio against composing a
few examples one by one with dp-accounting 0.6.0 (PLD, heterogeneous
composition of the same bucketed mechanisms).
"""

from __future__ import annotations

import argparse
import json
import resource
import time

import numpy as np


def _rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--examples", type=int, default=100_000)
    p.add_argument("--steps", type=int, default=10_000)
    p.add_argument("--sample", type=int, default=3, help="examples composed one by one with dp-accounting")
    p.add_argument("--sigma", type=float, default=1.0)
    p.add_argument("--q", type=float, default=0.01)
    p.add_argument("--buckets", type=int, default=50)
    p.add_argument("--resolution", type=float, default=None,
                   help="IndividualAccountant resolution (default: the accountant's own)")
    args = p.parse_args(argv)
    from tightdp.individual import IndividualAccountant

    N, T = args.examples, args.steps
    rng = np.random.default_rng(0)
    scale = rng.uniform(0.1, 1.6, size=N)
    extra = {} if args.resolution is None else {"resolution": args.resolution}
    acc = IndividualAccountant(N, args.sigma, 1.0, args.q, num_buckets=args.buckets, **extra)
    gen_time = gen_cpu = 0.0
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(T):
        g0, gc0 = time.perf_counter(), time.process_time()
        norms = scale * rng.lognormal(0.0, 0.3, size=N)
        gen_time += time.perf_counter() - g0
        gen_cpu += time.process_time() - gc0
        acc.record_step(norms)
    t_rec = time.perf_counter() - t0 - gen_time
    c_rec = time.process_time() - c0 - gen_cpu
    t1, c1 = time.perf_counter(), time.process_time()
    res = acc.epsilons(1e-5)
    t_eps = time.perf_counter() - t1
    c_eps = time.process_time() - c1
    eps = res.upper
    worst = res.details["worst_case_epsilon"]
    out = {"examples": N, "steps": T, "q": args.q, "sigma": args.sigma, "buckets": args.buckets,
           "record_seconds": round(t_rec, 2), "norm_generation_seconds": round(gen_time, 2),
           "epsilons_seconds": round(t_eps, 2), "total_seconds": round(t_rec + t_eps, 2),
           "record_cpu_seconds": round(c_rec, 2), "epsilons_cpu_seconds": round(c_eps, 2),
           "load_average_1min": round(__import__("os").getloadavg()[0], 2),
           "peak_rss_gb": round(_rss_gb(), 3), "worst_case_epsilon": worst,
           "epsilon_quantiles": {k: float(np.quantile(eps, v)) for k, v in
                                 [("min", 0), ("median", 0.5), ("max", 1)]},
           "pld": {k: v for k, v in res.details.items() if k in ("remove", "add")}}
    # one by one with dp-accounting (the same bucketed mechanisms, PLD composition)
    if args.sample > 0:
        from dp_accounting.pld import privacy_loss_distribution as P
        counts = acc.bucket_counts
        idx = rng.choice(N, size=args.sample, replace=False)
        t2 = time.perf_counter()
        ref = []
        for i in idx:
            pld = None
            for b in np.nonzero(counts[i, 1:])[0] + 1:
                one = P.from_gaussian_mechanism(args.sigma * args.buckets / b, sampling_prob=args.q,
                                                value_discretization_interval=1e-3)
                one = one.self_compose(int(counts[i, b]))
                pld = one if pld is None else pld.compose(one)
            ref.append(pld.get_epsilon_for_delta(1e-5))
        per_example = (time.perf_counter() - t2) / args.sample
        ours_per_example = (t_rec + t_eps) / N
        out.update(dp_accounting_seconds_per_example=round(per_example, 3),
                   ours_seconds_per_example=ours_per_example,
                   speedup=round(per_example / ours_per_example, 1),
                   sample_comparison=[{"ours": float(eps[i]), "dp_accounting": float(r)} for i, r in zip(idx, ref)])
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Benchmark: per-example accounting of N examples x T steps, as a user runs it (Koskela et al. 2023, App. D).

    python benchmarks/bench_individual.py [--examples 100000] [--steps 10000] [--repeat 1] [--sample 3]
    python benchmarks/bench_individual.py --sharded --examples 10000000 --steps 1000 [--workers 2]

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

``--sharded``: the same population out of core on a ``dask.distributed.LocalCluster`` (``--workers``
processes, one thread each). Each shard of ``--shard-size`` examples is recorded step by step *on a
worker* (an ``IndividualAccountant`` per shard, as a data-parallel rank would) and saved there
(atomically) into ``--directory``; ``ShardedLedger.from_shards`` writes the manifest and loads the ledger
lazily, so no process ever holds the whole ledger. Norms per step are a per-example scale times a
log-normal factor read from a per-shard pool at a shifting offset (generation excluded from the timing:
only ``record_step`` and the final fold are timed, summed over the shards). Then the query on the
cluster: ``persist()`` (shards read from disk by the workers, cast to uint16, sorted by spread, kept in
their memory) and ``epsilons(1e-5, use_dask=True)`` (both ends of every example's interval). Peak memory
per worker (``ru_maxrss`` of each worker process) is reported for the recording and, after a worker
restart, for the query; and the peak of this (client) process. Free disk space is checked first.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time

import numpy as np


def _rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2


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
    acc = IndividualAccountant(
        num_examples=N, noise_multiplier=args.sigma, clip_norm=1.0, sampling_rate=args.q, **extra
    )
    load0 = os.getloadavg()[0]
    t_rec = c_rec = 0.0
    for _ in range(T):
        norms = scale * rng.lognormal(0.0, 0.3, size=N)  # not timed
        t0, c0 = time.perf_counter(), time.process_time()
        acc.record_step(norms)
        t_rec += time.perf_counter() - t0
        c_rec += time.process_time() - c0
    t0, c0 = time.perf_counter(), time.process_time()
    _ = acc.bucket_counts  # folds the last buffered steps into the counts (part of recording)
    t_rec += time.perf_counter() - t0
    c_rec += time.process_time() - c0
    load1 = os.getloadavg()[0]
    t1, c1 = time.perf_counter(), time.process_time()
    res = acc.epsilons(1e-5)
    t_eps = time.perf_counter() - t1
    c_eps = time.process_time() - c1
    return (
        acc,
        res,
        {
            "record_seconds": round(t_rec, 2),
            "record_cpu_seconds": round(c_rec, 2),
            "epsilons_seconds": round(t_eps, 2),
            "epsilons_cpu_seconds": round(c_eps, 2),
            "total_seconds": round(t_rec + t_eps, 2),
            "total_cpu_seconds": round(c_rec + c_eps, 2),
            "load_average_1min": [round(load0, 2), round(load1, 2), round(os.getloadavg()[0], 2)],
        },
    )


def _peak_gb() -> float:  # run on each worker
    import resource as _r

    return round(_r.getrusage(_r.RUSAGE_SELF).ru_maxrss / 1024**2, 3)


def _cpu_s() -> float:  # run on each worker: CPU seconds of the worker process so far
    import resource as _r

    u = _r.getrusage(_r.RUSAGE_SELF)
    return round(u.ru_utime + u.ru_stime, 1)


def _record_shard(directory: str, k: int, n: int, steps: int, opts: dict, seed: int) -> dict:
    """On a worker: record shard ``k`` (``n`` examples) for ``steps`` steps and save it (atomic)."""
    from tightdp.individual import IndividualAccountant

    rng = np.random.default_rng([seed, k])
    scale = rng.uniform(0.1, 1.6, size=n)
    period = 9973  # a prime: every step reads the pool at a new offset
    pool = rng.lognormal(0.0, 0.3, size=n + period)
    acc = IndividualAccountant(num_examples=n, **opts)
    t_rec = c_rec = 0.0
    for t in range(steps):
        off = (t * 7919) % period
        norms = scale * pool[off : off + n]  # not timed
        t0, c0 = time.perf_counter(), time.process_time()
        acc.record_step(norms)
        t_rec += time.perf_counter() - t0
        c_rec += time.process_time() - c0
    t0, c0 = time.perf_counter(), time.process_time()
    _ = acc.bucket_counts  # the final fold of buffered steps (part of recording)
    t_rec += time.perf_counter() - t0
    c_rec += time.process_time() - c0
    name = f"shard-{k:05d}-g1.npz"
    t0 = time.perf_counter()
    acc.save(os.path.join(directory, name))
    return {
        "file": name,
        "record_seconds": t_rec,
        "record_cpu_seconds": c_rec,
        "save_seconds": time.perf_counter() - t0,
    }


def _sharded(args) -> int:
    import shutil
    import tempfile

    from distributed import Client, LocalCluster

    import tightdp
    from tightdp.individual.sharded import ShardedLedger

    N, T, B = args.examples, args.steps, args.buckets or 100
    need = N * (B + 1) * 4 + (N // args.shard_size + 1) * 4096  # int32 counts per shard file
    base = args.directory or tempfile.gettempdir()
    os.makedirs(base, exist_ok=True)
    free = shutil.disk_usage(base).free
    if free < 1.5 * need:
        raise SystemExit(
            f"--directory {base}: {free / 2**30:.1f} GiB free, the ledger needs {need / 2**30:.1f} GiB (+50 % margin)"
        )
    directory = tempfile.mkdtemp(prefix="tightdp-sharded-", dir=base)
    opts = {"noise_multiplier": args.sigma, "clip_norm": 1.0, "sampling_rate": args.q}
    if args.buckets is not None:
        opts["num_buckets"] = args.buckets
    if args.resolution is not None:
        opts["resolution"] = args.resolution
    tightdp.clear_caches()
    out = {
        "mode": "sharded",
        "examples": N,
        "steps": T,
        "q": args.q,
        "sigma": args.sigma,
        "workers": args.workers,
        "shard_size": args.shard_size,
        "directory": directory,
        "disk_free_gb_before": round(free / 2**30, 1),
    }
    cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None)
    client = Client(cluster)
    try:
        out["worker_memory_limit_gb"] = [
            round(w["memory_limit"] / 2**30, 2) for w in client.scheduler_info()["workers"].values()
        ]
        ranges = [(s, min(N, s + args.shard_size)) for s in range(0, N, args.shard_size)]
        load0 = os.getloadavg()[0]
        t0 = time.perf_counter()
        futs = [
            client.submit(_record_shard, directory, k, e - s, T, opts, args.seed, pure=False)
            for k, (s, e) in enumerate(ranges)
        ]
        recs = client.gather(futs)
        t_phase = time.perf_counter() - t0
        out["record"] = {
            "wall_seconds_incl_norm_generation": round(t_phase, 1),
            "record_seconds_sum": round(sum(r["record_seconds"] for r in recs), 1),
            "record_cpu_seconds_sum": round(sum(r["record_cpu_seconds"] for r in recs), 1),
            "record_seconds_per_worker": round(sum(r["record_seconds"] for r in recs) / args.workers, 1),
            "save_seconds_sum": round(sum(r["save_seconds"] for r in recs), 1),
            "peak_rss_gb_per_worker": sorted(client.run(_peak_gb).values()),
            "cpu_seconds_per_worker": sorted(client.run(_cpu_s).values()),
            "load_average_1min": [round(load0, 2), round(os.getloadavg()[0], 2)],
        }
        out["disk_bytes"] = sum(os.path.getsize(os.path.join(directory, r["file"])) for r in recs)
        client.restart()  # fresh worker processes: the query's peaks are its own
        t0 = time.perf_counter()
        ledger = ShardedLedger.from_shards(directory, [r["file"] for r in recs])
        t_open = time.perf_counter() - t0
        load1 = os.getloadavg()[0]
        t0, c0 = time.perf_counter(), time.process_time()
        ledger.persist()
        t_persist = time.perf_counter() - t0
        t1 = time.perf_counter()
        res = ledger.epsilons(1e-5, use_dask=True)
        t_eps = time.perf_counter() - t1
        out["query"] = {
            "manifest_seconds": round(t_open, 2),
            "persist_sorted_seconds": round(t_persist, 1),
            "epsilons_seconds": round(t_eps, 1),
            "total_seconds": round(t_persist + t_eps, 1),
            "client_cpu_seconds": round(time.process_time() - c0, 1),
            "peak_rss_gb_per_worker": sorted(client.run(_peak_gb).values()),
            "cpu_seconds_per_worker": sorted(client.run(_cpu_s).values()),
            "load_average_1min": [round(load1, 2), round(os.getloadavg()[0], 2)],
        }
        out["total_seconds"] = round(out["record"]["wall_seconds_incl_norm_generation"] + t_open + t_persist + t_eps, 1)
        out["client_peak_rss_gb"] = round(_rss_gb(), 3)
        up, lo = res.upper, res.lower
        out["worst_case_epsilon"] = res.details["worst_case_epsilon"]
        out["epsilon_quantiles"] = {k: float(np.quantile(up, v)) for k, v in [("min", 0), ("median", 0.5), ("max", 1)]}
        out["relative_width_quantiles"] = {
            k: float(np.quantile((up - lo) / np.maximum(up, 1e-300), v)) for k, v in [("median", 0.5), ("max", 1)]
        }
        out["all_finite_and_ordered"] = bool(np.all(np.isfinite(up)) and np.all(lo <= up))
        if args.sample > 0:
            idx = np.sort(np.random.default_rng(12345).choice(N, size=args.sample, replace=False))
            rows = np.asarray(ledger.counts(use_dask=True)[idx].compute())
            out.update(_compare(args, rows, idx, lo, up, (t_persist + t_eps) / N))
    finally:
        client.close()
        cluster.close()
        if not args.keep:
            shutil.rmtree(directory, ignore_errors=True)
    print(json.dumps(out, indent=1))
    _write_results(out, args, sharded=True)
    return 0


def _compare(args, rows: np.ndarray, idx, lo, up, ours_per_example: float) -> dict:
    """Examples composed one by one with dp-accounting 0.6.0 (PLD, the same bucketed mechanisms)."""
    from dp_accounting.pld import privacy_loss_distribution as P

    B = rows.shape[1] - 1
    t2 = time.perf_counter()
    ref = []
    for row in rows:
        pld = None
        for b in np.nonzero(row[1:])[0] + 1:
            one = P.from_gaussian_mechanism(
                args.sigma * B / b, sampling_prob=args.q, value_discretization_interval=1e-3
            )
            one = one.self_compose(int(row[b]))
            pld = one if pld is None else pld.compose(one)
        ref.append(pld.get_epsilon_for_delta(1e-5))
    per_example = (time.perf_counter() - t2) / len(rows)
    return {
        "dp_accounting_seconds_per_example": round(per_example, 3),
        "ours_seconds_per_example": ours_per_example,
        "speedup": round(per_example / ours_per_example, 1),
        "sample_comparison": [
            {"ours": [float(lo[i]) if lo is not None else None, float(up[i])], "dp_accounting": float(r)}
            for i, r in zip(idx, ref)
        ],
    }


def _write_results(out: dict, args, sharded: bool) -> None:
    """The run's row in ``benchmarks/results/individual.json`` (rows of other sizes stay)."""
    import datetime as _dt
    import platform

    import results_schema

    n, t = out.get("examples", args.examples), out.get("steps", args.steps)
    where = "sharded ledger on a dask LocalCluster" if sharded else "in memory"
    own: dict = {}
    if sharded:
        own = {
            "record s": out["record"]["wall_seconds_incl_norm_generation"],
            "every interval s": out["query"]["total_seconds"],
            "total s": out["total_seconds"],
            "peak RSS GB": max(out["query"]["peak_rss_gb_per_worker"]),
        }
    else:
        best = min(out["runs"], key=lambda r: r["total_seconds"])
        own = {k: best.get(v) for k, v in (("record s", "record_seconds"), ("every interval s", "epsilons_seconds"))}
        own |= {"total s": best["total_seconds"], "peak RSS GB": out["peak_rss_gb"]}
    peers = {}
    if "dp_accounting_seconds_per_example" in out:
        own["per example ms"] = results_schema.sig(out["ours_seconds_per_example"] * 1e3)
        peers["dp-accounting 0.6.0 PLD, one example at a time"] = {
            "per example s": out["dp_accounting_seconds_per_example"],
            "ratio": results_schema.sig(out["speedup"], 2),
        }
    row = {"setting": f"{n:.0e} examples x {t:.0e} steps, {where}", "tightdp": own, "peers": peers}
    argv = " ".join(sys.argv[1:])
    fields = {
        "title": "Individual (per-example) accounting at scale",
        "what": (
            "`IndividualAccountant(num_examples=N, noise_multiplier=1.0, clip_norm=1.0, sampling_rate=0.01)` (100 "
            "buckets), synthetic norms recorded one step at a time with `record_step` (norm generation excluded), "
            "then every example's certified interval `epsilons(1e-5)` (both ends). Caches cleared and a fresh "
            "accountant per run; BLAS limited to one thread during queries. The peer composes sampled examples one "
            "by one with dp-accounting's PLD accountant (same bucketed mechanisms, pessimistic, interval 1e-3)."
        ),
        "command": f"python benchmarks/bench_individual.py {argv}".strip(),
        "machine": f"{os.cpu_count()} cores, Python {platform.python_version()}, "
        f"load average {os.getloadavg()[0]:.1f} at the end",
        "date": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "notes": [
            "Per-example intervals are about a bucket wide with continuous norms (median relative width "
            f"{out['relative_width_quantiles']['median']:.1%} in this run); norms on the grid k C / B give < 0.1 %."
        ]
        if out.get("relative_width_quantiles")
        else [],
    }
    print("wrote", results_schema.update_rows("individual", [row], out, fields))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--examples", type=int, default=100_000)
    p.add_argument("--steps", type=int, default=10_000)
    p.add_argument("--repeat", type=int, default=1, help="repetitions (fresh accountant, caches cleared)")
    p.add_argument("--sample", type=int, default=3, help="examples composed one by one with dp-accounting")
    p.add_argument("--sigma", type=float, default=1.0)
    p.add_argument("--q", type=float, default=0.01)
    p.add_argument("--buckets", type=int, default=None, help="num_buckets (default: the accountant's, 100)")
    p.add_argument(
        "--resolution", type=float, default=None, help="IndividualAccountant resolution (default: the accountant's own)"
    )
    p.add_argument(
        "--sharded",
        action="store_true",
        help="out of core on a dask LocalCluster (ShardedLedger; see the module docstring)",
    )
    p.add_argument("--workers", type=int, default=2, help="--sharded: LocalCluster worker processes")
    p.add_argument("--shard-size", type=int, default=1 << 17, help="--sharded: examples per shard")
    p.add_argument("--directory", default=None, help="--sharded: where the shard files go (default: $TMPDIR)")
    p.add_argument("--keep", action="store_true", help="--sharded: keep the shard files")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.sharded:
        return _sharded(args)
    runs = []
    for rep in range(args.repeat):
        acc, res, timing = _one(args, rep)
        runs.append(timing)
    eps = res.upper
    out = {
        "examples": args.examples,
        "steps": args.steps,
        "q": args.q,
        "sigma": args.sigma,
        "options": acc.options(),
        "runs": runs,
        "best_total_seconds": min(r["total_seconds"] for r in runs),
        "peak_rss_gb": round(_rss_gb(), 3),
        "worst_case_epsilon": res.details["worst_case_epsilon"],
        "epsilon_quantiles": {k: float(np.quantile(eps, v)) for k, v in [("min", 0), ("median", 0.5), ("max", 1)]},
        "relative_width_quantiles": {
            k: float(np.quantile((res.upper - res.lower) / np.maximum(res.upper, 1e-300), v))
            for k, v in [("median", 0.5), ("max", 1)]
        }
        if res.lower is not None
        else None,
        "pld": {k: v for k, v in res.details.items() if k in ("remove", "add")},
    }
    if args.sample > 0:
        idx = np.random.default_rng(12345).choice(args.examples, size=args.sample, replace=False)
        out.update(
            _compare(args, acc.bucket_counts[idx], idx, res.lower, eps, runs[-1]["total_seconds"] / args.examples)
        )
    print(json.dumps(out, indent=1))
    _write_results(out, args, sharded=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

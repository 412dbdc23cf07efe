"""Core-engine benchmark: tightdp.dpsgd_epsilon vs prv-accountant 0.2.0 and dp-accounting 0.6.0 (PLD).

One command (from the repository root)::

    .venv/bin/python benchmarks/bench_core.py [--quick] [--out benchmarks/results/core.json]
                                              [--plot benchmarks/core_time_vs_steps.png]

For DP-SGD (Poisson sampling, add/remove neighbouring, Gaussian noise) at
steps k = 1e2 ... 1e5 (and 1e6 unless ``--quick``) it times

* tightdp ``dpsgd_epsilon(eps_error=0.01)`` with its default accountant
  (``--accountant prv`` times the PRV accountant instead);
* prv-accountant ``PRVAccountant(eps_error=0.01, delta_error=delta/1000)``
  (the same ``eps_error`` as tightdp);
* dp-accounting PLD (connect-the-dots, pessimistic) at the *coarsest*
  ``value_discretization_interval`` of a decreasing ladder whose answer is
  within 0.01 of the truth.

Every tool is timed the same way, in a fresh Python process per measurement
(imports excluded): *cold* is the first call, *warm* the median of the next
three calls. tightdp's process-wide memos are emptied
(``tightdp.clear_caches()``) before every warm call, so a warm call redoes the
whole computation; only code and allocator state are warm.

"Truth" is the midpoint of tightdp's certified interval from the finest run
we can afford (``eps_error=0.002`` up to k=1e4, else 0.01); the benchmark
checks that it lies inside the ``eps_error=0.01`` bounds and that every peer
answer lies within ``[lower - 0.001, upper + 0.001]``. Every measurement runs
in a subprocess (fresh state, a memory cap, a timeout), each timing is the
median of 3 repeats (fewer only when one run exceeds 20 s; the count is in the
JSON). A peer is skipped at a size where log-log extrapolation from the two
previous sizes predicts more than ``--skip-seconds`` (default 60 s).

The script prints a Markdown table and writes the JSON and a log-log plot.
``--profile K`` instead prints a cProfile of one cold ``dpsgd_epsilon`` call.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import itertools
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import results_schema  # benchmarks/results_schema.py: the results files' schema

ROOT = Path(__file__).resolve().parent.parent
LADDER = (1e-2, 5e-3, 2e-3, 1e-3, 5e-4, 2e-4, 1e-4, 5e-5, 2e-5, 1e-5)
SETTINGS = (
    {"name": "A", "sigma": 1.0, "q": 0.01, "delta": 1e-5},
    {"name": "B", "sigma": 0.8, "q": 0.004, "delta": 1e-5},
)
EPS_ERROR = 0.01
TOL = 0.01  # dp-accounting interval: answer within TOL of the truth
SLACK = 1e-3  # peers must lie within [lower - SLACK, upper + SLACK]
SRC = ROOT / "src"
MEM_LIMIT = 12 * 2**30  # bytes of address space per worker (the machine is shared)


# ----------------------------------------------------------------------------- workers
def _median_time(fn, reps: int, first: float | None = None):
    """Median wall time of ``reps`` calls (``first`` is an already measured call)."""
    times = [] if first is None else [first]
    out = None
    while len(times) < reps:
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times, out


def _reps_for(seconds: float) -> int:
    return 3 if seconds <= 20 else 1


def _cold_then_warm(run, repeat: bool):
    """``(first result, {"cold_s", "seconds", "times"})``: the first call, then (with ``repeat``) the
    median of the next calls (``seconds`` is the first call's time without ``repeat``)."""
    t0 = time.perf_counter()
    res = run()
    first = time.perf_counter() - t0
    med, times = (_median_time(run, _reps_for(first))[:2]) if repeat else (first, [first])
    return res, {"cold_s": first, "seconds": med, "times": times}


def worker_tightdp(job):
    t0 = time.perf_counter()
    import tightdp

    import_s = time.perf_counter() - t0
    kw = dict(
        noise_multiplier=job["sigma"],
        sampling_rate=job["q"],
        steps=job["k"],
        delta=job["delta"],
        eps_error=job.get("eps_error", EPS_ERROR),
    )
    if job.get("accountant"):
        kw["accountant"] = job["accountant"]
    t0 = time.perf_counter()
    b = tightdp.dpsgd_epsilon(**kw)
    cold = time.perf_counter() - t0
    out = {
        "import_s": import_s,
        "cold_s": cold,
        "lower": float(b.lower),
        "estimate": float(b.estimate),
        "upper": float(b.upper),
        "kind": b.kind,
        "details": {k: (float(v) if isinstance(v, (int, float)) else str(v)) for k, v in b.details.items()},
    }
    if job.get("warm", True):

        def again():
            tightdp.clear_caches()  # no memoised discretisation: the whole computation again
            return tightdp.dpsgd_epsilon(**kw)

        warm, times, _ = _median_time(again, _reps_for(cold))
        out.update(warm_s=warm, warm_times=times)
    return out


def worker_prv(job):
    from prv_accountant import PoissonSubsampledGaussianMechanism, PRVAccountant

    def run():
        acc = PRVAccountant(
            prvs=[PoissonSubsampledGaussianMechanism(noise_multiplier=job["sigma"], sampling_probability=job["q"])],
            max_self_compositions=[job["k"]],
            eps_error=EPS_ERROR,
            delta_error=job["delta"] / 1000,
        )
        return acc.compute_epsilon(delta=job["delta"], num_self_compositions=[job["k"]])

    res, timing = _cold_then_warm(run, job.get("repeat", True))
    return {**timing, "lower": float(res[0]), "estimate": float(res[1]), "upper": float(res[2])}


def worker_dpa(job):
    from dp_accounting.pld import privacy_loss_distribution as pld

    def run():
        p = pld.from_gaussian_mechanism(
            standard_deviation=job["sigma"],
            sampling_prob=job["q"],
            value_discretization_interval=job["interval"],
            use_connect_dots=True,
        )
        return p.self_compose(job["k"]).get_epsilon_for_delta(job["delta"])

    eps, timing = _cold_then_warm(run, job.get("repeat", True))
    return {**timing, "epsilon": float(eps)}


WORKERS = {"tightdp": worker_tightdp, "prv": worker_prv, "dpa": worker_dpa}


def _limit_memory():
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (MEM_LIMIT, MEM_LIMIT))
    except (ImportError, ValueError, OSError):
        pass


ACCOUNTANT = None  # the tightdp accountant timed (--accountant; None: the library's default)


def run_job(job, timeout: float):
    """Run one measurement in a fresh process; failures come back as ``{"error": ...}``."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(job)]
    env = dict(os.environ, PYTHONPATH=str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            preexec_fn=_limit_memory if os.name == "posix" else None,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout:.0f} s"}
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["killed (memory?)"])[-1]
        return {"error": f"exit {proc.returncode}: {tail[:200]}", "wall_s": wall}
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["wall_s"] = wall
    return out


# ----------------------------------------------------------------------------- driver
def _predict(history: list[tuple[int, float]], k: int) -> float:
    """Log-log extrapolation of time from the last two (k, seconds) points (linear in k if only one)."""
    if not history:
        return 0.0
    if len(history) == 1:
        k0, t0 = history[-1]
        return t0 * k / k0
    (k0, t0), (k1, t1) = history[-2], history[-1]
    slope = max(1.0 if t1 > 5 else 0.5, math.log(max(t1, 1e-4) / max(t0, 1e-4)) / math.log(k1 / k0))
    return t1 * (k / k1) ** slope


def bench_setting(st, ks, skip_s: float, log):
    rows = []
    hist = {"tightdp": [], "prv": [], "dpa": []}
    for k in ks:
        job = {"sigma": st["sigma"], "q": st["q"], "delta": st["delta"], "k": k, "accountant": ACCOUNTANT}
        row = {"k": k}
        # tightdp: 3 fresh processes for the cold time, warm repeats inside each
        pred = _predict(hist["tightdp"], k)
        if pred > 50 * skip_s:
            row["tightdp"] = {"skipped": f"predicted {pred:.0f} s"}
        else:
            runs = []
            for _i in range(3):
                r = run_job(dict(job, tool="tightdp", warm=True), timeout=max(900.0, 3 * pred))
                runs.append(r)
                if "error" in r or r["cold_s"] > 20:
                    break
            good = [r for r in runs if "error" not in r]
            if not good:
                row["tightdp"] = {"error": runs[0]["error"]}
            else:
                r0 = good[0]
                warm = [r["warm_s"] for r in good if "warm_s" in r]
                row["tightdp"] = {
                    "cold_s": statistics.median(r["cold_s"] for r in good),
                    "cold_times": [r["cold_s"] for r in good],
                    "warm_s": statistics.median(warm) if warm else None,
                    "import_s": statistics.median(r["import_s"] for r in good),
                    "lower": r0["lower"],
                    "estimate": r0["estimate"],
                    "upper": r0["upper"],
                    "width": r0["upper"] - r0["lower"],
                    "details": r0["details"],
                }
                hist["tightdp"].append((k, row["tightdp"]["cold_s"]))
        log(f"[{st['name']}] k={k:g} tightdp: {_short(row['tightdp'])}")
        td = row["tightdp"]
        # reference ("truth"): the finest certified tightdp run we can afford
        if "lower" in td:
            ref = None
            if k <= 10_000:
                ref = run_job(dict(job, tool="tightdp", eps_error=0.002, warm=False), timeout=600)
                if "error" in ref:
                    ref = None
            src = ref if ref is not None else td
            truth = 0.5 * (src["lower"] + src["upper"])
            row["truth"] = {
                "value": truth,
                "half_width": 0.5 * (src["upper"] - src["lower"]),
                "eps_error": 0.002 if ref is not None else EPS_ERROR,
                "inside_tightdp_bounds": bool(td["lower"] <= truth <= td["upper"]),
            }
            if ref is not None:
                row["truth"]["ref_bounds"] = [ref["lower"], ref["upper"]]
                row["truth"]["ref_inside_check"] = bool(
                    td["lower"] - 1e-12 <= ref["lower"] and ref["upper"] <= td["upper"] + 1e-12
                )
        else:
            truth = None
            row["truth"] = None
        # prv-accountant
        pred = _predict(hist["prv"], k)
        if pred > skip_s:
            row["prv"] = {"skipped": f"predicted ~{pred:.0f} s > {skip_s:.0f} s"}
        else:
            r = run_job(dict(job, tool="prv"), timeout=max(4 * skip_s, 3 * pred))
            row["prv"] = r
            if "error" not in r:
                hist["prv"].append((k, r["seconds"]))
                if truth is not None:
                    r["inside"] = bool(td["lower"] - SLACK <= r["estimate"] <= td["upper"] + SLACK)
        log(f"[{st['name']}] k={k:g} prv-accountant: {_short(row['prv'])}")
        # dp-accounting: coarsest interval within TOL of the truth
        pred = _predict(hist["dpa"], k)
        if pred > skip_s:
            row["dpa"] = {"skipped": f"predicted ~{pred:.0f} s > {skip_s:.0f} s"}
        else:
            tried = []
            chosen = None
            for interval in LADDER:
                r = run_job(dict(job, tool="dpa", interval=interval, repeat=False), timeout=4 * skip_s)
                tried.append({"interval": interval, **r})
                if "error" in r:
                    break
                if truth is None and len(tried) >= 2 and abs(tried[-1]["epsilon"] - tried[-2]["epsilon"]) <= 1e-3:
                    # tightdp failed here: fall back to dp-accounting's converged answer as the reference
                    truth = r["epsilon"]
                    row["truth"] = {
                        "value": truth,
                        "source": "dp-accounting (two successive intervals agree within 1e-3; no tightdp answer)",
                        "inside_tightdp_bounds": True,
                    }
                    chosen = next(t["interval"] for t in tried if abs(t["epsilon"] - truth) <= TOL)
                    break
                if truth is not None and abs(r["epsilon"] - truth) <= TOL:
                    chosen = interval
                    break
                if r["seconds"] > skip_s:
                    break
            if chosen is None:
                row["dpa"] = {"skipped": "no interval within tolerance in time", "tried": tried}
            else:
                r = run_job(dict(job, tool="dpa", interval=chosen), timeout=4 * skip_s + 60)
                if "error" in r:
                    row["dpa"] = {"error": r["error"], "tried": tried}
                else:
                    r.update(interval=chosen, tried=tried)
                    if "lower" in td:
                        r["inside"] = bool(td["lower"] - SLACK <= r["epsilon"] <= td["upper"] + SLACK)
                    row["dpa"] = r
                    hist["dpa"].append((k, r["seconds"]))
        log(f"[{st['name']}] k={k:g} dp-accounting: {_short(row['dpa'])}")
        rows.append(row)
    return rows


def _short(d):
    if d is None:
        return "-"
    keys = ("cold_s", "warm_s", "seconds", "interval", "estimate", "epsilon", "width", "skipped", "error")
    return ", ".join(f"{k}={_fmt(d[k])}" for k in keys if k in d and d[k] is not None)


def _fmt(v):
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


# ----------------------------------------------------------------------------- analysis
def fit_exponent(points):
    """Least-squares slope of log(time) on log(k)."""
    pts = [(math.log(k), math.log(t)) for k, t in points if t and t > 0]
    if len(pts) < 2:
        return None
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx


def analyse(rows):
    out = {"ratios": [], "checks": []}
    for r in rows:
        td = r["tightdp"]
        peers = [
            (name, r[name]["seconds"], r[name].get("cold_s", r[name]["seconds"]))
            for name in ("prv", "dpa")
            if "seconds" in r.get(name, {})
        ]
        if "cold_s" in td and peers:
            name, best, best_cold = min(peers, key=lambda p: p[1])
            out["ratios"].append(
                {
                    "k": r["k"],
                    "faster_peer": name,
                    "peer_s": best,
                    "peer_cold_s": best_cold,
                    "ratio_cold": min(p[2] for p in peers) / td["cold_s"],
                    "ratio_warm": best / td["warm_s"] if td.get("warm_s") else None,
                }
            )
        for name in ("prv", "dpa"):
            if "inside" in r.get(name, {}) and not r[name]["inside"]:
                out["checks"].append(f"k={r['k']}: {name} answer outside tightdp bounds +- {SLACK}")
        if r.get("truth") and not r["truth"]["inside_tightdp_bounds"]:
            out["checks"].append(f"k={r['k']}: reference midpoint outside tightdp bounds")
    cold = [(r["k"], r["tightdp"].get("cold_s")) for r in rows if r["k"] <= 100_000]
    warm = [(r["k"], r["tightdp"].get("warm_s")) for r in rows if r["k"] <= 100_000]
    out["exponent_cold_1e2_1e5"] = fit_exponent(cold)
    out["exponent_warm_1e2_1e5"] = fit_exponent(warm)
    out["exponent_cold_all"] = fit_exponent([(r["k"], r["tightdp"].get("cold_s")) for r in rows])
    local = []
    for a, b in itertools.pairwise(rows):
        ta, tb = a["tightdp"].get("cold_s"), b["tightdp"].get("cold_s")
        if ta and tb:
            local.append({"k": [a["k"], b["k"]], "exponent": math.log(tb / ta) / math.log(b["k"] / a["k"])})
    out["local_exponents_cold"] = local
    in_range = [x for x in out["ratios"] if x["k"] <= 100_000]
    needed = {100, 1000, 10_000, 100_000}
    have = {x["k"] for x in in_range}
    out["speed_3x_met"] = bool(
        needed <= have and all(x["ratio_cold"] >= 3 and (x["ratio_warm"] or 0) >= 3 for x in in_range)
    )
    exp = out["exponent_cold_1e2_1e5"]
    out["sqrt_growth_met"] = bool(exp is not None and exp <= 0.5 + 0.05)
    return out


def markdown_table(st, rows):
    lines = [
        f"Setting {st['name']}: sigma={st['sigma']}, q={st['q']}, delta={st['delta']:g}, add-remove, "
        f"eps_error={EPS_ERROR}, tightdp accountant: {ACCOUNTANT or 'default (connect-dots)'}",
        "",
        "| steps k | tightdp cold s | tightdp warm s | tightdp width | prv-accountant cold / warm s | "
        "dp-accounting interval: cold / warm s | faster peer / tightdp (cold, warm) | truth eps |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        td = r["tightdp"]
        if "cold_s" in td:
            c1, c2, c3 = (
                f"{td['cold_s']:.3g}",
                (f"{td['warm_s']:.3g}" if td.get("warm_s") else "-"),
                f"{td['width']:.4f}",
            )
        else:
            c1, c2, c3 = td.get("skipped") or td.get("error", "-"), "-", "-"
        pr, dp = r["prv"], r["dpa"]
        missing = lambda d: "skipped: " + d["skipped"] if "skipped" in d else "error: " + d.get("error", "?")
        c4 = f"{pr.get('cold_s', pr['seconds']):.3g} / {pr['seconds']:.3g}" if "seconds" in pr else missing(pr)
        c5 = (
            f"{dp['interval']:g}: {dp.get('cold_s', dp['seconds']):.3g} / {dp['seconds']:.3g}"
            if "seconds" in dp
            else missing(dp)
        )
        peers = [(n, r[n]["seconds"], r[n].get("cold_s", r[n]["seconds"])) for n in ("prv", "dpa") if "seconds" in r[n]]
        if peers and "cold_s" in td:
            n, best, _ = min(peers, key=lambda p: p[1])
            best_cold = min(p[2] for p in peers)
            label = {"prv": "prv-acc", "dpa": "dp-acc"}[n]
            warm = f"{best / td['warm_s']:.1f}" if td.get("warm_s") else "-"
            c6 = f"{best_cold / td['cold_s']:.1f}, {warm} ({label})"
        else:
            c6 = "-"
        c7 = (f"{r['truth']['value']:.4f}" + ("*" if "source" in r["truth"] else "")) if r.get("truth") else "-"
        lines.append(f"| {r['k']:.0e} | {c1} | {c2} | {c3} | {c4} | {c5} | {c6} | {c7} |")
    return "\n".join(lines)


def plot(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sets = results["settings"]
    fig, axes = plt.subplots(1, len(sets), figsize=(6 * len(sets), 4.5), squeeze=False)
    for ax, s in zip(axes[0], sets):
        rows = s["rows"]
        for key, sub, label, style in (
            ("tightdp", "cold_s", "tightdp (cold)", "o-"),
            ("tightdp", "warm_s", "tightdp (warm)", "o--"),
            ("prv", "seconds", "prv-accountant 0.2.0", "s-"),
            ("dpa", "seconds", "dp-accounting 0.6.0 PLD", "^-"),
        ):
            pts = [(r["k"], r[key].get(sub)) for r in rows if r[key].get(sub)]
            if pts:
                ax.loglog(*zip(*pts), style, label=label)
        pts = [(r["k"], r["tightdp"]["cold_s"]) for r in rows if r["tightdp"].get("cold_s")]
        if pts:
            k0, t0 = pts[0]
            ks = [r["k"] for r in rows]
            ax.loglog(ks, [t0 * math.sqrt(k / k0) for k in ks], ":", color="grey", label="~sqrt(k)")
        st = s["setting"]
        ax.set_title(f"sigma={st['sigma']}, q={st['q']}, delta={st['delta']:g} (eps_error={EPS_ERROR})")
        ax.set_xlabel("steps k")
        ax.set_ylabel("seconds (warm: median of 3; cold: first call)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def profile(k: int, sigma: float, q: float, delta: float, n: int = 30):
    import cProfile
    import pstats

    import tightdp

    pr = cProfile.Profile()
    pr.enable()
    t0 = time.perf_counter()
    b = tightdp.dpsgd_epsilon(noise_multiplier=sigma, sampling_rate=q, steps=k, delta=delta, eps_error=EPS_ERROR)
    wall = time.perf_counter() - t0
    pr.disable()
    print(
        f"k={k} sigma={sigma} q={q} delta={delta:g}: {wall:.3f} s, bounds {b.lower:.5f} {b.upper:.5f}, "
        f"details {b.details}"
    )
    st = pstats.Stats(pr)
    st.sort_stats("cumulative").print_stats(n)
    st.sort_stats("tottime").print_stats(n)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="steps up to 1e5 only")
    ap.add_argument(
        "--accountant",
        default=None,
        help="tightdp accountant to time (default: the library's default, connect-dots; or prv)",
    )
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "core.json"))
    ap.add_argument("--plot", default=str(ROOT / "benchmarks" / "core_time_vs_steps.png"))
    ap.add_argument(
        "--settings", default="A,B", help="comma list of setting names (A: sigma=1,q=0.01; B: sigma=0.8,q=0.004)"
    )
    ap.add_argument(
        "--src",
        default=None,
        help="import tightdp from this src directory (e.g. a `git archive` "
        "snapshot of a commit) instead of the checkout's src/",
    )
    ap.add_argument("--steps", default=None, help="comma list of steps overriding the default sizes")
    ap.add_argument("--skip-seconds", type=float, default=60.0)
    ap.add_argument("--profile", type=int, default=None, metavar="K", help="cProfile one cold call at K steps")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    global ACCOUNTANT
    ACCOUNTANT = args.accountant
    global SRC
    if args.src:
        SRC = Path(args.src).resolve()
    if args.worker is not None:
        job = json.loads(args.worker)
        print(json.dumps(WORKERS[job["tool"]](job)))
        return 0
    if args.profile is not None:
        st = SETTINGS[0]
        profile(args.profile, st["sigma"], st["q"], st["delta"])
        return 0

    ks = [100, 1000, 10_000, 100_000] + ([] if args.quick else [1_000_000])
    if args.steps:
        ks = [int(float(x)) for x in args.steps.split(",")]
    names = set(args.settings.split(","))
    cmd = " ".join([".venv/bin/python", "benchmarks/bench_core.py"] + (argv if argv is not None else sys.argv[1:]))
    results = {
        "command": cmd,
        "date": _dt.datetime.now().isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "versions": _versions(),
        "tightdp_src": str(SRC),
        "eps_error": EPS_ERROR,
        "tolerance": TOL,
        "slack": SLACK,
        "ladder": LADDER,
        "settings": [],
    }
    t_start = time.perf_counter()
    for st in SETTINGS:
        if st["name"] not in names:
            continue
        rows = bench_setting(st, ks, args.skip_seconds, lambda m: print(m, flush=True))
        results["settings"].append({"setting": st, "rows": rows, "analysis": analyse(rows)})
        Path(args.out + ".partial").write_text(json.dumps(results, indent=1))  # survives a crash
    results["total_seconds"] = time.perf_counter() - t_start
    results_schema.write("core", results, args.out)
    Path(args.out + ".partial").unlink(missing_ok=True)
    print()
    for s in results["settings"]:
        print(markdown_table(s["setting"], s["rows"]))
        a = s["analysis"]
        print(
            f"\nfitted exponent of tightdp cold time vs k (1e2..1e5): {_fmt(a['exponent_cold_1e2_1e5'])}; "
            f"warm: {_fmt(a['exponent_warm_1e2_1e5'])}; local: "
            + ", ".join(f"{x['k'][0]:.0e}->{x['k'][1]:.0e}: {x['exponent']:.2f}" for x in a["local_exponents_cold"])
        )
        print(
            f"3x faster than the faster peer for 1e2..1e5: {a['speed_3x_met']}; grows <= sqrt(k): "
            f"{a['sqrt_growth_met']}; checks: {a['checks'] or 'all peers inside tightdp bounds'}\n"
        )
    if args.plot:
        try:
            plot(results, args.plot)
            print(f"plot: {args.plot}")
        except ImportError as exc:  # matplotlib is an optional extra
            print(f"no plot ({exc})")
    return 0


def _versions():
    from importlib import metadata

    out = {}
    for pkg in ("tightdp", "prv-accountant", "dp-accounting", "numpy", "scipy"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    snap = SRC.parent / "COMMIT"  # written next to a `git archive` snapshot
    if snap.exists():
        out["tightdp_snapshot_commit"] = snap.read_text().strip()
    with contextlib.suppress(OSError):
        out["tightdp_git"] = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
    return out


if __name__ == "__main__":
    sys.exit(main())

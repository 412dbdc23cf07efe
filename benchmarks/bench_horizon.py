"""Long-horizon benchmark: tightdp's certified DP-SGD epsilon against dp-accounting and
prv-accountant at k = 1e2 ... 1e7 steps, at a relative and an absolute accuracy.

One command (from the repository root)::

    .venv/bin/python benchmarks/bench_horizon.py [--quick] [--out benchmarks/results/horizon.json]
                                                 [--peer-cap 600] [--settings A,B] [--ks 100,1e4,1e6,1e7]

DP-SGD: Poisson-subsampled Gaussian, add/remove neighbouring, delta = 1e-5; settings A (sigma = 1,
q = 0.01) and B (sigma = 0.8, q = 4e-3). Two accuracy targets, each a half-width ``err``:

* ``rel``: ``ConnectDotsAccountant(rel_error=1e-3)``, width <= 2 max(1e-3 eps, 5e-5), so
  ``err = max(1e-3 eps, 5e-5)``;
* ``abs``: ``ConnectDotsAccountant(eps_error=1e-3)``, width <= 2e-3, ``err = 1e-3``;

and ``default``: ``tightdp.dpsgd_epsilon(...)`` with no accuracy argument (the JSON records which accuracy
the default resolves to, from ``ConnectDotsAccountant().options()``).

Peers, at each target's ``err``:

* dp-accounting 0.6.0, ``dp_accounting.pld.PLDAccountant(value_discretization_interval=v)`` composed with
  ``SelfComposedDpEvent``-style ``compose(PoissonSampledDpEvent(q, GaussianDpEvent(sigma)), k)``. ``v`` is
  the COARSEST interval of the geometric ladder 0.1 * 2^-j (j = 0, 1, ...) whose epsilon is within ``err`` of
  every point of the truth bracket (below); dp-accounting's default ``v = 1e-4`` is run too (value and time).
* prv-accountant 0.2.0, ``PRVAccountant(eps_error=err, delta_error=delta / 1000)``.

Truth bracket: the intersection of every certified tightdp interval computed for the row (rel, abs,
default, and a reference run at ten times the accuracy, ``rel_error=1e-4`` and ``eps_error=1e-4``, each
given ``--ref-cap`` seconds). A peer answer is "within err of the truth" when
``|answer - mid| + half_width <= err`` (mid, half_width: the bracket's); if the bracket is wider than
``err`` the weaker test ``|answer - mid| <= err`` is used and the row says so (``criterion``).

Timing (every figure is wall seconds; the machine's ``nproc`` and load averages are recorded):

* ``warm``: in one worker process, after a first call (``first_call_s``: cold code, import excluded),
  ``--reps`` repetitions, each with ``tightdp.clear_caches()`` and a fresh accountant (peers: a fresh
  accountant; they memoise nothing across accountants); min and median.
* ``cold``: ``--cold-runs`` fresh ``python -c`` processes, import included (the command is in the JSON,
  ``cold_cmd``, so that it can be re-timed from outside, e.g. with ``/usr/bin/time -v``); min and median.

Ratios (peer / tightdp, same run, same machine period) use medians, warm against warm and cold against
cold. The growth of tightdp's time with k is the least-squares slope of log(warm median) on log(k) and the
slope between successive k (acceptance: <= 0.5, i.e. no faster than sqrt(k)).

A peer call that runs longer than ``--peer-cap`` seconds is killed and reported as ``"> cap"``; where a
log-log extrapolation from the previous k predicts more than ``--skip-factor`` x cap, the call is not
started and the row says ``"> cap (predicted ...)"``. Each worker runs under a 12 GB address-space limit.

``--quick``: k = 1e2 and 1e4, one warm repetition, one cold process per tool and target, a 10 s peer cap
(a few tens of seconds in all; ``tests/docs/test_benchmarks_smoke.py`` runs it on setting A).
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
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import results_schema  # benchmarks/results_schema.py: the results files' schema

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
DELTA = 1e-5
SETTINGS = {"A": {"name": "A", "sigma": 1.0, "q": 0.01}, "B": {"name": "B", "sigma": 0.8, "q": 4e-3}}
KS_FULL = (100, 10_000, 1_000_000, 10_000_000)
KS_QUICK = (100, 10_000)
#: tightdp accuracy targets: (ConnectDotsAccountant keyword arguments, relative part, absolute floor)
TARGETS = {"rel": ({"rel_error": 1e-3}, 1e-3, 5e-5), "abs": ({"eps_error": 1e-3}, None, 1e-3)}
REFERENCE = {"rel": {"rel_error": 1e-4}, "abs": {"eps_error": 1e-4}}
LADDER = tuple(0.1 * 2.0**-j for j in range(18))  # 0.1 ... 7.6e-7
DPA_DEFAULT_INTERVAL = 1e-4
MEM_LIMIT = 12 * 2**30
SLOW_CALL_S = 20.0  # a call slower than this is not repeated (warm = its first call) and run cold once


def half_width(target: str, eps: float) -> float:
    """The half-width ``err`` a target asks for at an answer near ``eps``."""
    _, rel, floor = TARGETS[target]
    return floor if rel is None else max(rel * eps, floor)


# ----------------------------------------------------------------------------- code run by workers
def _emit(obj) -> None:
    print(json.dumps(obj), flush=True)


def _stats(times):
    return {"min_s": min(times), "median_s": statistics.median(times), "times": times}


def _tightdp_call(kind: str, kw: dict, job: dict):
    import tightdp

    if kind == "default":
        return tightdp.dpsgd_epsilon(
            noise_multiplier=job["sigma"], sampling_rate=job["q"], steps=job["k"], delta=job["delta"]
        )
    step = tightdp.PoissonSampled(mechanism=tightdp.Gaussian(noise_multiplier=job["sigma"]), sampling_rate=job["q"])
    return tightdp.ConnectDotsAccountant(**kw).compose(step, job["k"]).epsilon(job["delta"])


def worker_tightdp(job):
    """One line per call: ``{"label", "first_call_s", "warm": {...}, "lower", "estimate", "upper", ...}``."""
    t0 = time.perf_counter()
    import tightdp

    _emit({"import_s": time.perf_counter() - t0, "default_options": tightdp.ConnectDotsAccountant().options()})
    for label, kind, kw, reps in job["calls"]:
        tightdp.clear_caches()
        t0 = time.perf_counter()
        b = _tightdp_call(kind, kw, job)
        first = time.perf_counter() - t0
        times = []
        for _ in range(reps if first < SLOW_CALL_S else 0):
            tightdp.clear_caches()
            t0 = time.perf_counter()
            _tightdp_call(kind, kw, job)
            times.append(time.perf_counter() - t0)
        det = b.details
        refs = det.get("refinements") or []
        _emit(
            {
                "label": label,
                "first_call_s": first,
                "warm": _stats(times) if times else None,
                "lower": float(b.lower),
                "estimate": float(b.estimate),
                "upper": float(b.upper),
                "passes": det.get("passes"),
                "mesh": det.get("mesh"),
                "fallback": det.get("fallback"),
                "grid_cap": det.get("grid_cap"),
                "note": det.get("note"),
                "refinement_widths": [r.get("width") for r in refs],
                "refinement_meshes": [r.get("mesh") for r in refs],
            }
        )


def _dpa_epsilon(job, interval):
    from dp_accounting import dp_event
    from dp_accounting.pld import PLDAccountant

    acc = PLDAccountant(value_discretization_interval=interval)
    acc.compose(dp_event.PoissonSampledDpEvent(job["q"], dp_event.GaussianDpEvent(job["sigma"])), job["k"])
    return float(acc.get_epsilon(job["delta"]))


def worker_dpa(job):
    """The ladder search in one process: one line per interval tried (a single call each, coarse to fine,
    until every target's ``err`` is met); after each interval that is the coarsest for some target, a line
    with its warm repetitions; then (``job["default"]``) dp-accounting's default interval."""
    import dp_accounting.pld  # noqa: F401  (import outside the timings)

    def warm(interval, first):
        times = []
        for _ in range(job["reps"] if first < SLOW_CALL_S else 0):
            t0 = time.perf_counter()
            _dpa_epsilon(job, interval)
            times.append(time.perf_counter() - t0)
        _emit({"interval": interval, "warm": _stats(times) if times else None})

    errs, found = job["errs"], set()
    for interval in job["intervals"]:
        t0 = time.perf_counter()
        eps = _dpa_epsilon(job, interval)
        first = time.perf_counter() - t0
        ok = {t: within(eps, job["bracket"], e) for t, e in errs.items()}
        _emit(
            {
                "interval": interval,
                "epsilon": eps,
                "first_call_s": first,
                "within": {t: v[0] for t, v in ok.items()},
                "criterion": {t: v[1] for t, v in ok.items()},
            }
        )
        new = {t for t, v in ok.items() if v[0]} - found
        if new:
            found |= new
            warm(interval, first)
        if len(found) == len(errs):
            break
    if job.get("default"):
        interval = DPA_DEFAULT_INTERVAL
        t0 = time.perf_counter()
        eps = _dpa_epsilon(job, interval)
        first = time.perf_counter() - t0
        _emit({"interval": interval, "epsilon": eps, "first_call_s": first, "default": True})
        warm(interval, first)


def worker_prv(job):
    """One line per target: ``job["eps_errors"]`` maps a target to prv-accountant's ``eps_error``."""
    from prv_accountant import PoissonSubsampledGaussianMechanism, PRVAccountant

    for target, eps_error in job["eps_errors"].items():

        def run():
            acc = PRVAccountant(
                prvs=[PoissonSubsampledGaussianMechanism(noise_multiplier=job["sigma"], sampling_probability=job["q"])],
                max_self_compositions=[job["k"]],
                eps_error=eps_error,
                delta_error=job["delta"] / 1000,
            )
            return acc.compute_epsilon(delta=job["delta"], num_self_compositions=[job["k"]])

        t0 = time.perf_counter()
        lo, est, up = run()
        first = time.perf_counter() - t0
        times = []
        for _ in range(job["reps"] if first < SLOW_CALL_S else 0):
            t0 = time.perf_counter()
            run()
            times.append(time.perf_counter() - t0)
        _emit(
            {
                "target": target,
                "eps_error": eps_error,
                "lower": float(lo),
                "estimate": float(est),
                "upper": float(up),
                "first_call_s": first,
                "warm": _stats(times) if times else None,
            }
        )


WORKERS = {"tightdp": worker_tightdp, "dpa": worker_dpa, "prv": worker_prv}


# ----------------------------------------------------------------------------- cold-process commands
def cold_code(tool: str, job: dict, **kw) -> str:
    s, q, k, d = job["sigma"], job["q"], job["k"], job["delta"]
    if tool == "tightdp-default":
        return (
            f"import tightdp; b = tightdp.dpsgd_epsilon(noise_multiplier={s!r}, sampling_rate={q!r}, "
            f"steps={k}, delta={d!r}); print(b.lower, b.upper)"
        )
    if tool == "tightdp":
        args = ", ".join(f"{a}={v!r}" for a, v in kw.items())
        return (
            "from tightdp import ConnectDotsAccountant, PoissonSampled, Gaussian; "
            f"b = ConnectDotsAccountant({args}).compose(PoissonSampled(mechanism=Gaussian(noise_multiplier={s!r}), "
            f"sampling_rate={q!r}), {k}).epsilon({d!r}); print(b.lower, b.upper)"
        )
    if tool == "dpa":
        return (
            "from dp_accounting import dp_event as e; from dp_accounting.pld import PLDAccountant; "
            f"a = PLDAccountant(value_discretization_interval={kw['interval']!r}); "
            f"a.compose(e.PoissonSampledDpEvent({q!r}, e.GaussianDpEvent({s!r})), {k}); print(a.get_epsilon({d!r}))"
        )
    if tool == "prv":
        return (
            "from prv_accountant import PRVAccountant, PoissonSubsampledGaussianMechanism as M; "
            f"a = PRVAccountant(prvs=[M(noise_multiplier={s!r}, sampling_probability={q!r})], "
            f"max_self_compositions=[{k}], eps_error={kw['eps_error']!r}, delta_error={d / 1000!r}); "
            f"print(a.compute_epsilon(delta={d!r}, num_self_compositions=[{k}]))"
        )
    raise ValueError(f"unknown tool {tool!r}")


def _env():
    return dict(os.environ, PYTHONPATH=str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def _limit_memory():
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_AS, (MEM_LIMIT, MEM_LIMIT))


def run_cold(code: str, runs: int, timeout: float):
    """Wall and CPU seconds (the child's user + sys) of ``runs`` fresh processes running ``code``."""
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(
                [sys.executable, "-c", code],
                capture_output=True,
                text=True,
                timeout=timeout,
                env=_env(),
                preexec_fn=_limit_memory,
            )
        except subprocess.TimeoutExpired:
            return {"error": f"> cap ({timeout:.0f} s)", "runs": walls}
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0:
            return {"error": f"exit {proc.returncode}: {(proc.stderr.strip().splitlines() or ['?'])[-1][:200]}"}
        walls.append(wall)
        cpus.append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
    if not walls:
        return None
    return {
        "min_s": min(walls),
        "median_s": statistics.median(walls),
        "times": walls,
        "cpu_median_s": statistics.median(cpus),
        "runs": len(walls),
    }


def run_worker(tool: str, job: dict, timeout: float):
    """The JSON lines a worker printed, and an error string (``None`` if it finished)."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", tool, json.dumps(job)]
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, env=_env(), preexec_fn=_limit_memory
        )
        out, err = proc.stdout, None
        if proc.returncode != 0:
            err = f"exit {proc.returncode}: {(proc.stderr.strip().splitlines() or ['killed (memory?)'])[-1][:300]}"
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err = f"> cap ({timeout:.0f} s)"
    lines = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
    return lines, err


# ----------------------------------------------------------------------------- driver
def _predict(history, k):
    """Log-log extrapolation of seconds at ``k`` from ``[(k, s), ...]`` (slope >= 0.5; 0.5 from one point)."""
    worst = {}
    for a, t in history:
        if t:
            worst[a] = max(worst.get(a, 0.0), t)
    pts = sorted(worst.items())
    if not pts:
        return 0.0
    if len(pts) == 1:
        return pts[0][1] * (k / pts[0][0]) ** 0.5
    (k0, t0), (k1, t1) = pts[-2], pts[-1]
    slope = max(0.5, math.log(max(t1, 1e-3) / max(t0, 1e-3)) / math.log(k1 / k0))
    return t1 * (k / k1) ** slope


def _bracket(intervals):
    lo = max(b[0] for b in intervals)
    up = min(b[1] for b in intervals)
    return lo, up


def within(eps: float, bracket, err: float):
    """``(ok, criterion)``: is ``eps`` within ``err`` of every point of the bracket (or, if the bracket is
    wider than ``err``, of its midpoint)?"""
    lo, up = bracket
    mid, hw = 0.5 * (lo + up), 0.5 * (up - lo)
    if hw <= 0.5 * err:
        return abs(eps - mid) + hw <= err, "every point of the truth bracket"
    return abs(eps - mid) <= err, "midpoint of the truth bracket (bracket wider than err)"


def bench_row(st, k, args, hist, log):
    job = {"sigma": st["sigma"], "q": st["q"], "k": k, "delta": DELTA}
    row = {"k": k, "tightdp": {}, "dpa": {}, "prv": {}, "reference": {}}
    # --- tightdp: rel, abs, default (warm), then the references
    calls = [[t, "accountant", TARGETS[t][0], args.reps] for t in TARGETS] + [["default", "default", {}, args.reps]]
    lines, err = run_worker("tightdp", dict(job, calls=calls), timeout=args.tightdp_cap)
    if err:
        row["tightdp_error"] = err
    head = lines[0] if lines else {}
    row["tightdp_import_s"] = head.get("import_s")
    row["default_options"] = head.get("default_options")
    for ln in lines[1:]:
        row["tightdp"][ln.pop("label")] = ln
    for t, r in row["tightdp"].items():
        r["width"] = r["upper"] - r["lower"]
        tt = t if t in TARGETS else "rel"
        r["target_width"] = 2 * half_width(tt, r["upper"]) if t in TARGETS else None
        r["met_width"] = None if t not in TARGETS else bool(r["width"] <= r["target_width"] * (1 + 1e-9))
    for t in ("rel", "abs", "default"):
        if t in row["tightdp"]:
            kw = TARGETS[t][0] if t in TARGETS else None
            code = cold_code("tightdp", job, **kw) if kw else cold_code("tightdp-default", job)
            slow = row["tightdp"][t]["first_call_s"] >= SLOW_CALL_S
            runs = 0 if (args.quick and t != "rel") else (1 if slow else args.cold_runs)
            cold = run_cold(code, runs, timeout=args.tightdp_cap)
            row["tightdp"][t].update(cold=cold, cold_cmd=f"python -c {json.dumps(code)}")
    log(
        f"[{st['name']}] k={k:.0e} tightdp "
        + "; ".join(
            f"{t}: [{r['lower']:.6f}, {r['upper']:.6f}] w={r['width']:.2e} passes={r['passes']} "
            f"warm={r['warm']['median_s'] if r['warm'] else float('nan'):.3g}s "
            f"cold={(r.get('cold') or {}).get('median_s', float('nan')):.3g}s"
            for t, r in row["tightdp"].items()
        )
        + (f" ERROR {err}" if err else "")
    )
    certified = [(r["lower"], r["upper"]) for r in row["tightdp"].values()]
    for t, kw in REFERENCE.items():
        if args.ref_cap <= 0:
            break
        lines, err = run_worker("tightdp", dict(job, calls=[[f"ref-{t}", "accountant", kw, 0]]), timeout=args.ref_cap)
        if err or len(lines) < 2:
            row["reference"][t] = {"error": err or "no answer"}
        else:
            r = lines[1]
            row["reference"][t] = {k_: r[k_] for k_ in ("lower", "upper", "first_call_s", "passes", "grid_cap")}
            certified.append((r["lower"], r["upper"]))
    if not certified:
        return row
    lo, up = _bracket(certified)
    row["bracket"] = [lo, up]
    if lo > up:  # certified intervals that miss each other: a bug; never hide it
        row["bracket_error"] = f"certified tightdp intervals do not intersect: {certified}"
        log(f"  !! {row['bracket_error']}")
        return row
    mid = 0.5 * (lo + up)
    errs = {t: half_width(t, mid) for t in TARGETS}
    row["err"] = errs
    # --- dp-accounting: the ladder search, the chosen intervals' warm timings and the default, one worker
    pred = _predict(hist["dpa"], k)
    if pred > args.skip_factor * args.peer_cap:
        row["dpa"]["ladder_error"] = f"> cap (predicted {pred:.0f} s)"
        lines = []
    else:
        pd = _predict(hist["dpa_default"], k)
        row["dpa"]["default_skipped"] = (
            f"> cap (predicted {pd:.0f} s)" if pd > args.skip_factor * args.peer_cap else None
        )
        lines, err = run_worker(
            "dpa",
            dict(
                job,
                intervals=list(LADDER),
                bracket=[lo, up],
                errs=errs,
                reps=args.reps,
                default=row["dpa"]["default_skipped"] is None,
            ),
            timeout=2 * args.peer_cap,
        )
        if err:
            row["dpa"]["ladder_error"] = err
    calls = {}  # interval -> record (ladder and default runs kept apart)
    tried = []
    for ln in lines:
        if "epsilon" in ln:
            if ln.get("default"):
                key = (ln["interval"], "default")
            else:
                key = (ln["interval"], "ladder")
                tried.append({x: ln[x] for x in ("interval", "epsilon", "first_call_s", "within")})
            calls[key] = dict(ln)
            last = key
        else:  # the warm line that follows its interval's first call
            calls[last]["warm"] = ln["warm"]
    row["dpa"]["tried"] = tried
    for t in TARGETS:
        hit = next((c for (v, kind), c in calls.items() if kind == "ladder" and c["within"][t]), None)
        if hit is None:
            row["dpa"][t] = {"missing": row["dpa"].get("ladder_error") or "no interval of the ladder within err"}
        else:
            row["dpa"][t] = {x: hit[x] for x in ("interval", "epsilon", "first_call_s", "warm")}
            row["dpa"][t]["criterion"] = hit["criterion"][t]
    row["dpa"]["default"] = calls.get((DPA_DEFAULT_INTERVAL, "default")) or {
        "error": row["dpa"].get("default_skipped") or row["dpa"].get("ladder_error") or "not reached"
    }
    for t in TARGETS:
        if "first_call_s" in row["dpa"][t]:
            hist["dpa"].append((k, row["dpa"][t]["first_call_s"]))
    if "first_call_s" in row["dpa"]["default"]:
        hist["dpa_default"].append((k, row["dpa"]["default"]["first_call_s"]))
    cold_done = {}
    for t in (*TARGETS, "default"):
        rec = row["dpa"][t]
        if "epsilon" not in rec or (args.quick and t != "rel"):
            continue
        code = cold_code("dpa", job, interval=rec["interval"])
        if code not in cold_done:
            runs = args.cold_runs if rec["first_call_s"] < SLOW_CALL_S else 1
            cold_done[code] = run_cold(code, runs, timeout=2 * args.peer_cap)
        rec.update(cold=cold_done[code], cold_cmd=f"python -c {json.dumps(code)}")
    log(
        f"[{st['name']}] k={k:.0e} dp-accounting "
        + "; ".join(
            f"{t}: "
            + (
                f"v={r['interval']:.3g} eps={r['epsilon']:.6f} first={r['first_call_s']:.3g}s "
                f"warm={_med(r.get('warm'))} cold={_med(r.get('cold'))}"
                if "epsilon" in r
                else str(r)
            )
            for t, r in ((t, row["dpa"][t]) for t in (*TARGETS, "default"))
        )
    )
    # --- prv-accountant at each target's err, one worker
    todo = {}
    for t in TARGETS:
        pred = _predict(hist[f"prv-{t}"], k)
        if pred > args.skip_factor * args.peer_cap:
            row["prv"][t] = {"error": f"> cap (predicted {pred:.0f} s)", "eps_error": errs[t]}
        else:
            todo[t] = errs[t]
    # the cheaper target first (the larger eps_error), so that a timeout loses the dearer one only
    todo = dict(sorted(todo.items(), key=lambda kv: -kv[1]))
    if todo:
        lines, err = run_worker("prv", dict(job, eps_errors=todo, reps=args.reps), timeout=args.peer_cap * len(todo))
        for ln in lines:
            row["prv"][ln.pop("target")] = ln
        for t in todo:
            if t not in row["prv"]:
                row["prv"][t] = {"error": err or "no answer", "eps_error": errs[t]}
                if err and "> cap" in err:
                    hist[f"prv-{t}"].append((k, args.peer_cap))
            else:
                rec = row["prv"][t]
                hist[f"prv-{t}"].append((k, rec["first_call_s"]))
                if args.quick and t != "rel":
                    continue
                code = cold_code("prv", job, eps_error=errs[t])
                runs = args.cold_runs if rec["first_call_s"] < SLOW_CALL_S else 1
                if rec["first_call_s"] * runs < args.peer_cap:
                    rec["cold"] = run_cold(code, runs, timeout=2 * args.peer_cap)
                rec["cold_cmd"] = f"python -c {json.dumps(code)}"
    log(
        f"[{st['name']}] k={k:.0e} prv-accountant "
        + "; ".join(
            f"{t}: "
            + (
                f"[{r['lower']:.6f}, {r['upper']:.6f}] first={r['first_call_s']:.3g}s warm={_med(r.get('warm'))} "
                f"cold={_med(r.get('cold'))}"
                if "lower" in r
                else r.get("error", "?")
            )
            for t, r in row["prv"].items()
        )
    )
    row["checks"] = check_peers(row)
    row["ratios"] = ratios(row)
    for c in row["checks"]:
        log(f"  !! {c}")
    return row


def _med(d):
    return "-" if not d or "median_s" not in d else f"{d['median_s']:.3g}s"


def check_peers(row):
    """Peer answers outside tightdp's certified bracket (beyond the peer's own stated error)."""
    out = []
    lo, up = row["bracket"]
    for name in (*TARGETS, "default"):
        r = row["dpa"].get(name)
        if r and "epsilon" in r:
            e = r["epsilon"]
            if e < lo:
                out.append(
                    f"dp-accounting (interval {r['interval']:g}) eps {e:.9g} BELOW the certified lower bound "
                    f"{lo:.9g} (under-report by {lo - e:.3g})"
                )
            elif e > up + half_width("abs" if name == "abs" else "rel", up):
                out.append(
                    f"dp-accounting (interval {r['interval']:g}) eps {e:.9g} above the certified upper bound "
                    f"{up:.9g} by {e - up:.3g} (pessimistic)"
                )
    for t, r in row["prv"].items():
        if "lower" in r and (r["upper"] < lo or r["lower"] > up):
            out.append(
                f"prv-accountant ({t}, eps_error {r['eps_error']:.3g}) interval [{r['lower']:.9g}, "
                f"{r['upper']:.9g}] misses the certified bracket [{lo:.9g}, {up:.9g}]"
            )
    return out


def warm_s(rec) -> float | None:
    """A record's warm figure: the median of its repetitions, else (a slow call, or ``--reps 0``) its first
    call in the worker process (import excluded)."""
    if not rec:
        return None
    return (rec.get("warm") or {}).get("median_s") or rec.get("first_call_s")


def ratios(row):
    """peer / tightdp, medians: warm vs warm, cold (fresh process) vs cold, per target."""
    out = {}
    for t in TARGETS:
        td = row["tightdp"].get(t)
        if not td:
            continue
        o = {}
        for peer in ("dpa", "prv"):
            p = row[peer].get(t) or {}
            pw, tw = warm_s(p), warm_s(td)
            o[f"{peer}_warm"] = pw / tw if (pw and tw) else (p.get("error") or p.get("missing") or "-")
            pc, tc = (p.get("cold") or {}).get("median_s"), (td.get("cold") or {}).get("median_s")
            if pc and tc:
                o[f"{peer}_cold"] = pc / tc
        out[t] = o
    return out


def slope(points):
    pts = [(math.log(k), math.log(t)) for k, t in points if t and t > 0]
    if len(pts) < 2:
        return None
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / sum((p[0] - mx) ** 2 for p in pts)


def growth(rows):
    out = {}
    for t in (*TARGETS, "default"):
        pts = [(r["k"], warm_s(r["tightdp"].get(t))) for r in rows]
        pts = [p for p in pts if p[1]]
        local = [
            {"k": [a[0], b[0]], "slope": math.log(b[1] / a[1]) / math.log(b[0] / a[0])}
            for a, b in itertools.pairwise(pts)
        ]
        s = slope(pts)
        out[t] = {
            "slope_warm": s,
            "local": local,
            "met": bool(s is not None and s <= 0.5 and all(x["slope"] <= 0.5 for x in local)),
        }
    return out


def markdown(results):
    lines = []
    for s in results["settings"]:
        lines += [
            "",
            f"Setting {s['name']}: sigma = {s['sigma']}, q = {s['q']}, delta = {DELTA:g}",
            "",
            "| k | target | tightdp [lower, upper] | passes | tightdp warm / cold s | dp-acc interval: eps, "
            "warm / cold s | prv-acc warm / cold s | ratio dp-acc (warm, cold) | ratio prv (warm, cold) |",
            "|---:|---|---|---:|---|---|---|---|---|",
        ]
        for r in s["rows"]:
            for t in (*TARGETS, "default"):
                td = r["tightdp"].get(t)
                if not td:
                    continue
                tdc = f"[{td['lower']:.6g}, {td['upper']:.6g}]" + (
                    "" if td.get("met_width") in (None, True) else " (wide)"
                )
                tdt = f"{_f(warm_s(td))} / {_sec(td.get('cold'))}"
                if t in TARGETS:
                    d, p, ra = r["dpa"].get(t) or {}, r["prv"].get(t) or {}, r.get("ratios", {}).get(t, {})
                    dc = (
                        (f"{d['interval']:.3g}: {d['epsilon']:.6g}, {_f(warm_s(d))} / {_sec(d.get('cold'))}")
                        if "epsilon" in d
                        else (d.get("missing") or d.get("error") or "-")
                    )
                    pc = f"{_f(warm_s(p))} / {_sec(p.get('cold'))}" if "lower" in p else p.get("error", "-")
                    rd = f"{_r(ra.get('dpa_warm'))}, {_r(ra.get('dpa_cold'))}"
                    rp = f"{_r(ra.get('prv_warm'))}, {_r(ra.get('prv_cold'))}"
                else:
                    d = r["dpa"].get("default") or {}
                    dc = (
                        f"default {d['interval']:g}: {d['epsilon']:.6g}, {_f(warm_s(d))} / {_sec(d.get('cold'))}"
                        if "epsilon" in d
                        else d.get("error", "-")
                    )
                    pc, rd, rp = "", "", ""
                lines.append(f"| {r['k']:.0e} | {t} | {tdc} | {td['passes']} | {tdt} | {dc} | {pc} | {rd} | {rp} |")
            if r.get("tightdp_error"):
                missing = ", ".join(t for t in (*TARGETS, "default") if t not in r["tightdp"])
                lines.append(
                    f"| {r['k']:.0e} | {missing} | tightdp worker failed: {r['tightdp_error'][:120]} | | | | | | |"
                )
        g = s.get("growth", {})
        lines.append("")
        lines.append(
            "Growth of tightdp's warm time with k (log-log slope; <= 0.5 is sqrt(k)): "
            + "; ".join(
                f"{t}: {_f(v['slope_warm'])} (local {', '.join(_f(x['slope']) for x in v['local'])})"
                for t, v in g.items()
            )
        )
    return "\n".join(lines)


def _f(v):
    return "-" if v is None else (f"{v:.3g}" if isinstance(v, float) else str(v))


def _sec(d):
    return "-" if not d or "median_s" not in d else f"{d['median_s']:.3g}"


def _r(v):
    return "-" if v is None else (f"{v:.1f}x" if isinstance(v, float) else str(v))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="k = 1e2 and 1e4, one repetition, 10 s peer cap")
    ap.add_argument(
        "--out",
        default=None,
        help="results file (default benchmarks/results/horizon.json; --quick: benchmarks/horizon_quick.json)",
    )
    ap.add_argument("--settings", default="A,B")
    ap.add_argument("--ks", default=None, help="comma-separated step counts")
    ap.add_argument("--reps", type=int, default=None, help="warm repetitions (default 3, --quick 1)")
    ap.add_argument(
        "--cold-runs", type=int, default=None, help="fresh processes per cold figure (default 3, --quick 1)"
    )
    ap.add_argument(
        "--peer-cap", type=float, default=None, help="seconds a peer call may take (default 600, --quick 10)"
    )
    ap.add_argument("--tightdp-cap", type=float, default=1800.0)
    ap.add_argument("--ref-cap", type=float, default=None, help="seconds per reference run (default 600, --quick 10)")
    ap.add_argument(
        "--skip-factor", type=float, default=2.0, help="skip a peer call whose predicted time exceeds this many caps"
    )
    ap.add_argument(
        "--report",
        metavar="JSON",
        help="recompute checks, ratios, growth and the tables of a results "
        "file (written back in place) and print the tables",
    )
    ap.add_argument("--worker", nargs=2, metavar=("TOOL", "JOB"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        WORKERS[args.worker[0]](json.loads(args.worker[1]))
        return 0
    if args.report:
        path = Path(args.report)
        results = results_schema.raw_of(path)
        finish(results)
        results_schema.rewrite("horizon", results, path)
        print(markdown(results))
        return 0
    q = args.quick
    args.reps = args.reps if args.reps is not None else (1 if q else 3)
    args.cold_runs = args.cold_runs if args.cold_runs is not None else (1 if q else 3)
    args.peer_cap = args.peer_cap if args.peer_cap is not None else (10.0 if q else 600.0)
    args.ref_cap = args.ref_cap if args.ref_cap is not None else (0.0 if q else 600.0)
    ks = [int(float(x)) for x in args.ks.split(",")] if args.ks else list(KS_QUICK if q else KS_FULL)
    out = Path(args.out) if args.out else ROOT / "benchmarks" / ("horizon_quick.json" if q else "results/horizon.json")

    partial = out.with_name(out.name + ".partial")

    def log(msg):
        print(msg, flush=True)

    from importlib.metadata import version

    import dp_accounting  # noqa: F401  (fail early if a peer is missing)
    import prv_accountant  # noqa: F401

    t_start = time.time()
    results = {
        "command": " ".join([".venv/bin/python", "benchmarks/bench_horizon.py", *(argv or sys.argv[1:])]),
        "date": _dt.datetime.now().isoformat(timespec="seconds"),
        "nproc": os.cpu_count(),
        "loadavg_start": os.getloadavg(),
        "python": platform.python_version(),
        "versions": {p: version(p) for p in ("numpy", "scipy", "dp-accounting", "prv-accountant")},
        "commit": _git_head(),
        "delta": DELTA,
        "ks": ks,
        "quick": q,
        "options": {
            "reps": args.reps,
            "cold_runs": args.cold_runs,
            "peer_cap_s": args.peer_cap,
            "ref_cap_s": args.ref_cap,
            "skip_factor": args.skip_factor,
        },
        "targets": {t: {"kwargs": v[0], "rel": v[1], "floor": v[2]} for t, v in TARGETS.items()},
        "ladder": list(LADDER),
        "settings": [],
    }
    for name in args.settings.split(","):
        st = dict(SETTINGS[name], delta=DELTA)
        hist = {"dpa": [], "dpa_default": [], **{f"prv-{t}": [] for t in TARGETS}}
        rows = []
        for k in ks:
            row = bench_row(st, k, args, hist, log)
            row["loadavg"] = os.getloadavg()
            rows.append(row)
            results["settings"] = [s for s in results["settings"] if s["name"] != name] + [
                {**st, "rows": rows, "growth": growth(rows)}
            ]
            partial.write_text(json.dumps(results, indent=1, default=str) + "\n")  # survives a crash
    results["loadavg_end"] = os.getloadavg()
    results["total_s"] = time.time() - t_start
    finish(results)
    results_schema.write("horizon", results, out)
    partial.unlink(missing_ok=True)
    log(markdown(results))
    log(f"\ndefault accuracy of dpsgd_epsilon: {results['default_accuracy']}")
    log(f"wrote {out} in {results['total_s']:.0f} s; load average {results['loadavg_end']}")
    return 0


def finish(results):
    """The run-wide analysis: per row the peer checks and ratios, per setting the growth, and the summary."""
    for s in results["settings"]:
        for r in s["rows"]:
            if "bracket" in r and not r.get("bracket_error"):
                r["checks"] = check_peers(r)
                r["ratios"] = ratios(r)
        s["growth"] = growth(s["rows"])
    defaults = {json.dumps(r.get("default_options"), sort_keys=True) for s in results["settings"] for r in s["rows"]}
    results["default_accuracy"] = [json.loads(d) for d in defaults]
    results["checks"] = [
        f"{s['name']} k={r['k']:.0e}: {c}" for s in results["settings"] for r in s["rows"] for c in r.get("checks", [])
    ]


def _git_head():
    try:
        return (
            subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10
            ).stdout.strip()
            or None
        )
    except (OSError, subprocess.SubprocessError):
        return None


if __name__ == "__main__":
    sys.exit(main())

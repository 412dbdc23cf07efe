"""The results files of the benchmarks: one JSON schema, the converters from each script's own output to it.

Every ``benchmarks/bench_*.py`` writes ``benchmarks/results/<name>.json`` through :func:`write`, and
``benchmarks/render_benchmarks_md.py`` renders BENCHMARKS.md from those files. The schema (described in
``benchmarks/README.md``)::

    {
      "schema": "tightdp-benchmark/1",
      "benchmark": "<name>",                 # the file's stem
      "title": "...",                        # the section heading
      "what": "...",                         # what is measured, and how it is timed
      "command": "..." or ["...", ...],      # the command(s) that produced the figures
      "machine": "...",                      # cores, Python, load where recorded
      "date": "YYYY-MM-DD...",               # when the figures were measured
      "rows": [
        {"setting": "...",
         "tightdp": {"<column>": value, ...},
         "peers": {"<peer name>": {"<column>": value, ...}, ...}}
      ],
      "notes": ["...", ...],
      "raw": {...},                          # optional: the script's own output, every measured figure
      "history": [{"date", "command", "machine", "raw"}, ...]   # optional: earlier runs, newest first
    }

A value is a number, a string, ``null`` (not measured) or ``[lower, upper]`` (a certified interval).
A file without ``"schema"`` in the shape a script wrote before this schema is converted on reading
(:func:`load`), by the converter registered under its stem.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

SCHEMA = "tightdp-benchmark/1"
RESULTS = Path(__file__).resolve().parent / "results"
REQUIRED = ("schema", "benchmark", "title", "what", "command", "machine", "date", "rows", "notes")


def sig(x: Any, digits: int = 3) -> Any:
    """``x`` rounded to ``digits`` significant digits (times); other values unchanged."""
    if isinstance(x, float) and math.isfinite(x) and x != 0:
        return float(f"{x:.{digits}g}")
    return x


def interval(lower: Any, upper: Any, digits: int = 6) -> list[Any]:
    return [sig(lower, digits) if lower is not None else None, sig(upper, digits) if upper is not None else None]


def validate(doc: dict[str, Any]) -> list[str]:
    """What is wrong with ``doc`` as a results file (empty when it follows the schema)."""
    bad = [f"missing {k!r}" for k in REQUIRED if k not in doc]
    if doc.get("schema") not in (None, SCHEMA):
        bad.append(f"schema {doc.get('schema')!r} is not {SCHEMA!r}")
    if not isinstance(doc.get("rows"), list) or not doc.get("rows"):
        bad.append("rows must be a non-empty list")
        return bad
    for i, row in enumerate(doc["rows"]):
        if not isinstance(row.get("setting"), str):
            bad.append(f"row {i}: setting must be a string")
        if not isinstance(row.get("tightdp"), dict):
            bad.append(f"row {i}: tightdp must be an object")
        if not isinstance(row.get("peers", {}), dict) or not all(
            isinstance(v, dict) for v in row.get("peers", {}).values()
        ):
            bad.append(f"row {i}: peers must map names to objects")
    if not isinstance(doc.get("notes"), list):
        bad.append("notes must be a list")
    return bad


def _doc(name: str, raw: Any, **fields: Any) -> dict[str, Any]:
    doc = {"schema": SCHEMA, "benchmark": name, **fields}
    doc.setdefault("notes", [])
    doc["raw"] = raw
    return doc


def write(name: str, raw: Any, out: str | Path | None = None, doc: dict[str, Any] | None = None) -> Path:
    """Write ``results/<name>.json`` (or ``out``) from a script's output ``raw``; the previous run moves to
    ``history``. ``doc`` gives the schema fields directly (otherwise the converter registered for ``name``)."""
    path = Path(out) if out else RESULTS / f"{name}.json"
    new = doc if doc is not None else CONVERTERS[name](raw)
    new = {**new, "schema": SCHEMA, "benchmark": name}
    bad = validate(new)
    if bad:
        raise ValueError(f"{name}: {bad}")
    if path.is_file():
        try:
            old = load(path)
        except (ValueError, KeyError):
            old = None
        if old is not None:
            keep = {k: old.get(k) for k in ("date", "command", "machine", "raw")}
            new["history"] = [keep, *old.get("history", [])]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(new, indent=1, default=_plain) + "\n", encoding="utf-8")
    return path


def update_rows(name: str, rows: list[dict[str, Any]], raw: Any, fields: dict[str, Any]) -> Path:
    """Replace the rows of ``results/<name>.json`` that have the same settings as ``rows`` (the other rows, from
    other runs of the script, stay): for scripts whose runs each measure one setting. Each row carries its run's
    ``{"date", "command"}`` under ``"run"``; the file's date and command list those of the rows it holds."""
    path = RESULTS / f"{name}.json"
    old = load(path) if path.is_file() else None
    new_settings = {r["setting"] for r in rows}
    kept = [r for r in (old["rows"] if old else []) if r["setting"] not in new_settings]
    run = {"date": fields["date"], "command": fields["command"]}
    merged = kept + [{**r, "run": run} for r in rows]
    runs = [r.get("run") or {"date": old["date"], "command": old["command"]} for r in merged] if old else [run]
    commands = list(
        dict.fromkeys(c for r in runs for c in ([r["command"]] if isinstance(r["command"], str) else r["command"]))
    )
    dates = list(dict.fromkeys(str(r["date"]) for r in runs))
    doc = {**fields, "rows": merged, "command": commands, "date": ", ".join(dates)}
    return write(name, raw, path, doc={**doc, "raw": raw})


def rewrite(name: str, raw: Any, path: str | Path) -> Path:
    """Replace the latest run of ``path`` by ``raw`` re-converted (its history unchanged)."""
    path = Path(path)
    history = load(path).get("history", []) if path.is_file() else []
    doc = {**CONVERTERS[name](raw), "schema": SCHEMA, "benchmark": name}
    if history:
        doc["history"] = history
    path.write_text(json.dumps(doc, indent=1, default=_plain) + "\n", encoding="utf-8")
    return path


def raw_of(path: str | Path) -> Any:
    """The script's own output stored in a results file (the file itself in a script's older shape)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return data["raw"] if isinstance(data, dict) and data.get("schema") == SCHEMA else data


def _plain(obj: Any) -> Any:
    """numpy scalars and arrays as Python numbers and lists; anything else as its string."""
    return obj.tolist() if hasattr(obj, "tolist") else str(obj)


def load(path: str | Path) -> dict[str, Any]:
    """A results file in the schema (a file in a script's older shape is converted by its stem's converter)."""
    path = Path(path)
    data = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(data, dict) and data.get("schema") == SCHEMA:
        return data
    if path.stem not in CONVERTERS:
        raise KeyError(f"{path}: not in the schema {SCHEMA!r} and no converter for {path.stem!r}")
    return {**CONVERTERS[path.stem](data), "schema": SCHEMA, "benchmark": path.stem}


# ------------------------------------------------------------------------------------------------ converters
def analytic(raw: dict[str, Any]) -> dict[str, Any]:
    s = raw["setting"]
    rows = []
    for acc in dict.fromkeys(r["accountant"] for r in raw["rows"]):
        for r in (r for r in raw["rows"] if r["accountant"] == acc):
            rows.append(
                {
                    "setting": f"{acc}, m = {r['m']:.0e}",
                    "tightdp": {"epsilon": sig(r["epsilon"], 4), "s": sig(r["seconds"])},
                    "peers": {},
                }
            )
    return _doc(
        "analytic",
        raw,
        title="Analytic accountants: time against the number of compositions",
        what=(
            f"Time of one `compose(mech, m).epsilon({s['delta']})` of tightdp's accountants against the number of "
            f"compositions m, Poisson-subsampled Gaussian, q = {s['q']}, sigma = {s['sigma']}. Cold runs: a fresh "
            "accountant and cleared caches; median of 3 runs for edgeworth / rdp / gdp, one run for the PLD "
            "accountants (PRV up to m = 1e5, Fourier up to 1e4)."
        ),
        command="python benchmarks/bench_analytic.py",
        machine="2-core container shared with other jobs (timings noisy at the 0.1 s level)",
        date=raw.get("date", "2026-11-21"),
        rows=rows,
        notes=[
            f"Edgeworth at m = 1e7 takes {raw['edgeworth_ratio_1e7_over_1e2']:.2f}x its time at m = 1e2: its cost "
            "is per distinct mechanism, then O(1) in m; RDP and GDP are O(1) in m, PRV and Fourier grow with m.",
            "Edgeworth and GDP are approximations: at m = 1e2 both are below the certified PRV value (they "
            "under-report).",
        ],
    )


_ALLOC_TOOLS = {
    "tightdp-poisson": "tightdp, Poisson at q = 1/t (reference)",
    "pld-accounting": "pld-accounting 2.0 gaussian_allocation_epsilon_range",
    "ra-decomposition": "random-allocation 1.0.5 decomposition (upper)",
    "ra-rdp-dco": "random-allocation 1.0.5 RDP_DCO (upper)",
}


def allocation(raw: dict[str, Any]) -> dict[str, Any]:
    rows = []
    for res in raw["results"]:
        s = res["setting"]
        row: dict[str, Any] = {
            "setting": f"sigma {s['sigma']}, t = {s['t']}, {s['epochs']} epoch(s), delta {s['delta']}",
            "peers": {},
        }
        for r in res["rows"]:
            cell: dict[str, Any]
            if "result" in r:
                cell = {
                    "epsilon": interval(*r["result"], 5),
                    "cold s": sig(r.get("cold_s")),
                    "warm s": sig(r.get("warm_s")),
                }
            else:
                cell = {"epsilon": r.get("error") or r.get("note") or "no answer"}
            if r["tool"] == "tightdp":
                row["tightdp"] = cell
            else:
                row["peers"][_ALLOC_TOOLS.get(r["tool"], r["tool"])] = cell
        rows.append(row)
    m = raw["meta"]
    return _doc(
        "allocation",
        raw,
        title="Random allocation (balls and bins), CIFAR-10 scale",
        what=(
            "CIFAR-10 with random-allocation batches: t = 196 steps per epoch, noise multiplier 1, delta 1e-5. "
            "tightdp `allocation_epsilon` at eps_error 0.01 against the random-allocation peers. Every tool in a "
            "fresh process, imports excluded: cold = first call, warm = median of 3 more after clearing caches "
            "(pld-accounting timed cold only)."
        ),
        command=f"python {m['command']} --timeout 900",
        machine=f"{m['machine']}, Python {m['python']}, shared with other jobs",
        date=m["date"],
        rows=rows,
        notes=[
            "Random allocation is certifiably more private than Poisson sampling here: its certified upper end is "
            "below Poisson's certified lower end.",
            "Peer agreement on a wider sweep (sigma 0.8-3, t 10-1000, 1-2 epochs) is in tests/peers/test_allocation_peers.py.",
        ],
    )


def core(raw: dict[str, Any]) -> dict[str, Any]:
    v = raw["versions"]
    rows = []
    for s in raw["settings"]:
        st = s["setting"]
        for r in s["rows"]:
            t = r["tightdp"]
            row = {
                "setting": f"{st['name']}: sigma {st['sigma']}, q {st['q']}, k = {r['k']:.0e}",
                "tightdp": {
                    "epsilon": interval(t["lower"], t["upper"], 6),
                    "cold s": sig(t["cold_s"]),
                    "warm s": sig(t["warm_s"]),
                },
                "peers": {},
            }
            prv = r.get("prv", {})
            if "lower" in prv:
                cell = {"epsilon": interval(prv["lower"], prv["upper"], 6), "cold s": sig(prv["cold_s"])}
                cell["warm s"] = sig(prv["seconds"])
                cell["warm ratio"] = sig(prv["seconds"] / t["warm_s"], 2)
            else:
                cell = {"epsilon": prv.get("skipped") or prv.get("error") or "not run"}
            row["peers"][f"prv-accountant {v.get('prv-accountant')}"] = cell
            dpa = r.get("dpa", {})
            if "epsilon" in dpa:
                cell = {
                    "interval": dpa["interval"],
                    "epsilon": sig(dpa["epsilon"], 6),
                    "cold s": sig(dpa["cold_s"]),
                    "warm s": sig(dpa["seconds"]),
                    "warm ratio": sig(dpa["seconds"] / t["warm_s"], 2),
                }
            else:
                cell = {"epsilon": dpa.get("skipped") or dpa.get("error") or "not run"}
            row["peers"][f"dp-accounting {v.get('dp-accounting')} PLD"] = cell
            rows.append(row)
    return _doc(
        "core",
        raw,
        title="Core engine: epsilon of DP-SGD against prv-accountant and dp-accounting",
        what=(
            f"`tightdp.dpsgd_epsilon(eps_error={raw['eps_error']})` (default accountant, certified interval) against "
            "prv-accountant (same eps_error, delta_error = delta/1000) and dp-accounting's PLD accountant at the "
            f"coarsest interval of the ladder {raw['ladder'][:4]}... whose answer is within {raw['tolerance']} of the "
            "truth. DP-SGD, Poisson sampling, add-remove, delta 1e-5. Each tool in a fresh process, imports excluded: "
            "cold = first call, warm = median of the next three (tightdp's caches cleared before each). Ratio = "
            "peer time / tightdp time."
        ),
        command=raw["command"],
        machine=f"{raw['machine']['cpus']} cores, Python {raw['machine']['python']}, numpy {v.get('numpy')}, "
        f"scipy {v.get('scipy')}, tightdp at {v.get('tightdp_git')}",
        date=raw["date"],
        rows=rows,
        notes=[
            f"{s['setting']['name']}: log-log slope of tightdp's cold time over k = 1e2..1e5 "
            f"{s['analysis']['exponent_cold_1e2_1e5']:.2f} (sqrt(k) is 0.5)"
            for s in raw["settings"]
        ]
        + ["Long horizons at the current engine: see the long-horizon tables below."],
    )


def group(raw: dict[str, Any]) -> dict[str, Any]:
    m = raw["meta"]
    rows = []
    for r in raw["rows"]:
        t, d, dd = r["tightdp"], r["dp_accounting"], r["dp_accounting_default"]
        rows.append(
            {
                "setting": f"sigma {r['sigma']}, group k = {r['k']}",
                "tightdp": {"epsilon": interval(t["lower"], t["upper"], 6), "s": sig(t["seconds"])},
                "peers": {
                    "dp-accounting 0.6.0 PLD, equal accuracy": {
                        "interval": d["interval"],
                        "epsilon": sig(d["epsilon"], 6),
                        "s": sig(d["seconds"]),
                        "ratio": sig(r["speedup"], 2),
                    },
                    "dp-accounting 0.6.0 PLD, default interval": {
                        "interval": dd["interval"],
                        "epsilon": sig(dd["epsilon"], 6),
                        "s": sig(dd["seconds"]),
                        "ratio": sig(r["speedup_vs_default"], 2),
                    },
                },
            }
        )
    return _doc(
        "group",
        raw,
        title="Group privacy: mixture-of-Gaussians epsilon against dp-accounting",
        what=(
            "`tightdp.group_epsilon` (mixture-of-Gaussians mechanism with Binom(k, q) sensitivity, Ganesh 2024 Thm "
            f"3.1, eps_error {m['eps_error']}, certified interval) against dp-accounting's PLD accountant composing "
            f"the same MixtureOfGaussiansDpEvent. Poisson q = {m['q']}, T = {m['steps']}, delta = {m['delta']}. Each "
            "tool timed cold in its own subprocess (imports excluded), median of 3. Equal accuracy: the coarsest "
            "dp-accounting interval whose answer is within 0.01 of tightdp's midpoint; also its default interval 1e-4."
        ),
        command=m["command"],
        machine=f"{m['machine']}, Python {m['python']}",
        date=m["date"],
        rows=rows,
        notes=[
            "Every dp-accounting answer lies within 0.01 of tightdp's certified interval (tests/group/test_group.py)."
        ],
    )


def _warm(x: Any) -> Any:
    return sig(x["warm"]["median_s"]) if isinstance(x, dict) and isinstance(x.get("warm"), dict) else None


def horizon(raw: dict[str, Any]) -> dict[str, Any]:
    v = raw["versions"]
    rows = []
    for s in raw["settings"]:
        for r in s["rows"]:
            for target in ("rel", "abs"):
                t = r["tightdp"].get(target)
                if not isinstance(t, dict):
                    continue
                row: dict[str, Any] = {
                    "setting": f"{s['name']}: sigma {s['sigma']}, q {s['q']}, k = {r['k']:.0e}, target {target}",
                    "tightdp": {"epsilon": interval(t.get("lower"), t.get("upper"), 6), "warm s": _warm(t)},
                    "peers": {},
                }
                dpa = r["dpa"].get(target)
                ratios = r.get("ratios", {}).get(target, {})
                if isinstance(dpa, dict) and "epsilon" in dpa:
                    cell = {"interval": sig(dpa["interval"]), "epsilon": sig(dpa["epsilon"], 6), "warm s": _warm(dpa)}
                else:
                    cell = {"epsilon": str(ratios.get("dpa_warm", dpa))}
                if isinstance(ratios.get("dpa_warm"), float):
                    cell["warm ratio"] = sig(ratios["dpa_warm"], 2)
                row["peers"][f"dp-accounting {v['dp-accounting']} PLD"] = cell
                prv = r["prv"].get(target)
                if isinstance(prv, dict) and "lower" in prv:
                    cell = {"epsilon": interval(prv["lower"], prv["upper"], 6), "warm s": _warm(prv)}
                else:
                    cell = {"epsilon": str(ratios.get("prv_warm", (prv or {}).get("error", "not run")))}
                if isinstance(ratios.get("prv_warm"), float):
                    cell["warm ratio"] = sig(ratios["prv_warm"], 2)
                row["peers"][f"prv-accountant {v['prv-accountant']}"] = cell
                rows.append(row)
    return _doc(
        "horizon",
        raw,
        title="Long horizons, full protocol: k = 1e2 ... 1e7 against dp-accounting and prv-accountant",
        what=(
            "DP-SGD, Poisson sampling, add/remove, delta 1e-5. Targets: rel = ConnectDotsAccountant(rel_error=1e-3) "
            "(width <= 2 max(1e-3 eps, 5e-5)), abs = ConnectDotsAccountant(eps_error=1e-3). Peers at each target's "
            "half-width: dp-accounting at the coarsest interval of the ladder 0.1 * 2^-j within it of the truth "
            "bracket, prv-accountant at eps_error = half-width. Warm = median of 3 in-process repetitions after a "
            "first call, caches cleared before each. The protocol is the docstring of benchmarks/bench_horizon.py."
        ),
        command=raw["command"],
        machine=f"{raw['nproc']} cores, Python {raw['python']}, numpy {v['numpy']}, scipy {v['scipy']}; heavily "
        "shared (load average 5-13: wall times inflated 2-6x)",
        date=raw["date"],
        rows=rows,
        notes=[
            f"tightdp at commit {raw['commit']}, before the engine changes measured in the next table; "
            "A, k = 1e7 at eps_error 1e-3 failed on the memory limit of that engine.",
            "No dp-accounting answer fell below tightdp's certified lower bound, and every prv-accountant interval "
            "met the certified bracket.",
        ],
    )


def audit(raw: dict[str, Any]) -> dict[str, Any]:
    rows = [
        {
            "setting": f"`{r['call']}`, {r['canaries']} canaries",
            "tightdp": {
                "s": sig(r["seconds"]),
                "epsilon lower": sig(r["epsilon_lower"], 4),
                "goal s": r["target_seconds"],
            },
            "peers": {},
        }
        for r in raw["one_run_1e4"]
    ]
    demo = raw["demonstration"]
    for name in ("correct", "broken"):
        d = demo[name]
        rows.append(
            {
                "setting": f"digits demonstration, {name} run (Opacus, 2000 Dirac canaries, sigma 2, rate 1/2, 20 steps)",
                "tightdp": {
                    "verdict": d["verdict"],
                    "epsilon lower": sig(d["epsilon_lower"], 4),
                    "certified": interval(*d["certified"], 4),
                    "s": sig(d["train_seconds"] + d["audit_seconds"]),
                },
                "peers": {},
            }
        )
    fr = raw.get("flag_rates")
    notes = [f"Whole demonstration {demo['seconds']:.0f} s (goal {demo['target_seconds']:.0f} s)."]
    if fr:
        notes.append(
            f"Over {fr['seeds']} seeds the correct run was flagged {fr['flagged_correct']} times and the broken run "
            f"{fr['flagged_broken']} times."
        )
    return _doc(
        "audit",
        raw,
        title="Auditing: one-run bounds on 10^4 canaries and the digits demonstration",
        what=(
            "Time of each empirical lower bound of `tightdp.audit` on 10 000 canaries (goal <= 1 s), and the "
            "demonstration: a correct and a broken DP-SGD run on scikit-learn's digits, audited against the "
            "certified interval (goal <= 5 min). No peer computes the comparison."
        ),
        command=raw["command"],
        machine=f"{raw['nproc']} cores, Python {raw['python']}, load average {raw['loadavg_start'][0]:.1f} at the start",
        date=raw["date"],
        rows=rows,
        notes=notes,
    )


def discrete(raw: dict[str, Any]) -> dict[str, Any]:
    rows = []
    for r in raw["rows"]:
        t, p = r["tightdp"], r.get("peer")
        peers = {}
        if p:
            cell = {"epsilon": sig(p.get("epsilon"), 6), "s": sig(p.get("seconds"))}
            if p.get("interval") is not None:
                cell["interval"] = p["interval"]
            if p.get("qualifies") is False:
                cell["note"] = "did not reach tightdp's width"
            elif r.get("speedup_warm") is not None:
                cell["ratio"] = sig(p["seconds"] / t["cold_s"], 2)
            peers[p["name"]] = cell
        br = r.get("peer_bracket")
        if br:
            cell = {
                "epsilon": interval(br["lower"], br["upper"], 6),
                "s": sig(br["seconds"]),
                "interval": br["interval"],
            }
            if br["qualifies"]:
                cell["ratio"] = sig(br["seconds"] / t["cold_s"], 2)
            else:
                cell["note"] = "did not reach tightdp's width"
            peers[br["name"]] = cell
        tight = {"epsilon": interval(t["lower"], t["upper"], 6), "cold s": sig(t["cold_s"])}
        rows.append(
            {"setting": f"{r['setting']}, {r['steps']} steps, delta {r['delta']}", "tightdp": tight, "peers": peers}
        )
    return _doc(
        "discrete",
        raw,
        title="Discrete noise, selection and tuning against dp_accounting",
        what=(
            "Certified epsilon of discrete noise mechanisms, selection mechanisms and hyper-parameter tuning. The "
            "peer is dp_accounting's PLD accountant, refined until its value lies within tightdp's certified width "
            "(its RDP accountant for tuning); where it also builds an optimistic PLD, its own certified bracket "
            "[optimistic, pessimistic] is refined until it is as narrow as tightdp's interval and timed as both runs "
            "('its certified bracket': equal certified accuracy as the peer's user can know it). tightdp timed "
            "cold: caches cleared before the call. Ratio = peer time / tightdp cold time."
        ),
        command="python benchmarks/bench_discrete.py",
        machine=f"2 cores, {raw['machine']}, shared with other jobs (times inflated)",
        date=raw["date"],
        rows=rows,
        notes=["Rows without a peer: no peer library accounts for the mechanism."],
    )


def matrix(raw: dict[str, Any]) -> dict[str, Any]:
    s = raw["setting"]
    rows = [
        {
            "setting": r["sampler"],
            "tightdp": {"epsilon": interval(r["lower"], r["upper"], 6), "s": sig(r["seconds"])},
            "peers": {},
        }
        for r in raw["rows"]
    ]
    mc = raw.get("monte_carlo")
    notes = []
    if isinstance(mc, dict) and "samples" in mc:
        for row in rows:
            if row["setting"] == "balls-in-bins, cycle 64":  # the run the Monte Carlo samples
                row["peers"]["jax_privacy Monte Carlo"] = {
                    "samples": mc["samples"],
                    "s": sig(mc["seconds"]),
                    "samples needed for delta": mc.get("samples_needed_for_delta"),
                }
        notes.append(
            f"jax_privacy's Monte Carlo estimate holds only with high probability; {mc.get('samples_needed_for_delta')} "
            f"samples (about {mc.get('seconds_needed_extrapolated', 0):.2g} s extrapolated) would be needed at this delta."
        )
    if raw.get("note"):
        notes.append(str(raw["note"]))
    return _doc(
        "matrix",
        raw,
        title="Correlated noise (matrix mechanisms): BandMF, n = 2000 steps",
        what=(
            f"`tightdp.matrix.matrix_epsilon` at its default accuracy: {s['strategy']}, n = {s['steps']} steps, noise "
            f"multiplier {s['noise_multiplier']}, delta {s['delta']}; first call in the process, caches cleared. "
            "Goal: a certified interval in <= 10 s."
        ),
        command="python benchmarks/bench_matrix.py",
        machine=f"2 cores, Python {raw.get('python')}, under load",
        date=raw["date"],
        rows=rows,
        notes=notes,
    )


_SCHEME_NAMES = {
    "allocation": "random allocation, fresh bin each epoch",
    "cyclic": "cyclic allocation, one bin for the run",
    "shuffle": "shuffle",
}


def scheme_sweep(raw: dict[str, Any]) -> dict[str, Any]:
    m = raw["meta"]
    rows = []
    for name, s in raw["summary"].items():
        if name == "all":
            continue
        rows.append(
            {
                "setting": _SCHEME_NAMES.get(name, name),
                "tightdp": {
                    "within accuracy": f"{s['within_accuracy']} / {s['settings']} ({s['answered']} answered)",
                    "median s": sig(s["median_seconds"]),
                    "max s": sig(s["max_seconds"]),
                    "over 2 s": s["over_2s"],
                    "max peak RSS MB": round(s["max_peak_rss_mb"]),
                },
                "peers": {},
            }
        )
    return _doc(
        "scheme_sweep",
        raw,
        title="Sampling schemes at random settings: accuracy, time, memory",
        what=(
            "Seeded random settings, a third per scheme: sigma log-uniform in [0.5, 10], t in [1, 1e4], epochs in "
            "[1, 1000], delta in [1e-12, 1e-3]. Each setting in a fresh process after clearing caches; time excludes "
            "imports; memory is the process's peak RSS. Within accuracy: upper - lower <= 2 max(1e-3 upper, 5e-5). "
            "No peer accounts for these schemes at these settings."
        ),
        command=f"python {m['command']}",
        machine=f"{m['machine']}, Python {m['python']}, load average {m['load_average'][0]:.1f}",
        date=m["date"],
        rows=rows,
        notes=[
            "Shuffle is never within accuracy: its upper end is the Gaussian bound without amplification (no tighter "
            "certified bound is known) and its lower end Chua et al.'s attack pair; the width is the open question "
            "of shuffling, not a precision matter.",
            "Cyclic allocation with per-slot noise sigma / sqrt(cycles) below 0.2 (below 0.5 where the cycle has more "
            "than 4096 steps) gets the wide certified interval (no amplification above, the max statistic below).",
            "Not answered within the 30 s cap: random allocation at noise 0.64, 2141 steps x 230 epochs, delta "
            "1.4e-10, which refines for about 43 s to [7.34, 7.41] (alone, 6 GB peak).",
        ],
    )


CONVERTERS: dict[str, Callable[[Any], dict[str, Any]]] = {
    "analytic": analytic,
    "allocation": allocation,
    "core": core,
    "group": group,
    "horizon": horizon,
    "audit": audit,
    "discrete": discrete,
    "matrix": matrix,
    "scheme_sweep": scheme_sweep,
}


def horizon_warm(raw: dict[str, Any]) -> dict[str, Any]:
    absolute = raw.get("absolute", False)
    target = "`ConnectDotsAccountant(eps_error=1e-3)`" if absolute else "its default accuracy (relative 1e-3)"
    rows = [
        {
            "setting": f"{r['setting']}: sigma {r['sigma']}, q {r['q']}, k = {r['k']:.0e}",
            "tightdp": {"epsilon": interval(r["lower"], r["upper"], 6), "s": sig(r["seconds"])},
            "peers": {
                "dp-accounting 0.6.0 PLD": (
                    {
                        "interval": r["dpa_interval"],
                        "epsilon": sig(r["dpa_epsilon"], 6),
                        "s": sig(r["dpa_seconds"]),
                        "ratio": sig(r.get("dpa_ratio") or r["dpa_seconds"] / r["seconds"], 3),
                    }
                    if r.get("dpa_epsilon") is not None
                    else {"epsilon": r.get("dpa_note", "not run")}
                )
            },
        }
        for r in raw["rows"]
    ]
    return _doc(
        "horizon_warm_abs" if absolute else "horizon_warm",
        raw,
        title=f"Long horizons, warm: tightdp at {'eps_error 1e-3' if absolute else 'its default accuracy'} "
        "against dp-accounting",
        what=(
            f"DP-SGD, Poisson sampling, add/remove, delta 1e-5. tightdp at {target} against dp-accounting's PLD "
            "accountant at the interval bench_horizon.py chose for the same target (the coarsest within the target "
            "of the certified truth bracket). Both in one process, in turn: the fastest of 5 runs (3 for calls over "
            "5 s), `tightdp.clear_caches()` and a new accountant before each. Ratio = dp-accounting time / tightdp time."
        ),
        command=raw["command"],
        machine=raw["machine"],
        date=raw["date"],
        rows=rows,
        notes=list(raw.get("notes", [])),
    )


def prv_scale(raw: dict[str, Any]) -> dict[str, Any]:
    rows = [
        {
            "setting": f"k = {r['k']:.0e}",
            "tightdp": {
                "epsilon": interval(r["lower"], r["upper"], 6),
                "width": sig(r["width"]),
                "min s": sig(r["min"]),
                "median s": sig(r["median"]),
                "radices": str(r.get("radices")),
                "top points": r.get("top"),
                "load": sig(r.get("load"), 2),
            },
            "peers": {},
        }
        for r in raw["rows"]
    ]
    return _doc(
        "prv_scale",
        raw,
        title="The PRV accountant at scale",
        what=(
            "tightdp's PRV accountant (default eps_error 0.01), sigma 0.8, q 4e-3 (Poisson, add/remove), delta 1e-5: a "
            "fresh `PRVAccountant()` per run and `tightdp.clear_caches()` before each, in-process wall time of "
            "`epsilon(1e-5)`, min / median of the runs; the radices and the top level's points of its composition "
            "tree. prv-accountant 0.2.0 raises at k = 1e7 (see the long-horizon table)."
        ),
        command=raw["command"],
        machine=raw["machine"],
        date=raw["date"],
        rows=rows,
        notes=list(raw.get("notes", [])),
    )


CONVERTERS.update(horizon_warm=horizon_warm, horizon_warm_abs=horizon_warm, prv_scale=prv_scale)

"""``tightdp compare``: every accountant's answer for one DP-SGD run, side by side.

Takes the run options of ``tightdp epsilon``. Prints, per accountant, the
bounds on epsilon, whether they are certified bounds or an approximation, and
the time taken. ``--json`` prints a list of objects ``{"accountant", "kind",
"epsilon": {lower, estimate, upper}, "seconds", ...}``. ``--plot FILE.png
--steps-range A:B`` draws epsilon against the number of steps for every
accountant, with the certified band of the PLD accountants shaded (like Gopi et al. 2021,
Fig. 1b and Wang et al. 2023, Fig. 2); matplotlib is imported only then. With ``--json
--plot`` every row also carries the plotted ``curve`` (``steps``, ``lower``,
``estimate``, ``upper``). The plot's directory is checked before any work, so a
path that cannot be written fails at once (one line, exit 2).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

import numpy as np

from .._validation import check_count, check_delta
from ..accountants import ACCOUNTANTS, create
from ..errors import TightDPError
from .common import accuracy_from_args, add_run_options, fmt, run_from_args, timed

if TYPE_CHECKING:
    from .._types import FloatArray
    from ..mechanisms import Mechanism

ALL = ("connect-dots", "prv", "fourier", "rdp", "gdp", "edgeworth")
PLD = ("connect-dots", "prv", "fourier")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "compare",
        help="all accountants side by side",
        description="Compare the connect-the-dots (default), PRV, Fourier, RDP, GDP and "
        "Edgeworth accountants on one run.",
    )
    add_run_options(p, accountant=False)
    p.add_argument("--delta", type=float, required=True, help="target delta in (0, 1)")
    p.add_argument(
        "--accountants", default=",".join(ALL), help=f"comma-separated subset of {', '.join(ALL)} (default: all)"
    )
    p.add_argument("--plot", metavar="FILE.png", help="draw epsilon against steps (needs matplotlib)")
    p.add_argument("--steps-range", metavar="A:B", help="step range for --plot (default 1:--steps)")
    p.add_argument("--points", type=float, default=8, help="number of step values in the plot (default 8)")
    p.set_defaults(run=run)


def _names(spec: str) -> list[str]:
    names = [s.strip() for s in str(spec).split(",") if s.strip()]
    if not names:
        raise ValueError("--accountants must name at least one accountant")
    for n in names:
        if n not in ACCOUNTANTS:
            raise ValueError(
                f"--accountants must be a comma-separated subset of {', '.join(sorted(ACCOUNTANTS))}; got {n!r}"
            )
    return names


def _steps_range(spec: str | None, steps: int) -> tuple[int, int]:
    if spec is None:
        return 1, steps
    parts = str(spec).split(":")
    if len(parts) != 2:
        raise ValueError(f"--steps-range must look like A:B, got {spec!r}")
    try:
        a, b = (float(x) for x in parts)
    except ValueError:
        raise ValueError(f"--steps-range must look like A:B with whole numbers, got {spec!r}") from None
    a, b = check_count("--steps-range", a), check_count("--steps-range", b)
    if a >= b:
        raise ValueError(f"--steps-range needs A < B, got {spec!r}")
    return a, b


def _one(
    name: str, mech: Mechanism, steps: int, delta: float, eps_error: float | None, rel_error: float | None = None
) -> dict[str, Any]:
    """One accountant's epsilon after ``steps`` compositions of ``mech`` (or why it cannot answer)."""
    acc = create(name, eps_error=eps_error, rel_error=rel_error)
    try:
        bounds, seconds = timed(lambda: acc.compose(mech, steps).epsilon(delta))
    except TightDPError as exc:  # unsupported mechanism or numerics that cannot certify: say so, keep going
        return {"accountant": name, "kind": ACCOUNTANTS[name].kind, "epsilon": None, "seconds": None, "error": str(exc)}
    d = bounds.to_dict()
    out: dict[str, Any] = {
        "accountant": name,
        "kind": bounds.kind,
        "epsilon": {"lower": d["lower"], "estimate": d["estimate"], "upper": d["upper"]},
        "seconds": seconds,
    }
    det = d.get("details") or {}
    for key in ("note", "vacuous", "method"):
        if key in det:
            out[key] = det[key]
    return out


def run(args: argparse.Namespace) -> int:
    """``tightdp compare``: every accountant's answer for one run, as a table, JSON or a plot."""
    mech, steps, params = run_from_args(args)
    if mech is None:
        raise ValueError(
            f"tightdp compare runs every accountant on one mechanism; --sampling {params['sampling']} "
            "is answered by tightdp epsilon (the dominance accountant) only"
        )
    delta = check_delta("--delta", args.delta)
    names = _names(args.accountants)
    eps_error, rel_error = accuracy_from_args(args)
    plot_range = None
    if args.plot:
        plot_range = _steps_range(args.steps_range, steps)
        points = check_count("--points", args.points, minimum=2)
        check_plot_path("--plot", args.plot)
    elif args.steps_range is not None:
        raise ValueError("--steps-range needs --plot")
    rows = [_one(n, mech, steps, delta, eps_error, rel_error) for n in names]
    if not args.json:
        _print_table(rows, params, delta)
        sys.stdout.flush()
    known = {(r["accountant"], steps): r for r in rows}  # the curve's point at --steps is the row itself
    curves = (
        _curves(names, mech, plot_range, points, delta, eps_error, rel_error, known) if plot_range is not None else {}
    )
    if args.plot:
        _plot(args.plot, curves, delta, params)
    if args.json:
        for r in rows:
            if r["accountant"] in curves:
                r["curve"] = curves[r["accountant"]]
                r["plot"] = str(args.plot)
        json.dump(rows, sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif args.plot:
        print(f"  plot written to {args.plot}")
    return 0


def check_plot_path(option: str, path: str) -> None:
    """Refuse at once a plot file that cannot be written (missing directory, no permission, bad suffix)."""
    import os
    from pathlib import Path

    p = Path(path)
    if p.suffix.lower() not in (".png", ".pdf", ".svg"):
        raise ValueError(f"{option} must name a .png, .pdf or .svg file, got {path!r}")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise ValueError(f"{option}: directory {str(parent)!r} does not exist")
    if not os.access(parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise ValueError(f"{option}: cannot write {path!r} (permission denied)")


def _print_table(rows: list[dict[str, Any]], params: dict[str, Any], delta: float) -> None:
    """The human table."""
    p = params
    print(
        f"tightdp compare · {p['sampling']} sampling · {p['relation']} · noise multiplier "
        f"{fmt(p['noise_multiplier'])} · sampling rate {fmt(p['sampling_rate'])} · steps {p['steps']}"
        f" · delta {fmt(delta)}"
    )
    print(f"  {'accountant':12s}{'kind':>15s}{'lower':>12s}{'estimate':>12s}{'upper':>12s}{'time (s)':>10s}")
    for r in rows:
        if r["epsilon"] is None:
            print(f"  {r['accountant']:12s}{'—':>15s}  cannot answer: {r['error']}")
            continue
        e = r["epsilon"]
        print(
            f"  {r['accountant']:12s}{r['kind']:>15s}{fmt(e['lower']):>12s}{fmt(e['estimate']):>12s}"
            f"{fmt(e['upper']):>12s}{r['seconds']:>10.3f}"
        )
    print("  bound: upper is proven (lower too when shown); approximation: no guarantee, may under-report.")
    if any(r.get("vacuous") for r in rows):
        print("  edgeworth: its finite-sample interval (EEAI) is vacuous here, so only the estimate is shown.")


def _curves(
    names: list[str],
    mech: Mechanism,
    rng: tuple[int, int],
    points: int,
    delta: float,
    eps_error: float | None,
    rel_error: float | None = None,
    known: dict[tuple[str, int], dict[str, Any]] | None = None,
) -> dict[str, dict[str, list[Any]]]:
    """Epsilon against steps for every accountant: ``{name: {steps, lower, estimate, upper}}`` (None: no value);
    ``known``: answers already computed, by ``(accountant, steps)``, used instead of computing them again."""
    a, b = rng
    ks = (
        np.unique(np.round(np.geomspace(a, b, points)).astype(int))
        if b / a > 20
        else np.unique(np.round(np.linspace(a, b, points)).astype(int))
    )
    out: dict[str, dict[str, list[Any]]] = {}
    for name in names:
        c: dict[str, list[Any]] = {"steps": [int(k) for k in ks], "lower": [], "estimate": [], "upper": []}
        for k in ks:
            row = (known or {}).get((name, int(k))) or _one(name, mech, int(k), delta, eps_error, rel_error)
            e = row["epsilon"] or {}
            for key in ("lower", "estimate", "upper"):
                c[key].append(e.get(key))
        out[name] = c
    return out


def _plot(path: str, curves: dict[str, dict[str, list[Any]]], delta: float, params: dict[str, Any]) -> None:
    """Epsilon against steps for every accountant, the PLD accountants' certified bands shaded."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover - depends on the environment
        raise ValueError("--plot needs matplotlib (pip install matplotlib)") from None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    styles = {
        "connect-dots": ("tab:orange", "-"),
        "prv": ("tab:blue", "-"),
        "fourier": ("tab:cyan", "--"),
        "rdp": ("tab:red", "-."),
        "gdp": ("tab:green", ":"),
        "edgeworth": ("tab:purple", "-"),
    }
    ks = None
    for name, c in curves.items():
        ks = np.asarray(c["steps"])

        def val(key: str, c: dict[str, list[Any]] = c) -> FloatArray:
            return np.array([np.nan if v is None else v for v in c[key]], float)

        color, ls = styles.get(name, ("black", "-"))
        kind = ACCOUNTANTS[name].kind
        ax.plot(
            ks,
            val("estimate"),
            ls,
            color=color,
            marker=".",
            label=f"{name} ({'estimate' if kind != 'bound' else 'bound'})",
        )
        if name in PLD:
            lo, up = val("lower"), val("upper")
            ok = np.isfinite(lo) & np.isfinite(up)
            if ok.any():
                ax.fill_between(ks[ok], lo[ok], up[ok], color=color, alpha=0.25, label=f"{name} certified band")
    ax.set_xlabel("steps")
    ax.set_ylabel(f"epsilon at delta = {delta:g}")
    ax.set_title(f"q = {params['sampling_rate']:g}, sigma = {params['noise_multiplier']:g} ({params['relation']})")
    if ks is not None and len(ks) > 1 and ks[-1] / max(ks[0], 1) > 20:
        ax.set_xscale("log")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)

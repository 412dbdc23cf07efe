"""``tightdp tradeoff``: the operational views of a DP-SGD run's privacy curve, certified.

Prints the f-DP trade-off curve as ``alpha, beta_lower, beta_upper`` (the best test of type-I
error alpha has type-II error between the two; Dong, Roth, Su 2022, Prop. 2.12), the bounds on a
membership-inference attack's true-positive rate at the false-positive rates of ``--fpr``, and
the interval of the tightest mu-GDP statement (``tightdp.tradeoff`` explains what is certified).
Takes the run options of ``tightdp epsilon``. ``mu`` upper = inf (not certifiable from a finite
grid) is an answer, not a failure: the exit code is 0.
"""

from __future__ import annotations

import argparse
import json
import math
import sys

from ..bounds import _jsonable
from ..sampling import scheme_names
from .common import add_run_options, fmt, make_accountant, run_from_args, timed

#: the alphas printed by default (the curve itself is computed on tightdp.tradeoff.DEFAULT_ALPHAS)
PRINTED_ALPHAS = (0.0, 1e-5, 1e-4, 1e-3, 0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "tradeoff",
        help="f-DP trade-off curve, attack TPR at FPR, mu-GDP",
        description="Certified f-DP trade-off curve beta(alpha) of a DP-SGD run, bounds on "
        "a membership-inference attack's TPR at given FPRs, and the mu of the "
        "tightest mu-GDP statement.",
    )
    add_run_options(p)
    p.add_argument(
        "--fpr",
        default=None,
        help="comma-separated false-positive rates in [0, 1] to bound the "
        "attack's true-positive rate at (e.g. 0.01,0.001)",
    )
    p.add_argument(
        "--alphas",
        default=None,
        help="comma-separated type-I errors in [0, 1] to print the curve at (default: "
        + ",".join(f"{a:g}" for a in PRINTED_ALPHAS)
        + "; --json prints the full curve)",
    )
    p.add_argument(
        "--max-gap",
        type=float,
        default=2e-3,
        help="refine the epsilon grid until beta_upper - beta_lower <= MAX_GAP (default 2e-3)",
    )
    p.add_argument("--max-points", type=int, default=400, help="at most this many epsilons in the grid (400)")
    p.set_defaults(run=run)


def _floats(option: str, text: str | None) -> list[float] | None:
    if text is None:
        return None
    try:
        out = [float(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise ValueError(f"{option} must be a comma-separated list of numbers, got {text!r}") from None
    if not out:
        raise ValueError(f"{option} must not be empty")
    bad = [v for v in out if not (0.0 <= v <= 1.0)]
    if bad:
        raise ValueError(f"{option} must be in [0, 1], got {bad[0]!r}")
    return out


def run(args: argparse.Namespace) -> int:
    from ..tradeoff import DEFAULT_ALPHAS, tradeoff_curve

    mech, steps, params = run_from_args(args)
    fprs = _floats("--fpr", args.fpr)
    printed = _floats("--alphas", args.alphas) or list(PRINTED_ALPHAS)
    if not (math.isfinite(args.max_gap) and args.max_gap >= 0):
        raise ValueError(f"--max-gap must be a finite number >= 0, got {args.max_gap!r}")
    if args.max_points < 2:
        raise ValueError(f"--max-points must be at least 2, got {args.max_points}")
    if mech is None:
        raise ValueError(
            f"tightdp tradeoff supports --sampling {', '.join(scheme_names(step_mechanism=True))}, "
            f"not {params['sampling']}"
        )
    acc = make_accountant(args)
    acc.compose(mech, steps)
    curve, seconds = timed(
        lambda: tradeoff_curve(
            acc,
            alphas=sorted(set(DEFAULT_ALPHAS.tolist()) | set(printed)),
            max_gap=args.max_gap,
            max_points=args.max_points,
        )
    )
    lo_b, up_b = curve.at(printed)
    tpr = [] if fprs is None else [dict(zip(("fpr", "lower", "upper"), (f, *curve.tpr(f)))) for f in fprs]
    exact = curve.details.get("mu_exact")
    mu = {"lower": curve.mu_lower, "estimate": exact, "upper": curve.mu_upper}
    if args.json:
        out = {
            "mu": _jsonable(mu),
            "kind": "bound",
            "accountant": acc.name,
            "parameters": params,
            "curve": {k: v for k, v in curve.to_dict().items() if k != "mu"},
            "printed": {"alpha": printed, "beta_lower": _jsonable(lo_b), "beta_upper": _jsonable(up_b)},
            "tpr": [{"fpr": r["fpr"], "lower": r["lower"], "estimate": None, "upper": r["upper"]} for r in tpr],
            "eps_error": getattr(args, "eps_error", None),
            "rel_error": getattr(args, "rel_error", None),
            "seconds": seconds,
        }
        json.dump(out, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    p = params
    print(f"tightdp tradeoff · {p['sampling']} sampling · {p['relation']} · accountant {acc.name} (certified bounds)")
    print(
        f"  noise multiplier {fmt(p['noise_multiplier'])} · sampling rate {fmt(p['sampling_rate'])}"
        f" · steps {p['steps']}"
    )
    print("  f-DP trade-off (both orders of the pair): the best test at type-I error alpha has type-II error in")
    print(f"  {'alpha':>10s}{'beta_lower':>14s}{'beta_upper':>14s}")
    for a, lo, up in zip(printed, lo_b, up_b):
        print(f"  {a:>10.4g}{lo:>14.6g}{up:>14.6g}")
    print(f"  max gap {curve.max_gap:.3g} over {curve.alpha.size} alphas ({curve.method})")
    if curve.details.get("gap_note"):
        print(f"  note: {curve.details['gap_note']}")
    for r in tpr:
        print(f"  attack TPR at FPR {r['fpr']:g}: between {r['lower']:.6g} and {r['upper']:.6g}")
    print(f"  mu-GDP: mu in [{fmt(float(curve.mu_lower))}, {fmt(float(curve.mu_upper))}]")
    note = curve.details.get("mu_note")
    if note:
        print(f"  note: {note}")
    print(f"  time {seconds:.3f} s")
    return 0

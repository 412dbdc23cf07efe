"""``tightdp audit``: empirical epsilon lower bounds from canary scores, next to the certified interval.

Reads ``score,in`` rows (``tightdp.audit.read_scores_csv``), prints the empirical lower bound of the
chosen method at confidence ``1 - beta`` and, when the run is described (``--noise-multiplier``,
``--sampling-rate``, ``--steps``), the certified epsilon interval, what an optimal attack on a correct
implementation would show, and the verdict ("consistent", "too weak", "violates"). Exit code 0 for
every verdict (a violation is an answer, not an error); 2 for bad input.
"""

from __future__ import annotations

import argparse
import json
import sys

from .common import fmt, timed

METHODS = ("one-run", "fdp-eps-delta", "fdp-gdp", "clopper-pearson")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "audit",
        help="empirical epsilon lower bound from canary scores, and the verdict",
        description="Empirical epsilon lower bound from canary scores (CSV rows 'score,in'; "
        "in = 1/0) at confidence 1 - beta, next to the run's certified interval.",
    )
    p.add_argument("scores", help="CSV file with rows 'score,in' (higher score = more likely in; in = 1 or 0)")
    p.add_argument("--delta", type=float, required=True, help="delta of the audited claim")
    p.add_argument("--beta", type=float, default=0.05, help="one minus the confidence level (default 0.05)")
    p.add_argument(
        "--method",
        default="one-run",
        help="one-run (Steinke et al. 2023, default), fdp-eps-delta, fdp-gdp (Mahloujifar et al. 2024; "
        "gdp assumes a Gaussian trade-off curve), clopper-pearson (multi-run: one score per run)",
    )
    p.add_argument(
        "--guess-counts",
        default=None,
        help="comma-separated candidate numbers of 'in' guesses for one-run methods (Bonferroni over "
        "them; default 12 values from 1 to m/2)",
    )
    p.add_argument("--noise-multiplier", type=float, help="the run's noise multiplier (for the verdict)")
    p.add_argument("--sampling-rate", type=float, help="the run's Poisson sampling rate (for the verdict)")
    p.add_argument("--steps", type=float, help="the run's number of steps (for the verdict)")
    p.add_argument("--test-curve", action="store_true", help="also test the certified f-DP curve (each test at beta/2)")
    p.add_argument(
        "--no-expected", action="store_true", help="skip the simulation of what a correct implementation shows"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the simulation and of the multi-run split (0)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(run=run)


def _ints(option: str, text: str | None) -> list[int] | None:
    """A comma-separated list of whole numbers >= 1 (``None`` when the option is not given)."""
    if text is None:
        return None
    try:
        out = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise ValueError(f"{option} must be a comma-separated list of whole numbers, got {text!r}") from None
    if not out or min(out) < 1:
        raise ValueError(f"{option} must be whole numbers >= 1, got {text!r}")
    return out


def run(args: argparse.Namespace) -> int:
    from .._validation import check_choice
    from ..audit import (
        audit_run,
        epsilon_clopper_pearson,
        epsilon_one_run,
        epsilon_one_run_fdp,
        read_scores_csv,
    )

    check_choice("--method", args.method, METHODS)
    ks = _ints("--guess-counts", args.guess_counts)
    run_given = [x is not None for x in (args.noise_multiplier, args.sampling_rate, args.steps)]
    if any(run_given) and not all(run_given):
        raise ValueError("--noise-multiplier, --sampling-rate and --steps go together (the run for the verdict)")
    scores = read_scores_csv(args.scores)
    if ks is not None and max(ks) > scores.canaries:
        raise ValueError(f"--guess-counts must be at most the number of canaries {scores.canaries}, got {max(ks)}")
    kw = {"in_scores": scores.in_scores, "out_scores": scores.out_scores, "delta": args.delta, "beta": args.beta}
    if all(run_given):
        verdict, seconds = timed(
            lambda: audit_run(
                **kw,
                method=args.method,
                guess_counts=ks,
                test_curve=args.test_curve,
                expected=not args.no_expected,
                seed=args.seed,
                noise_multiplier=args.noise_multiplier,
                sampling_rate=args.sampling_rate,
                steps=args.steps,
            )
        )
        emp, out = verdict.empirical, verdict.to_dict()
    else:
        if args.method == "one-run":
            fn = lambda: epsilon_one_run(**kw, guess_counts=ks)
        elif args.method == "clopper-pearson":
            fn = lambda: epsilon_clopper_pearson(**kw, seed=args.seed)
        else:
            fn = lambda: epsilon_one_run_fdp(**kw, family=args.method[4:], guess_counts=ks)
        emp, seconds = timed(fn)
        verdict, out = None, {"empirical": emp.to_dict()}
    out["seconds"] = seconds
    if args.json:
        from ..audit.result import _plain

        json.dump(_plain(out), sys.stdout, indent=2)  # inf becomes null: strict JSON
        sys.stdout.write("\n")
        return 0
    d = emp.details
    print(
        f"tightdp audit · {scores.canaries} canaries ({scores.in_scores.size} in, {scores.out_scores.size} out)"
        f" · {emp.method}"
    )
    print(
        f"  empirical epsilon lower bound at delta {fmt(emp.delta)}: {emp.epsilon_lower:.4g} "
        f"(confidence {100 * (1 - emp.beta):g} %)"
    )
    if "guesses" in d:
        print(f"  from {d['correct']} right of {d['guesses']} guesses; {d.get('correction', '')}")
    elif "tp" in d:
        print(
            f"  TP {d['tp']} of {d['n_in']}, FP {d['fp']} of {d['n_out']} at threshold {d['threshold']:.6g}; "
            f"{d['correction']}"
        )
    for a in d.get("assumptions", []):
        print(f"  assumes: {a}")
    if verdict is not None:
        print(f"  certified epsilon: [{verdict.certified_lower:.4g}, {verdict.certified_upper:.4g}]")
        if verdict.expected is not None:
            e = verdict.expected
            print(
                f"  a correct implementation shows (optimal attack, median of {e.details['draws']}): "
                f"{e.epsilon_lower:.4g} .. {e.epsilon_upper:.4g}"
            )
        print(f"  verdict: {verdict.message}")
    print(f"  time {seconds:.3f} s")
    return 0

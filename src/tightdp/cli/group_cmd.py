"""``tightdp group``: DP-SGD's epsilon for groups of up to k examples (Ganesh 2024), with both baselines.

The group guarantee composes the mixture-of-Gaussians mechanism of Ganesh 2024, Thm. 3.1
(Poisson sampling) or Thm. 3.3 (fixed batch size); the baselines are the
group-privacy lemma (Ganesh 2024, Lemma 1.1) on the certified example-level curve and
the linear reference k * eps_1 (Ganesh 2024, Sec. 4). ``--plot`` draws epsilon against k
for all three (Ganesh 2024, Fig. 1-2).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from .._validation import check_count, check_delta, check_positive, check_probability
from ..accountants import DEFAULT_ACCOUNTANT
from ..group import GroupReport, group_curve
from ..sampling import GroupAnalysis, scheme_class
from .common import accuracy_from_args, add_accuracy_options, fmt


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "group",
        help="epsilon for groups of up to k examples (mixture of Gaussians)",
        description="Certified group-level epsilon of DP-SGD for groups of up to K examples (Ganesh 2024), "
        "with the group-privacy-lemma and linear k*eps_1 baselines.",
    )
    p.add_argument("--noise-multiplier", type=float, required=True, help="noise std / clipping norm (sigma)")
    p.add_argument(
        "--sampling-rate",
        type=float,
        help="Poisson sampling rate q in (0, 1]; with fixed-batch optional, must equal B/N",
    )
    p.add_argument("--steps", type=float, required=True, help="number of DP-SGD steps T")
    p.add_argument("--delta", type=float, required=True, help="target delta in (0, 1)")
    p.add_argument("--group-size", type=float, required=True, help="largest group size K (examples per group)")
    p.add_argument(
        "--sampling",
        default="poisson",
        help="poisson (default), fixed-batch, or a scheme with a group bound without amplification: "
        "random-allocation, shuffle (--sampling-rate 1/t, t steps per epoch; steps whole epochs); "
        "the others say why no group analysis applies",
    )
    p.add_argument(
        "--dataset-size", type=float, help="fixed-batch: lower bound N on the number of examples outside the group"
    )
    p.add_argument("--batch-size", type=float, help="fixed-batch: batch size B")
    p.add_argument(
        "--accountant",
        default=DEFAULT_ACCOUNTANT,
        help=f"accountant composing the steps (default {DEFAULT_ACCOUNTANT})",
    )
    add_accuracy_options(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--plot", metavar="FILE.png", help="plot epsilon against k = 1..--max-group-size")
    p.add_argument("--max-group-size", type=float, help="largest k in the plot (default: --group-size)")
    p.set_defaults(run=run)


def _parse(args: argparse.Namespace) -> dict[str, Any]:
    """The validated options as ``group_curve`` keywords (plus ``group_size`` and ``k_max``)."""
    sigma = check_positive("--noise-multiplier", args.noise_multiplier)
    steps = check_count("--steps", args.steps)
    delta = check_delta("--delta", args.delta)
    k = check_count("--group-size", args.group_size)
    cls = scheme_class(args.sampling, argument="--sampling")
    sampling = cls.name
    eps_error, rel_error = accuracy_from_args(args)
    q = None if args.sampling_rate is None else check_probability("--sampling-rate", args.sampling_rate)
    n = None if args.dataset_size is None else check_count("--dataset-size", args.dataset_size)
    b = None if args.batch_size is None else check_count("--batch-size", args.batch_size)
    if "batch_size" not in cls.options and q is None:
        raise ValueError(
            f"--sampling-rate is required for --sampling {sampling}"
            + (" (1/t, t steps per epoch)" if cls.per_epoch else "")
        )
    if "batch_size" in cls.options and (n is None or b is None):
        raise ValueError(f"--sampling {sampling} needs --dataset-size and --batch-size")
    if args.max_group_size is not None and not args.plot:
        raise ValueError("--max-group-size applies only with --plot")
    k_max = k if args.max_group_size is None else check_count("--max-group-size", args.max_group_size)
    if k_max < k:
        raise ValueError(f"--max-group-size ({k_max}) must be >= --group-size ({k})")
    if args.plot and not str(args.plot).lower().endswith((".png", ".pdf", ".svg")):
        raise ValueError(f"--plot must name a .png, .pdf or .svg file, got {args.plot!r}")
    if args.plot:
        _check_writable(str(args.plot))
    return dict(
        noise_multiplier=sigma,
        sampling_rate=q,
        steps=steps,
        delta=delta,
        group_size=k,
        sampling=sampling,
        dataset_size=n,
        batch_size=b,
        eps_error=eps_error,
        rel_error=rel_error,
        accountant=args.accountant,
        k_max=k_max,
    )


def _check_writable(path: str) -> None:
    """Refuse, before minutes of accounting, a plot file that cannot be written (one line, exit 2)."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise ValueError(f"--plot: directory {folder!r} does not exist")
    if not os.access(folder, os.W_OK):
        raise ValueError(f"--plot: directory {folder!r} is not writable")
    if os.path.isdir(path):
        raise ValueError(f"--plot: {path!r} is a directory")


def run(args: argparse.Namespace) -> int:
    """``tightdp group``: the certified group-level epsilon, the two baselines, optionally a plot."""
    p = _parse(args)
    k, k_max = p.pop("group_size"), p.pop("k_max")
    sizes = list(range(1, k_max + 1)) if args.plot else [k]
    t0 = time.perf_counter()
    reports = group_curve(group_sizes=sizes, **p)
    seconds = time.perf_counter() - t0
    report = next(r for r in reports if r.group_size == k)
    if args.plot:
        _plot(reports, args.plot, p)
    params = {
        key: p[key]
        for key in (
            "noise_multiplier",
            "sampling_rate",
            "steps",
            "sampling",
            "dataset_size",
            "batch_size",
            "eps_error",
            "rel_error",
        )
    }
    if args.json:
        out = report.to_dict()
        out.update({"accountant": p["accountant"], "parameters": params, "seconds": seconds})
        if args.plot:
            out["plot"] = str(args.plot)
            out["curve"] = [_curve_point(r) for r in reports]
        json.dump(out, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        _print(report, p, seconds, args.plot)
    return 0


def _curve_point(r: GroupReport) -> dict[str, Any]:
    """One group size's row of the ``--json`` curve."""
    d = r.to_dict()
    return {
        "group_size": r.group_size,
        "epsilon": d["epsilon"],
        "group_privacy_lemma_epsilon": d["group_privacy_lemma_epsilon"],
        "linear_lower_bound": d["linear_lower_bound"],
    }


def _print(r: GroupReport, p: dict[str, Any], seconds: float, plot: str | None) -> None:
    """The human table."""
    e, ex = r.epsilon, r.example_epsilon
    cls = scheme_class(p["sampling"])
    mixture = cls.group_analysis is GroupAnalysis.MIXTURE
    if "batch_size" in cls.options:
        run = f"batch size {p['batch_size']} · dataset size >= {p['dataset_size']}"
    elif cls.per_epoch:
        run = f"{round(1 / p['sampling_rate'])} steps per epoch"
    else:
        run = f"sampling rate {fmt(p['sampling_rate'])}"
    scheme = cls.group_summary if mixture else f"{p['sampling']} (upper: {r.details.get('upper')})"
    print(f"tightdp group · groups of up to {r.group_size} examples · {scheme}")
    print(
        f"  noise multiplier {fmt(p['noise_multiplier'])} · {run} · steps {p['steps']} · delta {fmt(r.delta)}"
        f" · accountant {p['accountant']} ({'certified bounds' if e.kind == 'bound' else 'approximation'})"
    )

    def row(label: str, a: str = "", b: str = "", c: str = "") -> None:
        print(f"  {label:38s}{a:>11s}{b:>11s}{c:>11s}")

    row("", "lower", "estimate", "upper")
    row("group epsilon" + (" (mixture of Gaussians)" if mixture else ""), fmt(e.lower), fmt(e.estimate), fmt(e.upper))
    row("example-level epsilon_1", fmt(ex.lower), fmt(ex.estimate), fmt(ex.upper))
    lemma = r.group_privacy_lemma_epsilon
    row("group-privacy lemma (Ganesh 2024)", "", "", "-" if lemma is None else fmt(lemma))
    row("linear reference k * epsilon_1", fmt(r.linear_lower_bound))
    for note in r.to_dict().get("notes", []):
        print(f"  note: {note}")
    if plot:
        print(f"  plot: {plot}")
    print(f"  time {seconds:.3f} s")


def _plot(reports: list[GroupReport], path: str, p: dict[str, Any]) -> None:
    """Epsilon against k: the mixture of Gaussians, the group-privacy lemma and the linear reference."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:  # pragma: no cover - depends on the environment
        raise ValueError("--plot needs matplotlib: pip install 'tightdp[plot]'") from None
    ks = [r.group_size for r in reports]
    up = [r.epsilon.upper for r in reports]
    lo = [r.epsilon.lower for r in reports]
    lemma = [r.group_privacy_lemma_epsilon for r in reports]
    lin = [r.linear_lower_bound for r in reports]
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    ax.fill_between(ks, lo, up, color="C0", alpha=0.25, linewidth=0)
    ax.plot(ks, up, "o-", color="C0", label="mixture of Gaussians (Ganesh 2024, Thm. 3.1/3.3), certified upper")
    lk = [k for k, v in zip(ks, lemma) if v is not None]
    lv = [v for v in lemma if v is not None]
    if lk:
        ax.plot(lk, lv, "s--", color="C3", label="group-privacy lemma (Ganesh 2024, Lemma 1.1)")
    missing = [k for k, v in zip(ks, lemma) if v is None]
    if missing:
        ytop = max(max(up), max(lv) if lv else 0.0)
        ax.plot(
            missing,
            [ytop] * len(missing),
            "x",
            color="C3",
            markersize=9,
            label="lemma: no certified epsilon (delta' unattainable)",
        )
    ax.plot(ks, lin, ":", color="k", label="linear reference k * eps_1")
    ax.set_xlabel("group size k")
    ax.set_ylabel(f"epsilon at delta = {reports[0].delta:g}")
    ax.set_yscale("log")
    if "batch_size" in scheme_class(p["sampling"]).options:
        what = f"{p['sampling']} B = {p['batch_size']}, N = {p['dataset_size']}"
    else:
        what = f"{p['sampling']} q = {p['sampling_rate']:g}"
    ax.set_title(f"Group privacy of DP-SGD: sigma = {p['noise_multiplier']:g}, {what}, T = {p['steps']}", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=130)
    except OSError as exc:  # e.g. the folder vanished or the disk is full: one line, exit 2
        raise ValueError(f"--plot: cannot write {path!r}: {exc.strerror or exc}") from None
    finally:
        plt.close(fig)

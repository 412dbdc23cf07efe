"""``tightdp matrix``: certified epsilon of a correlated-noise run (matrix mechanism: DP-FTRL, BandMF, BLT).

The run is a strategy matrix ``C`` (``--strategy`` with its parameters, or ``--strategy-file``, a JSON
``Strategy.to_dict()``), how a user's participations are drawn (``--sampler`` with its parameters), the
noise multiplier (or ``--target-epsilon`` to calibrate it), ``--steps`` and ``--delta``; the answer is
``tightdp.matrix.matrix_epsilon`` (or ``calibrate_matrix_noise``). Exit codes: 0 a finite certified upper
bound; 1 none (printed, with the reason on stderr); 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import TYPE_CHECKING, Any

from .._validation import check_count, check_delta, check_positive
from .common import accuracy_from_args, add_accuracy_options, fmt, timed

if TYPE_CHECKING:
    from ..bounds import Bounds
    from ..matrix import Sampler, Strategy

STRATEGIES = ("identity", "tree", "banded", "blt")
SAMPLERS = ("none", "cyclic-poisson", "poisson", "balls-in-bins", "epoch-allocation", "min-sep")

#: the sampler options (argparse dest) each --sampler reads; (required, optional)
SAMPLER_OPTIONS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "none": ((), ("participations", "min_sep", "period", "steps_per_epoch")),
    "cyclic-poisson": (("sampling_rate",), ("period",)),
    "poisson": (("sampling_rate",), ("aligned_gradients",)),
    "balls-in-bins": (("cycle_length",), ()),
    "epoch-allocation": (("steps_per_epoch",), ()),
    "min-sep": (("sampling_rate", "min_sep"), ("cold_start",)),
}
#: the strategy options each --strategy reads; (required, optional)
STRATEGY_OPTIONS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "identity": ((), ()),
    "tree": ((), ()),
    "banded": (("c_col",), ("bands",)),
    "blt": (("buf_decay", "output_scale"), ()),
}
_ALL_SAMPLER_OPTIONS = (
    "sampling_rate",
    "period",
    "participations",
    "min_sep",
    "cycle_length",
    "steps_per_epoch",
    "cold_start",
    "aligned_gradients",
)
_ALL_STRATEGY_OPTIONS = ("bands", "c_col", "buf_decay", "output_scale")


def _opt(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "matrix",
        help="certified epsilon of a correlated-noise run (DP-FTRL, BandMF, BLT)",
        description="Certified bounds on epsilon(delta) of a matrix-mechanism run (correlated noise: tree "
        "aggregation / DP-FTRL, banded matrix factorisation, buffered linear Toeplitz), add/remove "
        "neighbouring; or, with --target-epsilon, the smallest noise multiplier meeting it.",
    )
    add_strategy_options(p)
    add_sampler_options(p)
    p.add_argument(
        "--noise-multiplier", type=float, help="sigma: noise N(0, sigma^2 I) added to C x (unit clipping norm)"
    )
    p.add_argument(
        "--target-epsilon",
        type=float,
        help="calibrate: the smallest noise multiplier whose certified "
        "epsilon is at most this (instead of --noise-multiplier)",
    )
    p.add_argument("--steps", type=float, required=True, help="number of training steps n (columns of C)")
    p.add_argument("--delta", type=float, required=True, help="target delta in (0, 1)")
    add_accuracy_options(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(run=run)


def add_strategy_options(p: argparse.ArgumentParser) -> None:
    """``--strategy`` / ``--strategy-file`` and the strategy parameters (also used by ``tightdp statement``)."""
    s = p.add_argument_group("strategy (the matrix C)")
    s.add_argument(
        "--strategy",
        choices=STRATEGIES,
        default=None,
        help="identity (DP-SGD), tree (binary-tree aggregation), banded (banded Toeplitz, needs "
        "--c-col), blt (buffered linear Toeplitz, needs --buf-decay and --output-scale)",
    )
    s.add_argument(
        "--strategy-file",
        metavar="FILE",
        help="a JSON strategy (tightdp.matrix Strategy.to_dict()) instead of --strategy",
    )
    s.add_argument(
        "--c-col",
        metavar="FILE|LIST",
        help="banded: the first column of C (a .npy, .txt or .json file, or comma-separated numbers)",
    )
    s.add_argument("--bands", type=float, help="banded: number of bands (default: the length of --c-col)")
    s.add_argument("--buf-decay", metavar="LIST", help="blt: comma-separated buffer decays")
    s.add_argument("--output-scale", metavar="LIST", help="blt: comma-separated output scales")


def add_sampler_options(
    p: argparse.ArgumentParser, *, sampling_rate: bool = True, default: str | None = "none"
) -> None:
    """``--sampler`` and its parameters (``sampling_rate=False``: the parser already has ``--sampling-rate``)."""
    m = p.add_argument_group("participation (how a user's steps are drawn)")
    m.add_argument(
        "--sampler",
        choices=SAMPLERS,
        default=default,
        help="none (deterministic participation: --participations, --min-sep, --period or --steps-per-epoch), "
        "cyclic-poisson (BandMF: --sampling-rate, --period), poisson (--sampling-rate), "
        "balls-in-bins (--cycle-length), epoch-allocation (--steps-per-epoch), "
        "min-sep (b-min-sep: --sampling-rate, --min-sep, optional --cold-start); default none",
    )
    if sampling_rate:
        m.add_argument(
            "--sampling-rate", type=float, help="cyclic-poisson, poisson, min-sep: the sampling rate q in (0, 1]"
        )
    m.add_argument(
        "--period",
        type=float,
        help="none: cyclic participation every PERIOD steps; cyclic-poisson: "
        "the number of groups (default: the strategy's bands)",
    )
    m.add_argument(
        "--participations",
        type=float,
        help="none: at most this many participations per user (default 1; 0: as many as fit)",
    )
    m.add_argument(
        "--min-sep",
        type=float,
        help="none: any two participations at least MIN_SEP steps apart (default 1); min-sep: the separation b",
    )
    m.add_argument(
        "--cold-start",
        action="store_const",
        const=True,
        default=None,
        help="min-sep: start with every record eligible (default: jax_privacy's warm start)",
    )
    m.add_argument(
        "--aligned-gradients",
        action="store_const",
        const=True,
        default=None,
        help="poisson: assume a user's clipped gradients all point one way (MMCC's scalar model; the default "
        "covers any adaptive gradients)",
    )
    m.add_argument("--cycle-length", type=float, help="balls-in-bins: the number of bins")
    m.add_argument(
        "--steps-per-epoch",
        type=float,
        help="epoch-allocation: steps per epoch; none: at most one participation in each epoch of this many steps "
        "(shuffled multi-epoch training, no amplification claimed)",
    )


def _numbers(option: str, text: str) -> list[float]:
    try:
        values = [float(v) for v in str(text).replace(" ", "").split(",") if v != ""]
    except ValueError:
        raise ValueError(f"{option} must be comma-separated numbers, got {text!r}") from None
    if not values:
        raise ValueError(f"{option} must not be empty")
    return values


def load_column(option: str, source: str) -> list[float]:
    """The numbers of ``source``: an existing ``.npy``, ``.json`` (a list, or ``{"c_col": [...]}``) or text file,
    or comma-separated numbers."""
    import numpy as np

    if not os.path.exists(source):
        if any(ch.isdigit() for ch in source) and not source.lower().endswith((".npy", ".json", ".txt", ".csv")):
            return _numbers(option, source)
        raise FileNotFoundError(2, "no such file", source)
    lower = source.lower()
    try:
        if lower.endswith(".npy"):
            data: Any = np.load(source, allow_pickle=False)
        elif lower.endswith(".json"):
            with open(source, encoding="utf-8") as fh:
                data = json.load(fh)
            if isinstance(data, dict):
                data = data.get("c_col", data)
        else:
            data = np.loadtxt(source, delimiter="," if lower.endswith(".csv") else None, ndmin=1)
        arr = np.asarray(data, dtype=float)
    except (ValueError, TypeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{option}: cannot read numbers from {source}: {' '.join(str(exc).split())}") from None
    if arr.ndim == 2 and 1 in arr.shape:
        arr = arr.ravel()
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{option}: {source} must hold one non-empty column of numbers, got shape {arr.shape}")
    return [float(v) for v in arr]


def strategy_from_args(args: argparse.Namespace) -> Strategy:
    """The ``Strategy`` the options describe."""
    from ..matrix import BLT, BandedToeplitz, BinaryTree, Identity, strategy_from_dict

    given = [d for d in _ALL_STRATEGY_OPTIONS if getattr(args, d) is not None]
    if args.strategy_file is not None:
        if args.strategy is not None:
            raise ValueError("--strategy cannot be combined with --strategy-file (the file describes the strategy)")
        if given:
            raise ValueError(
                f"{_opt(given[0])} cannot be combined with --strategy-file (the file describes the strategy)"
            )
        with open(args.strategy_file, encoding="utf-8") as fh:
            try:
                data = json.load(fh)
            except json.JSONDecodeError as exc:
                raise ValueError(f"--strategy-file: {args.strategy_file} is not JSON: {exc}") from None
        try:
            return strategy_from_dict(data)
        except ValueError as exc:
            raise ValueError(f"--strategy-file: {' '.join(str(exc).split())}") from None
    name = args.strategy or "identity"
    required, optional = STRATEGY_OPTIONS[name]
    for d in given:
        if d not in required + optional:
            raise ValueError(f"{_opt(d)} does not apply to --strategy {name}")
    for d in required:
        if getattr(args, d) is None:
            raise ValueError(f"--strategy {name} needs {_opt(d)}")
    if name == "identity":
        return Identity()
    if name == "tree":
        return BinaryTree()
    if name == "banded":
        c_col = load_column("--c-col", args.c_col)
        bands = None if args.bands is None else check_count("--bands", args.bands)
        return BandedToeplitz(c_col=tuple(c_col), num_bands=bands)
    return BLT(
        buf_decay=tuple(_numbers("--buf-decay", args.buf_decay)),
        output_scale=tuple(_numbers("--output-scale", args.output_scale)),
    )


def sampler_from_args(args: argparse.Namespace) -> Sampler:
    """The ``Sampler`` the options describe."""
    from ..matrix import (
        BallsInBins,
        Cyclic,
        CyclicPoisson,
        EpochAllocation,
        MinSeparation,
        MinSepSampling,
        NoAmplification,
        PerEpoch,
        PoissonSampling,
    )

    name = args.sampler or "none"
    required, optional = SAMPLER_OPTIONS[name]
    for d in _ALL_SAMPLER_OPTIONS:
        if getattr(args, d) is not None and d not in required + optional:
            raise ValueError(f"{_opt(d)} does not apply to --sampler {name}")
    for d in required:
        if getattr(args, d) is None:
            raise ValueError(f"--sampler {name} needs {_opt(d)}")
    if name == "none":
        if args.steps_per_epoch is not None:
            if args.period is not None or args.participations is not None or args.min_sep is not None:
                raise ValueError(
                    "--steps-per-epoch (one participation per epoch) cannot be combined with --period, "
                    "--participations or --min-sep"
                )
            return NoAmplification(
                participation=PerEpoch(steps_per_epoch=check_count("--steps-per-epoch", args.steps_per_epoch))
            )
        if args.period is not None:
            if args.participations is not None or args.min_sep is not None:
                raise ValueError(
                    "--period (cyclic participation) cannot be combined with --participations or --min-sep"
                )
            return NoAmplification(participation=Cyclic(period=check_count("--period", args.period)))
        k = args.participations
        if k is not None and k == 0:
            k = None  # as many as fit
        elif k is not None:
            k = check_count("--participations", k)
        sep = 1 if args.min_sep is None else check_count("--min-sep", args.min_sep)
        return NoAmplification(
            participation=MinSeparation(max_participations=1 if args.participations is None else k, min_sep=sep)
        )
    if name == "cyclic-poisson":
        period = None if args.period is None else check_count("--period", args.period)
        return CyclicPoisson(sampling_rate=args.sampling_rate, period=period)
    if name == "poisson":
        return PoissonSampling(sampling_rate=args.sampling_rate, aligned_gradients=bool(args.aligned_gradients))
    if name == "balls-in-bins":
        return BallsInBins(cycle_length=check_count("--cycle-length", args.cycle_length))
    if name == "min-sep":
        return MinSepSampling(
            sampling_rate=args.sampling_rate,
            min_sep=check_count("--min-sep", args.min_sep),
            warm_start=args.cold_start is None,
        )
    return EpochAllocation(steps_per_epoch=check_count("--steps-per-epoch", args.steps_per_epoch))


def run_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """``{"strategy", "sampler", "steps", "delta"}`` of the options (validated)."""
    strategy = strategy_from_args(args)
    sampler = sampler_from_args(args)
    return {
        "strategy": strategy,
        "sampler": sampler,
        "steps": check_count("--steps", args.steps),
        "delta": check_delta("--delta", args.delta),
    }


def _finite(b: Bounds) -> bool:
    """Whether ``b`` has a finite upper bound."""
    return b.upper is not None and math.isfinite(float(b.upper))


def run(args: argparse.Namespace) -> int:
    """``tightdp matrix``: epsilon of a correlated-noise run, or the noise for a target epsilon."""
    from ..matrix import calibrate_matrix_noise, matrix_epsilon

    if (args.noise_multiplier is None) == (args.target_epsilon is None):
        raise ValueError("give exactly one of --noise-multiplier and --target-epsilon")
    r: dict[str, Any] = run_from_args(args)
    eps_error, rel_error = accuracy_from_args(args)
    acc: dict[str, Any] = {"eps_error": eps_error, "rel_error": rel_error}
    params: dict[str, Any] = {
        "strategy": r["strategy"].to_dict(),
        "sampler": r["sampler"].to_dict(),
        "steps": r["steps"],
        "delta": r["delta"],
        "relation": "add-remove",
    }
    extra: dict[str, Any] = {}
    if args.target_epsilon is not None:
        target = check_positive("--target-epsilon", args.target_epsilon)
        cal, seconds = timed(lambda: calibrate_matrix_noise(target_epsilon=target, **r, **acc))
        bounds, sigma = cal.epsilon, cal.noise_multiplier
        extra = {"target_epsilon": target}
    else:
        sigma = check_positive("--noise-multiplier", args.noise_multiplier)
        bounds, seconds = timed(lambda: matrix_epsilon(noise_multiplier=sigma, **r, **acc))
    params["noise_multiplier"] = sigma
    if args.json:
        d = bounds.to_dict()
        out = {
            "epsilon": {"lower": d["lower"], "estimate": d["estimate"], "upper": d["upper"]},
            "kind": bounds.kind,
            "accountant": "connect-dots",
            "noise_multiplier": sigma,
            "eps_error": eps_error,
            "rel_error": rel_error,
            "parameters": params,
            **extra,
            "details": d.get("details", {}),
            "seconds": seconds,
        }
        json.dump(out, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        det = bounds.details or {}
        print(
            f"tightdp · matrix mechanism · {det.get('strategy', r['strategy'].describe())} · "
            f"{det.get('sampler', r['sampler'].describe())} · add-remove"
        )
        head = f"noise multiplier {fmt(sigma)}" + (" (calibrated)" if extra else "")
        print(
            f"  {head} · steps {r['steps']} · delta {fmt(r['delta'])}"
            + (f" · target epsilon {fmt(extra['target_epsilon'])}" if extra else "")
        )
        print(f"  {'':10s}{'lower':>12s}{'estimate':>12s}{'upper':>12s}")
        print(f"  {'epsilon':10s}{fmt(bounds.lower):>12s}{fmt(bounds.estimate):>12s}{fmt(bounds.upper):>12s}")
        for key in ("method", "upper", "lower", "note"):
            if isinstance(det.get(key), str):
                print(f"  {key}: {det[key]}")
        print(f"  time {seconds:.3f} s")
    if not _finite(bounds):
        sys.stdout.flush()
        note = (bounds.details or {}).get("note") or "no finite upper bound"
        sys.stderr.write(f"tightdp: cannot answer: no certified upper bound (upper = {bounds.upper}): {note}\n")
        return 1
    return 0

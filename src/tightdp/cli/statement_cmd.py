"""``tightdp statement``: a certified privacy statement for a DP-SGD run (``tightdp.privacy_statement``).

Example-level epsilon at the chosen delta and group-level epsilon for each
``--group-size``, as certified intervals, with the assumptions in plain language
(TensorFlow Privacy's ``compute_dp_sgd_privacy_statement``, certified). The run
comes from the options or from a privacy report's config file (``--config``).
Exit codes: 0 every epsilon certified; 1 one of them has no finite certified
upper bound (printed, with the reason on stderr); 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from .._validation import check_count
from ..tuning import TUNING_DISTRIBUTIONS
from .common import accuracy_from_args, add_accuracy_options, add_length_options, sampling_help

if TYPE_CHECKING:
    from ..statement import PrivacyStatement
    from ..tuning import Tuning

EXAMPLES = """examples:
  tightdp statement --noise-multiplier 1.1 --dataset-size 50000 --batch-size 256 --epochs 100 \\
                    --delta 1e-5 --group-size 2 --group-size 4
  tightdp statement --config examples/report_config.toml --json
  tightdp statement --noise-multiplier 2 --sampling fixed-batch --dataset-size 50000 --batch-size 500 \\
                    --steps 2000 --delta 1e-6 --group-size 4
  tightdp statement --noise-multiplier 1.1 --sampling-rate 0.01 --steps 1000 --delta 1e-5 --tuning-runs 8
  tightdp statement --noise-multiplier 1.1 --sampling-rate 0.01 --steps 1000 --delta 1e-5 \
                    --tuning-distribution poisson --tuning-mean 5
  tightdp statement --strategy banded --c-col 1,0.5,0.25 --sampler cyclic-poisson --sampling-rate 0.1 \\
                    --noise-multiplier 1 --steps 300 --delta 1e-5
"""

#: run options that --config replaces
_RUN = ("noise_multiplier", "sampling_rate", "steps", "epochs", "dataset_size", "batch_size", "max_batch_size")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    import argparse

    p = subparsers.add_parser(
        "statement",
        help="certified privacy statement: example- and group-level epsilon with assumptions",
        description="A certified privacy statement for a DP-SGD run: example-level epsilon at delta and "
        "group-level epsilon for groups of up to k examples (Ganesh 2024), with the assumptions "
        "(neighbouring relation, sampling, what is not covered) spelled out.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--config",
        metavar="FILE",
        help="a privacy report config (TOML or JSON, see tightdp report) instead of the run options",
    )
    p.add_argument("--noise-multiplier", type=float, help="noise std / clipping norm (sigma)")
    add_length_options(p)
    p.add_argument("--sampling", default=None, help=sampling_help())
    p.add_argument("--max-batch-size", type=float, help="truncated-poisson: the largest batch kept")
    p.add_argument("--delta", type=float, help="target delta in (0, 1) (default with --config: its first delta)")
    p.add_argument(
        "--group-size",
        type=float,
        action="append",
        dest="group_sizes",
        metavar="K",
        help="also state epsilon for groups of up to K examples (repeatable; with --config default: "
        "its privacy.group_sizes)",
    )
    from .matrix_cmd import add_sampler_options, add_strategy_options

    add_strategy_options(p)  # a correlated-noise run (tightdp matrix's options) instead of DP-SGD
    add_sampler_options(p, sampling_rate=False, default=None)
    add_accuracy_options(p)
    t = p.add_argument_group(
        "hyper-parameter tuning (the epsilon of the whole tuning procedure, tightdp.tuning.tuning_epsilon)"
    )
    t.add_argument("--tuning-runs", type=float, metavar="K", help="K runs of this training (a fixed number)")
    t.add_argument(
        "--tuning-distribution",
        choices=[d for d in TUNING_DISTRIBUTIONS if d != "fixed"],
        help="a random number of runs with this law (Papernot & Steinke 2022; RDP-based bound)",
    )
    t.add_argument("--tuning-mean", type=float, metavar="MU", help="the expected number of runs E K >= 1")
    t.add_argument("--tuning-shape", type=float, metavar="ETA", help="negative-binomial: the shape eta > 0")
    t.add_argument(
        "--tuning-release",
        choices=("best", "all"),
        default=None,
        help="release only the best run (default) or every run's output (--tuning-runs only)",
    )
    p.add_argument("--json", action="store_true", help="print JSON (the statement's fields and its text)")
    p.set_defaults(run=run)


def _group_sizes(args: argparse.Namespace) -> list[int] | None:
    """The ``--group-size`` values, checked (``None`` when none is given)."""
    if args.group_sizes is None:
        return None
    return [check_count("--group-size", k) for k in args.group_sizes]


def tuning_from_args(args: argparse.Namespace) -> Tuning | None:
    """The ``tightdp.tuning.Tuning`` the ``--tuning-*`` options describe, or None (no tuning option given)."""
    from ..tuning import Tuning

    runs, dist, mean, shape = args.tuning_runs, args.tuning_distribution, args.tuning_mean, args.tuning_shape
    release = args.tuning_release
    if runs is None and dist is None:
        for name, v in (("--tuning-mean", mean), ("--tuning-shape", shape), ("--tuning-release", release)):
            if v is not None:
                raise ValueError(f"{name} needs --tuning-runs or --tuning-distribution")
        return None
    if runs is not None and dist is not None:
        raise ValueError(
            "--tuning-runs (a fixed number of runs) and --tuning-distribution (a random number) exclude each other"
        )
    if runs is not None:
        for name, v in (("--tuning-mean", mean), ("--tuning-shape", shape)):
            if v is not None:
                raise ValueError(f"{name} applies to --tuning-distribution, not to --tuning-runs")
        return Tuning(distribution="fixed", runs=check_count("--tuning-runs", runs), release=release or "best")
    if mean is None:
        raise ValueError(f"--tuning-mean is required with --tuning-distribution {dist}")
    if (shape is not None) != (dist == "negative-binomial"):
        raise ValueError(
            "--tuning-shape is required with --tuning-distribution negative-binomial and applies to it only"
        )
    if release == "all":
        raise ValueError("--tuning-release all needs --tuning-runs (a fixed number of runs)")
    try:
        return Tuning(distribution=dist, mean=mean, shape=shape)
    except ValueError as e:  # name the option rather than the field
        msg = str(e)
        for field in ("mean", "shape"):
            msg = msg.replace(f"tuning.{field}", f"--tuning-{field}")
        raise ValueError(msg) from None


def build(args: argparse.Namespace) -> PrivacyStatement:
    """The ``PrivacyStatement`` the options ask for."""
    from .._validation import check_delta
    from ..statement import privacy_statement, statement_from_config

    ks = _group_sizes(args)
    eps_error, rel_error = accuracy_from_args(args)
    tuning = tuning_from_args(args)
    if _matrix_run(args):
        if tuning is not None:
            raise ValueError("--tuning-* options do not apply to a correlated-noise run (--strategy, --sampler)")
        return _matrix_build(args, ks, eps_error, rel_error)
    if args.config is not None:
        if tuning is not None:
            raise ValueError("--tuning-* options cannot be combined with --config (give the run as options)")
        given = [name for name in _RUN if getattr(args, name) is not None]
        if given:
            raise ValueError(
                f"--{given[0].replace('_', '-')} cannot be combined with --config (the config describes the run)"
            )
        if args.sampling is not None:
            raise ValueError("--sampling cannot be combined with --config (the config describes the run)")
        from ..report import load_config

        delta = None if args.delta is None else check_delta("--delta", args.delta)
        return statement_from_config(
            load_config(args.config), delta=delta, group_sizes=ks, eps_error=eps_error, rel_error=rel_error
        )
    if args.delta is None:
        raise ValueError("--delta is required (or give --config)")
    if args.noise_multiplier is None:
        raise ValueError("--noise-multiplier is required (or give --config)")
    return privacy_statement(
        noise_multiplier=args.noise_multiplier,
        delta=args.delta,
        steps=args.steps,
        epochs=args.epochs,
        sampling_rate=args.sampling_rate,
        dataset_size=args.dataset_size,
        batch_size=args.batch_size,
        sampling=args.sampling,
        group_sizes=ks or (),
        max_batch_size=args.max_batch_size,
        eps_error=eps_error,
        rel_error=rel_error,
        tuning=tuning,
    )


def _matrix_run(args: argparse.Namespace) -> bool:
    """Whether the options describe a correlated-noise run (``tightdp matrix``'s options)."""
    from .matrix_cmd import _ALL_SAMPLER_OPTIONS, _ALL_STRATEGY_OPTIONS

    names = ("strategy", "strategy_file", "sampler", *_ALL_STRATEGY_OPTIONS, *_ALL_SAMPLER_OPTIONS)
    return any(getattr(args, d) is not None for d in names if d != "sampling_rate")


def _matrix_build(
    args: argparse.Namespace, ks: list[int] | None, eps_error: float | None, rel_error: float | None
) -> PrivacyStatement:
    """The statement of a correlated-noise run (``--strategy`` / ``--sampler``, as for ``tightdp matrix``)."""
    from ..statement import privacy_statement
    from .matrix_cmd import sampler_from_args, strategy_from_args

    for name in ("config", "epochs", "dataset_size", "batch_size", "sampling", "max_batch_size"):
        if getattr(args, name) is not None:
            raise ValueError(
                f"--{name.replace('_', '-')} does not apply to a correlated-noise run (--strategy, --sampler)"
            )
    for name in ("delta", "noise_multiplier", "steps"):
        if getattr(args, name) is None:
            raise ValueError(f"--{name.replace('_', '-')} is required")
    return privacy_statement(
        strategy=strategy_from_args(args),
        sampler=sampler_from_args(args),
        noise_multiplier=args.noise_multiplier,
        steps=check_count("--steps", args.steps),
        delta=args.delta,
        group_sizes=ks or (),
        eps_error=eps_error,
        rel_error=rel_error,
    )


def run(args: argparse.Namespace) -> int:
    """``tightdp statement``: print the privacy statement (or JSON); 1 when part of it cannot be answered."""
    s = build(args)
    if args.json:
        json.dump(s.to_dict(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(s.to_text())
    problems = s.uncertified()
    if problems:
        sys.stdout.flush()
        sys.stderr.write(f"tightdp: cannot answer: {problems[0]}\n")
        return 1
    return 0

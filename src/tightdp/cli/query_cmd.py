"""``tightdp epsilon`` and ``tightdp delta``: certified bounds on one privacy quantity of a DP-SGD run.

One module for both (they differ only in the quantity asked for and the one
given): ``epsilon --delta D`` bounds epsilon(D), ``delta --epsilon E`` bounds
delta(E). An answer whose upper bound cannot be certified (infinite or
missing) is still printed, with the accountant's note, but the command exits
with code 1 and says why on stderr.
"""

from __future__ import annotations

import argparse
import math
import sys

from .._validation import check_delta, check_epsilon
from ..accountants import DEFAULT_ACCOUNTANT
from ..bounds import Bounds
from ..sampling import scheme_names
from .common import (
    accuracy_from_args,
    add_run_options,
    make_accountant,
    print_result,
    run_from_args,
    scheme_epsilon,
    timed,
)

#: quantity -> (the option giving the other quantity, its help, its checker, help of the subcommand)
QUERIES = {
    "epsilon": (
        "--delta",
        "target delta in (0, 1)",
        check_delta,
        "epsilon at a given delta",
        "Certified bounds on epsilon(delta) of a DP-SGD run.",
    ),
    "delta": (
        "--epsilon",
        "epsilon >= 0",
        check_epsilon,
        "delta at a given epsilon",
        "Certified bounds on delta(epsilon) of a DP-SGD run.",
    ),
}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    for quantity, (option, help_, _, short, description) in QUERIES.items():
        p = subparsers.add_parser(quantity, help=short, description=description)
        add_run_options(p)
        p.add_argument(option, type=float, required=True, help=help_)
        p.set_defaults(run=run, quantity=quantity)


def uncertified_reason(bounds: Bounds) -> str | None:
    """Why ``bounds`` carries no certified finite upper bound, or ``None`` when it does."""
    up = bounds.upper
    if bounds.kind == "bound" and up is not None and math.isfinite(float(up)):
        return None
    if bounds.kind != "bound":
        return None  # an approximation says so in its kind; it is not a failed certificate
    note = (bounds.details or {}).get("note") or "the accountant gave no finite upper bound"
    return f"no certified upper bound (upper = {up}): {note}"


def run(args: argparse.Namespace) -> int:
    quantity = args.quantity
    option, _, check, _, _ = QUERIES[quantity]
    mech, steps, params = run_from_args(args)
    given = check(option, getattr(args, option[2:]))
    acc = make_accountant(args)
    if mech is None:  # an epoch-based or truncated scheme: dpsgd_epsilon answers, with the dominance accountant
        if quantity != "epsilon":
            raise ValueError(
                f"tightdp delta supports --sampling {', '.join(scheme_names(step_mechanism=True))}; "
                f"use tightdp epsilon for --sampling {params['sampling']}"
            )
        if acc.name != DEFAULT_ACCOUNTANT:
            raise ValueError(
                f"--accountant must be {DEFAULT_ACCOUNTANT} for --sampling {params['sampling']} "
                f"(its bounds come from dominance pairs), got {acc.name}"
            )
        bounds, seconds = timed(lambda: scheme_epsilon(params, given, *accuracy_from_args(args)))
    elif quantity == "epsilon":
        bounds, seconds = timed(lambda: acc.compose(mech, steps).epsilon(given))
    else:
        bounds, seconds = timed(lambda: acc.compose(mech, steps).delta(given))
    print_result(
        quantity,
        bounds,
        acc.name,
        params,
        seconds,
        args.json,
        {option[2:]: given},
        eps_error=args.eps_error,
        rel_error=args.rel_error,
    )
    reason = uncertified_reason(bounds)
    if reason is not None:
        sys.stdout.flush()
        sys.stderr.write(f"tightdp: cannot answer: {reason}\n")
        return 1
    return 0

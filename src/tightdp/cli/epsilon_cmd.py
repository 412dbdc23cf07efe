"""``tightdp epsilon``: bounds on epsilon at a given delta for a DP-SGD run."""

from __future__ import annotations

from .._validation import check_delta
from .common import add_run_options, make_accountant, print_result, run_from_args, timed


def register(subparsers) -> None:
    p = subparsers.add_parser("epsilon", help="epsilon at a given delta",
                              description="Certified bounds on epsilon(delta) of a DP-SGD run.")
    add_run_options(p)
    p.add_argument("--delta", type=float, required=True, help="target delta in (0, 1)")
    p.set_defaults(run=run)


def run(args) -> int:
    mech, steps, params = run_from_args(args)
    delta = check_delta("--delta", args.delta)
    acc = make_accountant(args)
    bounds, seconds = timed(lambda: acc.compose(mech, steps).epsilon(delta))
    print_result("epsilon", bounds, acc.name, params, seconds, args.json, {"delta": delta})
    return 0

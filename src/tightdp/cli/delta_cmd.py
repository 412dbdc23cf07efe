"""``tightdp delta``: bounds on delta at a given epsilon for a DP-SGD run."""

from __future__ import annotations

from .._validation import check_epsilon
from .common import add_run_options, make_accountant, print_result, run_from_args, timed


def register(subparsers) -> None:
    p = subparsers.add_parser("delta", help="delta at a given epsilon",
                              description="Certified bounds on delta(epsilon) of a DP-SGD run.")
    add_run_options(p)
    p.add_argument("--epsilon", type=float, required=True, help="epsilon >= 0")
    p.set_defaults(run=run)


def run(args) -> int:
    mech, steps, params = run_from_args(args)
    eps = check_epsilon("--epsilon", args.epsilon)
    acc = make_accountant(args)
    bounds, seconds = timed(lambda: acc.compose(mech, steps).delta(eps))
    print_result("delta", bounds, acc.name, params, seconds, args.json, {"epsilon": eps})
    return 0

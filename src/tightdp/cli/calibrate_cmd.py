"""``tightdp calibrate``: the noise, steps or sampling rate that meets a target (epsilon, delta).

    tightdp calibrate --target-epsilon 3 --delta 1e-5 --sampling-rate 0.01 --steps 1000
    tightdp calibrate --target-epsilon 3 --delta 1e-5 --dataset-size 50000 --batch-size 256 --epochs 100
    tightdp calibrate --solve steps --noise-multiplier 1.1 --target-epsilon 8 --delta 1e-5 --sampling-rate 0.005
    tightdp calibrate --solve sampling-rate --noise-multiplier 1.0 --steps 1000 --target-epsilon 3 --delta 1e-5 --json
    tightdp calibrate --target-epsilon 3 --delta 1e-5 --dataset-size 50000 --batch-size 256 --epochs 10 \
        --sampling random-allocation

``--sampling`` (a scheme of ``tightdp.sampling``: poisson, random-allocation, shuffle, truncated-poisson, ...)
is the batch sampling that runs; the search accounts its ``TrainingRun`` (``tightdp.calibration.calibrate``). The epoch-based
schemes run ``t = ceil(N / B)`` steps an epoch (or ``t = 1 / --sampling-rate``) and whole epochs;
truncated Poisson needs ``--dataset-size`` and ``--max-batch-size``.

Every answer is judged on the certified upper bound at one accuracy, the
``--eps-error`` of ``tightdp epsilon`` (default 0.01 for both), so re-checking
the printed answer with ``tightdp epsilon`` gives an upper bound at or below the
target; the output names that accuracy and the command that re-checks it. The
noise is printed rounded up, the sampling rate rounded down (``tightdp.calibration``).
Bad input: one line on stderr naming the option, exit 2; an unreachable target:
one line on stderr, exit 1. A spinner appears on stderr (if it is a terminal)
once the search takes more than a second.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from typing import TYPE_CHECKING, Any, TextIO

from .._accuracy import describe_accuracy
from ..accountants import DEFAULT_ACCOUNTANT
from ..sampling import DEFAULT_SCHEME, scheme_class
from .common import accuracy_from_args, add_accuracy_options, add_length_options, sampling_help

if TYPE_CHECKING:
    from ..calibration import Calibration

SOLVE = ("noise", "steps", "sampling-rate")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "calibrate",
        help="noise multiplier / steps / sampling rate for a target (epsilon, delta)",
        description="Solve for the smallest noise multiplier (default), the largest number of steps or the largest "
        "sampling rate whose certified epsilon is at most the target.",
    )
    p.add_argument("--target-epsilon", type=float, required=True, help="the epsilon budget")
    p.add_argument("--delta", type=float, required=True, help="the delta of the guarantee")
    p.add_argument("--solve", choices=SOLVE, default="noise", help="what to solve for (default: noise)")
    add_length_options(p)
    p.add_argument("--noise-multiplier", type=float, help="the noise multiplier (when solving steps or sampling rate)")
    p.add_argument(
        "--accountant",
        default=DEFAULT_ACCOUNTANT,
        help=f"accountant whose upper bound is used (default: {DEFAULT_ACCOUNTANT})",
    )
    p.add_argument("--sampling", default="poisson", help="the batch sampling that runs: " + sampling_help())
    p.add_argument("--max-batch-size", type=float, help="batch cap for --sampling truncated-poisson")
    add_accuracy_options(p)
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(run=run)


def _need(args: argparse.Namespace, *names: str) -> None:
    """``ValueError`` unless every option of ``names`` is given."""
    for n in names:
        if getattr(args, n.replace("-", "_")) is None:
            raise ValueError(f"--{n} is required with --solve {args.solve}")


def _forbid(args: argparse.Namespace, *names: str) -> None:
    """``ValueError`` if any option of ``names`` is given."""
    for n in names:
        if getattr(args, n.replace("-", "_")) is not None:
            raise ValueError(f"--{n} cannot be used with --solve {args.solve}")


def _check_options(args: argparse.Namespace) -> None:
    """Validate every given option under its own name (the library would name its Python argument)."""
    from .._validation import check_count, check_delta, check_positive, check_probability
    from ..calibration import MAX_TARGET_EPSILON

    cls = scheme_class(args.sampling, argument="--sampling")

    t = check_positive("--target-epsilon", args.target_epsilon)
    if t > MAX_TARGET_EPSILON:
        raise ValueError(
            f"--target-epsilon must be <= {MAX_TARGET_EPSILON:g}, got {args.target_epsilon!r}: an "
            "epsilon that large promises no meaningful privacy, and certifying it needs grids of "
            "millions of points per evaluation"
        )
    check_delta("--delta", args.delta)
    accuracy_from_args(args)
    for name, check in (
        ("sampling-rate", check_probability),
        ("steps", check_count),
        ("epochs", check_count),
        ("dataset-size", check_count),
        ("batch-size", check_count),
        ("noise-multiplier", check_positive),
        ("max-batch-size", check_count),
    ):
        value = getattr(args, name.replace("-", "_"))
        if value is not None:
            check(f"--{name}", value)
    if args.dataset_size is not None and args.batch_size is not None and args.batch_size > args.dataset_size:
        raise ValueError(f"--batch-size ({args.batch_size:g}) must be <= --dataset-size ({args.dataset_size:g})")
    if args.max_batch_size is not None and "max_batch_size" not in cls.options:
        raise ValueError(f"--max-batch-size does not apply to --sampling {cls.name}")
    if "max_batch_size" in cls.options and (args.max_batch_size is None or args.dataset_size is None):
        raise ValueError(f"--sampling {cls.name} needs --dataset-size and --max-batch-size")


def _scheme_rate(args: argparse.Namespace, n: float, b: float) -> float:
    """The sampling rate a run of batch size ``b`` over ``n`` records has under ``--sampling``: ``b / n``, or
    ``1 / ceil(n / b)`` for the epoch-based schemes (``t`` steps an epoch)."""
    import math

    return 1.0 / math.ceil(n / b) if scheme_class(args.sampling).per_epoch else float(b / n)


def _agree_or_refuse(args: argparse.Namespace) -> None:
    """Options that say the same thing twice must agree (then the redundant one is dropped)."""
    from ..calibration import steps_from_epochs

    n, b = args.dataset_size, args.batch_size
    if args.sampling_rate is not None and n is not None and b is not None:
        rate = _scheme_rate(args, n, b)
        if abs(args.sampling_rate - rate) > 1e-12 * rate:
            raise ValueError(
                f"--sampling-rate {args.sampling_rate:g} conflicts with --batch-size / --dataset-size "
                f"= {b:g}/{n:g} ({rate:.6g} for --sampling {args.sampling}); give one or the other"
            )
        args.sampling_rate = None
    if args.steps is not None and args.epochs is not None and n is not None and b is not None:
        _, k = steps_from_epochs(epochs=args.epochs, dataset_size=n, batch_size=b)
        if int(args.steps) != k:
            raise ValueError(
                f"--steps {args.steps:g} conflicts with --epochs {args.epochs:g} ({k} steps of batch "
                f"size {b:g} over {n:g} records); give one or the other"
            )
        args.steps = None


def solve(args: argparse.Namespace) -> Calibration:
    """Run the calibration the arguments ask for; returns a ``Calibration``."""
    from ..calibration import calibrate_noise, calibrate_sampling_rate, calibrate_steps, steps_from_epochs

    _check_options(args)
    _agree_or_refuse(args)
    common = dict(
        target_epsilon=args.target_epsilon,
        delta=args.delta,
        accountant=args.accountant,
        eps_error=args.eps_error,
        rel_error=args.rel_error,
        sampling=args.sampling,
    )
    if args.max_batch_size is not None:
        common["max_batch_size"] = int(args.max_batch_size)
    # a scheme with a data-set size of its own (truncated Poisson) takes it with --sampling-rate too
    own_n = "dataset_size" in scheme_class(args.sampling).options
    scheme_n = own_n and args.epochs is None and args.batch_size is None
    if args.solve == "noise":
        _forbid(args, "noise-multiplier")
        if scheme_n and args.dataset_size is not None:
            _need(args, "sampling-rate", "steps")
            return calibrate_noise(
                sampling_rate=args.sampling_rate, steps=args.steps, dataset_size=int(args.dataset_size), **common
            )
        if args.epochs is not None or args.dataset_size is not None or args.batch_size is not None:
            _forbid(args, "sampling-rate", "steps")
            _need(args, "epochs", "dataset-size", "batch-size")
            return calibrate_noise(
                epochs=args.epochs, dataset_size=args.dataset_size, batch_size=args.batch_size, **common
            )
        _need(args, "sampling-rate", "steps")
        return calibrate_noise(sampling_rate=args.sampling_rate, steps=args.steps, **common)
    _need(args, "noise-multiplier")
    if args.solve == "steps":
        _forbid(args, "steps", "epochs")
        multiple = 1
        q = args.sampling_rate
        if (args.dataset_size is not None and not scheme_n) or args.batch_size is not None:
            _forbid(args, "sampling-rate")
            _need(args, "dataset-size", "batch-size")
            q, multiple = steps_from_epochs(epochs=1, dataset_size=args.dataset_size, batch_size=args.batch_size)
            q = _scheme_rate(args, args.dataset_size, args.batch_size)
        else:
            _need(args, "sampling-rate")
        n = None if args.dataset_size is None else int(args.dataset_size)
        return calibrate_steps(
            noise_multiplier=args.noise_multiplier,
            sampling_rate=q,
            multiple_of=multiple,
            dataset_size=n if own_n else None,
            **common,
        )
    _forbid(args, "sampling-rate", "batch-size")
    if args.epochs is not None or (args.dataset_size is not None and not own_n):
        raise ValueError("--solve sampling-rate takes --steps (epochs depend on the rate)")
    _need(args, "steps")
    n = None if args.dataset_size is None else int(args.dataset_size)
    return calibrate_sampling_rate(noise_multiplier=args.noise_multiplier, steps=args.steps, dataset_size=n, **common)


def recheck_command(cal: Calibration, args: argparse.Namespace) -> str:
    """The ``tightdp epsilon`` command that re-checks the answer at the accuracy it was certified at."""
    from .._accuracy import resolve_accuracy

    parts = ["tightdp epsilon", f"--noise-multiplier {cal.noise_multiplier:.6g}"]
    if args.dataset_size is not None and args.batch_size is not None and cal.solved != "sampling_rate":
        parts += [f"--dataset-size {args.dataset_size:g}", f"--batch-size {args.batch_size:g}"]
        spe = -(-int(args.dataset_size) // int(args.batch_size))
        parts.append(f"--epochs {cal.steps // spe}" if cal.steps % spe == 0 else f"--steps {cal.steps}")
    else:
        # the epoch-based schemes need the rate 1/t exactly (a 6-digit rounding would not be 1/t)
        cls = scheme_class(cal.sampling)
        rate = repr(cal.sampling_rate) if cls.per_epoch else f"{cal.sampling_rate:.6g}"
        parts += [f"--sampling-rate {rate}", f"--steps {cal.steps}"]
        if args.dataset_size is not None and "dataset_size" in cls.options:
            parts.append(f"--dataset-size {args.dataset_size:g}")
    if scheme_class(cal.sampling) is not scheme_class(DEFAULT_SCHEME):
        parts.append(f"--sampling {cal.sampling}")
    if args.max_batch_size is not None:
        parts.append(f"--max-batch-size {args.max_batch_size:g}")
    parts.append(f"--delta {cal.delta:g}")
    if args.accountant != "connect-dots":
        parts.append(f"--accountant {args.accountant}")
    if cal.eps_error is not None and (cal.eps_error, cal.rel_error) != resolve_accuracy():
        if cal.rel_error is not None:
            parts.append(f"--rel-error {cal.rel_error:g}")
        parts.append(f"--eps-error {cal.eps_error:g}")
    return " ".join(parts)


class _DelayedSpinner:
    """A rich spinner on stderr that appears after ``delay`` seconds, only when stderr is a terminal."""

    def __init__(self, message: str, delay: float = 1.0, stream: TextIO | None = None) -> None:
        self.message, self.delay = message, delay
        self.stream = sys.stderr if stream is None else stream
        self._timer: threading.Timer | None = None
        self._status: Any = None  # a rich Status once shown (rich is optional)
        self._lock = threading.Lock()
        self._done = False

    def _start(self) -> None:
        try:
            from rich.console import Console
        except ImportError:
            return
        with self._lock:
            if self._done:
                return
            self._status = Console(file=self.stream).status(self.message)
            self._status.start()

    def __enter__(self) -> _DelayedSpinner:
        if getattr(self.stream, "isatty", lambda: False)():
            self._timer = threading.Timer(self.delay, self._start)
            self._timer.daemon = True
            self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._done = True
            if self._timer is not None:
                self._timer.cancel()
            if self._status is not None:
                self._status.stop()


def run(args: argparse.Namespace) -> int:
    """``tightdp calibrate``: print the calibrated parameter (or JSON); 1 when no calibration meets the target."""
    from ..calibration import CalibrationError
    from . import name_options

    try:
        with _DelayedSpinner(f"calibrating {args.solve} (certified search)"):
            cal = solve(args)
    except CalibrationError as exc:
        names = {
            "target_epsilon": "--target-epsilon",
            "noise_multiplier": "--noise-multiplier",
            "sampling_rate": "--sampling-rate",
            "eps_error": "--eps-error",
            "max_steps": "maximum steps",
        }
        print(f"tightdp: cannot answer: {name_options(' '.join(str(exc).split()), names)}", file=sys.stderr)
        return 1
    if args.json:
        out = cal.to_dict()
        out["recheck"] = recheck_command(cal, args)
        print(json.dumps(out, indent=2))
        return 0
    b = cal.epsilon
    lines = []
    if cal.solved == "noise_multiplier":
        lines.append(f"noise multiplier: {cal.noise_multiplier:.6g} (rounded up: more noise is the safe side)")
    elif cal.solved == "steps":
        lines.append(f"steps: {cal.steps}")
        if cal.details.get("multiple_of"):
            lines[-1] += f" ({cal.steps // cal.details['multiple_of']} epochs of {cal.details['multiple_of']} steps)"
    else:
        lines.append(f"sampling rate: {cal.sampling_rate:.6g} (rounded down: a smaller rate is the safe side)")
    lines.append(
        f"run: noise multiplier {cal.noise_multiplier:.6g}, sampling rate {cal.sampling_rate:.6g}, "
        f"{cal.steps} steps"
        + ("" if cal.run is None or cal.run.sampling.name == DEFAULT_SCHEME else f", sampling {cal.run.sampling.name}")
    )
    interval = "" if b.lower is None else f" (certified interval [{b.lower:.6g}, {b.upper:.6g}])"
    lines.append(
        f"epsilon <= {b.upper:.6g} at delta = {cal.delta:g}{interval}, target {cal.target_epsilon:g}, "
        f"accountant {cal.accountant} ({b.kind})"
    )
    if cal.eps_error is not None:
        this = describe_accuracy(cal.eps_error, cal.rel_error)
        default = describe_accuracy()
        which = "the default of tightdp epsilon" if this == default else f"the default of tightdp epsilon is {default}"
        lines.append(f"accuracy: certified at {this} ({which}); re-check: {recheck_command(cal, args)}")
    tight = cal.details.get("tightness") or {}
    if tight.get("checked") is not None and tight.get("overshoots"):
        lines.append(
            f"tight: {_neighbour(cal, tight)} gives epsilon >= {tight['epsilon_lower']:.6g} "
            "(certified lower bound) > target"
        )
    elif tight.get("checked") is not None and tight.get("overshoots") is False:
        lo, up = tight.get("epsilon_lower"), tight.get("epsilon_upper")
        lines.append(
            f"tightness not shown: {_neighbour(cal, tight)} gives epsilon in [{_g(lo)}, {_g(up)}], not "
            "certainly above the target ("
            + (
                "the scheme's certified lower bound is loose: the gap is its analysis', not the accuracy"
                if scheme_class(cal.sampling).calibration_note
                else "a smaller --eps-error can show more"
            )
            + ")"
        )
    elif tight.get("note"):
        lines.append(f"tightness not shown: {tight['note']}")
    if cal.details.get("note"):
        lines.append(f"note: {cal.details['note']}")
    if cal.details.get("note_sampling"):
        lines.append(f"note: {cal.details['note_sampling']}")
    if cal.details.get("expensive"):
        lines.append(f"note: {cal.details['expensive']}")
    lines.append(f"({cal.evaluations} evaluations, {cal.seconds:.2f} s)")
    print("\n".join(lines))
    return 0


def _g(v: float | None) -> str:
    """A number with 6 significant digits, ``?`` when unknown."""
    return "?" if v is None else f"{v:.6g}"


def _neighbour(cal: Calibration, tight: dict[str, Any]) -> str:
    """Words for the neighbouring run whose epsilon shows tightness."""
    x = tight["checked"]
    if cal.solved == "noise_multiplier":
        return f"noise {x:.6g} ({(1 - x / cal.noise_multiplier):.0%} less)"
    if cal.solved == "sampling_rate":
        return f"sampling rate {x:.6g} ({(x / cal.sampling_rate - 1):.0%} larger)"
    unit = cal.details.get("multiple_of") or 1
    more = x - cal.steps
    if unit > 1:
        return f"{more // unit} more epoch{'s' if more // unit != 1 else ''} ({x} steps)"
    return f"{more} more step{'s' if more != 1 else ''} ({x} steps)"

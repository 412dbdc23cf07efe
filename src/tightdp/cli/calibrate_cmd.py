"""``tightdp calibrate``: the noise, steps or sampling rate that meets a target (epsilon, delta).

    tightdp calibrate --target-epsilon 3 --delta 1e-5 --sampling-rate 0.01 --steps 1000
    tightdp calibrate --target-epsilon 3 --delta 1e-5 --dataset-size 50000 --batch-size 256 --epochs 100
    tightdp calibrate --solve steps --noise-multiplier 1.1 --target-epsilon 8 --delta 1e-5 --sampling-rate 0.005
    tightdp calibrate --solve sampling-rate --noise-multiplier 1.0 --steps 1000 --target-epsilon 3 --delta 1e-5 --json

Every answer is judged on the certified upper bound, so it never overshoots
(``tightdp.calibration``). Bad input: one line on stderr naming the argument,
exit 2; an unreachable target: one line on stderr, exit 1.
"""

from __future__ import annotations

import json
import sys
import threading

from ..accountants import DEFAULT_ACCOUNTANT

SOLVE = ("noise", "steps", "sampling-rate")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "calibrate", help="noise multiplier / steps / sampling rate for a target (epsilon, delta)",
        description="Solve for the smallest noise multiplier (default), the largest number of steps or the largest "
                    "sampling rate whose certified epsilon is at most the target.")
    p.add_argument("--target-epsilon", type=float, required=True, help="the epsilon budget")
    p.add_argument("--delta", type=float, required=True, help="the delta of the guarantee")
    p.add_argument("--solve", choices=SOLVE, default="noise", help="what to solve for (default: noise)")
    p.add_argument("--sampling-rate", type=float, help="Poisson sampling rate q in (0, 1]")
    p.add_argument("--steps", type=float, help="number of steps (or give --epochs with --dataset-size/--batch-size)")
    p.add_argument("--epochs", type=float, help="number of epochs (with --dataset-size and --batch-size)")
    p.add_argument("--dataset-size", type=float, help="number of training examples")
    p.add_argument("--batch-size", type=float, help="expected batch size (q = batch size / data set size)")
    p.add_argument("--noise-multiplier", type=float, help="the noise multiplier (when solving steps or sampling rate)")
    p.add_argument("--accountant", default=DEFAULT_ACCOUNTANT,
                   help=f"accountant whose upper bound is used (default: {DEFAULT_ACCOUNTANT})")
    p.add_argument("--eps-error", type=float, default=None,
                   help="accountant error budget (default: min(0.01, target/300))")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(run=run)


def _need(args, *names: str) -> None:
    for n in names:
        if getattr(args, n.replace("-", "_")) is None:
            raise ValueError(f"--{n} is required with --solve {args.solve}")


def _forbid(args, *names: str) -> None:
    for n in names:
        if getattr(args, n.replace("-", "_")) is not None:
            raise ValueError(f"--{n} cannot be used with --solve {args.solve}")


def solve(args):
    """Run the calibration the arguments ask for; returns a ``Calibration``."""
    from ..calibration import (calibrate_noise, calibrate_sampling_rate, calibrate_steps, steps_from_epochs)

    common = dict(target_epsilon=args.target_epsilon, delta=args.delta, accountant=args.accountant,
                  eps_error=args.eps_error)
    if args.solve == "noise":
        _forbid(args, "noise-multiplier")
        if args.epochs is not None or args.dataset_size is not None or args.batch_size is not None:
            _forbid(args, "sampling-rate", "steps")
            _need(args, "epochs", "dataset-size", "batch-size")
            return calibrate_noise(epochs=args.epochs, dataset_size=args.dataset_size, batch_size=args.batch_size,
                                   **common)
        _need(args, "sampling-rate", "steps")
        return calibrate_noise(sampling_rate=args.sampling_rate, steps=args.steps, **common)
    _need(args, "noise-multiplier")
    if args.solve == "steps":
        _forbid(args, "steps", "epochs")
        multiple = 1
        q = args.sampling_rate
        if args.dataset_size is not None or args.batch_size is not None:
            _forbid(args, "sampling-rate")
            _need(args, "dataset-size", "batch-size")
            q, multiple = steps_from_epochs(epochs=1, dataset_size=args.dataset_size, batch_size=args.batch_size)
        else:
            _need(args, "sampling-rate")
        return calibrate_steps(noise_multiplier=args.noise_multiplier, sampling_rate=q, multiple_of=multiple,
                               **common)
    _forbid(args, "sampling-rate", "batch-size")
    if args.epochs is not None or args.dataset_size is not None:
        raise ValueError("--solve sampling-rate takes --steps (epochs depend on the rate)")
    _need(args, "steps")
    return calibrate_sampling_rate(noise_multiplier=args.noise_multiplier, steps=args.steps, **common)


class _DelayedSpinner:
    """A rich spinner that appears after ``delay`` seconds, only when stdout is a terminal."""

    def __init__(self, message: str, delay: float = 1.0, stream=None):
        self.message, self.delay = message, delay
        self.stream = sys.stdout if stream is None else stream
        self._timer = None
        self._status = None
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

    def __enter__(self):
        if getattr(self.stream, "isatty", lambda: False)():
            self._timer = threading.Timer(self.delay, self._start)
            self._timer.daemon = True
            self._timer.start()
        return self

    def __exit__(self, *exc) -> None:
        with self._lock:
            self._done = True
            if self._timer is not None:
                self._timer.cancel()
            if self._status is not None:
                self._status.stop()


def run(args) -> int:
    from ..calibration import CalibrationError

    try:
        with _DelayedSpinner(f"calibrating {args.solve} (certified search)"):
            cal = solve(args)
    except CalibrationError as exc:
        print(f"tightdp calibrate: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(cal.to_dict(), indent=2))
        return 0
    b = cal.epsilon
    lines = []
    if cal.solved == "noise_multiplier":
        lines.append(f"noise multiplier: {cal.noise_multiplier:.6g}")
    elif cal.solved == "steps":
        lines.append(f"steps: {cal.steps}")
        if cal.details.get("multiple_of"):
            lines[-1] += f" ({cal.steps // cal.details['multiple_of']} epochs of {cal.details['multiple_of']} steps)"
    else:
        lines.append(f"sampling rate: {cal.sampling_rate:.6g}")
    lines.append(f"run: noise multiplier {cal.noise_multiplier:.6g}, sampling rate {cal.sampling_rate:.6g}, "
                 f"{cal.steps} steps")
    interval = "" if b.lower is None else f" (certified interval [{b.lower:.6g}, {b.upper:.6g}])"
    lines.append(f"epsilon <= {b.upper:.6g} at delta = {cal.delta:g}{interval}, target {cal.target_epsilon:g}, "
                 f"accountant {cal.accountant} ({b.kind})")
    tight = cal.details.get("tightness", {})
    if tight.get("overshoots") and tight.get("epsilon_upper") is not None:
        what = {"noise_multiplier": "1 % less noise", "steps": "one more step" if not cal.details.get("multiple_of")
                else "one more epoch", "sampling_rate": "a 1 % larger rate"}[cal.solved]
        low = tight.get("epsilon_lower")
        if low is not None and low > cal.target_epsilon:
            lines.append(f"tight: {what} gives epsilon >= {low:.6g} (certified lower bound) > target")
        else:
            lines.append(f"tight: {what} gives epsilon <= {tight['epsilon_upper']:.6g} > target")
    elif tight.get("note"):
        lines.append(f"tightness not shown: {tight['note']}")
    if cal.details.get("note"):
        lines.append(f"note: {cal.details['note']}")
    lines.append(f"({cal.evaluations} evaluations, {cal.seconds:.2f} s)")
    print("\n".join(lines))
    return 0

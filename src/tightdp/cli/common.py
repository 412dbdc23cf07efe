"""Options and output shared by the DP-SGD subcommands (``epsilon``, ``delta``, ``compare``)."""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from typing import Any, TypeVar

from .._accuracy import check_accuracy, describe_accuracy
from .._validation import check_choice, check_count, check_positive, check_probability
from ..accountants import ACCOUNTANTS, DEFAULT_ACCOUNTANT, Accountant, create
from ..bounds import Bounds
from ..runs import TrainingRun
from ..sampling import Relation, scheme_class, scheme_names

_T = TypeVar("_T")


def sampling_help() -> str:
    """``--sampling``'s help: the registered schemes (``tightdp.sampling``), those answered by their own
    certified function last."""
    own = scheme_names(step_mechanism=False)
    return (
        f"{', '.join(scheme_names(step_mechanism=True))} (any accountant), {', '.join(own)} (epsilon only, "
        "the default accountant); default poisson. 'balls-and-bins' is refused as ambiguous: say "
        "random-allocation (fresh every epoch) or cyclic-allocation (jax_privacy's balls-in-bins)"
    )


def add_length_options(p: argparse.ArgumentParser) -> None:
    """How much data each step sees and how many steps ran: ``--sampling-rate`` or ``--dataset-size`` with
    ``--batch-size``, and ``--steps`` or ``--epochs`` (one definition for every subcommand)."""
    p.add_argument("--sampling-rate", type=float, help="sampling rate q in (0, 1] (or --dataset-size/--batch-size)")
    p.add_argument("--steps", type=float, help="number of steps (or --epochs)")
    p.add_argument(
        "--epochs",
        type=float,
        help="epochs; steps = ceil(epochs * ceil(dataset size / batch size)), as Opacus counts them",
    )
    p.add_argument("--dataset-size", type=float, help="number of records N")
    p.add_argument("--batch-size", type=float, help="(expected) batch size B; q = B / N")


def add_run_options(p: argparse.ArgumentParser, *, accountant: bool = True) -> None:
    """The description of a DP-SGD run: noise, sampling, steps, relation, accountant."""
    p.add_argument("--noise-multiplier", type=float, required=True, help="noise std / clipping norm (sigma)")
    add_length_options(p)
    p.add_argument("--sampling", default="poisson", help=sampling_help())
    p.add_argument("--max-batch-size", type=float, help="batch cap for --sampling truncated-poisson")
    p.add_argument(
        "--relation", default=None, help="add-remove, remove, add, substitute, zero-out (default: the scheme's own)"
    )
    if accountant:
        p.add_argument(
            "--accountant",
            default=DEFAULT_ACCOUNTANT,
            help=f"{DEFAULT_ACCOUNTANT} (default), prv, fourier, rdp, gdp, edgeworth",
        )
    add_accuracy_options(p)
    p.add_argument("--json", action="store_true", help="print JSON")


def add_accuracy_options(p: argparse.ArgumentParser) -> None:
    """``--rel-error`` and ``--eps-error`` (``tightdp._accuracy``), one definition for every subcommand."""
    p.add_argument(
        "--rel-error",
        type=float,
        default=None,
        help="relative accuracy: interval width at most 2 max(REL x epsilon, 5e-5) (default: relative "
        "1e-3, the default of every tightdp command and of dpsgd_epsilon; the default accountant only)",
    )
    p.add_argument(
        "--eps-error",
        type=float,
        default=None,
        help="absolute accuracy: interval width at most 2 x EPS_ERROR (alone: replaces the relative "
        "default; accountants other than connect-dots take only this one, default 0.01)",
    )


def accuracy_from_args(args: argparse.Namespace) -> tuple[float | None, float | None]:
    """The validated ``(eps_error, rel_error)`` of ``--eps-error`` / ``--rel-error`` (None: not given)."""
    try:
        return check_accuracy(args.eps_error, args.rel_error)
    except ValueError as exc:
        raise ValueError(
            str(exc).replace("eps_error", "--eps-error", 1).replace("rel_error", "--rel-error", 1)
        ) from None


def accuracy_text(accountant: str, eps_error: float | None, rel_error: float | None) -> str:
    """The accuracy line of a human answer."""
    if accountant == DEFAULT_ACCOUNTANT:
        return describe_accuracy(eps_error, rel_error)
    return f"absolute eps_error {eps_error:g}" if eps_error is not None else "the accountant's default eps_error"


def _agree(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-12 * max(abs(a), abs(b))


def run_from_args(args: argparse.Namespace) -> tuple[Any, int, dict[str, Any]]:
    """Validate the run options; return ``(mechanism, steps, parameters)``; ``mechanism`` is ``None`` for a
    scheme answered by its own certified function (``parameters["run"]``, the ``TrainingRun``, answers it;
    ``scheme_epsilon``).

    Options that describe the same thing twice must agree: ``--sampling-rate``
    with ``--dataset-size``/``--batch-size`` (q = B / N), ``--steps`` with
    ``--epochs`` (steps = ceil(epochs * ceil(N / B))); otherwise the run is refused.
    """
    sigma = check_positive("--noise-multiplier", args.noise_multiplier)
    cls = scheme_class(args.sampling, argument="--sampling")
    n = None if args.dataset_size is None else check_count("--dataset-size", args.dataset_size)
    b = None if args.batch_size is None else check_count("--batch-size", args.batch_size)
    if b is not None and n is not None and b > n:
        raise ValueError(f"--batch-size ({b}) must be <= --dataset-size ({n})")
    if args.sampling_rate is not None:
        q = check_probability("--sampling-rate", args.sampling_rate)
        if n is not None and b is not None and not _agree(q, b / n):
            raise ValueError(
                f"--sampling-rate {q:g} conflicts with --batch-size / --dataset-size = {b}/{n} = "
                f"{b / n:.6g}; give one or the other"
            )
    elif n is not None and b is not None:
        q = b / n
    else:
        raise ValueError("--sampling-rate is required (or give --dataset-size and --batch-size)")
    from_epochs = None
    if args.epochs is not None:
        epochs = check_positive("--epochs", args.epochs)
        if n is None or b is None:
            raise ValueError("--epochs needs --dataset-size and --batch-size")
        from_epochs = math.ceil(epochs * math.ceil(n / b))  # batches per epoch, as Opacus and the report count
    if args.steps is not None:
        steps = check_count("--steps", args.steps)
        if from_epochs is not None and steps != from_epochs:
            raise ValueError(
                f"--steps {steps} conflicts with --epochs {args.epochs:g} ({from_epochs} steps of "
                f"batch size {b} over {n} records); give one or the other"
            )
    elif from_epochs is not None:
        steps = from_epochs
    else:
        raise ValueError("--steps is required (or give --epochs with --dataset-size and --batch-size)")
    max_b = None if args.max_batch_size is None else check_count("--max-batch-size", args.max_batch_size)
    if max_b is not None and "max_batch_size" not in cls.options:
        raise ValueError(f"--max-batch-size does not apply to --sampling {cls.name}")
    if cls.per_epoch and n is not None and b is not None:
        q = 1.0 / math.ceil(n / b)  # t = ceil(N / B) batches an epoch, as the epochs are counted
    relation = args.relation
    if relation is not None:
        if not cls.any_accountant:
            raise ValueError(
                f"--relation does not apply to --sampling {cls.name} (its neighbouring relation is "
                "fixed by the scheme's analysis)"
            )
        check_choice("--relation", relation, [r.value for r in Relation])
        if Relation(relation) not in cls.relations:
            raise ValueError(
                f"--relation must be {' or '.join(r.value for r in cls.relations)} for --sampling "
                f"{cls.name}, got {relation!r}"
            )
    scheme = cls.from_options(sampling_rate=q, dataset_size=n, batch_size=b, max_batch_size=max_b)
    run = TrainingRun(noise_multiplier=sigma, sampling=scheme, steps=steps, relation=relation)
    if run.relation is None:  # TrainingRun resolves the scheme's default relation
        raise ValueError(f"--relation: no neighbouring relation for --sampling {cls.name}")
    mech = scheme.step_mechanism(noise_multiplier=sigma, relation=run.relation) if cls.any_accountant else None
    params = {
        "noise_multiplier": sigma,
        "sampling_rate": run.sampling_rate,
        "steps": steps,
        "sampling": cls.name,
        "relation": run.relation.value,
        "dataset_size": n,
        "batch_size": getattr(scheme, "batch_size", b),
        "max_batch_size": max_b,
        "scheme": scheme.describe(),
    }
    return mech, steps, params


def scheme_epsilon(
    params: dict[str, Any], delta: float, eps_error: float | None, rel_error: float | None = None
) -> Bounds:
    """The epsilon of the run ``run_from_args`` described (its scheme's own certified function)."""
    cls = scheme_class(params["sampling"])
    scheme = cls.from_options(
        sampling_rate=params["sampling_rate"],
        dataset_size=params["dataset_size"],
        batch_size=params["batch_size"],
        max_batch_size=params["max_batch_size"],
    )
    run = TrainingRun(noise_multiplier=params["noise_multiplier"], sampling=scheme, steps=params["steps"])
    return run.epsilon(delta=delta, eps_error=eps_error, rel_error=rel_error)


def make_accountant(args: argparse.Namespace) -> Accountant:
    """The ``--accountant`` at the ``--eps-error`` / ``--rel-error`` accuracy."""
    name = check_choice("--accountant", args.accountant, sorted(ACCOUNTANTS))
    eps_error, rel_error = accuracy_from_args(args)
    acc: Accountant = create(name, eps_error=eps_error, rel_error=rel_error)
    return acc


def fmt(v: Any) -> str:
    """A number as the CLI prints it (6 significant digits; None as a dash)."""
    if v is None:
        return "—"
    if isinstance(v, float) and math.isinf(v):
        return "inf"
    return f"{v:.6g}"


def print_result(
    quantity: str,
    bounds: Bounds,
    accountant: str,
    params: dict[str, Any],
    seconds: float,
    as_json: bool,
    extra: dict[str, Any] | None = None,
    *,
    eps_error: float | None = None,
    rel_error: float | None = None,
) -> None:
    """Human table or JSON ``{quantity: {lower, estimate, upper}, accountant, kind, eps_error, rel_error,
    parameters, seconds}``; ``eps_error`` / ``rel_error`` are the accuracy as given (None: the default;
    ``tightdp calibrate`` certifies at the same one)."""
    if as_json:
        d = bounds.to_dict()
        out = {
            quantity: {"lower": d["lower"], "estimate": d["estimate"], "upper": d["upper"]},
            "accountant": accountant,
            "kind": bounds.kind,
            "eps_error": eps_error,
            "rel_error": rel_error,
            "accuracy": accuracy_text(accountant, eps_error, rel_error),
            "parameters": params,
            "seconds": seconds,
        }
        if "details" in d:
            out["details"] = d["details"]
        if extra:
            out.update(extra)
        json.dump(out, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    p = params
    head = (
        f"tightdp · {p['sampling']} sampling · {p['relation']} · accountant {accountant}"
        f" ({'certified bounds' if bounds.kind == 'bound' else 'approximation'})"
    )
    run = (
        f"noise multiplier {fmt(p['noise_multiplier'])} · sampling rate {fmt(p['sampling_rate'])} · steps {p['steps']}"
    )
    given = dict((extra or {}).items())
    print(head)
    print("  " + run + "".join(f" · {k} {fmt(v)}" for k, v in given.items()))
    print(f"  {'':10s}{'lower':>12s}{'estimate':>12s}{'upper':>12s}")
    print(f"  {quantity:10s}{fmt(bounds.lower):>12s}{fmt(bounds.estimate):>12s}{fmt(bounds.upper):>12s}")
    print(f"  accuracy: {accuracy_text(accountant, eps_error, rel_error)}")
    note = bounds.details.get("note") if bounds.details else None
    if note:
        print(f"  note: {note}")
    print(f"  time {seconds:.3f} s")


def timed(fn: Callable[[], _T]) -> tuple[_T, float]:
    """``(fn(), seconds it took)``."""
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0

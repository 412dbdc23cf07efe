"""Options and output shared by the DP-SGD subcommands (``epsilon``, ``delta``, ``compare``)."""

from __future__ import annotations

import json
import math
import sys
import time
from typing import Any

from .._accuracy import check_accuracy, describe_accuracy
from .._validation import check_choice, check_count, check_positive, check_probability
from ..accountants import ACCOUNTANTS, DEFAULT_ACCOUNTANT, create
from ..bounds import Bounds
from ..mechanisms import Gaussian, PoissonSampled, SampledWithoutReplacement, SampledWithReplacement

#: schemes whose answer comes from ``dpsgd_epsilon(sampling=...)`` (epsilon only, the dominance accountant)
SCHEME_SAMPLINGS = ("random-allocation", "balls-and-bins", "shuffle", "truncated-poisson")
SAMPLINGS = ("poisson", "without-replacement", "with-replacement") + SCHEME_SAMPLINGS
RELATIONS = ("add-remove", "remove", "add", "substitute")


def add_length_options(p) -> None:
    """How much data each step sees and how many steps ran: ``--sampling-rate`` or ``--dataset-size`` with
    ``--batch-size``, and ``--steps`` or ``--epochs`` (one definition for every subcommand)."""
    p.add_argument("--sampling-rate", type=float, help="sampling rate q in (0, 1] (or --dataset-size/--batch-size)")
    p.add_argument("--steps", type=float, help="number of steps (or --epochs)")
    p.add_argument("--epochs", type=float,
                   help="epochs; steps = ceil(epochs * ceil(dataset size / batch size)), as Opacus counts them")
    p.add_argument("--dataset-size", type=float, help="number of records N")
    p.add_argument("--batch-size", type=float, help="(expected) batch size B; q = B / N")


def add_run_options(p, *, accountant: bool = True) -> None:
    """The description of a DP-SGD run: noise, sampling, steps, relation, accountant."""
    p.add_argument("--noise-multiplier", type=float, required=True, help="noise std / clipping norm (sigma)")
    add_length_options(p)
    p.add_argument("--sampling", default="poisson",
                   help="poisson (default), without-replacement, with-replacement, random-allocation, "
                        "balls-and-bins, shuffle, truncated-poisson (the last four: epsilon only)")
    p.add_argument("--max-batch-size", type=float, help="batch cap for --sampling truncated-poisson")
    p.add_argument("--relation", default=None,
                   help="add-remove (default for poisson), remove, add, substitute (default otherwise)")
    if accountant:
        p.add_argument("--accountant", default=DEFAULT_ACCOUNTANT,
                       help=f"{DEFAULT_ACCOUNTANT} (default), prv, fourier, rdp, gdp, edgeworth")
    add_accuracy_options(p)
    p.add_argument("--json", action="store_true", help="print JSON")


def add_accuracy_options(p) -> None:
    """``--rel-error`` and ``--eps-error`` (``tightdp._accuracy``), one definition for every subcommand."""
    p.add_argument("--rel-error", type=float, default=None,
                   help="relative accuracy: interval width at most 2 max(REL x epsilon, 5e-5) (default: relative "
                        "1e-3, the default of every tightdp command and of dpsgd_epsilon; the default accountant only)")
    p.add_argument("--eps-error", type=float, default=None,
                   help="absolute accuracy: interval width at most 2 x EPS_ERROR (alone: replaces the relative "
                        "default; accountants other than connect-dots take only this one, default 0.01)")


def accuracy_from_args(args) -> tuple[float | None, float | None]:
    """The validated ``(eps_error, rel_error)`` of ``--eps-error`` / ``--rel-error`` (None: not given)."""
    try:
        return check_accuracy(args.eps_error, args.rel_error)
    except ValueError as exc:
        raise ValueError(str(exc).replace("eps_error", "--eps-error", 1).replace("rel_error", "--rel-error", 1)) \
            from None


def accuracy_text(accountant: str, eps_error: float | None, rel_error: float | None) -> str:
    """The accuracy line of a human answer."""
    if accountant == DEFAULT_ACCOUNTANT:
        return describe_accuracy(eps_error, rel_error)
    return f"absolute eps_error {eps_error:g}" if eps_error is not None else "the accountant's default eps_error"


def _agree(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-12 * max(abs(a), abs(b))


def _rate_as_fraction(q: float) -> tuple[int, int] | None:
    """``(B, N)`` with ``B / N == q`` exactly in floating point (N <= 1e9), or ``None``."""
    from fractions import Fraction

    f = Fraction(q).limit_denominator(10 ** 9)
    if f.numerator >= 1 and f.numerator / f.denominator == q:
        return f.numerator, f.denominator
    return None


def run_from_args(args) -> tuple[Any, int, dict[str, Any]]:
    """Validate the run options; return ``(mechanism, steps, parameters)``.

    Options that describe the same thing twice must agree: ``--sampling-rate``
    with ``--dataset-size``/``--batch-size`` (q = B / N), ``--steps`` with
    ``--epochs`` (steps = ceil(epochs * ceil(N / B))); otherwise the run is refused.
    """
    sigma = check_positive("--noise-multiplier", args.noise_multiplier)
    sampling = check_choice("--sampling", args.sampling, SAMPLINGS)
    n = None if args.dataset_size is None else check_count("--dataset-size", args.dataset_size)
    b = None if args.batch_size is None else check_count("--batch-size", args.batch_size)
    if b is not None and n is not None and b > n:
        raise ValueError(f"--batch-size ({b}) must be <= --dataset-size ({n})")
    if args.sampling_rate is not None:
        q = check_probability("--sampling-rate", args.sampling_rate)
        if n is not None and b is not None and not _agree(q, b / n):
            raise ValueError(f"--sampling-rate {q:g} conflicts with --batch-size / --dataset-size = {b}/{n} = "
                             f"{b / n:.6g}; give one or the other")
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
            raise ValueError(f"--steps {steps} conflicts with --epochs {args.epochs:g} ({from_epochs} steps of "
                             f"batch size {b} over {n} records); give one or the other")
    elif from_epochs is not None:
        steps = from_epochs
    else:
        raise ValueError("--steps is required (or give --epochs with --dataset-size and --batch-size)")
    if sampling in SCHEME_SAMPLINGS:
        return None, steps, _scheme_params(args, sampling, sigma, q, steps, n, b)
    relation = args.relation or ("add-remove" if sampling == "poisson" else "substitute")
    check_choice("--relation", relation, RELATIONS)
    gauss = Gaussian(noise_multiplier=sigma)
    if sampling == "poisson":
        mech = PoissonSampled(mechanism=gauss, sampling_rate=q, relation=relation)
    else:
        if relation != "substitute":
            raise ValueError(f"--relation must be substitute for --sampling {sampling}, got {relation!r}")
        if sampling == "without-replacement" and (n is None or b is None):
            # under the substitute relation the answer depends on q = B / N alone: any exact B / N will do
            frac = _rate_as_fraction(q)
            if frac is None:
                raise ValueError(f"--sampling-rate {q!r} is not a ratio B / N with N <= 1e9; "
                                 "give --dataset-size and --batch-size")
            mech = SampledWithoutReplacement(mechanism=gauss, sample_size=frac[0], dataset_size=frac[1])
        else:
            if n is None:
                raise ValueError(f"--dataset-size is required for --sampling {sampling} "
                                 "(with replacement the answer depends on N, not only on q)")
            if b is None:
                b = max(1, round(q * n))
            cls = SampledWithoutReplacement if sampling == "without-replacement" else SampledWithReplacement
            mech = cls(mechanism=gauss, sample_size=b, dataset_size=n)
        q = mech.sampling_rate
    params = {"noise_multiplier": sigma, "sampling_rate": q, "steps": steps, "sampling": sampling,
              "relation": relation, "dataset_size": n, "batch_size": b}
    return mech, steps, params


def _scheme_params(args, sampling, sigma, q, steps, n, b) -> dict[str, Any]:
    """Parameters of a run under an epoch-based or truncated scheme (answered by ``dpsgd_epsilon``).

    Epoch-based schemes (random allocation, balls and bins, shuffling) run ``t`` steps an epoch:
    ``t = ceil(N / B)`` batches when the data set and batch sizes are given (as the epochs are
    counted), else ``t = 1 / q``, which must then be a whole number."""
    if args.relation is not None:
        raise ValueError(f"--relation does not apply to --sampling {sampling} (its neighbouring relation is "
                         "fixed by the scheme's analysis)")
    max_b = None if args.max_batch_size is None else check_count("--max-batch-size", args.max_batch_size)
    if sampling == "truncated-poisson":
        if n is None or max_b is None:
            raise ValueError("--sampling truncated-poisson needs --dataset-size and --max-batch-size")
    elif max_b is not None:
        raise ValueError(f"--max-batch-size applies to --sampling truncated-poisson only, not {sampling}")
    elif n is not None and b is not None:
        q = 1.0 / math.ceil(n / b)
    relation = "substitute" if sampling == "shuffle" else "add-remove"  # the relation each analysis uses
    return {"noise_multiplier": sigma, "sampling_rate": q, "steps": steps, "sampling": sampling,
            "relation": relation, "dataset_size": n, "batch_size": b, "max_batch_size": max_b}


def scheme_epsilon(params: dict[str, Any], delta: float, eps_error: float | None,
                   rel_error: float | None = None) -> Bounds:
    """``dpsgd_epsilon`` for a run described by ``_scheme_params``."""
    from ..dpsgd import dpsgd_epsilon
    return dpsgd_epsilon(noise_multiplier=params["noise_multiplier"], sampling_rate=params["sampling_rate"],
                         steps=params["steps"], delta=delta, eps_error=eps_error, rel_error=rel_error,
                         sampling=params["sampling"],
                         dataset_size=params["dataset_size"], max_batch_size=params["max_batch_size"])


def make_accountant(args):
    name = check_choice("--accountant", args.accountant, sorted(ACCOUNTANTS))
    eps_error, rel_error = accuracy_from_args(args)
    return create(name, eps_error=eps_error, rel_error=rel_error)


def fmt(v) -> str:
    if v is None:
        return "—"
    if isinstance(v, float) and math.isinf(v):
        return "inf"
    return f"{v:.6g}"


def print_result(quantity: str, bounds: Bounds, accountant: str, params: dict[str, Any], seconds: float,
                 as_json: bool, extra: dict[str, Any] | None = None, *, eps_error: float | None = None,
                 rel_error: float | None = None) -> None:
    """Human table or JSON ``{quantity: {lower, estimate, upper}, accountant, kind, eps_error, rel_error,
    parameters, seconds}``; ``eps_error`` / ``rel_error`` are the accuracy as given (None: the default;
    ``tightdp calibrate`` certifies at the same one)."""
    if as_json:
        d = bounds.to_dict()
        out = {quantity: {"lower": d["lower"], "estimate": d["estimate"], "upper": d["upper"]},
               "accountant": accountant, "kind": bounds.kind, "eps_error": eps_error, "rel_error": rel_error,
               "accuracy": accuracy_text(accountant, eps_error, rel_error), "parameters": params,
               "seconds": seconds}
        if "details" in d:
            out["details"] = d["details"]
        if extra:
            out.update(extra)
        json.dump(out, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    p = params
    head = (f"tightdp · {p['sampling']} sampling · {p['relation']} · accountant {accountant}"
            f" ({'certified bounds' if bounds.kind == 'bound' else 'approximation'})")
    run = (f"noise multiplier {fmt(p['noise_multiplier'])} · sampling rate {fmt(p['sampling_rate'])}"
           f" · steps {p['steps']}")
    given = {k: v for k, v in (extra or {}).items()}
    print(head)
    print("  " + run + "".join(f" · {k} {fmt(v)}" for k, v in given.items()))
    print(f"  {'':10s}{'lower':>12s}{'estimate':>12s}{'upper':>12s}")
    print(f"  {quantity:10s}{fmt(bounds.lower):>12s}{fmt(bounds.estimate):>12s}{fmt(bounds.upper):>12s}")
    print(f"  accuracy: {accuracy_text(accountant, eps_error, rel_error)}")
    note = bounds.details.get("note") if bounds.details else None
    if note:
        print(f"  note: {note}")
    print(f"  time {seconds:.3f} s")


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0

"""Calibration: the noise, number of steps or sampling rate that meets a privacy target.

Three questions, one answer type (``Calibration``):

* ``calibrate_noise``: the smallest noise multiplier sigma with
  ``epsilon(sigma) <= target`` for a given sampling rate and number of steps
  (or epochs, data set size and batch size);
* ``calibrate_steps``: the largest number of steps within the budget;
* ``calibrate_sampling_rate``: the largest sampling rate within the budget.

Soundness: feasibility is always judged on the **certified upper bound** of
epsilon (``Bounds.upper`` of ``tightdp.dpsgd_epsilon``: by default the
connect-the-dots dominating pair, or the PRV accountant's Thm 5.5 of Gopi et
al. 2021, paper 003, with ``accountant="prv"``), and the value returned is one at which
that bound was evaluated and found ``<= target``. A point whose bound cannot be
certified (``PrecisionError``, an infinite or missing upper bound) counts as
infeasible, so the search errs towards more noise / fewer steps / a smaller rate.

Tightness: the search brackets the boundary (exponential expansion), then
narrows the bracket by safeguarded interpolation on ``log epsilon`` against the
log of the searched variable, falling back to bisection on the log scale (the
bound need not be exactly monotone: discretisation moves with the parameters).
Finally it shows tightness: a certified *lower* bound above the target at
``0.99 sigma`` / ``1.01 q`` / ``steps + 1`` (else at a 2 % or 5 % move); if
such a neighbour is itself feasible (a non-monotone wobble of the bound), the
search continues from there. ``Calibration.details["tightness"]`` records the
neighbour, its interval and whether it was proved to exceed the target.

Accuracy: every answer is certified at one accuracy (``eps_error`` / ``rel_error``,
``tightdp._accuracy``; by default the default of ``dpsgd_epsilon`` and of ``tightdp
epsilon``: relative 1e-3), recorded in ``Calibration.eps_error`` and ``rel_error``:
re-evaluating the returned run with ``dpsgd_epsilon`` at that accuracy (with the
default one: the default call) gives an upper bound at or below the target.
Accountants without a relative mode are certified at the absolute accuracy the
relative one asks for at the target, ``max(5e-5, 1e-3 target)``. The returned noise is rounded up (the
sampling rate down) to ``DIGITS`` significant digits before that evaluation, so
the printed value is the certified one. A coarser pass decides points far from
the boundary; a finer one (``min(target / 300, eps_error / 4)``) is used only to prove
tightness.

One calibrator: ``calibrate(run=TrainingRun(...), parameter=..., target_epsilon=..., delta=...)`` solves for
any numeric field of a run (``PARAMETERS``: the noise, the steps or whole epochs, a scheme's free
``sampling_rate``), as dp_accounting's ``calibrate_dp_mechanism`` does for events; ``calibrate_noise``,
``calibrate_steps`` and ``calibrate_sampling_rate`` build the run from their keywords (``sampling=`` a name
of ``tightdp.sampling`` or a scheme object) and call it. The search evaluates ``TrainingRun.epsilon``, so
the answer is certified for the scheme that runs. Epoch-based schemes (``per_epoch``: random allocation,
shuffling, ...) run ``t = 1/sampling_rate`` steps an epoch (from ``dataset_size`` and ``batch_size``,
``t = ceil(dataset_size / batch_size)``) and the steps search counts whole epochs; their sampling rate is
not a free variable. For a scheme whose certified upper bound is the one without amplification
(``amplifies = False``: shuffling) the calibrated noise is what that bound needs; its certified lower bound
is usually far below the target and the tightness record says so (``calibration_note``).

Cost: targets above ``MAX_TARGET_EPSILON`` are refused at once; a target that no
point of the searched range meets is refused after evaluating the range's end;
once a certified evaluation takes seconds, points the coarse pass cannot decide
count as infeasible (safe) instead of being evaluated again.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._accuracy import absolute_error_at, check_accuracy, resolve_accuracy
from ._calibration_search import (
    _TIGHTNESS_STEPS,
    DIGITS,
    CalibrationError,
    _clt_guess,
    _Evaluator,
    _finish,
    _prove_exceeds,
    _round_sig,
    _search,
    _tighten,
)
from ._validation import check_choice, check_count, check_delta, check_positive, check_probability, check_real
from .accountants import DEFAULT_ACCOUNTANT
from .bounds import Bounds
from .runs import TrainingRun
from .sampling import Poisson, SamplingScheme, parse_sampling

__all__ = [
    "Calibration",
    "calibrate",
    "calibrate_noise",
    "calibrate_steps",
    "calibrate_sampling_rate",
    "steps_from_epochs",
    "CalibrationError",
    "MAX_TARGET_EPSILON",
    "PARAMETERS",
]

#: ``fn(noise_multiplier, sampling_rate, steps, delta) -> Bounds`` (epsilon); ``upper`` is what counts.
EpsilonFunction = Callable[[float, float, int, float], Bounds]

#: what ``calibrate`` can solve for: the run's noise, its length (``steps``, or ``epochs`` of an epoch-based
#: scheme: whole epochs), and a scheme's ``free_fields`` (``sampling_rate``)
PARAMETERS = ("noise_multiplier", "steps", "epochs", "sampling_rate")

#: Relative width (in log) the bracket is narrowed to before the tightness check.
_DEFAULT_RTOL = 1e-3
#: The tightness promise: 1 % towards the infeasible side overshoots.
_TIGHTNESS = 0.01

_SIGMA_MIN, _SIGMA_MAX = 1e-3, 1e6
_RATE_MIN = 1e-9
_STEPS_MAX = 10**9


@dataclass(frozen=True)
class Calibration:
    """The solution of a calibration question.

    ``noise_multiplier``, ``sampling_rate`` and ``steps`` describe the
    calibrated run (one of them is the solved variable ``solved``);
    ``epsilon`` is the accountant's ``Bounds`` at that point, with
    ``epsilon.upper <= target_epsilon``.
    """

    solved: str
    noise_multiplier: float
    sampling_rate: float
    steps: int
    delta: float
    target_epsilon: float
    epsilon: Bounds
    accountant: str
    evaluations: int
    seconds: float
    details: Mapping[str, Any] = field(default_factory=dict)
    #: the accuracy (``eps_error``, ``rel_error``; ``tightdp._accuracy``) the answer was certified at:
    #: re-evaluating the returned run with ``dpsgd_epsilon(..., eps_error=eps_error, rel_error=rel_error)``
    #: (the default unless one was asked for) gives ``upper <= target``; None for a caller's ``epsilon_fn``
    eps_error: float | None = None
    rel_error: float | None = None
    #: the sampling scheme the run was calibrated for (its registry name, ``tightdp.sampling``)
    sampling: str = "poisson"
    #: the calibrated run (``tightdp.runs.TrainingRun``)
    run: TrainingRun | None = None

    @property
    def value(self) -> float | int:
        """The solved variable's value."""
        return getattr(self, self.solved)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``{"noise_multiplier": ..., "epsilon": {...}, ...}``."""
        return {
            "solved": self.solved,
            "noise_multiplier": self.noise_multiplier,
            "sampling_rate": self.sampling_rate,
            "steps": self.steps,
            "sampling": self.sampling,
            "delta": self.delta,
            "target_epsilon": self.target_epsilon,
            "epsilon": self.epsilon.to_dict(),
            "accountant": self.accountant,
            "eps_error": self.eps_error,
            "rel_error": self.rel_error,
            "evaluations": self.evaluations,
            "seconds": self.seconds,
            "details": dict(self.details),
        }


# --------------------------------------------------------------------------- helpers
def steps_from_epochs(*, epochs, dataset_size, batch_size) -> tuple[float, int]:
    """``(sampling_rate, steps)`` for ``epochs`` passes with expected batch size ``batch_size``.

    ``sampling_rate = batch_size / dataset_size`` (Poisson sampling, as in
    Opacus) and ``steps = epochs * ceil(dataset_size / batch_size)``: rounding
    the batches per epoch up counts at least as many steps as any data loader
    runs, which can only over-state epsilon.
    """
    epochs = check_count("epochs", epochs)
    dataset_size = check_count("dataset_size", dataset_size)
    batch_size = check_count("batch_size", batch_size)
    if batch_size > dataset_size:
        raise ValueError(f"batch_size ({batch_size}) must be <= dataset_size ({dataset_size})")
    return batch_size / dataset_size, epochs * math.ceil(dataset_size / batch_size)


#: Targets above this are refused at once: an epsilon of hundreds carries no meaningful guarantee, and
#: certifying it needs grids of millions of points per evaluation (minutes and gigabytes each).
MAX_TARGET_EPSILON = 100.0


def _tight_error(target: float, check: float) -> float | None:
    """A finer accuracy used only to prove tightness (a certified lower bound above the target)."""
    e = max(min(target / 300.0, check / 4.0), 1e-5)
    return e if e < check * 0.99 else None


#: Coarse evaluations (bracketing) use this many times the fine error budget.
_COARSE_FACTOR = 8.0


def _scheme_of(sampling, dataset_size, max_batch_size, accountant, epsilon_fn, **options) -> SamplingScheme:
    """The validated sampling scheme of a calibration (parsed by the registry of ``tightdp.sampling``)."""
    scheme = parse_sampling(sampling, dataset_size=dataset_size, max_batch_size=max_batch_size, **options)
    if max_batch_size is not None and "max_batch_size" not in type(scheme).options:
        raise ValueError(f"max_batch_size does not apply to sampling={scheme.name!r}")
    _check_scheme(scheme, accountant, epsilon_fn)
    return scheme


def _check_scheme(scheme: SamplingScheme, accountant, epsilon_fn) -> None:
    if isinstance(scheme, Poisson):
        return
    if epsilon_fn is not None:
        raise ValueError(
            f"epsilon_fn replaces the accountant and the sampling scheme: give sampling="
            f"{scheme.name!r} through it, not both"
        )
    if not scheme.any_accountant and accountant != DEFAULT_ACCOUNTANT:
        raise ValueError(
            f"accountant must be {DEFAULT_ACCOUNTANT!r} for sampling={scheme.name!r} (its bounds come "
            f"from dominance pairs only), got {accountant!r}"
        )


def _scheme_details(scheme: SamplingScheme) -> dict[str, Any]:
    out: dict[str, Any] = {"sampling": scheme.name, "scheme": scheme.describe()}
    if scheme.calibration_note:
        out["note_sampling"] = scheme.calibration_note
    return out


def _make_epsilon_fns(accountant: str, eps_error: float | None, rel_error: float | None, target: float):
    """``(check, coarse, check_error, tight, accuracy)``: functions of ``(run, delta)``,
    the half-width ``check`` certifies near the target and the ``(eps_error, rel_error)`` it runs at.

    ``check`` is the accountant at the accuracy the answer is certified at (the
    default accountant: as asked, by default relative; the others, which take an
    absolute ``eps_error`` only: the absolute width the request asks for at the
    target); ``coarse`` the same accountant with a wider (still certified)
    interval, used to decide points far from the boundary cheaply; ``tight`` a
    finer one used only to prove tightness (``None`` when not finer than ``check``).
    """
    eps_error, rel_error = check_accuracy(eps_error, rel_error)
    err = absolute_error_at(target, eps_error, rel_error)
    if accountant == DEFAULT_ACCOUNTANT:
        accuracy = resolve_accuracy(eps_error, rel_error)
    else:
        accuracy = (err, None)

    def make(e, r=None):
        def fn(run: TrainingRun, delta: float) -> Bounds:
            return run.epsilon(delta=delta, accountant=accountant, eps_error=e, rel_error=r)

        return fn

    tight_e = _tight_error(target, err)
    tight = None if tight_e is None else make(tight_e)
    check = make(*accuracy)
    if accountant not in ("prv", "connect-dots"):  # only the PLD accountants have a cheaper coarse pass
        return check, None, err, tight if accountant == "fourier" else None, accuracy
    return check, make(min(_COARSE_FACTOR * err, 0.2)), err, tight, accuracy


def _result(solved: str, ev: _Evaluator, x, *, run, delta, target, accountant, t0, details) -> Calibration:
    up, b = ev.verify(x)
    if b is None or not up <= target:  # the search only ever returns verified feasible points
        raise RuntimeError(f"internal error: calibration ended on an infeasible point {x!r}")
    details = dict(details)
    if ev.coarse is not None:
        details["fine_evaluations"] = ev.calls
        details["coarse_evaluations"] = ev.coarse_calls
    if ev.expensive:
        details["expensive"] = (
            "certified evaluations at this accuracy take seconds each; points the coarse "
            "pass could not decide were counted as infeasible (safe, possibly less tight)"
        )
    if ev.failures:
        details["uncertified_points"] = ev.failures[:10]
    return Calibration(
        solved=solved,
        noise_multiplier=float(run.noise_multiplier),
        sampling_rate=float(run.sampling_rate),
        steps=int(run.steps),
        sampling=run.sampling.name,
        run=run,
        delta=delta,
        target_epsilon=target,
        epsilon=b,
        accountant=accountant,
        evaluations=ev.calls + ev.coarse_calls,
        seconds=time.perf_counter() - t0,
        details=details,
        eps_error=None if ev.accuracy is None else ev.accuracy[0],
        rel_error=None if ev.accuracy is None else ev.accuracy[1],
    )


def _common(target_epsilon, delta, accountant, epsilon_fn, eps_error, rel_error=None):
    target = check_real("target_epsilon", target_epsilon, low=0.0)
    if target > MAX_TARGET_EPSILON:
        raise ValueError(
            f"target_epsilon must be <= {MAX_TARGET_EPSILON:g}, got {target_epsilon!r} (an epsilon "
            "that large promises no meaningful privacy, and certifying it needs grids of millions "
            "of points per evaluation)"
        )
    delta = check_delta("delta", delta)
    if epsilon_fn is None:
        from .accountants import ACCOUNTANTS

        if not isinstance(accountant, str):
            raise ValueError(f"accountant must be a name, got {accountant!r}")
        if ACCOUNTANTS:
            check_choice("accountant", accountant, sorted(ACCOUNTANTS))
        fns = _make_epsilon_fns(accountant, eps_error, rel_error, target)
        name = accountant
    else:
        if not callable(epsilon_fn):
            raise ValueError(f"epsilon_fn must be callable, got {epsilon_fn!r}")

        def fn(run: TrainingRun, d: float) -> Bounds:
            return epsilon_fn(run.noise_multiplier, run.sampling_rate, run.steps, d)

        fns, name = (fn, None, 0.0, None, None), getattr(epsilon_fn, "__name__", "custom")
    return target, delta, fns, name


# --------------------------------------------------------------------------- search helpers
# --------------------------------------------------------------------------- public API
def calibrate(
    *,
    run: TrainingRun,
    parameter: str,
    target_epsilon,
    delta,
    accountant: str = DEFAULT_ACCOUNTANT,
    eps_error: float | None = None,
    rel_error: float | None = None,
    rtol: float = _DEFAULT_RTOL,
    max_steps: int = _STEPS_MAX,
    multiple_of: int = 1,
    epsilon_fn: EpsilonFunction | None = None,
) -> Calibration:
    """The value of one numeric field of ``run`` at which its certified epsilon meets ``target_epsilon``.

    The one calibrator over a run description (like dp_accounting's ``calibrate_dp_mechanism``): ``run``'s
    value of ``parameter`` is ignored (a placeholder), every other field is kept.

    Parameters
    ----------
    run : TrainingRun
        The run (``tightdp.runs.TrainingRun``); its scheme says how it is accounted.
    parameter : str
        One of ``PARAMETERS``: ``"noise_multiplier"`` (the smallest noise), ``"steps"`` (the largest number of
        steps; whole epochs for the epoch-based schemes), ``"epochs"`` (the same, counted in epochs of an
        epoch-based scheme) or a field of the scheme's ``free_fields`` (``"sampling_rate"``: the largest rate).
    target_epsilon, delta : float
    accountant, eps_error, rel_error
        As for ``dpsgd_epsilon``; the answer is certified at that accuracy.
    rtol : float
        Relative tolerance of the continuous searches (noise, rate).
    max_steps, multiple_of : int
        The steps search: at most ``max_steps``, over multiples of ``multiple_of``.
    epsilon_fn : callable, optional
        ``epsilon_fn(sigma, q, steps, delta) -> Bounds`` replaces the accountant (Poisson runs only).

    Returns
    -------
    Calibration
        ``Calibration.run`` is the calibrated run; ``epsilon.upper <= target_epsilon``.

    Raises
    ------
    ValueError
        Bad input, naming the argument (a ``parameter`` the run's scheme cannot vary among them).
    CalibrationError
        No value in the searched range meets the target.
    """
    if not isinstance(run, TrainingRun):
        raise ValueError(f"run must be a tightdp.TrainingRun, got {run!r}")
    if not isinstance(parameter, str) or parameter not in _SOLVERS:
        raise ValueError(f"parameter must be one of {', '.join(PARAMETERS)}, got {parameter!r}")
    t0 = time.perf_counter()
    _check_scheme(run.sampling, accountant, epsilon_fn)
    return _SOLVERS[parameter](
        run,
        target_epsilon=target_epsilon,
        delta=delta,
        accountant=accountant,
        eps_error=eps_error,
        rel_error=rel_error,
        rtol=rtol,
        max_steps=max_steps,
        multiple_of=multiple_of,
        epsilon_fn=epsilon_fn,
        t0=t0,
    )


def calibrate_noise(
    *,
    target_epsilon,
    delta,
    sampling_rate=None,
    steps=None,
    epochs=None,
    dataset_size=None,
    batch_size=None,
    accountant: str = DEFAULT_ACCOUNTANT,
    eps_error: float | None = None,
    rel_error: float | None = None,
    rtol: float = _DEFAULT_RTOL,
    epsilon_fn: EpsilonFunction | None = None,
    sampling: str | SamplingScheme | None = None,
    max_batch_size: int | None = None,
) -> Calibration:
    """The smallest noise multiplier whose certified epsilon is at most ``target_epsilon``:
    ``calibrate(run=..., parameter="noise_multiplier")`` for the run the keywords describe.

    Give ``sampling_rate`` and ``steps``, or ``epochs``, ``dataset_size`` and
    ``batch_size`` (see ``steps_from_epochs``). The answer is certified at the
    accuracy ``eps_error`` / ``rel_error`` (default: the default of
    ``dpsgd_epsilon``): ``dpsgd_epsilon(noise_multiplier=cal.noise_multiplier,
    ..., eps_error=cal.eps_error, rel_error=cal.rel_error).upper <= target_epsilon``. The noise is
    rounded up to ``DIGITS`` significant digits (more noise: the safe side) and
    the rounded value is the one evaluated. ``epsilon_fn(sigma, q, steps,
    delta) -> Bounds`` replaces the accountant (its ``upper`` is used).
    ``sampling`` (a name of ``tightdp.sampling`` or a scheme object) is the batch sampling that runs: for
    the epoch-based schemes ``sampling_rate`` is ``1/t`` and ``steps`` whole epochs (with
    ``epochs``/``dataset_size``/``batch_size``, ``t = ceil(N / B)``); ``truncated-poisson`` needs
    ``dataset_size`` and ``max_batch_size``.
    Raises ``CalibrationError`` when no sigma in [1e-3, 1e6] meets the target.

    >>> cal = calibrate_noise(target_epsilon=3.0, delta=1e-5, sampling_rate=0.01, steps=1000)  # doctest: +SKIP
    >>> cal.noise_multiplier, cal.epsilon.upper <= 3.0  # doctest: +SKIP
    """
    cls = type(sampling) if isinstance(sampling, SamplingScheme) else None
    if cls is None:
        from .sampling import scheme_class

        cls = scheme_class(sampling)
    q, k = _rate_and_steps(sampling_rate, steps, epochs, dataset_size, batch_size, cls)
    scheme = _scheme_of(
        sampling, dataset_size, max_batch_size, accountant, epsilon_fn, sampling_rate=q, batch_size=batch_size
    )
    run = TrainingRun(noise_multiplier=1.0, sampling=scheme, steps=k)
    return calibrate(
        run=run,
        parameter="noise_multiplier",
        target_epsilon=target_epsilon,
        delta=delta,
        accountant=accountant,
        eps_error=eps_error,
        rel_error=rel_error,
        rtol=rtol,
        epsilon_fn=epsilon_fn,
    )


def _solve_noise(
    run: TrainingRun, *, target_epsilon, delta, accountant, eps_error, rel_error, rtol, epsilon_fn, t0, **_
) -> Calibration:
    target, delta, fns, name = _common(target_epsilon, delta, accountant, epsilon_fn, eps_error, rel_error)
    rtol = check_real("rtol", rtol, low=0.0, high=_TIGHTNESS)
    scheme, q, k = run.sampling, run.sampling_rate, run.steps
    ev = _Evaluator(fns[0], target, lambda s: (run.replace(noise_multiplier=s), delta), fns[1], fns[2], fns[3], fns[4])
    to_x = lambda u: _round_sig(math.exp(u), DIGITS, up=True)
    guess = _clt_guess(target=target, delta=delta, q=q, k=k)
    if not scheme.amplifies:  # its certified bound is sqrt(epochs)/sigma-GDP: start there
        guess = _clt_guess(target=target, delta=delta, q=1.0, k=max(1, round(k * q)))
    u0 = math.log(guess) if guess and math.isfinite(guess) and guess > 0 else 0.0
    bad, good = _search(ev, to_x, u0, +1.0, math.log(_SIGMA_MIN), math.log(_SIGMA_MAX), math.log1p(rtol))
    safer = lambda s, i: _round_sig(s * (1 + rtol * 2**i), DIGITS, up=True)
    if bad is None:
        sigma = _finish(ev, to_x(good), safer)
        return _result(
            "noise_multiplier",
            ev,
            sigma,
            run=run.replace(noise_multiplier=sigma),
            delta=delta,
            target=target,
            accountant=name,
            t0=t0,
            details={
                **_scheme_details(scheme),
                "note": f"the target is met by every searched noise multiplier down to "
                f"{_SIGMA_MIN:g}; smaller values were not searched",
            },
        )
    if good is None:
        raise CalibrationError(
            f"no noise multiplier up to {_SIGMA_MAX:g} meets target_epsilon={target:g} at delta={delta:g} "
            f"(sampling_rate={q:g}, steps={k}); the certified bound stays above the target"
        )
    sigma = _finish(ev, to_x(good), safer)
    sigma, tight = _tighten(ev, to_x, math.log(sigma), -1.0, rtol, safer=safer)
    return _result(
        "noise_multiplier",
        ev,
        sigma,
        run=run.replace(noise_multiplier=sigma),
        delta=delta,
        target=target,
        accountant=name,
        t0=t0,
        details={**_scheme_details(scheme), "tightness": tight},
    )


def calibrate_steps(
    *,
    target_epsilon,
    delta,
    noise_multiplier,
    sampling_rate,
    accountant: str = DEFAULT_ACCOUNTANT,
    eps_error: float | None = None,
    rel_error: float | None = None,
    max_steps: int = _STEPS_MAX,
    multiple_of: int = 1,
    epsilon_fn: EpsilonFunction | None = None,
    sampling: str | SamplingScheme | None = None,
    dataset_size: int | None = None,
    max_batch_size: int | None = None,
) -> Calibration:
    """The largest number of steps whose certified epsilon is at most ``target_epsilon``:
    ``calibrate(run=..., parameter="steps")`` for the run the keywords describe.

    Over the multiples of ``multiple_of`` (1: every integer; the steps per
    epoch: whole epochs), certified at ``eps_error`` / ``rel_error`` (default: that
    of ``dpsgd_epsilon``). Exact (``steps + multiple_of`` does not meet the
    target) up to 10,000 units; beyond, to a relative 1e-4 (the bound cannot
    resolve single steps there). Tightness is shown by a certified lower
    bound above the target at ``steps + multiple_of`` or 1 %, 2 %, 5 % more
    steps. Raises ``CalibrationError`` when even ``multiple_of`` steps exceed the target.
    ``sampling`` as for ``calibrate_noise``; the epoch-based schemes search whole epochs of
    ``t = 1 / sampling_rate`` steps (``multiple_of`` is then made a multiple of ``t``).
    """
    check_positive("noise_multiplier", noise_multiplier)
    scheme = _scheme_of(
        sampling,
        dataset_size,
        max_batch_size,
        accountant,
        epsilon_fn,
        sampling_rate=check_probability("sampling_rate", sampling_rate),
    )
    run = TrainingRun(noise_multiplier=noise_multiplier, sampling=scheme, steps=scheme.epoch_length() or 1)
    return calibrate(
        run=run,
        parameter="steps",
        target_epsilon=target_epsilon,
        delta=delta,
        accountant=accountant,
        eps_error=eps_error,
        rel_error=rel_error,
        max_steps=max_steps,
        multiple_of=multiple_of,
        epsilon_fn=epsilon_fn,
    )


def _solve_steps(
    run: TrainingRun,
    *,
    target_epsilon,
    delta,
    accountant,
    eps_error,
    rel_error,
    max_steps,
    multiple_of,
    epsilon_fn,
    t0,
    **_,
) -> Calibration:
    target, delta, fns, name = _common(target_epsilon, delta, accountant, epsilon_fn, eps_error, rel_error)
    scheme, sigma, q = run.sampling, run.noise_multiplier, run.sampling_rate
    max_steps = check_count("max_steps", max_steps)
    unit = check_count("multiple_of", multiple_of)
    if scheme.per_epoch:
        unit = math.lcm(unit, scheme.epoch_length())
    max_units = max_steps // unit
    if max_units < 1:
        raise ValueError(f"max_steps ({max_steps}) must be >= multiple_of ({unit})")
    ev = _Evaluator(fns[0], target, lambda n: (run.replace(steps=n * unit), delta), fns[1], fns[2], fns[3], fns[4])
    if not ev.feasible(1) or ev.verify(1)[0] > target:
        raise CalibrationError(
            f"{unit} step(s) already exceed target_epsilon={target:g} at delta={delta:g} "
            f"(noise_multiplier={sigma:g}, sampling_rate={q:g}); certified epsilon <= {ev.verify(1)[0]:.6g}"
        )
    to_x = lambda u: max(1, int(math.floor(math.exp(u) * (1 + 1e-12))))
    guess = _clt_guess(target=target, delta=delta, q=q, sigma=sigma)
    if not scheme.amplifies and guess:  # sqrt(epochs)/sigma-GDP: (sigma mu)^2 epochs of 1/q steps
        guess = _clt_guess(target=target, delta=delta, q=1.0, sigma=sigma) / q
    u0 = math.log(min(max(guess / unit, 1.0), max_units)) if guess and math.isfinite(guess) else 0.0
    bad_u, good_u = _search(ev, to_x, u0, -1.0, 0.0, math.log(max_units), math.log1p(1e-4))
    safer = lambda n, i: max(1, n - max(1, int(n * 1e-4 * 2**i)))
    if bad_u is None:
        good = to_x(good_u)
        if good < max_units and ev.feasible(max_units):
            good = max_units
        if good == max_units and ev.verify(good)[0] <= target:
            return _result(
                "steps",
                ev,
                good,
                run=run.replace(steps=good * unit),
                delta=delta,
                target=target,
                accountant=name,
                t0=t0,
                details={
                    **_scheme_details(scheme),
                    "note": f"the target is met up to max_steps={max_steps}; more were not searched",
                },
            )
        bad_u = math.log(max_units)
    if good_u is None:  # cannot happen: one unit is feasible (checked above)
        good_u = 0.0
    good, bad = to_x(good_u), to_x(bad_u)
    resolution = lambda g: max(1, int(g * 1e-4)) if g > 10_000 else 1
    # finish on the integers (the log-scale loop may stop when rounding merges points)
    while bad - good > resolution(good):
        mid = (good + bad) // 2
        if ev.feasible(mid):
            good = mid
        else:
            bad = mid
    good = _finish(ev, good, safer)
    details: dict[str, Any] = _scheme_details(scheme)
    if unit > 1:
        details["multiple_of"] = unit
    tight = None
    for probe in dict.fromkeys([good + 1] + [max(good + 1, int(math.ceil(good * (1 + f)))) for f in _TIGHTNESS_STEPS]):
        if probe > max_units:
            break
        proved, up, b = _prove_exceeds(ev, probe)
        tight = {
            "checked": probe * unit,
            "epsilon_upper": up if math.isfinite(up) else None,
            "epsilon_lower": None if b is None else b.lower,
            "overshoots": proved,
        }
        if proved:
            break
        tight["note"] = (
            "no certified lower bound above the target at this neighbour (a smaller eps_error can prove more)"
        )
        if proved is None:
            break
    details["tightness"] = tight or {"checked": None, "note": "max_steps reached"}
    return _result(
        "steps",
        ev,
        good,
        run=run.replace(steps=good * unit),
        delta=delta,
        target=target,
        accountant=name,
        t0=t0,
        details=details,
    )


def _solve_epochs(run: TrainingRun, **kw) -> Calibration:
    if not run.sampling.per_epoch:
        raise ValueError(
            f"parameter 'epochs' needs an epoch-based scheme (sampling={run.sampling.name!r} has no "
            "epochs of its own): calibrate 'steps'"
        )
    cal = _solve_steps(run, **kw)
    return dataclasses.replace(cal, run=cal.run.replace(epochs=cal.steps // run.sampling.epoch_length()))


def calibrate_sampling_rate(
    *,
    target_epsilon,
    delta,
    noise_multiplier,
    steps,
    accountant: str = DEFAULT_ACCOUNTANT,
    eps_error: float | None = None,
    rel_error: float | None = None,
    rtol: float = _DEFAULT_RTOL,
    epsilon_fn: EpsilonFunction | None = None,
    sampling: str | SamplingScheme | None = None,
    dataset_size: int | None = None,
    max_batch_size: int | None = None,
) -> Calibration:
    """The largest sampling rate in (0, 1] whose certified epsilon is at most ``target_epsilon``:
    ``calibrate(run=..., parameter="sampling_rate")`` for the run the keywords describe.

    Certified at ``eps_error`` / ``rel_error`` (default: that of ``dpsgd_epsilon``); the rate is
    rounded down to ``DIGITS`` significant digits. Returns ``1.0`` when full
    batches already meet the target; otherwise tightness is shown by a
    certified lower bound above the target at a 1 % (else 2 %, 5 %) larger
    rate. Raises ``CalibrationError`` at once when even the smallest searched
    rate (1e-9) misses the target. ``sampling``: a scheme whose ``free_fields`` include the rate
    (``poisson``, ``truncated-poisson`` with ``dataset_size`` and ``max_batch_size``); the epoch-based
    schemes are refused (their rate is ``1/t`` with ``steps`` whole epochs, not a free variable:
    calibrate the noise or the epochs).
    """
    from .sampling import scheme_class

    cls = type(sampling) if isinstance(sampling, SamplingScheme) else scheme_class(sampling)
    _rate_is_free(cls)
    scheme = _scheme_of(sampling, dataset_size, max_batch_size, accountant, epsilon_fn, sampling_rate=1.0)
    check_positive("noise_multiplier", noise_multiplier)
    run = TrainingRun(noise_multiplier=noise_multiplier, sampling=scheme, steps=check_count("steps", steps))
    return calibrate(
        run=run,
        parameter="sampling_rate",
        target_epsilon=target_epsilon,
        delta=delta,
        accountant=accountant,
        eps_error=eps_error,
        rel_error=rel_error,
        rtol=rtol,
        epsilon_fn=epsilon_fn,
    )


def _rate_is_free(cls) -> None:
    if "sampling_rate" in cls.free_fields:
        return
    if cls.per_epoch:
        raise ValueError(
            f"sampling={cls.name!r} runs whole epochs of 1/sampling_rate steps, so its sampling rate "
            "cannot be calibrated at a fixed number of steps: calibrate the noise (calibrate_noise) or "
            "the number of epochs (calibrate_steps) instead"
        )
    raise ValueError(
        f"the sampling rate of sampling={cls.name!r} is not a free variable (it follows from "
        f"{', '.join(f.name for f in dataclasses.fields(cls))}): calibrate the noise or the steps"
    )


def _solve_rate(
    run: TrainingRun, *, target_epsilon, delta, accountant, eps_error, rel_error, rtol, epsilon_fn, t0, **_
) -> Calibration:
    _rate_is_free(type(run.sampling))
    target, delta, fns, name = _common(target_epsilon, delta, accountant, epsilon_fn, eps_error, rel_error)
    scheme, sigma, k = run.sampling, run.noise_multiplier, run.steps
    rtol = check_real("rtol", rtol, low=0.0, high=_TIGHTNESS)
    at = lambda q: run.replace(sampling_rate=q)
    ev = _Evaluator(fns[0], target, lambda q: (at(q), delta), fns[1], fns[2], fns[3], fns[4])
    to_x = lambda u: min(1.0, _round_sig(math.exp(u), DIGITS, up=False))
    safer = lambda q, i: _round_sig(q / (1 + rtol * 2**i), DIGITS, up=False)
    if ev.feasible(1.0) and ev.verify(1.0)[0] <= target:
        return _result(
            "sampling_rate",
            ev,
            1.0,
            run=at(1.0),
            delta=delta,
            target=target,
            accountant=name,
            t0=t0,
            details={**_scheme_details(scheme), "note": "full batches (sampling_rate = 1) meet the target"},
        )
    if not ev.feasible(_RATE_MIN):  # refuse at once: even the smallest searched rate misses the target
        raise CalibrationError(
            f"no sampling rate down to {_RATE_MIN:g} meets target_epsilon={target:g} at delta={delta:g} "
            f"(noise_multiplier={sigma:g}, steps={k}); certified epsilon at that rate <= {ev(_RATE_MIN)[0]:.6g}"
        )
    guess = _clt_guess(target=target, delta=delta, k=k, sigma=sigma)
    u0 = math.log(min(guess, 1.0)) if guess and math.isfinite(guess) and guess > 0 else math.log(0.01)
    _bad, good = _search(ev, to_x, u0, -1.0, math.log(_RATE_MIN), 0.0, math.log1p(rtol))
    if good is None:
        raise CalibrationError(
            f"no sampling rate down to {_RATE_MIN:g} meets target_epsilon={target:g} at delta={delta:g} "
            f"(noise_multiplier={sigma:g}, steps={k})"
        )
    q = _finish(ev, to_x(good), safer)
    q, tight = _tighten(ev, to_x, math.log(q), +1.0, rtol, safer=safer)
    return _result(
        "sampling_rate",
        ev,
        q,
        run=at(q),
        delta=delta,
        target=target,
        accountant=name,
        t0=t0,
        details={**_scheme_details(scheme), "tightness": tight},
    )


_SOLVERS: dict[str, Callable[..., Calibration]] = {
    "noise_multiplier": _solve_noise,
    "steps": _solve_steps,
    "epochs": _solve_epochs,
    "sampling_rate": _solve_rate,
}


def _rate_and_steps(sampling_rate, steps, epochs, dataset_size, batch_size, cls) -> tuple[float, int]:
    """``(sampling_rate, steps)`` of the run; epoch-based schemes: ``(1/t, whole epochs of t steps)``."""
    q, k = _given_rate_and_steps(sampling_rate, steps, epochs, dataset_size, batch_size, cls)
    if cls.per_epoch and epochs is not None:  # t = ceil(N / B) batches an epoch, as steps_from_epochs counts them
        q = 1.0 / math.ceil(check_count("dataset_size", dataset_size) / check_count("batch_size", batch_size))
    return q, k


def _given_rate_and_steps(sampling_rate, steps, epochs, dataset_size, batch_size, cls) -> tuple[float, int]:
    # schemes other than Poisson take dataset_size alongside sampling_rate and steps (truncated Poisson needs it)
    loose = dataset_size if not (cls is not Poisson and epochs is None and batch_size is None) else None
    via_epochs = any(v is not None for v in (epochs, loose, batch_size))
    if via_epochs:
        if sampling_rate is not None or steps is not None:
            raise ValueError("give either sampling_rate and steps, or epochs, dataset_size and batch_size")
        for n, v in (("epochs", epochs), ("dataset_size", dataset_size), ("batch_size", batch_size)):
            if v is None:
                raise ValueError(f"{n} is required with epochs / dataset_size / batch_size")
        return steps_from_epochs(epochs=epochs, dataset_size=dataset_size, batch_size=batch_size)
    if sampling_rate is None:
        raise ValueError("sampling_rate is required (or give epochs, dataset_size and batch_size)")
    if steps is None:
        raise ValueError("steps is required (or give epochs, dataset_size and batch_size)")
    return check_probability("sampling_rate", sampling_rate), check_count("steps", steps)

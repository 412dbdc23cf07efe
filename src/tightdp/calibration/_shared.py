"""What every calibration shares: the answer type ``Calibration``, the searched ranges, the checks of the
target and of the run keywords, and the epsilon functions the search evaluates."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._accuracy import absolute_error_at, check_accuracy, resolve_accuracy
from .._calibration_search import (
    _Evaluator,
)
from .._validation import check_choice, check_count, check_delta, check_probability, check_real
from ..accountants import DEFAULT_ACCOUNTANT
from ..bounds import Bounds
from ..runs import TrainingRun
from ..sampling import Poisson, SamplingScheme, parse_sampling

#: ``fn(noise_multiplier, sampling_rate, steps, delta) -> Bounds`` (epsilon); ``upper`` is what counts.
EpsilonFunction = Callable[[float, float, int, float], Bounds]
#: ``fn(run, delta) -> Bounds``: what the search evaluates
RunEpsilon = Callable[[TrainingRun, float], Bounds]
#: ``(check, coarse, check_error, tight, accuracy)`` of ``_make_epsilon_fns``
EpsilonFns = tuple[RunEpsilon, RunEpsilon | None, float, RunEpsilon | None, tuple[float, float | None] | None]

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

    Parameters
    ----------
    solved : str
        The solved field (``"noise_multiplier"``, ``"steps"`` or ``"sampling_rate"``).
    noise_multiplier, sampling_rate : float
        The calibrated run's noise multiplier and sampling rate.
    steps : int
        The calibrated run's number of steps.
    delta, target_epsilon : float
        The question.
    epsilon : Bounds
        The certified epsilon of the calibrated run.
    accountant : str
        The accountant's name (or the ``epsilon_fn``'s).
    evaluations : int
        The epsilon evaluations spent.
    seconds : float
        The time taken.
    details : mapping, optional
        The scheme, the tightness record, notes.
    eps_error, rel_error : float, optional
        The accuracy the answer was certified at: re-evaluating the returned run with
        ``dpsgd_epsilon(..., eps_error=eps_error, rel_error=rel_error)`` gives ``upper <= target``; ``None``
        for a caller's ``epsilon_fn``.
    sampling : str, default ``"poisson"``
        The registry name of the run's sampling scheme.
    run : TrainingRun, optional
        The calibrated run.

    Raises
    ------
    TypeError
        If a field is missing (built by the calibrators; the values are not checked).
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
        value: float | int = getattr(self, self.solved)
        return value

    def to_dict(self) -> dict[str, Any]:
        """The answer as JSON-ready data.

        Returns
        -------
        dict
            ``{"solved": ..., "noise_multiplier": ..., "epsilon": {...}, ...}``.
        """
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
def steps_from_epochs(*, epochs: int, dataset_size: int, batch_size: int) -> tuple[float, int]:
    """``(sampling_rate, steps)`` for ``epochs`` passes with expected batch size ``batch_size``.

    ``sampling_rate = batch_size / dataset_size`` (Poisson sampling, as in
    Opacus) and ``steps = epochs * ceil(dataset_size / batch_size)``: rounding
    the batches per epoch up counts at least as many steps as any data loader
    runs, which can only over-state epsilon.

    Parameters
    ----------
    epochs : int
        The passes over the data, a positive whole number.
    dataset_size : int
        The number of examples ``N``.
    batch_size : int
        The expected batch size ``B <= N``.

    Returns
    -------
    tuple of (float, int)
        ``(sampling_rate, steps)``.

    Raises
    ------
    ValueError
        If an argument is not a positive whole number, or ``batch_size > dataset_size``.
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


def _scheme_of(
    sampling: str | SamplingScheme | None,
    dataset_size: int | None,
    max_batch_size: int | None,
    accountant: str,
    epsilon_fn: EpsilonFunction | None,
    **options: Any,
) -> SamplingScheme:
    """The validated sampling scheme of a calibration (parsed by the registry of ``tightdp.sampling``)."""
    scheme = parse_sampling(sampling, dataset_size=dataset_size, max_batch_size=max_batch_size, **options)
    if max_batch_size is not None and "max_batch_size" not in type(scheme).options:
        raise ValueError(f"max_batch_size does not apply to sampling={scheme.name!r}")
    _check_scheme(scheme, accountant, epsilon_fn)
    return scheme


def _check_scheme(scheme: SamplingScheme, accountant: str, epsilon_fn: EpsilonFunction | None) -> None:
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


def _make_epsilon_fns(accountant: str, eps_error: float | None, rel_error: float | None, target: float) -> EpsilonFns:
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
    accuracy: tuple[float, float | None]
    if accountant == DEFAULT_ACCOUNTANT:
        accuracy = resolve_accuracy(eps_error, rel_error)
    else:
        accuracy = (err, None)

    def make(e: float, r: float | None = None) -> RunEpsilon:
        def fn(run: TrainingRun, delta: float) -> Bounds:
            return run.epsilon(delta=delta, accountant=accountant, eps_error=e, rel_error=r)

        return fn

    tight_e = _tight_error(target, err)
    tight = None if tight_e is None else make(tight_e)
    check = make(*accuracy)
    if accountant not in ("prv", "connect-dots"):  # only the PLD accountants have a cheaper coarse pass
        return check, None, err, tight if accountant == "fourier" else None, accuracy
    return check, make(min(_COARSE_FACTOR * err, 0.2)), err, tight, accuracy


def _result(
    solved: str,
    ev: _Evaluator,
    x: float,
    *,
    run: TrainingRun,
    delta: float,
    target: float,
    accountant: str,
    t0: float,
    details: dict[str, Any],
) -> Calibration:
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


def _common(
    target_epsilon: float,
    delta: float,
    accountant: str,
    epsilon_fn: EpsilonFunction | None,
    eps_error: float | None,
    rel_error: float | None = None,
) -> tuple[float, float, EpsilonFns, str]:
    target = check_real("target_epsilon", target_epsilon, low=0.0)
    if target > MAX_TARGET_EPSILON:
        raise ValueError(
            f"target_epsilon must be <= {MAX_TARGET_EPSILON:g}, got {target_epsilon!r} (an epsilon "
            "that large promises no meaningful privacy, and certifying it needs grids of millions "
            "of points per evaluation)"
        )
    delta = check_delta("delta", delta)
    if epsilon_fn is None:
        from ..accountants import ACCOUNTANTS

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

        fns = (fn, None, 0.0, None, None)
        name = str(getattr(epsilon_fn, "__name__", "custom"))
    return target, delta, fns, name


# --------------------------------------------------------------------------- search helpers


def _rate_and_steps(
    sampling_rate: float | None,
    steps: int | None,
    epochs: int | None,
    dataset_size: int | None,
    batch_size: int | None,
    cls: type[SamplingScheme],
) -> tuple[float, int]:
    """``(sampling_rate, steps)`` of the run; epoch-based schemes: ``(1/t, whole epochs of t steps)``."""
    q, k = _given_rate_and_steps(sampling_rate, steps, epochs, dataset_size, batch_size, cls)
    if cls.per_epoch and epochs is not None:  # t = ceil(N / B) batches an epoch, as steps_from_epochs counts them
        q = 1.0 / math.ceil(check_count("dataset_size", dataset_size) / check_count("batch_size", batch_size))
    return q, k


def _given_rate_and_steps(
    sampling_rate: float | None,
    steps: int | None,
    epochs: int | None,
    dataset_size: int | None,
    batch_size: int | None,
    cls: type[SamplingScheme],
) -> tuple[float, int]:
    # schemes other than Poisson take dataset_size alongside sampling_rate and steps (truncated Poisson needs it)
    loose = dataset_size if not (cls is not Poisson and epochs is None and batch_size is None) else None
    via_epochs = any(v is not None for v in (epochs, loose, batch_size))
    if via_epochs:
        if sampling_rate is not None or steps is not None:
            raise ValueError("give either sampling_rate and steps, or epochs, dataset_size and batch_size")
        if epochs is None or dataset_size is None or batch_size is None:
            n = next(
                n
                for n, v in (("epochs", epochs), ("dataset_size", dataset_size), ("batch_size", batch_size))
                if v is None
            )
            raise ValueError(f"{n} is required with epochs / dataset_size / batch_size")
        return steps_from_epochs(epochs=epochs, dataset_size=dataset_size, batch_size=batch_size)
    if sampling_rate is None:
        raise ValueError("sampling_rate is required (or give epochs, dataset_size and batch_size)")
    if steps is None:
        raise ValueError("steps is required (or give epochs, dataset_size and batch_size)")
    return check_probability("sampling_rate", sampling_rate), check_count("steps", steps)

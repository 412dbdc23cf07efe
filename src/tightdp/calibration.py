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

Sampling schemes (issue 11): every entry takes ``sampling=`` (``tightdp.dpsgd.SAMPLINGS``), and
the search runs ``dpsgd_epsilon(..., sampling=...)`` (``tightdp.schemes``), so the answer is
certified for the scheme that runs. Random allocation / balls and bins and shuffling are per
epoch: ``sampling_rate`` is ``1/t`` (``t`` steps per epoch; from ``dataset_size`` and
``batch_size``, ``t = ceil(dataset_size / batch_size)``) and steps count whole epochs
(``calibrate_steps`` searches multiples of ``t``); their sampling rate is not a free variable
(``calibrate_sampling_rate`` refuses them). ``truncated-poisson`` needs ``dataset_size`` and
``max_batch_size``. For ``shuffle`` the certified upper bound is the one without amplification
(no tighter one is known), so the calibrated noise is what that bound needs; the certified lower
bound (Chua et al.'s attack) is usually far below the target and the tightness record says so.

Cost: targets above ``MAX_TARGET_EPSILON`` are refused at once; a target that no
point of the searched range meets is refused after evaluating the range's end;
once a certified evaluation takes seconds, points the coarse pass cannot decide
count as infeasible (safe) instead of being evaluated again.
"""

from __future__ import annotations

import dataclasses
import math
import time
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from .accountants import DEFAULT_ACCOUNTANT
from ._accuracy import absolute_error_at, check_accuracy, describe_accuracy, resolve_accuracy
from ._numerics import falling_root
from ._validation import (check_choice, check_count, check_delta, check_positive,
                          check_probability, check_real)
from .bounds import Bounds
from .runs import TrainingRun
from .sampling import Poisson, SamplingScheme, parse_sampling

__all__ = ["Calibration", "calibrate", "calibrate_noise", "calibrate_steps", "calibrate_sampling_rate",
           "steps_from_epochs", "CalibrationError", "MAX_TARGET_EPSILON", "PARAMETERS"]

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
_STEPS_MAX = 10 ** 9


class CalibrationError(ValueError):
    """The target cannot be met within the searched range (the message says what was tried)."""


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

#: A certified evaluation slower than this (seconds) switches the search to its cheap levels: undecided
#: points count as infeasible (the safe side) instead of being evaluated at the full accuracy again.
_EXPENSIVE_SECONDS = 2.0


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
        raise ValueError(f"epsilon_fn replaces the accountant and the sampling scheme: give sampling="
                         f"{scheme.name!r} through it, not both")
    if not scheme.any_accountant and accountant != DEFAULT_ACCOUNTANT:
        raise ValueError(f"accountant must be {DEFAULT_ACCOUNTANT!r} for sampling={scheme.name!r} (its bounds come "
                         f"from dominance pairs only), got {accountant!r}")


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


class _Evaluator:
    """Decides feasibility (certified ``upper <= target`` at the check accuracy), caching every evaluation.

    With a ``coarse`` function (the same accountant with a larger error
    budget) a point is first evaluated coarsely: a coarse certified lower
    bound above the target proves infeasibility (the check accuracy's upper
    bound is above it too), a coarse upper bound at least ``2 fine_error``
    below the target makes the point feasible for the search (the check
    accuracy's interval is at most ``2 fine_error`` wide; the returned answer
    is always re-evaluated at the check accuracy, ``verify``), and only points
    in between get the check evaluation. Once a check evaluation has taken
    longer than ``_EXPENSIVE_SECONDS``, points the coarse pass cannot decide
    count as infeasible (safe; only tightness suffers, and the tightness record
    says how tight the answer is). Anything that cannot be certified
    (``PrecisionError`` or another ``ArithmeticError``, a ``MemoryError`` for a
    grid too large, an infinite or missing upper bound) is infeasible: the safe side.
    """

    def __init__(self, fn: EpsilonFunction, target: float, point: Callable[[float], tuple],
                 coarse: EpsilonFunction | None = None, fine_error: float = 0.0,
                 tight: EpsilonFunction | None = None, accuracy: tuple[float, float | None] | None = None):
        self.fn, self.coarse, self.target, self.point = fn, coarse, target, point
        self.tight = tight
        self.fine_error = fine_error
        self.accuracy = accuracy  # (eps_error, rel_error) of ``fn``; None for a caller's epsilon_fn
        self.fine: dict[Any, tuple[float, Bounds | None]] = {}
        self.rough: dict[Any, tuple[float, Bounds | None]] = {}
        self.finer: dict[Any, tuple[float, Bounds | None]] = {}
        self.calls = 0
        self.coarse_calls = 0
        self.expensive = False
        self.fine_seconds = 0.0  # the slowest check evaluation so far
        self.failures: list[str] = []

    def _eval(self, fn, x) -> tuple[float, Bounds | None]:
        try:
            b = fn(*self.point(x))
        except (ArithmeticError, MemoryError) as exc:  # PrecisionError, overflow, a grid too large:
            # no certificate, so the point counts as infeasible (the safe side)
            self.failures.append(f"{x!r}: {type(exc).__name__}: {exc}")
            return math.inf, None
        up = math.inf
        if b is not None and b.upper is not None:
            up = float(b.upper)
            if math.isnan(up):
                up = math.inf
        return up, b

    def _fine(self, x) -> tuple[float, Bounds | None]:
        if x not in self.fine:
            self.calls += 1
            t = time.perf_counter()
            self.fine[x] = self._eval(self.fn, x)
            self.fine_seconds = max(self.fine_seconds, time.perf_counter() - t)
            if self.coarse is not None and self.fine_seconds > _EXPENSIVE_SECONDS:
                self.expensive = True
        return self.fine[x]

    def _rough(self, x) -> tuple[float, Bounds | None]:
        if x not in self.rough:
            self.coarse_calls += 1
            self.rough[x] = self._eval(self.coarse, x)
        return self.rough[x]

    def _finer(self, x) -> tuple[float, Bounds | None]:
        if x not in self.finer:
            self.calls += 1
            self.finer[x] = self._eval(self.tight, x)
        return self.finer[x]

    def feasible(self, x) -> bool:
        return self.evidence(x)[0] <= self.target

    def verify(self, x) -> tuple[float, Bounds | None]:
        """``(upper, Bounds)`` at the check accuracy: what the answer is certified on."""
        return self._fine(x)

    def evidence(self, x) -> tuple[float, Bounds | None]:
        """``(upper, Bounds)`` of the evaluation that decides ``x`` (fine unless the coarse one sufficed)."""
        if x in self.fine or self.coarse is None:
            return self._fine(x)
        up, b = self._rough(x)
        if up + 2.0 * self.fine_error <= self.target:
            return up, b
        if b is not None and b.lower is not None and math.isfinite(b.lower) and b.lower > self.target:
            return up, b
        if self.expensive:  # undecided and costly: the safe side, without the evaluation
            return math.inf, None
        return self._fine(x)

    def lower_bounds(self, x):
        """Certified evaluations at ``x``, cheapest first (for proving that ``x`` exceeds the target)."""
        if self.coarse is not None:
            yield self._rough(x)
        if not self.expensive or x in self.fine:
            yield self._fine(x)
        if self.tight is not None and not self.expensive:
            yield self._finer(x)

    def value(self, x) -> float:
        """Best guess of the fine upper bound at ``x`` (for interpolation only, never for decisions)."""
        if x in self.fine:
            return self.fine[x][0]
        if x in self.rough:
            up, b = self.rough[x]
            if b is not None and b.estimate is not None and math.isfinite(b.estimate) and math.isfinite(up):
                return float(b.estimate) + self.fine_error
            return up
        return self.evidence(x)[0]

    def __call__(self, x) -> tuple[float, Bounds | None]:
        return self.evidence(x)


def _interp(x0: float, f0: float, x1: float, f1: float, target: float) -> float | None:
    """Secant step on ``log f`` against ``x`` (x already on a log scale)."""
    if not (0 < f0 < math.inf and 0 < f1 < math.inf) or f0 == f1:
        return None
    l0, l1, lt = math.log(f0), math.log(f1), math.log(target)
    x = x0 + (lt - l0) * (x1 - x0) / (l1 - l0)
    return x if math.isfinite(x) else None


def _narrow(ev: _Evaluator, to_x: Callable[[float], Any], bad: float, good: float, tol: float,
            *, max_iter: int = 80) -> tuple[float, float]:
    """Shrink the log-scale bracket ``(bad, good)`` (``good`` feasible, ``bad`` not) to width ``tol``.

    Safeguarded secant: each probe aims at the interpolated root, nudged by
    ``0.4 tol`` alternately to either side so both ends close in; plain
    bisection whenever interpolation fails or the bracket did not halve in
    two probes. ``to_x`` maps the log-scale variable to the evaluated point
    (integers for steps), and the loop stops when it can no longer separate.
    """
    side = 1.0
    widths = [abs(good - bad)]
    for _ in range(max_iter):
        if abs(good - bad) <= tol or to_x(bad) == to_x(good):
            break
        lo, hi = min(bad, good), max(bad, good)
        f_bad, f_good = ev.value(to_x(bad)), ev.value(to_x(good))
        x = _interp(bad, f_bad, good, f_good, ev.target)
        stalled = len(widths) >= 3 and widths[-1] > 0.5 * widths[-3]
        if x is None or stalled:
            x = 0.5 * (lo + hi)
            widths = [abs(good - bad)]  # reset the stall detector after a bisection
        else:
            x += side * 0.4 * tol * (1.0 if good > bad else -1.0)
            side = -side
            margin = 0.02 * (hi - lo)
            x = min(max(x, lo + margin), hi - margin)
        px = to_x(x)
        if px in (to_x(bad), to_x(good)):
            x = 0.5 * (lo + hi)
            px = to_x(x)
            if px in (to_x(bad), to_x(good)):
                break
        if ev.feasible(px):
            good = x
        else:
            bad = x
        widths.append(abs(good - bad))
    return bad, good


def _round_sig(x: float, digits: int, up: bool) -> float:
    """``x`` rounded to ``digits`` significant digits, up (``up``) or down, so that printing it with
    ``:.{digits}g`` shows exactly the value that was evaluated."""
    if x <= 0 or not math.isfinite(x):
        return x
    d = Decimal(x)
    q = Decimal(1).scaleb(d.adjusted() - digits + 1)
    return float(d.quantize(q, rounding=ROUND_CEILING if up else ROUND_FLOOR))


#: Significant digits of a calibrated noise multiplier or sampling rate (what the CLI and the report print).
DIGITS = 6


def _finish(ev: "_Evaluator", x, safer: Callable[[Any, int], Any], *, rounds: int = 12):
    """The point at or past ``x`` (towards the safe side) whose check-accuracy upper bound meets the target."""
    for i in range(rounds):
        up, b = ev.verify(x)
        if b is not None and up <= ev.target:
            return x
        x = safer(x, i)
    raise CalibrationError(f"no point near the solution could be certified at {_accuracy_text(ev)}; "
                           + (ev.failures or ["the certified upper bound stays above the target"])[-1])


def _result(solved: str, ev: _Evaluator, x, *, run, delta, target, accountant, t0, details) -> Calibration:
    up, b = ev.verify(x)
    if b is None or not up <= target:  # the search only ever returns verified feasible points
        raise RuntimeError(f"internal error: calibration ended on an infeasible point {x!r}")
    details = dict(details)
    if ev.coarse is not None:
        details["fine_evaluations"] = ev.calls
        details["coarse_evaluations"] = ev.coarse_calls
    if ev.expensive:
        details["expensive"] = ("certified evaluations at this accuracy take seconds each; points the coarse "
                                "pass could not decide were counted as infeasible (safe, possibly less tight)")
    if ev.failures:
        details["uncertified_points"] = ev.failures[:10]
    return Calibration(solved=solved, noise_multiplier=float(run.noise_multiplier),
                       sampling_rate=float(run.sampling_rate), steps=int(run.steps), sampling=run.sampling.name,
                       run=run,
                       delta=delta, target_epsilon=target, epsilon=b, accountant=accountant,
                       evaluations=ev.calls + ev.coarse_calls, seconds=time.perf_counter() - t0, details=details,
                       eps_error=None if ev.accuracy is None else ev.accuracy[0],
                       rel_error=None if ev.accuracy is None else ev.accuracy[1])


def _accuracy_text(ev: _Evaluator) -> str:
    if ev.accuracy is None:
        return "the given epsilon_fn's accuracy"
    return describe_accuracy(*ev.accuracy)


def _common(target_epsilon, delta, accountant, epsilon_fn, eps_error, rel_error=None):
    target = check_real("target_epsilon", target_epsilon, low=0.0)
    if target > MAX_TARGET_EPSILON:
        raise ValueError(f"target_epsilon must be <= {MAX_TARGET_EPSILON:g}, got {target_epsilon!r} (an epsilon "
                         "that large promises no meaningful privacy, and certifying it needs grids of millions "
                         "of points per evaluation)")
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
def _bracket(ev: _Evaluator, to_x, u0: float, direction: float, lo: float, hi: float):
    """Bracket the boundary on the log scale, starting from the guess ``u0``.

    ``direction = +1``: larger ``u`` is feasible (noise); ``-1``: smaller is
    (steps, sampling rate). Steps grow geometrically (0.15, 0.3, 0.6, ... in
    log), so a good guess costs two or three evaluations and a bad one only a
    few more; ``[lo, hi]`` limits the search. Returns ``(bad, good)``, either
    of which is ``None`` when the limit was reached without finding it.
    """
    u0 = min(max(u0, lo), hi)
    step = 0.15
    if ev.feasible(to_x(u0)):
        good, bad = u0, None
        while True:
            cand = min(max(good - direction * step, lo), hi)
            if cand == good:
                return None, good
            if ev.feasible(to_x(cand)):
                good = cand
                step *= 2
            else:
                return cand, good
    bad = u0
    while True:
        cand = min(max(bad + direction * step, lo), hi)
        if cand == bad:
            return bad, None
        if ev.feasible(to_x(cand)):
            return bad, cand
        bad = cand
        step *= 2


def _gdp_mu(target: float, delta: float) -> float:
    """mu with ``delta_mu(target) = delta`` for mu-GDP (000 eq. (2.3), Lemma 10); for initial guesses only."""
    from scipy import special

    def d(mu: float) -> float:
        return float(special.ndtr(-target / mu + mu / 2)
                     - math.exp(target + special.log_ndtr(-target / mu - mu / 2))) - delta

    lo, hi = 1e-6, 1.0
    for _ in range(60):
        if d(hi) > 0:
            break
        hi *= 2
    else:
        return hi
    return falling_root(lambda mu: -d(mu), lo, hi, xtol=1e-10)


def _clt_guess(*, target: float, delta: float, q=None, k=None, sigma=None) -> float | None:
    """The unknown one of (sigma, q, k) by the CLT/GDP approximation of DP-SGD (Bu et al. 2020):
    ``mu = q sqrt(k (exp(1/sigma^2) - 1))`` (``mu = sqrt(k) / sigma`` for ``q = 1``).

    Only a starting point for the certified search; ``None`` if it fails.
    """
    try:
        mu = _gdp_mu(target, delta)
        if sigma is None:
            if q == 1.0:
                return math.sqrt(k) / mu
            return 1.0 / math.sqrt(math.log1p(mu * mu / (q * q * k)))
        g = math.expm1(min(1.0 / (sigma * sigma), 700.0)) if q != 1.0 else 1.0 / (sigma * sigma)
        if k is None:
            return (mu / q) ** 2 / g
        return mu / math.sqrt(k * g)
    except (ArithmeticError, ValueError):
        return None


def _search(ev: _Evaluator, to_x, u0: float, direction: float, lo: float, hi: float, tol: float):
    """Bracket and narrow the boundary: ``(bad, good)`` on the log scale (either ``None`` as in ``_bracket``).

    With a coarse pass the search runs twice: first on the coarse evaluations
    alone (undecided points count as infeasible), which is cheap and lands
    within the coarse interval of the boundary; then, if one check-accuracy
    evaluation at that answer is fast, again from there with the check
    evaluations (so the expensive accuracy is only ever used near the answer).
    """
    if ev.coarse is not None and not ev.expensive:
        ev.expensive = True
        try:
            bad, good = _bracket(ev, to_x, u0, direction, lo, hi)
            if bad is not None and good is not None:
                bad, good = _narrow(ev, to_x, bad, good, tol)
        finally:
            ev.expensive = False
        if good is None:
            return bad, good
        ev.verify(to_x(good))  # times the check accuracy here (sets ev.expensive when it is slow)
        if ev.expensive:
            return bad, good
        u0 = good
    bad, good = _bracket(ev, to_x, u0, direction, lo, hi)
    if bad is not None and good is not None:
        bad, good = _narrow(ev, to_x, bad, good, tol)
    return bad, good


# --------------------------------------------------------------------------- public API
def calibrate(*, run: TrainingRun, parameter: str, target_epsilon, delta, accountant: str = DEFAULT_ACCOUNTANT,
              eps_error: float | None = None, rel_error: float | None = None, rtol: float = _DEFAULT_RTOL,
              max_steps: int = _STEPS_MAX, multiple_of: int = 1,
              epsilon_fn: EpsilonFunction | None = None) -> Calibration:
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
    return _SOLVERS[parameter](run, target_epsilon=target_epsilon, delta=delta, accountant=accountant,
                               eps_error=eps_error, rel_error=rel_error, rtol=rtol, max_steps=max_steps,
                               multiple_of=multiple_of, epsilon_fn=epsilon_fn, t0=t0)


def calibrate_noise(*, target_epsilon, delta, sampling_rate=None, steps=None, epochs=None, dataset_size=None,
                    batch_size=None, accountant: str = DEFAULT_ACCOUNTANT, eps_error: float | None = None,
                    rel_error: float | None = None, rtol: float = _DEFAULT_RTOL, epsilon_fn: EpsilonFunction | None = None,
                    sampling: str | SamplingScheme | None = None, max_batch_size: int | None = None) -> Calibration:
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
    scheme = _scheme_of(sampling, dataset_size, max_batch_size, accountant, epsilon_fn, sampling_rate=q,
                        batch_size=batch_size)
    run = TrainingRun(noise_multiplier=1.0, sampling=scheme, steps=k)
    return calibrate(run=run, parameter="noise_multiplier", target_epsilon=target_epsilon, delta=delta,
                     accountant=accountant, eps_error=eps_error, rel_error=rel_error, rtol=rtol,
                     epsilon_fn=epsilon_fn)


def _solve_noise(run: TrainingRun, *, target_epsilon, delta, accountant, eps_error, rel_error, rtol, epsilon_fn, t0,
                 **_) -> Calibration:
    target, delta, fns, name = _common(target_epsilon, delta, accountant, epsilon_fn, eps_error, rel_error)
    rtol = check_real("rtol", rtol, low=0.0, high=_TIGHTNESS)
    scheme, q, k = run.sampling, run.sampling_rate, run.steps
    ev = _Evaluator(fns[0], target, lambda s: (run.replace(noise_multiplier=s), delta), fns[1], fns[2], fns[3],
                    fns[4])
    to_x = lambda u: _round_sig(math.exp(u), DIGITS, up=True)  # noqa: E731
    guess = _clt_guess(target=target, delta=delta, q=q, k=k)
    if not scheme.amplifies:  # its certified bound is sqrt(epochs)/sigma-GDP: start there
        guess = _clt_guess(target=target, delta=delta, q=1.0, k=max(1, round(k * q)))
    u0 = math.log(guess) if guess and math.isfinite(guess) and guess > 0 else 0.0
    bad, good = _search(ev, to_x, u0, +1.0, math.log(_SIGMA_MIN), math.log(_SIGMA_MAX), math.log1p(rtol))
    safer = lambda s, i: _round_sig(s * (1 + rtol * 2 ** i), DIGITS, up=True)  # noqa: E731
    if bad is None:
        sigma = _finish(ev, to_x(good), safer)
        return _result("noise_multiplier", ev, sigma, run=run.replace(noise_multiplier=sigma), delta=delta,
                       target=target, accountant=name, t0=t0,
                       details={**_scheme_details(scheme),
                                "note": f"the target is met by every searched noise multiplier down to "
                                        f"{_SIGMA_MIN:g}; smaller values were not searched"})
    if good is None:
        raise CalibrationError(
            f"no noise multiplier up to {_SIGMA_MAX:g} meets target_epsilon={target:g} at delta={delta:g} "
            f"(sampling_rate={q:g}, steps={k}); the certified bound stays above the target")
    sigma = _finish(ev, to_x(good), safer)
    sigma, tight = _tighten(ev, to_x, math.log(sigma), -1.0, rtol, safer=safer)
    return _result("noise_multiplier", ev, sigma, run=run.replace(noise_multiplier=sigma), delta=delta,
                   target=target, accountant=name, t0=t0, details={**_scheme_details(scheme), "tightness": tight})


#: Neighbours tried (relative move towards the infeasible side) to show that the answer is tight.
_TIGHTNESS_STEPS = (0.01, 0.02, 0.05)


def _prove_exceeds(ev: _Evaluator, x) -> tuple[bool | None, float, Bounds | None]:
    """Whether some certified lower bound at ``x`` exceeds the target: ``(proved, upper, bounds)``.

    ``proved`` is ``None`` when ``x`` could not be evaluated at all."""
    last_up, last_b = math.inf, None
    for up, b in ev.lower_bounds(x):
        if b is None:
            continue
        last_up, last_b = up, b
        if b.lower is not None and math.isfinite(b.lower) and b.lower > ev.target:
            return True, up, b
    return (None if last_b is None else False), last_up, last_b


def _tighten(ev: _Evaluator, to_x, u: float, direction: float, rtol: float, *, safer, max_rounds: int = 20):
    """Show that moving ``1 %`` (else 2 %, 5 %) towards the infeasible side exceeds the target, proved by a
    certified lower bound. If a neighbour is itself feasible at the check accuracy (the bound wobbles), the
    answer moves there. Returns ``(answer, tightness record)``."""
    x = to_x(u)
    for _ in range(max_rounds):
        moved = False
        last = None
        for frac in _TIGHTNESS_STEPS:
            probe = to_x(math.log(x) + math.log1p(direction * frac))
            if probe == x:
                continue
            proved, up, b = _prove_exceeds(ev, probe)
            if proved is None:
                last = {"checked": probe, "step": frac, "overshoots": None,
                        "note": "the neighbouring value could not be certified: " + (ev.failures or ["?"])[-1]}
                break
            if proved:
                return x, {"checked": probe, "step": frac, "epsilon_upper": up if math.isfinite(up) else None,
                           "epsilon_lower": b.lower, "overshoots": True}
            vup, vb = ev.verify(probe) if not ev.expensive or probe in ev.fine else (math.inf, None)
            if vb is not None and vup <= ev.target:  # a wobble: the boundary lies further out
                x = _finish(ev, probe, safer)
                moved = True
                break
            last = {"checked": probe, "step": frac, "epsilon_upper": up if math.isfinite(up) else None,
                    "epsilon_lower": None if b is None else b.lower, "overshoots": False,
                    "note": "no certified lower bound above the target within " + f"{frac:.0%}"
                            + " (a smaller eps_error can prove more)"}
        if not moved:
            return x, last or {"checked": None, "note": "the neighbouring value rounds to the same point"}
    return x, {"checked": None, "note": "the bound is not monotone near the solution"}


def calibrate_steps(*, target_epsilon, delta, noise_multiplier, sampling_rate, accountant: str = DEFAULT_ACCOUNTANT,
                    eps_error: float | None = None, rel_error: float | None = None, max_steps: int = _STEPS_MAX,
                    multiple_of: int = 1, epsilon_fn: EpsilonFunction | None = None,
                    sampling: str | SamplingScheme | None = None, dataset_size: int | None = None,
                    max_batch_size: int | None = None) -> Calibration:
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
    scheme = _scheme_of(sampling, dataset_size, max_batch_size, accountant, epsilon_fn,
                        sampling_rate=check_probability("sampling_rate", sampling_rate))
    run = TrainingRun(noise_multiplier=noise_multiplier, sampling=scheme, steps=scheme.epoch_length() or 1)
    return calibrate(run=run, parameter="steps", target_epsilon=target_epsilon, delta=delta, accountant=accountant,
                     eps_error=eps_error, rel_error=rel_error, max_steps=max_steps, multiple_of=multiple_of,
                     epsilon_fn=epsilon_fn)


def _solve_steps(run: TrainingRun, *, target_epsilon, delta, accountant, eps_error, rel_error, max_steps,
                 multiple_of, epsilon_fn, t0, **_) -> Calibration:
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
            f"(noise_multiplier={sigma:g}, sampling_rate={q:g}); certified epsilon <= {ev.verify(1)[0]:.6g}")
    to_x = lambda u: max(1, int(math.floor(math.exp(u) * (1 + 1e-12))))  # noqa: E731  (exact on log(n))
    guess = _clt_guess(target=target, delta=delta, q=q, sigma=sigma)
    if not scheme.amplifies and guess:  # sqrt(epochs)/sigma-GDP: (sigma mu)^2 epochs of 1/q steps
        guess = _clt_guess(target=target, delta=delta, q=1.0, sigma=sigma) / q
    u0 = math.log(min(max(guess / unit, 1.0), max_units)) if guess and math.isfinite(guess) else 0.0
    bad_u, good_u = _search(ev, to_x, u0, -1.0, 0.0, math.log(max_units), math.log1p(1e-4))
    safer = lambda n, i: max(1, n - max(1, int(n * 1e-4 * 2 ** i)))  # noqa: E731
    if bad_u is None:
        good = to_x(good_u)
        if good < max_units and ev.feasible(max_units):
            good = max_units
        if good == max_units and ev.verify(good)[0] <= target:
            return _result("steps", ev, good, run=run.replace(steps=good * unit), delta=delta, target=target,
                           accountant=name, t0=t0,
                           details={**_scheme_details(scheme),
                                    "note": f"the target is met up to max_steps={max_steps}; more were not "
                                            "searched"})
        bad_u = math.log(max_units)
    if good_u is None:  # cannot happen: one unit is feasible (checked above)
        good_u = 0.0
    good, bad = to_x(good_u), to_x(bad_u)
    resolution = lambda g: max(1, int(g * 1e-4)) if g > 10_000 else 1  # noqa: E731
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
        tight = {"checked": probe * unit, "epsilon_upper": up if math.isfinite(up) else None,
                 "epsilon_lower": None if b is None else b.lower, "overshoots": proved}
        if proved:
            break
        tight["note"] = "no certified lower bound above the target at this neighbour (a smaller eps_error can " \
                        "prove more)"
        if proved is None:
            break
    details["tightness"] = tight or {"checked": None, "note": "max_steps reached"}
    return _result("steps", ev, good, run=run.replace(steps=good * unit), delta=delta, target=target,
                   accountant=name, t0=t0, details=details)


def _solve_epochs(run: TrainingRun, **kw) -> Calibration:
    if not run.sampling.per_epoch:
        raise ValueError(f"parameter 'epochs' needs an epoch-based scheme (sampling={run.sampling.name!r} has no "
                         "epochs of its own): calibrate 'steps'")
    cal = _solve_steps(run, **kw)
    return dataclasses.replace(cal,
                               run=cal.run.replace(epochs=cal.steps // run.sampling.epoch_length()))


def calibrate_sampling_rate(*, target_epsilon, delta, noise_multiplier, steps, accountant: str = DEFAULT_ACCOUNTANT,
                            eps_error: float | None = None, rel_error: float | None = None,
                            rtol: float = _DEFAULT_RTOL, epsilon_fn: EpsilonFunction | None = None,
                            sampling: str | SamplingScheme | None = None, dataset_size: int | None = None,
                            max_batch_size: int | None = None) -> Calibration:
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
    return calibrate(run=run, parameter="sampling_rate", target_epsilon=target_epsilon, delta=delta,
                     accountant=accountant, eps_error=eps_error, rel_error=rel_error, rtol=rtol,
                     epsilon_fn=epsilon_fn)


def _rate_is_free(cls) -> None:
    if "sampling_rate" in cls.free_fields:
        return
    if cls.per_epoch:
        raise ValueError(f"sampling={cls.name!r} runs whole epochs of 1/sampling_rate steps, so its sampling rate "
                         "cannot be calibrated at a fixed number of steps: calibrate the noise (calibrate_noise) or "
                         "the number of epochs (calibrate_steps) instead")
    raise ValueError(f"the sampling rate of sampling={cls.name!r} is not a free variable (it follows from "
                     f"{', '.join(f.name for f in dataclasses.fields(cls))}): calibrate the noise or the steps")


def _solve_rate(run: TrainingRun, *, target_epsilon, delta, accountant, eps_error, rel_error, rtol, epsilon_fn, t0,
                **_) -> Calibration:
    _rate_is_free(type(run.sampling))
    target, delta, fns, name = _common(target_epsilon, delta, accountant, epsilon_fn, eps_error, rel_error)
    scheme, sigma, k = run.sampling, run.noise_multiplier, run.steps
    rtol = check_real("rtol", rtol, low=0.0, high=_TIGHTNESS)
    at = lambda q: run.replace(sampling_rate=q)  # noqa: E731
    ev = _Evaluator(fns[0], target, lambda q: (at(q), delta), fns[1], fns[2], fns[3], fns[4])
    to_x = lambda u: min(1.0, _round_sig(math.exp(u), DIGITS, up=False))  # noqa: E731
    safer = lambda q, i: _round_sig(q / (1 + rtol * 2 ** i), DIGITS, up=False)  # noqa: E731
    if ev.feasible(1.0) and ev.verify(1.0)[0] <= target:
        return _result("sampling_rate", ev, 1.0, run=at(1.0), delta=delta, target=target,
                       accountant=name, t0=t0, details={**_scheme_details(scheme),
                                                        "note": "full batches (sampling_rate = 1) meet the target"})
    if not ev.feasible(_RATE_MIN):  # refuse at once: even the smallest searched rate misses the target
        raise CalibrationError(
            f"no sampling rate down to {_RATE_MIN:g} meets target_epsilon={target:g} at delta={delta:g} "
            f"(noise_multiplier={sigma:g}, steps={k}); certified epsilon at that rate <= {ev(_RATE_MIN)[0]:.6g}")
    guess = _clt_guess(target=target, delta=delta, k=k, sigma=sigma)
    u0 = math.log(min(guess, 1.0)) if guess and math.isfinite(guess) and guess > 0 else math.log(0.01)
    bad, good = _search(ev, to_x, u0, -1.0, math.log(_RATE_MIN), 0.0, math.log1p(rtol))
    if good is None:
        raise CalibrationError(
            f"no sampling rate down to {_RATE_MIN:g} meets target_epsilon={target:g} at delta={delta:g} "
            f"(noise_multiplier={sigma:g}, steps={k})")
    q = _finish(ev, to_x(good), safer)
    q, tight = _tighten(ev, to_x, math.log(q), +1.0, rtol, safer=safer)
    return _result("sampling_rate", ev, q, run=at(q), delta=delta, target=target,
                   accountant=name, t0=t0, details={**_scheme_details(scheme), "tightness": tight})


_SOLVERS: dict[str, Callable[..., Calibration]] = {"noise_multiplier": _solve_noise, "steps": _solve_steps,
                                                   "epochs": _solve_epochs, "sampling_rate": _solve_rate}


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

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
Finally it checks that moving 1 % towards the infeasible side (``0.99 sigma``,
``1.01 q``, ``steps + 1`` steps) overshoots the target; if it does not (a
non-monotone wobble of the bound), the search continues from there. The
returned ``Calibration.details["tightness"]`` records that check.

The accuracy of the accountant is chosen relative to the target
(``eps_error = min(0.01, target / 500)`` by default) so that the slack between
the certified bound and the true epsilon costs well under 1 % of noise.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from .accountants import DEFAULT_ACCOUNTANT
from ._validation import (check_choice, check_count, check_delta, check_positive, check_probability,
                          check_real)
from .bounds import Bounds

__all__ = ["Calibration", "calibrate_noise", "calibrate_steps", "calibrate_sampling_rate",
           "steps_from_epochs", "CalibrationError"]

#: ``fn(noise_multiplier, sampling_rate, steps, delta) -> Bounds`` (epsilon); ``upper`` is what counts.
EpsilonFunction = Callable[[float, float, int, float], Bounds]

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
            "delta": self.delta,
            "target_epsilon": self.target_epsilon,
            "epsilon": self.epsilon.to_dict(),
            "accountant": self.accountant,
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


def _default_eps_error(target: float) -> float:
    return min(0.01, max(target / 300.0, 1e-5))


#: Coarse evaluations (bracketing) use this many times the fine error budget.
_COARSE_FACTOR = 8.0


def _make_epsilon_fns(accountant: str, eps_error: float | None, target: float):
    """``(fine, coarse, fine_error)``: the coarse function has a wider (still certified) interval."""
    from . import dpsgd_epsilon  # late: the top-level package imports this module

    err = _default_eps_error(target) if eps_error is None else check_positive("eps_error", eps_error)

    def make(e):
        def fn(sigma: float, q: float, steps: int, delta: float) -> Bounds:
            return dpsgd_epsilon(noise_multiplier=sigma, sampling_rate=q, steps=steps, delta=delta,
                                 accountant=accountant, eps_error=e)
        return fn

    if accountant not in ("prv", "connect-dots"):  # certified PLD accountants: a coarse pass is cheaper
        return make(err), None, err
    return make(err), make(min(_COARSE_FACTOR * err, 0.2)), err


class _Evaluator:
    """Decides feasibility (certified ``upper <= target``), caching every evaluation.

    With a ``coarse`` function (the same accountant with a larger error
    budget) a point is first evaluated coarsely: a coarse certified upper
    bound at or below the target proves feasibility, a coarse certified lower
    bound above it proves infeasibility, and only points in between get the
    fine evaluation. Anything that cannot be certified (``PrecisionError`` or
    another ``ArithmeticError``, a ``MemoryError`` for a grid too large, an
    infinite or missing upper bound) is infeasible: the safe side.
    """

    def __init__(self, fn: EpsilonFunction, target: float, point: Callable[[float], tuple],
                 coarse: EpsilonFunction | None = None, fine_error: float = 0.0):
        self.fn, self.coarse, self.target, self.point = fn, coarse, target, point
        self.fine_error = fine_error
        self.fine: dict[Any, tuple[float, Bounds | None]] = {}
        self.rough: dict[Any, tuple[float, Bounds | None]] = {}
        self.calls = 0
        self.coarse_calls = 0
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
            self.fine[x] = self._eval(self.fn, x)
        return self.fine[x]

    def _rough(self, x) -> tuple[float, Bounds | None]:
        if x not in self.rough:
            self.coarse_calls += 1
            self.rough[x] = self._eval(self.coarse, x)
        return self.rough[x]

    def feasible(self, x) -> bool:
        return self.evidence(x)[0] <= self.target

    def evidence(self, x) -> tuple[float, Bounds | None]:
        """``(upper, Bounds)`` of the evaluation that decides ``x`` (fine unless the coarse one sufficed)."""
        if x in self.fine or self.coarse is None:
            return self._fine(x)
        up, b = self._rough(x)
        if up <= self.target:
            return up, b
        if b is not None and b.lower is not None and math.isfinite(b.lower) and b.lower > self.target:
            return up, b
        return self._fine(x)

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


def _result(solved: str, ev: _Evaluator, x, *, sigma, q, steps, delta, target, accountant, t0,
            details) -> Calibration:
    up, b = ev(x)
    if b is None or not up <= target:  # the search only ever returns evaluated feasible points
        raise RuntimeError(f"internal error: calibration ended on an infeasible point {x!r}")
    details = dict(details)
    if ev.coarse is not None:
        details["fine_evaluations"] = ev.calls
        details["coarse_evaluations"] = ev.coarse_calls
    if ev.failures:
        details["uncertified_points"] = ev.failures[:10]
    return Calibration(solved=solved, noise_multiplier=float(sigma), sampling_rate=float(q), steps=int(steps),
                       delta=delta, target_epsilon=target, epsilon=b, accountant=accountant,
                       evaluations=ev.calls + ev.coarse_calls, seconds=time.perf_counter() - t0, details=details)


def _common(target_epsilon, delta, accountant, epsilon_fn, eps_error):
    target = check_real("target_epsilon", target_epsilon, low=0.0)
    delta = check_delta("delta", delta)
    if epsilon_fn is None:
        from .accountants import ACCOUNTANTS

        if not isinstance(accountant, str):
            raise ValueError(f"accountant must be a name, got {accountant!r}")
        if ACCOUNTANTS:
            check_choice("accountant", accountant, sorted(ACCOUNTANTS))
        fns = _make_epsilon_fns(accountant, eps_error, target)
        name = accountant
    else:
        if not callable(epsilon_fn):
            raise ValueError(f"epsilon_fn must be callable, got {epsilon_fn!r}")
        fns, name = (epsilon_fn, None, 0.0), getattr(epsilon_fn, "__name__", "custom")
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
    from scipy import optimize, special

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
    return optimize.brentq(d, lo, hi, xtol=1e-10)


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


# --------------------------------------------------------------------------- public API
def calibrate_noise(*, target_epsilon, delta, sampling_rate=None, steps=None, epochs=None, dataset_size=None,
                    batch_size=None, accountant: str = DEFAULT_ACCOUNTANT, eps_error: float | None = None,
                    rtol: float = _DEFAULT_RTOL, epsilon_fn: EpsilonFunction | None = None) -> Calibration:
    """The smallest noise multiplier whose certified epsilon is at most ``target_epsilon``.

    Give ``sampling_rate`` and ``steps``, or ``epochs``, ``dataset_size`` and
    ``batch_size`` (see ``steps_from_epochs``). ``epsilon_fn(sigma, q, steps,
    delta) -> Bounds`` replaces the accountant (its ``upper`` is used).
    Raises ``CalibrationError`` when no sigma in [1e-3, 1e6] meets the target.

    >>> cal = calibrate_noise(target_epsilon=3.0, delta=1e-5, sampling_rate=0.01, steps=1000)  # doctest: +SKIP
    >>> cal.noise_multiplier, cal.epsilon.upper <= 3.0  # doctest: +SKIP
    """
    t0 = time.perf_counter()
    target, delta, fns, name = _common(target_epsilon, delta, accountant, epsilon_fn, eps_error)
    q, k = _rate_and_steps(sampling_rate, steps, epochs, dataset_size, batch_size)
    rtol = check_real("rtol", rtol, low=0.0, high=_TIGHTNESS)

    ev = _Evaluator(fns[0], target, lambda s: (s, q, k, delta), fns[1], fns[2])
    to_x = lambda u: math.exp(u)  # noqa: E731
    guess = _clt_guess(target=target, delta=delta, q=q, k=k)
    u0 = math.log(guess) if guess and math.isfinite(guess) and guess > 0 else 0.0
    bad, good = _bracket(ev, to_x, u0, +1.0, math.log(_SIGMA_MIN), math.log(_SIGMA_MAX))
    if bad is None:
        return _result("noise_multiplier", ev, to_x(good), sigma=to_x(good), q=q, steps=k, delta=delta,
                       target=target, accountant=name, t0=t0,
                       details={"note": f"the target is met by every searched noise multiplier down to "
                                        f"{_SIGMA_MIN:g}; smaller values were not searched"})
    if good is None:
        raise CalibrationError(
            f"no noise multiplier up to {_SIGMA_MAX:g} meets target_epsilon={target:g} at delta={delta:g} "
            f"(sampling_rate={q:g}, steps={k}); the certified bound stays above the target")
    bad, good = _narrow(ev, to_x, bad, good, math.log1p(rtol))
    good, tight = _tighten(ev, to_x, good, math.log1p(-_TIGHTNESS), rtol)
    sigma = to_x(good)
    return _result("noise_multiplier", ev, sigma, sigma=sigma, q=q, steps=k, delta=delta, target=target,
                   accountant=name, t0=t0, details={"tightness": tight})


def _tighten(ev: _Evaluator, to_x, good: float, step: float, rtol: float, *, max_rounds: int = 20):
    """Check that ``good + step`` (1 % towards infeasible) overshoots; if not, continue from there."""
    for _ in range(max_rounds):
        probe = good + step
        px = to_x(probe)
        if px == to_x(good):
            return good, {"checked": None, "note": "the neighbouring value rounds to the same point"}
        up, b = ev(px)
        if b is None:  # the neighbour could not be evaluated: safe, but tightness is not shown
            return good, {"checked": px, "overshoots": None,
                          "note": "the neighbouring value could not be certified: " + (ev.failures or ["?"])[-1]}
        if up > ev.target:
            return good, {"checked": px, "epsilon_upper": up if math.isfinite(up) else None,
                          "epsilon_lower": b.lower, "overshoots": True}
        # a wobble of the bound: the boundary lies further out; bracket again and narrow
        good = probe
        bad = good + step
        for _ in range(200):
            if not ev.feasible(to_x(bad)):
                break
            good, bad = bad, bad + step
        else:
            return good, {"checked": None, "note": "no infeasible point found past the solution"}
        _, good = _narrow(ev, to_x, bad, good, math.log1p(rtol))
    return good, {"checked": None, "note": "the bound is not monotone near the solution"}


def calibrate_steps(*, target_epsilon, delta, noise_multiplier, sampling_rate, accountant: str = DEFAULT_ACCOUNTANT,
                    eps_error: float | None = None, max_steps: int = _STEPS_MAX, multiple_of: int = 1,
                    epsilon_fn: EpsilonFunction | None = None) -> Calibration:
    """The largest number of steps whose certified epsilon is at most ``target_epsilon``.

    Exact over the multiples of ``multiple_of`` (1: every integer; the steps
    per epoch: whole epochs) for the accountant's bound: ``steps`` meets the
    target and ``steps + multiple_of`` does not (checked). Raises
    ``CalibrationError`` when even ``multiple_of`` steps exceed the target.
    """
    t0 = time.perf_counter()
    target, delta, fns, name = _common(target_epsilon, delta, accountant, epsilon_fn, eps_error)
    sigma = check_positive("noise_multiplier", noise_multiplier)
    q = check_probability("sampling_rate", sampling_rate)
    max_steps = check_count("max_steps", max_steps)
    unit = check_count("multiple_of", multiple_of)
    max_units = max_steps // unit
    if max_units < 1:
        raise ValueError(f"max_steps ({max_steps}) must be >= multiple_of ({unit})")
    ev = _Evaluator(fns[0], target, lambda n: (sigma, q, n * unit, delta), fns[1], fns[2])
    if not ev.feasible(1):
        raise CalibrationError(
            f"{unit} step(s) already exceed target_epsilon={target:g} at delta={delta:g} "
            f"(noise_multiplier={sigma:g}, sampling_rate={q:g}); certified epsilon <= {ev(1)[0]:.6g}")
    to_x = lambda u: max(1, int(math.floor(math.exp(u) * (1 + 1e-12))))  # noqa: E731  (exact on log(n))
    guess = _clt_guess(target=target, delta=delta, q=q, sigma=sigma)
    u0 = math.log(max(guess / unit, 1.0)) if guess and math.isfinite(guess) else 0.0
    bad_u, good_u = _bracket(ev, to_x, u0, -1.0, 0.0, math.log(max_units))
    if bad_u is None:
        good = to_x(good_u)
        if good < max_units and ev.feasible(max_units):
            good = max_units
        if good == max_units:
            return _result("steps", ev, good, sigma=sigma, q=q, steps=good * unit, delta=delta, target=target,
                           accountant=name, t0=t0,
                           details={"note": f"the target is met up to max_steps={max_steps}; more were not "
                                            "searched"})
        bad_u = math.log(max_units)
    if good_u is None:  # cannot happen: one unit is feasible (checked above)
        good_u = 0.0
    good, bad = to_x(good_u), to_x(bad_u)
    ub, ug = _narrow(ev, to_x, math.log(bad), math.log(good), 0.0, max_iter=200)
    good, bad = to_x(ug), to_x(ub)
    # finish exactly on the integers (the log-scale loop may stop when rounding merges points)
    while bad - good > 1:
        mid = (good + bad) // 2
        if ev.feasible(mid):
            good = mid
        else:
            bad = mid
    if not ev.feasible(good) or ev.feasible(bad):  # invariant of the search
        raise RuntimeError(f"internal error: step search ended on ({good}, {bad})")
    up_bad, b_bad = ev(bad)  # bad == good + 1 was evaluated and overshoots
    details = {"tightness": {"checked": bad * unit, "epsilon_upper": up_bad if math.isfinite(up_bad) else None,
                             "epsilon_lower": None if b_bad is None else b_bad.lower, "overshoots": True}}
    if unit > 1:
        details["multiple_of"] = unit
    return _result("steps", ev, good, sigma=sigma, q=q, steps=good * unit, delta=delta, target=target,
                   accountant=name, t0=t0, details=details)


def calibrate_sampling_rate(*, target_epsilon, delta, noise_multiplier, steps, accountant: str = DEFAULT_ACCOUNTANT,
                            eps_error: float | None = None, rtol: float = _DEFAULT_RTOL,
                            epsilon_fn: EpsilonFunction | None = None) -> Calibration:
    """The largest sampling rate in (0, 1] whose certified epsilon is at most ``target_epsilon``.

    Returns ``1.0`` when full batches already meet the target; otherwise the
    rate ``q`` meets it and ``1.01 q`` does not (checked). Raises
    ``CalibrationError`` below a rate of 1e-9.
    """
    t0 = time.perf_counter()
    target, delta, fns, name = _common(target_epsilon, delta, accountant, epsilon_fn, eps_error)
    sigma = check_positive("noise_multiplier", noise_multiplier)
    k = check_count("steps", steps)
    rtol = check_real("rtol", rtol, low=0.0, high=_TIGHTNESS)
    ev = _Evaluator(fns[0], target, lambda q: (sigma, q, k, delta), fns[1], fns[2])
    to_x = lambda u: min(1.0, math.exp(u))  # noqa: E731
    if ev.feasible(1.0):
        return _result("sampling_rate", ev, 1.0, sigma=sigma, q=1.0, steps=k, delta=delta, target=target,
                       accountant=name, t0=t0, details={"note": "full batches (sampling_rate = 1) meet the target"})
    guess = _clt_guess(target=target, delta=delta, k=k, sigma=sigma)
    u0 = math.log(min(guess, 1.0)) if guess and math.isfinite(guess) and guess > 0 else math.log(0.01)
    bad, good = _bracket(ev, to_x, u0, -1.0, math.log(_RATE_MIN), 0.0)
    if good is None:
        raise CalibrationError(
            f"no sampling rate down to {_RATE_MIN:g} meets target_epsilon={target:g} at delta={delta:g} "
            f"(noise_multiplier={sigma:g}, steps={k})")
    if bad is None:  # cannot happen: q = 1 is infeasible (checked above)
        bad = 0.0
    bad, good = _narrow(ev, to_x, bad, good, math.log1p(rtol))
    good, tight = _tighten(ev, to_x, good, math.log1p(_TIGHTNESS), rtol)
    q = to_x(good)
    return _result("sampling_rate", ev, q, sigma=sigma, q=q, steps=k, delta=delta, target=target,
                   accountant=name, t0=t0, details={"tightness": tight})


def _rate_and_steps(sampling_rate, steps, epochs, dataset_size, batch_size) -> tuple[float, int]:
    via_epochs = any(v is not None for v in (epochs, dataset_size, batch_size))
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

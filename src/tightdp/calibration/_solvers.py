"""The solvers behind ``calibrate``, one per parameter: the noise, the steps (or whole epochs) and a
scheme's free sampling rate; each searches on certified upper bounds (``tightdp._calibration_search``)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

from .._calibration_search import (
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
from .._validation import check_count, check_real
from ..runs import TrainingRun
from ..sampling import SamplingScheme
from ._shared import (
    _RATE_MIN,
    _SIGMA_MAX,
    _SIGMA_MIN,
    _TIGHTNESS,
    Calibration,
    EpsilonFunction,
    _common,
    _result,
    _scheme_details,
)


def _solve_noise(
    run: TrainingRun,
    *,
    target_epsilon: float,
    delta: float,
    accountant: str,
    eps_error: float | None,
    rel_error: float | None,
    rtol: float,
    epsilon_fn: EpsilonFunction | None,
    t0: float,
    **_: Any,
) -> Calibration:
    target, delta, fns, name = _common(target_epsilon, delta, accountant, epsilon_fn, eps_error, rel_error)
    rtol = check_real("rtol", rtol, low=0.0, high=_TIGHTNESS)
    scheme, q, k = run.sampling, run.sampling_rate, run.steps
    ev = _Evaluator(fns[0], target, lambda s: (run.replace(noise_multiplier=s), delta), fns[1], fns[2], fns[3], fns[4])
    to_x: Callable[[float], float] = lambda u: _round_sig(math.exp(u), DIGITS, up=True)
    guess = _clt_guess(target=target, delta=delta, q=q, k=k)
    if not scheme.amplifies:  # its certified bound is sqrt(epochs)/sigma-GDP: start there
        guess = _clt_guess(target=target, delta=delta, q=1.0, k=max(1, round(k * q)))
    u0 = math.log(guess) if guess and math.isfinite(guess) and guess > 0 else 0.0
    bad, good = _search(ev, to_x, u0, +1.0, math.log(_SIGMA_MIN), math.log(_SIGMA_MAX), math.log1p(rtol))
    safer: Callable[[float, int], float] = lambda s, i: _round_sig(s * (1 + rtol * 2**i), DIGITS, up=True)
    if bad is None and good is not None:
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


def _solve_steps(
    run: TrainingRun,
    *,
    target_epsilon: float,
    delta: float,
    accountant: str,
    eps_error: float | None,
    rel_error: float | None,
    max_steps: int,
    multiple_of: int,
    epsilon_fn: EpsilonFunction | None,
    t0: float,
    **_: Any,
) -> Calibration:
    target, delta, fns, name = _common(target_epsilon, delta, accountant, epsilon_fn, eps_error, rel_error)
    scheme, sigma, q = run.sampling, run.noise_multiplier, run.sampling_rate
    max_steps = check_count("max_steps", max_steps)
    unit = check_count("multiple_of", multiple_of)
    if scheme.per_epoch:
        unit = math.lcm(unit, scheme.epoch_length() or 1)
    max_units = max_steps // unit
    if max_units < 1:
        raise ValueError(f"max_steps ({max_steps}) must be >= multiple_of ({unit})")
    ev = _Evaluator(fns[0], target, lambda n: (run.replace(steps=n * unit), delta), fns[1], fns[2], fns[3], fns[4])
    if not ev.feasible(1) or ev.verify(1)[0] > target:
        raise CalibrationError(
            f"{unit} step(s) already exceed target_epsilon={target:g} at delta={delta:g} "
            f"(noise_multiplier={sigma:g}, sampling_rate={q:g}); certified epsilon <= {ev.verify(1)[0]:.6g}"
        )
    to_x: Callable[[float], int] = lambda u: max(1, int(math.floor(math.exp(u) * (1 + 1e-12))))
    guess = _clt_guess(target=target, delta=delta, q=q, sigma=sigma)
    if not scheme.amplifies and guess:  # sqrt(epochs)/sigma-GDP: (sigma mu)^2 epochs of 1/q steps
        epochs_guess = _clt_guess(target=target, delta=delta, q=1.0, sigma=sigma)
        guess = None if epochs_guess is None else epochs_guess / q
    u0 = math.log(min(max(guess / unit, 1.0), max_units)) if guess and math.isfinite(guess) else 0.0
    bad_u, good_u = _search(ev, to_x, u0, -1.0, 0.0, math.log(max_units), math.log1p(1e-4))
    safer: Callable[[int, int], int] = lambda n, i: max(1, n - max(1, int(n * 1e-4 * 2**i)))
    if bad_u is None and good_u is not None:
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
    if bad_u is None:  # cannot happen: with good_u set, the branch above set it
        bad_u = math.log(max_units)
    good, bad = to_x(good_u), to_x(bad_u)
    resolution: Callable[[int], int] = lambda g: max(1, int(g * 1e-4)) if g > 10_000 else 1
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


def _solve_epochs(run: TrainingRun, **kw: Any) -> Calibration:
    if not run.sampling.per_epoch:
        raise ValueError(
            f"parameter 'epochs' needs an epoch-based scheme (sampling={run.sampling.name!r} has no "
            "epochs of its own): calibrate 'steps'"
        )
    cal = _solve_steps(run, **kw)
    calibrated = cal.run
    if calibrated is None:  # pragma: no cover - _result records the run of every answer
        raise RuntimeError("internal error: a calibration without its run")
    return dataclasses.replace(cal, run=calibrated.replace(epochs=cal.steps // (run.sampling.epoch_length() or 1)))


def _rate_is_free(cls: type[SamplingScheme]) -> None:
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
    run: TrainingRun,
    *,
    target_epsilon: float,
    delta: float,
    accountant: str,
    eps_error: float | None,
    rel_error: float | None,
    rtol: float,
    epsilon_fn: EpsilonFunction | None,
    t0: float,
    **_: Any,
) -> Calibration:
    _rate_is_free(type(run.sampling))
    target, delta, fns, name = _common(target_epsilon, delta, accountant, epsilon_fn, eps_error, rel_error)
    scheme, sigma, k = run.sampling, run.noise_multiplier, run.steps
    rtol = check_real("rtol", rtol, low=0.0, high=_TIGHTNESS)
    at: Callable[[float], TrainingRun] = lambda q: run.replace(sampling_rate=q)
    ev = _Evaluator(fns[0], target, lambda q: (at(q), delta), fns[1], fns[2], fns[3], fns[4])
    to_x: Callable[[float], float] = lambda u: min(1.0, _round_sig(math.exp(u), DIGITS, up=False))
    safer: Callable[[float, int], float] = lambda q, i: _round_sig(q / (1 + rtol * 2**i), DIGITS, up=False)
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

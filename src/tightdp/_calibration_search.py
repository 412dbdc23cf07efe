"""The certified search behind ``tightdp.calibration``: feasibility judged on certified upper bounds
(``_Evaluator``, with a cheap coarse pass), a bracket on the log scale (``_bracket``), its safeguarded
narrowing (``_narrow``), the safe-side rounding of the answer (``_round_sig``, ``_finish``) and the
tightness proof (``_tighten``: a certified lower bound above the target one step towards the infeasible
side). Generic in the searched variable: ``calibration`` maps it to a run."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from typing import Any, TypeVar

from ._accuracy import describe_accuracy
from ._gdp_math import gdp_mu_within
from .bounds import Bounds
from .errors import CalibrationError

__all__ = ["CalibrationError", "DIGITS"]

#: ``fn(*point(x)) -> Bounds`` (epsilon): what ``_Evaluator`` evaluates; ``upper`` is what counts.
EpsilonFunction = Callable[..., Bounds]
#: ``safer(x, i)``: the next point towards the safe side after ``i + 1`` failed certifications.
SaferFunction = Callable[[float, int], float]
#: an evaluated point: a float, or an int for steps (``_finish`` keeps its type)
_Point = TypeVar("_Point", bound=float)
#: the log-scale search variable to the evaluated point (rounded to what is printed; integers for steps)
ToPoint = Callable[[float], float]
#: ``(upper, bounds)`` of one certified evaluation (``inf, None`` where it failed)
Evaluation = tuple[float, Bounds | None]

#: A certified evaluation slower than this (seconds) switches the search to its cheap levels: undecided
#: points count as infeasible (the safe side) instead of being evaluated at the full accuracy again.
_EXPENSIVE_SECONDS = 2.0


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

    def __init__(
        self,
        fn: EpsilonFunction,
        target: float,
        point: Callable[[float], tuple[Any, ...]],
        coarse: EpsilonFunction | None = None,
        fine_error: float = 0.0,
        tight: EpsilonFunction | None = None,
        accuracy: tuple[float, float | None] | None = None,
    ) -> None:
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

    def _eval(self, fn: EpsilonFunction, x: float) -> Evaluation:
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

    def _fine(self, x: float) -> Evaluation:
        if x not in self.fine:
            self.calls += 1
            t = time.perf_counter()
            self.fine[x] = self._eval(self.fn, x)
            self.fine_seconds = max(self.fine_seconds, time.perf_counter() - t)
            if self.coarse is not None and self.fine_seconds > _EXPENSIVE_SECONDS:
                self.expensive = True
        return self.fine[x]

    def _rough(self, x: float) -> Evaluation:
        if x not in self.rough:
            assert self.coarse is not None, "coarse evaluations need a coarse function"  # callers check it
            self.coarse_calls += 1
            self.rough[x] = self._eval(self.coarse, x)
        return self.rough[x]

    def _finer(self, x: float) -> Evaluation:
        if x not in self.finer:
            assert self.tight is not None, "finer evaluations need a tight function"  # callers check it
            self.calls += 1
            self.finer[x] = self._eval(self.tight, x)
        return self.finer[x]

    def feasible(self, x: float) -> bool:
        return self.evidence(x)[0] <= self.target

    def verify(self, x: float) -> Evaluation:
        """``(upper, Bounds)`` at the check accuracy: what the answer is certified on."""
        return self._fine(x)

    def evidence(self, x: float) -> Evaluation:
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

    def lower_bounds(self, x: float) -> Iterator[Evaluation]:
        """Certified evaluations at ``x``, cheapest first (for proving that ``x`` exceeds the target)."""
        if self.coarse is not None:
            yield self._rough(x)
        if not self.expensive or x in self.fine:
            yield self._fine(x)
        if self.tight is not None and not self.expensive:
            yield self._finer(x)

    def value(self, x: float) -> float:
        """Best guess of the fine upper bound at ``x`` (for interpolation only, never for decisions)."""
        if x in self.fine:
            return self.fine[x][0]
        if x in self.rough:
            up, b = self.rough[x]
            if b is not None and b.estimate is not None and math.isfinite(b.estimate) and math.isfinite(up):
                return float(b.estimate) + self.fine_error
            return up
        return self.evidence(x)[0]

    def __call__(self, x: float) -> Evaluation:
        return self.evidence(x)


def _interp(x0: float, f0: float, x1: float, f1: float, target: float) -> float | None:
    """Secant step on ``log f`` against ``x`` (x already on a log scale)."""
    if not (0 < f0 < math.inf and 0 < f1 < math.inf) or f0 == f1:
        return None
    l0, l1, lt = math.log(f0), math.log(f1), math.log(target)
    x = x0 + (lt - l0) * (x1 - x0) / (l1 - l0)
    return x if math.isfinite(x) else None


def _narrow(
    ev: _Evaluator, to_x: ToPoint, bad: float, good: float, tol: float, *, max_iter: int = 80
) -> tuple[float, float]:
    """Shrink the log-scale bracket ``(bad, good)`` (``good`` feasible, ``bad`` not) to width ``tol``.

    Safeguarded secant: each probe aims at the interpolated root, nudged by
    ``0.4 tol`` alternately to either side so both ends close in; plain
    bisection whenever interpolation fails or the bracket did not halve in
    two probes. ``to_x`` maps the log-scale variable to the evaluated point
    (integers for steps), and the loop stops when it can no longer separate.

    Not ``tightdp._numerics.falling_root``: feasibility is a predicate judged on certified bounds (coarse or
    fine, cached, the expensive points counting as infeasible), not the sign of one real function, and the
    interpolation reads the evaluator's estimates (``value``) that never decide a side; the probes also pass
    through ``to_x`` (rounding to integers or printed digits). Brent's steps on ``value`` would probe other
    points and change the calibrated answers.
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


def _finish(ev: _Evaluator, x: _Point, safer: Callable[[_Point, int], _Point], *, rounds: int = 12) -> _Point:
    """The point at or past ``x`` (towards the safe side) whose check-accuracy upper bound meets the target."""
    for i in range(rounds):
        up, b = ev.verify(x)
        if b is not None and up <= ev.target:
            return x
        x = safer(x, i)
    raise CalibrationError(
        f"no point near the solution could be certified at {_accuracy_text(ev)}; "
        + (ev.failures or ["the certified upper bound stays above the target"])[-1]
    )


def _accuracy_text(ev: _Evaluator) -> str:
    if ev.accuracy is None:
        return "the given epsilon_fn's accuracy"
    return describe_accuracy(*ev.accuracy)


def _bracket(
    ev: _Evaluator, to_x: ToPoint, u0: float, direction: float, lo: float, hi: float
) -> tuple[float | None, float | None]:
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


def _clt_guess(
    *, target: float, delta: float, q: float | None = None, k: float | None = None, sigma: float | None = None
) -> float | None:
    """The unknown one of (sigma, q, k) by the CLT/GDP approximation of DP-SGD (Bu et al. 2020):
    ``mu = q sqrt(k (exp(1/sigma^2) - 1))`` (``mu = sqrt(k) / sigma`` for ``q = 1``).

    Only a starting point for the certified search; ``None`` if it fails.
    """
    try:
        mu = gdp_mu_within(target, delta)
        if sigma is None:
            if q is None or k is None:  # exactly one of the three is the unknown
                return None
            if q == 1.0:
                return math.sqrt(k) / mu
            return 1.0 / math.sqrt(math.log1p(mu * mu / (q * q * k)))
        g = math.expm1(min(1.0 / (sigma * sigma), 700.0)) if q != 1.0 else 1.0 / (sigma * sigma)
        if k is None:
            return None if q is None else (mu / q) ** 2 / g
        return mu / math.sqrt(k * g)
    except (ArithmeticError, ValueError):  # PrecisionError is an ArithmeticError: no guess, the search starts cold
        return None


def _search(
    ev: _Evaluator, to_x: ToPoint, u0: float, direction: float, lo: float, hi: float, tol: float
) -> tuple[float | None, float | None]:
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


#: Neighbours tried (relative move towards the infeasible side) to show that the answer is tight.
_TIGHTNESS_STEPS = (0.01, 0.02, 0.05)


def _prove_exceeds(ev: _Evaluator, x: float) -> tuple[bool | None, float, Bounds | None]:
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


def _tighten(
    ev: _Evaluator,
    to_x: ToPoint,
    u: float,
    direction: float,
    rtol: float,
    *,
    safer: SaferFunction,
    max_rounds: int = 20,
) -> tuple[float, dict[str, Any]]:
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
                last = {
                    "checked": probe,
                    "step": frac,
                    "overshoots": None,
                    "note": "the neighbouring value could not be certified: " + (ev.failures or ["?"])[-1],
                }
                break
            if proved:
                return x, {
                    "checked": probe,
                    "step": frac,
                    "epsilon_upper": up if math.isfinite(up) else None,
                    "epsilon_lower": None if b is None else b.lower,  # (proved: b is never None)
                    "overshoots": True,
                }
            vup, vb = ev.verify(probe) if not ev.expensive or probe in ev.fine else (math.inf, None)
            if vb is not None and vup <= ev.target:  # a wobble: the boundary lies further out
                x = _finish(ev, probe, safer)
                moved = True
                break
            last = {
                "checked": probe,
                "step": frac,
                "epsilon_upper": up if math.isfinite(up) else None,
                "epsilon_lower": None if b is None else b.lower,
                "overshoots": False,
                "note": "no certified lower bound above the target within "
                + f"{frac:.0%}"
                + " (a smaller eps_error can prove more)",
            }
        if not moved:
            return x, last or {"checked": None, "note": "the neighbouring value rounds to the same point"}
    return x, {"checked": None, "note": "the bound is not monotone near the solution"}

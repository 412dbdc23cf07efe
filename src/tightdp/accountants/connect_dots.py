"""A PLD accountant whose bounds come from dominance instead of coupling (``tightdp.pld.dominance``).

The upper bound composes connect-the-dots pairs that dominate each mechanism
(Doroshenko et al. 2022); the lower bound composes merge-to-the-grid pairs that
each mechanism dominates. Both are exact statements about every grid, so the
grid need not shrink with the number of compositions. The first mesh comes from
a variance model; each further pass shrinks the mesh or the delta slack,
whichever made ``upper - lower`` exceed ``2 eps_error``.

Closed forms first: a ledger whose every step has a Gaussian privacy loss
(Gaussian mechanisms, subsampling at rate 1) is exactly ``mu``-GDP with
``mu^2 = sum_i c_i mu_i^2`` (Dong, Roth, Su 2022, Cor. 3.3) and is answered
from that curve, with only its certified float error in the interval; in a
mixed ledger the Gaussian steps are folded into one Gaussian step of that
``mu`` (an exact identity of privacy curves) before discretising. Every
mechanism whose privacy loss gives both sides' CDFs is discretised this way:
Gaussians and Gaussian mixtures (every subsampled Gaussian, group mixtures) by
their outputs, Laplace, subsampled Laplace, randomized response, pure and
approximate DP by closed-form cell masses in loss space
(``tightdp.pld.dominance``). Only a ledger with a loss that cannot (none among
tightdp's mechanisms today), and the rare queries the constructions cannot
resolve, go to the PRV accountant (``details["fallback"]`` says why).

The accuracy targets, the ledger's directions, the closed form, the mesh model and the fallback are in
``_connect_dots_core``; this module composes the pairs and runs the refinement loops of both queries. It is a
little over the project's ~600-line guideline on purpose: the epsilon and delta refinement loops share their
compositions and stopping rules, and reading them side by side is what makes their certified directions checkable.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from .._gdp_math import gdp_delta_bounds
from .._types import FloatArray
from ..bounds import Bounds
from ..errors import GridTooLargeError, LossRangeError, PrecisionError
from ..pld import ComposedPLD, CurveBounds, chernoff_epsilon, compose, delta_bounds, epsilon_bounds
from ..pld.composition import saddle_tilt
from ..pld.dominance import (
    dominated,
    dominating,
)
from ..pld.hierarchy import compose_two_level
from ._adaptive_groups import AdaptiveGroups
from ._connect_dots_core import _PASS_CELLS, _TAIL_BELOW, _TINY, _budget, _ConnectDotsCore
from ._pld import Directions, Terms
from ._two_level_plan import BLOCK_TAU, two_level_plan

__all__ = ["ConnectDotsAccountant"]

#: the most cells of a delta pass that only narrows intervals already certified (``_delta_pass``)
_IMPROVE_CELLS = 1 << 23


_UP = "estimate upper"  # what a dominating composition is asked for


class ConnectDotsAccountant(AdaptiveGroups, _ConnectDotsCore):
    """Certified bounds from dominating (upper) and dominated (lower) discretisations.

    Every pass's interval is certified, so the answer is their intersection: a refinement
    never widens it.

    Parameters
    ----------
    eps_error : float, optional
        Absolute accuracy: the mesh is refined until ``upper - lower <= 2 * eps_error`` (or
        ``max_refinements``); with ``rel_error``, the floor of the relative target.
    rel_error : float, optional
        Relative accuracy: refine until ``upper - lower <= 2 * max(rel_error * epsilon, eps_error)``.
        With neither given, the default (``tightdp._accuracy``): ``rel_error=1e-3``, floor
        ``eps_error=5e-5`` (epsilon to about three significant digits at every scale); ``eps_error``
        alone is an absolute target.
    delta_error : float, optional
        Delta slack for truncation and aliasing (default ``1e-3 * delta``).
    max_refinements : int, default 8
        Most mesh refinements per query, in ``[0, 20]``.

    Raises
    ------
    ValueError
        An accuracy or ``max_refinements`` out of its domain, naming the argument.

    References
    ----------
    Doroshenko et al. 2022 (connect the dots: the pessimistic pair through the privacy profile's points
    and the optimistic merge-to-the-grid pair); Dong, Roth, Su 2022, Cor. 3.3 (the all-Gaussian closed
    form); Gopi et al. 2021, Thm 5.5 (the PRV fallback).
    """

    name = "connect-dots"

    def _composed(
        self,
        d: int,
        terms: Terms,
        h: float,
        tail: tuple[float, float],
        upper: bool,
        tilt_delta: float | None,
        tau: float,
        *,
        top_down: bool = False,
        tilt_eps: float | None = None,
    ) -> ComposedPLD:
        """The composition of the dominating (``upper``) or dominated pairs of direction ``d``
        (``top_down``: the dominated pairs of the downward merge). The FFT is tilted towards where
        ``delta = tilt_delta`` is decided, or towards the loss ``tilt_eps``, or not at all."""

        def build() -> ComposedPLD:
            # two levels only for tilted compositions: the blocks' round-off adds up, relative to delta only there
            plan = None if tilt_delta is None and tilt_eps is None else two_level_plan(terms, h)
            mesh = h if plan is None else plan[0]
            if upper:
                parts = [(dominating(loss, mesh, tail), c) for loss, c in terms]
            else:
                parts = [(dominated(loss, mesh, tail, top_down=top_down), c) for loss, c in terms]
            if tilt_eps is not None:
                tilt = saddle_tilt(parts, tilt_eps)
            else:
                tilt = 0.0 if tilt_delta is None else chernoff_epsilon(parts, tilt_delta)[1]
            if plan is not None:
                out = compose_two_level(
                    parts,
                    plan[1],
                    plan[2],
                    upper=upper,
                    tilt=tilt,
                    tau=tau,
                    block_tau=tau * BLOCK_TAU,
                    top_down=top_down,
                )
                if out is not None:
                    return out
                parts = [
                    (dominating(loss, h, tail) if upper else dominated(loss, h, tail, top_down=top_down), c)
                    for loss, c in terms
                ]  # one level after all
            return compose(parts, tilt=tilt, tau=tau)

        return self._memo(("cd", d, upper, top_down, h, tail, tilt_delta, tau, tilt_eps), build)

    def _epsilon_numeric(self, delta: float) -> Bounds:
        mu = self._gaussian_mu()
        if mu is not None:
            return self._closed_form_epsilon(mu, delta)
        other = self._undominated()
        if other is not None:
            return self._fallback(delta, f"no dominance discretisation for {other}")
        tv = self._total_variation()
        if tv is not None and tv < delta:
            return Bounds(0.0, 0.0, 0.0, "epsilon", "bound", {"note": f"delta(0) <= {tv:.3g} < delta: epsilon 0"})
        try:
            out = self._epsilon_dominance(delta)
        except LossRangeError as exc:
            raise LossRangeError(f"{exc}; {self._unsampled_hint(delta)}") from None
        except GridTooLargeError:
            raise  # the PRV accountant would need a finer grid still
        except ArithmeticError as exc:  # PrecisionError included
            return self._fallback(delta, str(exc))
        if math.isinf(out.upper) and not math.isinf(out.lower):  # not a genuinely infinite epsilon
            return self._fallback(delta, str(out.details.get("note", "window too small")))
        if out.upper - out.lower > self._target(out.upper) * (1.0 + 1e-9):
            if "grid_cap" in out.details:
                return out  # certified but wider than asked; the PRV accountant would need a finer grid still
            # the constructions did not converge (e.g. a tiny delta decided by rare steps, where merging
            # to the grid swallows the tail): both intervals are certified, so answer their intersection
            try:
                prv = self._fallback(delta, f"dominance interval {out.upper - out.lower:.3g} wide")
            except ArithmeticError as exc:  # PRV cannot do better: the wide interval is still certified
                return Bounds(
                    out.lower,
                    out.estimate,
                    out.upper,
                    "epsilon",
                    "bound",
                    {**dict(out.details), "note": f"wider than 2 eps_error; PRV fallback failed: {exc}"},
                )
            lower, upper = max(out.lower, prv.lower), min(out.upper, prv.upper)
            if lower > upper:  # two certified intervals that miss each other: a bug, never hide it
                raise PrecisionError(
                    f"internal: dominance bounds [{out.lower}, {out.upper}] and coupling bounds "
                    f"[{prv.lower}, {prv.upper}] do not intersect"
                )
            est = min(max(prv.estimate, lower), upper)
            return Bounds(lower, est, upper, "epsilon", "bound", {**dict(prv.details), "dominance": dict(out.details)})
        return out

    def _epsilon_dominance(self, delta: float) -> Bounds:
        """Refine until ``upper - lower <= 2 eps_error``.

        The width has two parts: the gap between the two constructions'
        discrete answers (discretisation, shrinking like ``h^2``) and the gap
        between each answer and its certified bound (truncation, aliasing and
        round-off, proportional to the delta slack; far out in the tail,
        where the curve is flat in epsilon, a slack of ``1e-3 delta`` can move
        epsilon by more than ``eps_error``). Each pass shrinks whichever part
        is too large: the mesh, or the slack (and then the FFT is tilted so
        that round-off is relative to delta).
        """
        t0 = time.perf_counter()
        # the share of delta the finite losses must meet (``_finite_share``): the slack, the tilt and the mesh
        # aim at it; the bounds are always those of delta itself
        eff = self._finite_share(delta)
        slack = self.delta_error if self.delta_error is not None else 1e-3 * eff
        k_total = sum(c for _, c in self._ledger)
        # a bounded loss caps epsilon exactly (``_support_ceiling``): the passes refine towards it
        top, p_inf = self._support_ceiling()
        cap = top if math.isfinite(top) and delta >= p_inf * (1.0 + 1e-12) else math.inf
        # FFT round-off is bounded by about k u log N of the total mass: tilt the FFT towards the
        # answer unless delta is far above that
        directions = self._directions()
        z = math.sqrt(2.0 * math.log(1.0 / eff))
        h = self._model_mesh(directions, z)
        # (and where the composition would take two levels, whose blocks' round-off adds up over the blocks)
        tilted = eff < 1e-6 or k_total * 1e-10 > eff or two_level_plan(directions[0], h) is not None
        if self.delta_error is None:
            slack = eff * self._slack_share(directions, z)
        h = self._mesh_the_merge_holds(directions, h, _budget(eff, slack, k_total, tilted)[0])
        target = 2.0 * self.eps_error
        run_lo, run_up = 0.0, math.inf  # the intersection of every pass's certified interval
        passes = 0
        trace: list[dict[str, Any]] = []  # the passes that did not reach the target (details["refinements"])
        coarse: dict[int, float] = {}  # direction -> mesh of its cheapest upper bound so far
        best = None  # the last completed pass: (mesh, slack, ups, lo)
        capped = None
        merged_down = None  # the mesh the downward merge last ran on
        deep_probe = False  # one pass on a quarter of the mesh after two without progress (below)
        for passes in range(1, self.max_refinements + 2):
            try:
                ups, lo, tail_eps = self._one_pass(delta, directions, h, slack, k_total, tilted, coarse)
            except (GridTooLargeError, MemoryError) as exc:
                if best is None:
                    raise
                # refinement hit the memory cap, or the machine's memory: answer with the last (wider) pass
                capped = str(exc) if isinstance(exc, GridTooLargeError) else f"out of memory ({exc or 'no detail'})"
                self._cache.clear()
                h, slack, ups, lo = best
                passes -= 1
                break
            best = (h, slack, ups, lo)
            j = max(ups, key=lambda i: ups[i].upper)
            lower, upper, estimate = lo.lower, min(ups[j].upper, cap), min(ups[j].estimate, cap)
            run_lo, run_up = max(run_lo, lower), min(run_up, upper)
            lower, upper = run_lo, run_up
            target = self._target(upper)
            width = upper - lower
            if width > target and math.isfinite(upper) and not self._upper_only and lower < 0.5 * upper:
                # a lower bound off by half or more is the upward merge swallowing a light tail into the
                # bulk (rare steps deciding a tiny delta), not the mesh: the downward merge on the same
                # mesh keeps the tail (certified too), and is much cheaper than a finer mesh
                run_lo = max(run_lo, self._lower_down(j, directions, h, delta, slack, k_total, tilted))
                lower = run_lo
                width = upper - lower
                merged_down = h
            if width <= target or not math.isfinite(upper) or self._upper_only:
                break
            if len(trace) >= 2 and width > 0.9 * trace[-2]["width"]:
                # two passes without progress: more of the same will not help. Unless the lower end is what
                # lags and passes are cheap: a merge can fail below a threshold mesh and hold above it
                # (sigma 0.287, q 0.01, k = 1000, eps ~ 80: lower ends 0.2 under at meshes 7.6e-3, 5.3e-3,
                # 3.7e-3, then 0.007 at 1.85e-3; giving up sent it to the PRV fallback, 35-40 s), so one
                # pass on a quarter of the mesh is tried first
                lagging = math.isfinite(lo.estimate) and estimate - lower > 0.5 * width
                if deep_probe or not lagging or time.perf_counter() - t0 > 2.0:
                    break
                deep_probe = True
                trace.append(
                    {
                        "mesh": h,
                        "delta_error": slack,
                        "tilted": tilted,
                        "width": width,
                        "numerical": 0.0,
                        "slack_cut": False,
                        "deep_probe": True,
                    }
                )
                h = self._snap(0.25 * h, directions)
                tilted = tilted or two_level_plan(directions[0], h) is not None
                coarse = {d: m for d, m in coarse.items() if m > 4.0 * h}
                self._cache.clear()
                continue
            numerical = (upper - estimate) + max(lo.estimate - lower, 0.0) if math.isfinite(lo.estimate) else 0.0
            numerical += tail_eps
            discretisation = width - numerical
            trace.append({"mesh": h, "delta_error": slack, "tilted": tilted, "width": width, "numerical": numerical})
            # the slack moves epsilon too much: spend less of it, unless that did not help last time
            # (then the gap inside a construction is the grid's doing, and the mesh shrinks instead)
            slack_helps = len(trace) < 2 or not trace[-2]["slack_cut"] or numerical < 0.7 * trace[-2]["numerical"]
            trace[-1]["slack_cut"] = numerical > 0.4 * target and slack_helps
            if trace[-1]["slack_cut"]:
                slack *= max(1e-6, min(0.5, 0.3 * target / numerical))
                tilted = True
                coarse = {}
            if discretisation > 0.6 * target or not trace[-1]["slack_cut"]:
                # the width shrinks like h^2: aim a little below the target, at least halve the cost
                h = self._snap(
                    h * min(0.7, max(0.25, 0.9 * math.sqrt(target / max(width, discretisation)))), directions
                )
                tilted = tilted or two_level_plan(directions[0], h) is not None
                coarse = {d: m for d, m in coarse.items() if m > 4.0 * h}  # keep coarse bounds still cheap
            self._cache.clear()  # what is memoised belongs to the previous mesh or slack (and can be large)
        j = max(ups, key=lambda i: ups[i].upper)
        lower, upper, estimate = lo.lower, min(ups[j].upper, cap), min(ups[j].estimate, cap)
        lower, upper = max(lower, run_lo), min(upper, run_up)
        if (
            upper - lower > target
            and math.isfinite(upper)
            and capped is None
            and not self._upper_only
            and merged_down != h
        ):
            # still too wide: the upward merge may have swallowed a light tail into the bulk; the
            # downward merge keeps it (both certified: take the better lower bound)
            lower = max(lower, self._lower_down(j, directions, h, delta, slack, k_total, tilted))
            merged_down = h
        est = min(max(estimate, lower), upper)
        details: dict[str, Any] = {
            "mesh": h,
            "passes": passes,
            "seconds": time.perf_counter() - t0,
            "delta_error": slack,
        }
        if merged_down is not None:
            details["lower_merge"] = "upward and downward sweeps (the better lower bound)"
        if trace:
            details["refinements"] = trace
        notes = [b.note for b in (*ups.values(), lo) if b.note]
        if capped is not None:
            details["grid_cap"] = capped
            notes.append(
                f"interval {upper - lower:.3g} wide, more than the target: refining further would "
                f"exceed the grid cap or the memory ({capped})"
            )
        if notes:
            details["note"] = notes[0]
        return Bounds(float(lower), float(est), float(upper), "epsilon", "bound", details)

    def _lower_down(
        self, j: int, directions: Directions, h: float, delta: float, slack: float, k_total: int, tilted: bool
    ) -> float:
        """The certified lower bound on epsilon from the downward merge-to-the-grid pairs of direction ``j``."""
        tail, tau, tilt_delta = _budget(self._finite_share(delta), slack, k_total, tilted)
        down = self._composed(j, directions[j], h, tail, False, tilt_delta, tau, top_down=True)
        return epsilon_bounds(down, delta, _TINY, need="lower").lower

    def _one_pass(
        self,
        delta: float,
        directions: Directions,
        h: float,
        slack: float,
        k_total: int,
        tilted: bool,
        coarse: dict[int, float],
    ) -> Any:
        """One refinement pass: ``(ups, lo, tail_eps)``, every direction's upper bound, the worst one's lower
        bound, and how far the worst upper composition's estimate moves when its upper-tail mass (sent to
        +inf, up to half the slack) is discounted: part of the interval only a smaller slack removes.

        The first direction (remove, the usual worst case) is composed on the
        mesh ``h``, the others first on a mesh four times coarser: any mesh
        gives a valid upper bound, and a direction whose coarse bound is
        already below the worst one cannot change the answer. The dominated
        composition of the worst direction bounds epsilon from below (the max
        over directions of lower bounds is at least any one of them).
        ``coarse`` (direction -> mesh used) is updated in place.
        """
        tail, tau, tilt_delta = _budget(self._finite_share(delta), slack, k_total, tilted)
        first = self._composed(0, directions[0], h, tail, True, tilt_delta, tau)
        ups = {0: epsilon_bounds(first, delta, _TINY, need=_UP)}
        for d in range(1, len(directions)):
            if self._swap_bound_below(first, directions[0], directions[d], ups[0].upper, delta):
                # this direction's epsilon is at most the first's: no composition needed
                ups[d] = CurveBounds(0.0, 0.0, ups[0].upper)
                continue
            hd = coarse.get(d, 4.0 * h)
            b = epsilon_bounds(
                self._composed(d, directions[d], hd, tail, True, tilt_delta, tau), delta, _TINY, need=_UP
            )
            if hd > h and b.upper >= ups[0].upper:  # too close to call: redo it on the fine mesh
                hd = h
                b = epsilon_bounds(
                    self._composed(d, directions[d], h, tail, True, tilt_delta, tau), delta, _TINY, need=_UP
                )
            coarse[d] = hd
            ups[d] = b
        j = max(ups, key=lambda i: ups[i].upper)  # on the fine mesh: coarse ones lost to ups[0]
        if self._upper_only:  # no dominated composition: the lower end stays the trivial 0
            return ups, CurveBounds(0.0, ups[j].estimate, math.inf), 0.0
        lo = epsilon_bounds(
            self._composed(j, directions[j], h, tail, False, tilt_delta, tau), delta, _TINY, need="lower estimate"
        )
        comp_j = first if j == 0 else self._composed(j, directions[j], coarse.get(j, h), tail, True, tilt_delta, tau)
        shifted = epsilon_bounds(comp_j, min(delta + 0.5 * slack, 1.0), _TINY, need="estimate").estimate
        tail_eps = max(ups[j].estimate - shifted, 0.0) if math.isfinite(ups[j].estimate) else 0.0
        return ups, lo, tail_eps

    def _delta_numeric(self, epsilons: FloatArray) -> Bounds:
        mu = self._gaussian_mu()
        if mu is not None:
            lo, est, hi = gdp_delta_bounds(mu, epsilons)
            return Bounds(
                lo,
                est,
                hi,
                "delta",
                "bound",
                {"method": "closed form: exact mu-GDP (Dong, Roth, Su 2022, Cor. 3.3)", "mu": mu},
            )
        other = self._undominated()
        if other is not None:
            return self._fallback(0.0, f"no dominance discretisation for {other}", epsilons=epsilons)
        steps = self._step_bounds(epsilons)  # total variation above, tail events below: no grid
        if steps is not None and self._steps_enough(*steps):
            return self._steps_answer(*steps, f"delta(eps) <= delta(0) <= {float(np.max(steps[1])):.3g}")
        try:
            return self._delta_dominance(epsilons, steps)
        except ArithmeticError as exc:  # PrecisionError included
            near = self._steps_near(steps, exc)  # within 5 %: no slower fallback
            return (
                near
                if near is not None
                else self._steps_within(self._fallback(0.0, str(exc), epsilons=epsilons), steps)
            )

    def _delta_dominance(self, epsilons: FloatArray, steps: tuple[FloatArray, FloatArray] | None = None) -> Bounds:
        """``delta(eps)`` with a delta slack relative to the answer.

        A first, untilted pass spends an absolute slack of ``1e-9`` (or
        ``delta_error``); its intervals are intersected with ``steps`` (each
        step's bounds, ``_step_bounds``), if given. Where that leaves the
        interval wide relative to the answer (deltas far below 1e-6, where a
        fixed slack would make the upper bound vacuous and the mesh refinement
        endless), each such epsilon is answered again with an FFT tilted
        towards it (``saddle_tilt``) and a slack of ``1e-3`` of its estimate;
        the better certified ends of the passes are kept (all are bounds).
        The estimate sizing the next slack leaves out the mass the last pass
        sent to ``+inf`` and is at least the lower end: a delta far below the
        slack takes one pass, not a chase dividing the slack by 1e3 a pass.
        """
        t0 = time.perf_counter()
        k_total = sum(c for _, c in self._ledger)
        directions = self._directions()
        slack = self.delta_error if self.delta_error is not None else 1e-9
        # one epsilon of a long run: the first pass too is tilted towards it, which lets it compose in two
        # levels (untilted, one level: A, k = 1e7 took 1.2 s where epsilon(delta) takes 0.02 s)
        first_tilt = None
        if (
            epsilons.size == 1
            and math.isfinite(float(epsilons[0]))
            and two_level_plan(directions[0], self._model_mesh(directions, 5.0)) is not None
        ):
            first_tilt = float(epsilons[0])
        try:
            lower, est, upper, h = self._delta_pass(epsilons, directions, k_total, slack, first_tilt)
        except (GridTooLargeError, MemoryError, ArithmeticError):
            if first_tilt is None:
                raise
            # a tilt the window cannot hold (epsilon ~ 5e5, sigma 0.42, q 0.31, k = 1e6: a tilted window of
            # 1.8e7 loss units): the untilted first pass, as for several epsilons
            self._cache.clear()
            first_tilt = None
            lower, est, upper, h = self._delta_pass(epsilons, directions, k_total, slack, None)
        lower, upper = self._intersect_steps(lower, upper, steps)
        last_slack = np.full(epsilons.shape, slack)  # the slack of the pass behind each estimate
        tilted = []

        def wide() -> Any:
            return (upper - lower > 0.05 * np.maximum(est, 1e-300)) & (upper < 1e-5)

        if self.delta_error is None:
            # smallest delta first: a tilted pass's compositions certify every epsilon, and the slack sized for
            # the smallest delta is small enough for the larger ones nearby, which are then often done too
            for i in np.flatnonzero(wide())[::-1]:
                if not wide()[i]:
                    continue
                e = float(epsilons[i])
                share = 1e-3  # the next slack's share of the estimate
                for _ in range(4):  # each pass's estimate sizes the next one's slack
                    guess = max(float(est[i]) - 0.5 * float(last_slack[i]), float(lower[i]), 1e-280)
                    if share < 1.0 and share * guess >= 0.5 * float(last_slack[i]):
                        break  # no smaller slack to try (the floor reached)
                    rest = np.flatnonzero(wide())
                    try:
                        *_, lo_r, est_r, up_r = self._delta_pass(
                            np.array([e]), directions, k_total, share * guess, e, epsilons[rest], _IMPROVE_CELLS
                        )
                    except ArithmeticError:  # the intervals so far stand (certified, wider)
                        break
                    before = upper[i] - lower[i]
                    lower[rest], upper[rest] = np.maximum(lower[rest], lo_r), np.minimum(upper[rest], up_r)
                    est[rest] = np.minimum(np.maximum(est_r, lower[rest]), upper[rest])
                    last_slack[i] = share * guess  # (the others' estimates come from a tilt elsewhere)
                    k = int(np.searchsorted(rest, i))
                    # an upper end far above its estimate is the tilted FFT's error, relative to a Chernoff bound
                    # that deeper tails only raise (1e-31 at slack 1.5e-31, 2.7e-25 at 1e-34): spend the estimate
                    share = 1.0 if up_r[k] > 10.0 * max(float(est_r[k]), 1e-300) else 1e-3
                    if upper[i] - lower[i] <= 0.05 * est[i] or upper[i] - lower[i] > 0.5 * before:
                        break  # done, or stuck (a delta of 1e-100 whose upper end a floor of the tails holds)
                tilted.append(e)
        est = np.clip(est, lower, upper)
        details: dict[str, Any] = {"mesh": h, "seconds": time.perf_counter() - t0}
        if first_tilt is not None:
            details["first_pass"] = "tilted towards epsilon (two-level composition)"
        if tilted:
            details["tilted"] = f"{len(tilted)} epsilon(s) answered again with a tilted FFT and relative slack"
        return Bounds(lower, est, upper, "delta", "bound", details)

    def _delta_pass(
        self,
        epsilons: FloatArray,
        directions: Directions,
        k_total: int,
        slack: float,
        tilt_eps: float | None,
        also: FloatArray | None = None,
        max_cells: int | None = None,
    ) -> Any:
        """One refinement loop of ``delta(eps)`` at a fixed slack: ``(lower, estimate, upper, mesh)``; with
        ``also`` (more epsilons), the final compositions' certified ``(lower, estimate, upper)`` there too; with
        ``max_cells``, no mesh finer than a composition of that many cells (a pass that only improves intervals
        already certified: a delta at the top of an atom's support, 2.5e-7 below it, refined to 2^26 cells, 7 GB; 2^23 cells is about 1 s an FFT)."""
        tail = (_TAIL_BELOW * 0.5 * slack / k_total, 0.5 * slack / k_total)
        tau = 1e-13 if tilt_eps is not None else min(1e-6, 0.05 * slack)
        z = math.sqrt(2.0 * math.log(1.0 / max(min(slack * 1e3, 0.5), 1e-300))) if tilt_eps is not None else 5.0
        h = self._model_mesh(directions, z)  # the model needs a delta scale: about 1e-6 untilted
        span = self._rare_span(directions, tail)  # 0 unless rare steps decide delta
        h = max(h, self._snap(span / _PASS_CELLS, directions)) if span > 0.0 else h
        last_excess = None
        for _ in range(self.max_refinements + 1):
            los, ests, ups, shifted, comps = [], [], [], [], []
            uppers = []
            for d, terms in enumerate(directions):
                cu = self._composed(d, terms, h, tail, True, None, tau, tilt_eps=tilt_eps)
                uppers.append((cu, *delta_bounds(cu, epsilons, _TINY)[1:]))
            worst = np.argmax([u for *_, u in uppers], axis=0)  # the direction that decides each epsilon
            for d, terms in enumerate(directions):
                cu, e_u, u = uppers[d]
                lows = []
                lo = np.zeros_like(u)  # delta's lower end is the largest of the directions': only the worst counts
                if np.any(worst == d):
                    lows.append(self._composed(d, terms, h, tail, False, None, tau, tilt_eps=tilt_eps))
                    lo = delta_bounds(lows[0], epsilons, _TINY)[0]
                    if not self._upper_only and np.any((lo < 0.5 * u) & (worst == d)):
                        # the upward merge may have swallowed a light tail (rare steps): the downward merge on
                        # the same mesh keeps it (both certified; the better lower bound counts, as for epsilon)
                        lows.append(
                            self._composed(d, terms, h, tail, False, None, tau, top_down=True, tilt_eps=tilt_eps)
                        )
                        lo = np.maximum(lo, delta_bounds(lows[1], epsilons, _TINY)[0])
                los.append(lo)
                ests.append(e_u)
                ups.append(u)
                comps.append((cu, lows))
                shifted.append(delta_bounds(cu, epsilons + 0.5 * self._targets(epsilons), _TINY)[1])
            lower, upper = np.max(los, axis=0), np.max(ups, axis=0)
            # stop when the delta interval is no wider than moving epsilon by eps_error would make it, or
            # (relative accuracy) when it states delta to the same relative accuracy as epsilon, or when what
            # is left is the slack's doing (a finer mesh cannot remove it). Without the relative clause, a
            # flat curve (delta within 1e-7 of 1 at eps = 0, k = 1e6) halved the mesh eight times: 79 s.
            enough = np.maximum(np.max(ests, axis=0) - np.max(shifted, axis=0), 4.0 * slack)
            if self.rel_error is not None:
                enough = np.maximum(enough, 2.0 * self.rel_error * upper)
            if np.all(upper - lower <= enough):
                break
            excess = float(np.max((upper - lower) / np.maximum(enough, 1e-300)))
            if last_excess is not None and excess > 0.8 * last_excess:
                break  # halving the mesh did not narrow the intervals: the constructions, not the grid, limit them
            last_excess = excess
            if span > 0.0 and span > 0.5 * h * _PASS_CELLS:
                break  # rare steps: a finer mesh would exceed the cells a pass may span (``_rare_span``)
            if max_cells is not None and 2 * max(c.tilted.size for c, _ in comps) > max_cells:
                break  # an improving pass: the intervals so far stand
            h /= 2.0
            self._cache.clear()  # compositions of the previous mesh (can be large)
        out = (lower, np.max(ests, axis=0), upper, h)
        if also is None:
            return out
        more = [
            (
                np.max([delta_bounds(c, also, _TINY)[0] for c in lows], axis=0) if lows else np.zeros(len(also)),
                *delta_bounds(cu, also, _TINY)[1:],
            )
            for cu, lows in comps
        ]
        return out + tuple(np.max([m[i] for m in more], axis=0) for i in range(3))

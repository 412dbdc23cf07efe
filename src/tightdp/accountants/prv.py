"""The PRV accountant (Gopi, Lee, Wutschitz 2021; paper 003) with certified two-sided bounds.

The mesh comes from the error budget: the coupling shift of 003 Thm 5.5 is
``t = r sqrt(k log(1/eta) / 2)`` for ``k`` compositions with cells of width
``r = h``, so ``h = eps_error / sqrt(k log(1/eta) / 2)`` (mesh ~ 1/sqrt(k),
003 Sec. 5). The domain is not a fixed ``[-L, L]``: it is a Chernoff window
around the exponentially tilted composition (see ``tightdp.pld.compose``), of
width O(sqrt(k)) in loss units but centred where ``delta(eps)`` is decided, so
the cost is O(b * sqrt(k)) points for ``b`` distinct mechanisms and tiny
deltas (down to 1e-30 and below) keep full relative precision.

Answers: ``upper`` is a proven bound (up to the correctness of scipy's special
functions and quadrature error estimates), ``lower`` likewise, and
``upper - lower`` is about ``2 * eps_error``.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from .._validation import check_delta, check_eps_error, check_positive
from ..bounds import Bounds
from ..errors import PrecisionError
from ..pld import chernoff_epsilon, coarsen, compose, delta_bounds, discretise, epsilon_bounds, saddle_tilt
from ._pld import PLDAccountant, check_mechanism

__all__ = ["PRVAccountant"]

def _taus(slack: float, tilt: float) -> tuple[float, ...]:
    """Window levels to try: untilted, aliased mass counts in full against the delta slack, so a
    small fraction of it suffices; tilted, it is scaled by the untilting factor, so start lower."""
    first = min(1e-6, 0.05 * slack) if tilt == 0.0 else 1e-13
    return (first, first * 1e-7, first * 1e-17)
_HIERARCHY_MIN_STEPS = 3000


def _round_mesh(h: float) -> float:
    """Round ``h`` down to a power of 2**(1/8) so nearby queries share cached discretisations."""
    k = math.floor(8 * math.log2(h))
    return 2.0 ** (k / 8)


class PRVAccountant(PLDAccountant):
    """Certified PLD accountant with mesh and domain derived from an error budget (paper 003).

    Parameters
    ----------
    eps_error:
        Half-width of the epsilon interval (the coupling shift of 003 Thm 5.5);
        ``upper - lower`` is about ``2 * eps_error``.
    delta_error:
        Total delta slack spent on the coupling failure probability, truncation
        and numerics. Default: ``1e-3 * delta`` for ``epsilon(delta)`` and
        ``1e-3`` of the answer for ``delta(eps)``.
    """

    name = "prv"

    def __init__(self, *, eps_error: float = 0.01, delta_error: float | None = None) -> None:
        self.eps_error = check_eps_error("eps_error", eps_error)
        self.delta_error = None if delta_error is None else check_delta("delta_error", delta_error)
        super().__init__()
        self._ledger_changed()

    def options(self) -> dict[str, Any]:
        return {"eps_error": self.eps_error, "delta_error": self.delta_error}

    def _supports(self, mechanism) -> bool:
        check_mechanism(mechanism)
        return True

    # ------------------------------------------------------------------ plan
    def _plan(self, terms, eta: float, trunc: float):
        k = sum(c for _, c in terms)
        h = _round_mesh(0.985 * self.eps_error / math.sqrt(0.5 * k * math.log(1.0 / eta)))
        tail = trunc / k
        return [(discretise(loss, h, tail), c) for loss, c in terms], h

    def _hierarchical(self, terms, eta: float, trunc: float):
        """Final-level terms of a two-level composition (``tightdp.pld.hierarchy``), or None if not worth it.

        Blocks of ``m ~ sqrt(k)`` steps on the fine mesh ``h1``, re-binned on ``h2 = sqrt(m) h1``; ``h1`` is
        chosen so that the total Hoeffding range, ``sum (sqrt(m) h1 + h2)^2 <= 4 h1^2 (k + m T)``, equals the
        single-level one, ``k h^2``.
        """
        k = sum(c for _, c in terms)
        if k < _HIERARCHY_MIN_STEPS:
            return None
        h = 0.985 * self.eps_error / math.sqrt(0.5 * k * math.log(1.0 / eta))
        m = max(4, int(math.sqrt(k)))
        h1 = _round_mesh(h * math.sqrt(k) / (2.0 * math.sqrt(k + m * len(terms))))
        h2 = math.sqrt(m) * h1
        tail = trunc / k
        out = []
        for loss, c in terms:
            out += coarsen(discretise(loss, h1, tail), c, min(m, c), h2, tau=min(1e-15, 1e-3 * eta * m / k))
        return out

    def _composed(self, direction: int, terms, eta, trunc, tilt, tau, tv_budget=None):
        """The composition for one direction: two-level when untilted and long enough (if its l1 block
        error fits ``tv_budget``, default ``eta``), else single-level."""
        tilt = round(tilt, 3)
        if tilt == 0.0:
            budget = eta if tv_budget is None else tv_budget
            key = ("hier", direction, round(eta, 300), round(trunc, 300), tau, budget)

            def build():
                final = self._hierarchical(terms, eta, trunc)
                if final is None:
                    return None
                comp = compose(final, tilt=0.0, tau=tau)
                return comp if comp.tv_error <= budget else None  # else: not worth it, go flat

            comp = self._memo(key, build)
            if comp is not None:
                return comp
        disc, h = self._plan(terms, eta, trunc)
        key = ("comp", direction, h, round(trunc, 300), tilt, tau)
        return self._memo(key, lambda: compose(disc, tilt=tilt, tau=tau))

    # --------------------------------------------------------------- queries
    def _epsilon_numeric(self, delta: float) -> Bounds:
        t0 = time.perf_counter()
        slack = self.delta_error if self.delta_error is not None else 1e-3 * delta
        if slack >= delta:
            raise ValueError(f"delta_error ({slack:g}) must be smaller than delta ({delta:g})")
        parts, info = [], {}
        for d, terms in enumerate(self._directions()):
            s = slack
            for _ in range(3):
                res, comp = self._epsilon_direction(d, terms, delta, s)
                # where the curve is flat in log(delta) (large epsilon) the delta slack costs epsilon:
                # spend less of it, unless the user fixed it
                excess = res.upper - res.lower - 2.0 * comp.coupling_shift(0.5 * s)
                if (self.delta_error is not None or not math.isfinite(excess) or excess <= 0.1 * self.eps_error
                        or comp.tv_error >= s):  # the block error, not the slack, dominates: nothing to gain
                    break
                s /= 30.0
            parts.append(res)
            info = {"mesh": comp.h, "coupling_shift": comp.coupling_shift(0.5 * s),
                    "grid_points": int(comp.tilted.size), "compositions": comp.compositions, "delta_error": s,
                    "numerical_error": max(info.get("numerical_error", 0.0), res.numerical_error)}
        info["seconds"] = time.perf_counter() - t0
        return self._combine_eps(parts, info)

    def _epsilon_direction(self, d: int, terms, delta: float, slack: float):
        """Bounds for one direction with the delta slack split between coupling failure (1/2),
        truncation (1/4) and aliasing/round-off (1/4)."""
        eta, trunc, num_budget = 0.5 * slack, 0.25 * slack, 0.25 * slack
        plan = lambda: self._plan(terms, eta, trunc)[0]  # single-level discretisation, when a tilt is needed
        # FFT round-off is ~1e-16 of the total mass: without tilting it is far
        # below delta >= 1e-10; smaller deltas get an exponentially tilted FFT
        tilt = 0.0 if delta >= 1e-10 else chernoff_epsilon(plan(), delta)[1]
        res, tau_i = None, 0
        # the two-level composition's l1 block error costs delta slack like eta does; 5e-4 delta of it
        # moves epsilon by far less than eps_error
        tv_budget = max(eta, 5e-4 * delta)
        for _ in range(4):
            taus = _taus(slack, round(tilt, 3))
            comp = self._composed(d, terms, eta, trunc, tilt, taus[tau_i], tv_budget)
            res = epsilon_bounds(comp, delta, eta)
            x = comp.x
            span = x[-1] - x[0]
            # untilted, the window holds the whole distribution: where the answer falls does not matter
            centred = (tilt == 0.0 or not math.isfinite(res.estimate)
                       or x[0] + 0.1 * span <= res.estimate <= x[-1] - 0.1 * span
                       or (res.estimate == 0.0 and x[0] <= 0.0))
            if res.numerical_error <= num_budget and centred:
                break
            if centred and comp.alias_mass > comp.float_error and tau_i + 1 < len(taus):
                tau_i += 1  # widen the window
            else:  # re-centre the tilt on the answer
                new_tilt = saddle_tilt(plan(), res.estimate) if math.isfinite(res.estimate) else tilt
                if abs(new_tilt - tilt) < 1e-3:
                    break
                tilt = new_tilt
        if math.isinf(res.upper) and not res.note:
            raise PrecisionError(f"cannot certify epsilon at delta={delta:g}: the composition window "
                                 "could not be placed around the answer")
        return res, comp

    def _delta_numeric(self, epsilons: np.ndarray) -> Bounds:
        t0 = time.perf_counter()
        lower = np.zeros_like(epsilons)
        est = np.zeros_like(epsilons)
        upper = np.zeros_like(epsilons)
        for i, eps in enumerate(epsilons):
            lo, es, up = self._delta_one(float(eps))
            lower[i], est[i], upper[i] = lo, es, up
        return Bounds(lower, est, upper, "delta", "bound", {"seconds": time.perf_counter() - t0})

    def _delta_one(self, eps: float) -> tuple[float, float, float]:
        out = []
        for d, terms in enumerate(self._directions()):
            slack = self.delta_error if self.delta_error is not None else 1e-6
            tilt = 0.0
            best_lo, best_up, es = 0.0, 1.0, 0.0
            for attempt in range(3):
                eta, trunc = 0.5 * slack, 0.25 * slack
                for tau in _taus(slack, round(tilt, 3)):
                    comp = self._composed(d, terms, eta, trunc, tilt, tau)
                    lo, es, up = (float(v[0]) for v in delta_bounds(comp, np.array([eps]), eta))
                    if float(comp.numerical_error(eps + comp.coupling_shift(eta))) <= 0.25 * slack:
                        break
                # every attempt is certified: keep the best ends, not the last attempt's
                best_lo, best_up = max(best_lo, lo), min(best_up, up)
                if self.delta_error is not None or es <= 0 or slack <= 1e-3 * es or slack <= 1e-300:
                    break
                # the answer is small: spend less slack, and tilt the FFT towards eps if round-off could matter
                slack = max(1e-3 * es, 1e-300)
                if es < 1e-9:
                    tilt = saddle_tilt(self._plan(terms, 0.5 * slack, 0.25 * slack)[0], eps)
            out.append((best_lo, min(max(es, best_lo), best_up), best_up))
        return tuple(max(v[j] for v in out) for j in range(3))

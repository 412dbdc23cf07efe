"""A PLD accountant whose bounds come from dominance instead of coupling (``tightdp.pld.dominance``).

The upper bound composes connect-the-dots pairs that dominate each mechanism
(Doroshenko et al. 2022); the lower bound composes merge-to-the-grid pairs that
each mechanism dominates. Both are exact statements about every grid, so the
grid need not shrink with the number of compositions: the mesh is halved until
``upper - lower <= 2 eps_error``. Supports mechanisms whose privacy losses are
Gaussian or Gaussian mixtures (Gaussian, every subsampled Gaussian, mixtures of
Gaussians).
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from .._validation import check_delta, check_real
from ..bounds import Bounds
from ..pld import chernoff_epsilon, compose, delta_bounds, epsilon_bounds
from ..pld.dominance import dominated, dominating, supports_dominance
from ._pld import PLDAccountant

__all__ = ["ConnectDotsAccountant"]

_TINY = 1e-300  # no coupling failure probability to spend


class ConnectDotsAccountant(PLDAccountant):
    """Certified bounds from dominating (upper) and dominated (lower) discretisations.

    Parameters
    ----------
    eps_error: the mesh is refined until ``upper - lower <= 2 * eps_error`` (or ``max_refinements``).
    delta_error: delta slack for truncation and aliasing (default ``1e-3 * delta``).
    """

    name = "connect-dots"

    def __init__(self, *, eps_error: float = 0.01, delta_error: float | None = None,
                 max_refinements: int = 8) -> None:
        self.eps_error = check_real("eps_error", eps_error, low=0.0, high=10.0, high_open=False)
        self.delta_error = None if delta_error is None else check_delta("delta_error", delta_error)
        self.max_refinements = int(check_real("max_refinements", max_refinements, low=0.0, low_open=False,
                                              high=20.0, high_open=False))
        super().__init__()
        self._ledger_changed()

    def options(self) -> dict[str, Any]:
        return {"eps_error": self.eps_error, "delta_error": self.delta_error,
                "max_refinements": self.max_refinements}

    def _supports(self, mechanism) -> bool:
        pair = mechanism.privacy_losses()
        return supports_dominance(pair.remove) and supports_dominance(pair.add)

    def _pair(self, d: int, terms, h: float, tail: float, tilt_delta: float | None, tau: float):
        def build():
            up = [(dominating(loss, h, tail), c) for loss, c in terms]
            lo = [(dominated(loss, h, tail), c) for loss, c in terms]
            t_up = 0.0 if tilt_delta is None else chernoff_epsilon(up, tilt_delta)[1]
            t_lo = 0.0 if tilt_delta is None else chernoff_epsilon(lo, tilt_delta)[1]
            return compose(up, tilt=t_up, tau=tau), compose(lo, tilt=t_lo, tau=tau)
        return self._memo(("cd", d, h, tail, tilt_delta, tau), build)

    def _initial_mesh(self, tail: float) -> float:
        """``min(eps_error / 2, 0.01)``, and at most a tenth of the smallest single-step loss spread
        (connect-the-dots is coarse when the grid is wider than the loss it discretises)."""
        h = min(0.01, 0.5 * self.eps_error)
        for terms in self._directions():
            for loss, _ in terms:
                for _ in range(6):
                    u = dominating(loss, h, tail)
                    w = u.pmf / u.pmf.sum()
                    g = u.grid
                    sd = math.sqrt(max(float(np.dot(w, g * g)) - float(np.dot(w, g)) ** 2, 0.0))
                    if h <= 0.1 * sd or h < 1e-7:
                        break
                    h = max(0.1 * sd, h / 100.0)
        return h

    def _epsilon(self, delta: float) -> Bounds:
        try:
            out = self._epsilon_dominance(delta)
        except ArithmeticError as exc:  # PrecisionError included
            return self._fallback(delta, str(exc))
        if math.isinf(out.upper) and not math.isinf(out.lower):  # not a genuinely infinite epsilon
            return self._fallback(delta, str(out.details.get("note", "window too small")))
        return out

    def _fallback(self, delta: float, reason: str) -> Bounds:
        """The coupling-based PRV accountant, for what the dominance grids cannot resolve."""
        from .prv import PRVAccountant
        prv = PRVAccountant(eps_error=self.eps_error, delta_error=self.delta_error).compose(self._ledger)
        b = prv.epsilon(delta)
        return Bounds(b.lower, b.estimate, b.upper, "epsilon", "bound",
                      {**dict(b.details), "fallback": f"prv ({reason})"})

    def _epsilon_dominance(self, delta: float) -> Bounds:
        t0 = time.perf_counter()
        slack = self.delta_error if self.delta_error is not None else 1e-3 * delta
        k_total = sum(c for _, c in self._ledger)
        tail = 0.5 * slack / k_total
        # FFT round-off is bounded by about k u log N of the total mass: tilt the FFT towards the
        # answer unless delta is far above that
        tilted = delta < 1e-6
        tau = 1e-13 if tilted else min(1e-6, 0.05 * slack)
        tilt_delta = delta if tilted else None
        h = self._initial_mesh(tail)
        for _ in range(self.max_refinements + 1):
            parts = []
            for d, terms in enumerate(self._directions()):
                cu, cl = self._pair(d, terms, h, tail, tilt_delta, tau)
                u = epsilon_bounds(cu, delta, _TINY)
                lo = epsilon_bounds(cl, delta, _TINY)
                # the upper construction's answer bounds from above, the lower one's from below;
                # truncation in the upper construction went to +inf, in the lower one to -inf
                parts.append((lo.lower, u.estimate, u.upper, u.note or lo.note))
            lower = max(p[0] for p in parts)
            upper = max(p[2] for p in parts)
            if upper - lower <= 2.0 * self.eps_error or not math.isfinite(upper):
                break
            h /= 2.0
        est = min(max(max(p[1] for p in parts), lower), upper)
        details = {"mesh": h, "seconds": time.perf_counter() - t0, "delta_error": slack}
        notes = [p[3] for p in parts if p[3]]
        if notes:
            details["note"] = notes[0]
        return Bounds(float(lower), float(est), float(upper), "epsilon", "bound", details)

    def _delta(self, epsilons: np.ndarray) -> Bounds:
        t0 = time.perf_counter()
        slack = self.delta_error if self.delta_error is not None else 1e-9
        k_total = sum(c for _, c in self._ledger)
        tail = 0.5 * slack / k_total
        h = self._initial_mesh(tail)
        for _ in range(self.max_refinements + 1):
            los, ests, ups = [], [], []
            for d, terms in enumerate(self._directions()):
                cu, cl = self._pair(d, terms, h, tail, None, min(1e-6, 0.05 * slack))
                _, e_u, u = delta_bounds(cu, epsilons, _TINY)
                lo, _, _ = delta_bounds(cl, epsilons, _TINY)
                los.append(lo), ests.append(e_u), ups.append(u)
            lower, upper = np.max(los, axis=0), np.max(ups, axis=0)
            # stop when the delta interval is no wider than moving epsilon by eps_error would make it
            shifted = [delta_bounds(self._pair(d, terms, h, tail, None, min(1e-6, 0.05 * slack))[0],
                                    epsilons + self.eps_error, _TINY)[1]
                       for d, terms in enumerate(self._directions())]
            if np.all(upper - lower <= np.maximum(np.max(ests, axis=0) - np.max(shifted, axis=0), 1e-12)):
                break
            h /= 2.0
        est = np.clip(np.max(ests, axis=0), lower, upper)
        return Bounds(lower, est, upper, "delta", "bound", {"mesh": h, "seconds": time.perf_counter() - t0})

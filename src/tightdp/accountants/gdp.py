"""The Gaussian-DP accountant: exact for Gaussian mechanisms, a CLT approximation with subsampling.

* Gaussian mechanisms (and ``PoissonSampled`` with rate 1) are exactly
  ``mu``-GDP with ``mu = sensitivity / sigma`` (Dong, Roth, Su 2022, Thm 2.7);
  ``mu``-GDP mechanisms compose to ``sqrt(sum mu_i^2)``-GDP exactly (their
  Cor. 3.3; 000 Thm 11 for the adaptive case). The answer is then the exact
  value: ``lower == estimate == upper`` up to the root finder's bracket.
* Poisson-subsampled Gaussians are approximated by the central limit theorem of
  Bu, Dong, Long, Su (2020), Thm 5 / Dong et al. Cor. 5.4:
  ``mu = q sqrt(T (e^{mu_1^2} - 1))``. This is *not* a bound (003 Fig. 1 shows it
  under-reports epsilon), so any ledger with such an entry answers with
  ``kind="approximation"``, ``lower = upper = None`` and ``estimate`` only.

``delta(eps)`` is the ``mu``-GDP curve (Dong et al. Cor. 2.13)
``Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)``, evaluated in log space
(``log_ndtr``) so that it stays accurate in the far tail. ``eps(delta)`` is
found by bisection on a bracket that is expanded until it holds the root, so
it cannot fail the way a fixed-bracket ``brentq`` does.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import special

from ..bounds import Bounds
from ..errors import PrecisionError
from ..mechanisms import Gaussian, Mechanism, PoissonSampled
from .base import Accountant

__all__ = ["GDPAccountant", "gdp_delta", "gdp_epsilon"]

_EPS_CAP = 1e7  # beyond this epsilon the curve is reported as infinite (with a note)


def gdp_log_delta(mu: float, eps: np.ndarray) -> np.ndarray:
    """``log delta_mu(eps)`` for ``mu``-GDP, stable for large ``eps`` and small ``mu``."""
    eps = np.asarray(eps, float)
    la = special.log_ndtr(-eps / mu + mu / 2.0)
    lb = special.log_ndtr(-eps / mu - mu / 2.0) + eps
    with np.errstate(divide="ignore"):
        # delta = e^la (1 - e^{lb - la}); lb < la always (delta > 0 for finite mu)
        return la + np.log(-np.expm1(np.minimum(lb - la, 0.0)))


def gdp_delta(mu: float, eps) -> np.ndarray:
    """``delta(eps)`` of ``mu``-GDP (Dong, Roth, Su 2022, Cor. 2.13)."""
    return np.clip(np.exp(gdp_log_delta(mu, eps)), 0.0, 1.0)


def gdp_epsilon(mu: float, delta: float) -> tuple[float, float]:
    """A bracket ``(lo, hi)`` with ``delta_mu(lo) > delta >= delta_mu(hi)`` and ``hi - lo`` tiny.

    ``lo = hi = 0`` when ``delta_mu(0) <= delta``. The bracket is grown
    geometrically from 1 until it contains the root, then bisected in the
    log-delta domain (monotone decreasing), so no sign error can occur.
    """
    target = math.log(delta)
    f = lambda e: float(gdp_log_delta(mu, np.array([e]))[0]) - target
    if f(0.0) <= 0.0:
        return 0.0, 0.0
    lo, hi = 0.0, 1.0
    while f(hi) > 0.0:
        lo, hi = hi, 2.0 * hi
        if hi > _EPS_CAP:
            return lo, math.inf
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if f(mid) > 0.0:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-13 * max(1.0, hi):
            break
    return lo, hi


class GDPAccountant(Accountant):
    """Gaussian differential privacy: exact for Gaussian mechanisms, CLT for subsampled ones.

    ``kind`` is ``"bound"`` (exact) when every ledger entry is a Gaussian without
    subsampling, and ``"approximation"`` as soon as one entry needs the CLT.
    """

    name = "gdp"
    kind = "approximation"  # the class-level label is the weakest case; answers say which applies

    def options(self) -> dict[str, Any]:
        return {}

    def _supports(self, mechanism: Mechanism) -> bool:
        if isinstance(mechanism, Gaussian):
            return True
        return isinstance(mechanism, PoissonSampled) and mechanism.relation != "substitute"

    def mu(self) -> tuple[float, bool]:
        """The composed ``mu`` and whether it is exact (no CLT entry in the ledger)."""
        total, exact = 0.0, True
        for mech, count in self.ledger:
            if isinstance(mech, Gaussian):
                total += count * mech.mu ** 2
                continue
            g: Gaussian = mech.mechanism  # type: ignore[union-attr]
            q = mech.sampling_rate  # type: ignore[union-attr]
            if q >= 1.0:
                total += count * g.mu ** 2
            else:
                exact = False
                # Bu et al. 2020 Thm 5: mu_T^2 = q^2 T (e^{mu^2} - 1)
                total += count * q * q * math.expm1(g.mu ** 2)
        if not math.isfinite(total):
            raise PrecisionError("the composed GDP parameter overflows (mu^2 = inf); noise is far too small")
        return math.sqrt(total), exact

    def _epsilon(self, delta: float) -> Bounds:
        mu, exact = self.mu()
        lo, hi = gdp_epsilon(mu, delta)
        details: dict[str, Any] = {"mu": mu, "method": "exact mu-GDP" if exact else "CLT (Bu et al. 2020)"}
        if math.isinf(hi):
            details["note"] = f"epsilon exceeds {_EPS_CAP:g} for this delta (mu = {mu:g})"
        if exact:
            return Bounds(lo, hi, hi, "epsilon", "bound", details)
        return Bounds(None, hi, None, "epsilon", "approximation", details)

    def _delta(self, epsilons: np.ndarray) -> Bounds:
        mu, exact = self.mu()
        d = gdp_delta(mu, epsilons)
        details: dict[str, Any] = {"mu": mu, "method": "exact mu-GDP" if exact else "CLT (Bu et al. 2020)"}
        if exact:
            # relative float error of the log-space evaluation is ~1e-14: widen by that much
            return Bounds(d * (1 - 1e-12), d, np.minimum(d * (1 + 1e-12), 1.0), "delta", "bound", details)
        return Bounds(None, d, None, "delta", "approximation", details)

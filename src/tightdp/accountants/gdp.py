"""The Gaussian-DP accountant: exact for Gaussian mechanisms, a CLT approximation with subsampling.

* Gaussian mechanisms (and ``PoissonSampled`` with rate 1) are exactly
  ``mu``-GDP with ``mu = sensitivity / sigma`` (Dong, Roth, Su 2022, Thm 2.7);
  ``mu``-GDP mechanisms compose to ``sqrt(sum mu_i^2)``-GDP exactly (their
  Cor. 3.3; Koskela et al. 2023, Thm 11 for the adaptive case). The answer is then the exact
  value: ``lower == estimate == upper`` up to the root finder's bracket.
* Poisson-subsampled Gaussians are approximated by the central limit theorem of
  Bu, Dong, Long, Su (2020), Thm 5 / Dong et al. Cor. 5.4:
  ``mu = q sqrt(T (e^{mu_1^2} - 1))``. This is *not* a bound (Gopi et al. 2021, Fig. 1 shows it
  under-reports epsilon), so any ledger with such an entry answers with
  ``kind="approximation"``, ``lower = upper = None`` and ``estimate`` only.

``delta(eps)`` is the ``mu``-GDP curve (Dong et al. Cor. 2.13)
``Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)``, evaluated in log space
with a certified float-error term (``_gdp_math``), so that exact answers are
brackets of the true value, in the far tail too.
"""

from __future__ import annotations

import math
from typing import Any, cast

import numpy as np

from .._gdp_math import gdp_delta_bounds, gdp_epsilon_bounds, gdp_log_delta
from .._types import ArrayLike, FloatArray
from .._validation import check_delta, check_nonnegative, check_positive, check_real_array
from ..bounds import Bounds
from ..errors import PrecisionError
from ..mechanisms import Gaussian, Mechanism, PoissonSampled
from .base import Accountant

__all__ = ["GDPAccountant", "gdp_delta", "gdp_epsilon"]


def gdp_delta(*, mu: float, epsilon: ArrayLike) -> FloatArray:
    """The delta of ``mu``-GDP at ``epsilon``: the computed value of the curve (Dong, Roth, Su 2022, Cor. 2.13).

    ``delta_mu(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)`` in log space (``_gdp_math``);
    ``tightdp.individual.gdp_delta_bounds`` gives the certified ends.

    Parameters
    ----------
    mu : float
        GDP parameter, ``> 0``.
    epsilon : float or array_like
        Real epsilons.

    Returns
    -------
    numpy.ndarray
        delta at each epsilon, in ``[0, 1]``.

    Raises
    ------
    ValueError
        ``mu`` not positive, or an epsilon that is NaN or not real.

    References
    ----------
    Dong, Roth, Su 2022, Cor. 2.13; Koskela et al. 2023, eq. (C.2).
    """
    m = check_positive("mu", mu, allow_inf=True)
    check_real_array("epsilon", epsilon)
    return np.clip(np.exp(gdp_log_delta(m, np.asarray(epsilon, float))), 0.0, 1.0)


def gdp_epsilon(*, mu: float, delta: float) -> tuple[float, float]:
    """A certified bracket ``(lower, upper)`` of the epsilon of ``mu``-GDP at ``delta``.

    ``_gdp_math.gdp_epsilon_bounds``: bisection on the certified curve, ``upper`` rounded up (its upper
    delta is at most ``delta`` whatever the rounding), ``lower`` rounded down. ``mu = 0`` gives ``(0, 0)``.
    ``tightdp.individual.gdp_epsilon`` is the same upper end, as a float.

    Parameters
    ----------
    mu : float
        GDP parameter, ``>= 0``.
    delta : float
        Target delta in ``(0, 1)``.

    Returns
    -------
    tuple of float
        ``(lower, upper)``; ``upper`` is ``inf`` only if no double epsilon reaches ``delta`` (``mu`` above
        about 1e150).

    Raises
    ------
    ValueError
        ``mu`` negative or NaN, or ``delta`` out of range.

    References
    ----------
    Dong, Roth, Su 2022, Cor. 2.13; Koskela et al. 2023, eq. (C.2).
    """
    m = check_nonnegative("mu", mu)
    dlt = check_delta("delta", delta)
    if m == 0.0:
        return 0.0, 0.0
    lo, _, hi = gdp_epsilon_bounds(m, dlt)
    return lo, hi


class GDPAccountant(Accountant):
    """Gaussian differential privacy: exact for Gaussian mechanisms, CLT for subsampled ones.

    ``kind`` is ``"bound"`` (exact) when every ledger entry is a Gaussian without
    subsampling, and ``"approximation"`` as soon as one entry needs the CLT. No constructor options.

    References
    ----------
    Dong, Roth, Su 2022, Cor. 2.13, Cor. 3.3; Bu, Dong, Long, Su 2020, Thm 5; Koskela et al. 2023, Thm 11.
    """

    name = "gdp"
    kind = "approximation"  # the class-level label is the weakest case; answers say which applies

    def options(self) -> dict[str, Any]:
        """The constructor's keyword arguments (JSON-ready), as ``to_dict`` stores them.

        Returns
        -------
        dict
            Option name to value; ``type(self)(**options())`` is an accountant with the same settings.
        """
        return {}

    def _supports(self, mechanism: Mechanism) -> bool:
        if isinstance(mechanism, Gaussian):
            return True
        return (
            isinstance(mechanism, PoissonSampled)
            and mechanism.relation != "substitute"
            and isinstance(mechanism.mechanism, Gaussian)
        )

    def mu(self) -> tuple[float, bool]:
        """The composed ``mu`` and whether it is exact (no CLT entry in the ledger).

        Returns
        -------
        tuple of (float, bool)
            ``mu = sqrt(sum c_i mu_i^2)`` (Dong, Roth, Su 2022, Cor. 3.3; Bu et al. 2020, Thm 5 for a
            subsampled entry) and whether no entry needed the CLT.

        Raises
        ------
        PrecisionError
            The composed ``mu^2`` overflows.
        """
        total, exact = 0.0, True
        for mech, count in self.ledger:
            if isinstance(mech, Gaussian):
                total += count * mech.mu * mech.mu
                continue
            assert isinstance(mech, PoissonSampled)  # _supports admits only these two kinds
            g = cast("Gaussian", mech.mechanism)  # GDP composes only subsampled Gaussians
            q = mech.sampling_rate
            if q >= 1.0:
                total += count * g.mu * g.mu
            else:
                exact = False
                # Bu et al. 2020 Thm 5: mu_T^2 = q^2 T (e^{mu^2} - 1)
                total += count * q * q * (math.expm1(g.mu * g.mu) if g.mu < 26.0 else math.inf)
        if not math.isfinite(total):
            raise PrecisionError("the composed GDP parameter overflows (mu^2 = inf); noise is far too small")
        return math.sqrt(total), exact

    def _epsilon(self, delta: float) -> Bounds:
        mu, exact = self.mu()
        lo, est, hi = gdp_epsilon_bounds(mu, delta)
        details: dict[str, Any] = {"mu": mu, "method": "exact mu-GDP" if exact else "CLT (Bu et al. 2020)"}
        if math.isinf(hi):
            details["note"] = f"no double-precision epsilon reaches delta = {delta:g} (mu = {mu:g})"
        if exact:
            return Bounds(lo, est, hi, "epsilon", "bound", details)
        return Bounds(None, est, None, "epsilon", "approximation", details)

    def _delta(self, epsilons: FloatArray) -> Bounds:
        mu, exact = self.mu()
        lo, est, hi = gdp_delta_bounds(mu, epsilons)
        details: dict[str, Any] = {"mu": mu, "method": "exact mu-GDP" if exact else "CLT (Bu et al. 2020)"}
        if exact:
            return Bounds(lo, est, hi, "delta", "bound", details)
        return Bounds(None, est, None, "delta", "approximation", details)

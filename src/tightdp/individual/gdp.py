"""Gaussian differential privacy for per-example accounting: conversions, fully adaptive filter and odometer.

Koskela et al. 2023, Thm 11: if the GDP parameters ``mu_m`` of a fully adaptive composition
(each chosen from the outputs so far) satisfy ``sum_m mu_m^2 <= B^2`` almost
surely, the composition is ``B``-GDP. A ``B``-GDP mechanism is
``(eps, delta(eps))``-DP for every ``eps`` with (Koskela et al. 2023, Cor. C.2, eq. (C.2))::

    delta(eps) = Phi(-eps/B + B/2) - e^eps Phi(-eps/B - B/2)

and this is tight for the Gaussian mechanism. ``GDPFilter`` is the filter
``F_B`` of Koskela et al. 2023, eq. (4.1) / Alg. 2 (App. C.1) together with the odometer of
App. C.5: it admits a step of ``mu``-GDP only when the accumulated
``sum mu^2`` stays within ``B^2``.

The curve and its epsilon are those of ``tightdp._gdp_math`` (log space with a proven
float-error term), the one implementation of the mu-GDP conversion; this module adds what per-example
accounting needs on top of it, each rounded to the safe side:

* ``gdp_delta`` / ``gdp_delta_bounds``: the curve vectorised over ``mu`` as well (``mu = 0``: delta 0;
  ``mu = inf``: delta 1);
* ``gdp_epsilon``: the certified upper end of ``_gdp_math.gdp_epsilon_bounds``, validated;
* ``gdp_mu``: the inverse in ``mu`` (the largest ``mu`` whose certified curve is at most ``delta`` at
  ``epsilon``), ``_gdp_math.gdp_mu_within``, validated;
* ``gdp_epsilon_bounds_array``: certified epsilon brackets for an array of ``mu`` at once (the ledger's
  per-example epsilons), ``_gdp_math.gdp_epsilon_bounds_array``, validated.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from .._gdp_math import gdp_delta_bounds_array, gdp_epsilon_bounds, gdp_mu_within
from .._gdp_math import gdp_epsilon_bounds_array as _epsilon_bounds_array
from .._types import ArrayLike, FloatArray
from .._validation import check_delta, check_epsilon, check_nonnegative, check_positive
from ..bounds import Bounds
from ..errors import PrecisionError

__all__ = ["gdp_delta", "gdp_delta_bounds", "gdp_epsilon", "gdp_epsilon_bounds_array", "gdp_mu", "GDPFilter"]


def _reals(name: str, values: ArrayLike, *, low: float | None = None) -> FloatArray:
    """``values`` as a float array of any shape (no NaN, no booleans or strings, each ``>= low``)."""
    try:
        raw = np.asarray(values)
        if raw.dtype.kind not in "iuf":
            raise TypeError
        arr = raw.astype(float)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name} must be a real number or an array of real numbers, got {values!r}") from None
    if np.isnan(arr).any():
        raise ValueError(f"{name} must not be NaN")
    if low is not None and np.any(arr < low):
        raise ValueError(f"{name} must be >= {low:g}, got {arr[arr < low].flat[0]!r}")
    return arr


def gdp_delta_bounds(*, mu: ArrayLike, epsilon: ArrayLike) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Certified ``(lower, estimate, upper)`` of the delta of ``mu``-GDP at ``epsilon``.

    Koskela et al. 2023, eq. (C.2) (Dong, Roth, Su 2022, Cor. 2.13), evaluated by ``tightdp._gdp_math`` with
    its float error pushed outwards, broadcast over both arguments.

    Parameters
    ----------
    mu : float or array_like
        GDP parameters, ``>= 0``; ``mu = 0`` gives delta 0 (for ``epsilon >= 0``), ``mu = inf`` gives 1.
    epsilon : float or array_like
        Real epsilons (the curve is defined for negative ones too).

    Returns
    -------
    tuple of numpy.ndarray
        ``(lower, estimate, upper)``, each of the broadcast shape, in ``[0, 1]``; ``upper > 0`` for
        ``mu > 0`` (it never underflows to 0).

    Raises
    ------
    ValueError
        A NaN, a negative ``mu``, or an argument that is not real.

    References
    ----------
    Koskela et al. 2023 (individual privacy accounting with Gaussian DP), eq. (C.2); Dong, Roth, Su 2022, Cor. 2.13.
    """
    return gdp_delta_bounds_array(_reals("mu", mu, low=0.0), _reals("epsilon", epsilon))


def gdp_delta(*, mu: ArrayLike, epsilon: ArrayLike) -> FloatArray:
    """The delta of ``mu``-GDP at ``epsilon`` (Koskela et al. 2023, eq. (C.2)): the computed value, vectorised.

    Parameters
    ----------
    mu : float or array_like
        GDP parameters, ``>= 0``.
    epsilon : float or array_like
        Real epsilons.

    Returns
    -------
    numpy.ndarray
        The estimate of ``gdp_delta_bounds`` (which gives the certified ends), of the broadcast shape.

    Raises
    ------
    ValueError
        As ``gdp_delta_bounds``.

    References
    ----------
    Koskela et al. 2023 (individual privacy accounting with Gaussian DP), eq. (C.2).
    """
    return gdp_delta_bounds(mu=mu, epsilon=epsilon)[1]


def gdp_mu(*, epsilon: float, delta: float) -> float:
    """The largest ``mu`` (rounded down) such that ``mu``-GDP implies ``(epsilon, delta)``-DP.

    The inverse of Koskela et al. 2023, eq. (C.2) in ``mu`` (delta is increasing in ``mu``): the root of the certified
    upper curve ``log delta_up(epsilon; mu) = log delta`` by ``tightdp._numerics.falling_root`` (Brent's
    method, relative tolerance ``4u``), whose answer is a point where that upper curve was evaluated and
    found ``<= delta``: ``mu``-GDP then gives ``(epsilon, delta)``-DP whatever the rounding.

    Parameters
    ----------
    epsilon : float
        Target epsilon, ``>= 0``.
    delta : float
        Target delta in ``(0, 1)``.

    Returns
    -------
    float
        The GDP budget ``B`` (Koskela et al. 2023, eq. (4.1)).

    Raises
    ------
    ValueError
        ``epsilon`` or ``delta`` out of range.
    PrecisionError
        No ``mu <= 1e6`` reaches ``delta`` (cannot happen for ``delta < 1``).

    References
    ----------
    Koskela et al. 2023 (individual privacy accounting with Gaussian DP), eq. (C.2), eq. (4.1) (the budget ``B``).
    """
    return gdp_mu_within(check_epsilon("epsilon", epsilon), check_delta("delta", delta))


def gdp_epsilon(*, mu: float, delta: float) -> float:
    """The epsilon of ``mu``-GDP at ``delta`` (Koskela et al. 2023, eq. (C.2)), rounded up: a certified upper bound.

    The upper end of ``tightdp._gdp_math.gdp_epsilon_bounds`` (its upper curve is at most
    ``delta`` there whatever the rounding); ``mu = 0`` gives 0.

    Parameters
    ----------
    mu : float
        GDP parameter, ``>= 0``.
    delta : float
        Target delta in ``(0, 1)``.

    Returns
    -------
    float
        The smallest ``epsilon >= 0`` with ``delta(epsilon; mu) <= delta``, rounded up.

    Raises
    ------
    ValueError
        ``mu`` or ``delta`` out of range.
    PrecisionError
        No double epsilon reaches ``delta`` (``mu`` above about 1e150).

    References
    ----------
    Koskela et al. 2023 (individual privacy accounting with Gaussian DP), eq. (C.2); Dong, Roth, Su 2022, Cor. 2.13.
    """
    m = check_nonnegative("mu", mu)
    dlt = check_delta("delta", delta)
    if m == 0.0:
        return 0.0
    hi = gdp_epsilon_bounds(m, dlt)[2]
    if math.isinf(hi):
        raise PrecisionError(f"gdp_epsilon: no finite epsilon reaches delta={dlt!r} for mu={m!r}")
    return hi


def gdp_epsilon_bounds_array(
    mu: ArrayLike, delta: float, *, lower: bool = True
) -> tuple[FloatArray | None, FloatArray]:
    """Certified ``(lower, upper)`` around the epsilon of each ``mu``-GDP at ``delta``, for an array of ``mu``.

    Bisection on every element at once on the certified curve of Koskela et al. 2023, eq. (C.2)
    (``tightdp._gdp_math.gdp_epsilon_bounds_array``): ``upper`` is rounded up (its upper delta is at
    most ``delta``), ``lower`` rounded down (0, or its lower delta is above ``delta``).

    Parameters
    ----------
    mu : array_like
        GDP parameters, ``>= 0`` (``inf`` allowed).
    delta : float
        Target delta in ``(0, 1)``.
    lower : bool, default True
        Whether to compute the lower ends (a second bisection); ``False``: ``lower`` is None.

    Returns
    -------
    tuple of numpy.ndarray
        ``(lower, upper)`` of the shape of ``mu``, 0 where ``mu = 0``.

    Raises
    ------
    ValueError
        A ``mu`` negative, NaN or not real, or ``delta`` out of range.

    References
    ----------
    Koskela et al. 2023 (individual GDP accounting), Thm 11, eq. (C.2); Dong, Roth, Su 2022, Cor. 2.13.
    """
    return _epsilon_bounds_array(_reals("mu", mu, low=0.0), check_delta("delta", delta), lower=bool(lower))


class GDPFilter:
    """Fully adaptive GDP privacy filter with an odometer (Koskela et al. 2023, Thm 11, eq. (4.1), Alg. 2, App. C.5).

    Construct with a GDP budget ``mu=B``, or with ``epsilon`` and ``delta``, in
    which case ``B = gdp_mu(epsilon=epsilon, delta=delta)`` (the largest ``B`` whose tight
    curve (C.2) gives at most ``delta`` at ``epsilon``, rounded down).

    ``admit(mu)`` says whether a step of ``mu``-GDP keeps ``sum mu_m^2 <= B^2``
    and, if so, records it. The sums are kept as exact rationals of the floats
    passed in, so the comparison has no rounding error: the filter admits a
    step exactly when the theorem's condition holds for the parameters given.
    By Thm 11 (and Thm C.1 for the random stopping time) every sequence of
    admitted steps, with each ``mu_m`` chosen from the outputs so far, is
    ``B``-GDP, hence ``(epsilon, delta)``-DP. That is the whole promise, and it is a proof:
    GDP filters are valid under fully adaptive composition, whereas the natural PLD / f-DP filter
    (stop when the composed privacy profile crosses the budget's) is not (Tran, Koskela, Raisa,
    Honkela 2026, arXiv 2602.06756). For per-example filters see ``IndividualAccountant.active``.

    The odometer (``spent_mu``, ``epsilon(delta)``, ``delta(epsilon)``, the names of the accountants'
    queries) reports the GDP parameter ``sqrt(sum mu_m^2)`` of the steps admitted so far and its exact
    (eps, delta) curve (C.2).

    Parameters
    ----------
    epsilon, delta : float, optional
        The budget as ``(epsilon, delta)``: ``B = gdp_mu(epsilon=epsilon, delta=delta)``.
    mu : float, optional
        The budget ``B`` itself (give either ``mu`` or both ``epsilon`` and ``delta``).

    Raises
    ------
    ValueError
        Both or neither kinds of budget, an argument out of range, or a budget that allows no step.

    References
    ----------
    Koskela et al. 2023 (individual privacy accounting with Gaussian DP), Thm 11, eq. (4.1), Alg. 2, App. C.1, C.5.
    """

    def __init__(self, *, epsilon: float | None = None, delta: float | None = None, mu: float | None = None) -> None:
        if mu is not None:
            if epsilon is not None or delta is not None:
                raise ValueError("give either mu or (epsilon, delta), not both")
            self._budget = check_positive("mu", mu)
            self._eps_delta = None
        else:
            if epsilon is None or delta is None:
                raise ValueError("give either mu or both epsilon and delta")
            eps = check_epsilon("epsilon", epsilon)
            dlt = check_delta("delta", delta)
            b = gdp_mu(epsilon=eps, delta=dlt)
            if b <= 0.0:
                raise ValueError(f"epsilon={eps!r}, delta={dlt!r} allows no GDP budget")
            self._budget = b
            self._eps_delta = (eps, dlt)
        self._budget_sq = Fraction(self._budget) ** 2
        self._spent_sq = Fraction(0)
        self._steps = 0

    # ----------------------------------------------------------------- filter
    @property
    def budget(self) -> float:
        """The GDP budget ``B``."""
        return self._budget

    @property
    def steps(self) -> int:
        """Number of admitted steps with ``mu > 0``."""
        return self._steps

    def fits(self, mu: float) -> bool:
        """Whether a step of ``mu``-GDP fits the remaining budget (nothing is recorded).

        Parameters
        ----------
        mu : float
            The step's GDP parameter, ``>= 0``.

        Returns
        -------
        bool
            ``sum mu_m^2 + mu^2 <= B^2``, in exact rational arithmetic (Koskela et al. 2023, eq. (4.1)).

        Raises
        ------
        ValueError
            ``mu`` negative or NaN.
        """
        m = check_nonnegative("mu", mu)
        return self._spent_sq + Fraction(m) ** 2 <= self._budget_sq

    def admit(self, mu: float) -> bool:
        """Record a step of ``mu``-GDP if it fits (Koskela et al. 2023, eq. (4.1), Alg. 2); return whether it did.

        Parameters
        ----------
        mu : float
            The step's GDP parameter, ``>= 0``, chosen from the outputs so far (Koskela et al. 2023, Thm 11).

        Returns
        -------
        bool
            Whether the step was admitted (and recorded).

        Raises
        ------
        ValueError
            ``mu`` negative or NaN (nothing is recorded).
        """
        m = check_nonnegative("mu", mu)
        new = self._spent_sq + Fraction(m) ** 2
        if new > self._budget_sq:
            return False
        self._spent_sq = new
        if m > 0:
            self._steps += 1
        return True

    def remaining_mu(self) -> float:
        """The largest ``mu`` (rounded down) that still fits.

        Returns
        -------
        float
            ``sqrt(B^2 - sum mu_m^2)``, rounded down so that a step of it is admitted.
        """
        rem = self._budget_sq - self._spent_sq
        r = math.sqrt(float(rem))
        while r > 0 and Fraction(r) ** 2 > rem:
            r = math.nextafter(r, 0.0)
        return r

    # --------------------------------------------------------------- odometer
    @property
    def spent_mu(self) -> float:
        """``sqrt(sum mu_m^2)`` of the admitted steps, rounded up (App. C.5)."""
        s = self._spent_sq
        r = math.sqrt(float(s))
        if r == 0.0 and s > 0:  # mu^2 sums below the float range (subnormal mu): go through logs
            r = math.exp(0.5 * (math.log(s.numerator) - math.log(s.denominator)))
        while Fraction(r) ** 2 < s:
            # one ulp at a time near the answer; far below it (deep subnormals) double instead,
            # which still rounds up and ends in a few hundred steps at most
            r = math.nextafter(r, math.inf) if r > 1e-290 else (2.0 * r if r > 0 else 5e-324)
        return r

    def epsilon(self, delta: float) -> Bounds:
        """Exact epsilon (rounded up) of the steps admitted so far, at ``delta`` (Koskela et al. 2023, eq. (C.2)).

        Parameters
        ----------
        delta : float
            Target delta in ``(0, 1)``.

        Returns
        -------
        Bounds
            ``lower = estimate = upper``: the certified upper end of the epsilon of ``spent_mu``-GDP.

        Raises
        ------
        ValueError
            ``delta`` out of range.
        """
        dlt = check_delta("delta", delta)
        m = self.spent_mu
        e = gdp_epsilon(mu=m, delta=dlt)
        return Bounds(
            e,
            e,
            e,
            "epsilon",
            "bound",
            {"method": "gdp", "mu": m, "steps": self._steps, "source": "Koskela et al. 2023, Thm 11, eq. (C.2)"},
        )

    def delta(self, epsilon: float) -> Bounds:
        """Exact delta of the steps admitted so far, at ``epsilon`` (Koskela et al. 2023, eq. (C.2)).

        Parameters
        ----------
        epsilon : float
            Epsilon, ``>= 0``.

        Returns
        -------
        Bounds
            Certified ``(lower, estimate, upper)`` of the delta of ``spent_mu``-GDP.

        Raises
        ------
        ValueError
            ``epsilon`` out of range.
        """
        eps = check_epsilon("epsilon", epsilon)
        m = self.spent_mu
        lo, d, up = (float(v) for v in gdp_delta_bounds_array(m, eps))
        return Bounds(
            lo,
            d,
            up,
            "delta",
            "bound",
            {"method": "gdp", "mu": m, "steps": self._steps, "source": "Koskela et al. 2023, Thm 11, eq. (C.2)"},
        )

    def __repr__(self) -> str:
        return f"GDPFilter(budget={self._budget:.6g}, spent_mu={self.spent_mu:.6g}, steps={self._steps})"

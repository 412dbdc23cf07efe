"""Per-example RDP and mu-GDP of the ledger: the RDP baseline and the fitted GDP curves (Koskela et al. 2023, Fig. 1, App. D.2).

``IndividualAccountant`` inherits these methods. ``sampling_rate = 1``: every example is exactly
``mu_i``-GDP, ``mu_i = sqrt(sum_t r_t^2) / sigma`` (Koskela et al. 2023, Thm 11), and its RDP curve is
``alpha mu_i^2 / 2``. ``sampling_rate < 1``: per-example RDP curves composed from the bucket curves
(``rdp``), and the mu-GDP curve Koskela et al. 2023, App. D.2 fits to each example's certified delta(epsilon).
"""

from __future__ import annotations

from typing import cast

import numpy as np

from .._blas import single_threaded_blas
from .._gdp_math import bisect_boundary, gdp_delta_bounds_array, gdp_epsilon_bounds_array
from .._types import AnyArray, ArrayLike, BoolArray, FloatArray
from .._validation import check_count, check_delta, check_positive
from ..bounds import Bounds, Kind
from ._buckets import _U
from ._state import _LedgerState
from .rdp import INDIVIDUAL_ORDERS, bucket_rdp_table, compose_rows, epsilons_from_rdp_rows

__all__: list[str] = []

_FIT_POINTS = 64  # epsilon grid of the per-example mu-GDP fit (Koskela et al. 2023, App. D.2)
_FIT_DELTA_MIN = 1e-10  # the fit's epsilon range reaches the worst case's epsilon at this delta


class _RDPGDPMethods(_LedgerState):
    """The RDP and mu-GDP half of ``IndividualAccountant``: ``mus``, ``rdp_curves``, ``gdp_mus``."""

    def mus(self) -> FloatArray:
        """Per-example GDP parameters ``mu_i = sqrt(sum_t r_t^2) / sigma``, rounded up (Koskela et al. 2023, Thm 11).

        Returns
        -------
        numpy.ndarray
            Length N; example i's recorded steps compose to exactly ``mu_i``-GDP.

        Raises
        ------
        ValueError
            ``sampling_rate < 1`` (the subsampled Gaussian is not GDP; see ``gdp_mus`` for the fit).
        """
        if self._sumsq is None:
            raise ValueError("per-example GDP needs sampling_rate = 1 (the subsampled Gaussian is not GDP)")
        # float summation of s nonnegative terms: relative error <= s u; then sqrt and division
        s = self._sumsq * (1.0 + (self._steps + 4) * 2 * _U)
        return cast("FloatArray", np.sqrt(s) / self._sigma * (1.0 + 4 * _U))

    def rdp_curves(self, orders: ArrayLike | None = None) -> tuple[FloatArray, FloatArray]:
        """Per-example RDP curves: ``(orders, curves)`` with ``curves[i, j]`` a certified upper bound on
        example i's Renyi divergence of order ``orders[j]`` (both directions) for its recorded steps.

        ``sampling_rate = 1``: ``alpha mu_i^2 / 2`` from the exact per-example GDP parameter (``mus``).
        ``sampling_rate < 1``: ``sum_b counts[i, b] rho_b(alpha)``, ``rho_b`` the Poisson-subsampled
        Gaussian's curve (Mironov, Talwar, Zhang 2019) at bucket ``b``'s ratio, rounded up
        (``tightdp.individual.rdp``).

        Parameters
        ----------
        orders : array_like, optional
            Finite Renyi orders ``> 1`` (sorted, duplicates dropped); default ``rdp.INDIVIDUAL_ORDERS``.

        Returns
        -------
        tuple of numpy.ndarray
            ``(orders, curves)``, ``curves`` of shape ``(N, len(orders))``.

        Raises
        ------
        ValueError
            An order that is not a finite number ``> 1``.
        """
        if orders is None:
            o = INDIVIDUAL_ORDERS
        else:
            o = np.unique(np.asarray(orders, dtype=float).reshape(-1))
            if o.size == 0 or not np.all(np.isfinite(o)) or np.any(o <= 1.0):
                raise ValueError(f"orders must be finite numbers > 1, got {orders!r}")
        if self._q == 1.0:
            mu = self.mus()
            return o, (0.5 * (mu * mu)[:, None] * o[None, :]) * (1.0 + 4 * _U)
        counts = np.asarray(self._ledger())
        used = np.asarray(counts.sum(axis=0) > 0)
        ratios = np.array([self._ratio_of(b) if b else 0.0 for b in range(self._B + 1)])
        table = bucket_rdp_table(self._sigma, self._q, ratios, o, used)
        return o, compose_rows(counts, table)

    def _rdp_epsilons(self, delta: float) -> Bounds:
        dlt = check_delta("delta", delta)
        orders, curves = self.rdp_curves()
        eps, best = epsilons_from_rdp_rows(orders, curves, dlt)
        return Bounds(
            None,
            eps,
            eps,
            "epsilon",
            self._kind(),
            {
                "method": "rdp",
                "steps": self._steps,
                "optimal_orders": best,
                "num_buckets": self._B,
                "source": "Mironov, Talwar, Zhang 2019 (subsampled Gaussian RDP); Koskela et al. 2023, Lemma C.4 "
                "(Canonne, Kamath, Steinke 2020 Prop. 12) conversion",
            },
        )

    def _kind(self) -> Kind:
        return "approximation" if self._approx is not None and np.any(self._approx) else "bound"

    def gdp_mus(
        self, *, epsilon_max: float | None = None, points: int = _FIT_POINTS, delta_min: float = _FIT_DELTA_MIN
    ) -> Bounds:
        """Per-example mu-GDP parameters (Koskela et al. 2023, Thm 11 for DP-GD; the fit of App. D.2 / Sec. 5 for DP-SGD).

        ``sampling_rate = 1``: the exact ``sqrt(sum_t r_t^2) / sigma`` (``mus``), ``kind="bound"``.

        ``sampling_rate < 1``: the subsampled Gaussian is not GDP, and Koskela et al. 2023 fits each example a mu-GDP
        curve "using the bisection method" (App. D.2; Sec. 5: by the CLT the composed PLD looks
        Gaussian, "it is then easy to numerically approximate mu", Fig. 1 left). Here: the certified
        upper bounds ``d_ij`` on example i's delta at ``eps_j`` (``points`` values evenly spaced on
        ``[0, epsilon_max]``, both directions, one Plancherel pass, Koskela et al. 2023, Lemma D.1) and the smallest
        ``mu_i`` (bisection, rounded up) with ``delta_GDP(eps_{j+1}; mu_i) >= d_ij`` for every j with
        ``d_ij >= t_i``, the GDP curve rounded down; ``t_i = max(delta_min, 4 min_j d_ij)`` (the
        certified curve levels off at its numerical error terms, about 1e-10 after 10^3 steps, and a
        GDP curve through that floor would force a large mu on every example). As both curves
        decrease in epsilon, the fitted curve then dominates the example's true delta(epsilon) on
        ``[0, eps*]`` (both directions, so also on ``[-eps*, 0]``), ``eps*`` the first grid point with
        ``d_ij < t_i``, and beyond ``eps*`` the true delta is below ``t_i``; hence
        ``gdp_epsilon(delta, mu_i)`` is a certified upper bound on the example's epsilon for every
        ``delta >= t_i`` (``details["certified_above"]``). Below ``t_i`` nothing is checked, so
        ``kind="approximation"``: a mu that dominates for *every* epsilon need not exist (the
        subsampled Gaussian's loss has a heavier right tail than a Gaussian's), and Koskela et al. 2023, Sec. 5's use
        of mu (Blackwell's theorem, eq. (5.2)) needs all epsilon.

        Parameters
        ----------
        epsilon_max : float, optional
            Largest epsilon of the fit's grid; default: the worst case's epsilon at ``delta_min``.
        points : int
            Number of grid points on ``[0, epsilon_max]``, ``>= 2``.
        delta_min : float
            The delta down to which each fit is checked (``t_i`` above).

        Returns
        -------
        Bounds
            Quantity ``"mu"``, arrays of length N: ``kind="bound"`` (DP-GD) or ``"approximation"``
            (DP-SGD, with ``details["certified_above"]``).

        Raises
        ------
        ValueError
            An argument out of range.
        PrecisionError
            No ``mu <= 1e6`` dominates an example's delta curve.
        """
        pts = check_count("points", points, minimum=2)
        if self._q == 1.0:
            mu = self.mus()
            return Bounds(None, mu, mu, "mu", self._kind(), {"method": "gdp", "source": "Koskela et al. 2023, Thm 11"})
        dmin = check_delta("delta_min", delta_min)
        counts = self._ledger()
        if epsilon_max is None:
            emax = float(self.worst_case_epsilon(dmin).upper)
        else:
            emax = check_positive("epsilon_max", epsilon_max)
        grid = np.linspace(0.0, max(emax, 1e-6), pts)
        with single_threaded_blas():
            mu, above = self._gdp_fit_counts(counts, grid, dmin)
        return Bounds(
            None,
            mu,
            mu,
            "mu",
            "approximation",
            {
                "method": "gdp-fit",
                "epsilon_max": float(grid[-1]),
                "points": pts,
                "steps": self._steps,
                "delta_min": dmin,
                "certified_above": above,
                "source": "Koskela et al. 2023, App. D.2 (bisection on the per-example PLD's delta(epsilon)), Sec. 5",
            },
        )

    def _gdp_fit_counts(self, counts: AnyArray, grid: FloatArray, delta_min: float) -> tuple[FloatArray, FloatArray]:
        """The fitted mu of ``gdp_mus`` for every row of ``counts`` on the epsilon ``grid``, and the delta
        above which each row's fitted curve is certified (``t_i``; inf if its curve never fell below)."""
        D = self._delta_curves(counts, grid)
        t = np.maximum(delta_min, 4.0 * D.min(axis=1))
        low = t[:, None] > D
        first = np.where(low.any(axis=1), np.argmax(low, axis=1), D.shape[1])
        # d_ij must lie below delta_GDP(eps_{j+1}; mu) for every j before the first point below delta_min
        need = np.where(np.arange(D.shape[1] - 1)[None, :] < first[:, None], D[:, :-1], 0.0)
        at = np.broadcast_to(grid[1:][None, :], need.shape)

        def ok(m: FloatArray) -> BoolArray:
            lo = gdp_delta_bounds_array(np.broadcast_to(m[:, None], need.shape), at)[0]
            return cast("BoolArray", np.all(lo >= need, axis=1))

        n = D.shape[0]
        _, hi = bisect_boundary(
            ok,
            np.zeros(n),
            np.ones(n),
            iterations=60,
            rtol=1e-10,
            cap=1e6,
            what="per-example mu-GDP fit: no mu dominates the delta curve",
        )
        return np.where(np.all(need <= 0.0, axis=1), 0.0, hi), np.where(low.any(axis=1), t, np.inf)

    def _gdp_fit_epsilons(self, delta: float) -> Bounds:
        dlt = check_delta("delta", delta)
        fit = self.gdp_mus()
        mu = np.asarray(fit.upper, float)
        eps = gdp_epsilon_bounds_array(mu, dlt, lower=False)[1]
        d = fit.details
        cert = (eps <= d["epsilon_max"]) | (dlt >= np.asarray(d["certified_above"]))
        kind: Kind = "bound" if bool(np.all(cert)) and self._kind() == "bound" else "approximation"
        return Bounds(
            None,
            eps,
            eps,
            "epsilon",
            kind,
            {
                **d,
                "mu": mu,
                "certified": cert,
                "note": "epsilon of each example's fitted mu-GDP curve (Koskela et al. 2023, App. D.2); a certified upper bound "
                "where certified is True (the fit dominates the example's delta curve there)",
            },
        )

"""Per-example privacy filters of the ledger (Koskela et al. 2023, Alg. 1, Thm 11-12, Sec. 5; Feldman and Zrnic 2021).

``IndividualAccountant`` inherits ``active``: which examples' budget allows one more step. Each rule
says what it promises (a proven filter under fully adaptive composition, or a heuristic).
"""

from __future__ import annotations

import math

import numpy as np

from .._blas import single_threaded_blas
from .._types import AnyArray, ArrayLike, BoolArray
from .._validation import check_choice, check_delta, check_epsilon
from ._buckets import _U, _bucket_ratio, _clipped_ratio, check_norms
from ._rdp_gdp import _FIT_DELTA_MIN, _FIT_POINTS
from ._state import _LedgerState
from .gdp import gdp_mu
from .rdp import INDIVIDUAL_ORDERS, bucket_rdp_table, gaussian_budget_mu, rdp_filter_active

__all__: list[str] = []

_RULES = ("pld", "paper", "rdp")


class _Filters(_LedgerState):
    """The filter half of ``IndividualAccountant``: ``active`` and its rules."""

    def active(
        self, epsilon: float, delta: float, grad_norms: ArrayLike | None = None, *, rule: str | None = None
    ) -> BoolArray:
        """Boolean mask of examples whose budget ``(epsilon, delta)`` allows one more step.

        The caller records the step with norm 0 for the inactive examples (they do not contribute).
        ``grad_norms``: the coming step's norms, computed before the release (Alg. 1 requires that);
        None: the worst case ``C`` for every example. ``rule`` None (the default) is a proven filter:
        the GDP filter for DP-GD and ``"rdp"`` for DP-SGD. What each filter promises:

        ``sampling_rate = 1`` (DP-GD), ``rule`` "pld" or "paper": the individual GDP filter (Koskela et al. 2023, Alg. 1,
        eq. (4.1)) with budget ``B = gdp_mu(epsilon, delta)``: example i stays active iff
        ``sum_t mu_t^2 + mu_next^2 <= B^2``, ``mu_next = min(g_i, C) / (C sigma)``. Proven: every
        example is ``B``-GDP, hence ``(epsilon, delta)``-DP, under fully adaptive composition
        (Koskela et al. 2023, Thm 11, 12, Cor. C.2); tight for the Gaussian mechanism. With ``grad_norms=None`` an
        example once dropped stays dropped.

        ``rule="rdp"`` (any sampling rate): the individual RDP filter of Feldman and Zrnic (2021,
        Alg. 3, Thm 4.3) at one order ``alpha*``, with the budget ``b(alpha*)`` that Koskela et al. 2023, Lemma C.4
        converts to exactly ``epsilon`` at ``delta``: active iff the example's certified RDP of order
        ``alpha*`` after the next step is at most ``b(alpha*)``. ``alpha*`` depends on the options and
        ``(epsilon, delta)`` only, not on the data: the order that allows the most worst-case steps
        (largest ``b(alpha) / rho_worst(alpha)``, as Feldman and Zrnic budget the worst-case run).
        Proven under fully adaptive composition; certified (RDP curves rounded up). Looser than the
        GDP filter for DP-GD (RDP's conversion is lossy, Koskela et al. 2023, Sec. 4.1).
        (A budget at *every* order, e.g. the whole curve ``alpha B_R^2 / 2``, would also be valid but
        stops DP-SGD almost at once: the subsampled Gaussian's RDP at large orders grows like the
        unsubsampled one's.)

        ``rule="paper"`` with ``sampling_rate < 1``: Koskela et al. 2023, Sec. 5 as stated: example i stays active iff
        the mu of its fitted mu-GDP curve after the next step (``gdp_mus``, App. D.2) is at most
        ``B_R``, the largest ``B`` whose Gaussian RDP curve ``alpha B^2 / 2`` converts to
        ``(epsilon, delta)`` by Koskela et al. 2023, Lemma C.4 (``rdp.gaussian_budget_mu``; Sec. 5 converts the RDP of
        ``N(B, 1)`` vs ``N(0, 1)``,
        eq. (5.3), to (epsilon, delta)). Promise: none proven. Were the fitted curve a true mu-GDP
        bound for every epsilon, eq. (5.1)-(5.3) would make the example RDP-dominated by
        ``N(mu, 1)`` vs ``N(0, 1)`` at every order, and the guarantee would follow from Feldman and
        Zrnic's filter. But the fit is checked only down to a delta of about 1e-10 (``gdp_mus``), and for
        DP-SGD no small mu is a true bound at every epsilon (the composition's RDP at large orders
        grows like that of the unsubsampled mechanism, about ``k alpha r^2 / (2 sigma^2)``), so the
        rule admits steps that a proven RDP filter with the same curve would refuse. It is here to
        reproduce the paper; ``"rdp"`` is the proven choice.

        ``rule="pld"`` with ``sampling_rate < 1``: tightdp's heuristic: active iff the
        example's certified PLD epsilon after one more worst-case step (``grad_norms`` is not used)
        is at most ``epsilon``. It admits the most steps (no RDP conversion), and the epsilons are
        certified for the recorded sequence, but it is *not* a guarantee under fully adaptive
        composition: Tran, Koskela, Raisa, Honkela 2026 (arXiv 2602.06756) show that PLD / f-DP
        filters are not valid there; only GDP-based filters (and RDP ones) are proven. Use it as an
        odometer-driven stopping heuristic, and ``"rdp"`` when the filter must be a guarantee.

        Parameters
        ----------
        epsilon : float
            The per-example budget's epsilon, ``>= 0``.
        delta : float
            The per-example budget's delta in ``(0, 1)``.
        grad_norms : array_like, optional
            The coming step's unclipped per-example norms, shape ``(N,)``; None: the worst case.
        rule : {"pld", "paper", "rdp"}, optional
            See above; None: the proven filter for the sampling rate.

        Returns
        -------
        numpy.ndarray
            Boolean mask of length N: True for the examples that may take the step.

        Raises
        ------
        ValueError
            An argument out of range, an unknown ``rule``, norms of the wrong shape.
        """
        r = ("pld" if self._q == 1.0 else "rdp") if rule is None else check_choice("rule", rule, _RULES)
        if self._q == 1.0 and r != "rdp":
            return self._active(epsilon, delta, grad_norms)
        with single_threaded_blas():
            if r == "pld":
                return self._active(epsilon, delta, grad_norms)
            return self._active_rdp(epsilon, delta, grad_norms, paper=(r == "paper"))

    def _next_codes(self, grad_norms: ArrayLike | None) -> AnyArray:
        """Bucket index of every example's coming step (worst case ``B`` if ``grad_norms`` is None)."""
        if grad_norms is None:
            return np.full(self._n, self._B, dtype=np.intp)
        arr = check_norms(grad_norms, (self._n,))
        out = np.empty(self._n, dtype=self._code_dtype)
        saved = (self._ybuf, self._cbuf)
        self._codes(arr, out)
        self._ybuf, self._cbuf = saved
        return out.astype(np.intp)

    def _active_rdp(self, epsilon: float, delta: float, grad_norms: ArrayLike | None, paper: bool) -> BoolArray:
        """``rule="rdp"`` (Feldman and Zrnic's individual RDP filter) and ``rule="paper"`` (Koskela et al. 2023, Sec. 5)."""
        eps = check_epsilon("epsilon", epsilon)
        dlt = check_delta("delta", delta)
        if math.isinf(eps):
            return np.ones(self._n, dtype=bool)
        nxt = self._next_codes(grad_norms)
        if not paper:
            orders, spent = self.rdp_curves()
            if self._q == 1.0:
                r = (
                    np.ones(self._n)
                    if grad_norms is None
                    else _clipped_ratio(check_norms(grad_norms, (self._n,)), self._clip)
                )
                step = 0.5 * ((r / self._sigma) ** 2)[:, None] * orders[None, :] * (1.0 + 8 * _U)
            else:
                ratios = np.array([self._ratio_of(b) if b else 0.0 for b in range(self._B + 1)])
                used = np.zeros(self._B + 1, dtype=bool)
                used[np.unique(nxt)] = True
                step = bucket_rdp_table(self._sigma, self._q, ratios, orders, used)[nxt] * (1.0 + 1e-9)
            # Lemma C.4 solved for the RDP budget at each order, rounded down
            bvec = eps - np.log1p(-1.0 / orders) + (math.log(dlt) + np.log(orders)) / (orders - 1.0)
            bvec = bvec - 1e-12 * (np.abs(bvec) + eps + abs(math.log(dlt)))
            rho_w = bucket_rdp_table(self._sigma, self._q, np.array([_bucket_ratio(self._B, self._B)]), orders)[0]
            k = int(np.argmax(np.where(bvec > 0, bvec / np.maximum(rho_w, 1e-300), -np.inf)))
            return rdp_filter_active(spent[:, k : k + 1], step[:, k : k + 1], bvec[k : k + 1])
        counts = np.asarray(self._ledger()).astype(np.int64)
        counts[np.arange(self._n), nxt] += 1
        worst = np.zeros((1, self._B + 1), dtype=np.int64)
        worst[0, self._B] = self._steps + 1
        emax = float(self._eps_counts(worst, _FIT_DELTA_MIN)[0][0])
        mu, _ = self._gdp_fit_counts(counts, np.linspace(0.0, max(emax, 1e-6), _FIT_POINTS), _FIT_DELTA_MIN)
        return mu <= gaussian_budget_mu(eps, dlt, INDIVIDUAL_ORDERS)

    def _active(self, epsilon: float, delta: float, grad_norms: ArrayLike | None = None) -> BoolArray:
        eps = check_epsilon("epsilon", epsilon)
        dlt = check_delta("delta", delta)
        if self._q == 1.0:
            B = gdp_mu(epsilon=eps, delta=dlt)
            if grad_norms is None:
                nxt = np.ones(self._n)
            else:
                nxt = _clipped_ratio(check_norms(grad_norms, (self._n,)), self._clip)
            assert self._sumsq is not None  # kept whenever the sampling rate is 1
            total = (self._sumsq + nxt * nxt) * (1.0 + (self._steps + 8) * 2 * _U) / self._sigma**2
            return total * (1.0 + 8 * _U) <= B * B
        bump = np.zeros(self._B + 1, dtype=np.int64)
        bump[self._B] = 1
        counts = self._ledger().astype(np.int64) + bump  # (a dask-backed ledger stays lazy)
        # an epsilon the fast path cannot certify (inf) drops the example: conservative for a filter
        e, _ = self._eps_counts(counts, dlt, fallback=False)
        return e <= eps

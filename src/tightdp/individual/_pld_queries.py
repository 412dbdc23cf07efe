"""PLD queries of the per-example ledger: certified epsilon intervals and deltas (Koskela et al. 2023, Sec. 5, App. D).

``IndividualAccountant`` inherits these methods; they read the ledger's state (options, bucket
counts, the sums of squares for ``sampling_rate = 1``) and never write it, except the per-state memo
``_cache`` (bucket PLDs, the winning direction, the last discretisation slack).

* ``sampling_rate = 1`` (DP-GD): the composition of Gaussian mechanisms with ``mu_t = r_t / sigma`` is
  exactly ``sqrt(sum mu_t^2)``-GDP (Koskela et al. 2023, Thm 11); the conversion (Koskela et al. 2023, eq. (C.2)) is exact, rounded
  outwards (``gdp``).
* ``sampling_rate < 1`` (DP-SGD): each bucket's PLD is replaced by a dominating discrete pair (upper
  end) or a dominated one at the bucket's lower ratio (lower end) on a lattice
  (``tightdp.pld.dominance``, ``_dominating``), and composed per example by pre-computed FFTs and one
  matrix product per chunk of examples (Koskela et al. 2023, App. D, Lemma D.1, ``_population``); every numerical error
  is added to (upper) or subtracted from (lower) delta. Rows the fast path cannot certify are composed
  exactly by the core engine (``_exact_fallback``).
"""

from __future__ import annotations

import math
from typing import Any, cast

import numpy as np

from .._blas import single_threaded_blas
from .._gdp_math import gdp_delta_bounds_array, gdp_epsilon_bounds_array
from .._types import AnyArray, BoolArray, FloatArray
from .._validation import check_choice, check_delta, check_epsilon
from ..bounds import Bounds, Kind
from ..errors import PrecisionError
from ..losses import GaussianMixtureLoss, poisson_gaussian_loss
from ._buckets import _MARGIN, _U, _bucket_ratio
from ._chunks import map_chunks, rows_at
from ._dominating import DominatingPLD, dominated_pld, dominating_pld_core
from ._population import (
    _chunk_spectra,
    _delta_grid,
    _order,
    _prepare,
    bucket_spectra,
    choose_window,
    population_deltas,
    population_epsilons,
)
from ._state import _LedgerState

__all__: list[str] = []

_MAX_FFT = 1 << 15  # largest FFT window of the fast path: a wider one means few steps and a tiny delta
# (heavy tails far out at a mesh sized for the bulk); its inner-product rounding term (kmax u per
# frequency) then floors delta near 1e-9, so the mesh is coarsened and few-row ledgers are composed
# exactly as well (``_eps_counts``)
_ERR_SHARE = 0.01  # wrap-around and discretisation slack are each sized to at most this share of delta
_DELTAS_TARGET = 1e-12  # deltas(epsilon): wrap-around sized to at most this (absolute)
_SLACK_SHARE_FINE = 0.25  # second pass (finer mesh): slack up to this share of delta
_FALLBACK_GROUPS = 32  # most compositions the exact fallback runs per query
_METHODS = ("pld", "rdp", "gdp")


class _PLDQueries(_LedgerState):
    """The PLD half of ``IndividualAccountant``: ``epsilons``, ``deltas``, ``worst_case_epsilon`` and the
    lattice machinery behind them (bucket pairs, FFT windows, the exact fallback)."""

    def _mesh_for(self, counts: AnyArray) -> float:
        if self._mesh is not None:
            return self._mesh
        r2 = self._nominal_ratios() ** 2
        k_eff = float(np.max(rows_at(counts, r2))) if counts.shape[0] else 1.0
        s1 = self._q * math.sqrt(math.expm1(min(1.0 / self._sigma**2, 700.0)))
        h = math.sqrt(max(k_eff, 1.0)) * s1 / self._resolution
        return float(min(max(h, 1e-5), 0.05))

    def _nominal_ratios(self) -> FloatArray:
        """The ratio every bucket stands for (before the relative margin): ``b / B`` or the paper grid's."""
        return np.arange(self._B + 1) / self._B if self._edges is None else self._edges

    def _ratio_of(self, b: int) -> float:
        """The sensitivity ratio bucket ``b`` stands for, rounded up by the relative ``_MARGIN``."""
        if self._edges is None:
            return _bucket_ratio(b, self._B)
        return float(self._edges[b]) * (1.0 + _MARGIN)

    def _lower_ratio(self, b: int) -> float:
        """A lower bound on every sensitivity ratio recorded into bucket ``b``: each has a scaled ratio
        ``y >= b - 1 + frac_min`` (``_frac_min``: the lowest position within its bucket of any recorded
        ``y``), and the exact ratio is at least ``y (1 - 2u) / B``; the relative ``_MARGIN`` covers that.
        Paper grid: the bucket's lower edge."""
        if self._edges is not None:
            return float(self._edges[b - 1]) * (1.0 - _MARGIN)
        return max(0.0, b - 1 + self._frac_min) / self._B * (1.0 - _MARGIN)

    def _plds(self, h: float, buckets: tuple[int, ...], direction: str, lower: bool = False) -> list[DominatingPLD]:
        """Per-bucket discrete pairs on ``h Z``: dominating ones at the bucket's upper ratio (``b / B``,
        rounded up), or dominated ones at its lower ratio (``_lower_ratio``; a bucket whose lower ratio is
        0 becomes a point mass at loss 0, the mechanism without privacy loss)."""
        key = ("pld", h, direction, lower)
        store = self._cache.setdefault(key, {})
        out = []
        for b in buckets:
            if b not in store:
                ratio = self._lower_ratio(b) if lower else self._ratio_of(b)
                pld = None
                if ratio > 0:
                    loss = poisson_gaussian_loss(sigma=self._sigma / ratio, q=self._q, direction=direction)
                    mix = cast("GaussianMixtureLoss", loss)  # a Poisson-subsampled Gaussian's loss
                    pld = dominated_pld(mix, h) if lower else dominating_pld_core(mix, h)
                store[b] = pld if pld is not None else DominatingPLD(h, 0, np.ones(1), 0.0, 0.0)
            out.append(store[b])
        return out

    def _pld_setup(
        self,
        counts: AnyArray,
        h: float | None = None,
        target: float | None = None,
        slack_target: float | None = None,
        lower: bool = False,
    ) -> Any:
        """Bucket spectra for both directions. ``target``: the delta the error terms must stay well below
        (the window is widened until the wrap-around is at most ``target``, within ``_MAX_FFT`` points);
        ``slack_target`` (default ``target``): the mesh is coarsened until the discretisation slack fits."""
        slack_target = target if slack_target is None else slack_target
        used = tuple(int(b) for b in np.nonzero(np.asarray(counts[:, 1:].sum(axis=0)))[0] + 1)
        if not used:
            return None
        c = counts[:, list(used)]
        h = self._mesh_for(counts) if h is None else h
        setups = []
        for direction in ("remove", "add"):
            for _ in range(12):
                plds = self._plds(h, used, direction, lower)
                if slack_target is not None and slack_target > 0 and h < 0.05:
                    slack = float(np.max(rows_at(c, np.array([p.float_slack for p in plds]))))
                    if slack > slack_target:  # the slack shrinks about like 1/h^2
                        h = min(0.05, h * min(10.0, max(1.25, math.sqrt(slack / slack_target))))
                        continue
                j0, n = choose_window(plds, c, h, target)
                if n <= _MAX_FFT:
                    break
                h *= n / (_MAX_FFT // 2)  # window too large for the mesh: coarsen
            bs = bucket_spectra(plds, h, j0, n)
            bs.plds, bs.target = plds, target  # per-chunk windows (``_population._chunk_spectra``)
            setups.append((direction, bs, h))
        return c, setups

    def _eps_counts(
        self, counts: AnyArray, delta: float, h: float | None = None, *, fallback: bool = True
    ) -> tuple[FloatArray, dict[str, Any]]:
        """Certified per-row epsilons (fast path; rows it cannot certify go to ``_exact_fallback``)."""
        h0 = self._mesh_for(counts) if h is None else h
        setup = self._pld_setup(counts, h0, _ERR_SHARE * delta)
        if setup is None:
            return np.zeros(counts.shape[0]), {}
        c, setups = setup
        info: dict[str, Any] = {}
        per: dict[str, FloatArray] = {}
        eps = self._eps_setups(c, setups, delta, info, per=per)
        # which direction attains each example's upper bound (its lower bound is computed for that one)
        self._cache["winner"] = (per.get("add", eps) > per.get("remove", eps)) if per else None
        if max(hh for _, _, hh in setups) > 1.01 * h0:
            # the mesh was coarsened so that the discretisation slack is a small share of delta; that
            # can also lose resolution (long runs): a second pass that allows more slack on the finer
            # mesh, and the smaller of the two certified bounds is kept
            _, fine = self._pld_setup(counts, h0, _ERR_SHARE * delta, _SLACK_SHARE_FINE * delta)
            if max(hh for _, _, hh in fine) < max(hh for _, _, hh in setups):
                eps = np.minimum(eps, self._eps_setups(c, fine, delta, {}))
        # an example with no step of positive sensitivity composed only mechanisms without privacy loss:
        # epsilon 0 exactly (the lattice's error terms alone can keep a large window from showing it)
        idle = ~np.asarray(c.any(axis=1))
        eps = np.where(idle, 0.0, eps)
        bad = ~np.isfinite(eps)
        if fallback and np.any(bad):
            eps = eps.copy()
            eps[bad], info["fallback"] = self._exact_fallback(np.asarray(counts[np.nonzero(bad)[0]]), delta)
        if fallback and h0 is not None and max(hh for _, _, hh in setups) > 4 * h0:
            # the mesh had to be much coarser than the resolution asks (a window wider than _MAX_FFT):
            # the answer is certified but may be loose; if few compositions suffice, take the exact one too
            live = np.nonzero(np.asarray(counts[:, 1:].any(axis=1)) & ~bad)[0]
            rows = np.asarray(counts[live])
            if live.size and np.unique(rows, axis=0).shape[0] <= _FALLBACK_GROUPS // 4:
                ex, more = self._exact_fallback(rows, delta)
                info.setdefault("fallback", more)
                eps = eps.copy()
                eps[live] = np.minimum(eps[live], ex)  # both certified upper bounds
        return eps, info

    @staticmethod
    def _eps_setups(
        c: FloatArray,
        setups: Any,
        delta: float,
        info: dict[str, Any],
        lower: bool = False,
        per: dict[str, Any] | None = None,
        rows: dict[str, Any] | None = None,
    ) -> FloatArray:
        """Both directions' bounds, the larger kept (upper: the bound of the max; lower: a lower bound of
        it). ``rows[direction]``: compute that direction only for those rows (lower bounds: any one
        direction's lower bound is a lower bound of the max)."""
        eps = np.zeros(c.shape[0])
        for direction, bs, h in setups:
            sel = None if rows is None else rows.get(direction)
            if sel is not None and sel.size == 0:
                continue
            e, spent = population_epsilons(bs, c if sel is None else c[sel], delta, lower=lower)
            if sel is None:
                eps = np.maximum(eps, e)
            else:
                eps[sel] = np.maximum(eps[sel], e)
            if per is not None:
                per[direction] = e
            info[direction] = {
                "mesh": h,
                "fft_size": bs.n,
                "max_error_delta": float(np.max(spent)) if spent.size else 0.0,
            }
        return eps

    def _eps_lower_counts(
        self, counts: AnyArray, delta: float, h: float | None, winner: BoolArray | None = None
    ) -> tuple[FloatArray, dict[str, Any]]:
        """Certified per-row *lower* bounds on epsilon: the same lattice machinery on dominated bucket
        pairs (``_dominating.dominated_pld``, merge-to-the-grid) at each bucket's lower ratio, for the
        direction (remove / add) that attains the row's upper bound (half the work of both). A
        dominated pair composes like a dominating one (each step is a post-processing of the true
        one), so the composed lower delta is below the true composed delta, and a grid epsilon whose
        certified lower delta exceeds ``delta`` lies below the true epsilon."""
        setup = self._pld_setup(counts, h, _ERR_SHARE * delta, None, lower=True)
        if setup is None:
            return np.zeros(counts.shape[0]), {}
        c, setups = setup
        info: dict[str, Any] = {}
        rows = None
        if winner is not None and winner.shape == (c.shape[0],):
            rows = {"add": np.nonzero(winner)[0], "remove": np.nonzero(~winner)[0]}
        lo = self._eps_setups(c, setups, delta, info, lower=True, rows=rows)
        return np.where(np.asarray(c.any(axis=1)), lo, 0.0), info

    def _exact_fallback(self, counts: AnyArray, delta: float) -> tuple[FloatArray, dict[str, Any]]:
        """Certified epsilons of the rows the fast path could not certify, from the core engine
        (``ConnectDotsAccountant`` composing ``PoissonSampled(Gaussian)`` steps of each bucket's ratio).

        Rows with the same counts share one composition; if there are more than ``_FALLBACK_GROUPS``
        of them, each row is replaced by the dominating sequence of the same length at its largest
        bucket (data-processing inequality, Koskela et al. 2023, Thm D.2), and failing that by the worst case.
        """
        from ..accountants import ConnectDotsAccountant
        from ..mechanisms import Gaussian, PoissonSampled

        def compose(row: FloatArray) -> float:
            acc = ConnectDotsAccountant(eps_error=0.005)
            terms = [
                (
                    PoissonSampled(
                        mechanism=Gaussian(noise_multiplier=self._sigma, sensitivity=self._ratio_of(b)),
                        sampling_rate=self._q,
                    ),
                    int(row[b]),
                )
                for b in range(1, self._B + 1)
                if row[b] > 0
            ]
            if not terms:
                return 0.0
            acc.compose(terms)
            try:
                up = float(acc.epsilon(delta).upper)
            except PrecisionError as exc:
                raise PrecisionError(
                    f"per-example epsilon at delta={delta:g}: the FFT fast path's error terms "
                    f"(wrap-around, discretisation slack, round-off) exceed delta and the "
                    f"exact composition failed too ({exc}); use a larger delta"
                ) from exc
            if not math.isfinite(up) or up < 0:
                raise PrecisionError(
                    f"per-example epsilon at delta={delta:g}: no certified finite bound "
                    f"(core engine returned {up!r}); use a larger delta"
                )
            return up

        rows = np.asarray(counts, dtype=np.int64)
        method = "exact rows"
        uniq, inv = np.unique(rows, axis=0, return_inverse=True)
        if uniq.shape[0] > _FALLBACK_GROUPS:
            method = "largest bucket"
            K = rows.sum(axis=1)
            top = np.where(rows[:, 1:].any(axis=1), self._B - np.argmax(rows[:, :0:-1] > 0, axis=1), 0)
            dom = np.zeros_like(rows)
            dom[np.arange(rows.shape[0]), top] = K
            uniq, inv = np.unique(dom, axis=0, return_inverse=True)
            if uniq.shape[0] > _FALLBACK_GROUPS:
                method = "worst case"
                dom[:] = 0
                dom[:, self._B] = np.where(rows[:, 1:].any(axis=1), K, 0)
                dom[:, 0] = K - dom[:, self._B]
                uniq, inv = np.unique(dom, axis=0, return_inverse=True)
                if uniq.shape[0] > _FALLBACK_GROUPS:
                    uniq = np.zeros((1, self._B + 1), dtype=np.int64)
                    uniq[0, self._B] = int(K.max())
                    inv = np.where(rows[:, 1:].any(axis=1), 0, -1)
        vals = np.array([compose(u) for u in uniq])
        out = np.where(np.asarray(inv).reshape(-1) >= 0, vals[np.maximum(np.asarray(inv).reshape(-1), 0)], 0.0)
        return out, {
            "rows": int(rows.shape[0]),
            "compositions": int(uniq.shape[0]),
            "method": method,
            "engine": "ConnectDotsAccountant",
        }

    def epsilons(self, delta: float, *, lower: bool = True, method: str = "pld") -> Bounds:
        """Every example's epsilon at ``delta``, as an interval per example (arrays of length N).

        ``method`` (Koskela et al. 2023, Fig. 1 compares the three):

        * ``"pld"`` (default): the certified interval described below (Koskela et al. 2023, Sec. 5, App. D).
        * ``"rdp"``: a certified *upper* bound through per-example RDP curves and the RDP conversion
          (Koskela et al. 2023, Lemma C.4; ``tightdp.individual.rdp``); ``lower`` is None. Always at least the PLD
          upper bound up to the PLD's own error terms (the conversion is lossy).
        * ``"gdp"``: ``sampling_rate = 1``: the exact per-example mu-GDP (Koskela et al. 2023, Thm 11), the same numbers
          as ``"pld"``, ``kind="bound"``. ``sampling_rate < 1``: the epsilon of each example's fitted
          mu-GDP curve (``gdp_mus``, Koskela et al. 2023, App. D.2 / Sec. 5), ``kind="approximation"``: the fit is
          checked to dominate the example's certified delta(epsilon) only on ``[0, epsilon_max]``
          (``details``), so an answer at most ``epsilon_max`` is a certified upper bound
          (``details["certified"]`` marks them) and a larger one is not; ``lower`` is None.

        ``upper[i]`` is a certified upper bound and ``lower[i]`` a certified lower bound on the
        epsilon of the *exact* heterogeneous composition of example i's recorded steps (the
        Poisson-subsampled Gaussian at each step's recorded sensitivity ``min(g, C)``, both
        neighbouring directions), when every step was recorded with a computed norm (dense
        ``record_step``, or sparse with ``missing_norms="worst-case"``, which records the unlisted
        examples at sensitivity ``C``: then the interval is for that worst-case sequence).

        * ``upper``: each bucket's sensitivity interval is rounded up and its PLD replaced by a
          dominating discrete pair (Koskela et al. 2023, Thm D.2, App. D; ``tightdp.pld.dominance.dominating``),
          composed by FFT and read off by Plancherel (Lemma D.1); every numerical error is added
          to delta. For ``sampling_rate = 1``: the exact per-example GDP (Koskela et al. 2023, Thm 11).
        * ``lower``: each bucket's lower ratio (``b - 1 + frac`` buckets, ``frac`` the lowest recorded
          position within a bucket, so exact when norms sit on the grid ``k C / B``) and a
          *dominated* pair (merge to the grid, ``tightdp.pld.dominance.dominated``), which
          composes like the dominating one; every numerical error is subtracted. ``lower=False``
          skips it (about half the query time) and returns ``lower=None``.

        What it promises: the privacy of the steps *as recorded*, read off after the fact (an
        odometer, not a guarantee fixed before training; Koskela et al. 2023, Sec. 5). Fixed-in-advance
        per-example guarantees under fully adaptive composition are proven only for GDP-based
        filters (Koskela et al. 2023, Thm 11-12; Tran, Koskela, Raisa, Honkela 2026, arXiv 2602.06756, show that the
        natural PLD / f-DP filter is not valid under fully adaptive composition). With
        ``missing_norms="last-seen"`` an example with imputed steps (``approximated_steps > 0``) has no
        certified interval: the result's ``kind`` is then ``"approximation"`` and
        ``details["approximate_examples"]`` counts them.

        Parameters
        ----------
        delta : float
            Target delta in ``(0, 1)``.
        lower : bool
            Whether to compute the certified lower ends (``method="pld"``; about half the query time).
        method : {"pld", "rdp", "gdp"}
            See above.

        Returns
        -------
        Bounds
            ``lower`` (or None) and ``upper`` arrays of length N, quantity ``"epsilon"``; ``kind`` is
            ``"bound"`` or ``"approximation"`` as described; ``details`` records the method, meshes,
            error terms and the source.

        Raises
        ------
        ValueError
            ``delta`` out of range, an unknown ``method``, a non-boolean ``lower``.
        PrecisionError
            An example whose epsilon neither the FFT fast path nor the exact fallback can certify
            (use a larger delta).
        """
        m = check_choice("method", method, _METHODS)
        if m == "rdp":
            return self._rdp_epsilons(delta)
        if m == "gdp" and self._q < 1.0:
            return self._gdp_fit_epsilons(delta)
        if self._q == 1.0:  # closed form: no products to thread
            return self._epsilons(delta, lower)
        with single_threaded_blas():
            return self._epsilons(delta, lower)

    def _delta_curves(self, counts: AnyArray, grid: FloatArray) -> FloatArray:
        """Certified upper bounds on every row's delta at each epsilon of ``grid`` (max of both
        directions): the Plancherel inner products of Koskela et al. 2023, Lemma D.1 with every error term added."""
        setup = self._pld_setup(counts, None, _DELTAS_TARGET, 0.0)
        out = np.zeros((counts.shape[0], grid.size))
        if setup is None:
            return out
        c, setups = setup
        for _direction, bs, _h in setups:
            for rows, (d, _) in map_chunks(_chunk_delta_grid, bs, c, _order(bs, c), 2048, grid):
                out[rows] = np.maximum(out[rows], d)
        idle = ~np.asarray(c.any(axis=1))
        out[idle] = 0.0  # no step with privacy loss: delta 0 exactly
        return np.minimum(out, 1.0)

    def _epsilons(self, delta: float, lower: bool) -> Bounds:
        """``epsilons`` (BLAS limited to one thread by the caller)."""
        dlt = check_delta("delta", delta)
        if not isinstance(lower, (bool, np.bool_)):
            raise ValueError(f"lower must be True or False, got {lower!r}")
        details: dict[str, Any] = {"steps": self._steps, "num_buckets": self._B, "missing_norms": self._missing}
        lo = None
        if self._q == 1.0:
            mu = self.mus()
            up = gdp_epsilon_bounds_array(mu, dlt, lower=False)[1]
            if lower:
                assert self._sumsq is not None  # kept whenever the sampling rate is 1
                s = self._sumsq * (1.0 - (self._steps + 4) * 2 * _U)
                mu_lo = np.sqrt(np.maximum(s, 0.0)) / self._sigma * (1.0 - 4 * _U)
                lo = np.minimum(cast("FloatArray", gdp_epsilon_bounds_array(mu_lo, dlt)[0]), up)
            details.update(method="gdp", source="Koskela et al. 2023, Thm 11, eq. (C.2)")
        else:
            counts = self._ledger()
            up, info = self._eps_counts(counts, dlt)
            win = self._cache.pop("winner", None)
            # every example is dominated by the all-worst-case sequence of the same length
            # (Koskela et al. 2023, Thm D.2's data-processing argument), so that bound applies to each example too
            worst = self.worst_case_epsilon(dlt).upper
            up = np.minimum(up, worst)
            details.update(worst_case_epsilon=worst)
            details.update(
                method="pld", source="Koskela et al. 2023, App. D (dominating bucket PLDs, FFT, Plancherel)", **info
            )
            if lower:
                h = max(v["mesh"] for k, v in info.items() if k in ("remove", "add")) if info else None
                lo, linfo = self._eps_lower_counts(counts, dlt, h, win)
                lo = np.minimum(lo, up)  # both certified: lower <= true <= upper (a tie at most)
                details.update(
                    lower={
                        "method": "dominated bucket PLDs (merge to the grid) at each bucket's lower ratio",
                        "frac_min": self._frac_min,
                        **linfo,
                    }
                )
        kind: Kind = "bound"
        n_approx = int(np.count_nonzero(self._approx)) if self._approx is not None else 0
        if n_approx:
            kind = "approximation"
            details.update(
                approximate_examples=n_approx,
                note="missing norms imputed from each example's last-seen norm "
                "(approximated_steps > 0): those examples' intervals are not certified",
            )
        if not np.all(np.isfinite(up)):  # unreachable: the fallback certifies or raises
            raise PrecisionError("per-example epsilon: no certified finite bound; use a larger delta")
        return Bounds(lo, up, up, "epsilon", kind, details)

    def deltas(self, epsilon: float) -> Bounds:
        """Every example's delta at ``epsilon``: certified upper bounds (Koskela et al. 2023, Lemma D.1; Thm 11 for DP-GD).

        ``sampling_rate = 1``: the exact per-example GDP curve (Koskela et al. 2023, eq. (C.2)), rounded outwards.
        ``sampling_rate < 1``: the Plancherel inner products of the composed dominating bucket PLDs with
        every error term added (a second pass on a finer mesh when the discretisation slack is not small
        next to the answers; both certified, the smaller kept).

        Parameters
        ----------
        epsilon : float
            Finite epsilon, ``>= 0``.

        Returns
        -------
        Bounds
            Quantity ``"delta"``: ``estimate`` and ``upper`` arrays of length N (``lower`` None).

        Raises
        ------
        ValueError
            ``epsilon`` negative, NaN or infinite.
        """
        if self._q == 1.0:
            return self._deltas(epsilon)
        with single_threaded_blas():
            return self._deltas(epsilon)

    def _deltas(self, epsilon: float) -> Bounds:
        eps = check_epsilon("epsilon", epsilon)
        if math.isinf(eps):
            raise ValueError("epsilon must be finite")
        details: dict[str, Any] = {"steps": self._steps, "num_buckets": self._B}
        if self._q == 1.0:
            _, d, up = gdp_delta_bounds_array(self.mus(), eps)
            details.update(method="gdp", source="Koskela et al. 2023, Thm 11, eq. (C.2)")
            return Bounds(None, d, up, "delta", "bound", details)
        out = self._deltas_at(self._ledger(), eps, 0.0)
        if out is None:
            z = np.zeros(self._n)
            return Bounds(None, z, z, "delta", "bound", details)
        # the discretisation slack is an absolute term: if it is not small next to the answers,
        # a second pass on a mesh sized for them (both passes are certified; the smaller is kept)
        pos = out[np.asarray(self._ledger()[:, 1:].any(axis=1))]
        tgt = 0.01 * float(np.min(pos)) if pos.size else 0.0
        if tgt > 0 and self._cache.get(("deltas_slack", eps), math.inf) > tgt:
            second = self._deltas_at(self._ledger(), eps, tgt)
            assert second is not None  # the first pass answered on the same ledger
            out = np.minimum(out, second)
        details.update(method="pld", source="Koskela et al. 2023, Lemma D.1 (Plancherel)")
        return Bounds(None, out, out, "delta", "bound", details)

    def _deltas_at(self, counts: AnyArray, eps: float, slack_target: float) -> FloatArray | None:
        setup = self._pld_setup(counts, None, _DELTAS_TARGET, slack_target)
        if setup is None:
            return None
        c, setups = setup
        out = np.zeros(counts.shape[0])
        slack = 0.0
        for _direction, bs, _h in setups:
            out = np.maximum(out, population_deltas(bs, c, eps))
            slack = max(slack, float(np.max(rows_at(c, bs.slack))))
        out = np.where(np.asarray(c.any(axis=1)), out, 0.0)  # no step with privacy loss: delta 0 exactly
        self._cache[("deltas_slack", eps)] = slack
        return np.minimum(out, 1.0)

    def worst_case_epsilon(self, delta: float) -> Bounds:
        """Epsilon of an example with every recorded step at full sensitivity (the usual DP-SGD bound).

        Every example is dominated by this sequence (Koskela et al. 2023, Thm D.2), so it bounds each one's epsilon too.

        Parameters
        ----------
        delta : float
            Target delta in ``(0, 1)``.

        Returns
        -------
        Bounds
            A certified upper bound (``estimate == upper``; exact GDP for ``sampling_rate = 1``).

        Raises
        ------
        ValueError
            ``delta`` out of range.
        """
        dlt = check_delta("delta", delta)
        if self._steps == 0:
            return Bounds(0.0, 0.0, 0.0, "epsilon", "bound", {"note": "nothing recorded"})
        if self._q == 1.0:
            mu = math.sqrt(self._steps) / self._sigma * (1.0 + 4 * _U)
            e_gdp = float(gdp_epsilon_bounds_array(np.array([mu]), dlt, lower=False)[1][0])
            return Bounds(None, e_gdp, e_gdp, "epsilon", "bound", {"method": "gdp", "mu": mu})
        row = np.zeros((1, self._B + 1), dtype=np.int64)
        row[0, self._B] = self._steps
        e, info = self._eps_counts(row, dlt, self._mesh_for(self._ledger()))
        return Bounds(None, float(e[0]), float(e[0]), "epsilon", "bound", {"method": "pld", **info})


def _chunk_delta_grid(bs: Any, cc: AnyArray, grid: FloatArray) -> tuple[FloatArray, FloatArray]:
    """One chunk of ``_delta_curves``: certified upper deltas on the grid (``_population``'s own
    chunk window, product spectra and error terms)."""
    cb = _chunk_spectra(bs, cc)
    D = _delta_grid(cb, _prepare(cb, cc), grid)
    return D, D

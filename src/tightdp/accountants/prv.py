"""The PRV accountant (Gopi, Lee, Wutschitz 2021; Gopi et al. 2021) with certified two-sided bounds.

The mesh comes from the error budget: the coupling shift of Gopi et al. 2021, Thm 5.5 is
``t = r sqrt(k log(1/eta) / 2)`` for ``k`` compositions with cells of width
``r = h``, so ``h = eps_error / sqrt(k log(1/eta) / 2)`` (mesh ~ 1/sqrt(k),
Gopi et al. 2021, Sec. 5). The domain is not a fixed ``[-L, L]``: it is a Chernoff window
around the exponentially tilted composition (see ``tightdp.pld.compose``), of
width O(sqrt(k)) in loss units but centred where ``delta(eps)`` is decided, so
the cost is O(b * sqrt(k)) points for ``b`` distinct mechanisms and tiny
deltas (down to 1e-30 and below) keep full relative precision.

Long ledgers (``_HIERARCHY_MIN_STEPS`` steps and more) are composed through a mixed-radix tree of
re-binned blocks (``tightdp.pld.hierarchy.compose_tree``): hundreds of fine steps per first block
(the subsampled loss's heavy tail, not ``sqrt(m)`` standard deviations, sets a small block's window),
coarser meshes above, and a fine discretisation whose tails use cells ``R`` times wider
(``tightdp.pld.discretise_coarse_tail``). The coupling of Gopi et al. 2021, Lemma 5.3 / Thm 5.5 then bounds
``S - S~`` by Hoeffding's lemma on every rounding (conditionally, level by level) plus a Bennett
term for the rare wide tail cells; every piece is in the returned composition's ``coupling_shift``.
At sigma 0.8, q 4e-3, delta 1e-5 (eps_error 0.01) this costs about 0.3 s at k = 1e4, 1-2 s at
k = 3e5 and 15-20 s at k = 1e7 on the shared 2-core machine (BENCHMARKS.md, "PRV at scale").

Answers: ``upper`` is a proven bound (up to the correctness of scipy's special
functions and quadrature error estimates), ``lower`` likewise, and
``upper - lower`` is about ``2 * eps_error``.
"""

from __future__ import annotations

import math
import time
from typing import Any, cast

import numpy as np

from .._types import FloatArray
from .._validation import check_delta, check_eps_error
from ..bounds import Bounds
from ..errors import PrecisionError
from ..mechanisms import Mechanism
from ..pld import ComposedPLD, chernoff_epsilon, compose, delta_bounds, discretise, epsilon_bounds, saddle_tilt
from ..pld.composition import chernoff_window
from ..pld.discretise import discretise_coarse_tail
from ..pld.hierarchy import compose_tree
from ._pld import PLDAccountant, Terms, check_mechanism

__all__ = ["PRVAccountant"]


def _taus(slack: float, tilt: float) -> tuple[float, ...]:
    """Window levels to try: untilted, aliased mass counts in full against the delta slack, so a
    small fraction of it suffices; tilted, it is scaled by the untilting factor, so start lower."""
    first = min(1e-6, 0.05 * slack) if tilt == 0.0 else 1e-13
    return (first, first * 1e-7, first * 1e-17)


_HIERARCHY_MIN_STEPS = 3000
_FINE_SHARES = (0.6, 0.75, 0.9, 0.95)  # shares of the Hoeffding budget the schedule search may spend on the fine mesh
_FACTOR = 8  # steps per block grow by this factor a level after the first
_BLOCK_TAU = 1e-14  # window level of the blocks (their aliasing is paid as relative l1 error)
_TILT_CELLS = 1 << 14  # about this many cells in the coarse discretisation used to choose tilts
#: relative cost of one fine cell (cell masses by 8-point Gauss-Legendre) against one FFT window point
_CELL_COST = 8.0
#: the fine discretisation's tail cells are R times wider (R from _TAIL_SG, at most _TAIL_RATIO_MAX),
#: beyond the points where each tail's probability is _TAIL_SHARE / R^2 (``tightdp.pld.discretise_coarse_tail``)
_TAIL_SG = 0.4
_TAIL_RATIO_MAX = 63
_TAIL_SHARE = 0.01


def _round_mesh(h: float) -> float:
    """Round ``h`` down to a power of 2**(1/8) so nearby queries share cached discretisations."""
    k = math.floor(8 * math.log2(h))
    return cast("float", 2.0 ** (k / 8))


class PRVAccountant(PLDAccountant):
    """Certified PLD accountant with mesh and domain derived from an error budget (Gopi et al. 2021).

    Parameters
    ----------
    eps_error : float, default 0.01
        Half-width of the epsilon interval (the coupling shift of Gopi et al. 2021, Thm 5.5);
        ``upper - lower`` is about ``2 * eps_error``.
    delta_error : float, optional
        Total delta slack spent on the coupling failure probability, truncation
        and numerics. Default: ``1e-3 * delta`` for ``epsilon(delta)`` and
        ``1e-3`` of the answer for ``delta(eps)``.

    Raises
    ------
    ValueError
        ``eps_error`` or ``delta_error`` out of its domain, naming the argument.

    References
    ----------
    Gopi et al. 2021 (PRV accountant), Alg. 2, Lemma 5.3, Thm 5.5.
    """

    name = "prv"

    def __init__(self, *, eps_error: float = 0.01, delta_error: float | None = None) -> None:
        self.eps_error = check_eps_error("eps_error", eps_error)
        self.delta_error = None if delta_error is None else check_delta("delta_error", delta_error)
        super().__init__()
        self._ledger_changed()

    def options(self) -> dict[str, Any]:
        """The constructor's keyword arguments (JSON-ready), as ``to_dict`` stores them.

        Returns
        -------
        dict
            Option name to value; ``type(self)(**options())`` is an accountant with the same settings.
        """
        return {"eps_error": self.eps_error, "delta_error": self.delta_error}

    def _supports(self, mechanism: Mechanism) -> bool:
        check_mechanism(mechanism)
        return True

    # ------------------------------------------------------------------ plan
    def _plan(self, terms: Terms, eta: float, trunc: float) -> Any:
        k = sum(c for _, c in terms)
        h = _round_mesh(0.985 * self.eps_error / math.sqrt(0.5 * k * math.log(1.0 / eta)))
        tail = trunc / k
        return [(discretise(loss, h, tail), c) for loss, c in terms], h

    @staticmethod
    def _tree_budget(eta: float, trunc: float) -> tuple[float, float]:
        """``(eta, trunc)`` rounded down to powers of 10: the tree is built for these, so nearby slack
        values reuse one composition. A smaller ``eta`` only makes the mesh finer and a smaller
        ``trunc`` the truncation smaller: both stay valid."""
        return 10.0 ** math.floor(math.log10(eta)), 10.0 ** math.floor(math.log10(trunc))

    def _coarse_terms(self, terms: Terms, eta: float) -> Any:
        """A coarse discretisation of every term (about ``_TILT_CELLS`` cells each): it only chooses
        tilts and the tree's schedule, and any choice of either is valid (only accuracy and cost
        depend on it), so its mesh need not meet the error budget."""
        k = sum(c for _, c in terms)
        eta_b = self._tree_budget(eta, eta)[0]
        h = 0.985 * self.eps_error / math.sqrt(0.5 * k * math.log(1.0 / eta_b))
        tail = eta_b / k
        out = []
        for loss, c in terms:
            lo, hi = loss.lower_quantile(0.5 * tail), loss.upper_quantile(0.5 * tail)
            lo_s, hi_s = loss.support()
            span = min(hi, hi_s) - max(lo, lo_s) if math.isfinite(min(hi, hi_s) - max(lo, lo_s)) else 1.0
            hc = _round_mesh(max(h, span / _TILT_CELLS))
            out.append((discretise(loss, hc, tail), c))
        return out

    def _tree_plan(self, terms: Terms, eta: float) -> Any:
        """``(radices, meshes)`` of the multi-level composition (``tightdp.pld.hierarchy.compose_tree``),
        or None (flat, below ``_HIERARCHY_MIN_STEPS`` steps).

        The flat mesh ``h`` gives the Hoeffding sum ``k h^2``. The tree spends a share ``s`` of it on
        the fine discretisation (``g_0 = h sqrt(s)``) and the rest on the splits: level ``l`` has at
        most ``k // M_l + b`` roundings of width ``g_l = a h sqrt(M_l)`` (``M_l`` steps a block, ``b``
        terms' remainders), so ``a^2 = k (1 - s) / sum_l M_l (k // M_l + b)`` keeps ``H <= k h^2`` and
        the certified width that of the flat composition. The meshes are rounded down
        (``_round_mesh``), which only shrinks ``H``; the certificate itself uses the ``H`` of the
        blocks actually built, whatever the schedule.

        The schedule (first radix ``2^j``, then ``_FACTOR``; the share ``s``) minimises a cost
        model: ``_CELL_COST`` per fine cell plus the window points of every level's compositions,
        with the windows of blocks of ``M`` steps from Chernoff bounds on a coarse discretisation
        (``_coarse_terms``). With a heavy-tailed loss (the subsampled Gaussian's right tail reaches
        4-7 loss units where the block's bulk spans a few hundredths), the tail sets the window of a
        small block, so the search composes hundreds of fine steps at once before the first split.
        """
        k = sum(c for _, c in terms)
        if k < _HIERARCHY_MIN_STEPS:
            return None
        key = (tuple(terms), self._tree_budget(eta, eta)[0])
        plans = self.__dict__.setdefault("_plans", {})
        if key not in plans:
            if len(plans) >= 16:
                plans.pop(next(iter(plans)))
            plans[key] = self._search_plan(terms, eta)
        return plans[key]

    def _search_plan(self, terms: Terms, eta: float) -> Any:
        k = sum(c for _, c in terms)
        eta_b = self._tree_budget(eta, eta)[0]
        h = 0.985 * self.eps_error / math.sqrt(0.5 * k * math.log(1.0 / eta_b))
        coarse = self._coarse_terms(terms, eta)
        widths: dict[int, float] = {}

        def width(m: int) -> float:  # Chernoff window (loss units) of blocks of m steps of every term
            if m not in widths:
                lo, hi = chernoff_window([(d, min(c, m)) for d, c in coarse], 0.0, _BLOCK_TAU)
                widths[m] = hi - lo
            return widths[m]

        ratio = max(1, self._tail_ratio(k, eta))
        bulk = tail = 0.0  # loss range of the fine cells inside and outside the wide-tail thresholds, all terms
        for loss, _c in terms:
            lo, hi = loss.lower_quantile(0.5 * eta_b / k), loss.upper_quantile(0.5 * eta_b / k)
            lo, hi = max(lo, loss.support()[0]), min(hi, loss.support()[1])
            if ratio >= 3:
                t_lo = min(max(loss.lower_quantile(_TAIL_SHARE / ratio**2), lo), hi)
                t_hi = min(max(loss.upper_quantile(_TAIL_SHARE / ratio**2), t_lo), hi)
            else:
                t_lo, t_hi = lo, hi
            bulk += t_hi - t_lo
            tail += (hi - t_hi) + (t_lo - lo)
        b = len(terms)
        best = None
        first = 2
        while first * _FACTOR <= k:
            sizes = [first]
            while sizes[-1] * _FACTOR * _FACTOR <= k:
                sizes.append(sizes[-1] * _FACTOR)
            for share in _FINE_SHARES:
                g0 = _round_mesh(h * math.sqrt(share))
                rest = k * (h * h - g0 * g0)
                a2 = rest / (h * h * sum(m * (k // m + b) for m in sizes))
                meshes = [g0] + [_round_mesh(h * math.sqrt(m * a2)) for m in sizes]
                cost = _CELL_COST * (bulk / g0 + tail / (ratio * g0))
                for lvl, m in enumerate(sizes):
                    cost += 2.0 * width(m) / meshes[lvl]  # the block and the remainder
                cost += width(k) / meshes[-1]
                if best is None or cost < best[0]:
                    best = (cost, [sizes[0]] + [_FACTOR] * (len(sizes) - 1), meshes)
            first *= 2
        if best is None:
            return None
        return best[1], best[2]

    def _tilt_terms(self, terms: Terms, eta: float, trunc: float) -> Any:
        """Discretised terms used only to choose tilts (any choice is valid): the coarse ones for the
        tree, the single-level plan's otherwise."""
        if self._tree_plan(terms, eta) is None:
            return self._plan(terms, eta, trunc)[0]
        return self._coarse_terms(terms, eta)

    def _fine_terms(self, terms: Terms, eta: float, trunc: float) -> Any:
        """The fine discretisation of the tree (mesh ``meshes[0]``, truncation ``trunc / k`` a term)."""
        _, meshes = self._tree_plan(terms, eta)
        k = sum(c for _, c in terms)
        trunc = self._tree_budget(eta, trunc)[1]
        ratio = self._tail_ratio(k, eta)
        if ratio < 3:
            return [(discretise(loss, meshes[0], trunc / k), c) for loss, c in terms]
        return [(discretise_coarse_tail(loss, meshes[0], trunc / k, ratio, _TAIL_SHARE), c) for loss, c in terms]

    def _tail_ratio(self, k: int, eta: float) -> int:
        """Width ratio of the fine discretisation's tail cells: the largest odd ``R`` with
        ``R sqrt(8 log(1/eta) / k) <= _TAIL_SG`` (``s G`` at the Hoeffding-optimal Chernoff parameter ``s``),
        so the tail's share of the coupling's log-MGF stays a few per cent (``discretise_coarse_tail``);
        below 3, no wide cells."""
        eta_b = self._tree_budget(eta, eta)[0]
        r = int(_TAIL_SG / math.sqrt(8.0 * math.log(1.0 / eta_b) / k))
        r = min(r, _TAIL_RATIO_MAX)
        return r if r % 2 else r - 1

    def _composed(self, direction: int, terms: Terms, eta: float, trunc: float, tilt: float, tau: float) -> ComposedPLD:
        """The composition for one direction: the multi-level tree for long ledgers, else single-level."""
        tilt = round(tilt, 3)
        plan = self._tree_plan(terms, eta)
        if plan is not None:
            radices, meshes = plan
            key: tuple[Any, ...] = ("tree", direction, self._tree_budget(eta, trunc), tilt, tau)

            def build() -> ComposedPLD:
                fine = self._fine_terms(terms, eta, trunc)
                comp, info = compose_tree(fine, radices, meshes, tilt=tilt, tau=tau, block_tau=_BLOCK_TAU)
                comp.__dict__["tree_info"] = info  # reported in details
                return comp

            return self._memo(key, build)
        disc, h = self._plan(terms, eta, trunc)
        key = ("comp", direction, h, round(trunc, 300), tilt, tau)
        return self._memo(key, lambda: compose(disc, tilt=tilt, tau=tau))

    # --------------------------------------------------------------- queries
    def _epsilon_numeric(self, delta: float) -> Bounds:
        t0 = time.perf_counter()
        slack = self.delta_error if self.delta_error is not None else 1e-3 * self._finite_share(delta)
        if slack >= delta:
            raise ValueError(f"delta_error ({slack:g}) must be smaller than delta ({delta:g})")
        parts: list[Any] = []
        info: dict[str, Any] = {}
        for d, terms in enumerate(self._directions()):
            s = slack
            if self.delta_error is None and self._tree_plan(terms, 0.5 * slack) is not None:
                s = self._tree_slack(terms, delta, slack)
            for _ in range(3):
                res, comp = self._epsilon_direction(d, terms, delta, s)
                # where the curve is flat in log(delta) (large epsilon) the delta slack costs epsilon:
                # spend less of it, unless the user fixed it
                excess = res.upper - res.lower - 2.0 * comp.coupling_shift(0.5 * s)
                # a tree is rebuilt for a new slack (its mesh depends on it): worth it for a larger excess only
                allowed = (0.25 if "tree_info" in comp.__dict__ else 0.1) * self.eps_error
                if (
                    self.delta_error is not None or not math.isfinite(excess) or excess <= allowed or comp.tv_error >= s
                ):  # the block error, not the slack, dominates: nothing to gain
                    break
                s /= 30.0
            parts.append(res)
            info = {
                "mesh": comp.h,
                **({"tree": comp.__dict__["tree_info"]} if "tree_info" in comp.__dict__ else {}),
                "coupling_shift": comp.coupling_shift(0.5 * s),
                "grid_points": int(comp.tilted.size),
                "compositions": sum(c for _, c in terms),
                "delta_error": s,
                "numerical_error": max(info.get("numerical_error", 0.0), res.numerical_error),
            }
        info["seconds"] = time.perf_counter() - t0
        return self._combine_eps(parts, info)

    def _tree_slack(self, terms: Terms, delta: float, slack: float) -> float:
        """The delta slack to start a tree with: a slack ``s`` moves the epsilon bounds apart by about
        ``(s / delta) / lam`` (``lam``: the saddle-point tilt at the answer, the slope of ``log delta``
        in epsilon), so ``s = 0.1 eps_error lam delta`` keeps that below a tenth of ``eps_error`` without
        the rebuild a later refinement would cost (the tree's mesh depends on the slack). Any slack is
        valid; this only avoids building twice where the curve is flat (large epsilon)."""
        lam = chernoff_epsilon(self._tilt_terms(terms, 0.5 * slack, 0.25 * slack), delta)[1]
        return min(slack, max(0.1 * self.eps_error * lam * delta, slack / 900.0))

    def _epsilon_direction(self, d: int, terms: Terms, delta: float, slack: float) -> Any:
        """Bounds for one direction with the delta slack split between coupling failure (1/2),
        truncation (1/4) and aliasing/round-off (1/4)."""
        eta, trunc, num_budget = 0.5 * slack, 0.25 * slack, 0.25 * slack

        def plan() -> Any:  # discretisation to choose tilts from
            return self._tilt_terms(terms, eta, trunc)

        # FFT round-off is ~1e-16 of the total mass: without tilting it is far below delta >= 1e-10
        # for one FFT; smaller deltas, and the multi-level tree (whose blocks' round-off adds up over
        # ~k / 8 block uses), get an exponentially tilted FFT
        tree = self._tree_plan(terms, eta) is not None
        aim = self._finite_share(delta)  # what the finite losses decide (``PLDAccountant._finite_share``)
        tilt = 0.0 if aim >= 1e-10 and not tree else chernoff_epsilon(plan(), aim)[1]
        res, tau_i = None, 0
        for _ in range(4):
            taus = _taus(slack, round(tilt, 3))
            comp = self._composed(d, terms, eta, trunc, tilt, taus[tau_i])
            res = epsilon_bounds(comp, delta, eta)
            x = comp.x
            span = x[-1] - x[0]
            # untilted, the window holds the whole distribution: where the answer falls does not matter
            centred = (
                tilt == 0.0
                or not math.isfinite(res.estimate)
                or x[0] + 0.1 * span <= res.estimate <= x[-1] - 0.1 * span
                or (res.estimate == 0.0 and x[0] <= 0.0)
            )
            if res.numerical_error <= num_budget and centred:
                break
            if centred and comp.alias_mass > comp.l1_error and tau_i + 1 < len(taus):
                tau_i += 1  # widen the window
            else:  # re-centre the tilt on the answer
                new_tilt = saddle_tilt(plan(), res.estimate) if math.isfinite(res.estimate) else tilt
                if abs(new_tilt - tilt) < 1e-3:
                    break
                tilt = new_tilt
        assert res is not None  # the loop ran at least once
        if math.isinf(res.upper) and not res.note:
            raise PrecisionError(
                f"cannot certify epsilon at delta={delta:g}: the composition window "
                "could not be placed around the answer"
            )
        return res, comp

    def _delta_numeric(self, epsilons: FloatArray) -> Bounds:
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
            # the multi-level tree's block round-off adds up: tilt towards eps from the start
            tilt = (
                0.0
                if self._tree_plan(terms, 0.5 * slack) is None
                else saddle_tilt(self._tilt_terms(terms, 0.5 * slack, 0.25 * slack), eps)
            )
            best_lo, best_up, es = 0.0, 1.0, 0.0
            for _attempt in range(3):
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
                    tilt = saddle_tilt(self._tilt_terms(terms, 0.5 * slack, 0.25 * slack), eps)
            out.append((best_lo, min(max(es, best_lo), best_up), best_up))
        return max(v[0] for v in out), max(v[1] for v in out), max(v[2] for v in out)

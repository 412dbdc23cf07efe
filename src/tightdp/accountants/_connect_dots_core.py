"""The setting of the connect-the-dots accountant: accuracy targets, the ledger's directions, the first mesh.

``ConnectDotsAccountant`` (``connect_dots``) is assembled from this base, which holds what its refinement loops
read: the accuracy asked for, the distinct losses of each direction (Gaussian steps folded into one, repeated
atoms-only steps composed exactly), the closed form of an all-Gaussian ledger, the variance model behind the
first mesh and delta slack, the snapping of the mesh to the atoms' lattice, and the PRV fallback.
"""

from __future__ import annotations

import math
import time
from typing import Any, cast

import numpy as np

from .._accuracy import resolve_accuracy
from .._gdp_math import gdp_epsilon_bounds
from .._types import FloatArray
from .._validation import check_delta, check_real
from ..bounds import Bounds
from ..errors import PrecisionError, TightDPError
from ..losses import DiscreteLoss, GaussianLoss
from ..mechanisms import Gaussian
from ..pld import delta_bounds
from ..pld._cells import grid_ends
from ..pld.atoms import SelfComposedAtoms, atom_gaps, atom_lattice
from ..pld.dominance import (
    dominated,
    dominating,
    is_swapped_pair,
    loss_excess_kurtosis,
    loss_spread,
    own_pairs,
    supports_dominance,
)
from ._gaussian_ledger import gaussian_ledger_mu
from ._pld import Directions, PLDAccountant, Terms
from ._step_bounds import step_delta_bounds, total_variation_bound

__all__: list[str] = []

_FOLD_MU = 16.0  # Gaussian parts of a mixed ledger are folded into one step while mu stays this small
#: The per-step P-mass left outside a step's grid biases the discrete curves themselves, unseen by their
#: error terms: below the grid it is dropped by the lower construction and raised to the grid by the upper one
#: (at delta = 0.3 half of a 1e-3 slack moved both ends by 2e-4 of epsilon = 0.04). Below, that share of the
#: slack is small: the lower tails are light or bounded, a few more cells. Above, the upper construction sends
#: it to +inf (exactly counted; the lower one lowers it to the grid's top); heavy upper tails make a smaller
#: share costly, so it keeps half the slack and the refinement loop counts its effect on epsilon as numerical
#: error (then the slack shrinks).
_TAIL_BELOW = 1e-3
#: a ledger whose composed excess kurtosis exceeds this is far from Gaussian (rare steps decide delta), and a delta
#: pass there spans a step's loss range with at most ``_PASS_CELLS`` cells (``_ConnectDotsCore._rare_span``)
_FAR_KURTOSIS = 100.0
_PASS_CELLS = 1 << 18
#: ``_snap`` keeps the mesh where the atoms' lattice is more than this many times finer
_SNAP_FINER = 256.0
_TINY = 1e-300  # no coupling failure probability to spend
_U = float(np.finfo(float).eps) / 2


def _tilted_tau(relative_slack: float) -> float:
    """The tilted mass a tilted FFT's window may leave outside (``pld.composition.compose``): its error
    in delta is ``e^(K(theta) - theta eps) (2 tau + float)``, a Chernoff bound ``C delta`` times that, with
    ``C`` measured between e^1 and e^9 on DP-SGD ledgers (k = 1e3 ... 1e7, delta 1e-10 ... 1e-5). At the
    default slack (``1e-3 delta``) ``tau = 1e-9`` costs at most ``2e-5 delta``, 2 % of the slack, and the
    window holds +-6.4 standard deviations instead of the +-7.7 of ``tau = 1e-13`` (17 % fewer points);
    a smaller slack shrinks it in proportion."""
    return max(1e-13, 1e-6 * min(relative_slack, 1e-3))


def _budget(delta: float, slack: float, k_total: int, tilted: bool) -> tuple[tuple[float, float], float, float | None]:
    """``(tail, tau, tilt_delta)`` for a delta slack: the per-step truncated mass, the Chernoff
    window's tail level and the delta the FFT is tilted towards (``None``: untilted)."""
    tau = _tilted_tau(slack / delta) if tilted else min(1e-6, 0.05 * slack)
    tail = 0.5 * slack / k_total
    return (_TAIL_BELOW * tail, tail), tau, (delta if tilted else None)


#: a loss whose lattice is optional (``without_lattice``: the discrete Gaussian for sigma > 50) is composed on it only
#: while the composition's one-level window at the lattice's spacing, 13 standard deviations, holds at most this
#: many points; beyond, its atoms go into the cells of a mesh of the variance model's, where the ledger may also
#: compose on two levels (sigma 200, Delta 150: k = 100, 28 000 points, 6 ms for an interval 1e-3 wide instead of
#: 0.1; k = 1e6 on the lattice, 2.8 million points and 1 s, 11 ms on two levels)
_LATTICE_POINTS = 1 << 15


def _lattices_within_reach(terms: Terms) -> Terms:
    """``terms`` with every loss whose optional lattice is too fine for its count (``_LATTICE_POINTS``) replaced
    by the same loss without it (``without_lattice``); losses without that method are left as they are."""
    out = []
    for loss, c in terms:
        drop = getattr(loss, "without_lattice", None)
        coarse = drop() if callable(drop) else None
        if coarse is not None:
            atoms = [a for a in loss.lattice_atoms() if math.isfinite(a)]
            unit = atoms[1] - atoms[0] if len(atoms) >= 2 else 0.0
            if not unit > 0.0 or 13.0 * math.sqrt(c) * loss_spread(loss) > _LATTICE_POINTS * unit:
                loss = coarse
        out.append((loss, c))
    return out


def _atoms_in_blocks(terms: Terms) -> Terms:
    """``terms`` with every loss that composes itself in exact blocks (``in_blocks``: the subsampled discrete
    Laplace, ``mechanisms._atom_blocks``) replaced by its blocks; losses without that method are left as they are.
    Each block's atoms are then placed on the grid once instead of each step's."""
    out: Terms = []
    for loss, c in terms:
        split = getattr(loss, "in_blocks", None)
        out.extend(split(c) if callable(split) else [(loss, c)])
    return out


def _compose_atoms_first(terms: Terms) -> Terms:
    """``terms`` with every repeated atoms-only loss (pure/approximate DP, randomized response) composed
    exactly first (``pld.atoms.SelfComposedAtoms``: one term, placed on the grid once) when the atoms of
    the ledger lie on no common lattice, so that no grid holds them all; else ``terms`` unchanged (the
    grid is snapped to hold every atom, ``ConnectDotsAccountant._snap``)."""
    if not any(c > 1 and SelfComposedAtoms.applies(loss) for loss, c in terms):
        return terms
    if atom_lattice(atom_gaps(loss for loss, _ in terms)) is not None:
        return terms
    return [
        (SelfComposedAtoms(step=loss, count=c), 1) if c > 1 and SelfComposedAtoms.applies(loss) else (loss, c)
        for loss, c in terms
    ]


def _delta_at_zero(d: Any) -> float:
    """``delta(0) = E_P[(1 - e^(-L))_+]`` of one discretised pair (its total variation distance)."""
    loss = d.grid + d.shift
    return cast("float", float(np.dot(d.pmf, -np.expm1(-np.maximum(loss, 0.0)))) + d.infinity_mass)


def _excess_kurtosis(directions: Directions) -> float:
    """Excess kurtosis of the composed privacy loss under P in the first direction (``loss_excess_kurtosis``:
    fourth cumulants add over the steps, as variances do)."""
    var = [(loss, c, max(loss_spread(loss), 1e-12) ** 2) for loss, c in directions[0]]
    v = sum(c * s2 for _, c, s2 in var)
    return sum(c * loss_excess_kurtosis(loss) * s2 * s2 for loss, c, s2 in var) / (v * v)


def _loss_variance(directions: Directions) -> float:
    """Variance of the composed privacy loss under P in the first direction (the steps' spreads,
    ``loss_spread``): the near-Gaussian model behind the first mesh and the first delta slack."""
    return sum(c * max(loss_spread(loss), 1e-12) ** 2 for loss, c in directions[0])


class _ConnectDotsCore(PLDAccountant):
    """Accuracy, directions, closed forms, mesh model and fallback of ``ConnectDotsAccountant``."""

    #: answer with one pass and no lower bound (for internal searches that use only the upper end,
    #: such as the group-privacy-lemma baseline; its ``lower`` is then 0)
    _upper_only = False

    def __init__(
        self,
        *,
        eps_error: float | None = None,
        rel_error: float | None = None,
        delta_error: float | None = None,
        max_refinements: int = 8,
    ) -> None:
        self.eps_error, self.rel_error = resolve_accuracy(eps_error, rel_error)
        self.delta_error = None if delta_error is None else check_delta("delta_error", delta_error)
        self.max_refinements = int(
            check_real("max_refinements", max_refinements, low=0.0, low_open=False, high=20.0, high_open=False)
        )
        super().__init__()
        self._ledger_changed()

    def options(self) -> dict[str, Any]:
        """The constructor's keyword arguments (JSON-ready), as ``to_dict`` stores them.

        Returns
        -------
        dict
            Option name to value; ``type(self)(**options())`` is an accountant with the same settings.
        """
        return {
            "eps_error": self.eps_error,
            "rel_error": self.rel_error,
            "delta_error": self.delta_error,
            "max_refinements": self.max_refinements,
        }

    def _targets(self, eps: FloatArray) -> FloatArray:
        """``_target`` for an array of epsilons."""
        if self.rel_error is None:
            return np.full(np.shape(eps), 2.0 * self.eps_error)
        return 2.0 * np.maximum(self.eps_error, self.rel_error * np.asarray(eps, float))

    def _target(self, eps: float) -> float:
        """The width asked for at an answer near ``eps``: ``2 max(eps_error, rel_error eps)``."""
        if self.rel_error is None or not math.isfinite(eps):
            return 2.0 * self.eps_error
        return 2.0 * max(self.eps_error, self.rel_error * eps)

    def _undominated(self) -> str | None:
        """The first mechanism in the ledger without a dominance discretisation (its type name), if any.

        Such ledgers (Laplace, randomized response, pure or approximate DP
        steps) are answered by the PRV accountant, with a ``fallback`` detail.
        """
        for mech, _ in self._ledger:
            pair = mech.privacy_losses()
            if not (supports_dominance(pair.remove) and supports_dominance(pair.add)):
                return type(mech).__name__
        return None

    def _total_variation(self) -> float | None:
        """An upper bound on the composition's ``delta(0)`` (its total variation distance) in both directions, the
        sum of its steps' (``_step_bounds.total_variation_bound``), or ``None`` where a step has none. Where it lies
        below delta, epsilon is 0 exactly; no grid need be built (for atoms, its mesh model, fed a near-zero
        variance, would ask for tens of millions of points; a rate of 1e-9 in front of a loss of 1000 exceeds the
        cells' range)."""
        return total_variation_bound(PLDAccountant._directions(self))

    def _step_bounds(self, epsilons: FloatArray) -> tuple[FloatArray, FloatArray] | None:
        """Certified ``(lower, upper)`` on ``delta(epsilons)`` from each step alone (``_step_bounds``), or ``None``."""
        return step_delta_bounds(PLDAccountant._directions(self), epsilons)

    def _steps_enough(self, lower: FloatArray, upper: FloatArray) -> bool:
        """Whether the steps' bounds answer a delta query alone: every interval within the relative accuracy asked
        for (``rel_error``, or ``1e-3`` with an absolute target), or below ``1e-15`` (below any slack)."""
        rel = self.rel_error if self.rel_error is not None else 1e-3
        return bool(np.all((upper - lower <= 2.0 * rel * upper) | (upper < 1e-15)))

    def _steps_near(self, steps: tuple[FloatArray, FloatArray] | None, exc: ArithmeticError) -> Bounds | None:
        """Where the grids failed (``exc``), the steps' bounds as the answer if they are within 5 % at every epsilon
        (certified; a slower fallback would not help: a loss of 1000 behind a rate of 1e-9 is beyond the cells'
        reach, and the PRV accountant's grid answered [0, 1] after seconds), else ``None``."""
        if steps is None or not np.all(steps[1] - steps[0] <= 0.05 * steps[1]):
            return None
        return self._steps_answer(*steps, f"the grids could not answer ({exc})")

    @staticmethod
    def _intersect_steps(
        lower: FloatArray, upper: FloatArray, steps: tuple[FloatArray, FloatArray] | None
    ) -> tuple[FloatArray, FloatArray]:
        """The grids' delta interval intersected with the steps' (both certified: if they miss each other, that is
        a bug, raised as a ``TightDPError`` that no numerical fallback catches, never hidden)."""
        if steps is None:
            return lower, upper
        lower, upper = np.maximum(lower, steps[0]), np.minimum(upper, steps[1])
        if np.any(lower > upper):
            raise TightDPError("internal: the grids' and the steps' delta bounds do not intersect")
        return lower, upper

    def _steps_within(self, out: Bounds, steps: tuple[FloatArray, FloatArray] | None) -> Bounds:
        """A fallback's delta interval intersected with the steps' (a rate of 1e-9 before a Laplace loss of 979, delta
        near the top: the PRV accountant's [0, 1] becomes [0, 3e-9])."""
        if steps is None:
            return out
        lower, upper = self._intersect_steps(np.asarray(out.lower, float), np.asarray(out.upper, float), steps)
        est = np.clip(np.asarray(out.estimate, float), lower, upper)
        return Bounds(lower, est, upper, "delta", "bound", {**dict(out.details), "step_bounds": "intersected"})

    @staticmethod
    def _swap_bound_below(first: Any, terms0: Terms, terms: Terms, eps: float, delta: float) -> bool:
        """Whether the direction ``terms`` (each step the first direction's pair with P and Q
        exchanged) certainly has ``delta(eps) <= delta``, read off the first direction's dominating
        composition ``first``, so its epsilon cannot exceed ``eps``.

        For any pair, ``H_a(Q || P) = 1 - a + a H_{1/a}(P || Q)``; a pair that dominates at every
        ``a`` dominates the swapped pair too, and so does its composition (Blackwell). With
        ``a = e^eps``: ``delta_swapped(eps) <= e^eps (U(-eps) - (1 - e^-eps))``, where ``U`` is the
        certified upper bound on the first composition's curve. The subtraction loses about
        ``e^eps`` units of round-off, charged at ``8 u e^eps (1 + U)``; for large ``eps`` or tiny
        ``delta`` the test simply fails and the direction is composed.
        """
        if not math.isfinite(eps) or eps > 30.0 or len(terms) != len(terms0):
            return False
        if not all(c0 == c and is_swapped_pair(l0, l) for (l0, c0), (l, c) in zip(terms0, terms)):
            return False
        up = float(delta_bounds(first, np.array([-eps]), _TINY)[2][0])
        scale = math.exp(eps)
        bound = scale * (up + math.expm1(-eps)) + 8.0 * _U * scale * (1.0 + up)
        return bound <= delta

    @staticmethod
    def _steps_answer(lower: FloatArray, upper: FloatArray, note: str) -> Bounds:
        """The steps' bounds as the answer (``_step_bounds``: total variation above, tail events below)."""
        return Bounds(
            lower,
            upper.copy(),
            upper,
            "delta",
            "bound",
            {"method": "each step alone: total variation above, tail events below", "note": note},
        )

    def _directions(self) -> Directions:
        """Per direction, the distinct losses with their counts, the Gaussian ones folded into one
        Gaussian step of ``mu = sqrt(sum c mu_i^2)`` (exact) while that ``mu`` stays moderate, optional
        lattices too fine for their counts dropped (``_lattices_within_reach``) and few-atom steps composed in
        exact blocks (``_atoms_in_blocks``)."""
        out = []
        for terms in super()._directions():
            gauss = [(loss, c) for loss, c in terms if isinstance(loss, GaussianLoss)]
            mu2 = sum(c * loss.mu * loss.mu for loss, c in gauss)
            if (len(gauss) > 1 or (gauss and gauss[0][1] > 1)) and math.sqrt(mu2) <= _FOLD_MU:
                rest = [(loss, c) for loss, c in terms if not isinstance(loss, GaussianLoss)]
                terms = rest + [(GaussianLoss(mu=math.sqrt(mu2)), 1)]
            out.append(_compose_atoms_first(_atoms_in_blocks(_lattices_within_reach(terms))))
        return out

    def _gaussian_mu(self) -> float | None:
        """``mu`` of the whole ledger when every step's privacy loss is Gaussian (then exactly
        ``mu``-GDP in both directions), else ``None``."""
        return gaussian_ledger_mu(self._ledger)

    def _unsampled_hint(self, delta: float) -> str:
        """What can still be certified when a step's loss is out of range: for subsampled Gaussians,
        the same Gaussians without subsampling (joint convexity of the hockey-stick divergence:
        ``H(qA + (1-q)C || qB + (1-q)C) <= q H(A || B)``, so subsampling never raises delta)."""
        mu2 = 0.0
        for mech, count in self._ledger:
            inner = getattr(mech, "mechanism", None)
            if not isinstance(inner, Gaussian):
                return "no closed-form bound applies to this ledger"
            factor = 2.0 if getattr(mech, "relation", "substitute") == "substitute" else 1.0
            m = factor * inner.mu
            mu2 += count * m * m  # float products overflow to inf (a Python ** would raise)
        mu = math.sqrt(mu2)
        if not math.isfinite(mu) or mu > 1e150:
            return f"even without subsampling the run is beyond double precision (mu = {mu:.3g})"
        hi = gdp_epsilon_bounds(mu, delta)[2]
        return f"a certified upper bound without subsampling (joint convexity) is epsilon <= {hi:.6g} ({mu:.4g}-GDP)"

    def _closed_form_epsilon(self, mu: float, delta: float) -> Bounds:
        t0 = time.perf_counter()
        lo, est, hi = gdp_epsilon_bounds(mu, delta)
        details: dict[str, Any] = {"method": "closed form: exact mu-GDP (Dong, Roth, Su 2022, Cor. 3.3)", "mu": mu}
        if math.isinf(hi):
            raise PrecisionError(
                f"the ledger is {mu:.6g}-GDP; no double-precision epsilon reaches "
                f"delta = {delta:g} (epsilon is about mu^2 / 2 = {mu * mu / 2:.3g})"
            )
        details["seconds"] = time.perf_counter() - t0
        return Bounds(lo, est, hi, "epsilon", "bound", details)

    def _model_mesh(self, directions: Directions, z: float, half_width: float | None = None) -> float:
        """The mesh at which ``upper - lower`` should be about 1.6 eps_error.

        Splitting a loss between two grid points (and merging, for the lower
        bound) adds about ``h^2 / 6`` of variance per step; for a composition
        that is close to Gaussian with loss variance ``v``, epsilon at
        ``delta = e^(-z^2/2)`` moves by ``(1/2 + z / (2 sqrt(v)))`` per unit of
        variance, and the two constructions together move it by about three
        times the connect-the-dots share. The model only sets the first mesh:
        the accountant measures the width and refines.

        Far from Gaussian (few sampled steps: excess kurtosis ``kappa`` of the composition well above 0) the
        model overstates the gap: epsilon is decided by the rare steps' tail, whose own spread dwarfs the
        grid's, not by the whole variance. The mesh is then ``f = min(3, 1 + kappa)`` times larger, and at
        most ``min(f, 2)`` times the half-width asked for (measured on DP-SGD, k = 1 ... 1e4, q k = 0.01 ...
        100: the widths at the model's mesh were 2-50 % of the target where ``kappa > 0.3``; with the factor
        every first pass still met it; three half-widths missed at sigma 0.8, q 4e-3, k = 100,
        ``eps_error=1e-3``).
        """
        steps = sum(c for _, c in directions[0])
        v = _loss_variance(directions)
        slope = 0.5 + z / (2.0 * math.sqrt(max(v, 1e-300)))
        err = self.eps_error if half_width is None else half_width
        if half_width is None and self.rel_error is not None:
            # a relative target needs epsilon's scale: about v/2 + z sqrt(v) for a near-Gaussian composition
            err = max(self.eps_error, self.rel_error * (0.5 * v + z * math.sqrt(v)))
        h = math.sqrt(2.0 * 1.6 * err / (steps * slope))
        f = min(3.0, 1.0 + max(_excess_kurtosis(directions), 0.0))
        return self._snap(float(min(max(f * h, 1e-7), 0.05, min(f, 2.0) * err)), directions)

    def _rare_span(self, directions: Directions, tail: tuple[float, float]) -> float:
        """In a ledger far from Gaussian (excess kurtosis above ``_FAR_KURTOSIS``), the widest loss range a step's grid
        spans for ``tail`` (``pld._cells.grid_ends``); else 0.

        There the variance model's mesh is set by the common outputs' tiny spread, while delta is decided by the
        rare ones across the whole range (a record drawn once in a billion, delta(1) ~ 1e-31: the model asked for a
        mesh of 6e-7 over losses [-3.3, 2.7], 5 million cells a step and 80 s a pass). A delta pass's mesh is kept
        to at least ``span / _PASS_CELLS`` there: any mesh gives certified bounds, a coarser one only a wider
        interval, which the passes refine while it narrows."""
        if _excess_kurtosis(directions) <= _FAR_KURTOSIS:
            return 0.0
        span = 0.0
        for terms in directions:
            for loss, _ in terms:
                if own_pairs(loss):
                    continue
                s_lo, s_hi = grid_ends(loss, tail)
                if math.isfinite(s_hi - s_lo):
                    span = max(span, s_hi - s_lo)
        return span

    def _mesh_the_merge_holds(self, directions: Directions, h: float, tail: tuple[float, float]) -> float:
        """The first mesh, halved (up to four times) while the first direction's merge-to-the-grid pair loses
        the step's tail: its delta at 0 below half the connect-the-dots pair's.

        A Poisson-subsampled step's loss has its bulk (the unsampled outputs) within about ``q`` of its lower
        support end ``log(1 - q)``. On a mesh much coarser than that, the bulk's cell needs more surplus
        mass to reach its grid point than all the rare sampled cells above it hold, and the upward merge
        swallows the whole step into one atom (sigma 0.49, q 1e-3, k = 579: lower end 0 at the mesh 1.8e-3
        the few-sampled-steps model chose, the downward merge 2.74 for 3.17; the pass took 0.37 s on its
        wide windows and a second pass at a quarter of the mesh was needed, where the mesh 8.9e-4 gives
        width 6e-4 in 0.02 s). Checked only where the mesh exceeds the distance of a loss's lower support
        end from 0 (the bulk's scale), so the usual first pass pays nothing."""
        if self._upper_only:
            return h
        for _ in range(4):
            collapsed = False
            for loss, _c in directions[0]:
                lo_s = loss.support()[0]
                if own_pairs(loss) or not math.isfinite(lo_s) or h <= abs(lo_s):
                    continue
                up, down = dominating(loss, h, tail), dominated(loss, h, tail)
                if _delta_at_zero(down) < 0.5 * _delta_at_zero(up):
                    collapsed = True
                    break
            if not collapsed:
                return h
            h = self._snap(0.5 * h, directions)
        return h

    def _slack_share(self, directions: Directions, z: float) -> float:
        """The first pass's delta slack as a share of delta: 1e-3, or less where that would move epsilon by
        more than a tenth of the target. For a near-Gaussian composition of loss variance ``v``, ``log delta``
        falls by about ``z / sqrt(v)`` per unit of epsilon, so a slack ``s delta`` moves epsilon by about
        ``s sqrt(v) / z``. (At ``eps_error=1e-3``, k = 1e6, the default share moved epsilon by 8e-4: the
        first pass missed the target on the slack alone and a second one ran, 2 s instead of 1.)"""
        v = _loss_variance(directions)
        sd = math.sqrt(max(v, 1e-300))
        allowed = 0.1 * self._target(0.5 * v + z * sd)  # epsilon is about v/2 + z sqrt(v)
        return min(1e-3, max(1e-9, allowed * z / sd))

    @staticmethod
    def _snap(h: float, directions: Directions) -> float:
        """The largest mesh ``<= h`` that divides the distances between every loss's atoms
        (``PrivacyLoss.lattice_atoms``: pure DP, randomized response, Laplace's ``+-r``, subsampled
        Laplace's support ends), when they lie on a common lattice (``pld.atoms.atom_lattice``: the mesh
        is its unit ``g`` divided by ``ceil(g / h)``, or ``g`` itself where ``h / 256 <= g < h``); else ``h``
        (also where ``g < h / 256``: a subsampled Laplace at rate 8e-7, atoms 2.6e-6 apart beside pure-DP steps, asked
        for 23 million cells a step and 130 s; its atoms sit within one cell of ``h`` anyway). Each
        loss's grid is offset to hold its lowest atom (``pld.dominance.grid_offset``), so on that mesh every
        atom is a grid point. (A Gaussian mixture's finite support end is a limit, not an atom: not snapped.)
        A ledger of atoms only (pure and approximate DP, randomized response) gets the coarsest lattice
        that holds every atom, however coarse: on it both constructions are the exact composition (an
        exact enumeration of the atoms' sums, with rounding only), so a finer mesh buys nothing.

        An atom on a grid point is split or merged exactly, so atoms cost no discretisation width;
        off the grid, each step's atom moves by up to a mesh and the gap grows with the steps."""
        losses = [loss for terms in directions for loss, _ in terms]
        atoms_only = all(isinstance(loss, DiscreteLoss) for loss in losses)
        gaps = atom_gaps(losses)
        lattice = atom_lattice(gaps)  # the one test of commensurability (as _compose_atoms_first)
        if len(gaps) == 1 or lattice is None:  # no atom apart from each loss's lowest, or no common lattice
            return h
        g = lattice[0]
        if not atoms_only and g < h / _SNAP_FINER:
            return h  # a lattice far finer than the mesh (atoms within one cell) would multiply the cells
        return g if atoms_only else g / max(1, math.ceil(g / h - 1e-9))

    def _fallback(self, delta: float, reason: str, *, epsilons: FloatArray | None = None) -> Bounds:
        """The coupling-based PRV accountant, for what the dominance grids cannot resolve
        (``epsilon(delta)``, or ``delta(epsilons)`` when ``epsilons`` is given). Ledgers with losses that
        bring their own pairs (random allocation, truncated Poisson) have no coupling to fall back on."""
        if any(own_pairs(loss) for mech, _ in self._ledger for loss in mech.privacy_losses()):
            raise PrecisionError(
                f"the dominance pairs cannot resolve this query ({reason}), and this sampling "
                "scheme has no coupling-based (PRV) analysis to fall back on"
            )
        from .prv import PRVAccountant

        prv_error = self.eps_error if self.rel_error is None else min(0.01, max(self.eps_error, self.rel_error))
        prv = PRVAccountant(eps_error=prv_error, delta_error=self.delta_error).compose(self._ledger)
        b = prv.epsilon(delta) if epsilons is None else prv.delta(epsilons)
        return Bounds(
            b.lower, b.estimate, b.upper, b.quantity, "bound", {**dict(b.details), "fallback": f"prv ({reason})"}
        )

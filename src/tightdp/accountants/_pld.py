"""Shared machinery of the PLD accountants (PRV and Fourier): directions, terms, answers."""

from __future__ import annotations

import math
from abc import abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from fractions import Fraction
from typing import Any, TypeVar, cast

import numpy as np

from .._types import FloatArray
from ..bounds import Bounds
from ..errors import GridTooLargeError, PrecisionError
from ..losses import DiscreteLoss, PrivacyLoss
from ..mechanisms import Mechanism
from ..pld import CurveBounds
from ..pld.atoms import SelfComposedAtoms, composed_atom_values
from ._events import StepEvent, event_epsilon_lower
from ._top_atoms import TopAtoms, delta_bounds, epsilon_bounds, top_atoms
from .base import Accountant

#: distinct privacy losses (or composed stand-ins for them) with their counts, one direction of a ledger
Terms = list[tuple[Any, int]]
#: the terms of each neighbouring direction (remove, then add when it differs)
Directions = list[Terms]


_T = TypeVar("_T")

#: ``1 - 1e-9`` less two ulps, for a product's rounding: a step's ``sf`` times it is below ``sf (1 - 1e-9)``
_SF_LOW = math.nextafter(math.nextafter(1.0 - 1e-9, 0.0), 0.0)


class PLDAccountant(Accountant):
    """Base of the accountants that compose discretised PLDs.

    Under add/remove neighbouring, all steps of a composition share one
    direction, so the composed guarantee is the worse of the all-remove and
    all-add compositions (the max of their delta curves). Symmetric ledgers are
    computed once.
    """

    def _ledger_changed(self) -> None:
        self._cache: OrderedDict[Any, Any] = OrderedDict()

    def _directions(self) -> list[list[tuple[PrivacyLoss, int]]]:
        """Per direction, the distinct losses with their total counts."""
        remove: dict[PrivacyLoss, int] = {}
        add: dict[PrivacyLoss, int] = {}
        for mech, count in self._ledger:
            pair = mech.privacy_losses()
            remove[pair.remove] = remove.get(pair.remove, 0) + count
            add[pair.add] = add.get(pair.add, 0) + count
        out = [list(remove.items())]
        if add != remove:
            out.append(list(add.items()))
        return out

    def _curve_kinks(self, high: float, limit: int) -> FloatArray | None:
        """The epsilons in ``[0, high]`` where the privacy curve can have a kink, when the ledger is of
        atoms on one lattice (pure/approximate DP, randomized response): the composed loss's values, in
        every direction (``pld.atoms.composed_atom_values``); ``None`` otherwise or beyond ``limit``.
        ``tradeoff_curve`` asks for delta there, which makes its curve exact up to the delta widths."""
        out = []
        for terms in PLDAccountant._directions(self):
            v = composed_atom_values(terms, 0.0, high, limit)
            if v is None:
                return None
            out.append(v)
        kinks = np.unique(np.concatenate(out)) if out else np.empty(0)
        return kinks if kinks.size <= limit else None

    # ------------------------------------------------ exact answers at and beyond the loss support
    def _support_ceiling(self) -> tuple[float, float]:
        """``(top, p_inf)``: the largest finite value the composed privacy loss can take (``inf`` if
        unbounded) and the largest probability, over directions, of an infinite loss.

        For ``eps >= top`` only the infinite atom contributes to
        ``delta(eps) = E_P[(1 - e^(eps - L))_+]``, so ``delta(eps) = P(L = inf)`` exactly
        (0 for a pure-DP ledger: 3 Laplace(1) steps never lose more than 3). Each step's top counts its
        mechanism's ``loss_top_error`` (a computed top can lie an ulp below the exact one).
        """
        return self._memo(("support",), self._support_ceiling_uncached)

    def _support_ceiling_uncached(self) -> tuple[float, float]:
        top_error: dict[PrivacyLoss, float] = {}  # each loss's computed top against its mechanism's exact one
        for mech, _ in self._ledger:
            pair, err = mech.privacy_losses(), mech.loss_top_error()
            for loss in (pair.remove, pair.add):
                top_error[loss] = max(top_error.get(loss, 0.0), err)
        top, p_inf = -math.inf, 0.0
        for terms in PLDAccountant._directions(self):
            ends = [(loss.support()[1], top_error[loss], c) for loss, c in terms]
            if all(math.isfinite(e) for e, _, _ in ends):  # the exact sum, rounded up to a float
                exact = sum((Fraction(e) + Fraction(err)) * c for e, err, c in ends)
                t = float(exact)
                if Fraction(t) < exact:
                    t = math.nextafter(t, math.inf)
            else:
                t = math.inf
            masses = [(min(max(loss.infinity_mass, 0.0), 1.0), c) for loss, c in terms]
            p = 1.0 if any(m >= 1.0 for m, _ in masses) else -math.expm1(sum(c * math.log1p(-m) for m, c in masses))
            top, p_inf = max(top, t), max(p_inf, p)
        return top, p_inf

    def _finite_share(self, delta: float) -> float:
        """``delta`` less the mass at infinity (rounded up), where that leaves a positive share, else ``delta``.

        ``delta(eps) = M + (1 - M) delta_finite(eps)`` with ``M`` the probability of an infinite loss, so the
        finite losses decide epsilon at ``delta - M``; a slack of ``1e-3 delta`` would swallow that share when
        ``M`` takes most of ``delta`` (``ApproximateDP`` beside a Gaussian at ``delta = M (1 + 1e-6)``: an upper
        end of inf against a true 3.10). The accountants aim their slack, tilt and windows at it: accuracy, not
        validity."""
        p_inf = self._support_ceiling()[1]
        rest = delta - p_inf * (1.0 + 1e-12)
        return rest if p_inf > 0.0 and 0.0 < rest < delta else delta

    def _exact_infinity_mass(self) -> Fraction | None:
        """The largest probability, over directions, of an infinite loss, exactly: ``1 - prod_i (1 - m_i)^(c_i)``
        in rationals from each step's float mass ``m_i`` (the engine's exact masses); ``None`` when the powers
        would hold more than about a million bits (``_support_ceiling``'s float, within 1e-12, then decides).

        It settles a delta within rounding of that mass: at ``delta = P(L = inf)`` exactly (one
        ``ApproximateDP(1, 1e-5)`` asked at 1e-5) epsilon is the top of the loss's support, not infinite.
        """
        best = Fraction(0)
        for terms in PLDAccountant._directions(self):
            masses = [(Fraction(min(max(loss.infinity_mass, 0.0), 1.0)), c) for loss, c in terms]
            if sum(c * m.denominator.bit_length() for m, c in masses if m) > 1_000_000:
                return None
            keep = Fraction(1)
            for m, c in masses:
                if m:
                    keep *= (1 - m) ** c
            best = max(best, 1 - keep)
        return best

    def _top_mass_lower(self, delta: float) -> float:
        """A certified lower end of ``eps(delta)`` from the mass near the top of each step's loss support.

        In a composition of independent steps, the outputs where every step's loss exceeds ``x_i`` (each step's
        ``E_i``) have ``P(E) = prod_i P(E_i)^(c_i)`` and a loss above ``X = sum_i c_i x_i``, so ``Q(E) <= e^-X
        P(E)`` and ``delta(eps) >= P(E) - e^eps Q(E) >= P(E) (1 - e^(eps - X))``; hence ``eps(delta) >= X + log(1 -
        delta / P(E))`` for ``delta < P(E)`` (in any one direction, so for the pair): ``_events.event_epsilon_lower``
        of the intersection, which rounds it down. ``x_i`` sits ``1e-9 (1 + |hi_i|)`` below the step's top
        ``hi_i``, where an atom there (a Laplace, randomized-response or pure-DP step) keeps its mass; ``P(E_i)``
        is the step's ``sf`` lowered ``1e-9`` relative for its rounding.

        Parameters
        ----------
        delta : float
            The delta, in (0, 1).

        Returns
        -------
        float
            The lower end, ``>= 0``; 0 where some step's loss is unbounded above or ``P(E) <= delta``.
        """
        best = 0.0
        for terms in PLDAccountant._directions(self):
            steps = []
            for loss, c in terms:
                hi = loss.support()[1]
                if not math.isfinite(hi):
                    break
                x = hi - 1e-9 * (1.0 + abs(hi))
                tail = float(np.asarray(loss.sf(x)))
                if not tail > 0.0:
                    break
                # P(E_i) >= tail (1 - 1e-9), rounded down (the product's rounding is within the two ulps);
                # no Q-masses: Q(E_i) <= e^-x_i P(E_i) alone bounds them (an unbounded q, an unknown complement)
                steps.append(
                    StepEvent(
                        np.array([tail * _SF_LOW]),
                        np.array([math.inf]),
                        np.zeros(1),
                        np.array([math.inf]),
                        np.array([x]),
                        c,
                    )
                )
            else:
                best = max(best, event_epsilon_lower(steps, delta))
        return best

    # ------------------------------------------------ exact answers from the composed atoms near the top
    def _atoms_only(self, beside: int = 0) -> bool:
        """Whether every step's loss is made of atoms on one lattice (``DiscreteLoss``: pure/approximate DP,
        randomized response; ``SelfComposedAtoms.applies``), but for at most ``beside`` distinct losses per
        direction that are not ``DiscreteLoss`` at all."""
        directions = PLDAccountant._directions(self)
        return all(
            sum(not isinstance(loss, DiscreteLoss) for loss, _ in terms) <= beside
            and all(SelfComposedAtoms.applies(loss) for loss, _ in terms if isinstance(loss, DiscreteLoss))
            for terms in directions
        )

    def _top_listings(self, floor: float) -> list[TopAtoms] | None:
        """Per direction, every composed atom whose loss can reach ``floor`` (``_top_atoms``), or ``None`` when the
        ledger is not atoms-only (one bounded step beside them allowed) or some direction has too many (then the
        numerics answer alone)."""
        if not self._atoms_only(beside=1):
            return None
        directions = PLDAccountant._directions(self)

        def build() -> list[TopAtoms] | None:
            out = [top_atoms(terms, floor) for terms in directions]
            return None if any(t is None for t in out) else cast("list[TopAtoms]", out)

        return self._memo(("top atoms", floor), build)

    def _top_epsilon(self, delta: float, out: Bounds | None = None) -> Bounds | None:
        """``eps(delta)`` from the composed atoms above a certified lower end, when the ledger is atoms-only and every
        direction lists them (``_top_atoms``; ``eps(delta)`` is the largest over directions): exact up to rounding,
        whatever the request's accuracy (a tighter one is never wider). Without ``out`` the floor is
        ``_top_mass_lower`` and the answer stands alone (``None`` if it cannot); with ``out`` (the numerics') its
        lower end, and ``out`` is narrowed (returned as it is when the listing cannot help)."""
        if not self._atoms_only(beside=0 if out is None else 1) or (out is not None and not math.isfinite(out.upper)):
            return out
        floor = max(0.0, self._top_mass_lower(delta), out.lower if out is not None else 0.0)
        listings = self._top_listings(floor)
        ends = [epsilon_bounds(t, delta, out.upper if out is not None else math.inf) for t in listings or ()]
        uppers = [up for _, up in ends]
        if listings is None or any(up is None for up in uppers):
            return out
        upper = max(cast("list[float]", uppers))
        upper = min(upper, out.upper) if out is not None else upper
        lower = min(max([floor] + [lo for lo, _ in ends if lo is not None]), upper)
        note = (
            f"every composed atom of loss >= {floor:.6g} listed ({max(t.loss_low.size for t in listings)} atoms); "
            "delta(eps) summed over them"
        )
        details = {**(dict(out.details) if out is not None else {}), "method": "exact composed atoms near the top"}
        details["top_atoms"] = note
        est = min(max(out.estimate, lower), upper) if out is not None else upper
        return Bounds(lower, est, upper, "epsilon", "bound", details)

    def _top_delta(self, epsilons: FloatArray, out: Bounds | None = None) -> Bounds | None:
        """``delta(eps)`` at ``epsilons`` from the composed atoms above the least epsilon (``_top_atoms``), when every
        direction lists them. Without ``out`` the answer stands alone (``None`` if it cannot); with ``out`` (the
        numerics') it narrows ``out``, above the least epsilon if it can, else above the least whose interval is
        wider than ``1e-6`` relative (the few near the top of a long ledger's support)."""
        if out is None:
            if not self._atoms_only() or not epsilons.size or float(epsilons.min()) < 0.0:
                return None  # a step beside the atoms: its upper end is loose where its loss spreads
            listings = self._top_listings(max(0.0, float(epsilons.min())))
            if listings is None:
                return None
            ends = [delta_bounds(t, epsilons) for t in listings]
            lower, upper = np.max([lo for lo, _ in ends], axis=0), np.max([up for _, up in ends], axis=0)
            note = "delta summed over the composed atoms above the least epsilon asked (exact up to rounding)"
            return Bounds(lower, upper, upper, "delta", "bound", {"method": "exact composed atoms", "top_atoms": note})
        width = np.asarray(out.upper - out.lower)
        for wide in ((width > 0.0) & (epsilons >= 0.0), (width > 1e-6 * np.asarray(out.upper)) & (epsilons >= 0.0)):
            listings = self._top_listings(max(0.0, float(epsilons[wide].min()))) if wide.any() else None
            if listings is not None:
                break
        else:
            return out
        ends = [delta_bounds(t, epsilons[wide]) for t in listings]
        lower, upper = np.array(out.lower, float), np.array(out.upper, float)
        lower[wide] = np.maximum(lower[wide], np.max([lo for lo, _ in ends], axis=0))
        upper[wide] = np.minimum(upper[wide], np.max([up for _, up in ends], axis=0))
        est = np.clip(np.asarray(out.estimate, float), lower, upper)
        note = "delta summed over the composed atoms above the least epsilon asked (exact up to rounding)"
        return Bounds(lower, est, upper, "delta", "bound", {**dict(out.details), "top_atoms": note})

    def _epsilon(self, delta: float) -> Bounds:
        top, p_inf = self._support_ceiling()
        exact = None
        if p_inf * (1.0 - 1e-12) <= delta < p_inf * (1.0 + 1e-12):  # within the float's rounding: decide exactly
            exact = self._exact_infinity_mass()
        if (p_inf * (1.0 - 1e-12) > delta) if exact is None else (Fraction(delta) < exact):
            # the mass at infinite loss alone exceeds delta (rounding paid, or exactly). It is a true atom only where
            # every step says so (``infinity_is_exact``); a truncated tail sent to +inf (a discrete Gaussian's 3e-86)
            # makes the upper end infinite but certifies no lower end: 0 there
            exact_atoms = all(
                loss.infinity_is_exact or loss.infinity_mass <= 0.0
                for terms in PLDAccountant._directions(self)
                for loss, _ in terms
            )
            return Bounds(
                math.inf if exact_atoms else 0.0,
                math.inf,
                math.inf,
                "epsilon",
                "bound",
                {
                    "note": f"the probability of an infinite privacy loss, {p_inf:.6g}, exceeds delta = {delta:g}: "
                    + (
                        "epsilon is infinite"
                        if exact_atoms
                        else "no finite upper end from this pair (its +inf holds truncated tails); lower end 0"
                    ),
                    "p_inf": p_inf,
                },
            )
        # then epsilon <= top exactly: delta(top) = P(L = inf) <= delta
        capped = math.isfinite(top) and (delta >= p_inf * (1.0 + 1e-12) or exact is not None)
        alone = self._top_epsilon(delta)  # a short atoms-only ledger: no grid at all
        if alone is not None:
            return alone
        try:
            out = self._epsilon_numeric(delta)
        except GridTooLargeError:
            raise
        except PrecisionError as exc:
            if not capped:
                raise
            top = max(top, 0.0)
            fallback = Bounds(
                min(self._top_mass_lower(delta), top),
                top,
                top,
                "epsilon",
                "bound",
                {
                    "note": f"the numerics could not certify a tighter interval ({exc}); the composed "
                    f"privacy loss never exceeds {top:.6g}, so epsilon <= {top:.6g}; the lower end from the mass "
                    "near that top",
                    "method": "loss support",
                },
            )
            return cast("Bounds", self._top_epsilon(delta, fallback))
        if capped and (out.upper > top or math.isinf(out.upper)):
            top = max(top, 0.0)
            details = {**dict(out.details), "support_cap": f"the composed privacy loss never exceeds {top:.6g}"}
            if math.isinf(out.upper):
                details["note"] = (
                    f"upper bound from the loss support (epsilon <= {top:.6g}); the discretised "
                    f"interval was vacuous: {out.details.get('note', 'no reason given')}"
                )
            out = Bounds(min(out.lower, top), min(out.estimate, top), top, "epsilon", "bound", details)
        return cast("Bounds", self._top_epsilon(delta, out))

    def _delta(self, epsilons: FloatArray) -> Bounds:
        top, p_inf = self._support_ceiling()
        beyond = epsilons >= top if math.isfinite(top) else np.zeros(epsilons.shape, bool)
        alone = self._top_delta(epsilons[~beyond])  # a short atoms-only ledger: no grid at all
        if not beyond.any():
            return (
                alone if alone is not None else cast("Bounds", self._top_delta(epsilons, self._delta_numeric(epsilons)))
            )
        lower = np.full(epsilons.shape, p_inf * (1.0 - 1e-12))
        upper = np.full(epsilons.shape, min(1.0, p_inf * (1.0 + 1e-12)))
        est = np.full(epsilons.shape, p_inf)
        details: dict[str, Any] = {"support": f"delta = P(loss = inf) exactly for epsilon >= {top:.6g}"}
        if not beyond.all():
            inner = alone or cast("Bounds", self._top_delta(epsilons[~beyond], self._delta_numeric(epsilons[~beyond])))
            for arr, part in ((lower, inner.lower), (est, inner.estimate), (upper, inner.upper)):
                arr[~beyond] = part
            details = {**dict(inner.details), **details}
        return Bounds(lower, est, upper, "delta", "bound", details)

    @abstractmethod
    def _epsilon_numeric(self, delta: float) -> Bounds:
        """The accountant's own certified ``epsilon(delta)`` (the support cap above is applied to it)."""

    @abstractmethod
    def _delta_numeric(self, epsilons: FloatArray) -> Bounds:
        """The accountant's own certified ``delta(eps)`` for ``eps`` below the loss support."""

    def _memo(self, key: Hashable, fn: Callable[[], _T]) -> _T:
        cache = getattr(self, "_cache", None)
        if cache is None:
            self._ledger_changed()
            cache = self._cache
        if key in cache:
            cache.move_to_end(key)
            return cast("_T", cache[key])
        val = fn()
        cache[key] = val
        if len(cache) > 8:  # compositions can hold windows of millions of points
            cache.popitem(last=False)
        return val

    @staticmethod
    def _combine_eps(parts: list[CurveBounds], details: dict[str, Any]) -> Bounds:
        lower = float(max(p.lower for p in parts))
        est = float(max(p.estimate for p in parts))
        upper = float(max(p.upper for p in parts))
        notes = [p.note for p in parts if p.note]
        if notes:
            details = {**details, "note": notes[0]}
        if math.isinf(upper) and not notes:
            raise PrecisionError("internal: infinite epsilon without an explanation")
        return Bounds(lower, est, upper, "epsilon", "bound", details)

    @staticmethod
    def _combine_delta(parts: Sequence[Any], details: dict[str, Any]) -> Bounds:
        lower = np.max([p[0] for p in parts], axis=0)
        est = np.max([p[1] for p in parts], axis=0)
        upper = np.max([p[2] for p in parts], axis=0)
        return Bounds(lower, est, upper, "delta", "bound", details)


def check_mechanism(mech: Mechanism) -> None:
    """Fail early (at compose time) if the mechanism cannot produce privacy losses."""
    mech.privacy_losses()

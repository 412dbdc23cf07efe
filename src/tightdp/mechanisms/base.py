"""What ran (``Mechanism``) and what the engine needs of it (``PrivacyLoss``).

A ``Mechanism`` is the user's vocabulary: an immutable, validated, serialisable
description such as ``Gaussian(noise_multiplier=1.1)``. It knows its dominating
pairs and hands the engine one ``PrivacyLoss`` per neighbouring direction.

A ``PrivacyLoss`` describes the privacy loss random variable (PRV)
``Y = log(p(X) / q(X))`` with ``X ~ P`` for one dominating pair ``(P, Q)``
(001 Def. 3-4; 003 Sec. 3). The hockey-stick divergence is then
``delta(eps) = E[(1 - exp(eps - Y))_+]``, with ``P(Y = +inf)`` counted in full.
The engine only needs the CDF / survival function of the finite part, the mass
at ``+inf`` and partial first moments (for the mean-preserving discretisation of
003 Alg. 2).
"""

from __future__ import annotations

import dataclasses
import math
from abc import ABC, abstractmethod
from typing import Any, ClassVar, NamedTuple

import numpy as np

from ..errors import PrecisionError, UnsupportedMechanismError

__all__ = ["PrivacyLoss", "Mechanism", "LossPair", "mechanism_from_dict"]

_U = float(np.finfo(float).eps) / 2  # unit round-off


class PrivacyLoss(ABC):
    """The privacy loss random variable of one dominating pair ``(P, Q)``.

    Subclasses implement ``cdf``/``sf`` of the finite part (vectorised, exact
    in the tails), ``partial_mean`` and ``infinity_mass``. Instances must be
    hashable and compare equal when they describe the same distribution (the
    engine caches discretisations by instance).
    """

    #: P(Y = +inf): the probability of outputs that Q cannot produce.
    infinity_mass: float = 0.0
    #: whether ``infinity_mass`` is a true atom of the pair (approximate DP) or mass *sent* there on the
    #: safe side of an upper bound (truncated mixture components, whose true losses are finite): lower
    #: bounds may count only a true atom, and drop the other (``tightdp.pld``)
    infinity_is_exact: ClassVar[bool] = True

    @abstractmethod
    def cdf(self, s: np.ndarray) -> np.ndarray:
        """``P(Y <= s)`` over the finite part (so ``cdf(+inf) = 1 - infinity_mass``)."""

    @abstractmethod
    def sf(self, s: np.ndarray) -> np.ndarray:
        """``P(s < Y < +inf)``: accurate (no cancellation) deep in the upper tail."""

    @abstractmethod
    def partial_mean(self, a: float, b: float) -> tuple[float, float]:
        """``E[Y 1{a < Y <= b}]`` and a bound on its absolute numerical error."""

    def support(self) -> tuple[float, float]:
        """Closed hull of the finite part's support (may be infinite)."""
        return (-math.inf, math.inf)

    # ------------------------------------------------------------------ helpers
    def cdf_sf(self, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        """CDF and survival function at ``edges``, plus the largest distance by
        which the realised cell edges may differ from the requested ones (non-zero
        only for losses whose inverse is computed numerically)."""
        edges = np.asarray(edges, dtype=float)
        return self.cdf(edges), self.sf(edges), 0.0

    def cell_masses(self, edges: np.ndarray) -> tuple[float, float, np.ndarray, float, float]:
        """``(P(Y <= e_0), P(e_last < Y < inf), masses, (rel, l1), edge_error)`` for the cells between ``edges``.

        The computed masses are within a factor ``1 +- rel`` of the exact ones,
        except on cells whose total absolute error is at most ``l1`` (see
        ``split_errors``); each CDF / survival value is taken to be correct to
        ``8u`` relative. Relative errors compose multiplicatively, so they stay
        harmless even for tiny deltas. Subclasses with a density integrate narrow
        cells instead of differencing (no cancellation).
        """
        cdf, sf, edge_err = self.cdf_sf(edges)
        masses, err = difference_masses(cdf, sf)
        rel, l1 = split_errors(masses, err)
        return float(cdf[0]), float(sf[-1]), masses, (rel, l1), edge_err

    def lattice_atoms(self) -> tuple[float, ...]:
        """The losses of this loss's atoms (finite losses with positive probability), which the dominance
        grids try to place on grid points (``tightdp.pld.dominance``): pure DP's and randomized response's
        outcomes, Laplace's ``+-r``, subsampled Laplace's support ends. None by default."""
        return ()

    # -------------------------------------------- Q's side (for the dominance constructions)
    #: whether ``q_cdf`` / ``q_sf`` are implemented: the Q-masses of loss cells, which the
    #: connect-the-dots and merge-to-the-grid constructions (``tightdp.pld.dominance``) need
    has_q_side: ClassVar[bool] = False

    def q_cdf(self, s: np.ndarray) -> np.ndarray:
        """``Q(Y <= s)`` over outputs with finite loss (``Y`` the loss ``log dP/dQ`` at Q's output).
        Only losses with ``has_q_side`` give it; the others refuse."""
        raise UnsupportedMechanismError(f"{type(self).__name__} does not describe Q's side in loss space")

    def q_sf(self, s: np.ndarray) -> np.ndarray:
        """``Q(s < Y < +inf)``, accurate deep in the tail (``has_q_side`` losses only)."""
        raise UnsupportedMechanismError(f"{type(self).__name__} does not describe Q's side in loss space")

    def q_cell_masses(self, edges: np.ndarray) -> tuple[np.ndarray, tuple[float, float]]:
        """Q-masses of the loss cells between ``edges`` and their ``(rel, l1)`` errors (as ``cell_masses``)."""
        edges = np.asarray(edges, dtype=float)
        masses, err = difference_masses(self.q_cdf(edges), self.q_sf(edges))
        return masses, split_errors(masses, err)

    def lower_quantile(self, mass: float) -> float:
        """A point ``a`` with ``P(Y <= a) <= mass`` (as large as convenient)."""
        lo, hi = self.support()
        if math.isfinite(lo):  # nothing lies below the support
            return lo
        return _bisect_tail(lambda s: float(self.cdf(np.array([s]))[0]) <= mass, lo, hi, lower=True)

    def upper_quantile(self, mass: float) -> float:
        """A point ``b`` with ``P(b < Y < inf) <= mass`` (as small as convenient)."""
        lo, hi = self.support()
        if math.isfinite(hi):  # nothing lies above the support
            return hi
        return _bisect_tail(lambda s: float(self.sf(np.array([s]))[0]) <= mass, lo, hi, lower=False)


class SelfDiscretisingLoss(PrivacyLoss):
    """A privacy loss with no closed-form CDF that builds its own certified pairs instead.

    Subclasses implement ``dominating_pld(h, tail)``, ``dominated_pld(h, tail)`` (certified
    dominating / dominated discretised pairs on the mesh ``h``) and ``spread()``; the dominance
    engine composes them (``tightdp.pld.dominance.own_pairs``). The CDF-based accountants (PRV,
    Fourier, Edgeworth) cannot use them: ``cdf``/``sf``/``partial_mean`` refuse, naming ``how_to``.
    """

    #: what to use instead, for the refusal message
    how_to: ClassVar[str] = "the connect-dots accountant"

    def _refuse(self):
        raise UnsupportedMechanismError(
            f"{type(self).__name__} has no closed-form privacy-loss CDF; account it with {self.how_to}"
        )

    def cdf(self, s):
        self._refuse()

    def sf(self, s):
        self._refuse()

    def partial_mean(self, a, b):
        self._refuse()


#: per-cell relative mass errors above this are counted as absolute (l1) error instead
REL_CAP = 1e-12


def split_errors(masses: np.ndarray, abs_err: np.ndarray) -> tuple[float, float]:
    """Turn per-cell absolute error bounds into ``(rel, l1)``: a relative error ``rel <= REL_CAP``
    that holds for every cell, plus the l1 error of the cells where it does not."""
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(masses > 0, abs_err / masses, np.inf)
    ok = r <= REL_CAP
    rel = float(np.max(r[ok])) if np.any(ok) else 0.0
    l1 = float(np.sum(abs_err[~ok] * 2.0))  # |computed - exact| <= abs_err (+ the same again, safe side)
    return rel, l1


def difference_masses(cdf: np.ndarray, sf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cell masses from CDF values (below the median) or survival values (above), and a bound on
    each cell's absolute error when every value is correct to ``8u`` relative (``u``: unit round-off)."""
    use_cdf = cdf[1:] <= 0.5
    masses = np.maximum(np.where(use_cdf, cdf[1:] - cdf[:-1], sf[:-1] - sf[1:]), 0.0)
    scale = np.where(use_cdf, cdf[1:] + cdf[:-1], sf[:-1] + sf[1:])
    return masses, 8 * _U * scale + _U * masses


def _bisect_tail(ok, lo: float, hi: float, *, lower: bool) -> float:
    """Find a point where the monotone predicate ``ok`` holds, close to where it starts to."""
    # bracket: start near 0 and expand geometrically towards the tail
    good = None
    step = 1.0
    x = 0.0 if not (math.isfinite(lo) and lo > 0) else lo
    if math.isfinite(hi) and x > hi:
        x = hi
    for _ in range(200):
        cand = x - step if lower else x + step
        if math.isfinite(lo):
            cand = max(cand, lo)
        if math.isfinite(hi):
            cand = min(cand, hi)
        if ok(cand):
            good = cand
            break
        step *= 2.0
    if good is None:
        raise PrecisionError(
            "could not locate the tail of a privacy loss distribution in double precision "
            "(a scale or probability too extreme for the requested delta)"
        )
    bad = x
    if ok(bad):
        return bad
    for _ in range(100):
        mid = 0.5 * (good + bad)
        if ok(mid):
            good = mid
        else:
            bad = mid
        if abs(good - bad) <= 1e-9 * max(1.0, abs(good)):
            break
    return good


class LossPair(NamedTuple):
    """The two directions of a neighbouring relation.

    ``remove``: P = M(D), Q = M(D') with D' = D minus one record (001 Sec. 6.1,
    delta_X/Y). ``add``: the reverse pair. For symmetric relations (substitute,
    or mechanisms without subsampling) both fields hold the same loss.
    """

    remove: PrivacyLoss
    add: PrivacyLoss

    @property
    def symmetric(self) -> bool:
        return self.remove == self.add


_REGISTRY: dict[str, type[Mechanism]] = {}


class Mechanism(ABC):
    """An immutable description of one privatised release ("what ran").

    Subclasses are frozen, keyword-only dataclasses that validate their
    parameters in ``__post_init__`` and register under ``type_name`` for
    serialisation.

    **Where lower ends come from.** An accountant's ``upper`` end bounds the curve of the pair
    ``privacy_losses()`` returns, which dominates the mechanism; its ``lower`` end is a lower bound on the
    mechanism's privacy only if that pair is *attained*: the exact output distributions of one concrete pair
    of neighbouring data sets (or a post-processing of them). Every concrete subclass declares it in its own
    class body: ``pair_attained = True`` (the pair is attained; the docstring names the data sets), or
    ``False`` with ``attained_mechanism()`` overridden to return a mechanism whose pair *is* attained by
    neighbouring data sets of this one (its curve lies below this mechanism's true curve), or ``None``
    (no certified lower end: ``lower = 0``). The accountants take lower ends only from attained pairs
    (``tightdp.accountants.base``); ``tests/test_attained_pairs.py`` enumerates the subclasses.

    For a ledger of several steps the attained pairs must be realised by *one* pair of data sets for all
    steps at once. Each declaration below uses the same canonical pair: the differing record's clipped
    contribution is a fixed unit vector (the query's full sensitivity) at every step and every other
    record contributes 0 (or, where the docstring says so, a fixed value), which the queries of an
    adaptive composition may choose at every step.
    """

    type_name: ClassVar[str] = ""
    #: whether ``privacy_losses()`` is attained by a concrete pair of neighbouring data sets (see above);
    #: ``None`` on the base class: undeclared, treated as "no certified lower end"
    pair_attained: ClassVar[bool | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        name = cls.__dict__.get("type_name")
        if name:
            _REGISTRY[name] = cls

    @abstractmethod
    def privacy_losses(self) -> LossPair:
        """The dominating pairs' privacy losses for the remove and add directions."""

    def attained_mechanism(self) -> Mechanism | None:
        """The mechanism whose pair gives this one's certified lower ends.

        Returns
        -------
        Mechanism or None
            ``self`` when ``pair_attained``; otherwise a mechanism whose ``privacy_losses()`` is the exact
            pair of one concrete pair of neighbouring data sets of *this* mechanism (same directions), so
            every lower bound on its curve is a lower bound on this mechanism's; ``None`` when there is
            none (lower ends are then 0). Subclasses with ``pair_attained = False`` override it.
        """
        return self if self.pair_attained else None

    def to_dict(self) -> dict[str, Any]:
        """``{"type": ..., **parameters}``; nested mechanisms serialise recursively."""
        out: dict[str, Any] = {"type": self.type_name}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            v = getattr(self, f.name)
            out[f.name] = v.to_dict() if isinstance(v, Mechanism) else v
        return out

    def describe(self) -> str:
        """A short human-readable description."""
        params = ", ".join(f"{k}={v}" for k, v in self.to_dict().items() if k != "type")
        return f"{type(self).__name__}({params})"


def mechanism_from_dict(data: dict[str, Any]) -> Mechanism:
    """Inverse of ``Mechanism.to_dict``."""
    if not isinstance(data, dict) or "type" not in data:
        raise ValueError(f"mechanism must be a dict with a 'type' key, got {data!r}")
    cls = _REGISTRY.get(data["type"])
    if cls is None:
        raise ValueError(f"unknown mechanism type {data['type']!r}; known: {', '.join(sorted(_REGISTRY))}")
    kwargs = {
        k: (mechanism_from_dict(v) if isinstance(v, dict) and "type" in v else v)
        for k, v in data.items()
        if k != "type"
    }
    return cls(**kwargs)

"""The engine's interface to a privacy loss random variable (``PrivacyLoss``) and its error bookkeeping.

A ``PrivacyLoss`` describes the privacy loss random variable (PRV) ``Y = log(p(X) / q(X))`` with ``X ~ P`` for
one dominating pair ``(P, Q)`` (Koskela et al. 2020, Def. 3-4; Gopi et al. 2021, Sec. 3). The hockey-stick
divergence is then ``delta(eps) = E[(1 - exp(eps - Y))_+]``, with ``P(Y = +inf)`` counted in full. The engine
only needs the CDF / survival function of the finite part, the mass at ``+inf`` and partial first moments (for
the mean-preserving discretisation of Gopi et al. 2021, Alg. 2).

This layer sits below ``tightdp.pld`` (which discretises and composes losses) and ``tightdp.mechanisms`` (which
describe what ran and hand the engine their losses).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import ClassVar

import numpy as np

from ..errors import PrecisionError, UnsupportedMechanismError

__all__ = ["PrivacyLoss", "SelfDiscretisingLoss", "REL_CAP", "split_errors", "difference_masses"]

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

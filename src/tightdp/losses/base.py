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

import inspect
import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar, NoReturn

import numpy as np

from .._types import ArrayLike, FloatArray
from ..errors import PrecisionError, UnsupportedMechanismError

__all__ = ["PrivacyLoss", "SelfDiscretisingLoss", "REL_CAP", "split_errors", "difference_masses"]

_U = float(np.finfo(float).eps) / 2  # unit round-off


def _inherit_docstrings(cls: type) -> None:
    """Give each public method and property that ``cls`` overrides without a docstring the docstring of the
    nearest base class that documents it: an override implements the contract its base documents (the same
    parameters, returns and errors), which is what its reader and ``help()`` should see."""
    for name, member in vars(cls).items():
        if name.startswith("_"):
            continue
        target = member.__func__ if isinstance(member, (staticmethod, classmethod)) else member
        if not (inspect.isfunction(target) or isinstance(target, property)) or target.__doc__:
            continue
        for base in cls.__mro__[1:]:
            doc = getattr(base.__dict__.get(name), "__doc__", None)
            if doc:
                target.__doc__ = doc
                break


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

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _inherit_docstrings(cls)

    @abstractmethod
    def cdf(self, s: ArrayLike) -> FloatArray:
        """The CDF ``P(Y <= s)`` of the finite part (so ``cdf(+inf) = 1 - infinity_mass``).

        Parameters
        ----------
        s : array_like of float
            Loss values, any real (infinities allowed).

        Returns
        -------
        numpy.ndarray of float
            ``P(Y <= s)`` elementwise, in ``[0, 1]``.

        Raises
        ------
        UnsupportedMechanismError
            If the loss has no closed-form CDF (``SelfDiscretisingLoss``).
        """

    @abstractmethod
    def sf(self, s: ArrayLike) -> FloatArray:
        """The survival function ``P(s < Y < +inf)``, accurate (no cancellation) deep in the upper tail.

        Parameters
        ----------
        s : array_like of float
            Loss values, any real (infinities allowed).

        Returns
        -------
        numpy.ndarray of float
            ``P(s < Y < +inf)`` elementwise, in ``[0, 1]``.

        Raises
        ------
        UnsupportedMechanismError
            If the loss has no closed-form CDF (``SelfDiscretisingLoss``).
        """

    @abstractmethod
    def partial_mean(self, a: float, b: float) -> tuple[float, float]:
        """The partial first moment ``E[Y 1{a < Y <= b}]`` and a bound on its absolute numerical error.

        It feeds the mean-preserving discretisation of Gopi et al. 2021, Alg. 2.

        Parameters
        ----------
        a, b : float
            The ends of the loss interval ``(a, b]``, ``a <= b`` (infinities allowed).

        Returns
        -------
        tuple of float
            ``(value, error)``: the moment and a bound on ``|computed - exact|``.

        Raises
        ------
        UnsupportedMechanismError
            If the loss has no closed-form CDF (``SelfDiscretisingLoss``).
        """

    def support(self) -> tuple[float, float]:
        """The closed hull ``(lo, hi)`` of the finite part's support (either end may be infinite).

        Returns
        -------
        tuple of float
            ``(lo, hi)`` with ``lo <= hi``.
        """
        return (-math.inf, math.inf)

    # ------------------------------------------------------------------ helpers
    def cdf_sf(self, edges: ArrayLike) -> tuple[FloatArray, FloatArray, float]:
        """CDF and survival function at ``edges`` and the largest distance of the realised cell edges from them.

        The distance is non-zero only for losses whose inverse is computed numerically.

        Parameters
        ----------
        edges : array_like of float
            Increasing loss values.

        Returns
        -------
        tuple
            ``(cdf, sf, edge_error)``: two arrays shaped as ``edges`` and a non-negative float.

        Raises
        ------
        UnsupportedMechanismError
            If the loss has no closed-form CDF (``SelfDiscretisingLoss``).
        """
        e = np.asarray(edges, dtype=float)
        return self.cdf(e), self.sf(e), 0.0

    def cell_masses(self, edges: ArrayLike) -> tuple[float, float, FloatArray, tuple[float, float], float]:
        """P-masses of the loss cells ``(e_i, e_(i+1)]`` between ``edges``, with certified error bounds.

        The computed masses are within a factor ``1 +- rel`` of the exact ones, except on cells whose total
        absolute error is at most ``l1`` (see ``split_errors``); each CDF / survival value is taken to be
        correct to ``8u`` relative. Relative errors compose multiplicatively, so they stay harmless even for
        tiny deltas. Subclasses with a density integrate narrow cells instead of differencing (no
        cancellation).

        Parameters
        ----------
        edges : array_like of float
            Increasing loss values, at least two.

        Returns
        -------
        tuple
            ``(below, above, masses, (rel, l1), edge_error)``: ``P(Y <= e_0)``, ``P(e_last < Y < inf)``, the
            ``len(edges) - 1`` cell masses, their relative and l1 error bounds, and the largest distance of a
            realised edge (or an atom placed on an edge) from its loss value.

        Raises
        ------
        UnsupportedMechanismError
            If the loss has no closed-form CDF (``SelfDiscretisingLoss``).
        """
        cdf, sf, edge_err = self.cdf_sf(edges)
        masses, err = difference_masses(cdf, sf)
        rel, l1 = split_errors(masses, err)
        return float(cdf[0]), float(sf[-1]), masses, (rel, l1), edge_err

    def lattice_atoms(self) -> tuple[float, ...]:
        """The losses of this loss's atoms (finite losses with positive probability).

        The dominance grids try to place them on grid points (``tightdp.pld.dominance``): pure DP's and
        randomized response's outcomes, Laplace's ``+-r``, subsampled Laplace's support ends.

        Returns
        -------
        tuple of float
            The atoms' losses; empty (the default) for a loss without atoms or none worth aligning.
        """
        return ()

    # -------------------------------------------- Q's side (for the dominance constructions)
    #: whether ``q_cdf`` / ``q_sf`` are implemented: the Q-masses of loss cells, which the
    #: connect-the-dots and merge-to-the-grid constructions (``tightdp.pld.dominance``) need
    has_q_side: ClassVar[bool] = False

    def q_cdf(self, s: ArrayLike) -> FloatArray:
        """``Q(Y <= s)`` over outputs with finite loss (``Y`` the loss ``log dP/dQ`` at Q's output).

        Parameters
        ----------
        s : array_like of float
            Loss values, any real.

        Returns
        -------
        numpy.ndarray of float
            ``Q(Y <= s)`` elementwise.

        Raises
        ------
        UnsupportedMechanismError
            If the loss does not describe Q's side (``has_q_side`` false).
        """
        raise UnsupportedMechanismError(f"{type(self).__name__} does not describe Q's side in loss space")

    def q_sf(self, s: ArrayLike) -> FloatArray:
        """``Q(s < Y < +inf)``, accurate deep in the tail.

        Parameters
        ----------
        s : array_like of float
            Loss values, any real.

        Returns
        -------
        numpy.ndarray of float
            ``Q(s < Y < +inf)`` elementwise.

        Raises
        ------
        UnsupportedMechanismError
            If the loss does not describe Q's side (``has_q_side`` false).
        """
        raise UnsupportedMechanismError(f"{type(self).__name__} does not describe Q's side in loss space")

    def q_cell_masses(self, edges: ArrayLike) -> tuple[FloatArray, tuple[float, float]]:
        """Q-masses of the loss cells between ``edges`` and their ``(rel, l1)`` error bounds (as ``cell_masses``).

        Parameters
        ----------
        edges : array_like of float
            Increasing loss values, at least two.

        Returns
        -------
        tuple
            ``(masses, (rel, l1))``.

        Raises
        ------
        UnsupportedMechanismError
            If the loss does not describe Q's side (``has_q_side`` false).
        """
        e = np.asarray(edges, dtype=float)
        masses, err = difference_masses(self.q_cdf(e), self.q_sf(e))
        return masses, split_errors(masses, err)

    # -------------------------------------------- closed-form bounds of one step (``accountants._step_bounds``)
    def total_variation(self) -> float | None:
        """A certified upper bound on the pair's total variation distance ``sup_E P(E) - Q(E) = delta(0)``.

        ``delta(eps) <= delta(0)`` at every ``eps >= 0``, and the total variation of a product of pairs is at most
        the sum of theirs, so a composition's delta is at most the sum of its steps' bounds: a whole answer when
        that sum is tiny (rare sampled steps), where a grid fine enough to resolve it would be huge.

        Returns
        -------
        float or None
            The bound (its rounding paid), or ``None`` where this loss has none (the default).
        """
        return None

    def event_masses(self, t: ArrayLike) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray] | None:
        """``(p, q, p_out, q_out)`` at each threshold of ``t``: lower bounds on ``P(E)`` and ``P(E^c)``, upper bounds on
        ``Q(E)`` and ``Q(E^c)``, for ``E`` the outputs whose loss exceeds the threshold as the loss computes it (``sf``
        and ``q_sf`` of one set, ``cdf`` and ``q_cdf`` of its complement).

        Whatever ``E`` is exactly, ``P(E) - e^eps Q(E) <= delta(eps)``; and in a composition the outputs where some
        step's ``E`` occurs form one set too, whose masses follow from these four (``accountants._events``: a
        lower end for rare large losses; the complements, not ``1 - p``, because a pair's computed masses need not
        sum to 1). The default uses the CDFs of both sides (losses with Q's side), closed forms within a few ulp
        (the engine's cells trust them to ``8u``, ``difference_masses``): each is moved ``_event_rel()`` (``64u``,
        and a sum's rounding where the loss sums atoms) to its safe side; the P-mass at ``+inf`` counts in ``E``
        where it is a true atom, and the Q-mass a truncated loss does not describe (at most ``infinity_mass``
        where that is not a true atom) is added to ``q`` and ``q_out``. One call answers every threshold (the
        step bounds ask at each epsilon of a query).

        Parameters
        ----------
        t : array_like of float
            The loss thresholds, one-dimensional.

        Returns
        -------
        tuple of FloatArray or None
            ``(p, q, p_out, q_out)``, each the shape of ``t``, or ``None`` for a loss without Q's side.

        Raises
        ------
        ValueError
            Not raised: every real ``t`` is answered (a NaN mass reads as no bound downstream).
        """
        if not self.has_q_side:
            return None
        x = np.asarray(t, dtype=float)
        p, q = np.asarray(self.sf(x), float), np.asarray(self.q_sf(x), float)
        p_out, q_out = np.asarray(self.cdf(x), float), np.asarray(self.q_cdf(x), float)
        p_inf = float(self.infinity_mass)
        if self.infinity_is_exact:
            p = p + p_inf  # outputs Q cannot produce: their loss +inf exceeds t (their Q-mass is 0)
            p_inf = 0.0
        rel = self._event_rel()
        return p * (1.0 - rel), q * (1.0 + rel) + p_inf, p_out * (1.0 - rel), q_out * (1.0 + rel) + p_inf

    def _event_rel(self) -> float:
        """The relative error ``event_masses`` charges the CDFs (``64u``: closed forms)."""
        return 64.0 * _U

    def lower_quantile(self, mass: float) -> float:
        """A point ``a`` with ``P(Y <= a) <= mass`` (as large as convenient).

        Parameters
        ----------
        mass : float
            Tail mass in ``(0, 1)``.

        Returns
        -------
        float
            The point ``a`` (the support's lower end when that is finite).

        Raises
        ------
        PrecisionError
            If the tail cannot be located in double precision.
        """
        lo, hi = self.support()
        if math.isfinite(lo):  # nothing lies below the support
            return lo
        return _bisect_tail(lambda s: float(self.cdf(np.array([s]))[0]) <= mass, lo, hi, lower=True)

    def upper_quantile(self, mass: float) -> float:
        """A point ``b`` with ``P(b < Y < inf) <= mass`` (as small as convenient).

        Parameters
        ----------
        mass : float
            Tail mass in ``(0, 1)``.

        Returns
        -------
        float
            The point ``b`` (the support's upper end when that is finite).

        Raises
        ------
        PrecisionError
            If the tail cannot be located in double precision.
        """
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

    def _refuse(self) -> NoReturn:
        raise UnsupportedMechanismError(
            f"{type(self).__name__} has no closed-form privacy-loss CDF; account it with {self.how_to}"
        )

    def cdf(self, s: ArrayLike) -> FloatArray:
        self._refuse()

    def sf(self, s: ArrayLike) -> FloatArray:
        self._refuse()

    def partial_mean(self, a: float, b: float) -> tuple[float, float]:
        self._refuse()


#: per-cell relative mass errors above this are counted as absolute (l1) error instead
REL_CAP = 1e-12


def split_errors(masses: ArrayLike, abs_err: ArrayLike) -> tuple[float, float]:
    """Turn per-cell absolute error bounds into ``(rel, l1)``.

    A relative error ``rel <= REL_CAP`` that holds for every cell, plus the l1 error of the cells where it
    does not (counted twice, on the safe side).

    Parameters
    ----------
    masses : array_like of float
        Non-negative cell masses.
    abs_err : array_like of float
        A bound on each cell mass's absolute error, same shape.

    Returns
    -------
    tuple of float
        ``(rel, l1)``.

    Raises
    ------
    ValueError
        If the arrays' shapes do not broadcast (numpy's error).
    """
    m, e = np.asarray(masses, dtype=float), np.asarray(abs_err, dtype=float)  # (float64 arrays: not copied)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(m > 0, e / m, np.inf)
    ok = r <= REL_CAP
    rel = float(np.max(r[ok])) if np.any(ok) else 0.0
    l1 = float(np.sum(e[~ok] * 2.0))  # |computed - exact| <= abs_err (+ the same again, safe side)
    return rel, l1


def difference_masses(cdf: FloatArray, sf: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Cell masses from CDF values (below the median) or survival values (above), with absolute error bounds.

    Every value is taken to be correct to ``8u`` relative (``u``: unit round-off).

    Parameters
    ----------
    cdf, sf : numpy.ndarray of float
        CDF and survival values at the same increasing edges.

    Returns
    -------
    tuple of numpy.ndarray
        ``(masses, errors)``, one per cell (``len(cdf) - 1``).

    Raises
    ------
    ValueError
        If the arrays' shapes differ (numpy's error).
    """
    use_cdf = cdf[1:] <= 0.5
    masses = np.maximum(np.where(use_cdf, cdf[1:] - cdf[:-1], sf[:-1] - sf[1:]), 0.0)
    scale = np.where(use_cdf, cdf[1:] + cdf[:-1], sf[:-1] + sf[1:])
    return masses, 8 * _U * scale + _U * masses


def _bisect_tail(ok: Callable[[float], bool], lo: float, hi: float, *, lower: bool) -> float:
    """Find a point where the monotone predicate ``ok`` holds, close to where it starts to."""
    # bracket: start near 0 and expand geometrically towards the tail
    good: float | None = None
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

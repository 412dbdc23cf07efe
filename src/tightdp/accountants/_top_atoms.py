"""Exact ends near the top of an atoms-only composition: every composed atom whose loss can reach a floor ``theta``.

A ledger of pure DP, approximate DP and randomized-response steps (each ``DiscreteLoss`` on one lattice) has a
composed privacy loss made of finitely many atoms. Each distinct step composed with itself is exact
(``pld.atoms.self_composed_atoms``: Kairouz, Oh, Viswanath 2015, Thm 3.3), but steps on incommensurate lattices
meet on the accountants' grid, whose mesh blurs the top of the support: two randomized responses asked for delta
3.8e-7 below their composed top gave ``[0, 8.8e-5]`` against an exact 4.25e-8 (an independent fuzz). Near the top,
though, few composed atoms exist, and ``delta(eps) = P(L = inf) + sum_(atoms a, s_a > eps) p_a (1 - e^(eps - s_a))``
(``E_P[(1 - e^(eps - L))_+]``; an atom's Q-mass is ``p_a e^-s_a``) needs only those above ``eps``.

``top_atoms`` lists every cross-term combination of the distinct steps' composed atoms whose loss can reach
``theta`` (pruned with the largest loss the remaining terms can add), with an interval for each loss and mass:

* **losses**: each term's values within its ``eta`` (the lattice fit and its float arithmetic), each step's atoms
  within ``8u (1 + |v|)`` of the exact log-ratios (``c_t`` of them per term), summed in floats over at most ``T``
  terms (``T u`` of the magnitudes): one margin ``m`` for all, ``[s - m, s + m]``;
* **masses**: each term's masses within a factor ``1 +- rel_t`` of the power of its atoms, which are within
  ``64u`` each of the exact masses (``c_t`` factors); a product of ``T`` of them is within ``1 +- R``, ``R = (sum_t
  (rel_t + 64 c_t u) + 2 T u) (1 + 1e-6)`` (refused beyond ``1e-6``), and underflow below ``1e-300`` per atom;
* **left out**: each term's trimmed mass ``absolute_t`` (at either end of its power) may sit anywhere, so the
  upper end adds ``sum_t absolute_t``; the lower end drops it;
* **infinity**: ``P(L = inf) = 1 - prod_t (1 - m_t)^(c_t)``, within ``1e-12`` relative (``_support_ceiling``);
  the lower end counts it only where every step's mass at ``+inf`` is a true atom.

Then, for every ``eps >= theta`` (atoms not listed have a loss below ``theta``: they add nothing), ``delta_bounds``
sums each atom's ``p (1 - e^(eps - s))`` with the loss and mass at their safe ends (each term is monotone in both),
rounding charged (``-expm1`` within 2 ulp, a subtraction and a product: ``4u``; a sum of ``N`` non-negative terms:
``(N + 2) u``). ``epsilon_bounds`` inverts them by bisection on evaluated values only, so its ends hold whatever the
bisection does: ``delta_upper(e) <= delta`` certifies ``eps(delta) <= e``, ``delta_lower(e) > delta`` certifies
``eps(delta) > e``. The pair is the accountant's own (``DiscreteLoss``): its lower end comes from the same attained
pairs as the accountants' (``Mechanism.pair_attained``).

**One bounded step beside the atoms** (a subsampled Laplace at a tiny rate beside pure-DP steps, delta asked just
below the atoms' top). With ``L = S + L_r`` (``S`` the atoms' sum, ``L_r`` the step's loss, at most ``r_top``,
independent), ``delta(eps) = P(L = inf) + sum_a p_a g(eps - s_a)`` with ``g(x) = E[(1 - e^(x - L_r))_+; L_r <
inf]``. Upper: ``g(x) <= (1 - e^(x - r_top))_+`` (the P-mass of finite losses is at most 1), and atoms with ``s_a +
r_top <= eps`` add nothing, so the listing's floor is ``theta - r_top``. Lower: the outputs where the atoms sit at
``a`` and the step's loss exceeds ``x_a`` are disjoint across ``a`` and from the atoms' ``+inf``, and give ``p_a
(P_r(L_r > x_a) - e^(x_a) Q_r(L_r > x_a))``, evaluated with the step's ``event_masses`` (``P`` from below, ``Q`` from
above) at ``x_a`` from the atom's lowest loss, as that difference is ``delta_r(x_a)``, which falls in ``x_a``; the
lower end's mass at ``+inf`` is the atoms' alone (the step's is inside its ``P_r``). Used to narrow the numerics only:
the upper end is loose where the step's loss spreads.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from .._types import FloatArray
from ..losses import DiscreteLoss, PrivacyLoss
from ..pld.atoms import SelfComposedAtoms, self_composed_atoms

__all__ = ["TopAtoms", "delta_bounds", "epsilon_bounds", "top_atoms"]

_U = float(np.finfo(float).eps) / 2
#: the most composed atoms listed (beyond it ``top_atoms`` gives up and the numerics answer alone: a listing this
#: long costs a query about 10 ms, on top of the numerics it refines)
MAX_ATOMS = 1 << 13
#: a step's atom masses and values as computed, against the exact ones: closed forms within a few ulp (``64u``
#: relative, as ``PrivacyLoss.event_masses`` charges them), a log-ratio within ``8u (1 + |v|)``
_ATOM_MASS = 64.0 * _U
#: the bisections stop at this relative width (the ends' own width, from the losses' margins, is about as large)
_STOP = 1e-13
_ATOM_VALUE = 8.0 * _U


class TopAtoms(NamedTuple):
    """Every composed atom whose loss can reach ``floor``, one direction of a ledger.

    Attributes
    ----------
    loss_low, loss_high : FloatArray
        Lower and upper bounds on each atom's loss.
    mass_low, mass_high : FloatArray
        Lower and upper bounds on each atom's P-mass.
    inf_low, inf_high : float
        Lower and upper bounds on ``P(L = inf)`` (the lower one 0 unless the masses at ``+inf`` are true atoms).
    left_out : float
        P-mass not listed that may sit at any finite loss (trimmed or underflowed), counted in the upper end.
    floor : float
        ``theta``: every atom of loss at least ``floor`` is listed.
    rest : PrivacyLoss or None, default None
        One step that is not made of atoms (composed once, its loss bounded above by ``rest_top``), beside the atoms:
        each atom's term is then ``p E[(1 - e^(eps - s - L_rest))_+]`` (module docstring, last paragraph).
    rest_top : float, default 0.0
        The top of ``rest``'s loss support.
    """

    loss_low: FloatArray  # (both in decreasing order)
    loss_high: FloatArray
    mass_low: FloatArray
    mass_high: FloatArray
    inf_low: float
    inf_high: float
    left_out: float
    floor: float
    rest: PrivacyLoss | None = None
    rest_top: float = 0.0


def top_atoms(terms: Sequence[tuple[PrivacyLoss, int]], floor: float, limit: int = MAX_ATOMS) -> TopAtoms | None:
    """The composed atoms of ``terms`` whose loss can reach ``floor`` (module docstring), or ``None``.

    Parameters
    ----------
    terms : sequence of (PrivacyLoss, int)
        One direction of a ledger: each distinct loss and its count.
    floor : float
        The least loss of interest (``theta``).
    limit : int, default ``MAX_ATOMS``
        The most atoms listed.

    Returns
    -------
    TopAtoms or None
        ``None`` when a loss is not a ``DiscreteLoss`` on one lattice, the masses' relative error exceeds
        ``1e-6``, or more than ``limit`` atoms reach ``floor``.

    Raises
    ------
    ValueError
        Not raised for any ledger (a loss the routine cannot take gives ``None``).
    """
    others = [(loss, c) for loss, c in terms if not isinstance(loss, DiscreteLoss)]
    asked, rest, rest_top = floor, None, 0.0
    if others:  # one bounded step beside the atoms (module docstring, last paragraph)
        (rest, count), *more = others
        rest_top = float(rest.support()[1])
        rest_top += 8.0 * _U * (1.0 + abs(rest_top))  # a computed top can lie below the exact one (closed forms)
        if more or count != 1 or not math.isfinite(rest_top):
            return None
        terms = [(loss, c) for loss, c in terms if isinstance(loss, DiscreteLoss)]
        floor = math.nextafter(floor - rest_top, -math.inf)  # atoms that, with the rest's largest, reach the floor
    if not terms or not all(isinstance(loss, DiscreteLoss) and SelfComposedAtoms.applies(loss) for loss, _ in terms):
        return None
    parts = [self_composed_atoms(loss, int(c)) for loss, c in terms]  # type: ignore[arg-type]
    n = len(parts)
    tops = [float(v[-1]) if v.size else -math.inf for v, *_ in parts]
    if not all(math.isfinite(t) for t in tops):
        return None
    scale = sum(float(np.max(np.abs(v))) for v, *_ in parts)
    # the steps' own atoms are closed forms: masses within 64u, values within 8u (1 + |v|) of the exact ones,
    # for each of the ``c`` steps a composed atom sums or multiplies
    given_v = sum(c * _ATOM_VALUE * (1.0 + max(abs(x) for x in loss.lattice_atoms())) for loss, c in terms)
    given_p = sum(c * _ATOM_MASS for _, c in terms)
    margin = (sum(eta for *_, eta in parts) + given_v + 2.0 * n * _U * scale) * (1.0 + 1e-9) + 1e-300
    rel = (sum(r for _, _, r, _, _ in parts) + given_p + 2.0 * n * _U) * (1.0 + 1e-6)
    if rel > 1e-6:
        return None
    later = np.concatenate([np.cumsum(np.array(tops[::-1]))[::-1][1:], [0.0]])  # the most the later terms add
    reach = floor - margin - 1e-12 * (1.0 + abs(floor))  # keep any combination that might reach ``floor``
    s, p = np.zeros(1), np.ones(1)
    for (v, w, *_), more in zip(parts, later):
        order = np.argsort(-v)
        v, w = v[order], w[order]
        # for each partial sum, the prefix of this term's atoms (largest first) that can still reach the floor;
        # counted before any array is built, so a listing too long costs no memory
        counts = np.searchsorted(-v, -(reach - more - s), side="right")
        total = int(counts.sum())
        if total > limit:
            return None
        rows = np.repeat(np.arange(s.size), counts)
        cols = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
        s, p = s[rows] + v[cols], p[rows] * w[cols]
        alive = p > 0.0
        s, p = s[alive], p[alive]
        if s.size == 0:
            break
    inf_high, inf_low = _infinity_mass(terms if rest is None else [*terms, (rest, 1)])
    if rest is not None:  # the lower end counts the atoms' +inf alone (the rest's is in its event masses)
        inf_low = _infinity_mass(terms)[1]
    order = np.argsort(-s, kind="stable")  # largest loss first: ``delta_bounds`` reads the prefix above epsilon
    s, p = s[order], p[order]
    return TopAtoms(
        loss_low=s - margin,
        loss_high=s + margin,
        mass_low=np.where(p > 1e-290, p * (1.0 - rel), 0.0),  # subnormal products: no relative bound
        mass_high=p * (1.0 + rel) + 1e-300,
        inf_low=inf_low,
        inf_high=inf_high,
        left_out=sum(a for _, _, _, a, _ in parts) * (1.0 + 1e-9),
        floor=float(asked),
        rest=rest,
        rest_top=rest_top,
    )


def _infinity_mass(terms: Sequence[tuple[PrivacyLoss, int]]) -> tuple[float, float]:
    """``(high, low)`` bounds on ``P(L = inf) = 1 - prod_t (1 - m_t)^(c_t)``: within ``1e-12`` relative (a few
    roundings of ``log1p`` and ``expm1``); the low one 0 unless every mass at ``+inf`` is a true atom."""
    masses = [(min(max(float(loss.infinity_mass), 0.0), 1.0), c) for loss, c in terms]
    if any(m >= 1.0 for m, _ in masses):
        p = 1.0
    else:
        p = -math.expm1(math.fsum(c * math.log1p(-m) for m, c in masses))
    exact = all(loss.infinity_is_exact or loss.infinity_mass <= 0.0 for loss, _ in terms)
    return min(1.0, p * (1.0 + 1e-12)), (p * (1.0 - 1e-12) if exact else 0.0)


def delta_bounds(top: TopAtoms, epsilons: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Certified ``(lower, upper)`` ends of ``delta(eps)`` at each of ``epsilons`` (each ``>= top.floor``; module
    docstring).

    Parameters
    ----------
    top : TopAtoms
        The listed atoms.
    epsilons : FloatArray
        The epsilons, each at least ``top.floor`` (below it the listing is incomplete).

    Returns
    -------
    tuple of FloatArray
        The lower and the upper ends, in ``[0, 1]``.

    Raises
    ------
    ValueError
        If an epsilon lies below ``top.floor``.
    """
    eps = np.asarray(epsilons, float)
    if eps.size and float(eps.min()) < top.floor:
        raise ValueError(f"epsilons must be >= the listing's floor {top.floor!r}, got {float(eps.min())!r}")
    n = top.loss_low.size
    summed = (n + 2) * _U
    low, high = np.empty(eps.shape), np.empty(eps.shape)
    for i, e in np.ndenumerate(eps):
        if top.rest is not None:
            low[i], high[i] = _with_rest(top, float(e))
            continue
        # p (1 - e^(eps - s)) over the atoms with s > eps: a prefix of the decreasing losses
        k_low = int(np.searchsorted(-top.loss_low, -e, side="left"))
        k_high = int(np.searchsorted(-top.loss_high, -e, side="left"))
        gain_low = -np.expm1(np.minimum(e - top.loss_low[:k_low], 0.0))
        gain_high = -np.expm1(np.minimum(e - top.loss_high[:k_high], 0.0))
        part_low = float(np.dot(top.mass_low[:k_low], gain_low)) * (1.0 - 4.0 * _U) * (1.0 - summed)
        part_high = float(np.dot(top.mass_high[:k_high], gain_high)) * (1.0 + 4.0 * _U) * (1.0 + summed) + n * 1e-300
        low[i] = max(0.0, (top.inf_low + part_low) * (1.0 - 2.0 * _U))
        high[i] = min(1.0, (top.inf_high + part_high + top.left_out) * (1.0 + 2.0 * _U))
    return low, high


def _with_rest(top: TopAtoms, e: float) -> tuple[float, float]:
    """``delta(e)`` with one bounded step beside the atoms (module docstring, last paragraph)."""
    assert top.rest is not None
    n = top.loss_low.size
    summed = (n + 2) * _U
    # upper: each atom's term at most p (1 - e^(e - s - top_rest)), the rest's loss at its largest
    k_high = int(np.searchsorted(-top.loss_high, -(e - top.rest_top), side="left"))
    gain = -np.expm1(np.minimum(e - top.rest_top - top.loss_high[:k_high], 0.0))
    part_high = float(np.dot(top.mass_high[:k_high], gain)) * (1.0 + 8.0 * _U) * (1.0 + summed) + n * 1e-300
    high = min(1.0, (top.inf_high + part_high + top.left_out) * (1.0 + 2.0 * _U))
    # lower: the event {atoms at a, the rest's loss above x_a = e - s_a}, at x_a from the atom's lowest loss (the
    # event's value, delta of the rest at x, falls in x)
    masses = top.rest.event_masses(e - top.loss_low) if n else None
    part_low = 0.0
    if masses is not None:
        p, q = masses[0], masses[1]
        x = e - top.loss_low
        value = np.maximum(p * (1.0 - 2.0 * _U) - np.exp(x) * (1.0 + 4.0 * _U) * q, 0.0)
        value = np.where(q >= 1e-290, value, 0.0)  # a Q-mass that may have underflowed bounds nothing: no event
        part_low = float(np.dot(top.mass_low, np.where(np.isfinite(value), value, 0.0))) * (1.0 - summed)
    low = max(0.0, (top.inf_low + part_low) * (1.0 - 2.0 * _U))
    return low, max(high, low)


def epsilon_bounds(top: TopAtoms, delta: float, ceiling: float = math.inf) -> tuple[float | None, float | None]:
    """Certified ends of ``eps(delta) = inf {eps : delta(eps) <= delta}`` from the listing (module docstring).

    Parameters
    ----------
    top : TopAtoms
        The listed atoms.
    delta : float
        The delta, in (0, 1).
    ceiling : float, default inf
        A known upper end of ``eps(delta)`` (an accountant's): the search stays below it.

    Returns
    -------
    tuple
        ``(lower, upper)``: ``lower`` with ``eps(delta) > lower`` (``None`` when the listing cannot show that
        epsilon exceeds its floor), ``upper`` with ``eps(delta) <= upper`` (the floor itself when the floor already
        meets ``delta``; ``None`` when no epsilon meets it: the mass left out or at ``+inf`` exceeds ``delta``).

    Raises
    ------
    ValueError
        Not raised (every delta is answered).
    """
    lo_e = top.floor
    hi_e = float(top.loss_high[0]) if top.loss_high.size else lo_e
    hi_e = max(min(hi_e, ceiling), lo_e)

    def lower_at(e: float) -> float:
        return float(delta_bounds(top, np.array([e]))[0][0])

    def upper_at(e: float) -> float:
        return float(delta_bounds(top, np.array([e]))[1][0])

    upper: float | None
    if upper_at(lo_e) <= delta:
        upper = lo_e
    elif upper_at(hi_e) > delta:
        upper = None
    else:
        upper = _bisect(upper_at, delta, lo_e, hi_e)  # upper_at(lo) > delta >= upper_at(hi): hi is returned
    lower = _bisect_lower(lower_at, delta, lo_e, hi_e) if lower_at(lo_e) > delta else None
    return lower, upper


def _bisect(f: Callable[[float], float], delta: float, lo: float, hi: float) -> float:
    """The ``hi`` end of a bisection keeping ``f(lo) > delta >= f(hi)`` (``f`` non-increasing)."""
    while hi - lo > _STOP * (1.0 + abs(hi)):
        mid = 0.5 * (lo + hi)
        if not lo < mid < hi:
            break
        if f(mid) <= delta:
            hi = mid
        else:
            lo = mid
    return hi


def _bisect_lower(f: Callable[[float], float], delta: float, lo: float, hi: float) -> float:
    """The ``lo`` end of a bisection keeping ``f(lo) > delta >= f(hi)`` (``f(hi) <= delta`` at the top, where
    only the mass at ``+inf`` is left; else ``hi`` itself qualifies and is returned)."""
    if f(hi) > delta:
        return hi
    while hi - lo > _STOP * (1.0 + abs(hi)):
        mid = 0.5 * (lo + hi)
        if not lo < mid < hi:
            break
        if f(mid) > delta:
            lo = mid
        else:
            hi = mid
    return lo

"""A step of atoms composed with itself exactly, discretised once: ``SelfComposedAtoms``.

Pure and approximate DP and randomized response have privacy losses made of a few atoms
(``DiscreteLoss``). ``c`` such steps compose *exactly* on their own lattice: with atoms at
``a_0 + m_i g`` (integers ``m_i``) the composition's atoms sit at ``c a_0 + J g`` with the
P-masses of the ``c``-th convolution power of ``sum_i p_i z^(m_i)`` (Kairouz, Oh, Viswanath 2015,
Thm 3.3 for pure/approximate DP; the same counting for any atoms on a lattice). On the
dominance grid ``c0 + h Z`` those atoms are off the grid unless ``h`` divides ``g`` (and then the
grid holds them, ``ConnectDotsAccountant._snap``). When a ledger mixes such steps with losses whose
atoms lie on another, incommensurate lattice (randomized response with subsampled Laplace, pure DP
of two unrelated epsilons), no grid holds every atom, and discretising each of the ``c`` steps moved
its atoms by up to a mesh: the lower bound drifted by about ``c h / 2`` in loss, and refinement
stalled (the mesh did not shrink the drift of the merge's isolated carries) until the PRV fallback
took over, 150 s on one such ledger. Composed first, the ``c`` steps are one term, placed on the grid
once:

* **upper** (``dominating_pld``): every composed atom, its loss rounded up by a bound on the float
  error of its value, is split between the two grid points around it keeping its P- and Q-mass
  (connect-the-dots for one atom, Doroshenko et al. 2022): the pair dominates the composition;
* **lower** (``dominated_pld``): every composed atom's loss, rounded down by that bound, is lowered to
  the grid point below it; lowering losses lowers ``delta(eps) = E_P[(1 - e^(eps - L))_+]``, of this
  term and of any composition with it.

Masses: the power is computed by repeated squaring of non-negative vectors (relative rounding
only, ``pld.composition.convolution_power``); entries below ``1e-280`` of the largest are trimmed
after every product and, with underflow, charged as absolute (``tv_error``) mass. The tail masses
beyond the step budget (``tail`` per step, times ``c``) go to ``+inf`` (upper; dropped or lowered
onto the top atom for the lower bound) or onto the lowest kept atom (upper; dropped for the lower).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import cast

import numpy as np

from .._caches import register as _register_cache
from .._types import FloatArray
from ..losses import DiscreteLoss, PrivacyLoss, SelfDiscretisingLoss
from .composition import convolution_power
from .discretise import DiscretisedLoss

__all__ = ["SelfComposedAtoms", "atom_gaps", "atom_lattice", "composed_atom_values", "self_composed_atoms"]

_U = float(np.finfo(float).eps) / 2
_TRIM = 1e-280  # entries below this fraction of the largest are trimmed from a power's ends
_TAIL_BELOW = 1e-3  # share of the tail budget spent below the kept atoms (as ``ConnectDotsAccountant``)
_MAX_UNITS = 64  # the lattice unit is the smallest gap divided by at most this
#: the largest integer offset of a lattice: beyond it the 1e-9 relative test below accepts any values (two atoms
#: 1e-11 apart beside one 0.1 away "lie" on a lattice of unit 1e-11, offsets 1e10, whose grid no one can build)
_MAX_OFFSET = 1 << 17


def atom_gaps(losses: Iterable[PrivacyLoss]) -> set[float]:
    """The distances of every loss's atoms (``PrivacyLoss.lattice_atoms``) from its lowest one, and 0: what a
    grid offset to hold each loss's lowest atom (``pld.dominance.grid_offset``) must divide to hold them all.
    Distances below 1e-12 are the same atom.

    Parameters
    ----------
    losses : iterable of PrivacyLoss
        The losses (``lattice_atoms()`` of each; losses without atoms add nothing).

    Returns
    -------
    set of float
        The gaps, 0 included.

    Raises
    ------
    AttributeError
        If a loss has no ``lattice_atoms`` method.
    """
    gaps = {0.0}
    for loss in losses:
        atoms = [a for a in loss.lattice_atoms() if math.isfinite(a)]
        gaps.update(a - atoms[0] for a in atoms if a - atoms[0] > 1e-12)
    return gaps


def atom_lattice(values: Iterable[float]) -> tuple[float, tuple[int, ...]] | None:
    """``(g, m)`` with every value ``v_i = v_0 + m_i g`` up to 1e-9 relative (``v_0`` the smallest,
    ``g`` the smallest gap over at most 64, every ``m_i`` at most ``2^17``), or ``None`` if the atoms lie on no
    such lattice (a lattice with larger offsets is no test of commensurability: the relative tolerance then
    holds for any values, and its grid would be too fine to build).

    Parameters
    ----------
    values : iterable of float
        The atoms' loss values (at least one).

    Returns
    -------
    tuple or None
        ``(g, m)``: the unit and each sorted value's integer offset from the smallest (``(1.0, (0,))`` for one
        value), or ``None``.

    Raises
    ------
    ValueError
        If ``values`` is empty, or a value is not a real number.
    """
    return _sorted_lattice(tuple(sorted(float(x) for x in values)))


@_register_cache
@lru_cache(maxsize=256)  # asked of each step's atoms by several routes of one query
def _sorted_lattice(v: tuple[float, ...]) -> tuple[float, tuple[int, ...]] | None:
    """``atom_lattice`` of sorted values."""
    if not v:
        raise ValueError("atom_lattice needs at least one value")
    if any(math.isnan(x) for x in v):
        raise ValueError("atom_lattice needs real values")
    if len(v) == 1:
        return 1.0, (0,)
    gaps = [x - v[0] for x in v]
    d1 = min(g for g in gaps if g > 0.0) if any(g > 0.0 for g in gaps) else 0.0
    if d1 <= 0.0:
        return None
    for k in range(1, _MAX_UNITS + 1):
        unit = d1 / k
        if gaps[-1] / unit > _MAX_OFFSET:  # (a larger k only raises the offsets)
            return None
        m = [round(g / unit) for g in gaps]
        if all(abs(g / unit - mi) <= 1e-9 * max(1.0, mi) for g, mi in zip(gaps, m)):
            return unit, tuple(m)
    return None


@_register_cache
@lru_cache(maxsize=32)
def _power(step: DiscreteLoss, count: int) -> tuple[float, float, int, FloatArray, float, float, float]:
    """The exact composition's finite atoms: ``(a0, g, lead, w, rel, absolute, eta)``; atom ``i`` of
    ``w`` has loss ``count a0 + (lead + i) g`` up to ``eta`` and P-mass ``w[i]`` within a factor
    ``1 +- rel``, plus at most ``absolute`` of trimmed or underflowed mass in all."""
    v, p = step._arrays
    keep = (p > 0) & np.isfinite(v)
    v, p = v[keep], p[keep]
    lat = atom_lattice(v)
    if lat is None:
        raise ValueError("the atoms lie on no lattice")
    g, m = lat
    if len(v) == 2:  # pure / approximate DP: a binomial, O(size) by its ratio recurrence
        out, rel, lead = _binomial_power(float(p[0]), float(p[1]), count)
    else:
        base = np.zeros(max(m) + 1)
        np.add.at(base, np.asarray(m), p)
        out, g_count, lead = convolution_power(base, count, (len(v) + 1) * _U, floor=_TRIM)
        rel = g_count / (1.0 - g_count)
    # trimmed: at most _TRIM of the largest entry (<= 1) per entry per product; underflow: far less
    products = 2 * max(count.bit_length(), 1)
    absolute = _TRIM * products * (count * max(m) + 1)
    # exact distance of each atom from its lattice point, summed over count steps, plus the rounding of
    # count * a0 + J * g in floats
    a0 = Fraction(float(v[0]))
    rho = max(abs(Fraction(float(x)) - a0 - mi * Fraction(g)) for x, mi in zip(v, m))
    top = count * abs(float(v[0])) + (lead + out.size) * g
    eta = float(count * rho) + 4.0 * _U * top
    out.flags.writeable = False
    return float(v[0]), g, lead, out, rel, absolute, eta


def self_composed_atoms(step: DiscreteLoss, count: int) -> tuple[FloatArray, FloatArray, float, float, float]:
    """The finite atoms of ``count`` steps of ``step`` composed exactly (module docstring; Kairouz, Oh, Viswanath
    2015, Thm 3.3): ``(values, masses, rel, absolute, eta)``.

    Parameters
    ----------
    step : DiscreteLoss
        An atoms-only loss whose atoms lie on one lattice (``SelfComposedAtoms.applies``).
    count : int
        How many times it is composed (>= 1).

    Returns
    -------
    tuple
        ``values`` (increasing) within ``eta`` each of the exact losses; ``masses`` their P-masses within a factor
        ``1 +- rel``; at most ``absolute`` of P-mass left out in all (entries trimmed at either end or underflowed).
        The mass at ``+inf`` is not among them (``SelfComposedAtoms.infinity_mass``).

    Raises
    ------
    ValueError
        If the step's atoms lie on no lattice.
    """
    a0, g, lead, w, rel, absolute, eta = _power(step, int(count))
    values = int(count) * a0 + (lead + np.arange(w.size)) * g
    return values, w, rel, absolute, eta + 4.0 * _U * float(np.max(np.abs(values), initial=0.0))


def _binomial_power(p0: float, p1: float, count: int) -> tuple[FloatArray, float, int]:
    """``(w, rel, lead)``: the masses ``w[i] = C(c, j) p1^j p0^(c - j)`` of ``j = lead + i`` (``c = count``),
    within a factor ``1 +- rel``, entries below ``_TRIM`` of the largest left out at both ends.

    From the mode ``j*`` the ratios ``u_(j+1) / u_j = (c - j) / (j + 1) * rho`` (``rho = p1 / p0``, one
    rounding) give ``u_j = w_j / w_(j*)`` with at most ``6 |j - j*| + 2`` roundings of ``u`` each; the
    ratios fall monotonically, so the trimmed ends are below their last kept term times a geometric
    series. ``w_j = (p0 + p1)^c u_j / sum(u)`` (all terms), normalised by the kept sum, whose relative
    error is at most its length in units of ``u`` plus the trimmed share (below 1e-270)."""
    rho = p1 / p0
    c = int(count)
    mode = min(c, max(0, math.floor((c + 1) * p1 / (p0 + p1))))
    up, down = [1.0], [1.0]
    j, u = mode, 1.0
    while j < c:  # upwards: u_(j+1) = u_j (c - j) rho / (j + 1)
        u = u * (c - j) * rho / (j + 1)
        j += 1
        if u < _TRIM:
            break
        up.append(u)
    j, u = mode, 1.0
    while j > 0:  # downwards: u_(j-1) = u_j j / ((c - j + 1) rho)
        u = u * j / ((c - j + 1) * rho)
        j -= 1
        if u < _TRIM:
            break
        down.append(u)
    vec = np.array(down[:0:-1] + up)
    lead = mode - (len(down) - 1)
    steps = max(len(up), len(down))
    total = float(vec.sum())
    # (p0 + p1)^c, the finite part's total mass: p0 + p1 - 1 (exactly rounded, fsum) keeps log(p0 + p1) to a
    # relative error of a few u; fl(p0 + p1) itself would err by u, raised to the power c (1e-11 at c = 1e5)
    log_scale = c * math.log1p(math.fsum((p0, p1, -1.0)))
    w = vec * (math.exp(log_scale) / total)
    g = (6.0 * steps + 2.0 + vec.size + 8.0 + 4.0 * (1.0 + abs(log_scale))) * _U + 1e-270
    return w, g / (1.0 - g), int(lead)


#: ``SelfComposedAtoms._kept``: values, masses, below, above, grid offset, margin, rel, absolute, summed
_Kept = tuple[FloatArray, FloatArray, float, float, float, FloatArray, float, float, float]


@dataclass(frozen=True)
class SelfComposedAtoms(SelfDiscretisingLoss):
    """``count`` steps of the atoms-only loss ``step``, composed exactly, as one privacy loss (module
    docstring). The connect-the-dots accountant uses it for ledgers whose atoms no common grid holds.

    Parameters
    ----------
    step : DiscreteLoss
        One step's atoms-only privacy loss (its atoms on one lattice: ``applies``).
    count : int
        How many times the step is composed (>= 1).

    Raises
    ------
    TypeError
        A missing field (the dataclass constructor; the fields are not validated: ``applies`` decides).

    References
    ----------
    Kairouz, Oh, Viswanath 2015, Thm 3.3 (the composition's atoms); Doroshenko et al. 2022
    (connect-the-dots, for ``dominating_pld``).
    """

    how_to = "the connect-dots accountant (it composes atoms exactly before discretising)"

    step: DiscreteLoss
    count: int

    @staticmethod
    def applies(loss: object) -> bool:
        """Whether ``loss`` is made of atoms on one lattice (and so can be composed exactly).

        Parameters
        ----------
        loss : object
            Any privacy loss (only a ``DiscreteLoss`` can apply).

        Returns
        -------
        bool
            Whether ``SelfComposedAtoms`` can compose it.

        Raises
        ------
        ValueError
            If the loss's atoms are not real numbers.
        """
        atoms = loss.lattice_atoms() if isinstance(loss, DiscreteLoss) else ()
        return bool(atoms) and atom_lattice(atoms) is not None

    @property  # derived from the step (``PrivacyLoss`` declares it a field): read-only here
    def infinity_mass(self) -> float:  # type: ignore[override]
        """P(some step's loss is ``+inf``), without cancellation."""
        m = min(float(self.step.infinity_mass), 1.0)
        return 1.0 if m >= 1.0 else -math.expm1(self.count * math.log1p(-m))

    @property  # the step's (``PrivacyLoss`` declares it a field): read-only here
    def infinity_is_exact(self) -> bool:  # type: ignore[override]
        """Whether the step's mass at ``+inf`` is a true atom (``PrivacyLoss.infinity_is_exact``)."""
        return self.step.infinity_is_exact

    def support(self) -> tuple[float, float]:
        """The composition's support: ``count`` times the step's.

        Returns
        -------
        tuple of float
            ``(lo, hi)``, possibly infinite.
        """
        lo, hi = self.step.support()
        return self.count * lo, self.count * hi

    def spread(self) -> float:
        """The composition's loss standard deviation under P: ``sqrt(count)`` times the step's (an estimate).

        Returns
        -------
        float
            The standard deviation.
        """
        from .dominance import loss_spread

        return math.sqrt(self.count) * loss_spread(self.step)

    def _kept(self, h: float, tail: float) -> _Kept:
        """The atoms within the tail budget: values, masses (tails folded in: ``below`` onto the lowest
        kept atom, ``above`` returned apart), the grid offset and the power's error terms."""
        a0, g, lead, w, rel, absolute, eta = _power(self.step, self.count)
        budget = float(tail) * self.count
        cum = np.cumsum(w)  # mass up to each atom
        sfx = np.append(np.cumsum(w[::-1])[::-1][1:], 0.0)  # mass above each atom (no cancellation)
        lo = min(int(np.searchsorted(cum, _TAIL_BELOW * budget, side="right")), w.size - 1)
        hi = max(min(int(np.searchsorted(-sfx, -budget, side="left")), w.size - 1), lo)  # <= budget above
        # sums of non-negative terms: within (w.size + 2) u of the exact ones; the caller rounds them to its
        # safe side (up for the upper bound; for the lower bound the lumped atom's mass error is a relative one)
        summed = (w.size + 2) * _U
        below = float(cum[lo - 1]) if lo > 0 else 0.0
        above = float(sfx[hi])
        idx = np.arange(lo, hi + 1)
        values = self.count * a0 + (lead + idx) * g
        # the grid offset that puts the lattice origin count * a0 on a grid point (then a mesh dividing
        # g holds every composed atom)
        origin = self.count * a0
        c0 = origin - h * math.floor(origin / h + 0.5)
        # the float error of the values and of the grid arithmetic below, per atom
        margin = eta + 8.0 * _U * (np.abs(values) + abs(c0) + 1.0)
        return values, np.array(w[lo : hi + 1]), below, above, c0, margin, rel, absolute, summed

    def dominating_pld(self, h: float, tail: float) -> DiscretisedLoss:
        """A dominating pair on ``c0 + h Z``: each composed atom split between its two grid points (module
        docstring, connect-the-dots for one atom).

        Parameters
        ----------
        h : float
            The mesh (> 0).
        tail : float
            The P-mass per step that may be left beyond the kept atoms.

        Returns
        -------
        DiscretisedLoss
            The dominating discretisation (the mass beyond the kept atoms at ``+inf``).

        Raises
        ------
        ValueError
            If the step's atoms lie on no lattice.

        References
        ----------
        Doroshenko, Ghazi, Kamath, Kumar, Manurangsi 2022, "Connect the dots: tighter discrete approximations
        of privacy loss distributions".
        """
        values, w, below, above, c0, margin, rel, absolute, summed = self._kept(h, tail)
        below, above = below * (1.0 + summed), above * (1.0 + summed)
        w = w.copy()
        w[0] += below  # losses below the kept atoms raised to the lowest one
        v_up = values + margin
        i = np.floor((v_up - c0) / h)
        d = np.clip(v_up - (c0 + i * h), 0.0, h)
        # connect-the-dots for one atom at v in [s_i, s_(i+1)]: the part b at s_(i+1) keeps its Q-mass
        # p e^-v, b = p (1 - e^(s_i - v)) / (1 - e^-h); rounded up (more mass higher: a larger loss)
        b = np.minimum(w * (-np.expm1(-d)) / (-math.expm1(-h)) * (1.0 + 8.0 * _U), w)
        start = int(i.min())
        pmf = np.zeros(int(i.max()) - start + 2)
        np.add.at(pmf, (i - start).astype(np.int64), w - b)
        np.add.at(pmf, (i - start).astype(np.int64) + 1, b)
        inf_up = min(1.0, self.infinity_mass * (1.0 + 1e-14) + above * (1.0 + rel) + absolute)
        return DiscretisedLoss(
            h=h,
            start=start,
            pmf=pmf,
            shift=c0,
            infinity_mass=inf_up,
            truncated_mass=0.0,
            mean_error=0.0,
            coupling_range=0.0,
            tv_error=absolute,
            rel_error=rel + 16.0 * _U,
        )

    def dominated_pld(self, h: float, tail: float) -> DiscretisedLoss:
        """A dominated pair on ``c0 + h Z``: each composed atom lowered to the grid point below it.

        Parameters
        ----------
        h : float
            The mesh (> 0).
        tail : float
            The P-mass per step that may be left beyond the kept atoms.

        Returns
        -------
        DiscretisedLoss
            The dominated discretisation (the mass above the kept atoms lowered onto the highest one).

        Raises
        ------
        ValueError
            If the step's atoms lie on no lattice.
        """
        values, w, _below, above, c0, margin, rel, absolute, summed = self._kept(h, tail)
        w = w.copy()
        w[-1] += above  # losses above the kept atoms lowered to the highest one; those below are dropped
        i = np.floor((values - margin - c0) / h)
        start = int(i.min())
        pmf = cast(FloatArray, np.bincount((i - start).astype(np.int64), weights=w))  # float64: weighted
        inf_lo = self.infinity_mass * (1.0 - 1e-14) if self.infinity_is_exact else 0.0
        return DiscretisedLoss(
            h=h,
            start=start,
            pmf=pmf,
            shift=c0,
            infinity_mass=inf_lo,
            truncated_mass=0.0,
            mean_error=0.0,
            coupling_range=0.0,
            tv_error=absolute,
            rel_error=rel + summed + 4.0 * _U,
        )


def composed_atom_values(
    terms: Sequence[tuple[PrivacyLoss, int]], low: float, high: float, limit: int
) -> FloatArray | None:
    """The values in ``[low, high]`` that a composition of atoms-only losses (``terms``: ``(loss, count)``
    pairs, every loss a ``DiscreteLoss``) can take, when all their atoms lie on one lattice: the kinks of
    its privacy curve (between them ``delta(eps) = A - B e^eps`` exactly, and the trade-off curve's
    facets have slopes ``-e^eps`` at exactly these values). ``None`` for other ledgers, or when more than
    ``limit`` values fall in the range. Hints for where to ask for delta; never part of a bound.

    Parameters
    ----------
    terms : sequence of (PrivacyLoss, int)
        The ledger: each loss and its count.
    low, high : float
        The range of loss values wanted.
    limit : int
        The most values returned.

    Returns
    -------
    FloatArray or None
        The values, increasing (empty if none lies in the range), or ``None``.

    Raises
    ------
    TypeError
        If ``low``, ``high`` or ``limit`` is not a number.
    """
    if not terms or not all(isinstance(loss, DiscreteLoss) for loss, _ in terms):
        return None
    origin = span = 0.0
    for loss, c in terms:
        atoms = [a for a in loss.lattice_atoms() if math.isfinite(a)]
        if atoms:
            origin += c * atoms[0]
            span += c * (atoms[-1] - atoms[0])
    lat = atom_lattice(atom_gaps(loss for loss, _ in terms))
    if lat is None:
        return None
    g = lat[0]
    j_max = round(span / g)
    j_lo = max(0, math.ceil((low - origin) / g - 1e-9))
    j_hi = min(j_max, math.floor((high - origin) / g + 1e-9))
    if j_hi < j_lo:
        return np.empty(0)
    if j_hi - j_lo + 1 > limit:
        return None
    return np.clip(origin + g * np.arange(j_lo, j_hi + 1), low, high)

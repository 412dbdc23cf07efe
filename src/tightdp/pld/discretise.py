"""Mean-preserving discretisation of a privacy loss random variable (Gopi et al. 2021, Alg. 2).

The grid is ``h * Z`` (cells ``(j h - h/2, j h + h/2]``), the same for every
mechanism composed together. For a PRV ``Y`` we build the *upper variant*
``Y^U``: mass above the top cell goes to ``+inf`` and mass below the bottom
cell is moved up into it, so ``Y <=_st Y^U`` and ``delta_Y <= delta_{Y^U}``
for every epsilon (the hockey-stick integrand is non-decreasing in ``Y``).
The finite part of ``Y^U`` is then replaced by ``Y~ = j h + mu`` with the
cell masses, where the shift ``mu`` makes ``E[Y~] = E[Y^U | finite]``
(Gopi et al. 2021, Alg. 2). Each ``Y^U - Y~`` lies in an interval of length
``coupling_range = h + 2 * edge_error`` (Gopi et al. 2021, Lemma D.5), which is what the
Hoeffding step of Gopi et al. 2021, Lemma 5.3 / Thm 5.5 needs. The lower bound pays for the
truncation with ``truncated_mass`` (``Y`` and ``Y^U`` differ only there).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .._caches import register as _register_cache
from .._types import ArrayLike, FloatArray
from ..errors import PrecisionError
from ..losses import PrivacyLoss

__all__ = ["DiscretisedLoss", "discretise", "discretise_coarse_tail"]

#: one rare wide rounding of a coupling: ``(count, v, b, p, a, dsq)`` (``discretise_coarse_tail``)
CouplingTail = tuple[int, float, float, float, float, float]
#: discretised losses with how many times each is composed
Terms = Sequence[tuple["DiscretisedLoss", int]]

_BLOCKS = 256  # resolution of the cheap CGF upper bound used for windows and tilts
_BLOCK_MIN = 16  # points per block at least (a small grid's 256 blocks of 5 points cost 4x, for the same choice)


@dataclass(frozen=True, eq=False)
class DiscretisedLoss:
    """The finite part of ``Y~``: ``pmf[j]`` sits at loss value ``(start + j) * h + shift``.

    Parameters
    ----------
    h : float
        The mesh (> 0): the grid is ``h * Z``.
    start : int
        Grid index of ``pmf[0]``.
    pmf : FloatArray
        Non-negative masses on consecutive grid points (P-probabilities of the privacy loss).
    shift : float
        Mean-preserving shift added to every grid value (Gopi et al. 2021, Alg. 2).
    infinity_mass : float
        P-mass at loss ``+inf`` (in [0, 1]).
    truncated_mass : float
        P-mass moved or cut by the truncation (what a lower bound pays for it).
    mean_error : float
        Bound on the mismatch of the means of ``Y^U`` and ``Y~``.
    coupling_range : float
        Length of the interval holding each ``Y^U - Y~`` (Gopi et al. 2021, Lemma D.5).
    tv_error : float, default 0.0
        l1 distance between ``pmf`` and the exact cell masses it stands for.
    rel_error : float, default 0.0
        Every mass is within a factor ``1 +- rel_error`` of the exact one.
    coupling_tails : tuple of CouplingTail, default ()
        Rare wide roundings of the coupling, ``(count, v, b, p, a, dsq)`` entries (``discretise_coarse_tail``).

    Raises
    ------
    TypeError
        A missing field (the dataclass constructor); the fields are not validated: the engine builds them.

    References
    ----------
    Gopi, Lee, Wutschitz 2021, "Numerical composition of differential privacy", Alg. 2 and Lemma D.5.
    """

    h: float
    start: int
    pmf: FloatArray
    shift: float
    infinity_mass: float
    truncated_mass: float
    mean_error: float
    coupling_range: float
    #: l1 distance between ``pmf`` and the exact cell masses it stands for (rounding of the
    #: masses; for a re-binned composition also the block's FFT round-off and aliasing)
    tv_error: float = 0.0
    #: every mass is within a factor ``1 +- rel_error`` of the exact one (cells not covered count in tv_error)
    rel_error: float = 0.0
    #: rare wide roundings of the coupling, ``(count, v, b, p, a, dsq)`` entries (``discretise_coarse_tail``);
    #: empty for Gopi et al. 2021, Alg. 2, whose every rounding lies in a range ``coupling_range``
    coupling_tails: tuple[CouplingTail, ...] = ()

    @property
    def grid(self) -> FloatArray:
        """Loss values of ``pmf`` without the shift (integer multiples of ``h``; computed once, read-only)."""
        g: FloatArray | None = self.__dict__.get("_grid_cache")
        if g is None:
            g = (self.start + np.arange(self.pmf.size)) * self.h
            g.flags.writeable = False
            self.__dict__["_grid_cache"] = g
        return g

    @property
    def mass(self) -> float:
        """Total finite mass, ``pmf.sum()``."""
        return float(self.pmf.sum())

    def _log_support(self) -> tuple[FloatArray, FloatArray]:
        """``(log pmf, grid)`` on the atoms with positive mass (computed once)."""
        out: tuple[FloatArray, FloatArray] | None = self.__dict__.get("_log_support_cache")
        if out is None:
            nz = self.pmf > 0
            out = (np.log(self.pmf[nz]), self.grid[nz])
            self.__dict__["_log_support_cache"] = out
        return out

    def log_mgf(self, theta: float) -> float:
        """``log sum_j pmf_j exp(theta * y_j)`` on the unshifted grid (exact, log-sum-exp).

        Parameters
        ----------
        theta : float
            The argument of the cumulant generating function.

        Returns
        -------
        float
            ``log E[exp(theta Y)]`` of the finite part (unnormalised).

        Raises
        ------
        ValueError
            If ``pmf`` has no positive mass (an empty maximum).
        """
        lp, g = self._log_support()
        a = lp + theta * g
        m = float(a.max())
        return m + math.log(float(np.exp(a - m).sum()))

    def log_mgf_many(self, thetas: ArrayLike) -> FloatArray:
        """``log_mgf`` at a few ``thetas`` at once (one pass over the grid).

        Parameters
        ----------
        thetas : array_like
            1-D arguments.

        Returns
        -------
        FloatArray
            ``log_mgf(theta)`` for each ``theta``.

        Raises
        ------
        ValueError
            If ``thetas`` is not 1-D numeric, or ``pmf`` has no positive mass.
        """
        lp, g = self._log_support()
        a = lp[None, :] + np.asarray(thetas, float)[:, None] * g[None, :]
        m = a.max(axis=1)
        out: FloatArray = m + np.log(np.exp(a - m[:, None]).sum(axis=1))
        return out

    def d_log_mgf(self, theta: float) -> float:
        """Derivative of ``log_mgf``: the mean of the ``theta``-tilted distribution (used to choose tilts:
        ``einsum``, not BLAS ``dot``, whose threads stall for milliseconds on a loaded machine).

        Parameters
        ----------
        theta : float
            The tilt.

        Returns
        -------
        float
            ``E[Y exp(theta Y)] / E[exp(theta Y)]`` on the unshifted grid.

        Raises
        ------
        ValueError
            If ``pmf`` has no positive mass (an empty maximum).
        """
        lp, g = self._log_support()
        lw = lp + theta * g
        w = np.exp(lw - lw.max())
        return float(np.einsum("i,i->", w, g) / w.sum())

    def log_mgf_upper(self, thetas: ArrayLike, blocks: int = _BLOCKS) -> FloatArray:
        """Cheap upper bounds on ``log_mgf`` at many ``thetas``: the grid cut into about ``blocks`` blocks (of
        at least ``_BLOCK_MIN`` points), each block's mass placed at its largest (``theta >= 0``) or smallest
        value; within ``|theta|`` times a block's width of the exact value.

        Parameters
        ----------
        thetas : array_like
            Scalar or 1-D arguments.
        blocks : int, default 256
            About how many blocks the grid is cut into (memoised per ``(self, blocks)``).

        Returns
        -------
        FloatArray
            An upper bound on ``log_mgf(theta)`` for each ``theta`` (``-inf`` where there is no mass).

        Raises
        ------
        ValueError
            If ``thetas`` is not numeric.
        """
        hi, lo, lm = _blocks_cached(self, blocks)
        th: FloatArray = np.atleast_1d(np.asarray(thetas, float))
        a = lm[None, :] + th[:, None] * np.where(th[:, None] >= 0, hi[None, :], lo[None, :])
        m = a.max(axis=1)
        with np.errstate(invalid="ignore", over="ignore"):
            out = m + np.log(np.exp(a - m[:, None]).sum(axis=1))
        upper: FloatArray = np.where(np.isfinite(m), out, m)
        return upper


@_register_cache
@lru_cache(maxsize=48)
def _blocks_cached(d: DiscretisedLoss, blocks: int) -> tuple[FloatArray, FloatArray, FloatArray]:
    n = d.pmf.size
    size = max(min(_BLOCK_MIN, n), math.ceil(n / blocks))
    pad = (-n) % size
    p = np.concatenate([d.pmf, np.zeros(pad)]).reshape(-1, size)
    m = p.sum(axis=1)
    starts = d.start + np.arange(p.shape[0]) * size
    lo = starts * d.h
    hi = (starts + size - 1) * d.h
    keep = m > 0
    return hi[keep], lo[keep], np.log(m[keep])


def _truncation_range(loss: PrivacyLoss, tail_mass: float) -> tuple[float, float]:
    """The loss range kept when ``tail_mass / 2`` is cut from each tail, clipped to the loss support."""
    lo_s, hi_s = loss.support()
    a = loss.lower_quantile(0.5 * tail_mass)
    b = loss.upper_quantile(0.5 * tail_mass)
    if math.isfinite(lo_s):
        a = max(a, lo_s)
    if math.isfinite(hi_s):
        b = min(b, hi_s)
    return a, b


@_register_cache
@lru_cache(maxsize=48)  # entries hold grids of up to ~1e6 points: keep the cache small
def discretise(loss: PrivacyLoss, h: float, tail_mass: float) -> DiscretisedLoss:
    """Discretise ``loss`` on ``h * Z`` with at most ``tail_mass`` truncated (Gopi et al. 2021, Alg. 2, upper
    variant).

    Cached: the same ``(loss, h, tail_mass)`` is computed once per process.

    Parameters
    ----------
    loss : PrivacyLoss
        The privacy loss random variable of one step.
    h : float
        The mesh (> 0, finite).
    tail_mass : float
        The P-mass that may be cut from the two tails together (half each).

    Returns
    -------
    DiscretisedLoss
        The mean-preserving discretisation of the upper variant ``Y^U``.

    Raises
    ------
    ValueError
        If ``h`` is not positive and finite.
    PrecisionError
        If the grid would need more than 5e7 points, or the mean-preserving shift exceeds half the mesh
        (the loss's CDF and partial mean disagree).

    References
    ----------
    Gopi, Lee, Wutschitz 2021, Alg. 2, Lemma D.5 and Thm 5.5.
    """
    if not (h > 0 and math.isfinite(h)):
        raise ValueError(f"mesh h must be positive and finite, got {h!r}")
    a, b = _truncation_range(loss, tail_mass)
    j_lo = math.floor(a / h + 0.5)
    j_hi = max(j_lo, math.ceil(b / h - 0.5))
    if j_hi - j_lo > 50_000_000:
        raise PrecisionError(
            f"the discretisation would need {j_hi - j_lo:.3g} grid points (mesh {h:.3g}); "
            "loosen eps_error (the mesh is proportional to it)"
        )
    edges = (np.arange(j_lo, j_hi + 2) - 0.5) * h
    below, above, masses, (mass_rel, mass_l1), edge_err = loss.cell_masses(edges)
    pmf = masses.copy()
    pmf[0] += below
    # infinite-loss mass that is a safe-side device, not a true atom, counts as truncated: the lower
    # bound subtracts it again
    device = 0.0 if loss.infinity_is_exact else float(loss.infinity_mass)
    total = float(pmf.sum())
    if total <= 0.0:
        # everything is at +inf (or truncated there): no finite part
        return DiscretisedLoss(
            h,
            j_lo,
            np.zeros(1),
            0.0,
            min(1.0, loss.infinity_mass + above),
            below + above + device,
            0.0,
            h,
            mass_l1,
            mass_rel,
        )
    pm, pm_err = loss.partial_mean(float(edges[0]), float(edges[-1]))
    mean_fin = pm + j_lo * h * below
    grid = (j_lo + np.arange(pmf.size)) * h
    # sum in two pieces to limit cancellation: positive and negative grid values
    grid_mean = float(np.dot(pmf, grid))
    shift = (mean_fin - grid_mean) / total
    # rounding error of the dot products and of the CDF differences (relative 1e-15 per term)
    arith = 1e-15 * (float(np.dot(pmf, np.abs(grid))) + abs(pm)) + h * 1e-15 * pmf.size
    mean_error = (pm_err + arith) / total + edge_err
    if abs(shift) > 0.5 * h + edge_err + mean_error + 1e-12:
        raise PrecisionError(
            f"mean-preserving shift {shift:.3g} exceeds half the mesh {h:.3g}: the privacy loss "
            "CDF and its partial mean disagree (numerical trouble in the mechanism's loss)"
        )
    return DiscretisedLoss(
        h=h,
        start=j_lo,
        pmf=pmf,
        shift=shift,
        infinity_mass=min(1.0, loss.infinity_mass + above),
        truncated_mass=below + above + device,
        mean_error=mean_error,
        coupling_range=h + 2.0 * edge_err,
        tv_error=mass_l1,
        rel_error=mass_rel,
    )


@_register_cache
@lru_cache(maxsize=8)
def discretise_coarse_tail(
    loss: PrivacyLoss, h: float, tail_mass: float, ratio: int = 15, tail_share: float = 0.01
) -> DiscretisedLoss:
    """Gopi et al. 2021, Alg. 2 on ``h * Z`` in the bulk and on cells ``ratio`` times wider in the tails.

    A heavy tail (the subsampled Gaussian's loss reaches 4-7 units to the right in the remove
    direction, to the left in the add direction, where its bulk spans a few hundredths) costs most
    of the cells of ``discretise`` while carrying a tiny probability. Here the cells outside the
    bulk ``[T_lo, T_hi]`` have width ``G = ratio h`` (``ratio`` odd, so each wide cell is centred on a
    point of ``h * Z``); ``T_lo`` and ``T_hi`` are where each tail's probability is at most
    ``tail_share / ratio^2`` (so ``p = P(tail) <= 2 tail_share / ratio^2``). The pmf is
    ``Y~ = atom + mu`` with one mean-preserving shift ``mu`` for all cells, as in Gopi et al. 2021, Alg. 2
    (the upper variant: mass below the first cell moves up to its atom, mass above the last to +inf).

    The coupling ``D = Y^U - Y~`` then lies, given the bulk event ``B``, in an interval of length
    ``r_B = h + 2 e`` (``e``: the realised edge error), and given the tail event in one of length
    ``r_T = G + 2 e``. Hoeffding's lemma on each event, with ``c_B``, ``c_T`` the conditional means,
    gives ``E e^(sD) <= e^(s^2 r_B^2/8) [E e^(sC) + p e^(s c_T) (e^(s^2 (r_T^2 - r_B^2)/8) - 1)]`` with
    ``C`` the two-valued variable (``c_B`` w.p. ``1 - p``, ``c_T`` w.p. ``p``) of mean ``m = E D``;
    ``|C - m| <= b = G/2 + e + |mu| + |m|`` and ``Var C <= v = p ((G + h)/2 + 2 e)^2``, so Bennett's
    inequality bounds ``E e^(s(C - m)) <= exp(v phi(|s| b) / b^2)``, ``phi(x) = e^x - 1 - x``. Hence
    ``log E e^(sD) <= s^2 r_B^2 / 8 + s m + v phi(|s| b)/b^2 + p e^(|s| a) (e^(s^2 dsq/8) - 1)`` with
    ``a = G/2 + e + |mu| + |m|`` and ``dsq = r_T^2 - r_B^2``: the ``r_B`` part goes into
    ``coupling_range`` (the Hoeffding sum), the rest into ``coupling_tails`` (entry ``(1, v, b, p, a,
    dsq)``), and ``ComposedPLD.coupling_shift`` minimises the Chernoff bound over ``s``
    (``tightdp.pld._composed._tail_coupling_shift``). The tail event's ``p`` is the computed tail
    mass rounded up by its relative and l1 errors. Falls back to ``discretise`` when the threshold
    is above the truncation point or the shift leaves the bulk cell (``|mu| > h/2``).

    Parameters
    ----------
    loss : PrivacyLoss
        The privacy loss random variable of one step.
    h : float
        The bulk mesh (> 0, finite).
    tail_mass : float
        The P-mass that may be cut from the two tails together.
    ratio : int, default 15
        Width of a tail cell in bulk cells (odd, >= 3).
    tail_share : float, default 0.01
        Sets the bulk's ends: each tail beyond them has probability at most ``tail_share / ratio^2``.

    Returns
    -------
    DiscretisedLoss
        The discretisation, its rare wide roundings in ``coupling_tails``.

    Raises
    ------
    ValueError
        If ``h`` is not positive and finite, or ``ratio`` is not an odd integer >= 3.
    PrecisionError
        If the grid would need more than 5e7 cells (or as ``discretise``, on a fallback).

    References
    ----------
    Gopi, Lee, Wutschitz 2021, Alg. 2 and Lemma 5.3 (Hoeffding), with Bennett's inequality for the tail event.
    """
    if not (h > 0 and math.isfinite(h)):
        raise ValueError(f"mesh h must be positive and finite, got {h!r}")
    ratio = int(ratio)
    if ratio < 3 or ratio % 2 == 0:
        raise ValueError(f"ratio must be an odd integer >= 3, got {ratio!r}")
    lo_s, hi_s = loss.support()
    a, b = _truncation_range(loss, tail_mass)
    p_max = tail_share / ratio**2
    j_lo = math.floor(a / h + 0.5)
    j_hi = max(j_lo, math.ceil(b / h - 0.5))
    # bulk cells jb0 .. jb1 - 1: P(Y <= (jb0 - 1/2) h) <= p_max and P((jb1 - 1/2) h < Y < inf) <= p_max
    jb0 = max(j_lo, math.floor(loss.lower_quantile(p_max) / h + 0.5)) if math.isinf(lo_s) or a > lo_s else j_lo
    jb1 = min(j_hi + 1, math.ceil(loss.upper_quantile(p_max) / h + 0.5)) if math.isinf(hi_s) or b < hi_s else j_hi + 1
    if jb0 - ratio < j_lo:
        jb0 = j_lo
    if jb1 + ratio > j_hi + 1:
        jb1 = j_hi + 1
    if jb1 <= jb0 or (jb0 == j_lo and jb1 == j_hi + 1):
        return discretise(loss, h, tail_mass)
    n_lo = -(-(jb0 - j_lo) // ratio)
    n_hi = -(-(j_hi + 1 - jb1) // ratio)
    nb = jb1 - jb0
    if n_lo + nb + n_hi > 50_000_000:
        raise PrecisionError(
            f"the discretisation would need {n_lo + nb + n_hi:.3g} cells (mesh {h:.3g}); "
            "loosen eps_error (the mesh is proportional to it)"
        )
    s0 = jb0 - n_lo * ratio
    edges = np.concatenate(
        [
            (s0 - 0.5 + ratio * np.arange(n_lo + 1)) * h,
            (jb0 - 0.5 + np.arange(1, nb + 1)) * h,
            (jb1 - 0.5 + ratio * np.arange(1, n_hi + 1)) * h,
        ]
    )
    below, above, masses, (mass_rel, mass_l1), edge_err = loss.cell_masses(edges)
    size = n_lo * ratio + nb + n_hi * ratio
    half = (ratio - 1) // 2  # each wide cell's atom is its centre, a point of h * Z (ratio odd)
    pos = np.concatenate(
        [
            ratio * np.arange(n_lo) + half,
            n_lo * ratio + np.arange(nb),
            n_lo * ratio + nb + ratio * np.arange(n_hi) + half,
        ]
    )
    pmf = np.zeros(size)
    pmf[pos] = masses
    pmf[pos[0]] += below  # the upper variant: mass below the first cell moves up to its atom
    device = 0.0 if loss.infinity_is_exact else float(loss.infinity_mass)
    total = float(pmf.sum())
    if total <= 0.0:
        return discretise(loss, h, tail_mass)
    grid = (s0 + np.arange(size)) * h
    pm, pm_err = loss.partial_mean(float(edges[0]), float(edges[-1]))
    mean_fin = pm + float(grid[pos[0]]) * below
    shift = (mean_fin - float(np.dot(pmf, grid))) / total
    arith = 1e-15 * (float(np.dot(pmf, np.abs(grid))) + abs(pm)) + h * 1e-15 * masses.size
    mean_error = (pm_err + arith) / total + edge_err
    if abs(shift) > 0.5 * h:
        return discretise(loss, h, tail_mass)
    wide = np.concatenate([masses[:n_lo], masses[n_lo + nb :]])
    G = ratio * h
    p_tail = float(wide.sum()) * (1.0 + mass_rel) + mass_l1
    r_b = h + 2.0 * edge_err
    r_t = G + 2.0 * edge_err
    bb = 0.5 * G + edge_err + abs(shift) + mean_error
    v = p_tail * (0.5 * (G + h) + 2.0 * edge_err) ** 2
    tails = ((1, v, bb, p_tail, bb, r_t * r_t - r_b * r_b),)
    return DiscretisedLoss(
        h=h,
        start=s0,
        pmf=pmf,
        shift=shift,
        infinity_mass=min(1.0, loss.infinity_mass + above),
        truncated_mass=below + above + device,
        mean_error=mean_error,
        coupling_range=r_b,
        tv_error=mass_l1,
        rel_error=mass_rel,
        coupling_tails=tails,
    )

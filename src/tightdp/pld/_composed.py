"""The composed PLD: a tilted grid distribution and the certified error of every delta read from it.

``ComposedPLD`` stores the finite part of a composition tilted, ``w(x_i) = tilted[i] exp(log_norm - tilt x_i)``,
with every error term that ``pld.composition.compose`` charged (window, aliasing, FFT round-off, coupling), and
answers ``delta_disc(eps)`` and its numerical error from two suffix sums; ``solve_epsilon`` inverts it.
The coupling of the discretisation is bounded here too (Hoeffding, Gopi et al. 2021, Lemma 5.3, and the
Chernoff bound of the rare wide roundings).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import cast

import numpy as np

from .._numerics import falling_index, falling_root, geometric_suffix
from .._types import ArrayLike, FloatArray
from .discretise import CouplingTail

__all__ = ["ComposedPLD", "hockey_stick_points", "merge_tails"]

_U = cast(float, np.finfo(float).eps / 2)  # unit round-off (a numpy float64)

#: a non-increasing error term of epsilon added to ``delta_disc`` (``ComposedPLD.solve_epsilon``)
ErrorTerm = Callable[[float], "float | FloatArray"]
#: the longest grid whose epsilon cell is found by one vector pass (``ComposedPLD._first_grid_point_below``)
_VECTOR_SCAN_MAX = 1 << 17


def hockey_stick_points(a: float, h: float) -> float:
    """``sum_{m >= 0} e^(-a m) (1 - e^(-(m + 1) h))`` for ``a, h > 0`` (rounded up): how many grid points'
    worth of an entrywise error a tilted composition's delta can collect above any epsilon, the ``m``-th
    point above it being at least ``m h`` above (tilt weight ``e^(-a m)``, ``a = tilt h``) and at most
    ``(m + 1) h`` (hockey-stick weight). Closed form: ``(1 - e^-h) / ((1 - e^-a) (1 - e^-(a + h)))``."""
    return -math.expm1(-h) / (math.expm1(-a) * math.expm1(-a - h)) * (1.0 + 1e-12)


@dataclass(frozen=True, eq=False)
class ComposedPLD:
    """The composed finite part, stored tilted: ``w(x_i) = tilted[i] * exp(log_norm - tilt * x_i)``.

    ``x_i = offset + i * h`` are loss values (mean-preserving shifts included). Built by
    ``pld.composition.compose``; the fields are its error terms, each charged by the bounds of ``pld.curve``.

    Parameters
    ----------
    h : float
        The mesh.
    offset : float
        Loss value of ``tilted[0]``.
    tilted : FloatArray
        The tilted, normalised masses on the grid.
    tilt : float
        The exponential tilt ``lambda >= 0``.
    log_norm : float
        Log of the tilting normalisation (``w = tilted exp(log_norm - tilt x)``).
    infinity_mass : float
        P-mass at loss ``+inf``.
    truncated_mass : float
        P-mass the truncations moved (what the lower bound pays).
    hoeffding_sq : float
        ``sum r_i^2`` of the coupling ranges (Hoeffding, Gopi et al. 2021, Lemma 5.3).
    mean_error : float
        Bound on the coupling's accumulated mean mismatch.
    alias_mass : float
        Tilted mass outside the window (aliased and missed), an l1 bound.
    float_error : float
        l1 bound on the FFT's round-off in ``tilted``.
    compositions : int
        Number of composed steps.
    tv_error : float, default 0.0
        Sum of the composed terms' l1 errors (re-binned blocks, uncovered cells).
    up_rel, low_factor : float, default 0.0 and 1.0
        Exact masses lie within ``[computed * low_factor, computed * (1 + up_rel)]`` pointwise.
    coupling_tails : tuple of CouplingTail, default ()
        Rare wide roundings in the coupling (``DiscretisedLoss.coupling_tails``, counts summed).
    pointwise_error : float or None, default None
        Bound on the round-off of any one entry of ``tilted`` (``None``: only ``float_error``).
    input_error : float, default 0.0
        l1 error of the composed inputs themselves (blocks' windows), in tilted units.
    input_round_off : tuple of float, default (0.0, 0.0)
        The inputs' round-off, ``(l1, entrywise)``.

    Raises
    ------
    TypeError
        A missing field (the dataclass constructor; the fields are not validated: ``compose`` builds them).

    References
    ----------
    Koskela et al. 2020 (Fourier accountant), Sec. 4-5 (FFT composition) and Sec. 7 (Chernoff window);
    Gopi et al. 2021 (PRV accountant), Thm 5.5 (coupling and error terms).
    """

    h: float
    offset: float
    tilted: FloatArray
    tilt: float
    log_norm: float
    infinity_mass: float
    truncated_mass: float
    hoeffding_sq: float
    mean_error: float
    alias_mass: float
    float_error: float
    compositions: int
    tv_error: float = 0.0  # sum of the composed terms' l1 errors (re-binned blocks, uncovered cells)
    #: exact masses lie within ``[computed * low_factor, computed * (1 + up_rel)]`` pointwise
    up_rel: float = 0.0
    low_factor: float = 1.0
    #: rare wide roundings in the coupling (``DiscretisedLoss.coupling_tails``, counts summed)
    coupling_tails: tuple[CouplingTail, ...] = ()
    #: bound on the round-off of any one entry of ``tilted`` (``float_error`` bounds their sum); ``None``:
    #: no better bound than ``float_error``
    pointwise_error: float | None = None
    #: errors of the composed inputs themselves (``pld.hierarchy``: blocks composed by FFT), tilted units of
    #: ``tilted``, charged on top of this composition's own round-off: ``input_error`` in l1 only (the
    #: blocks' window), ``input_round_off = (l1, entrywise)`` bounded both ways (the blocks' round-off)
    input_error: float = 0.0
    input_round_off: tuple[float, float] = (0.0, 0.0)

    @property
    def l1_error(self) -> float:
        """Bound on the l1 distance of ``tilted`` from the exact composition of the exact inputs, window
        aside: this composition's round-off plus its inputs' errors."""
        return self.float_error + self.input_error + self.input_round_off[0]

    @property
    def delta_error_factor(self) -> float:
        """``F`` with ``|delta_disc(e') - exact(e')| <= exp(log_norm - tilt e) F`` for every ``e' >= e``
        (window, round-off and input errors; the suffix sums' own rounding is charged apart).

        The aliased mass and the inputs' window errors are l1 bounds: in the worst case all of it sits
        just above ``e``, where one unit of tilted mass is ``exp(log_norm - tilt e)`` of delta. Round-off
        (this FFT's, ``float_error`` / ``pointwise_error``, and the inputs', ``input_round_off``) is
        also bounded entry by entry (``p``): the ``m``-th grid point above ``e'`` lies at least ``m h``
        above it, so its error moves delta by at most ``p exp(log_norm - tilt e') e^(-tilt m h)
        (1 - e^(-(m + 1) h))``; summed over ``m >= 0``, ``p exp(log_norm - tilt e')`` times
        ``hockey_stick_points(tilt h, h)``, about ``1 / (tilt^2 h)`` points' worth instead of the l1
        bound's ``~N``. Each error takes the smaller of its two bounds. (Decisive where the composition
        is nearly a point mass, its l1 round-off ~1e-10 of the tilted mass while delta is ~1e-9 of it:
        rare sampled steps at a tiny delta.)"""
        cached: float | None = self.__dict__.get("_delta_error_factor")
        if cached is None:
            fft, (in_l1, in_point) = self.float_error, self.input_round_off
            points = hockey_stick_points(self.tilt * self.h, self.h) if self.tilt > 0.0 and self.h > 0.0 else math.inf
            if math.isfinite(points):  # (a tilt of 1e-300 gives inf points: 0 x inf must not become nan)
                if self.pointwise_error is not None:
                    fft = min(fft, self.pointwise_error * points)
                in_l1 = min(in_l1, in_point * points)
            cached = self.alias_mass + self.input_error + fft + in_l1
            self.__dict__["_delta_error_factor"] = cached
        return cached

    @property
    def x(self) -> FloatArray:
        """Loss values of the grid (computed once; treat as read-only)."""
        x: FloatArray | None = self.__dict__.get("_x")
        if x is None:
            x = self.offset + self.h * np.arange(self.tilted.size)
            x.flags.writeable = False
            self.__dict__["_x"] = x
        return x

    def coupling_shift(self, eta: float) -> float:
        """``t`` with ``P(S - S~ > t) <= eta`` (and the same for ``S~ - S``).

        Hoeffding for independent differences of ranges ``r_i`` (Gopi et al. 2021, Lemma 5.3),
        plus the accumulated bound on the mean mismatch.

        Parameters
        ----------
        eta : float
            The failure probability, in (0, 1].

        Returns
        -------
        float
            The shift ``t >= 0`` (``inf`` if no Chernoff parameter gives a finite one).

        Raises
        ------
        ValueError
            If ``eta`` is negative or above 1 (a square root or logarithm of a negative number), when a
            coupling is present.
        ZeroDivisionError
            If ``eta == 0``, when a coupling is present.
        """
        if self.hoeffding_sq == 0.0 and not self.coupling_tails:  # no coupling (dominance-based)
            return float(self.mean_error)
        if not self.coupling_tails:
            return float(math.sqrt(0.5 * self.hoeffding_sq * math.log(1.0 / eta)) + self.mean_error)
        return _tail_coupling_shift(self.hoeffding_sq, self.coupling_tails, eta) + float(self.mean_error)

    def numerical_error(self, eps: ArrayLike) -> FloatArray:
        """Bound on how much aliasing, window truncation and FFT round-off can move
        ``delta_disc(eps')`` for any ``eps' >= eps`` (untilted: ``exp(log_norm - tilt eps)``),
        plus the rounding of the suffix sums behind ``delta_disc`` (``4 N u`` times the mass above).

        Parameters
        ----------
        eps : array_like
            Epsilons (any shape).

        Returns
        -------
        FloatArray
            The bound at each ``eps``, the shape of ``eps``.

        Raises
        ------
        ValueError
            If ``eps`` is not numeric.
        """
        arr: FloatArray = np.asarray(eps, float)
        flat = np.atleast_1d(arr)
        fft = np.exp(np.minimum(self.log_norm - self.tilt * flat, 700.0)) * self.delta_error_factor
        A, _ = self._suffix_at(flat)
        out: FloatArray = (fft + 4.0 * _U * self.tilted.size * A).reshape(arr.shape)
        return out

    def _scalar_suffix(self, e: float) -> tuple[float, float, float]:
        """``(x_j, A_j, S_j)`` for one float ``e``: the sums from the first grid point ``x_j`` above ``e``
        (``delta_disc(e) = A_j - S_j exp(e - x_j)``)."""
        A, S = self._sums()
        x = self.x
        j = int(x.searchsorted(e, side="right"))
        if j >= x.size:
            return e, 0.0, 0.0
        return float(x[j]), float(A[j]), float(S[j])

    def _scalar_terms(self, e: float) -> tuple[float, float]:
        """``(delta_disc(e), numerical_error(e))`` for one float: the root finders' inner loop,
        the same arithmetic as the vector methods without their array overhead."""
        ref, a, b = self._scalar_suffix(e)
        d = max(a - b * math.exp(min(e - ref, 700.0)), 0.0)
        fft = math.exp(min(self.log_norm - self.tilt * e, 700.0)) * self.delta_error_factor
        return d, fft + 4.0 * _U * self.tilted.size * a

    # -- delta(eps) of the discrete distribution --------------------------------
    def _sums(self) -> tuple[FloatArray, FloatArray]:
        """``(A, S)``, one O(N) pass each: ``A_j = sum_{i >= j} w(x_i)`` and
        ``S_j = sum_{i >= j} w(x_i) exp(-(x_i - x_j))`` (so ``S_j = w(x_j) + e^-h S_(j+1)``; both
        have a trailing 0; ``tightdp._numerics.geometric_suffix``). ``delta_disc(e) = A_j - S_j exp(e - x_j)`` with ``x_j`` the first grid
        point above ``e``, where ``exp(e - x_j)`` is in ``[e^-h, 1)``: no overflow at any epsilon.

        Rounding: ``A_j`` is a sum of at most ``N`` non-negative terms (error ``<= N u A_j``); the
        recursion for ``S_j`` rounds a product and a sum per step, and ``e^-h`` once, so term ``i``
        carries at most ``3 (i - j + 1) u`` relative error (``<= 3 N u S_j`` in all, ``S_j <= A_j``):
        ``numerical_error`` charges ``4 N u A_j``.
        """
        cached: tuple[FloatArray, FloatArray] | None = self.__dict__.get("_sums_cache")
        if cached is None:
            with np.errstate(over="ignore", under="ignore"):
                a = self.tilted * np.exp(np.minimum(self.log_norm - self.tilt * self.x, 700.0))
            rev = a[::-1]
            A = np.append(np.cumsum(rev)[::-1], 0.0)
            S = np.append(geometric_suffix(a, math.exp(-self.h)), 0.0)
            cached = (A, S)
            self.__dict__["_sums_cache"] = cached
        return cached

    def _suffix_at(self, eps: FloatArray) -> tuple[FloatArray, FloatArray]:
        """``(A_j, S_j * exp(eps - x_j))`` for each ``eps`` (``x_j`` the first grid point above it)."""
        A, S = self._sums()
        x = self.x
        j = np.searchsorted(x, eps, side="right")
        inside = j < x.size
        jj = np.minimum(j, x.size - 1)
        with np.errstate(over="ignore", under="ignore"):
            Be = np.where(inside, S[jj] * np.exp(np.minimum(eps - x[jj], 700.0)), 0.0)
        return np.where(inside, A[jj], 0.0), Be

    def delta_disc(self, eps: ArrayLike) -> FloatArray:
        """``sum_{x_i > eps} w(x_i) (1 - exp(eps - x_i))`` for each ``eps`` (finite part only).

        Parameters
        ----------
        eps : array_like
            Epsilons (scalar or any shape; flattened to at least 1-D).

        Returns
        -------
        FloatArray
            The discrete hockey-stick divergence at each ``eps`` (>= 0).

        Raises
        ------
        ValueError
            If ``eps`` is not numeric.
        """
        flat: FloatArray = np.atleast_1d(np.asarray(eps, float))
        A, Be = self._suffix_at(flat)
        out: FloatArray = np.maximum(A - Be, 0.0)
        return out

    def _first_grid_point_below(self, target: float, use_err: bool, start: int) -> int | None:
        """The first grid index ``i >= start`` with ``delta_disc(x_i) (+ numerical_error(x_i)) <= target``,
        from one vector pass over the grid (``None``: none, or a grid too small or too large to bother: on
        a long grid the bisection's few scalar evaluations are cheaper than a pass, and the two cached
        arrays would add 16 bytes a point to the largest compositions). The same
        arithmetic as ``_scalar_terms`` up to the last ulp of ``exp``: ``solve_epsilon`` confirms the
        cell with the scalar terms before it uses it, and bisects on the grid where they disagree."""
        n = self.tilted.size
        if not 64 <= n <= _VECTOR_SCAN_MAX or start >= n - 1:
            return None
        key = "_grid_g_err" if use_err else "_grid_g"
        vals: FloatArray | None = self.__dict__.get(key)
        if vals is None:
            A, S = self._sums()
            x = self.x
            # at e = x_i the first grid point above is x_(i+1); the last grid point has nothing above it
            with np.errstate(over="ignore", under="ignore"):
                d = np.maximum(A[1:n] - S[1:n] * np.exp(np.minimum(x[:-1] - x[1:], 700.0)), 0.0)
                if use_err:
                    d = d + (
                        np.exp(np.minimum(self.log_norm - self.tilt * x[:-1], 700.0)) * self.delta_error_factor
                        + 4.0 * _U * n * A[1:n]
                    )
            vals = np.append(d, 0.0)
            vals.flags.writeable = False
            self.__dict__[key] = vals
        hits = np.flatnonzero(vals[start:] <= target)
        return int(start + hits[0]) if hits.size else None

    def solve_epsilon(self, target: float, extra: ErrorTerm | None = None, *, eps_min: float = -1.0) -> float:
        """Smallest ``eps >= eps_min`` with ``delta_disc(eps) + extra(eps) <= target``.

        ``extra`` is a non-increasing function of ``eps`` (error terms). Returns
        ``inf`` when the window ends before the condition is met. ``delta_disc``
        is continuous and non-increasing, so bisection on grid points followed by
        a bracketing root finder inside one cell (``_numerics.falling_root``) is exact to round-off; the
        answer is a point where the condition was evaluated and holds (the right end of the last bracket,
        within ``1e-13 + 4 u |eps|`` of the crossing).

        Parameters
        ----------
        target : float
            The delta to reach.
        extra : callable or None, default None
            A non-increasing error term ``extra(eps)`` (float or 1-element array) added to ``delta_disc``;
            ``numerical_error`` itself takes a fast scalar path.
        eps_min : float, default -1.0
            The smallest epsilon returned.

        Returns
        -------
        float
            The smallest such ``eps`` (up to the tolerance, on the safe side), ``eps_min`` if the condition
            holds there, or ``inf``.

        Raises
        ------
        PrecisionError
            If the condition evaluates to NaN (``tightdp._numerics.falling_root``).
        """
        if extra is None or extra == self.numerical_error:
            use_err = extra is not None

            def scalar(e: float) -> float:
                d, err = self._scalar_terms(e)
                return d + err - target if use_err else d - target

            g = scalar
        else:  # any other non-increasing error term: generic (vector) evaluation, root finder inside the cell
            use_err = False
            term = extra

            def g(e: float) -> float:
                return float(self.delta_disc(e)[0]) + float(term(e)) - target

        if g(eps_min) <= 0:
            return eps_min
        xs = self.x
        # g is non-increasing: locate the cell on grid indices, then solve inside it
        lo_i = int(np.searchsorted(xs, eps_min, side="right"))
        hi_i = xs.size - 1
        first = self._first_grid_point_below(target, use_err, lo_i) if extra is None or use_err else None
        if first is not None and first > lo_i and g(float(xs[first])) <= 0 < g(float(xs[first - 1])):
            hi_i = first  # the vector scan's cell, confirmed by the scalar arithmetic at both of its ends
        elif g(float(xs[-1])) > 0 or lo_i > hi_i or g(float(xs[hi_i])) > 0:
            return math.inf
        elif g(float(xs[lo_i])) <= 0:
            hi_i = lo_i
        else:  # g(xs[lo_i]) > 0 >= g(xs[hi_i]): the first grid point where the condition holds
            hi_i = falling_index(lambda i: g(float(xs[i])) <= 0, lo_i, hi_i)
        hi = float(xs[hi_i])
        lo = eps_min if hi_i == 0 or float(xs[hi_i - 1]) < eps_min else float(xs[hi_i - 1])
        if g(lo) <= 0:
            return lo
        if extra is None or (use_err and self.tilt == 0.0):  # (use_err is False for a custom extra)
            # inside one cell delta_disc = A - B e^(eps - ref) and the error term is constant:
            # solve in closed form, and accept only if both sides check out: g <= 0 at the answer (1e-13 to the
            # safe side) and g > 0 just below it, so the crossing is bracketed by two evaluations whatever the
            # rounding of A + c - target did to the closed form (else the bracketing root finder decides)
            ref, a, b = self._scalar_suffix(lo)
            const = self._scalar_terms(lo)[1] if use_err else 0.0
            num = a + const - target
            if num > 0.0 and b > 0.0:
                e = ref + math.log(num / b)
                below = max(lo, e - 1e-13)
                if lo <= e <= hi and e + 1e-13 <= hi and g(e + 1e-13) <= 0 and (below == lo or g(below) > 0):
                    return e + 1e-13
        return falling_root(g, lo, hi, xtol=1e-13)


def merge_tails(parts: Iterable[tuple[tuple[CouplingTail, ...], int]]) -> tuple[CouplingTail, ...]:
    """Sum the counts of ``coupling_tails`` entries ``(count, v, b, p, a, dsq)`` (``parts``: ``(tails, c)``
    pairs, each entry's count multiplied by ``c``); equal parameters share one entry.

    Parameters
    ----------
    parts : iterable of (tuple of CouplingTail, int)
        Each term's ``coupling_tails`` and how many times it is composed.

    Returns
    -------
    tuple of CouplingTail
        The merged entries.

    Raises
    ------
    ValueError
        If an entry does not have six fields.
    """
    acc: dict[tuple[float, float, float, float, float], int] = {}
    for tails, c in parts:
        for n, *par in tails:
            v, b, p, a, dsq = par
            key = (v, b, p, a, dsq)
            acc[key] = acc.get(key, 0) + int(n) * int(c)
    return tuple((n, *key) for key, n in acc.items())


def _tail_coupling_shift(hoeff: float, tails: Iterable[CouplingTail], eta: float) -> float:
    """``t`` with ``P(sum D_i > t + mean) <= eta`` (and the same for ``-D``) for a coupling whose variables
    have the log-MGF bound ``s^2 r^2 / 8 + W(s)`` (``hoeff = sum r^2``), ``W`` from ``coupling_tails``.

    Each entry ``(n, v, b, p, a, dsq)`` stands for ``n`` independent steps discretised with a rare wide
    tail (``tightdp.pld.discretise_coarse_tail``): ``W_step(s) = v phi(|s| b) / b^2 +
    p exp(|s| a) (exp(s^2 dsq / 8) - 1)`` with ``phi(x) = e^x - 1 - x``. Chernoff: ``P(sum D - mean > t)
    <= exp(s^2 H / 8 + W(s) - s t)`` for every ``s > 0``, so ``t(s) = (s^2 H / 8 + W(s) + log(1/eta)) / s``
    is valid for every ``s``; the smallest over a grid of ``s`` below the Hoeffding optimum is returned,
    rounded up by ``1e-12`` relative (the sums are of a few positive terms).
    """
    L = math.log(1.0 / eta)
    H = max(hoeff, 1e-300)
    s0 = math.sqrt(8.0 * L / H)
    ss = s0 * np.geomspace(0.2, 1.0, 64)
    W = np.zeros_like(ss)
    with np.errstate(over="ignore", invalid="ignore"):
        for n, v, b, p, a, dsq in tails:
            x = ss * b
            phi = np.expm1(x) - x + 4.0 * _U * (np.exp(x) + x)  # rounded up
            W += n * (v * phi / (b * b) + p * np.exp(ss * a) * np.expm1(ss * ss * dsq / 8.0))
        t = (ss * ss * H / 8.0 + W + L) / ss
    t = t[np.isfinite(t)]
    if t.size == 0:
        return math.inf
    return float(np.min(t)) * (1.0 + 1e-12)

"""FFT composition of discretised privacy losses, with every error term accounted for.

Composition adds independent PRVs, so the PLD of a composition is the
convolution of the PLDs (001 Sec. 4-5; 003 Alg. 1). We compute it on a window
of ``N`` grid points with a circular FFT: self-composition by powering the
spectrum and heterogeneous composition by products (001 Sec. 5.5).

Two numerical devices keep the answer certified:

* **Exponential tilting.** Every discretised PLD ``w`` is replaced by
  ``w_lam(y) = w(y) exp(lam y) / M(lam)``; tilting commutes with
  convolution, so the composition is ``w(y) = w_lam(y) exp(log_norm - lam y)``.
  With ``lam`` at the saddle point of the epsilon of interest, the part of the
  distribution that decides ``delta(eps)`` carries O(1) tilted mass, so FFT
  round-off (absolute, about 1e-16 of the total mass) stays negligible relative
  to ``delta`` even for ``delta = 1e-30``.
* **Chernoff windows.** The circular FFT computes the distribution of the sum
  modulo the period. The window ``[lo, hi]`` is chosen from the exact cumulant
  generating functions of the discretised PLDs (001 Sec. 7, Chernoff bound) so
  that the tilted mass outside it is at most ``tau`` on each side; that mass is
  both what wraps around (aliasing) and what the window misses, and the bounds
  add or subtract it.

The FFT round-off itself is bounded a priori: each spectrum coefficient of a
probability vector is computed with absolute error at most
``gamma = 5 u log2 N`` and ``|a^c - b^c| <= (|a| + gamma)^c - |a|^c`` for
``|a - b| <= gamma``; by Parseval the l1 error of the result is at most the l2
norm of the spectrum error (plus the inverse transform's own rounding).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy import fft as sfft

from .._numerics import falling_root, geometric_suffix
from ..errors import GridTooLargeError
from .discretise import DiscretisedLoss

__all__ = [
    "ComposedPLD",
    "compose",
    "convolution_power",
    "saddle_tilt",
    "chernoff_epsilon",
    "chernoff_window",
    "merge_tails",
]

_U = np.finfo(float).eps / 2  # unit round-off
#: the largest composition window (points); a pass near it holds about 200 bytes per point (13 GB, README)
_MAX_POINTS = 1 << 26
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

    ``x_i = offset + i * h`` are loss values (mean-preserving shifts included).
    """

    h: float
    offset: float
    tilted: np.ndarray
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
    coupling_tails: tuple = ()
    #: bound on the round-off of any one entry of ``tilted`` (``float_error`` bounds their sum); ``None``:
    #: no better bound than ``float_error``
    pointwise_error: float | None = None
    #: errors of the composed inputs themselves (``pld.hierarchy``: blocks composed by FFT), tilted units of
    #: ``tilted``, charged on top of this composition's own round-off: ``input_error`` in l1 only (the
    #: blocks' window), ``input_round_off = (l1, entrywise)`` bounded both ways (the blocks' round-off)
    input_error: float = 0.0
    input_round_off: tuple = (0.0, 0.0)

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
        cached = self.__dict__.get("_delta_error_factor")
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
    def x(self) -> np.ndarray:
        """Loss values of the grid (computed once; treat as read-only)."""
        x = self.__dict__.get("_x")
        if x is None:
            x = self.offset + self.h * np.arange(self.tilted.size)
            x.flags.writeable = False
            self.__dict__["_x"] = x
        return x

    def coupling_shift(self, eta: float) -> float:
        """``t`` with ``P(S - S~ > t) <= eta`` (and the same for ``S~ - S``).

        Hoeffding for independent differences of ranges ``r_i`` (003 Lemma 5.3),
        plus the accumulated bound on the mean mismatch.
        """
        if self.hoeffding_sq == 0.0 and not self.coupling_tails:  # no coupling (dominance-based)
            return float(self.mean_error)
        if not self.coupling_tails:
            return float(math.sqrt(0.5 * self.hoeffding_sq * math.log(1.0 / eta)) + self.mean_error)
        return _tail_coupling_shift(self.hoeffding_sq, self.coupling_tails, eta) + float(self.mean_error)

    def numerical_error(self, eps) -> np.ndarray:
        """Bound on how much aliasing, window truncation and FFT round-off can move
        ``delta_disc(eps')`` for any ``eps' >= eps`` (untilted: ``exp(log_norm - tilt eps)``),
        plus the rounding of the suffix sums behind ``delta_disc`` (``4 N u`` times the mass above)."""
        eps = np.asarray(eps, float)
        flat = np.atleast_1d(eps)
        fft = np.exp(np.minimum(self.log_norm - self.tilt * flat, 700.0)) * self.delta_error_factor
        A, _ = self._suffix_at(flat)
        return (fft + 4.0 * _U * self.tilted.size * A).reshape(eps.shape)

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
    def _sums(self):
        """``(A, S)``, one O(N) pass each: ``A_j = sum_{i >= j} w(x_i)`` and
        ``S_j = sum_{i >= j} w(x_i) exp(-(x_i - x_j))`` (so ``S_j = w(x_j) + e^-h S_(j+1)``; both
        have a trailing 0; ``tightdp._numerics.geometric_suffix``). ``delta_disc(e) = A_j - S_j exp(e - x_j)`` with ``x_j`` the first grid
        point above ``e``, where ``exp(e - x_j)`` is in ``[e^-h, 1)``: no overflow at any epsilon.

        Rounding: ``A_j`` is a sum of at most ``N`` non-negative terms (error ``<= N u A_j``); the
        recursion for ``S_j`` rounds a product and a sum per step, and ``e^-h`` once, so term ``i``
        carries at most ``3 (i - j + 1) u`` relative error (``<= 3 N u S_j`` in all, ``S_j <= A_j``):
        ``numerical_error`` charges ``4 N u A_j``.
        """
        cached = self.__dict__.get("_sums_cache")
        if cached is None:
            with np.errstate(over="ignore", under="ignore"):
                a = self.tilted * np.exp(np.minimum(self.log_norm - self.tilt * self.x, 700.0))
            rev = a[::-1]
            A = np.append(np.cumsum(rev)[::-1], 0.0)
            S = np.append(geometric_suffix(a, math.exp(-self.h)), 0.0)
            cached = (A, S)
            self.__dict__["_sums_cache"] = cached
        return cached

    def _suffix_at(self, eps: np.ndarray):
        """``(A_j, S_j * exp(eps - x_j))`` for each ``eps`` (``x_j`` the first grid point above it)."""
        A, S = self._sums()
        x = self.x
        j = np.searchsorted(x, eps, side="right")
        inside = j < x.size
        jj = np.minimum(j, x.size - 1)
        with np.errstate(over="ignore", under="ignore"):
            Be = np.where(inside, S[jj] * np.exp(np.minimum(eps - x[jj], 700.0)), 0.0)
        return np.where(inside, A[jj], 0.0), Be

    def delta_disc(self, eps) -> np.ndarray:
        """``sum_{x_i > eps} w(x_i) (1 - exp(eps - x_i))`` for each ``eps`` (finite part only)."""
        eps = np.atleast_1d(np.asarray(eps, float))
        A, Be = self._suffix_at(eps)
        return np.maximum(A - Be, 0.0)

    def _first_grid_point_below(self, target: float, use_err: bool, start: int) -> int | None:
        """The first grid index ``i >= start`` with ``delta_disc(x_i) (+ numerical_error(x_i)) <= target``,
        from one vector pass over the grid (``None``: none, or a grid too small or too large to bother: on
        a long grid the bisection's few scalar evaluations are cheaper than a pass, and the two cached
        arrays would add 16 bytes a point to the largest compositions). The same
        arithmetic as ``_scalar_terms`` up to the last ulp of ``exp``: ``solve_epsilon`` confirms the
        cell with the scalar terms before it uses it, and bisects as before where they disagree."""
        n = self.tilted.size
        if not 64 <= n <= _VECTOR_SCAN_MAX or start >= n - 1:
            return None
        key = "_grid_g_err" if use_err else "_grid_g"
        vals = self.__dict__.get(key)
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

    def solve_epsilon(self, target: float, extra=None, *, eps_min: float = -1.0) -> float:
        """Smallest ``eps >= eps_min`` with ``delta_disc(eps) + extra(eps) <= target``.

        ``extra`` is a non-increasing function of ``eps`` (error terms). Returns
        ``inf`` when the window ends before the condition is met. ``delta_disc``
        is continuous and non-increasing, so bisection on grid points followed by
        a bracketing root finder inside one cell (``_numerics.falling_root``) is exact to round-off; the
        answer is a point where the condition was evaluated and holds (the right end of the last bracket,
        within ``1e-13 + 4 u |eps|`` of the crossing).
        """
        if extra is None or extra == self.numerical_error:
            use_err = extra is not None

            def g(e: float) -> float:
                d, err = self._scalar_terms(e)
                return d + err - target if use_err else d - target
        else:  # any other non-increasing error term: generic (vector) evaluation, root finder inside the cell
            use_err = False
            g = lambda e: float(self.delta_disc(e)[0]) + float(extra(e)) - target
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
        else:
            while hi_i - lo_i > 1:  # invariant: g(xs[lo_i]) > 0 >= g(xs[hi_i])
                mid = (lo_i + hi_i) // 2
                if g(float(xs[mid])) <= 0:
                    hi_i = mid
                else:
                    lo_i = mid
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


def merge_tails(parts) -> tuple:
    """Sum the counts of ``coupling_tails`` entries ``(count, v, b, p, a, dsq)`` (``parts``: ``(tails, c)``
    pairs, each entry's count multiplied by ``c``); equal parameters share one entry."""
    acc: dict = {}
    for tails, c in parts:
        for n, *par in tails:
            key = tuple(par)
            acc[key] = acc.get(key, 0) + int(n) * int(c)
    return tuple((n, *key) for key, n in acc.items())


def _tail_coupling_shift(hoeff: float, tails, eta: float) -> float:
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


def _tilted_weights(d: DiscretisedLoss, tilt: float) -> np.ndarray:
    """``pmf * exp(tilt * y)``, normalised to sum 1 (no logs needed when ``tilt == 0``).

    Cached on ``d`` for the two most recent tilts (the window search, the moments and the FFT of
    one composition all need the same vector); the returned array is read-only.
    """
    cache = d.__dict__.setdefault("_tilted_cache", {})
    w = cache.get(tilt)
    if w is not None:
        return w
    if tilt == 0.0:
        w = d.pmf / d.pmf.sum()
    else:
        with np.errstate(divide="ignore"):
            lw = np.log(d.pmf) + tilt * d.grid
        w = np.exp(lw - lw.max())
        w /= w.sum()
    w.flags.writeable = False
    if len(cache) >= 2:
        cache.pop(next(iter(cache)))
    cache[tilt] = w
    return w


def _term_moments(d: DiscretisedLoss, tilt: float) -> tuple[float, float]:
    """Mean and variance of one tilted term (cached on ``d`` per tilt)."""
    cache = d.__dict__.setdefault("_moment_cache", {})
    out = cache.get(tilt)
    if out is None:
        w = _tilted_weights(d, tilt)
        g = d.grid
        # einsum, not BLAS dot: these only choose windows' thetas and tilts, and a threaded dot
        # stalls for milliseconds on mid-sized vectors when the machine is loaded
        mu = float(np.einsum("i,i->", w, g))
        c = g - mu
        out = (mu, float(np.einsum("i,i,i->", w, c, c)))
        if len(cache) >= 8:
            cache.pop(next(iter(cache)))
        cache[tilt] = out
    return out


def _moments(terms, tilt):
    """Mean and variance of the tilted composition (exact, on the unshifted grid)."""
    m = v = 0.0
    for d, c in terms:
        mu, var = _term_moments(d, tilt)
        m += c * mu
        v += c * var
    return m, v


def chernoff_epsilon(terms: Sequence[tuple[DiscretisedLoss, int]], delta: float) -> tuple[float, float]:
    """``(eps_guess, tilt)``: where ``delta(eps)`` is decided and the tilt that centres the FFT there.

    A normal approximation of the composition gives the Chernoff point
    ``m + sqrt(2 v log(1/delta))`` and the tilt ``sqrt(2 log(1/delta) / v)``.
    Only the accuracy of the answer depends on this choice, never its
    validity; the accountant re-centres if the answer falls outside the window.
    """
    m, v = _moments(terms, 0.0)
    shift = sum(c * d.shift for d, c in terms)
    if v <= 0:
        return m + shift, 0.0
    z = math.sqrt(2.0 * math.log(1.0 / delta))
    guess = m + shift + z * math.sqrt(v)
    # a bounded loss (atoms, Laplace) cannot exceed the sum of its largest atoms: aim inside that range,
    # where the saddle-point tilt is finite (beyond it the tilt would run off to its cap)
    top = sum(c * (float(d.grid[np.flatnonzero(d.pmf > 0)[-1]]) + d.shift) for d, c in terms if np.any(d.pmf > 0))
    if guess >= m + shift + 0.999 * (top - m - shift):  # only then would the tilt run off to its cap
        guess = m + shift + 0.9 * max(top - m - shift, 0.0)
    return guess, saddle_tilt(terms, guess)


def saddle_tilt(terms: Sequence[tuple[DiscretisedLoss, int]], eps: float) -> float:
    """``theta >= 0`` whose tilted composition has mean ``eps`` (0 if ``eps`` is below the mean)."""
    shift = sum(c * d.shift for d, c in terms)
    target = eps - shift
    mean = lambda th: sum(c * d.d_log_mgf(th) for d, c in terms)
    if mean(0.0) >= target:
        return 0.0
    hi = 1.0
    while mean(hi) < target and hi < 1e4:
        hi *= 4.0
    if mean(hi) < target:
        return hi
    return falling_root(lambda th: target - mean(th), 0.0, hi, xtol=1e-4, rtol=1e-4)


def _cgf(terms, theta):
    return sum(c * d.log_mgf(theta) for d, c in terms)


#: the window search's theta grid, relative to the normal-theory optimum (np.geomspace costs 0.2 ms a call)
_WINDOW_THETAS = np.geomspace(1e-3, 1.5, 20)
_WINDOW_THETAS.flags.writeable = False


def _window(terms, tilt, tau):
    """``[lo, hi]`` (unshifted grid units) with tilted mass <= tau outside on each side (Chernoff).

    The exact CGF is evaluated on a geometric grid of ``theta`` around the
    normal-theory optimum; any ``theta`` gives a valid bound, the search only
    makes the window tighter.
    """
    K0 = _cgf(terms, tilt)
    _, v = _moments(terms, tilt)
    base = math.sqrt(2.0 * math.log(1.0 / tau) / max(v, 1e-300))
    # heavy-tailed losses (rare large steps) want a much smaller theta than the variance suggests
    ths = base * _WINDOW_THETAS
    both = np.concatenate([ths, -ths])  # one pass over the blocks for both sides
    k_up = np.zeros(both.size)
    for d, c in terms:
        k_up += c * d.log_mgf_upper(tilt + both)
    with np.errstate(invalid="ignore", over="ignore"):
        vals = (k_up - K0 - math.log(tau)) / np.abs(both)
    th_up = _argmin_theta(vals[: ths.size], ths)
    th_dn = _argmin_theta(vals[ths.size :], ths)
    k_up, k_dn = sum(c * d.log_mgf_many((tilt + th_up, tilt - th_dn)) for d, c in terms)
    hi = (float(k_up) - K0 - math.log(tau)) / th_up
    lo = -(float(k_dn) - K0 - math.log(tau)) / th_dn
    return lo, hi, K0


def chernoff_window(terms: Sequence[tuple[DiscretisedLoss, int]], tilt: float, tau: float) -> tuple[float, float]:
    """``(lo, hi)`` in loss units (shifts included) outside which the ``tilt``-tilted composition has
    at most ``tau`` mass on each side (Chernoff bounds from the exact CGFs): the window ``compose``
    would use. For planning (grid sizes); ``compose`` computes and charges its own window."""
    terms = [(d, int(c)) for d, c in terms if c > 0 and d.mass > 0]
    if not terms:
        raise ValueError("nothing to compose")
    lo, hi, _ = _window(terms, tilt, tau)
    shift = sum(c * d.shift for d, c in terms)
    return lo + shift, hi + shift


def _argmin_theta(vals: np.ndarray, thetas: np.ndarray) -> float:
    """``|theta|`` at the smallest finite value (the first theta if none is finite)."""
    i = int(np.argmin(np.where(np.isfinite(vals), vals, np.inf)))
    return float(abs(thetas[i]))


def _pick_theta(terms, tilt, thetas, objective):
    """The theta (returned as ``|theta|``) minimising ``objective`` on cheap block upper bounds of the CGF.

    Only the choice of theta uses the block bounds; the caller evaluates the exact
    CGF at the chosen theta, so the resulting bound is exact for that theta.
    """
    k_up = np.zeros(thetas.size)
    for d, c in terms:
        k_up += c * d.log_mgf_upper(tilt + thetas)
    with np.errstate(invalid="ignore", over="ignore"):
        vals = objective(k_up, thetas)
    return _argmin_theta(vals, thetas)


def _tail_masses(terms, tilt, K0, bot, top):
    """Chernoff bounds on the tilted mass below ``bot`` and above ``top`` (a wide geometric grid of theta)."""
    m, v = _moments(terms, tilt)
    v = max(v, 1e-300)
    th_hi = np.geomspace(1e-2, min(1e4, max(1.0, 4.0 * max(top - m, 0.0) / v)), 24)
    th_lo = np.geomspace(1e-2, min(1e4, max(1.0, 4.0 * max(m - bot, 0.0) / v)), 24)
    a = _pick_theta(terms, tilt, th_hi, lambda k, th: k - K0 - th * top)
    b = _pick_theta(terms, tilt, -th_lo, lambda k, th: k - K0 - th * bot)
    with np.errstate(over="ignore"):
        t_hi = math.exp(min(_cgf(terms, tilt + a) - K0 - a * top, 0.0))
        t_lo = math.exp(min(_cgf(terms, tilt - b) - K0 + b * bot, 0.0))
    return t_lo, t_hi


#: self-compositions up to this count power the spectrum by repeated squaring, beyond it by exp(c log phi)
_SQUARING_MAX = 1 << 12


def _powers(phi, mag, gamma, c):
    """``phi^c``, ``(|phi| + gamma)^c`` and ``|phi|^c`` (the last two for the round-off bound of ``compose``).

    ``phi^c`` is computed only where ``c log|phi| > -700``; elsewhere it is set to 0 and so is
    ``|phi|^c``, which keeps ``(|phi| + gamma)^c - |phi|^c >= |exact^c - 0|`` a valid error bound
    there (``|exact| <= |phi| + gamma``). Exactly zero coefficients never reach a logarithm.
    For ``c <= _SQUARING_MAX`` the power is formed by repeated squaring: every computed product is
    ``xy (1 + e)`` with ``|e| <= sqrt(5) u`` (Brent, Percival, Zimmermann 2007), and by induction the
    computed ``phi^c`` is ``phi^c prod (1 + e_j)^(n_j)`` with ``sum n_j = c - 1``, a relative error
    below ``(1 + sqrt(5) u)^(c - 1) - 1 < 4 c u``; no intermediate underflows, because every
    ``|phi|^m`` with ``m <= c`` is at least ``min(1, |phi|^c) > e^-700`` (``|phi| <= 1 + gamma``).
    Beyond it ``exp(c log phi)`` errs by about ``c u (pi + |log|phi||)`` relative. ``compose`` charges
    ``(4 c + 800) u (|phi| + gamma)^c`` per powered term, which covers both.
    """
    if c == 1:
        return phi, mag + gamma, mag
    with np.errstate(divide="ignore", under="ignore"):
        lb = c * np.log(mag + gamma)  # mag + gamma > 0
        lm = c * np.log(mag)  # -inf where mag == 0 (c > 0: no inf * 0)
        b_ = np.exp(np.where(lb > -745.0, lb, -np.inf))
    live = lm > -700.0
    e_ = np.zeros_like(mag)
    pw = np.zeros_like(phi)
    if not np.any(live):
        return pw, b_, e_
    e_[live] = np.exp(lm[live])
    all_live = bool(live.all())
    ph = phi if all_live else phi[live]
    if c <= _SQUARING_MAX:
        out, base, e = None, ph, c
        while True:
            if e & 1:
                out = base.copy() if out is None else out * base
            e >>= 1
            if not e:
                break
            base = base * base
    else:
        out = np.exp(c * np.log(ph))
    if all_live:
        return out, b_, e_
    pw[live] = out
    return pw, b_, e_


#: compositions of at most this many steps, with at most this many multiply-adds, are convolved directly;
#: longer ones too while their repeated squaring stays below ``_DIRECT_MANY_OPS`` (small lattices: pure DP,
#: randomized response, whose deep tails the FFT's absolute round-off would hide)
_DIRECT_MAX_STEPS = 8
_DIRECT_MAX_OPS = 5e8  # about 0.1 s of np.convolve
_DIRECT_MANY_OPS = 3e7  # a few milliseconds: beyond it the FFT is faster


def _power_plan(size: int, c: int) -> float:
    """Multiply-adds of ``c``-fold self-convolution of a ``size``-vector by repeated squaring."""
    ops, base, acc, e = 0.0, size, 0, c
    while e:
        if e & 1:
            if acc:
                ops += float(acc) * base
                acc += base - 1
            else:
                acc = base
        e >>= 1
        if e:
            ops += float(base) * base
            base = 2 * base - 1
    return ops


def convolution_power(
    base: np.ndarray, c: int, g_base: float = 0.0, *, floor: float = 0.0
) -> tuple[np.ndarray, float, int]:
    """``base`` (non-negative) convolved with itself ``c`` times by repeated squaring: ``(out, g, lead)``.

    Every entry of a convolution of non-negative vectors is a sum of non-negative products,
    computed with a relative error of at most ``(m + 2) u`` for ``m`` terms per sum (Higham,
    Accuracy and Stability, Sec. 3.1); a product of vectors with relative error counts ``g_x, g_y``
    has ``g_x + g_y`` plus its own rounding, so the counts add through the squarings (Lemma 3.3):
    every computed entry is within a factor ``1 +- g / (1 - g)`` of the exact power of the vector
    ``base`` stands for, if ``base`` itself is within ``g_base``. Underflow aside: an entry below the
    smallest normal float has an absolute error of up to a few ``2^-1074`` per product.

    ``floor > 0`` trims, after every product, the entries at both ends below ``floor`` times the
    largest entry (their mass, at most ``floor`` times the vector's size per trim, is the caller's to
    charge); ``lead`` is the number of leading entries trimmed (``out[i]`` is entry ``i + lead``).
    """
    out, g_out, lead_out = None, 0.0, 0
    lead = 0
    e = int(c)
    while e:
        if e & 1:
            if out is None:
                out, g_out, lead_out = base, g_base, lead
            else:
                g_out += g_base + (min(out.size, base.size) + 2) * _U
                out = np.convolve(out, base)
                lead_out += lead
                if floor > 0.0:
                    out, cut = _trim(out, floor)
                    lead_out += cut
        e >>= 1
        if e:
            g_base = 2.0 * g_base + (base.size + 2) * _U
            base = np.convolve(base, base)
            lead *= 2
            if floor > 0.0:
                base, cut = _trim(base, floor)
                lead += cut
    return out, g_out, lead_out


def _trim(v: np.ndarray, floor: float) -> tuple[np.ndarray, int]:
    """``v`` without the entries at both ends below ``floor * max(v)``, and how many leading ones went."""
    keep = np.flatnonzero(v >= floor * float(v.max()))
    if keep.size == 0:  # an all-zero vector (everything underflowed): nothing to trim against
        return v, 0
    return v[keep[0] : keep[-1] + 1], int(keep[0])


def _compose_direct(live, h, shift, inf_mass, truncated, hoeff, mean_err, total_count, tv, up_rel, low_factor):
    """The composition by direct convolution, or ``None`` when too many steps or too long.

    Every entry of a convolution of non-negative vectors is a sum of non-negative products,
    computed with a *relative* error of at most ``(m + 2) u / (1 - (m + 2) u)`` for ``m`` terms
    per sum (Higham, Accuracy and Stability, Sec. 3.1), so a few steps need neither the FFT's
    absolute round-off nor tilting nor a window: one step (``k = 1``) is its own pmf exactly,
    and delta far below the FFT's round-off (1e-12 at k = 1, say) keeps full relative precision.
    A step repeated ``c`` times is powered by repeated squaring; a product of vectors with relative
    errors ``g_x, g_y`` has ``g_x + g_y`` plus its own rounding, so the counts add up as in Higham's
    Lemma 3.3 (``g / (1 - g)`` at the end). The rounding is charged as a relative mass error
    (``up_rel``, ``low_factor``); there is no aliasing and no window truncation.
    """
    ops, n = 0.0, 0
    for d, c in live:
        ops += _power_plan(d.pmf.size, c)
        if n:
            ops += float(n) * (c * (d.pmf.size - 1) + 1)
        n = n + c * (d.pmf.size - 1) + (0 if n else 1)
    if ops > (_DIRECT_MAX_OPS if total_count <= _DIRECT_MAX_STEPS else _DIRECT_MANY_OPS):
        return None
    out, g_out = None, 0.0
    log_norm = 0.0
    for d, c in live:
        mass = float(d.pmf.sum())
        log_norm += c * math.log(mass)
        # the sum behind ``mass`` and the division
        power, g_power, _ = convolution_power(d.pmf / mass, c, (d.pmf.size + 1) * _U)
        if out is None:
            out, g_out = power, g_power
        else:
            g_out += g_power + (min(out.size, power.size) + 2) * _U
            out = np.convolve(out, power)
    g = g_out / (1.0 - g_out)
    up = (1.0 + up_rel) * (1.0 + g) - 1.0
    low = low_factor * (1.0 - g)
    start = sum(c * d.start for d, c in live)
    out = np.maximum(out, 0.0)
    return ComposedPLD(
        h=h,
        offset=start * h + shift,
        tilted=out,
        tilt=0.0,
        log_norm=log_norm,
        infinity_mass=inf_mass,
        truncated_mass=truncated,
        hoeffding_sq=hoeff,
        mean_error=mean_err,
        alias_mass=0.0,
        float_error=0.0,
        compositions=total_count,
        tv_error=tv,
        up_rel=up,
        low_factor=low,
    )


def compose(
    terms: Sequence[tuple[DiscretisedLoss, int]],
    *,
    tilt: float = 0.0,
    tau: float = 1e-13,
    window: tuple[float, float] | None = None,
    size: int | None = None,
) -> ComposedPLD:
    """Compose ``count`` copies of each discretised loss (all on the same mesh ``h``).

    ``window`` fixes the loss range (the Fourier accountant's ``[-L, L]``);
    otherwise it comes from Chernoff bounds at level ``tau``. The tilted mass
    outside the window is bounded either way and reported as ``alias_mass``.
    """
    terms = [(d, int(c)) for d, c in terms if c > 0]
    if not terms:
        raise ValueError("nothing to compose")
    h = terms[0][0].h
    if any(abs(d.h - h) > 1e-15 * h for d, _ in terms):
        raise ValueError("all discretised losses must share one mesh")
    total_count = sum(c for _, c in terms)
    shift = sum(c * d.shift for d, c in terms)
    # 1 - prod (1 - p)^c without cancellation (a mass of 1e-18 at +inf must not round to 0)
    inf_mass = (
        -math.expm1(sum(c * math.log1p(-min(d.infinity_mass, 1.0 - 1e-16)) for d, c in terms))
        if all(d.infinity_mass < 1.0 for d, _ in terms)
        else 1.0
    )
    truncated = min(1.0, sum(c * d.truncated_mass for d, c in terms))
    hoeff = sum(c * d.coupling_range**2 for d, c in terms)
    tails = merge_tails([(d.coupling_tails, c) for d, c in terms])
    mean_err = sum(c * d.mean_error for d, c in terms)
    tv = sum(c * d.tv_error for d, c in terms)
    # computed = exact (1 + e), |e| <= r per term: exact <= computed / (1 - r)^c and >= computed / (1 + r)^c
    up_rel = math.expm1(-sum(c * math.log1p(-d.rel_error) for d, c in terms))
    low_factor = math.exp(-sum(c * math.log1p(d.rel_error) for d, c in terms))
    live = [(d, c) for d, c in terms if d.mass > 0]
    if not live:
        return ComposedPLD(
            h,
            0.0,
            np.zeros(1),
            0.0,
            -math.inf,
            inf_mass,
            truncated,
            hoeff,
            mean_err,
            0.0,
            0.0,
            total_count,
            tv,
            up_rel,
            low_factor,
            tails,
        )

    if window is None:
        direct = _compose_direct(
            live, h, shift, inf_mass, truncated, hoeff, mean_err, total_count, tv, up_rel, low_factor
        )
        if direct is not None:
            return replace(direct, coupling_tails=tails) if tails else direct
        lo, hi, K0 = _window(live, tilt, tau)
        j0 = math.floor(lo / h) - 1
        n = sfft.next_fast_len(max(16, math.ceil(hi / h) + 2 - j0), real=True)
        alias = 2.0 * tau
    else:
        K0 = _cgf(live, tilt)
        lo, hi = window[0] - shift, window[1] - shift  # window is given in loss values
        j0 = math.floor(lo / h + 0.5)
        n = int(size) if size is not None else sfft.next_fast_len(math.ceil((hi - lo) / h) + 1, real=True)
        # bound the tilted mass outside [j0 h, (j0 + n - 1) h] by Chernoff
        t_lo, t_hi = _tail_masses(live, tilt, K0, j0 * h, (j0 + n - 1) * h)
        alias = min(2.0, t_hi + t_lo)
    if n > _MAX_POINTS:
        raise GridTooLargeError(
            f"the composition window would need {n:.3g} grid points (mesh {h:.3g}, "
            f"{(n * h):.3g} loss units wide): epsilon is too large for this eps_error; "
            "loosen eps_error"
        )

    gamma = 5.0 * _U * math.log2(n)
    spec = None
    abs_bound = None  # product of (|phi| + gamma)^c
    abs_exact = None  # product of |phi|^c
    for d, c in live:
        w = _tilted_weights(d, tilt)
        # index j holds grid value (start + j) h; the composed index m then holds
        # (sum_i c_i start_i + m) h, re-aligned to the window below
        if w.size <= n:
            vec = np.zeros(n)
            vec[: w.size] = w
        else:  # wrap around the period
            vec = np.bincount(np.arange(w.size) % n, weights=w, minlength=n)
        phi = sfft.rfft(vec)
        mag = np.abs(phi)
        pw, b_, e_ = _powers(phi, mag, gamma, c)
        spec = pw if spec is None else spec * pw
        abs_bound = b_ if abs_bound is None else abs_bound * b_
        abs_exact = e_ if abs_exact is None else abs_exact * e_
    out = sfft.irfft(spec, n)
    base = sum(c * d.start for d, c in live)
    out = np.roll(out, -((j0 - base) % n))
    # computing phi^c as exp(c log phi) errs by about c u (pi + |log|phi||) relative; live entries have
    # |c log|phi|| <= 745, so (4 c + 800) u per powered term covers it (c = 1 is not powered)
    powered = sum(1 for _, c in live if c > 1)
    diff = (abs_bound - abs_exact) + (4.0 * total_count + 800.0 * powered) * _U * abs_bound
    weights = np.full(diff.size, 2.0)
    weights[0] = 1.0
    if n % 2 == 0:
        weights[-1] = 1.0
    float_err = math.sqrt(float(np.sum(weights * diff * diff))) + gamma * float(np.sum(weights * np.abs(spec)))
    # one entry: irfft's i-th output is (1/n) sum_j w_j Re(X_j e^(...)), so the spectrum's errors move it by at
    # most (1/n) sum w diff; the inverse transform's own rounding is at most its l2 error, gamma ||x||_2
    # = gamma ||X||_2 / sqrt(n) (Parseval)
    point_err = (
        float(np.sum(weights * diff)) / n + gamma * math.sqrt(float(np.sum(weights * np.abs(spec) ** 2)) / n)
    ) * (1.0 + 1e-6)
    # true masses are >= 0, so clipping can only reduce the (already bounded) error
    out = np.maximum(out, 0.0)
    offset = j0 * h + shift
    log_norm = K0 + tilt * shift
    return ComposedPLD(
        h=h,
        offset=offset,
        tilted=out,
        tilt=tilt,
        log_norm=log_norm,
        infinity_mass=inf_mass,
        truncated_mass=truncated,
        hoeffding_sq=hoeff,
        mean_error=mean_err,
        alias_mass=alias,
        float_error=float_err,
        compositions=total_count,
        tv_error=tv,
        up_rel=up_rel,
        low_factor=low_factor,
        coupling_tails=tails,
        pointwise_error=min(point_err, float_err),
    )

"""Adaptive composition of epsilon-bounded-range mechanisms, certified at both ends by one dynamic program over
the accumulated privacy loss (``adaptive_bounded_range_epsilon``; used by ``tightdp.tuning.selection_epsilon``).

**Why.** Composing the pair that dominates every epsilon-BR pair (``BoundedRangeLoss``) lets each step choose its
worst two-point pair ``T_t`` *after* seeing its own output; an analyst only chooses ``t`` from what came before.
For 1000 exponential mechanisms at epsilon 0.1 the composed dominating pair (and the Renyi bound) give 8.86 while
the truth is about 8.31 (Dong, Durfee & Rogers 2020 show adaptive and non-adaptive optima differ and give the
adaptive optimum as a recursion, which this module evaluates with certified rounding).

**The recursion.** Every epsilon-BR pair is dominated by some ``T_t`` (``tightdp.mechanisms.selection``, step
(1)): losses ``(1 - t) eps`` and ``-t eps`` with P-mass ``p_t`` on the first. Dominance survives adaptive
composition step by step (each step is a post-processing of its ``T_t`` given the past), so the adaptive
composition of ``k`` epsilon-BR mechanisms is dominated by the composition of ``T_(t_i)`` with ``t_i`` any
function of the past outputs. Its hockey-stick divergence at ``eps'`` is ``V_k(-eps')`` where, with the
accumulated loss ``x`` as the state (the payoff depends on the outputs only through the summed loss, so a
best analyst needs no more),

    ``V_0(x) = (1 - e^(-x))_+``,  ``V_m(x) = sup_t [p_t V_(m-1)(x + (1 - t) eps) + (1 - p_t) V_(m-1)(x - t eps)]``.

``V_m`` is non-decreasing in ``x`` and convex in ``a = e^(-x)`` (for a fixed strategy ``E_P[(1 - a e^(-S))_+]``
is convex in ``a``; a supremum of convex functions is convex).

**Upper end.** A grid of mesh ``h = eps / N`` in ``x``, cells ``[t_j, t_(j+1)] = [j/N, (j+1)/N]``. For ``t`` in
cell ``j`` the two losses lie between grid neighbours (``A1 h <= (1 - t) eps <= A0 h``, ``B1 h <= -t eps <= B0 h``);
by convexity in ``a`` the value at an off-grid point is at most the chord in ``a`` of the grid values, whose
weights split each atom between its neighbours keeping its P- and Q-mass. So the step's value at ``t`` is at most
``f(t) = <pi(t), v>``: ``pi(t)`` the four split P-masses, ``v`` the (upper) grid values at ``x + (B1, B0, A1, A0) h``.
At the cell's ends ``pi`` is ``T_(t_j)`` and ``T_(t_(j+1))`` (grid-aligned); at its middle ``t_m`` the split masses
``pi(t_m)``. Write ``pi(t) = chord(t) + d(t)``, the chord running linearly through ``pi`` at ``t_j, t_m, t_(j+1)``;
``d`` keeps both masses (so does every ``pi``), so it lies in the two-dimensional null space of ``[1; e^(-l)]``
with orthonormal basis ``n1`` (the direction of ``d`` at the first quarter) and ``n2``:

    ``f(t) <= max(f(t_j), f(t_m), f(t_(j+1))) + sup|<d, n1>| |<n1, v>| + sup|<d, n2>| |<n2, v>|``.

The suprema are certified on 16384 sub-intervals per cell: on each the four masses are products of a rising ``p_t`` and
a falling split weight, bracketed by their end values, and the chord by its end values. The first-order part of
``d`` (size ~ ``1/N``) points along ``n1``, where ``<n1, v>`` is a second difference of ``V`` (size ~ ``h``): the
cell costs second order, so a few dozen cells give three digits (a pair dominating the cell's ``T_t`` would
cost first order). Outside the window ``|x| <= X`` the grid value is replaced by a proven bound: Renyi
(Markov: ``V_m(x) <= exp((lambda - 1)(m rho(lambda) + x))``, ``rho`` = ``bounded_range_rdp``, adaptive Renyi
composition) below, ``1 - e^(-x) + e^(-x)`` times that bound at ``-x`` above (``H_a(P||Q) = 1 - a + a
H_(1/a)(Q||P)`` and swapping P and Q maps ``T_t`` to ``T_(1-t)``); the window only decides how tight the answer
is (``_window``). The answer: the chord in ``a`` between the two grid nodes that
bracket ``delta``.

**Pure DP as well** (``cap``). A step that is also ``cap``-DP is dominated by a ``T_t`` with both losses in
``[-cap, cap]``, i.e. ``t`` in ``[1 - cap / eps, cap / eps]`` (``tightdp.mechanisms.selection``, "Bounded range
and pure DP"), so the supremum runs over the cells that meet that range only (a superset of it; the Renyi tails
keep every ``t``). Permute-and-flip is ``eta``-BR and ``epsilon``-DP.

**Lower end** (``attained=True``: the exponential mechanism with any number of candidates). The same program
with ``t`` restricted to the grid ``j / N``, no rounding needed (the moves are grid multiples), ``0`` and
``1 - e^(-x)`` outside the window (``V >= E[1 - e^(-x - S)] = 1 - e^(-x)``): the exact delta of one concrete
adaptive strategy. Each ``T_t`` is the exponential mechanism's pair when a fraction ``m`` of the candidates move up
(``ExponentialMechanism.attained_pairs``); ``t`` is continuous and increasing in ``m``, so rational ``m`` (real
candidate counts) come arbitrarily close to every grid ``t``, and the strategy's delta is continuous in the
``t``'s (a finite tree of two-outcome steps). A strict margin below the computed delta therefore holds for an
attained strategy. Read off with the tangent at the last node above ``delta`` (convexity, the slope bounded by
the upper program's secant).

**Blocks**, for compositions too long for one program: ``tightdp.mechanisms._bounded_range_blocks`` turns
this program's upper values into a pair.

Floating point: every step's values are non-negative sums; the answers carry a relative margin of ``1e-9``.

"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .._accuracy import DEFAULT_REL_ERROR, REL_ERROR_FLOOR
from .._caches import register as _register_cache
from .._types import FloatArray
from ._bounded_range import _br_log_masses, bounded_range_rdp

__all__ = ["AdaptiveBoundedRange", "adaptive_bounded_range_epsilon"]

#: sub-intervals per cell for the certified suprema of the split masses' deviation from their chord
_SUBS = 16384
#: Renyi orders for the window's tail bounds
_TAIL_ORDERS = 1.0 + np.geomspace(0.01, 5000.0, 240)
#: relative margin on the computed deltas (float rounding over the program's steps)
_MARGIN = 1e-9
#: cells of the first pass (refined until the interval meets the default accuracy)
_FIRST_CELLS = 16
#: most cells of ``t`` (small compositions, whose answers sit near the support's edge, need many)
_MAX_CELLS = 256
#: most grid-cell updates (steps x cells x grid points) one answer may cost (about 3 s here)
_MAX_WORK = 4.0e8


@dataclass(frozen=True)
class AdaptiveBoundedRange:
    """The certified interval of ``count`` adaptive epsilon-BR steps at one delta.

    Parameters
    ----------
    lower : float
        Certified lower end (0 when no attained strategy was asked for).
    upper : float
        Certified upper end.
    cells : int
        The number ``N`` of cells of ``t`` (grid mesh ``epsilon / N``).
    """

    lower: float
    upper: float
    cells: int


@dataclass(frozen=True)
class _Cell:
    """One cell of ``t``: grid offsets of its four atoms ``(B1, B0, A1, A0)``, ``p_t`` at both ends, the null-space
    basis ``n1, n2`` and the certified suprema ``a1, a2`` of ``|<d(t), n_i>|``."""

    offsets: tuple[int, int, int, int]
    p_start: float
    p_end: float
    middle: tuple[float, float, float, float]
    n1: tuple[float, float, float, float]
    n2: tuple[float, float, float, float]
    a1: float
    a2: float


def _unit(v: FloatArray) -> FloatArray:
    out: FloatArray = v / float(np.linalg.norm(v))
    return out


def _sup_abs(vec: FloatArray, d_lo: FloatArray, d_hi: FloatArray) -> float:
    """``sup |<d, vec>|`` over the boxes ``d_lo <= d <= d_hi`` (one per sub-interval), with a rounding margin."""
    pos = vec[:, None] > 0
    top = np.sum(np.where(pos, vec[:, None] * d_hi, vec[:, None] * d_lo), axis=0)
    bottom = np.sum(np.where(pos, vec[:, None] * d_lo, vec[:, None] * d_hi), axis=0)
    return float(max(np.max(top), -np.min(bottom), 0.0)) * (1.0 + 1e-9) + 1e-15


@_register_cache
@lru_cache(maxsize=16)
def _cells(epsilon: float, n: int) -> tuple[_Cell, ...]:
    """The ``n`` cells of ``t`` for an epsilon-BR step on the grid of mesh ``epsilon / n`` (module docstring)."""
    h = epsilon / n
    frac = np.arange(_SUBS + 1) / _SUBS
    out = []
    for j in range(n):
        b1, b0, a1, a0 = -(j + 1), -j, n - j - 1, n - j
        ell = np.array([b1, b0, a1, a0], float) * h
        t = (j + frac) / n
        p = np.clip(np.exp(_br_log_masses(t, epsilon)[0]), 0.0, 1.0)  # p_t, rising in t
        e_a1, e_a0, e_b1, e_b0 = (math.exp(-a1 * h), math.exp(-a0 * h), math.exp(-b1 * h), math.exp(-b0 * h))
        w_hi = np.clip((e_a1 - np.exp(-(1.0 - t) * epsilon)) / (e_a1 - e_a0), 0.0, 1.0)  # falls in t
        w_lo = np.clip((e_b1 - np.exp(t * epsilon)) / (e_b1 - e_b0), 0.0, 1.0)  # falls in t
        w_hi[0], w_hi[-1], w_lo[0], w_lo[-1] = 1.0, 0.0, 1.0, 0.0
        # masses at (B1, B0, A1, A0) on each sub-interval, bracketed by monotone factors
        lo = np.stack(
            [(1 - p[1:]) * (1 - w_lo[:-1]), (1 - p[1:]) * w_lo[1:], p[:-1] * (1 - w_hi[:-1]), p[:-1] * w_hi[1:]]
        )
        hi = np.stack(
            [(1 - p[:-1]) * (1 - w_lo[1:]), (1 - p[:-1]) * w_lo[:-1], p[1:] * (1 - w_hi[1:]), p[1:] * w_hi[:-1]]
        )
        start = np.array([0.0, 1.0 - p[0], 0.0, p[0]])
        end = np.array([1.0 - p[-1], 0.0, p[-1], 0.0])
        half = _SUBS // 2  # the chord runs through the split masses at the cell's middle
        middle = np.array(
            [
                (1 - p[half]) * (1 - w_lo[half]),
                (1 - p[half]) * w_lo[half],
                p[half] * (1 - w_hi[half]),
                p[half] * w_hi[half],
            ]
        )
        knots = np.where(frac <= 0.5, 2.0 * frac, 2.0 * frac - 1.0)
        chord = np.where(
            frac <= 0.5,
            np.outer(start, 1.0 - knots) + np.outer(middle, knots),
            np.outer(middle, 1.0 - knots) + np.outer(end, knots),
        )
        chord[:, half] = middle
        chord_a, chord_b = chord[:, :-1], chord[:, 1:]
        chord_b = np.where(np.arange(_SUBS) == half - 1, middle[:, None], chord_b)
        d_lo = lo - np.maximum(chord_a, chord_b)
        d_hi = hi - np.minimum(chord_a, chord_b)
        basis = np.linalg.svd(np.vstack([np.ones(4), np.exp(-ell)]))[2][2:]
        quarter = _SUBS // 4
        d_mid = (
            np.array(
                [
                    (1 - p[quarter]) * (1 - w_lo[quarter]),
                    (1 - p[quarter]) * w_lo[quarter],
                    p[quarter] * (1 - w_hi[quarter]),
                    p[quarter] * w_hi[quarter],
                ]
            )
            - (start + middle) / 2.0
        )
        c = basis @ d_mid
        n1 = _unit(c @ basis) if float(np.linalg.norm(c)) > 0 else basis[0]
        n2 = _unit(basis[0] * float(n1 @ basis[1]) - basis[1] * float(n1 @ basis[0]))

        out.append(
            _Cell(
                offsets=(b1, b0, a1, a0),
                p_start=float(p[0]),
                p_end=float(p[-1]),
                middle=(float(middle[0]), float(middle[1]), float(middle[2]), float(middle[3])),
                n1=(float(n1[0]), float(n1[1]), float(n1[2]), float(n1[3])),
                n2=(float(n2[0]), float(n2[1]), float(n2[2]), float(n2[3])),
                a1=_sup_abs(n1, d_lo, d_hi),
                a2=_sup_abs(n2, d_lo, d_hi),
            )
        )
    return tuple(out)


@_register_cache
@lru_cache(maxsize=16)
def _tail_rdp(epsilon: float) -> FloatArray:
    out = bounded_range_rdp(epsilon, _TAIL_ORDERS)
    out.flags.writeable = False
    return out


def _tail_bound(epsilon: float, steps: int, x: FloatArray) -> FloatArray:
    """``min(1, min_lambda exp((lambda - 1)(steps rho(lambda) + x)))``: a bound on ``V_steps(x)`` (Markov on
    ``e^((lambda - 1) S)``, adaptive Renyi composition of ``rho = bounded_range_rdp``)."""
    rho = steps * _tail_rdp(epsilon)
    with np.errstate(over="ignore"):
        logs = (_TAIL_ORDERS[:, None] - 1.0) * (rho[:, None] + x[None, :])
    out: FloatArray = np.exp(np.minimum(np.min(logs, axis=0), 0.0))
    return out


def _window(epsilon: float, count: int, delta: float) -> tuple[float, float]:
    """The grid's reach ``(X_lo, X_hi)``: below ``-X_lo`` the tail bound is under ``1e-6 delta / count``; above
    ``X_hi`` lie only states that a run reaching the answer's ``x ~ -eps`` gets to as rarely (``X_hi = X_lo -
    0.8 eps``, ``eps`` from the Renyi bound). Outside the grid the proven bounds stand in, so the reach only
    decides how tight the answer is, never whether it holds."""
    x = 1.0
    while float(_tail_bound(epsilon, count, np.array([-x]))[0]) > 1e-6 * delta / count:
        x *= 1.25
    with np.errstate(divide="ignore"):
        rdp_eps = float(np.min(count * _tail_rdp(epsilon) + math.log(1.0 / delta) / (_TAIL_ORDERS - 1.0)))
    return x, max(x - 0.8 * rdp_eps, 2.0 * epsilon)


def _cell_range(n: int, cap: float) -> tuple[int, int]:
    """The cells ``j0 <= j < j1`` of ``t`` that meet ``[1 - cap, cap]`` (``cap`` as a fraction of epsilon in
    ``[1/2, 1]``; 1: every cell)."""
    j0 = min(max(math.floor((1.0 - cap) * n * (1.0 + 1e-12)), 0), n - 1)
    j1 = max(min(math.ceil(cap * n * (1.0 - 1e-12)), n), j0 + 1)
    return j0, j1


def _value_functions(
    epsilon: float, count: int, n: int, reach: tuple[int, int], cap: float = 1.0
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Grid ``x`` and the certified upper and lower ``V_count`` on it (module docstring), ``t`` restricted to the
    cells that meet ``[1 - cap, cap]``.

    Row ``r`` of the sliding windows is the grid shifted by ``r - n``: cell ``j``'s atoms ``(B1, B0, A1, A0)``
    sit on rows ``(n - 1 - j, n - j, 2n - 1 - j, 2n - j)``, so every cell is one strided view, and
    ``T_(j/N)`` (rows ``n - j`` and ``2n - j``) is shared by cells ``j - 1`` and ``j``.
    """
    h = epsilon / n
    xs = np.arange(-reach[0] - n, reach[1] + n + 1) * h
    size = xs.size
    inner = size - 2 * n
    lo_x, hi_x = xs[:n], xs[-n:]
    up = np.maximum(-np.expm1(-np.maximum(xs, 0.0)), 0.0)
    low = up.copy()
    low_floor = up[-n:].copy()
    j0, j1 = _cell_range(n, cap)
    cells = _cells(epsilon, n)[j0:j1]
    p = np.array([c.p_start for c in cells] + [cells[-1].p_end])[:, None]  # p at t = j / N, j = j0..j1
    mid = [np.array([c.middle[i] for c in cells])[:, None] for i in range(4)]
    w1 = [np.array([c.a1 * c.n1[i] for c in cells])[:, None] for i in range(4)]  # a |<n, v>| = |<a n, v>|
    w2 = [np.array([c.a2 * c.n2[i] for c in cells])[:, None] for i in range(4)]
    for m in range(1, count + 1):
        win = np.lib.stride_tricks.sliding_window_view(up, inner)
        hi_rows = win[2 * n - j0 : 2 * n - j1 - 1 if 2 * n - j1 - 1 >= 0 else None : -1]  # rows 2n - j
        lo_rows = win[n - j0 : n - j1 - 1 if n - j1 - 1 >= 0 else None : -1]  # rows n - j, j = j0..j1
        pair = p * hi_rows + (1.0 - p) * lo_rows  # T_(j/N) at every x
        f = np.maximum(pair[:-1], pair[1:])
        b1, b0, at1, at0 = lo_rows[1:], lo_rows[:-1], hi_rows[1:], hi_rows[:-1]
        np.maximum(f, mid[0] * b1 + mid[1] * b0 + mid[2] * at1 + mid[3] * at0, out=f)  # the cell's middle
        f += np.abs(w1[0] * b1 + w1[1] * b0 + w1[2] * at1 + w1[3] * at0)
        f += np.abs(w2[0] * b1 + w2[1] * b0 + w2[2] * at1 + w2[3] * at0)
        new_up = np.minimum(np.max(f, axis=0), 1.0)
        tail_lo = _tail_bound(epsilon, m, lo_x)
        tail_hi = -np.expm1(-hi_x) + np.exp(-hi_x) * _tail_bound(epsilon, m, -hi_x)
        lwin = np.lib.stride_tricks.sliding_window_view(low, inner)  # T_(j/N), 0 < j < N, on the lower values
        k0 = max(math.ceil((1.0 - cap) * n * (1.0 - 1e-12)), 1)  # the grid t inside [1 - cap, cap] and (0, 1)
        k1 = min(math.floor(cap * n * (1.0 + 1e-12)), n - 1)
        if k0 <= k1:
            lp = p[k0 - j0 : k1 - j0 + 1]
            lpair = lp * lwin[2 * n - k0 : 2 * n - k1 - 1 : -1] + (1.0 - lp) * lwin[n - k0 : n - k1 - 1 : -1]
            low = np.concatenate([np.zeros(n), np.max(lpair, axis=0), low_floor])
        else:
            low = np.concatenate([np.zeros(n), np.zeros(inner), low_floor])
        up = np.concatenate([tail_lo, new_up, np.minimum(tail_hi, 1.0)])
    return xs, up * (1.0 + _MARGIN), low * (1.0 - _MARGIN)


def _read_upper(xs: FloatArray, up: FloatArray, delta: float) -> float:
    """The epsilon where the chord in ``a = e^eps`` of the upper grid values falls to ``delta`` (the chord lies
    above the convex ``delta(a)``), computed in logs: ``eps = eps_0 + log1p(s expm1(eps_1 - eps_0))``."""
    eps = -xs[::-1]
    vals = up[::-1]  # falling in eps
    below = np.nonzero(vals <= delta)[0]
    if below.size == 0:
        return math.inf
    i = int(below[0])
    if i == 0:
        return max(float(eps[0]), 0.0)
    v0, v1 = float(vals[i - 1]), float(vals[i])
    s = min(max((v0 - delta) / (v0 - v1), 0.0), 1.0)
    return max(float(eps[i - 1]) + math.log1p(s * math.expm1(float(eps[i] - eps[i - 1]))), 0.0)


def _read_lower(xs: FloatArray, up: FloatArray, low: FloatArray, delta: float) -> float:
    """The largest epsilon whose delta is certified above ``delta``: the tangent at the last node with a lower
    value above ``delta`` (below the convex ``delta(a)``), its slope bounded by the secant of the upper and lower
    values to its left; in units of ``a_i = e^(eps_i)`` so that nothing overflows."""
    eps = -xs[::-1]
    lo, hi = low[::-1], up[::-1]
    above = np.nonzero(lo > delta)[0]
    if above.size == 0:
        return 0.0
    i = int(above[-1])
    out = max(float(eps[i]), 0.0)
    if 0 < i < eps.size - 1:
        back = -math.expm1(float(eps[i - 1] - eps[i]))  # (a_i - a_(i-1)) / a_i
        ahead = math.expm1(float(eps[i + 1] - eps[i]))  # (a_(i+1) - a_i) / a_i
        slope = max((float(hi[i - 1]) - float(lo[i])) / back, 0.0)  # times a_i: |delta'(a_i)| a_i
        reach = ahead if slope == 0.0 else min((float(lo[i]) - delta) / slope, ahead)
        out = max(float(eps[i]) + math.log1p(reach) * (1.0 - 1e-12), out)
    return out


def _work(
    epsilon: float, count: int, n: int, window: tuple[float, float], cap: float = 1.0
) -> tuple[tuple[int, int], float]:
    """Grid reach (points below and above 0) and the program's cost (steps x cells in range x grid points) at ``n``
    cells."""
    reach = (math.ceil(window[0] * n / epsilon), math.ceil(window[1] * n / epsilon))
    j0, j1 = _cell_range(n, cap)
    return reach, float(count) * (j1 - j0) * (reach[0] + reach[1] + 2 * n)


def adaptive_bounded_range_epsilon(
    epsilon: float,
    count: int,
    delta: float,
    *,
    attained: bool,
    cells: int = _MAX_CELLS,
    cap: float | None = None,
) -> AdaptiveBoundedRange | None:
    """Certified epsilon of ``count`` adaptively composed epsilon-BR mechanisms (module docstring); with ``cap``,
    of mechanisms that are also ``cap``-DP (module docstring, "Pure DP as well").

    Parameters
    ----------
    epsilon : float
        The bounded-range parameter, positive.
    count : int
        The number of mechanisms, at least 2.
    delta : float
        The delta, in ``(0, 1)``.
    attained : bool
        Whether every two-point pair ``T_t`` is attained (the exponential mechanism with any number of
        candidates): then the lower end is the program's attained strategy, else 0 (the strategy's value
        still steers the refinement: it bounds the upper end's error).
    cells : int, default 256
        The most cells of ``t``. Passes start at 16 cells and refine (second-order convergence) until the
        interval meets the default accuracy (``tightdp._accuracy``), the cells reach ``cells`` or a pass would
        cost more than about 3 s; every pass is certified and the interval is their intersection.
    cap : float or None, default None
        A pure-DP bound of every step, in ``[epsilon / 2, epsilon]`` (permute-and-flip's ``epsilon`` at its range
        ``epsilon``); ``None``: none beyond bounded range.

    Returns
    -------
    AdaptiveBoundedRange or None
        The interval (``cells``: the last pass), or ``None`` when even 16 cells would cost too much (the caller
        keeps its other bounds).

    Raises
    ------
    ValueError
        If ``epsilon`` is not positive, ``count`` is below 2, ``delta`` lies outside ``(0, 1)``, ``cap`` lies
        outside ``[epsilon / 2, epsilon]`` or is given with ``attained`` (the restricted strategy is not known to be
        attained).

    References
    ----------
    Dong, Durfee, Rogers 2020, "Optimal differential privacy composition for exponential mechanisms" (the
    adaptive optimum as a recursion over two-point pairs).
    """
    if not epsilon > 0 or not math.isfinite(epsilon):
        raise ValueError(f"epsilon must be positive and finite, got {epsilon!r}")
    if count < 2:
        raise ValueError(f"count must be at least 2, got {count!r}")
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
    frac = 1.0
    if cap is not None:
        if not 0.5 * epsilon <= cap <= epsilon:
            raise ValueError(f"cap must lie in [epsilon / 2, epsilon] = [{epsilon / 2}, {epsilon}], got {cap!r}")
        if attained:
            raise ValueError("cap restricts t to pairs not known to be attained: pass attained=False with it")
        frac = cap / epsilon
    lower, upper, used = _program(float(epsilon), int(count), float(delta), int(cells), frac)
    if used == 0:
        return None
    return AdaptiveBoundedRange(lower=lower if attained else 0.0, upper=upper, cells=used)


@_register_cache
@lru_cache(maxsize=64)
def _program(epsilon: float, count: int, delta: float, cells: int, cap: float = 1.0) -> tuple[float, float, int]:
    """``(lower, upper, cells of the last pass)`` of the refined passes (``used = 0``: none affordable)."""
    window = _window(epsilon, count, delta)
    lower, upper, used = 0.0, math.inf, 0
    n = _FIRST_CELLS
    while n <= cells:
        reach, work = _work(epsilon, count, n, window, cap)
        if work > _MAX_WORK:
            break
        xs, up, low = _value_functions(epsilon, count, n, reach, cap)
        upper, used = min(upper, _read_upper(xs, up, delta)), n
        lower = max(lower, _read_lower(xs, up, low, delta))
        width = upper - lower
        target = 2.0 * max(DEFAULT_REL_ERROR * upper, REL_ERROR_FLOOR)
        if width <= target or n == cells:
            break
        # both ends converge at second order in 1 / n: jump to the cells that should meet the target
        n = min(max(n + 4, math.ceil(n * math.sqrt(width / target) * 1.1)), cells)
    return min(lower, upper), upper, used

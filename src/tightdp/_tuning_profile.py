"""Tuning with a random number of runs bounded through one run's privacy profile (Koskela, Redberg & Wang 2024).

The procedure (Papernot & Steinke 2022, Liu & Talwar 2019) draws ``K`` from a law with probability generating
function ``f(z) = E z^K``, runs the base mechanism ``Q`` ``K`` times independently on the same data and
releases the best run under a total order of the outputs (``K = 0``: a fixed empty output). Koskela, Redberg &
Wang 2024 ("Privacy profiles for private selection", ICML, arXiv 2402.06701) bound the tuned procedure's
privacy profile ``delta_A(eps)`` directly from the base profile ``delta_Q`` through ``f``, instead of going
through Renyi DP. This module implements a bound of that kind, derived and proved below (the proof uses only
the base profile, so every input is a certified upper bound of it).

The bound (all four steps are inequalities, so certified upper inputs give a certified upper output)
-------------------------------------------------------------------------------------------------------
1. Tie-breaking: append an independent uniform coordinate to each run's output and order lexicographically.
   The base profile is unchanged (the same data-independent coordinate on both sides), the released output
   is a function of the augmented one (post-processing), and the base output law has no atoms. Writing
   ``p, p'`` for the densities of ``Q(x), Q(x')``, ``F(y) = Q(x)(<= y)``, ``F'(y) = Q(x')(<= y)``, the
   tuned output has density ``p(y) f'(F(y))`` (and the atom ``f(0)`` at the empty output, the same on both
   sides, which adds nothing to a hockey-stick divergence with ``eps >= 0``).
2. Split ``eps = eps1 + eps2`` (``eps1, eps2 >= 0``): pointwise
   ``[p f'(F) - e^eps p' f'(F')]_+ <= f'(F) [p - e^eps1 p']_+ + e^eps1 p' [f'(F) - e^eps2 f'(F')]_+``.
3. First term: ``h = [p - e^eps1 p']_+`` has mass ``delta_Q(eps1)`` and ``h <= p``; under ``p`` the value
   ``F`` is uniform on ``[0, 1]`` and ``f'`` is non-decreasing, so the integral is largest with ``h`` on the
   top quantiles: ``<= integral_{1 - delta_Q(eps1)}^1 f'(u) du = 1 - f(1 - delta_Q(eps1))``.
4. Second term: for every ``e^ >= 0`` the events ``{<= y}`` and ``{> y}`` give ``F <= e^(e^) F' + delta_Q(e^)``
   and ``1 - F' <= e^(e^) (1 - F) + delta_Q(e^)``, so ``F <= G(F')`` with
   ``G(u) = min(1, min_e^ [e^(e^) u + delta_Q(e^)], min_e^ [1 - e^(-e^) (1 - u - delta_Q(e^))])``
   (non-decreasing), hence ``f'(F) <= f'(G(F'))``; under ``p'`` the value ``F'`` is uniform, so the term is
   ``<= e^eps1 integral_0^1 [f'(G(u)) - e^eps2 f'(u)]_+ du``.

So ``delta_A(eps) <= 1 - f(1 - delta_Q(eps1)) + e^eps1 integral_0^1 [f'(G(u)) - e^(eps - eps1) f'(u)]_+ du``
for every ``eps1`` in ``[0, eps]``. ``delta_Q`` is the base profile over both orders of the neighbouring pair
(tightdp's ``delta(...)`` upper end is the larger of the remove and add directions), and any upper bound of it
on any finite set of ``e^`` keeps every step an inequality (a larger ``delta_Q`` only raises ``G`` and the first
term). For a pure ``eps0``-DP run (``delta_Q(eps0) = 0``) it gives ``(2 + eta) eps0`` for the truncated negative
binomial law, Papernot & Steinke 2022 Corollary 3; for ``K = 1`` surely (``f' = 1``) it gives ``delta_Q(eps)``.

5. Two regions (``two_region_delta``): the split of step 2 may depend on ``F(y)`` through a non-decreasing step
   function, ``eps1 = a`` where ``F <= s`` and ``b >= a`` where ``F > s``. Step 3 applies to each region apart:
   the mass of ``[p - e^a p']_+`` where ``F <= s`` is at most ``min(s, delta_Q(a))`` and lies below ``s``, so
   that part is ``<= f(s) - f(s - min(s, delta_Q(a)))``; the other part ``<= 1 - f(1 - min(1 - s,
   delta_Q(b)))``. The second term is ``p' [e^eps1(F) f'(F) - e^eps f'(F')]_+``, non-decreasing in ``F``, so
   ``F <= G(F')`` bounds it by ``integral_0^1 [e^eps1(G(u)) f'(G(u)) - e^eps f'(u)]_+ du``. A low split where
   ``f'`` is small (the first quantiles) leaves more of the second term's slack; ``s = 1`` is the one-split
   bound. ``tuned_profile_delta`` and ``tuned_profile_epsilon`` give the smaller of both.

Numerics (each rounded towards a larger bound): the integral is an upper Riemann sum on a grid ``u_0 < ... <
u_n`` (on a cell ``f'(G(u)) <= f'(G(u_{i+1}))`` and ``f'(u) >= f'(u_i)``, both monotone), with relative
margins ``1e-12`` on the cell values for floating-point error, an absolute margin for the cancellation in the
suffix sums, and the final ``delta`` raised by a relative ``1e-9``. Solving for ``eps`` at a target ``delta``
keeps only values where the bound was evaluated and found ``<= delta``, and rounds ``eps1 + eps2`` up. In step
5 each cell is put in the region of ``G(u_{i+1})`` (rounded up), the largest ``F`` it can hold.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ._types import ArrayLike, FloatArray
from ._validation import check_choice, check_count, check_real

__all__ = [
    "StoppingLaw",
    "ProfileTable",
    "tuned_profile_delta",
    "tuned_profile_epsilon",
    "certified_epsilon",
    "two_region_delta",
    "two_region_epsilon",
]

_MARGIN = 1e-9  # relative, on the final delta
_CELL = 1e-12  # relative, on each cell's values (K = 1 surely: f' = 1 exactly, none)
_ULP = 2.0**-52


@dataclass(frozen=True)
class StoppingLaw:
    """The law of the number of runs ``K``, through its probability generating function ``f(z) = E z^K``.

    Parameters
    ----------
    kind : str
        ``"fixed"`` (``K = runs`` surely), ``"poisson"`` (``mean``) or ``"negative-binomial"`` (the truncated
        negative binomial of Papernot & Steinke 2022 Def. 1: ``gamma`` in (0, 1], ``shape >= 0``; ``1`` the
        geometric law, ``0`` the logarithmic law; ``gamma = 1`` is ``K = 1`` surely and becomes ``"fixed"``).
    runs : int, optional
        ``K`` for ``"fixed"``.
    mean : float, optional
        The Poisson mean, ``> 0``.
    gamma : float, optional
        The truncated negative binomial's ``gamma`` in (0, 1].
    shape : float, optional
        The truncated negative binomial's ``eta >= 0``.

    Raises
    ------
    ValueError
        A parameter missing or out of range for ``kind`` (named).
    """

    kind: str
    runs: int | None = None
    mean: float | None = None
    gamma: float | None = None
    shape: float | None = None

    def __post_init__(self) -> None:
        check_choice("kind", self.kind, ("fixed", "poisson", "negative-binomial"))
        if self.kind == "fixed":
            object.__setattr__(self, "runs", check_count("runs", self.runs))
        elif self.kind == "poisson":
            object.__setattr__(self, "mean", check_real("mean", self.mean, low=0.0))
        else:
            g = check_real("gamma", self.gamma, low=0.0, high=1.0, high_open=False)
            object.__setattr__(self, "shape", check_real("shape", self.shape, low=0.0, low_open=False))
            object.__setattr__(self, "gamma", g)
            if g == 1.0:  # K = 1 surely
                object.__setattr__(self, "kind", "fixed")
                object.__setattr__(self, "runs", 1)

    def tail(self, d: FloatArray) -> FloatArray:
        """``1 - f(1 - d)`` for ``d`` in [0, 1] (the first term of the bound), without cancellation."""
        d = np.clip(np.asarray(d, dtype=float), 0.0, 1.0)
        out: FloatArray
        if self.kind == "fixed":
            with np.errstate(divide="ignore"):
                out = -np.expm1(float(self.runs or 1) * np.log1p(-d))
        elif self.kind == "poisson":
            out = -np.expm1(-float(self.mean or 0.0) * d)
        else:
            g, eta = float(self.gamma or 0.0), float(self.shape or 0.0)
            t = (1.0 - g) * d / g
            if eta == 0.0:
                out = np.log1p(t) / -math.log(g)
            else:
                out = -np.expm1(-eta * np.log1p(t)) / -math.expm1(eta * math.log(g))
        return out

    def derivative(self, w: FloatArray) -> FloatArray:
        """``f'(1 - w) >= 0``, the generating function's derivative at ``z = 1 - w`` (non-increasing in ``w``)."""
        w = np.clip(np.asarray(w, dtype=float), 0.0, 1.0)
        out: FloatArray
        if self.kind == "fixed":
            k = int(self.runs or 1)
            with np.errstate(divide="ignore"):
                out = np.ones_like(w) if k == 1 else k * np.exp((k - 1) * np.log1p(-w))
        elif self.kind == "poisson":
            mu = float(self.mean or 0.0)
            out = mu * np.exp(-mu * w)
        else:
            g, eta = float(self.gamma or 0.0), float(self.shape or 0.0)
            b = g + (1.0 - g) * w  # 1 - (1 - gamma) z, in [gamma, 1]
            if eta == 0.0:
                out = (1.0 - g) / (b * -math.log(g))
            else:
                log_c = math.log(eta * (1.0 - g)) - math.log(math.expm1(-eta * math.log(g)))
                out = np.exp(log_c - (eta + 1.0) * np.log(b))
        return out

    def expected_runs(self) -> float:
        """``E K = f'(1)``."""
        return float(self.derivative(np.zeros(1))[0])

    def _grid(self) -> tuple[FloatArray, FloatArray]:
        """Cell ends ``(u, w = 1 - u)`` increasing in ``u`` from 0 to 1, dense where ``f'`` varies (about
        ``1e-3`` relative per cell), near 0 and near 1; each point kept in the representation that is exact."""
        small = np.concatenate([[0.0], np.geomspace(1e-30, 0.5, 1200)])  # u near 0 / w near 1
        if self.kind == "negative-binomial":
            g = float(self.gamma or 0.0)
            n = int(min(60000, max(2000, (float(self.shape or 0.0) + 1.0) * -math.log(g) / 1e-3)))
            w_law = (np.geomspace(g, 1.0, n) - g) / (1.0 - g)
        elif self.kind == "poisson":
            n = int(min(200000, max(2000, float(self.mean or 0.0) / 1e-3)))
            w_law = np.linspace(0.0, 1.0, n)
        else:
            k = int(self.runs or 1)
            n = int(min(100000, max(2000, (k - 1) * 60.0 / 1e-3)))
            w_law = -np.expm1(np.linspace(-60.0 / max(k - 1, 1), 0.0, n))  # z = 1 - w geometric in (e^-60/(k-1), 1]
        w_law = np.clip(w_law, 0.0, 1.0)
        u_part = np.concatenate([small, 1.0 - w_law[w_law > 0.5]])
        w_part = np.concatenate([small, w_law[w_law <= 0.5]])
        u_part = np.unique(u_part[u_part <= 0.5])
        w_part = np.unique(w_part[w_part < 0.5])
        u = np.concatenate([u_part, 1.0 - w_part[::-1]])
        w = np.concatenate([1.0 - u_part, w_part[::-1]])
        return u, w


@dataclass(frozen=True)
class ProfileTable:
    """One run's certified profile prepared for the bound: the upper Riemann sum of the second term.

    ``S(t) = sum_i du_i [A_i - t B_i]_+`` (``A_i = f'(G(u_{i+1}))``, ``B_i = f'(u_i)``) with the cells sorted by
    ``A_i / B_i``: ``S(t) = SA[k] - t SB[k]``, ``k`` the first cell whose ratio exceeds ``t``.

    Parameters
    ----------
    law : StoppingLaw
        The law of ``K``.
    ratio : numpy.ndarray
        ``A_i / B_i``, sorted.
    sa, sb : numpy.ndarray
        Suffix sums of ``du_i A_i`` and ``du_i B_i`` in that order (one longer, ending in 0).
    cells : tuple of numpy.ndarray, optional
        ``(du, A, B, G(u_{i+1}))`` unsorted, for the two-region bound (``two_region_delta``).
    """

    law: StoppingLaw
    ratio: FloatArray
    sa: FloatArray
    sb: FloatArray
    cells: tuple[FloatArray, FloatArray, FloatArray, FloatArray] | None = None

    @classmethod
    def build(cls, law: StoppingLaw, eps_hat: FloatArray, delta_hat: FloatArray) -> ProfileTable:
        """The table for ``law`` and the profile points ``(eps_hat, delta_hat)`` (``delta_hat`` upper bounds)."""
        u, w = law._grid()
        # 1 - G(u) (a lower bound, rounded down): the largest of 0, 1 - e^e u - d = w - expm1(e) u - d, and
        # e^-e (w - d), over the profile points
        one_minus_g = np.zeros_like(u)
        for e, d in zip(eps_hat.tolist(), delta_hat.tolist()):
            if d >= 1.0 or e > 700.0:  # a point past e^700 adds nothing a double can hold (skipping is safe: max)
                continue
            em1 = math.expm1(e)
            np.maximum(one_minus_g, (w - em1 * u - d) - 4.0 * _ULP * (w + em1 * u + d), out=one_minus_g)
            np.maximum(one_minus_g, math.exp(-e) * (w - d) - 4.0 * _ULP * (w + d), out=one_minus_g)
        one_minus_g *= 1.0 - 1e-12
        du = np.where(u[1:] <= 0.5, u[1:] - u[:-1], w[:-1] - w[1:])
        cell = 0.0 if (law.kind == "fixed" and law.runs == 1) else _CELL
        a = law.derivative(one_minus_g[1:]) * (1.0 + cell)
        b = law.derivative(w[:-1]) * (1.0 - cell)
        keep = du > 0.0
        du, a, b = du[keep], a[keep], b[keep]
        g_top = np.minimum(1.0, 1.0 - one_minus_g[1:][keep] * (1.0 - 1e-12))  # G(u_{i+1}), rounded up
        return cls._sorted(law, du, a, b, (du, a, b, g_top))

    @classmethod
    def _sorted(
        cls,
        law: StoppingLaw,
        du: FloatArray,
        a: FloatArray,
        b: FloatArray,
        cells: tuple[FloatArray, FloatArray, FloatArray, FloatArray] | None,
    ) -> ProfileTable:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            # inf where f'(u_i) underflows to 0 or the ratio overflows (K fixed, small u_i): the cell never leaves the sum; 0 where
            # f'(G(u_{i+1})) does too: the cell adds nothing
            ratio = np.where(a > 0.0, a / b, 0.0)
        order = np.argsort(ratio, kind="stable")
        ratio, da, db = ratio[order], (du * a)[order], (du * b)[order]
        sa = np.concatenate([np.cumsum(da[::-1])[::-1], [0.0]])
        sb = np.concatenate([np.cumsum(db[::-1])[::-1], [0.0]])
        return cls(law=law, ratio=ratio, sa=sa, sb=sb, cells=cells)

    def split(self, s: float) -> tuple[ProfileTable, ProfileTable]:
        """The cells with ``G(u_{i+1}) <= s`` and the others, each as a table (``two_region_delta``)."""
        if self.cells is None:
            raise ValueError("this table keeps no cells (build it with ProfileTable.build)")
        du, a, b, g_top = self.cells
        low = g_top <= s
        return (
            self._sorted(self.law, du[low], a[low], b[low], None),
            self._sorted(self.law, du[~low], a[~low], b[~low], None),
        )

    def second_term(self, t: FloatArray) -> FloatArray:
        """An upper bound of ``integral_0^1 [f'(G(u)) - t f'(u)]_+ du`` (the upper sum and its rounding margin)."""
        t = np.asarray(t, dtype=float)
        k = np.searchsorted(self.ratio, t, side="right")
        sa, sb = self.sa[k], self.sb[k]
        with np.errstate(over="ignore", invalid="ignore"):  # t = inf (e^(eps - e1) past e^709): sb = 0, the term 0
            tsb = np.where(sb > 0.0, t * sb, 0.0)
        err = 4.0 * self.ratio.size * _ULP * (sa + tsb)
        out: FloatArray = np.maximum(sa - tsb, 0.0) + err
        return out

    def delta(self, eps: float, eps1: FloatArray, delta1: FloatArray) -> float:
        """The one-split bound at ``eps`` (at most 1), the smallest over the splits ``eps1 <= eps`` (``delta1``: their
        profile)."""
        ok = (eps1 <= eps) & (eps1 <= 700.0)  # a split past e^700 adds nothing a double can hold (as in ``build``)
        if not np.any(ok):
            return 1.0
        e1, d1 = eps1[ok], delta1[ok]
        with np.errstate(over="ignore"):
            total = self.law.tail(d1) + np.exp(e1) * self.second_term(np.exp(eps - e1))
        return float(min(1.0, float(np.min(total)) * (1.0 + _MARGIN)))

    def epsilon(self, delta: float, eps1: FloatArray, delta1: FloatArray) -> tuple[float, float]:
        """``(eps, eps1)``: the smallest ``eps1 + eps2`` (rounded up) over the splits at which the one-split bound is
        at most ``delta``, and its split (``(inf, nan)`` if none)."""
        budget = delta / (1.0 + _MARGIN) - self.law.tail(delta1)
        feasible = budget > 0.0
        if not np.any(feasible):
            return math.inf, math.nan
        e1 = eps1[feasible]
        tau = budget[feasible] * np.exp(-e1)
        finite = self.ratio[np.isfinite(self.ratio)]
        top = max(0.0, math.log(float(finite[-1])) * (1.0 + 1e-12) + 1e-300) if finite.size else 0.0
        hi = np.full(e1.shape, top)
        reachable = self.second_term(np.exp(hi)) <= tau  # cells with f'(u_i) = 0 never leave the sum
        lo = np.zeros_like(hi)
        done = self.second_term(np.exp(lo)) <= tau
        hi = np.where(done, lo, hi)
        for _ in range(64):
            mid = 0.5 * (lo + hi)
            good = self.second_term(np.exp(mid)) <= tau
            hi = np.where(good, mid, hi)
            lo = np.where(good, lo, mid)
        # hi is verified (the invariant): the bound at eps1 + hi holds; round the sum up
        total = np.where(reachable, np.nextafter(e1 + hi, math.inf), math.inf)
        j = int(np.argmin(total))
        return float(total[j]), float(e1[j])


#: thresholds ``s`` of the two-region bound: ``1 - s`` from 1e-6 to 0.95, and ``s = 1`` (one region)
_THRESHOLDS = np.append(1.0 - np.geomspace(0.95, 1e-6, 24), 1.0)


def two_region_delta(
    parts: list[tuple[float, ProfileTable, ProfileTable]], eps: float, eps1: FloatArray, delta1: FloatArray
) -> float:
    """The two-region bound at ``eps`` (module docstring, step 5; at most 1), the smallest over the thresholds of
    ``parts`` (``(s, *table.split(s))``) and the levels ``a <= b`` among ``eps1 <= eps`` (sorted increasing,
    ``delta1`` their profile)."""
    ok = (eps1 <= eps) & (eps1 <= 700.0)  # a level past e^700 adds nothing a double can hold (as in ``build``)
    if not np.any(ok):
        return 1.0
    e, d = eps1[ok], delta1[ok]
    law = parts[0][1].law
    best = math.inf
    for s_, low, high in parts:
        base = law.tail(np.full(e.shape, 1.0 - s_))
        t1 = law.tail(1.0 - s_ + np.minimum(s_, d))
        t1 = np.maximum(t1 - base, 0.0) + 4.0 * _ULP * (t1 + base)  # f(s) - f(s - m), rounded up
        with np.errstate(over="ignore"):  # e^(eps - e) past e^709 is inf: second_term answers 0 there
            ratio = np.exp(eps - e)
        g1 = t1 + np.exp(e) * low.second_term(ratio)
        g2 = law.tail(np.minimum(1.0 - s_, d)) + np.exp(e) * high.second_term(ratio)
        best = min(best, float(np.min(g2 + np.minimum.accumulate(g1))))  # a <= b: a running minimum
    return float(min(1.0, best * (1.0 + _MARGIN)))


def two_region_epsilon(table: ProfileTable, delta: float, eps1: FloatArray, delta1: FloatArray, hi: float) -> float:
    """The smallest epsilon ``<= hi`` (``hi`` already certified) at which ``two_region_delta`` is at most
    ``delta``: a bisection that keeps only evaluated, passing values."""
    if not math.isfinite(hi):
        return hi
    order = np.argsort(eps1, kind="stable")
    e, d = eps1[order], delta1[order]
    parts = [(float(s_), *table.split(float(s_))) for s_ in _THRESHOLDS]
    lo = 0.0
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        if two_region_delta(parts, mid, e, d) <= delta:
            hi = mid
        else:
            lo = mid
    return hi


def _law(
    distribution: str, *, runs: int | None, mean: float | None, gamma: float | None, shape: float | None
) -> StoppingLaw:
    check_choice("distribution", distribution, ("fixed", "poisson", "geometric", "logarithmic", "negative-binomial"))
    if distribution == "fixed":
        return StoppingLaw("fixed", runs=runs)
    if distribution == "poisson":
        return StoppingLaw("poisson", mean=mean)
    if gamma is None:
        raise ValueError(f"gamma is required for distribution={distribution!r}")
    eta = {"geometric": 1.0, "logarithmic": 0.0}.get(distribution, shape)
    if eta is None:
        raise ValueError("shape is required for distribution='negative-binomial'")
    return StoppingLaw("negative-binomial", gamma=gamma, shape=eta)


def _profile(epsilons: ArrayLike, deltas: ArrayLike) -> tuple[FloatArray, FloatArray]:
    e = np.asarray(epsilons, dtype=float)
    d = np.asarray(deltas, dtype=float)
    if e.ndim != 1 or e.size == 0 or not np.all(np.isfinite(e)) or np.any(e < 0.0):
        raise ValueError("epsilons must be a non-empty 1-D array of finite epsilons >= 0")
    if d.shape != e.shape or not np.all((d >= 0.0) & (d <= 1.0)):
        raise ValueError("deltas must be an array of deltas in [0, 1], one per epsilon")
    return e, d


def tuned_profile_delta(
    *,
    epsilon: float,
    epsilons: ArrayLike,
    deltas: ArrayLike,
    distribution: str,
    runs: int | None = None,
    mean: float | None = None,
    gamma: float | None = None,
    shape: float | None = None,
) -> float:
    """An upper bound of the tuned procedure's ``delta(epsilon)`` from one run's privacy profile.

    Every point ``(epsilons[i], deltas[i])`` must be an upper bound of the run's profile (over both orders of
    the neighbouring pair); the bound (module docstring) uses each point both as a split ``eps1`` and in the
    cumulative constraint ``G``; the smaller of the one-split and two-region (step 5) bounds.

    Parameters
    ----------
    epsilon : float
        The tuned procedure's epsilon, ``>= 0``.
    epsilons : array_like of float
        Epsilons ``>= 0`` of the run's profile (1-D).
    deltas : array_like of float
        Upper bounds of the run's ``delta`` at ``epsilons``, in [0, 1].
    distribution : str
        ``"fixed"`` (``runs``), ``"poisson"`` (``mean``), ``"geometric"``, ``"logarithmic"`` (``gamma``) or
        ``"negative-binomial"`` (``gamma`` and ``shape``).
    runs : int, optional
        ``K`` for ``"fixed"``.
    mean : float, optional
        The Poisson mean, ``> 0``.
    gamma : float, optional
        The truncated negative binomial law's ``gamma`` in (0, 1] (Papernot & Steinke 2022 Def. 1; 1: one run).
    shape : float, optional
        Its shape ``eta >= 0`` (``"negative-binomial"`` only).

    Returns
    -------
    float
        An upper bound of ``delta_A(epsilon)`` in [0, 1].

    Raises
    ------
    ValueError
        ``epsilon``, ``epsilons``, ``deltas`` or a law parameter malformed or out of range (named).

    References
    ----------
    Koskela, Redberg & Wang 2024, "Privacy profiles for private selection" (ICML; arXiv 2402.06701): the
    privacy-profile route through the generating function of ``K``; the inequality used is proved in this
    module's docstring. Papernot & Steinke 2022, Def. 1 (the truncated negative binomial law).

    Examples
    --------
    >>> import numpy as np
    >>> e = np.array([0.0, 1.0])
    >>> tuned_profile_delta(epsilon=3.0, epsilons=e, deltas=np.array([0.5, 0.0]), distribution="geometric",
    ...                     gamma=0.1) <= 1e-8
    True
    """
    eps = check_real("epsilon", epsilon, low=0.0, low_open=False)
    e, d = _profile(epsilons, deltas)
    law = _law(distribution, runs=runs, mean=mean, gamma=gamma, shape=shape)
    table = ProfileTable.build(law, e, d)
    order = np.argsort(e, kind="stable")
    parts = [(float(s_), *table.split(float(s_))) for s_ in _THRESHOLDS]
    return min(table.delta(eps, e, d), two_region_delta(parts, eps, e[order], d[order]))


def tuned_profile_epsilon(
    *,
    delta: float,
    epsilons: ArrayLike,
    deltas: ArrayLike,
    distribution: str,
    runs: int | None = None,
    mean: float | None = None,
    gamma: float | None = None,
    shape: float | None = None,
) -> float:
    """An upper bound of the tuned procedure's epsilon at ``delta`` from one run's privacy profile.

    The smallest ``eps1 + eps2`` (``eps1`` one of ``epsilons``) at which the bound of the module docstring is
    at most ``delta``, then lowered by bisection on the two-region bound (step 5); ``inf`` if none.

    Parameters
    ----------
    delta : float
        The target delta, in (0, 1).
    epsilons : array_like of float
        Epsilons ``>= 0`` of the run's profile (1-D).
    deltas : array_like of float
        Upper bounds of the run's ``delta`` at ``epsilons``, in [0, 1].
    distribution : str
        ``"fixed"``, ``"poisson"``, ``"geometric"``, ``"logarithmic"`` or ``"negative-binomial"``.
    runs : int, optional
        ``K`` for ``"fixed"``.
    mean : float, optional
        The Poisson mean, ``> 0``.
    gamma : float, optional
        The truncated negative binomial law's ``gamma`` in (0, 1] (1: one run).
    shape : float, optional
        Its shape ``eta >= 0`` (``"negative-binomial"`` only).

    Returns
    -------
    float
        A certified epsilon (rounded up), or ``inf``.

    Raises
    ------
    ValueError
        ``delta``, ``epsilons``, ``deltas`` or a law parameter malformed or out of range (named).

    References
    ----------
    Koskela, Redberg & Wang 2024 (arXiv 2402.06701), as ``tuned_profile_delta``.

    Examples
    --------
    >>> import numpy as np
    >>> tuned_profile_epsilon(delta=1e-6, epsilons=np.array([0.0, 1.0]), deltas=np.array([0.5, 0.0]),
    ...                       distribution="geometric", gamma=0.1) <= 3.0 + 1e-9
    True
    """
    dl = check_real("delta", delta, low=0.0, high=1.0)
    e, d = _profile(epsilons, deltas)
    law = _law(distribution, runs=runs, mean=mean, gamma=gamma, shape=shape)
    table = ProfileTable.build(law, e, d)
    return two_region_epsilon(table, dl, e, d, table.epsilon(dl, e, d)[0])


def certified_epsilon(
    profile: Callable[[FloatArray], FloatArray],
    law: StoppingLaw,
    delta: float,
    run_epsilon: float,
    fine_profile: Callable[[FloatArray], FloatArray] | None = None,
) -> tuple[float, float]:
    """``(epsilon, eps1)`` of the profile route for a run whose certified profile upper end is ``profile``.

    The profile is read on 121 epsilons in ``[0, 3 run_epsilon + 3]`` (``run_epsilon``: one run's epsilon at
    ``delta``, only to place the grid), the points of ``G`` and the first splits; then on 41 splits around the
    best one from ``fine_profile`` (a tighter, costlier certified profile: a split needs ``delta_Q(eps1)`` well
    below ``delta / E K``), also over the whole range when the first profile's floor reached no epsilon; last the
    two-region bound on all these levels. Every answer is certified; ``(inf, nan)`` if none.
    """
    top = 3.0 * run_epsilon + 3.0 if math.isfinite(run_epsilon) else 60.0
    grid = np.linspace(0.0, top, 121)
    d = np.clip(np.asarray(profile(grid), dtype=float), 0.0, 1.0)
    table = ProfileTable.build(law, grid, d)
    eps, e1 = table.epsilon(delta, grid, d)
    step = float(grid[1] - grid[0])
    if not math.isfinite(eps) and fine_profile is not None:
        # the coarse profile's floor is above delta / E K at every split: the splits from the fine one
        wide = np.linspace(min(run_epsilon, top) if math.isfinite(run_epsilon) else 0.0, top, 41)
        d_wide = np.clip(np.asarray(fine_profile(wide), dtype=float), 0.0, 1.0)
        eps, e1 = table.epsilon(delta, wide, d_wide)
        step = float(wide[1] - wide[0])
    if math.isfinite(eps):
        fine = np.linspace(max(0.0, e1 - 2.0 * step), e1 + step, 41)
        d_fine = np.clip(np.asarray((fine_profile or profile)(fine), dtype=float), 0.0, 1.0)
        eps_fine, e1_fine = table.epsilon(delta, fine, d_fine)
        if eps_fine < eps:
            eps, e1 = eps_fine, e1_fine
        levels, d_levels = np.concatenate([grid, fine]), np.concatenate([d, d_fine])
        eps = two_region_epsilon(table, delta, levels, d_levels, eps)
    return eps, e1

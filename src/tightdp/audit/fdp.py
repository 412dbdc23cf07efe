"""f-DP one-run auditing (Mahloujifar, Melis, Chaudhuri, "Auditing f-differential privacy in one run",
ICML 2025, arXiv 2410.22235; MMC below).

The audit game is SNJ's (``m`` canaries, each in with probability 1/2, ``r`` guesses, ``v`` right), but
the null hypothesis is "the run is f-DP" for a whole trade-off curve ``f`` instead of one
``(eps, delta)`` pair. MMC's bound on the probability of ``v`` or more right guesses is computed by a
recursion over the right guesses (their numerical procedure, the ``audit_rh_with_cap`` routine of
jax_privacy's implementation): starting from ``rho = tau v / m`` and ``eta = tau (r - v) / m`` it walks
``i = v - 1, ..., 0`` with

    eta' = max(eta, g(rho)),   rho' = min(rho + i / (r - i) (eta' - eta), 1),

where ``g(y) = f(1 - y)`` (the inverse of the "blow-up" ``y = 1 - f(x)`` for a symmetric ``f``), and
rejects f-DP at level ``tau`` when ``rho + eta > r / m`` at the end.

A smaller ``f`` (a weaker privacy claim) is harder to reject, so a certified *lower* bound on ``f`` is
the honest curve to test: rejecting it rejects every curve above it. For a ``TradeoffCurve`` the
curve is tabulated once on a grid dense at both ends of [0, 1] and evaluated as a step function
from the right (``f`` is non-increasing, so ``f(x) >= beta_lower(a_j)`` for the grid point ``a_j >= x``).

Families (``epsilon_one_run_fdp``): the bound is the largest ``eps`` whose curve is rejected,
found by a scan and a bisection like the one-run bound.

* ``"gdp"``: ``f_eps = G_mu`` with ``mu`` the GDP parameter that is exactly ``(eps, delta)``-DP
  (Dong, Roth, Su 2022, Cor. 2.13), as jax_privacy's ``epsilon_one_run_fdp``. The statement is
  "not as private as the Gaussian mechanism with (eps, delta)"; it is a lower bound on the run's
  epsilon *if the run's trade-off curve is a Gaussian one* (DP-SGD without subsampling, or a
  mu-GDP run), an assumption ``details`` states. ``details["mu_lower"]`` is the mu rejected.
* ``"eps-delta"``: ``f_eps = f_(eps, delta)``, the trade-off curve of (eps, delta)-DP itself
  (DRS Prop. 2.5); no assumption on the curve's shape.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable
from statistics import NormalDist
from typing import Any, NamedTuple

import numpy as np
from scipy import optimize

from .._caches import register as _register_cache
from .._gdp_math import gdp_log_delta
from .._types import ArrayLike, FloatArray
from .._validation import check_choice, check_real
from .one_run import ONE_RUN_ASSUMPTIONS
from .result import AuditBound, check_beta
from .scores import CanaryScores, default_guess_counts
from .scores import guess_counts as _guess_counts

__all__ = [
    "FAMILIES",
    "FdpTest",
    "epsilon_fdp_from_guesses",
    "epsilon_one_run_fdp",
    "fdp_one_run_test",
    "fdp_rejects",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_mu_for",
]

FAMILIES = ("gdp", "eps-delta")
_N = NormalDist()
_SCAN = 25
_XTOL = 1e-7
_GDP_ASSUMPTION = (
    "the run's trade-off curve is a Gaussian (mu-GDP) one: the bound says the run is not as private as "
    "the Gaussian mechanism that is (eps, delta)-DP; without that assumption use family='eps-delta'"
)


# ============================================================================== the test
def fdp_rejects(g: Callable[[float], float], *, canaries: int, guesses: int, correct: int, level: float) -> bool:
    """MMC's test: does ``correct`` right guesses out of ``guesses`` (``canaries`` canaries) reject
    "f-DP" at significance ``level``?

    Parameters
    ----------
    g : callable
        ``g(y) = f(1 - y)`` (module docstring) of the trade-off curve ``f`` tested, on [0, 1].
    canaries : int
        ``m >= 1``, the number of canaries.
    guesses : int
        ``r``, ``0 <= r <= m``, guesses made.
    correct : int
        ``v``, ``0 <= v <= r``, right guesses.
    level : float
        The significance level, in (0, 1).

    Returns
    -------
    bool
        Whether the counts reject "f-DP" at ``level``.

    Raises
    ------
    ValueError
        Counts that are not whole numbers with ``correct <= guesses <= canaries``, or ``level`` outside (0, 1).

    References
    ----------
    Mahloujifar, Melis, Chaudhuri 2024, "Auditing f-differential privacy in one run" (the recursion of the
    module docstring).
    """
    from .one_run import _check_counts

    m, r, v = _check_counts(canaries, guesses, correct)
    return _fdp_rejects(g, m, r, v, check_real("level", level, low=0.0, high=1.0))


def _fdp_rejects(g: Callable[[float], float], m: int, r: int, v: int, level: float) -> bool:
    """``fdp_rejects`` on checked arguments (the audits' inner loop)."""
    if v == 0:
        return False
    rho = level * v / m
    eta = level * (r - v) / m
    for i in range(v - 1, -1, -1):
        new = max(eta, g(rho))
        if new == eta:
            break
        rho = min(rho + (i / (r - i)) * (new - eta), 1.0)
        eta = new
    return rho + eta > r / m


def _g_gdp(mu: float) -> Callable[[float], float]:
    """``g(y) = G_mu(1 - y) = Phi(Phi^-1(y) - mu)``, rounded down by a relative 1e-12."""
    if math.isinf(mu):
        return lambda y: 1.0 if y >= 1.0 else 0.0

    def g(y: float) -> float:
        if y <= 0.0:
            return 0.0
        if y >= 1.0:
            return 1.0
        return _N.cdf(_N.inv_cdf(y) - mu) * (1.0 - 1e-12)

    return g


def _g_eps_delta(eps: float, delta: float) -> Callable[[float], float]:
    """``g(y) = f_(eps, delta)(1 - y) = max(0, 1 - delta - e^eps (1 - y), e^-eps (y - delta))``."""
    e, ei = math.exp(min(eps, 700.0)), math.exp(-min(eps, 700.0))

    def g(y: float) -> float:
        return max(0.0, 1.0 - delta - e * (1.0 - y), ei * (y - delta)) * (1.0 - 1e-12)

    return g


def _curve_grid() -> FloatArray:
    """The alphas at which a curve is tabulated: dense at both ends of [0, 1]."""
    t = np.geomspace(1e-12, 0.5, 400)
    grid: FloatArray = np.unique(np.concatenate([[0.0], t, np.linspace(0.0, 1.0, 801), 1.0 - t, [1.0]]))
    return grid


class _MemoInfo(NamedTuple):
    """``functools.lru_cache``'s ``cache_info()`` fields, for ``_CurveTabulations``."""

    hits: int
    misses: int
    maxsize: int
    currsize: int


class _CurveTabulations:
    """``g(y) = f(1 - y)`` from below for a certified ``TradeoffCurve`` (its ``beta_lower``), or for a callable
    ``beta(alpha)`` that is itself a lower bound on ``f`` (vectorised, non-increasing).

    The tabulation of a ``TradeoffCurve`` is kept for the last ``maxsize`` curves, keyed by identity (it costs a
    few hundred ms); the memo is registered with ``tightdp.clear_caches``."""

    maxsize = 8

    def __init__(self) -> None:
        self._memo: dict[int, tuple[object, Callable[[float], float]]] = {}
        self._hits = self._misses = 0

    def __call__(self, curve: Any) -> Callable[[float], float]:
        hit = self._memo.get(id(curve))
        if hit is not None and hit[0] is curve:
            self._hits += 1
            return hit[1]
        self._misses += 1
        g = _tabulate(curve)
        if hasattr(curve, "at"):
            if len(self._memo) >= self.maxsize:
                self._memo.pop(next(iter(self._memo)))
            self._memo[id(curve)] = (curve, g)
        return g

    def cache_clear(self) -> None:
        """Forget every tabulation."""
        self._memo.clear()
        self._hits = self._misses = 0

    def cache_info(self) -> _MemoInfo:
        """Hits, misses, the capacity and the number of tabulations kept."""
        return _MemoInfo(self._hits, self._misses, self.maxsize, len(self._memo))


_g_curve = _register_cache(_CurveTabulations())


def _tabulate(curve: Any) -> Callable[[float], float]:
    """``g(y) = f(1 - y)`` as a step function from below on ``_curve_grid`` (``_g_curve``)."""
    a = _curve_grid()
    if hasattr(curve, "at"):
        lo = np.asarray(curve.at(a)[0], float)
    elif callable(curve):
        lo = np.asarray(curve(a), float)
        if lo.shape != a.shape:
            raise ValueError("curve must map an array of alphas to an array of betas of the same shape")
    else:
        raise ValueError(f"curve must be a TradeoffCurve or a callable beta(alpha), got {type(curve).__name__}")
    if not np.all(np.isfinite(lo)):
        raise ValueError("curve must give finite betas in [0, 1]")
    lo = np.minimum.accumulate(np.clip(lo, 0.0, 1.0))  # non-increasing from the left: still a lower bound
    al, bl = a.tolist(), lo.tolist()
    n = len(al)

    def g(y: float) -> float:
        x = 1.0 - y
        j = bisect_left(al, x)  # first grid point >= x
        return bl[j] if j < n else 0.0

    return g


# ============================================================================== GDP conversions
def gdp_delta(eps: float, mu: float) -> float:
    """delta(eps) of mu-GDP, in log space.

    Parameters
    ----------
    eps : float
        The epsilon, >= 0.
    mu : float
        The GDP parameter, >= 0 (0 gives delta 0).

    Returns
    -------
    float
        ``Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)``, in [0, 1].

    Raises
    ------
    ValueError
        If ``eps`` or ``mu`` is negative, NaN or infinite.

    References
    ----------
    Dong, Roth, Su 2022, "Gaussian differential privacy", Cor. 2.13.
    """
    return _gdp_delta(check_real("eps", eps, low=0.0, low_open=False), check_real("mu", mu, low=0.0, low_open=False))


def _gdp_delta(eps: float, mu: float) -> float:
    """``gdp_delta`` on checked arguments: the estimate of the one mu-GDP curve (``tightdp._gdp_math``)."""
    if mu <= 0.0:
        return 0.0
    return float(np.exp(gdp_log_delta(mu, eps)))


def gdp_mu_for(eps: float, delta: float) -> float:
    """The mu whose mu-GDP curve has ``delta(eps) = delta`` exactly.

    Parameters
    ----------
    eps : float
        The epsilon, >= 0.
    delta : float
        The delta, in [0, 1].

    Returns
    -------
    float
        The mu (0 when ``delta`` is 0, ``inf`` when ``delta`` is 1 or no mu up to 1e4 reaches it).

    Raises
    ------
    ValueError
        If ``eps`` is negative or not finite, or ``delta`` is outside [0, 1].

    References
    ----------
    Dong, Roth, Su 2022, Cor. 2.13.
    """
    return _gdp_mu_for(
        check_real("eps", eps, low=0.0, low_open=False),
        check_real("delta", delta, low=0.0, low_open=False, high=1.0, high_open=False),
    )


def _gdp_mu_for(eps: float, delta: float) -> float:
    """``gdp_mu_for`` on checked arguments."""
    if delta <= 0.0:
        return 0.0
    if delta >= 1.0:
        return math.inf
    hi = 1.0
    while _gdp_delta(eps, hi) < delta:
        hi *= 2.0
        if hi > 1e4:
            return math.inf
    return float(optimize.brentq(lambda mu: _gdp_delta(eps, mu) - delta, 0.0, hi, xtol=1e-14, rtol=1e-14))


def gdp_epsilon(mu: float, delta: float) -> float:
    """epsilon(delta) of mu-GDP.

    Parameters
    ----------
    mu : float
        The GDP parameter, >= 0.
    delta : float
        The delta, in (0, 1].

    Returns
    -------
    float
        The smallest epsilon >= 0 with ``gdp_delta(epsilon, mu) <= delta`` (0 when ``delta(0) <= delta``).

    Raises
    ------
    ValueError
        If ``mu`` is negative or not finite, or ``delta`` is outside (0, 1].

    References
    ----------
    Dong, Roth, Su 2022, Cor. 2.13.
    """
    mu = check_real("mu", mu, low=0.0, low_open=False)
    delta = check_real("delta", delta, low=0.0, high=1.0, high_open=False)
    if mu <= 0.0 or _gdp_delta(0.0, mu) <= delta:
        return 0.0
    hi = 1.0
    while _gdp_delta(hi, mu) > delta:
        hi *= 2.0
    return float(optimize.brentq(lambda e: _gdp_delta(e, mu) - delta, 0.0, hi, xtol=1e-13, rtol=1e-13))


# ============================================================================== families
def _family_g(family: str, delta: float) -> Callable[[float], Callable[[float], float]]:
    """``eps -> g`` of the family's curve at ``eps`` (module docstring, Families)."""
    if family == "gdp":
        return lambda eps: _g_gdp(_gdp_mu_for(eps, delta))
    return lambda eps: _g_eps_delta(eps, delta)


def _family_epsilon(
    family_g: Callable[[float], Callable[[float], float]], m: int, r: int, v: int, level: float, floor: float
) -> float:
    """The largest eps whose curve the counts reject (scan, then bisection in the first cell not rejected)."""

    def rej(e: float) -> bool:
        return _fdp_rejects(family_g(e), m, r, v, level)

    if not rej(floor):
        return 0.0
    hi = max(1.0, 2.0 * floor)
    while rej(hi):
        floor, hi = hi, 2.0 * hi
        if hi > 700.0:
            return floor
    grid = np.linspace(floor, hi, _SCAN)
    j = next(i for i in range(1, _SCAN) if not rej(float(grid[i])))
    lo, hi = float(grid[j - 1]), float(grid[j])
    while hi - lo > _XTOL * max(1.0, lo):
        mid = 0.5 * (lo + hi)
        if rej(mid):
            lo = mid
        else:
            hi = mid
    return lo


def epsilon_one_run_fdp(
    *,
    in_scores: ArrayLike,
    out_scores: ArrayLike,
    delta: float,
    beta: float = 0.05,
    family: str = "gdp",
    guess_counts: ArrayLike | None = None,
) -> AuditBound:
    """The f-DP one-run empirical lower bound on epsilon (MMC) from the scores of one run's canaries.

    Guesses and the correction over candidate guess counts are those of ``epsilon_one_run`` (one-sided
    "in" guesses for the ``k`` top scores; Bonferroni over the candidates).

    Parameters
    ----------
    in_scores, out_scores : array_like
        Scores (higher = more likely in) of the canaries that were in and out.
    delta : float
        The delta of the claim, in (0, 1) for ``"gdp"``, [0, 1) for ``"eps-delta"``.
    beta : float
        One minus the confidence level, in (0, 1).
    family : {"gdp", "eps-delta"}
        The family of curves tested (module docstring): ``"gdp"`` assumes the run's curve is Gaussian.
    guess_counts : int or sequence of int, optional
        Candidate numbers of "in" guesses (default ``default_guess_counts(m)``).

    Returns
    -------
    AuditBound
        ``details``: the counts, the correction, the assumptions and, for ``"gdp"``, ``mu_lower``.

    Raises
    ------
    ValueError
        Empty or non-finite scores, an unknown ``family``, delta or beta out of range, or a guess count outside
        [1, m].

    References
    ----------
    Mahloujifar, Melis, Chaudhuri 2024, "Auditing f-differential privacy in one run"; Steinke, Nasr,
    Jagielski 2023 (the audit game); Dong, Roth, Su 2022, Cor. 2.13 (the GDP family).
    """
    scores = CanaryScores(in_scores=in_scores, out_scores=out_scores)
    check_choice("family", family, FAMILIES)
    d = check_real("delta", delta, low=0.0, low_open=(family == "gdp"), high=1.0)
    b = check_beta(beta)
    m = scores.canaries
    ks = default_guess_counts(m) if guess_counts is None else np.unique(np.atleast_1d(guess_counts))
    rs, vs, ts = _guess_counts(scores, ks)
    level = b / len(ks)
    fam = _family_g(family, d)
    best, arg = 0.0, None
    for j in np.argsort(-(vs / np.maximum(rs, 1))):  # most precise first: later ones rarely beat it
        if vs[j] == 0:
            continue
        e = _family_epsilon(fam, m, int(rs[j]), int(vs[j]), level, best)
        if e > best:
            best, arg = e, int(j)
    assumptions = list(ONE_RUN_ASSUMPTIONS)
    if family == "gdp":
        assumptions.append(_GDP_ASSUMPTION)
    if len(ks) > 1:
        assumptions.append("the candidate guess counts were fixed before the scores were seen")
    details: dict[str, Any] = {
        "canaries": m,
        "family": family,
        "candidates": [int(k) for k in ks],
        "level_per_candidate": level,
        "correction": f"Bonferroni over {len(ks)} candidate guess counts" if len(ks) > 1 else "none",
        "assumptions": assumptions,
    }
    if family == "gdp":
        details["mu_lower"] = _gdp_mu_for(best, d) if best > 0 else 0.0
    if arg is not None:
        details.update(
            {"guess_count": int(ks[arg]), "guesses": int(rs[arg]), "correct": int(vs[arg]), "threshold": float(ts[arg])}
        )
    return AuditBound(best, d, b, f"f-DP one-run ({family} family; Mahloujifar, Melis, Chaudhuri 2024)", details)


def epsilon_fdp_from_guesses(
    *, canaries: int, guesses: int, correct: int, delta: float, beta: float = 0.05, family: str = "gdp"
) -> AuditBound:
    """The f-DP one-run lower bound from a count of guesses fixed before the audit (MMC; no correction).

    The assumptions are those of ``epsilon_one_run_fdp``.

    Parameters
    ----------
    canaries : int
        ``m``, the number of canaries, each included independently with probability 1/2.
    guesses : int
        ``r <= m``, guesses made; fixed before the audit.
    correct : int
        ``v <= r``, right guesses.
    delta : float
        The delta of the claim, in (0, 1) for ``"gdp"``, [0, 1) for ``"eps-delta"``.
    beta : float, default 0.05
        One minus the confidence level, in (0, 1).
    family : {"gdp", "eps-delta"}
        The family of curves tested (module docstring).

    Returns
    -------
    AuditBound
        ``details``: the counts, the assumptions and, for ``"gdp"``, ``mu_lower``.

    Raises
    ------
    ValueError
        Counts that are not whole numbers with ``correct <= guesses <= canaries``, an unknown ``family``, delta
        or beta out of range.

    References
    ----------
    Mahloujifar, Melis, Chaudhuri 2024, "Auditing f-differential privacy in one run".
    """
    from .one_run import _check_counts

    m, r, v = _check_counts(canaries, guesses, correct)
    check_choice("family", family, FAMILIES)
    d = check_real("delta", delta, low=0.0, low_open=(family == "gdp"), high=1.0)
    b = check_beta(beta)
    e = _family_epsilon(_family_g(family, d), m, r, v, b, 0.0) if v > 0 else 0.0
    details: dict[str, Any] = {
        "canaries": m,
        "guesses": r,
        "correct": v,
        "family": family,
        "assumptions": list(ONE_RUN_ASSUMPTIONS) + ([_GDP_ASSUMPTION] if family == "gdp" else []),
    }
    if family == "gdp":
        details["mu_lower"] = _gdp_mu_for(e, d) if e > 0 else 0.0
    return AuditBound(e, d, b, f"f-DP one-run ({family} family; Mahloujifar, Melis, Chaudhuri 2024)", details)


class FdpTest(dict[str, Any]):
    """The outcome of testing one certified curve: ``rejected`` (bool), ``beta``, the counts and assumptions.

    A ``dict`` (JSON-ready) with attribute access to ``rejected``; built as ``dict`` is, from the entries of the
    outcome.

    Raises
    ------
    TypeError
        As ``dict`` does, for arguments that are not key/value pairs.
    """

    @property
    def rejected(self) -> bool:
        """Whether the test rejected "f-DP for the curve"."""
        return bool(self["rejected"])


def fdp_one_run_test(
    *,
    in_scores: ArrayLike,
    out_scores: ArrayLike,
    curve: Any,
    beta: float = 0.05,
    guess_counts: ArrayLike | None = None,
) -> FdpTest:
    """Test "the run is f-DP for ``curve``" at level ``beta`` with MMC's one-run test.

    A rejection says, with confidence ``1 - beta``, that the implementation violates its accounting.

    Parameters
    ----------
    in_scores, out_scores : array_like
        Scores (higher = more likely in) of the canaries that were in and out.
    curve : TradeoffCurve or callable
        A certified ``tightdp.TradeoffCurve`` (its ``beta_lower`` is tested: the weakest claim the certificate
        makes) or a vectorised callable ``beta(alpha)`` lower-bounding the claimed curve.
    beta : float, default 0.05
        One minus the confidence level, in (0, 1).
    guess_counts : int or sequence of int, optional
        Candidate numbers of "in" guesses (default ``default_guess_counts(m)``), Bonferroni-corrected.

    Returns
    -------
    FdpTest
        ``rejected``, the guess counts that rejected, the level per candidate and the assumptions.

    Raises
    ------
    ValueError
        Empty or non-finite scores, beta out of range, a guess count outside [1, m], or a ``curve`` that is
        neither a ``TradeoffCurve`` nor a callable giving finite betas of the alphas' shape.

    References
    ----------
    Mahloujifar, Melis, Chaudhuri 2024, "Auditing f-differential privacy in one run".
    """
    scores = CanaryScores(in_scores=in_scores, out_scores=out_scores)
    b = check_beta(beta)
    g = _g_curve(curve)
    m = scores.canaries
    ks = default_guess_counts(m) if guess_counts is None else np.unique(np.atleast_1d(guess_counts))
    rs, vs, _ = _guess_counts(scores, ks)
    level = b / len(ks)
    hits = [int(k) for k, r, v in zip(ks, rs, vs) if _fdp_rejects(g, m, int(r), int(v), level)]
    return FdpTest(
        rejected=bool(hits),
        beta=b,
        canaries=m,
        rejected_at_guess_counts=hits,
        candidates=[int(k) for k in ks],
        level_per_candidate=level,
        method="f-DP one-run test of the certified lower trade-off curve (Mahloujifar, Melis, Chaudhuri 2024)",
        assumptions=list(ONE_RUN_ASSUMPTIONS)
        + ["each canary's effect on the output is that of one example in the accounted run"],
    )

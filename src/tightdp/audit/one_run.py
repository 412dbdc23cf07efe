"""One-run auditing by guess counting (Steinke, Nasr, Jagielski, "Privacy auditing with one (1) training
run", NeurIPS 2023; SNJ below).

``m`` canaries are each included independently with probability 1/2; the attacker sees the trained
model and makes ``r`` guesses ("in" or "out") about the canaries, abstaining on the rest; ``v`` of the
guesses are right. If the training run is ``(eps, delta)``-DP, SNJ Thm. 5.2 (with Prop. 5.7 for
delta > 0) bound the chance of ``v`` or more right guesses by

    p(eps, delta) = P[B >= v] + 2 m delta max_{1 <= i <= v} P[v - i <= B < v] / i,
    B ~ Binomial(r, e^eps / (1 + e^eps)).

So ``p(eps, delta) <= beta`` rejects "(eps, delta)-DP" at level ``beta``; the reported lower bound is the
largest ``eps`` rejected (SNJ Alg. 1, the bisection of their Sec. 6). ``p`` grows with ``eps``: the
bound is found by a scan of ``[0, eps_0]`` (``eps_0`` the closed-form bound for delta = 0, which
``p`` only exceeds) and a bisection in the first cell where ``p > beta``; what is returned is a
point where ``p <= beta`` was evaluated, rounded down.
"""

from __future__ import annotations

import numpy as np
from scipy import special, stats

from .._types import ArrayLike, FloatArray, IntArray
from .._validation import check_count, check_real
from .result import AuditBound, check_beta
from .scores import CanaryScores, default_guess_counts
from .scores import guess_counts as _guess_counts

__all__ = ["epsilon_from_guesses", "epsilon_one_run", "one_run_p_value"]

_SCAN = 33  # scan points on [0, eps_0]
_XTOL = 1e-7

ONE_RUN_ASSUMPTIONS = (
    "each canary was included in training independently with probability 1/2 (SNJ Sec. 3)",
    "the guesses are a function of the trained model (the canaries' scores) only, not of which canaries were in",
    "the neighbouring relation is add/remove of one canary, as in the accounting",
)


def _check_counts(m: int, r: int, v: int) -> tuple[int, int, int]:
    m = check_count("canaries", m)
    r = check_count("guesses", r, minimum=0)
    v = check_count("correct", v, minimum=0)
    if r > m:
        raise ValueError(f"guesses ({r}) must be at most canaries ({m})")
    if v > r:
        raise ValueError(f"correct ({v}) must be at most guesses ({r})")
    return m, r, v


def _p_values(m: int, r: int, v: int, epsilons: ArrayLike, delta: float) -> FloatArray:
    """``p(eps, delta)`` of the module docstring at each ``eps`` of ``epsilons`` (vectorised)."""
    eps = np.atleast_1d(np.asarray(epsilons, float))
    if v == 0:
        return np.ones(eps.shape)
    q = special.expit(eps)[:, None]
    if delta == 0.0:
        out: FloatArray = np.minimum(1.0, stats.binom.sf(v - 1, r, q[:, 0]))
        return out
    x = np.arange(v + 1)[None, :]
    tail = stats.binom.sf(x - 1, r, q)  # P[B >= x], x = 0..v
    b = tail[:, v]
    i = np.arange(1, v + 1)
    gaps = (tail[:, v - i] - b[:, None]) / i[None, :]  # P[v - i <= B < v] / i
    p: FloatArray = np.minimum(1.0, b + 2.0 * m * delta * np.max(gaps, axis=1))
    return p


def one_run_p_value(*, canaries: int, guesses: int, correct: int, epsilon: float, delta: float) -> float:
    """The chance, under ``(epsilon, delta)``-DP, of ``correct`` or more right guesses out of ``guesses``.

    Parameters
    ----------
    canaries : int
        ``m >= 1``, the number of canaries, each included independently with probability 1/2.
    guesses : int
        ``r``, ``0 <= r <= m``, guesses made.
    correct : int
        ``v``, ``0 <= v <= r``, right guesses.
    epsilon : float
        The epsilon of the claim, >= 0.
    delta : float
        The delta of the claim, in [0, 1].

    Returns
    -------
    float
        The module docstring's ``p(epsilon, delta)``, in [0, 1].

    Raises
    ------
    ValueError
        Counts that are not whole numbers with ``correct <= guesses <= canaries``, or epsilon / delta out of range.

    References
    ----------
    Steinke, Nasr, Jagielski 2023, Thm. 5.2 and Prop. 5.7.
    """
    m, r, v = _check_counts(canaries, guesses, correct)
    eps = check_real("epsilon", epsilon, low=0.0, low_open=False)
    d = check_real("delta", delta, low=0.0, low_open=False, high=1.0, high_open=False)
    return float(_p_values(m, r, v, np.array([eps]), d)[0])


def _eps0(r: int, v: int, level: float) -> float:
    """The largest eps with ``P[Binomial(r, expit(eps)) >= v] <= level`` (delta = 0), or 0."""
    if v == 0:
        return 0.0
    q0 = float(stats.beta.ppf(level, v, r - v + 1))  # P[B >= v] = I_q(v, r - v + 1)
    if not q0 > 0.5:
        return 0.0
    return float(special.logit(q0)) if q0 < 1.0 else 700.0


def _epsilon(m: int, r: int, v: int, delta: float, level: float, floor: float = 0.0) -> float:
    """The one-run lower bound at significance ``level`` (0 when nothing is rejected). When ``floor`` > 0 and
    ``p(floor) > level`` the answer is at most ``floor`` and ``floor`` itself is not improved: returns 0."""
    e0 = _eps0(r, v, level)
    if e0 <= floor:
        return 0.0
    if delta == 0.0:
        # p = P[B >= v] is increasing in eps; e0 is its crossing: step down until p <= level is evaluated
        e = e0
        for _ in range(60):
            if _p_values(m, r, v, np.array([e]), 0.0)[0] <= level:
                return e
            e = e * (1 - 1e-9) - 1e-12
            if e <= 0:
                return 0.0
        return 0.0
    if floor > 0 and _p_values(m, r, v, np.array([floor]), delta)[0] > level:
        return 0.0
    grid = np.linspace(floor, e0, _SCAN)
    p = _p_values(m, r, v, grid, delta)
    bad = np.flatnonzero(p > level)
    if bad.size == 0:
        return float(e0)
    j = int(bad[0])
    if j == 0:
        return 0.0
    lo, hi = float(grid[j - 1]), float(grid[j])
    while hi - lo > _XTOL * max(1.0, lo):
        mid = 0.5 * (lo + hi)
        if _p_values(m, r, v, np.array([mid]), delta)[0] <= level:
            lo = mid
        else:
            hi = mid
    return lo


def epsilon_from_guesses(*, canaries: int, guesses: int, correct: int, delta: float, beta: float = 0.05) -> AuditBound:
    """The one-run empirical lower bound on epsilon at ``delta`` from a count of guesses (SNJ Thm. 5.2, Alg. 1).

    Parameters
    ----------
    canaries : int
        ``m``, the number of canaries, each included independently with probability 1/2.
    guesses : int
        ``r <= m``, guesses made (the attacker abstained on the other ``m - r``); fixed before the audit.
    correct : int
        ``v <= r``, right guesses.
    delta : float
        The delta of the DP claim being tested, in [0, 1).
    beta : float
        One minus the confidence level, in (0, 1).

    Returns
    -------
    AuditBound
        ``epsilon_lower``: with probability >= 1 - beta the run is not (e, delta)-DP for e < epsilon_lower.

    References
    ----------
    Steinke, Nasr, Jagielski 2023, "Privacy auditing with one (1) training run", Thm. 5.2, Alg. 1.

    Raises
    ------
    ValueError
        Counts that are not whole numbers with ``correct <= guesses <= canaries``, delta or beta out of range.
    """
    m, r, v = _check_counts(canaries, guesses, correct)
    d = check_real("delta", delta, low=0.0, low_open=False, high=1.0)
    b = check_beta(beta)
    eps = _epsilon(m, r, v, d, b)
    return AuditBound(
        eps,
        d,
        b,
        "one-run guess counting (Steinke, Nasr, Jagielski 2023, Thm. 5.2 / Alg. 1)",
        {"canaries": m, "guesses": r, "correct": v, "assumptions": list(ONE_RUN_ASSUMPTIONS)},
    )


def epsilon_one_run(
    *,
    in_scores: ArrayLike,
    out_scores: ArrayLike,
    delta: float,
    beta: float = 0.05,
    guess_counts: ArrayLike | None = None,
) -> AuditBound:
    """The one-run empirical lower bound from the scores of the ``m`` canaries of one run.

    The attacker guesses "in" for the ``k`` highest-scoring canaries (one-sided guesses, abstaining
    on the rest) for each candidate ``k`` of ``guess_counts`` (default: ``default_guess_counts(m)``, 12
    values from 1 to m/2); each candidate is tested at level ``beta / K`` (Bonferroni over the ``K``
    candidates) and the largest bound is returned. A single ``k`` fixed before the audit needs no
    correction.

    Parameters
    ----------
    in_scores, out_scores : array_like
        Scores (higher = more likely in) of the canaries that were in and out.
    delta : float
        The delta of the claim, in [0, 1).
    beta : float
        One minus the confidence level, in (0, 1).
    guess_counts : int or sequence of int, optional
        Candidate numbers of "in" guesses, each in [1, m].

    Returns
    -------
    AuditBound
        ``details``: the candidate that gave the bound, its counts, the correction and the assumptions.

    Raises
    ------
    ValueError
        Empty or non-finite scores, delta or beta out of range, or a guess count outside [1, m].

    References
    ----------
    Steinke, Nasr, Jagielski 2023, Thm. 5.2, Alg. 1.
    """
    scores = CanaryScores(in_scores=in_scores, out_scores=out_scores)
    d = check_real("delta", delta, low=0.0, low_open=False, high=1.0)
    b = check_beta(beta)
    m = scores.canaries
    ks = default_guess_counts(m) if guess_counts is None else np.unique(np.atleast_1d(guess_counts))
    rs, vs, ts = _guess_counts(scores, ks)
    return _best_over_candidates(m, rs, vs, ts, ks, d, b)


def _best_over_candidates(
    m: int, rs: IntArray, vs: IntArray, ts: FloatArray, ks: IntArray, delta: float, beta: float
) -> AuditBound:
    level = beta / len(ks)
    e0 = np.array([_eps0(int(r), int(v), level) for r, v in zip(rs, vs)])
    best, arg = 0.0, None
    for j in np.argsort(-e0):
        if e0[j] <= best:
            break
        e = _epsilon(m, int(rs[j]), int(vs[j]), delta, level, floor=best)
        if e > best:
            best, arg = e, int(j)
    details = {
        "canaries": m,
        "candidates": [int(k) for k in ks],
        "level_per_candidate": level,
        "correction": f"Bonferroni over {len(ks)} candidate guess counts"
        if len(ks) > 1
        else "none (one guess count fixed in advance)",
        "assumptions": list(ONE_RUN_ASSUMPTIONS)
        + (["the candidate guess counts were fixed before the scores were seen"] if len(ks) > 1 else []),
    }
    if arg is not None:
        details.update(
            {"guess_count": int(ks[arg]), "guesses": int(rs[arg]), "correct": int(vs[arg]), "threshold": float(ts[arg])}
        )
    return AuditBound(
        best, delta, beta, "one-run guess counting (Steinke, Nasr, Jagielski 2023, Thm. 5.2 / Alg. 1)", details
    )

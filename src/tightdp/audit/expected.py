"""What an audit of a *correct* implementation should show, from tightdp's certified trade-off curves.

A run is described by its certified trade-off curve ``f`` (``tightdp.tradeoff_curve``): with white-box
canaries that do not interfere (Dirac gradient canaries, each on its own coordinate; Nasr et al.
2023, Andrew et al. 2024) every canary is one draw from the run's neighbouring pair, so the
optimal attack's view of a canary is the likelihood-ratio statistic of that pair. In the canonical
coordinates of the trade-off curve an *out* canary's statistic is ``A ~ Uniform(0, 1)`` and an *in*
canary's has ``P(A <= a) = 1 - f(a)``; the attack guesses "in" for the ``k`` smallest. ``expected_audit``
simulates the whole audit (membership coins, statistics, guesses, the same bound and Bonferroni
correction as the real audit) ``draws`` times and reports the sample median of the bound: the value
the optimal attack reaches with probability about 1/2.

The certified curve is known to within ``[beta_lower, beta_upper]``; with common random numbers the
simulated bound is monotone in ``f`` (a lower curve puts every in canary further ahead), so the two
curves give ``(epsilon_lower, epsilon_upper)`` bracketing the median of the exact curve up to the
Monte Carlo error of the median (``details["median_rank_interval"]``: the order statistics that
bracket the true median with 95 % probability). A black-box attack (loss scores) is weaker: it
reaches at most this.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import stats

from .._types import AnyArray, ArrayLike, BoolArray, FloatArray, IntArray
from .._validation import check_choice, check_count, check_positive, check_real
from .fdp import _curve_grid, _family_epsilon, _family_g
from .one_run import _eps0, _epsilon
from .result import check_beta
from .scores import default_guess_counts

if TYPE_CHECKING:
    from ..accountants import Accountant
    from ..bounds import Bounds
    from ..tradeoff import TradeoffCurve

__all__ = ["AUDIT_METHODS", "ExpectedAudit", "canaries_needed", "expected_audit", "run_curve"]

#: the one-run audits that ``expected_audit`` can simulate
AUDIT_METHODS = ("one-run", "fdp-eps-delta", "fdp-gdp")


@dataclass(frozen=True)
class ExpectedAudit:
    """The median empirical lower bound of an optimal attack on a correct implementation.

    ``epsilon_lower`` / ``epsilon_upper``: from the certified upper / lower trade-off curve (see the module
    docstring); ``certified``: the run's certified epsilon ``Bounds`` at ``delta`` (or ``None``).

    Parameters
    ----------
    epsilon_lower : float
        The median bound of the simulated audits against the certified upper trade-off curve (the weaker attack).
    epsilon_upper : float
        The median bound against the certified lower trade-off curve (the stronger attack), >= ``epsilon_lower``.
    canaries : int
        ``m``, the canaries of the simulated audit.
    delta : float
        The delta of the audited claim.
    beta : float
        One minus the audit's confidence.
    method : str
        The audit simulated (one of ``AUDIT_METHODS``).
    certified : Bounds or None, default None
        The run's certified epsilon at ``delta``.
    details : mapping, default {}
        Draws, seed, guess counts, the median's rank interval, the attack and the curve's method.

    Raises
    ------
    ValueError
        Not raised by the constructor itself; ``expected_audit`` validates what it passes.

    References
    ----------
    Steinke, Nasr, Jagielski 2023 (one-run audit); Mahloujifar, Melis, Chaudhuri 2024 (f-DP audit).
    """

    epsilon_lower: float
    epsilon_upper: float
    canaries: int
    delta: float
    beta: float
    method: str
    certified: Bounds | None = None
    details: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The expected audit as a JSON-ready dict.

        Returns
        -------
        dict
            The fields, ``certified_epsilon`` as ``{"lower", "upper"}`` (or ``None``), ``details`` JSON-ready.
        """
        from .result import _plain

        cert = None if self.certified is None else {"lower": self.certified.lower, "upper": self.certified.upper}
        return {
            "epsilon_lower": self.epsilon_lower,
            "epsilon_upper": self.epsilon_upper,
            "canaries": self.canaries,
            "delta": self.delta,
            "beta": self.beta,
            "method": self.method,
            "certified_epsilon": cert,
            "details": _plain(dict(self.details)),
        }


def run_curve(
    *,
    curve: TradeoffCurve | None = None,
    accountant: Accountant | None = None,
    mu: float | None = None,
    noise_multiplier: float | None = None,
    sampling_rate: float | None = None,
    steps: int | None = None,
    delta: float | None = None,
) -> tuple[TradeoffCurve, Bounds | None]:
    """``(TradeoffCurve, certified epsilon Bounds or None)`` of a run given in one of four ways.

    Parameters
    ----------
    curve : TradeoffCurve, optional
        The run's certified trade-off curve.
    accountant : Accountant, optional
        A composed accountant of the run.
    mu : float, optional
        Exact mu-GDP (a Gaussian of noise multiplier ``1/mu``), > 0.
    noise_multiplier : float, optional
        DP-SGD (Poisson-subsampled Gaussian, add/remove, ``ConnectDotsAccountant``), with ``sampling_rate``
        and ``steps``.
    sampling_rate : float, optional
        The Poisson rate, in (0, 1], with ``noise_multiplier``.
    steps : int, optional
        The steps, >= 1, with ``noise_multiplier``.
    delta : float, optional
        The delta of the certified epsilon returned (``None``: none is computed).

    Returns
    -------
    tuple
        ``(TradeoffCurve, Bounds or None)``: the curve, and the certified epsilon at ``delta`` when an
        accountant describes the run and ``delta`` is given.

    Raises
    ------
    ValueError
        Not exactly one of ``curve``, ``accountant``, ``mu``, ``noise_multiplier``; ``noise_multiplier``
        without ``sampling_rate`` and ``steps``; a ``curve`` that is not a ``TradeoffCurve``; bad numbers.

    References
    ----------
    Dong, Roth, Su 2022 (trade-off curves); Koskela et al. 2020 (the PLD behind the certified curve).
    """
    from ..accountants import ConnectDotsAccountant
    from ..dpsgd import dpsgd_mechanism
    from ..mechanisms import Gaussian
    from ..tradeoff import tradeoff_curve

    given = [x is not None for x in (curve, accountant, mu, noise_multiplier)]
    if sum(given) != 1:
        raise ValueError(
            "give exactly one of curve, accountant, mu, or noise_multiplier (with sampling_rate and steps)"
        )
    if noise_multiplier is not None:
        if sampling_rate is None or steps is None:
            raise ValueError("noise_multiplier needs sampling_rate and steps")
        accountant = ConnectDotsAccountant().compose(
            dpsgd_mechanism(noise_multiplier=noise_multiplier, sampling_rate=sampling_rate), check_count("steps", steps)
        )
    elif mu is not None:
        mu = check_positive("mu", mu)
        accountant = ConnectDotsAccountant().compose(Gaussian(noise_multiplier=1.0 / mu), 1)
    if accountant is not None:
        curve = tradeoff_curve(accountant)
        return curve, (accountant.epsilon(delta) if delta is not None else None)
    if curve is None or not hasattr(curve, "at"):
        raise ValueError(f"curve must be a TradeoffCurve, got {type(curve).__name__}")
    return curve, None


def _in_statistics(curve_beta: FloatArray, grid: FloatArray, u: FloatArray) -> FloatArray:
    """``A`` with ``P(A <= a) = 1 - f(a)`` from uniforms ``u`` (``f`` tabulated non-increasing on ``grid``)."""
    f = np.minimum.accumulate(np.clip(curve_beta, 0.0, 1.0))
    # A = inf{a: f(a) <= 1 - u}; interpolate on the reversed (increasing) table
    out: FloatArray = np.interp(1.0 - u, f[::-1], grid[::-1])
    return out


def _simulate_counts(
    m: int, ks: IntArray, f_tables: Iterable[FloatArray], grid: FloatArray, draws: int, seed: int
) -> list[AnyArray]:
    """For each table: ``v`` (draws x K) right guesses among the ``k`` smallest statistics; ``r = k`` (ties have
    probability 0 for continuous tables; the simulated statistics are distinct almost surely)."""
    rng = np.random.default_rng(seed)
    member: BoolArray = rng.random((draws, m)) < 0.5
    u = rng.random((draws, m))
    out: list[AnyArray] = []
    for f in f_tables:
        a = np.where(member, _in_statistics(f, grid, u), u)
        order = np.argsort(a, axis=1, kind="stable")
        hits = np.cumsum(np.take_along_axis(member, order, axis=1), axis=1)
        out.append(hits[:, ks - 1])
    return out


def expected_audit(
    *,
    canaries: int,
    delta: float,
    beta: float = 0.05,
    method: str = "one-run",
    guess_counts: ArrayLike | None = None,
    draws: int = 101,
    seed: int = 0,
    curve: TradeoffCurve | None = None,
    accountant: Accountant | None = None,
    mu: float | None = None,
    noise_multiplier: float | None = None,
    sampling_rate: float | None = None,
    steps: int | None = None,
) -> ExpectedAudit:
    """The empirical lower bound an optimal attack on a correct implementation reaches with probability ~1/2.

    Parameters
    ----------
    canaries : int
        ``m``, canaries in the one-run audit (each in with probability 1/2).
    delta, beta : float
        The delta of the audited claim and one minus the audit's confidence.
    method : {"one-run", "fdp-eps-delta", "fdp-gdp"}
        The audit simulated (``epsilon_one_run``, ``epsilon_one_run_fdp`` with that family).
    guess_counts : sequence of int, optional
        The audit's candidate guess counts (default ``default_guess_counts(m)``; Bonferroni as in the audit).
    draws, seed : int
        Monte Carlo audits simulated and their seed.
    curve, accountant, mu, noise_multiplier, sampling_rate, steps
        The run (``run_curve``).

    Returns
    -------
    ExpectedAudit
        The median bounds of the simulated audits against the certified upper and lower curves.

    Raises
    ------
    ValueError
        Fewer than 2 canaries, an unknown ``method``, delta or beta out of range, a guess count outside
        [1, m], bad ``draws`` or ``seed``, or a run not given in exactly one way (``run_curve``).

    References
    ----------
    Steinke, Nasr, Jagielski 2023 (one-run audit); Mahloujifar, Melis, Chaudhuri 2024 (f-DP audit).
    """
    m = check_count("canaries", canaries, minimum=2)
    check_choice("method", method, AUDIT_METHODS)
    d = check_real("delta", delta, low=0.0, low_open=(method == "fdp-gdp"), high=1.0)
    b = check_beta(beta)
    draws = check_count("draws", draws)
    seed = check_count("seed", seed, minimum=0)
    tc, certified = run_curve(
        curve=curve,
        accountant=accountant,
        mu=mu,
        noise_multiplier=noise_multiplier,
        sampling_rate=sampling_rate,
        steps=steps,
        delta=d,
    )
    ks = default_guess_counts(m) if guess_counts is None else np.unique(np.atleast_1d(guess_counts)).astype(int)
    if np.any(ks < 1) or np.any(ks > m):
        raise ValueError(f"guess_counts must be in [1, {m}]")
    grid = _curve_grid()
    lo, up = tc.at(grid)
    v_up, v_lo = _simulate_counts(m, ks, (up, lo), grid, draws, seed)  # weaker attack first
    bound = _bound_fn(method, m, tuple(int(k) for k in ks), d, b)
    e_weak = np.array([bound(tuple(int(x) for x in row)) for row in v_up])  # same candidates, same correction
    e_strong = np.array([bound(tuple(int(x) for x in row)) for row in v_lo])
    med = (draws - 1) // 2
    lo_rank = max(0, int(stats.binom.ppf(0.025, draws, 0.5)) - 1)
    hi_rank = min(draws - 1, int(stats.binom.isf(0.025, draws, 0.5)))
    sw, ss = np.sort(e_weak), np.sort(e_strong)
    details = {
        "draws": draws,
        "seed": seed,
        "guess_counts": [int(k) for k in ks],
        "median_rank_interval": [float(sw[lo_rank]), float(ss[hi_rank])],
        "attack": "likelihood-ratio ordering of non-interfering white-box canaries (the optimal attack); "
        "a black-box attack reaches at most this",
        "curve": tc.method,
    }
    return ExpectedAudit(float(sw[med]), float(max(ss[med], sw[med])), m, d, b, method, certified, details)


def _bound_fn(
    method: str, m: int, ks: tuple[int, ...], delta: float, beta: float
) -> Callable[[tuple[int, ...]], float]:
    """The audit's bound as a function of the right-guess counts ``vs`` (one per candidate ``k``): the largest
    single-candidate bound at level ``beta / K``, each cached by ``(k, v)`` (many draws share them)."""
    level = beta / len(ks)
    if method == "one-run":

        def single_raw(k: int, v: int) -> float:
            return _epsilon(m, k, v, delta, level)
    else:
        fam = _family_g("gdp" if method == "fdp-gdp" else "eps-delta", delta)

        def single_raw(k: int, v: int) -> float:
            return _family_epsilon(fam, m, k, v, level, 0.0) if v > 0 else 0.0

    single = lru_cache(maxsize=None)(single_raw)
    cap = lru_cache(maxsize=None)(lambda k, v: _eps0(k, v, level))

    def bound(vs: tuple[int, ...]) -> float:
        best = 0.0
        for j in np.argsort([-(v / k) for k, v in zip(ks, vs)]):
            if method == "one-run" and cap(ks[j], vs[j]) <= best:
                continue
            best = max(best, single(ks[j], vs[j]))
        return best

    return bound


def canaries_needed(
    *,
    delta: float,
    target: float | None = None,
    fraction: float = 0.5,
    beta: float = 0.05,
    method: str = "one-run",
    candidates: Sequence[int] = (100, 200, 500, 1000, 2000, 5000, 10_000, 20_000, 50_000, 100_000),
    draws: int = 41,
    seed: int = 0,
    **run: Any,
) -> dict[str, Any]:
    """The fewest canaries (among ``candidates``) whose expected audit reaches ``target``.

    The pessimistic end (``ExpectedAudit.epsilon_lower``) must reach the target.

    Parameters
    ----------
    delta : float
        The delta of the audited claim.
    target : float, optional
        The epsilon the audit should reach, >= 0 (default ``fraction`` times the run's certified epsilon
        lower end at ``delta``).
    fraction : float, default 0.5
        The default target's fraction of the certified epsilon, in (0, 1].
    beta : float, default 0.05
        One minus the audit's confidence.
    method : {"one-run", "fdp-eps-delta", "fdp-gdp"}
        The audit simulated.
    candidates : sequence of int
        The canary counts tried, in increasing order, each >= 2.
    draws : int, default 41
        Monte Carlo audits per candidate.
    seed : int, default 0
        Their seed.
    **run
        The run keywords of ``run_curve``.

    Returns
    -------
    dict
        ``{"canaries": m or None, "target": ..., "expected": {m: epsilon_lower, ...}}`` (``None``: not reached by
        the largest candidate, or the bound stopped growing, with a ``"note"``).

    Raises
    ------
    ValueError
        ``fraction`` or ``target`` out of range, no ``target`` for a run given as a curve, a candidate below 2,
        or any error of ``expected_audit``.

    References
    ----------
    Steinke, Nasr, Jagielski 2023 (one-run audit); Mahloujifar, Melis, Chaudhuri 2024 (f-DP audit).
    """
    frac = check_real("fraction", fraction, low=0.0, high=1.0, high_open=False)
    if target is None:
        _, cert = run_curve(**run, delta=delta)
        if cert is None:
            raise ValueError("target is required when the run is given as a curve")
        target = frac * float(cert.lower)
    target = check_real("target", target, low=0.0, low_open=False)
    tc, _ = run_curve(**run)
    seen: dict[int, float] = {}
    stalled = 0
    for m in sorted(int(check_count("candidates", c, minimum=2)) for c in candidates):
        e = expected_audit(
            canaries=m, delta=delta, beta=beta, method=method, draws=draws, seed=seed, curve=tc
        ).epsilon_lower
        stalled = stalled + 1 if seen and e <= max(seen.values()) * 1.01 else 0
        seen[m] = e
        if e >= target and e > 0:
            return {"canaries": m, "target": target, "expected": seen}
        if stalled >= 2:  # the bound has stopped growing with m: more canaries will not reach the target
            return {
                "canaries": None,
                "target": target,
                "expected": seen,
                "note": f"the expected {method} bound stops growing near {max(seen.values()):.3g}: this audit "
                "cannot reach the target with more canaries (a stronger method or design is needed)",
            }
    return {"canaries": None, "target": target, "expected": seen}

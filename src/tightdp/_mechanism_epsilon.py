"""Certified intervals of selection mechanisms and discrete Gaussian vectors used alone or composed
(``selection_epsilon``, ``discrete_vector_epsilon``; public from ``tightdp.tuning`` and ``tightdp``): the upper end
the smallest of the mechanism's proven bounds, the lower end from its attained pairs."""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np
from scipy import optimize

from ._accuracy import DEFAULT_REL_ERROR, REL_ERROR_FLOOR
from ._caches import register as _register_cache
from ._types import FloatArray
from ._validation import check_count, check_delta
from .accountants import ConnectDotsAccountant
from .accountants import _rdp_math as rm
from .bounds import Bounds
from .errors import PrecisionError
from .mechanisms._bounded_range_adaptive import adaptive_bounded_range_epsilon
from .mechanisms.base import Mechanism
from .mechanisms.selection import (
    ExponentialMechanism,
    ReportNoisyMax,
    bounded_range_delta,
    bounded_range_parameters,
    bounded_range_rdp,
)

if TYPE_CHECKING:
    from .mechanisms.discrete_vector import DiscreteGaussianVector

__all__ = ["discrete_vector_epsilon", "selection_epsilon", "times"]


def times(entries: list[tuple[Mechanism, int]], k: int) -> list[tuple[Mechanism, int]]:
    """A ledger composed ``k`` times (every count multiplied by ``k``)."""
    return [(m, c * k) for m, c in entries]


#: Renyi orders for the bounded-range bound (96 orders from 1.01 to 501: a denser grid moves epsilon by <1e-3)
_BR_ORDERS = 1.0 + np.geomspace(0.01, 500.0, 96)


@_register_cache
@lru_cache(maxsize=64)
def _br_rdp(epsilon: float) -> FloatArray:
    out = bounded_range_rdp(epsilon, _BR_ORDERS)
    out.flags.writeable = False
    return out


def _single_use(epsilon: float, delta: float) -> tuple[float, float]:
    """One use: ``bounded_range_delta`` is the largest delta of every epsilon-BR pair and ``max_t`` of the pairs
    ``T_t``' curves (Dong, Durfee & Rogers 2020, Thm 3), so where it falls to ``delta`` is the exact epsilon;
    bisection on the closed form brackets it. The lower end less a margin: ``t`` is attained up to rational
    candidate fractions, and the curve is continuous in ``t``."""
    if bounded_range_delta(epsilon, 0.0) <= delta:
        return 0.0, 0.0
    lo, hi = 0.0, epsilon
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if bounded_range_delta(epsilon, mid) > delta else (lo, mid)
    return lo * (1.0 - 1e-9), hi * (1.0 + 1e-9) + 1e-15


#: offsets ``s`` of the first sweep of score gaps ``a = 1 +- s`` (``_best_gap``), up to where an output's
#: probability is about ``e^-700`` (``1400 / epsilon``, the noise scale being ``2 / epsilon``)
_GAP_SWEEP = 14
#: evaluations of the bounded refinement around the sweep's best gap
_GAP_REFINE = 12


#: the accuracy (relative, with its absolute floor) at which ``_best_gap`` ranks candidate pairs: each value is still a certified lower end, and the
#: best gap's is then recomputed at the default accuracy. At the default accuracy the hopeless gaps far in the
#: noise's tail cost the most (an epsilon of 0.02 asked to relative 1e-3 at delta 1e-15: 95 s of a search)
_SEARCH_REL_ERROR, _SEARCH_EPS_ERROR = 0.01, 0.05


def attained_lower(pair: Mechanism, count: int, delta: float, *, coarse: bool = False) -> float:
    """A certified lower end of ``count`` compositions of the exact attained pair that ``pair`` holds in floating
    point, its masses within ``pair.masses_rel_error()`` of the exact ones (the accountant pays for that:
    ``Accountant._query``; 2e-9 for a thousand steps at ``CLOSED_FORM_REL_ERROR``).

    Parameters
    ----------
    pair : Mechanism
        The attained pair (a ``FinitePair`` from closed-form probabilities).
    count : int
        Its uses.
    delta : float
        The delta.
    coarse : bool, default False
        At ``_SEARCH_REL_ERROR`` (floor ``_SEARCH_EPS_ERROR``) instead of the default accuracy (a lower end still, only further below).

    Returns
    -------
    float
        The lower end, ``>= 0``: 0 where the paid delta reaches 1, or where the accountant cannot resolve the
        pair (a ``PrecisionError``, e.g. a grid too large at an epsilon in the thousands): a search over candidate
        pairs then skips it rather than fail the whole query, and 0 is always a lower end.

    Raises
    ------
    ValueError
        If ``pair`` is not a ``Mechanism`` or ``count`` not a positive integer (from the accountant).
    """
    try:
        accountant = (
            ConnectDotsAccountant(rel_error=_SEARCH_REL_ERROR, eps_error=_SEARCH_EPS_ERROR)
            if coarse
            else ConnectDotsAccountant()
        )
        return max(0.0, accountant.compose(pair, count).epsilon_lower_end(delta))
    except PrecisionError:
        return 0.0


def _best_gap(
    family: Callable[[float], Mechanism | None], epsilon: float, count: int, delta: float
) -> tuple[float, float]:
    """``(lower end, gap)``: the largest certified lower end among a family's attained pairs at the gaps tried,
    composed ``count`` times. Every value is the certified lower end of one attained pair, so the maximum is one
    too whatever the search finds; the search only decides how good it is. A sweep of gaps ``1 +- s`` (for two
    candidates ``a`` and ``2 - a`` are the pair's two directions), then a bounded scalar search between the best
    one's neighbours. At small delta the worst gap lies far in the noise's tail, beyond the seven fixed gaps. The
    search ranks at ``_SEARCH_REL_ERROR``; the gap it picks is evaluated again at the default accuracy."""

    def lower_at(a: float, coarse: bool = True) -> float:
        pair = family(a)
        return 0.0 if pair is None else attained_lower(pair, count, delta, coarse=coarse)

    top = min(1400.0 / epsilon, 1e7) if epsilon > 0 else 1.0
    gaps = sorted({1.0 + sg * s for s in np.geomspace(0.02, max(top, 0.04), _GAP_SWEEP) for sg in (-1.0, 1.0)})
    values = [lower_at(a) for a in gaps]
    i = int(np.argmax(values))
    best, where = values[i], gaps[i]
    if best > 0.0:
        lo, hi = gaps[max(i - 1, 0)], gaps[min(i + 1, len(gaps) - 1)]
        res = optimize.minimize_scalar(
            lambda a: -lower_at(float(a)), bounds=(lo, hi), method="bounded", options={"maxiter": _GAP_REFINE}
        )
        if -float(res.fun) > best:
            best, where = -float(res.fun), float(res.x)
        best = max(best, lower_at(where, coarse=False))
    return best, where


def _attains_every_two_point_pair(mechanism: Mechanism) -> bool:
    """Whether every ``T_t`` is attained: the exponential mechanism (or Gumbel report-noisy-max) with any
    number of candidates (``ExponentialMechanism.attained_pairs``)."""
    if isinstance(mechanism, ReportNoisyMax):
        return mechanism.noise == "gumbel"
    return isinstance(mechanism, ExponentialMechanism) and mechanism.num_candidates is None


def selection_epsilon(*, mechanism: Mechanism, delta: float, count: int = 1) -> Bounds:
    """Certified epsilon of ``count`` adaptive uses of a selection mechanism (``tightdp.mechanisms.selection``).

    Upper: for bounded-range mechanisms (``bounded_range_parameters``: the exponential mechanism, permute-and-flip,
    report-noisy-max with Gumbel or exponential noise, or Laplace noise over two candidates) the Renyi bound
    ``count * sup_t D_lambda(T_t)`` (``bounded_range_rdp``)
    converted at ``delta`` and the adaptive dynamic program over two-point pairs
    (``tightdp.mechanisms._bounded_range_adaptive``); where these leave the interval wider than the default
    accuracy (and for every other mechanism), also the connect-the-dots accountant, which composes a
    bounded-range run as block pairs of its program (``tightdp.accountants._adaptive_groups``); and a mechanism's
    second dominating ledger where it has one (``upper_ledger``: Laplace report-noisy-max over known candidates,
    ``d`` Laplace steps per use); the smallest (``details["upper_method"]``). Lower: the largest certified lower bound of the mechanism's attained pairs
    composed ``count`` times (``attained_pairs()``; permute-and-flip and Laplace or exponential report-noisy-max
    also search the two candidates' score gap at this delta and count, ``attained_pair_at``, the gap found in
    ``details["lower_gap"]``) and, for the exponential mechanism with any number of candidates, the program's
    attained adaptive strategy (0 where none is known, said in ``details["lower_method"]``).

    Parameters
    ----------
    mechanism : Mechanism
        The selection mechanism (any tightdp ``Mechanism``).
    delta : float
        The delta, in (0, 1).
    count : int, default 1
        The number of adaptive uses, a positive whole number.

    Returns
    -------
    Bounds
        Certified ``lower <= upper``; ``details`` name both methods.

    Raises
    ------
    ValueError
        ``delta`` outside ``(0, 1)``, ``count`` not a positive integer, ``mechanism`` not a Mechanism.
    """
    delta = check_delta("delta", delta)
    count = check_count("count", count)
    if not isinstance(mechanism, Mechanism):
        raise ValueError(f"mechanism must be a tightdp Mechanism, got {mechanism!r}")
    upper, method = math.inf, ""
    pairs = getattr(mechanism, "attained_pairs", lambda: ())()
    lower, lower_method = 0.0, "none known: 0"
    for pair in pairs:
        lo = attained_lower(pair, count, delta)
        if lo > lower:
            lower, lower_method = lo, f"attained pair {pair.describe()}"
    families = getattr(mechanism, "attained_pair_families", None)
    if families is not None:
        searched = families()  # (a family may decline single gaps: ``_best_gap`` scores those 0)
    else:  # one family, or none where it declines the central gap (Gumbel noise, epsilon 0)
        at = getattr(mechanism, "attained_pair_at", None)
        searched = () if at is None or at(1.0) is None else (("two candidates at score gap a", at),)
    lower_gap = None
    for name, family in searched:
        lo, gap = _best_gap(family, float(getattr(mechanism, "epsilon", 0.0)), count, delta)
        if lo > lower:
            lower, lower_gap = lo, gap
            lower_method = f"attained pair: {name}, a = {gap:.6g} (searched at this delta)"
    adaptive = None
    params = bounded_range_parameters(mechanism)
    eta, cap = params if params is not None else (0.0, 0.0)
    if eta > 0:
        eps_rdp, order = rm.epsilon_from_rdp(orders=_BR_ORDERS, rdp=count * _br_rdp(eta), delta=delta)
        upper, method = float(eps_rdp), f"bounded-range Renyi bound (order {order:g}, range {eta:.6g})"
        if count > 1:
            every_t = _attains_every_two_point_pair(mechanism)
            adaptive = adaptive_bounded_range_epsilon(
                eta, count, delta, attained=every_t, cap=cap if cap < eta else None
            )
            if adaptive is not None and adaptive.upper < upper:
                upper, method = adaptive.upper, f"adaptive bounded-range dynamic program ({adaptive.cells} cells)"
            if adaptive is not None and adaptive.lower > lower:
                lower = adaptive.lower
                lower_method = (
                    f"attained adaptive strategy: two-point pairs T_(j/{adaptive.cells}) chosen from the loss so "
                    "far (exponential mechanism, any number of candidates)"
                )
        else:
            below, above = _single_use(eta, delta)
            if above < upper:
                upper, method = above, "the bounded-range envelope's closed form (Dong, Durfee & Rogers 2020, Thm 3)"
            if _attains_every_two_point_pair(mechanism) and below > lower:
                lower, lower_method = (
                    below,
                    "attained pair T_t at the t that attains the envelope (any number of candidates)",
                )
    # the accountant where the above leaves the interval wide: each step's own pair (which wins for permute-and-flip
    # at large epsilon) and, when the program was out of reach, block pairs of it
    if upper - lower > 2.0 * max(DEFAULT_REL_ERROR * upper, REL_ERROR_FLOOR) or not math.isfinite(upper):
        acc = ConnectDotsAccountant().compose(mechanism, count)
        if adaptive is not None:  # the program ran over every step: its blocks would only repeat it
            per_step = acc.per_step_upper(delta)
            if per_step < upper:
                upper, method = per_step, "dominating pair (connect-the-dots)"
        else:
            up = acc.epsilon(delta)
            if float(up.upper) < upper:
                upper, method = float(up.upper), "dominating pair (connect-the-dots)"
                if "adaptive_group" in up.details:  # the steps composed as block pairs of their program
                    method = f"connect-the-dots: {up.details['adaptive_group']}"
    ledger = getattr(mechanism, "upper_ledger", lambda: None)()
    if ledger:  # a second dominating ledger (Laplace report-noisy-max over d known candidates)
        ledger_up = float(ConnectDotsAccountant().compose([(m, c * count) for m, c in ledger]).epsilon(delta).upper)
        if ledger_up < upper:
            upper = ledger_up
            method = "dominating ledger: " + ", ".join(f"{c} x {m.describe()}" for m, c in ledger) + " per use"
    # a pure-DP mechanism (``pure_epsilon``: every selection mechanism here, module docstrings): count uses are
    # (count epsilon)-DP exactly, whatever delta, which the numerical ends above may miss by their discretisation
    # (permute-and-flip at 1.0, 3 uses: 3.0023)
    pure = mechanism.pure_epsilon()
    if pure is not None and pure > 0.0:
        total = math.nextafter(count * pure, math.inf)  # the float product rounded up
        if total < upper:
            upper, method = total, f"pure DP: {count} uses of a {pure:.6g}-DP mechanism"
    lower = min(lower, upper)
    return Bounds(
        lower=lower,
        estimate=upper,
        upper=upper,
        details={"upper_method": method, "lower_method": lower_method, "count": count}
        | ({} if lower_gap is None else {"lower_gap": lower_gap}),
    )


def discrete_vector_epsilon(*, mechanism: DiscreteGaussianVector, delta: float, count: int = 1) -> Bounds:
    """Certified epsilon of ``count`` releases of a ``DiscreteGaussianVector``.

    Upper the smaller of its proven dominating ledger (``upper_ledger``) composed ``count`` times and its
    continuous Gaussian envelopes (``continuous_envelopes``, which win where the L2 cap binds), lower the largest
    certified lower end of its attained directions (``attained_ledgers``), each composed ``count`` times.

    Parameters
    ----------
    mechanism : DiscreteGaussianVector
        The vector mechanism.
    delta : float
        The delta, in (0, 1).
    count : int, default 1
        The number of releases, a positive whole number.

    Returns
    -------
    Bounds
        Certified ``lower <= upper``; ``details`` name the upper ledger and the lower direction.

    Raises
    ------
    ValueError
        ``delta`` outside ``(0, 1)``, ``count`` not a positive integer, ``mechanism`` of another type.
    """
    from .mechanisms.discrete_vector import DiscreteGaussianVector

    delta = check_delta("delta", delta)
    count = check_count("count", count)
    if not isinstance(mechanism, DiscreteGaussianVector):
        raise ValueError(f"mechanism must be a DiscreteGaussianVector, got {mechanism!r}")
    up = ConnectDotsAccountant().compose(times(mechanism.upper_ledger(), count)).epsilon(delta)
    upper, estimate = float(up.upper), float(up.estimate)
    upper_how = ", ".join(f"{c} x {m.describe()}" for m, c in mechanism.upper_ledger())
    for gauss, slack in mechanism.continuous_envelopes(count):
        if slack > 0.5:  # the pointwise factor would cost more than the envelope can save
            continue
        env = ConnectDotsAccountant().compose(gauss, count).epsilon(delta * math.exp(-slack))
        env_upper = (float(env.upper) + 2.0 * slack) * (1.0 + 1e-12)
        if env_upper < upper:
            upper, estimate = env_upper, min(estimate, env_upper)
            upper_how = (
                f"continuous envelope: {count} x {gauss.describe()} with pointwise slack R = {slack:.3g} "
                "(DiscreteGaussianVector docstring)"
            )
    lower, how = 0.0, "none"
    for ledger in mechanism.attained_ledgers():
        lo = float(ConnectDotsAccountant().compose(times(ledger, count)).epsilon(delta).lower)
        if lo > lower:
            lower, how = lo, ", ".join(f"{c} x {m.describe()}" for m, c in ledger)
    return Bounds(
        lower=min(lower, upper),
        estimate=min(max(estimate, lower), upper),
        upper=upper,
        details={
            "upper_ledger": upper_how,
            "lower_direction": how,
            "count": count,
        },
    )

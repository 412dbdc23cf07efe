"""MMCC: Poisson-sampled matrix mechanisms with any non-negative ``C``, by conditional composition.

Choquette-Choo, Ganesh, Steinke and Thakurta, "Privacy amplification for matrix mechanisms", ICLR 2024
(arXiv 2310.15526). The release is ``theta = C x + z``, ``z ~ N(0, sigma^2 I)``, each step's batch Poisson
sampled at rate ``p``: the differing record takes part at step ``j`` (``x_j = g_j``, ``||g_j|| <= 1``, chosen
adaptively) with probability ``p``, independently (``x_j = 0`` otherwise and on the neighbour without it). The
other records' sampling bits are revealed as well (a richer release), so their contributions are known
functions of the past. The rows are released in order of their last step (the natural order of a causal
``C``; tree aggregation releases a node when its last leaf is in), so a gradient depends only on rows
released before it.

**Conditional composition** (2310.15526 Thm 3.1, in the form proven here). Let ``E_k`` be a set of
prefixes ``theta_<k`` ("bad") such that, for every prefix outside ``E_k``, the pair (row ``k`` given the
prefix, with the record; without it) is dominated by ``(P_k, Q_k)``. If a prefix is bad with probability at
most ``delta_bad`` under both neighbours, the run is ``(eps, delta_pld + delta_bad)``-DP for every
``(eps, delta_pld)`` of the composition of the ``(P_k, Q_k)``. Proof: replace row ``k``'s law on the record's
side by the neighbour's at a bad prefix; the modified run is dominated, step by step, by the ``(P_k, Q_k)``
(adaptive composition of dominating pairs, Zhu, Dong and Wang 2022, Thm 10), and it is within total
variation ``delta_bad`` of the run; for the add direction modify the neighbour's side instead.

**Posterior bounds.** For column ``j`` of row ``k``, let ``c = C[<k, j]`` (its entries in the earlier rows),
``w_l = <c, C[<k, l]>`` and ``s = sigma ||c||``. Given the prefix and all other participations, the log
likelihood ratio of ``x_j = g_j`` against ``x_j = 0`` is
``(sum_r c_r <g_j, theta_r - m_r> ) / sigma^2 - ||c||^2 / (2 sigma^2)`` (``m_r`` the other steps' part of row
``r``). The posterior must hold given every value of the record's other participations ``x_l`` (the
sequential coupling below conditions on them), and their hypothesised part
``-sum_(l != j) x_l w_l <g_j, g_l> / sigma^2`` is largest at ``x_l = 1`` for every ``l`` whose gradient points
against ``g_j``: since ``C >= 0`` and ``|<g_j, g_l>| <= 1`` it adds at most ``K = sum_(l != j) w_l``. This is
the price of arbitrary gradient directions: when the record's gradients share one direction with non-negative
scales (``aligned_gradients=True``, the scalar model of MMCC's analysis, an assumption on the threat model that
the caller states) every ``<g_j, g_l> >= 0``, the worst case is ``x_l = 0`` and ``K = 0``; tree aggregation
has ``K`` of the order of ``2^level`` (at 2048 steps, sigma 30, rate 1/256: 42.1 for any gradients against 3.86
aligned). And
``sum_r c_r <g_j, theta_r>`` is at most ``sum_l w_l b_l + s N`` (``b_l ~ Bern(p)`` the true participations,
``N`` standard normal; ``b = 0`` on the neighbour). The bad event ``sum_r c_r <g_j, theta_r> > tau`` is a
property of the prefix; ``tau`` is the smaller of a Chernoff bound ``min_lambda (log(1/delta_e) + lambda^2 s^2
/ 2 + sum_l log(1 - p + p e^(lambda w_l))) / lambda`` and the tail of the Bernoulli part's law on a grid (weights
rounded up, binomial groups convolved, ``sum_x P(X = x) Phi_bar((tau - x) / s)``; ``_mmcc_tails.grid_quantile``,
4 % smaller for tree aggregation), either making its probability at most ``delta_e`` under both neighbours.
Outside it, ``P(x_j != 0 | prefix, the rest) <= p~ = p e^eps* / (p e^eps* + 1 - p)``,
``eps* = (tau + K) / sigma^2 - ||c||^2 / (2 sigma^2)``; a column not seen before keeps ``p~ = p``. Every
(row, column) pair with ``c != 0`` is one event; ``delta_bad = tail_fraction * delta`` is split evenly.

**Mixture-of-Gaussians pair per row.** Conditional bounds ``P(x_j = 1 | the rest) <= p~_j`` give, by the
sequential coupling ``x_j = 1[U_j <= P(x_j = 1 | x_<j)]``, participations below independent
``x'_j ~ Bern(p~_j)``; with ``C >= 0`` the row's mean has norm at most ``T = sum_j C[k, j] x'_j``. A vector
mixture of Gaussians is dominated by the scalar one of a stochastically larger norm, and a scalar one
``(E N(S, sigma^2), N(0, sigma^2))`` grows with the law of ``S`` (Ganesh 2024, Lemma 2.9; directly: the
optimal sets are half-lines, whose probability under ``E N(S, sigma^2)`` is monotone in ``S``). So
``P_k = MixtureOfGaussians(law of T)``, ``Q_k = N(0, sigma^2)`` dominates row ``k`` at every good prefix.

**Pessimistic rounding.** ``tau`` and ``eps*`` are rounded up (relative 1e-9) and the weights ``w`` up to a
geometric grid (ratio 1.01; the smallest, 1e-3 of the largest together, counted as always present)
before both tail bounds; ``T``'s law is computed on a grid with every ``C[k, j]``
rounded up, its survival function inflated by the convolution's rounding error, its support coarsened
by moving mass up to at most ``MAX_COMPONENTS`` (128) points, the kept set chosen among a few candidates by a
chi-square proxy (the coarsening was the largest loss for BandMF, 64 bands at sigma 4, rate 1/64: keeping the
64 heaviest points, with Chernoff tails, gave 588; 128 points chosen so, with the grid tails, give 138); rows
are grouped and each group charged the upper envelope of its members' survival functions (a stochastically
larger law). The composition is certified by the connect-dots accountant at ``delta - delta_bad``. Every step
moves the bound up, so the answer is a proven upper bound on the run's epsilon; C = identity gives DP-SGD
exactly (no events, ``p~ = p``). Events whose ``(||c||^2, multiset of positive w)`` coincide get the same ``p~``
(it depends on nothing else), computed once.

**When MMCC cannot win** (``with_mmcc``). The composition is the costly part; before it,
``ledger_epsilon_floor`` bounds the ledger's epsilon from below by one test on a weighted sum of the rows'
outputs (Cantelli's inequality for the mixtures' part, the Gaussian tail exactly). MMCC's answer is at least the
ledger's epsilon at ``delta - delta_bad <= delta``, so when the floor reaches the other methods' upper end MMCC
is skipped without changing the answer. Where MMCC loses (BandMF, 64 bands, sigma 4, rate 1/64: posterior
bounds ``p~`` about 6 ``p``, an answer of 138 for any gradients against noise splitting's 30.8) the floor says so
at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import special

from .._types import FloatArray, IntArray
from .._validation import check_count, check_delta, check_positive, check_probability, check_real
from ..accountants.connect_dots import ConnectDotsAccountant
from ..bounds import Bounds
from ..errors import TightDPError
from ..mechanisms.mixture import MixtureOfGaussians
from ._mmcc_tails import MAX_COMPONENTS as MAX_COMPONENTS
from ._mmcc_tails import _envelope, _grid, _laws_of_sums, _round_up, _tilde_p
from ._mmcc_tails import _Law as _Law
from ._mmcc_tails import _mixture as _mixture
from ._mmcc_tails import chernoff_quantile as chernoff_quantile
from .strategies import Strategy, as_strategy, reject

__all__ = ["MMCCResult", "ledger_epsilon_floor", "mmcc_epsilon", "mmcc_row_laws", "with_mmcc"]

#: most distinct events (row, column) the general path processes (beyond: refused)
MAX_EVENTS = 2_000_000
#: the composition's relative accuracy when the caller gives none
MMCC_REL_ERROR = 3e-3
#: distinct events of the general path that also get the grid tail quantile
GRID_EVENTS = 512

_Laws = tuple[list["_Law"], list[int], int, dict[str, Any]]


def _toeplitz_laws(coefs: FloatArray, n: int, sigma: float, p: float, frac_delta: float, aligned: bool) -> _Laws:
    """Row laws of a causal Toeplitz ``C`` (per lag, the events of every column share one bound)."""
    nz = np.nonzero(coefs > 0.0)[0]
    if nz.size == 0:
        reject("MMCC needs a strategy with a positive coefficient")
    b = int(nz[-1]) + 1
    c = coefs[:b]
    lags = [a for a in range(1, min(b, n)) if c[a] > 0.0 and np.any(c[:a] > 0.0)]
    events = sum(n - a for a in lags)
    log_inv = math.log(1.5 * events / frac_delta) if events else 0.0
    q = np.full(b, p)
    w = np.zeros(2 * b - 1)  # w[d + b - 1] for offsets d = l - j in (-b, b)
    for a in range(1, min(b, n)):
        # add row j + a - 1 of column j: c[a-1] * C[j + a - 1, j + d] = c[a-1] * c[a-1-d]
        e = np.arange(b)
        w[(a - 1 - e) + b - 1] += c[a - 1] * c[e]
        if c[a] > 0.0 and a in lags:
            q[a] = _tilde_p(w, float(w[b - 1]), sigma, p, log_inv, aligned)
    h, m = _grid(c, float(c.sum()), min(b, n))
    # row k has lags 0..min(k, b-1); its law only grows with k: group rows, each charged its group's last row
    ends, k = [], 0
    while k < min(b, n) - 1:
        ends.append(k)
        k = max(k + 1, int(math.ceil(k * 1.3)))
    ends.append(min(b, n) - 1)
    laws = _laws_of_sums(m, q, h, ends)
    counts, start = [], 0
    for end in ends:
        counts.append(end - start + 1 if end < ends[-1] else n - start)
        start = end + 1
    return laws, counts, events, {"posterior_bounds": q.tolist()}


def _release_order(c: FloatArray) -> IntArray:
    """Rows by the step at which they are released (their last non-zero column), stably; zero rows dropped."""
    nzr = np.any(c != 0.0, axis=1)
    last = np.where(nzr, c.shape[1] - 1 - np.argmax(c[:, ::-1] != 0.0, axis=1), -1)
    order = np.argsort(last, kind="stable")
    return np.asarray(order[nzr[order]], dtype=np.int64)


def _general_laws(c: FloatArray, sigma: float, p: float, frac_delta: float, aligned: bool, groups: int) -> _Laws:
    """Row laws of any non-negative ``C``: one event per (row, column) with an earlier row in that column."""
    rows = c[_release_order(c)]
    m_rows, n = rows.shape
    events = int(np.count_nonzero(rows)) - int(np.count_nonzero(np.any(rows != 0.0, axis=0)))
    if events > MAX_EVENTS:
        reject(f"MMCC: {events} (row, column) events exceed the limit {MAX_EVENTS}; use a Toeplitz strategy")
    log_inv = math.log(1.5 * events / frac_delta) if events else 0.0
    qmat = np.full(rows.shape, p)
    # ``_tilde_p`` needs only ``w[j]`` and the multiset of positive ``w`` (``_compress`` sorts them; the cross term
    # bounds their sum): it gets them sorted, so events with the same multiset (tree aggregation's columns, by
    # symmetry) share one computation; the first ``GRID_EVENTS`` distinct ones also get the grid tail quantile
    # (beyond, the Chernoff bound alone: the grid costs milliseconds per event)
    memo: dict[tuple[float, bytes], float] = {}
    for j in range(n):
        rj = np.nonzero(rows[:, j])[0]
        w = np.zeros(n)
        for t in range(1, rj.size):
            r_prev = rj[t - 1]
            w += rows[r_prev, j] * rows[r_prev]
            pos = np.sort(w[w > 0.0])
            key = (float(w[j]), pos.tobytes())
            if key not in memo:
                memo[key] = _tilde_p(pos, float(w[j]), sigma, p, log_inv, aligned, grid=len(memo) < GRID_EVENTS)
            qmat[rj[t], j] = memo[key]
    nzr, nzc = np.nonzero(rows)
    h, _ = _grid(rows[nzr, nzc], float(rows.sum(axis=1).max()), int(np.count_nonzero(rows, axis=1).max()))
    starts = np.searchsorted(nzr, np.arange(m_rows + 1))
    laws = []
    for k in range(m_rows):
        sup = nzc[starts[k] : starts[k + 1]]
        laws.append(_laws_of_sums(_round_up(rows[k, sup], h), qmat[k, sup], h, [sup.size - 1])[0])
    # group rows of similar laws: by their mean and their top on a geometric scale, coarsened until at most
    # ``groups`` groups remain (each group is charged the envelope of its members)
    means = np.array([float(law.surv[1:].sum()) for law in laws]) + 1e-300
    tops = np.array([float(law.surv.size) for law in laws])
    ratio = 1.1
    while True:
        key = np.floor(np.log(means) / math.log(ratio)) * 1e6 + np.floor(np.log(tops) / math.log(ratio))
        uniq, inv = np.unique(key, return_inverse=True)
        if uniq.size <= groups:
            break
        ratio = ratio**1.5
    chunks = [np.nonzero(inv == g)[0] for g in range(uniq.size)]
    return [_envelope([laws[i] for i in ch]) for ch in chunks], [int(ch.size) for ch in chunks], events, {}


@dataclass(frozen=True)
class MMCCResult:
    """The dominating ledger of MMCC: per group of rows a mixture of Gaussians and how many rows it stands for.

    Parameters
    ----------
    ledger : list of (MixtureOfGaussians, int)
        The composition whose epsilon at ``delta - delta_bad`` bounds the run's.
    delta_bad : float
        The probability charged to the bad prefixes (two thirds of ``tail_fraction * delta``, 0 without
        events) and to the cut tails of the mixtures.
    events : int
        The number of (row, column) tail events.
    details : dict
        Diagnostics (the posterior bounds of a Toeplitz strategy).

    Raises
    ------
    TypeError
        Missing fields (a plain record: ``mmcc_row_laws`` builds it, checked).
    """

    ledger: list[tuple[MixtureOfGaussians, int]]
    delta_bad: float
    events: int
    details: dict[str, Any]


def mmcc_row_laws(
    strategy: Strategy,
    sigma: float,
    n: int,
    sampling_rate: float,
    delta: float,
    *,
    tail_fraction: float = 0.1,
    aligned_gradients: bool = False,
    groups: int = 32,
) -> MMCCResult:
    """The dominating per-row mixtures of MMCC (module docstring) for ``n`` steps of ``strategy``.

    Parameters
    ----------
    strategy : Strategy
        A non-negative strategy matrix ``C``.
    sigma : float
        The noise multiplier (``> 0``).
    n : int
        Steps (``>= 1``).
    sampling_rate : float
        Poisson rate ``p`` in ``(0, 1]``.
    delta : float
        The target delta; ``tail_fraction * delta`` is spent on the tail events.
    tail_fraction : float, optional
        In ``(0, 1)``, default 0.1.
    aligned_gradients : bool, optional
        ``True``: the record's gradients share one direction with non-negative scales (the model MMCC analyses);
        default ``False``: any adaptive gradients of norm at most 1.
    groups : int, optional
        At most this many row groups in the general (non-Toeplitz) path (rows of similar mean and top
        grouped, each group charged its members' envelope), default 32.

    Returns
    -------
    MMCCResult
        The ledger and the delta charged to the bad events.

    Raises
    ------
    ValueError
        A negative entry in ``C``, bad arguments, or too many events.
    """
    sigma = check_positive("noise_multiplier", sigma)
    n = check_count("steps", n)
    p = check_probability("sampling_rate", sampling_rate)
    delta = check_delta("delta", delta)
    frac = check_real("tail_fraction", tail_fraction, low=0.0, high=1.0)
    groups = check_count("groups", groups)
    coefs = strategy.toeplitz_coefs(n) if strategy.causal else None
    if coefs is not None:
        if np.any(coefs < 0.0):
            reject(f"MMCC needs a non-negative strategy; {strategy.describe()} has a negative coefficient")
        laws, counts, events, details = _toeplitz_laws(
            np.asarray(coefs, float), n, sigma, p, frac * delta, aligned_gradients
        )
    else:
        c = np.asarray(strategy.matrix(n), dtype=float)
        if np.any(c < 0.0):
            reject(f"MMCC needs a non-negative strategy; {strategy.describe()} has a negative entry")
        laws, counts, events, details = _general_laws(c, sigma, p, frac * delta, aligned_gradients, groups)
    if p >= 1.0:  # every p~ is 1 without conditioning: no event to charge
        events = 0
    # the events get two thirds of the tail budget, the support cut one third
    cut_budget = frac * delta / 3.0 / len(laws)
    ledger, charged = [], 0.0
    for law, cnt in zip(laws, counts, strict=True):
        mog, eta = _mixture(law, sigma, cut_budget / cnt)
        ledger.append((mog, cnt))
        charged += eta * cnt
    bad = (2.0 * frac * delta / 3.0 if events else 0.0) + charged * (1.0 + 1e-9)
    return MMCCResult(ledger, bad, events, details)


def ledger_epsilon_floor(res: MMCCResult, sigma: float, delta: float) -> float:
    """A certified LOWER bound on the epsilon of MMCC's composed ledger at ``delta`` (so on MMCC's answer), cheap.

    The test ``{Y > t}`` on ``Y = sum_r a_r y_r`` (``y_r`` row ``r``'s scalar output, ``a_r`` its group's mean
    sensitivity, a matched filter): under ``Q``, ``Y ~ N(0, sigma^2 sum a_r^2)``; under ``P``,
    ``Y = S + G`` with ``S = sum_r a_r T_r`` independent of the Gaussian ``G``, and Cantelli's inequality gives
    ``P(S >= E S - s) >= s^2 / (Var S + s^2)``. So
    ``eps >= log((P(Y > t) - delta) / Q(Y > t))`` with ``P(Y > t) >= P(S >= E S - s) P(G > t - E S + s)``
    (the mixtures' cut mass counted as lost). MMCC's answer is an upper bound on this ledger's epsilon at
    ``delta - delta_bad <= delta``, hence at least this value: when it exceeds a bound already known, MMCC
    cannot improve on it.

    Parameters
    ----------
    res : MMCCResult
        The ledger (``mmcc_row_laws``).
    sigma : float
        The noise multiplier (``> 0``).
    delta : float
        The target delta in ``(0, 1)``.

    Returns
    -------
    float
        The lower bound (0 when the test proves nothing).

    Raises
    ------
    ValueError
        A non-positive ``sigma`` or ``delta`` outside ``(0, 1)``.
    """
    sigma = check_positive("noise_multiplier", sigma)
    delta = check_delta("delta", delta)
    mean = var = energy = 0.0
    kept = 1.0
    for mog, count in res.ledger:
        sens = np.asarray(mog.sensitivities, dtype=float)
        probs = np.asarray(mog.probabilities, dtype=float)
        mass = float(probs.sum())
        kept -= count * max(0.0, 1.0 - mass)
        m = float(probs @ sens) / mass
        v = max(0.0, float(probs @ (sens - m) ** 2) / mass)
        mean += count * m * m  # the weight a = m
        var += count * m * m * v
        energy += count * m * m
    if mean <= 0.0 or kept <= 0.0:
        return 0.0
    # rounding: the mean down, the variance and the Gaussian's scale up (relative 1e-9 covers the sums' errors)
    mean *= 1.0 - 1e-9
    var *= 1.0 + 1e-9
    scale = sigma * math.sqrt(energy) * (1.0 + 1e-9)
    best = 0.0
    for k in (0.5, 1.0, 2.0, 3.0, 5.0):
        s = k * math.sqrt(var)
        if s >= mean and var > 0.0:
            continue
        cantelli = kept * (s * s / (var + s * s) if var > 0.0 else 1.0)
        for t in np.linspace(0.0, 2.0 * (mean - s), 41)[1:]:
            log_p = math.log(cantelli) + float(special.log_ndtr(-(t - mean + s) / scale)) - 1e-9
            log_q = float(special.log_ndtr(-t / scale)) + 1e-9
            gap = math.exp(log_p) - delta
            if gap > 0.0:
                best = max(best, (math.log(gap) - log_q) * (1.0 - 1e-9) - 1e-12)
    return best


def mmcc_epsilon(
    *,
    strategy: Any,
    noise_multiplier: float,
    steps: int,
    sampling_rate: float,
    delta: float,
    tail_fraction: float = 0.1,
    aligned_gradients: bool = False,
    eps_error: float | None = None,
    rel_error: float | None = None,
) -> Bounds:
    """A certified upper bound on epsilon of a Poisson-sampled matrix mechanism by MMCC (conditional composition).

    Parameters
    ----------
    strategy : Strategy or array
        A non-negative strategy ``C`` (``tightdp.matrix.as_strategy``).
    noise_multiplier : float
        ``sigma`` (``> 0``).
    steps : int
        ``n`` (``>= 1``).
    sampling_rate : float
        The Poisson rate ``p`` of every step, in ``(0, 1]``.
    delta : float
        Target delta in ``(0, 1)``.
    tail_fraction : float, optional
        The share of ``delta`` spent on the posterior tail events, in ``(0, 1)``; default 0.1.
    aligned_gradients : bool, optional
        Default ``False`` (any adaptive gradients); ``True`` for MMCC's model (one direction).
    eps_error, rel_error : float, optional
        Accuracy of the composition (``tightdp._accuracy``); when both are ``None`` (default), ``rel_error =
        MMCC_REL_ERROR`` (3e-3): MMCC's own slack (the posterior bounds) is far larger, and the accountant's
        default accuracy costs ten times the time (tree aggregation, 2048 steps: 14 s against 1 s, the upper end
        4.0384 against 4.0419).

    Returns
    -------
    Bounds
        ``upper`` proven (module docstring); ``lower`` is the composed dominating pairs' lower end, a bound
        on the dominating pair only, NOT on the run (the run's lower bound comes from an attained pair:
        ``matrix_epsilon`` with ``PoissonSampling``).

    Raises
    ------
    ValueError
        Bad arguments (naming them) or a negative entry in ``C``.

    References
    ----------
    Choquette-Choo, Ganesh, Steinke, Thakurta, ICLR 2024, arXiv 2310.15526, Thm 3.1 and Sec. 4 (MMCC).

    Examples
    --------
    >>> from tightdp.matrix import BandedToeplitz
    >>> b = mmcc_epsilon(strategy=BandedToeplitz(c_col=[1.0, 0.5]), noise_multiplier=1.0, steps=50,
    ...                  sampling_rate=0.05, delta=1e-5)
    >>> b.upper > 0
    True
    """
    strat = as_strategy(strategy)
    res = mmcc_row_laws(
        strat,
        noise_multiplier,
        steps,
        sampling_rate,
        delta,
        tail_fraction=tail_fraction,
        aligned_gradients=aligned_gradients,
    )
    return _compose(res, delta, aligned_gradients, eps_error, rel_error)


def _compose(res: MMCCResult, delta: float, aligned: bool, eps_error: float | None, rel_error: float | None) -> Bounds:
    """The ledger composed by the connect-dots accountant at ``delta - delta_bad``, with MMCC's details."""
    if eps_error is None and rel_error is None:
        rel_error = MMCC_REL_ERROR
    acc = ConnectDotsAccountant(eps_error=eps_error, rel_error=rel_error)
    for mech, count in res.ledger:
        acc.compose(mech, count)
    out = acc.epsilon(delta - res.delta_bad)
    details = {
        "method": "MMCC conditional composition (Choquette-Choo et al. 2024, arXiv 2310.15526)",
        "delta_bad": res.delta_bad,
        "tail_events": res.events,
        "row_groups": len(res.ledger),
        "gradients": "aligned" if aligned else "any",
        **res.details,
    }
    return Bounds(out.lower, out.estimate, out.upper, "epsilon", "bound", details)


def with_mmcc(
    bounds: Bounds,
    strategy: Strategy,
    sigma: float,
    n: int,
    sampling_rate: float,
    delta: float,
    eps_error: float | None,
    rel_error: float | None,
    *,
    aligned_gradients: bool = False,
) -> Bounds:
    """``bounds`` of a Poisson-sampled run with its upper end replaced by MMCC's where that is smaller.

    MMCC's row laws are built first (cheap); when ``ledger_epsilon_floor`` (a lower bound on MMCC's answer)
    already reaches ``bounds.upper``, MMCC cannot win and its composition (the costly part) is skipped.

    Parameters
    ----------
    bounds : Bounds
        The run's certified interval from the other methods (its lower end, from an attained pair, is kept).
    strategy : Strategy
        The strategy ``C``; MMCC is tried only when it is non-negative.
    sigma : float
        The noise multiplier.
    n : int
        Steps.
    sampling_rate : float
        The Poisson rate.
    delta : float
        The target delta.
    eps_error, rel_error : float or None
        Accuracy of the composition (both ``None``: ``MMCC_REL_ERROR``, as in ``mmcc_epsilon``).
    aligned_gradients : bool, optional
        Default ``False`` (any adaptive gradients); ``True``: the record's gradients share one direction
        (``mmcc_epsilon``).

    Returns
    -------
    Bounds
        The tighter interval; ``details["mmcc"]`` holds MMCC's upper end or why it was not used.

    Raises
    ------
    ValueError
        Bad arguments (naming them).
    """
    details = dict(bounds.details)
    try:
        res = mmcc_row_laws(strategy, sigma, n, sampling_rate, delta, aligned_gradients=aligned_gradients)
        floor = ledger_epsilon_floor(res, sigma, delta)
        if floor >= bounds.upper:
            details["mmcc"] = (
                f"not used: its answer is at least {floor:.6g} (ledger_epsilon_floor), not below the upper end "
                f"{bounds.upper:.6g} of the other methods"
            )
            return Bounds(bounds.lower, bounds.estimate, bounds.upper, "epsilon", "bound", details)
        m = _compose(res, delta, aligned_gradients, eps_error, rel_error)
    except (TightDPError, ValueError) as exc:  # negative C, too many events, or out of the engine's reach
        details["mmcc"] = f"not used: {exc}"
        return Bounds(bounds.lower, bounds.estimate, bounds.upper, "epsilon", "bound", details)
    details["mmcc"] = {k: v for k, v in m.details.items() if k != "posterior_bounds"} | {"upper": m.upper}
    if m.upper >= bounds.upper:
        return Bounds(bounds.lower, bounds.estimate, bounds.upper, "epsilon", "bound", details)
    lower = min(bounds.lower, m.upper)
    details["upper_used"] = "MMCC conditional composition"
    return Bounds(lower, min(max(m.estimate, lower), m.upper), m.upper, "epsilon", "bound", details)

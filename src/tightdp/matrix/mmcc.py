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
``r``). Since ``C >= 0`` and ``|<g_j, g_l>| <= 1``, the other steps' hypothesised part adds at most
``K = sum_(l != j) w_l`` (zero when all gradients share one direction, ``aligned_gradients=True``), and
``sum_r c_r <g_j, theta_r>`` is at most ``sum_l w_l b_l + s N`` (``b_l ~ Bern(p)`` the true participations,
``N`` standard normal; ``b = 0`` on the neighbour). The bad event ``sum_r c_r <g_j, theta_r> > tau`` is a
property of the prefix; a Chernoff bound ``tau = min_lambda (log(1/delta_e) + lambda^2 s^2 / 2 + sum_l
log(1 - p + p e^(lambda w_l))) / lambda`` makes its probability at most ``delta_e`` under both neighbours.
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
before the Chernoff sum; ``T``'s law is computed on a grid with every ``C[k, j]``
rounded up, its survival function inflated by the convolution's rounding error, its support coarsened
by moving mass up to fewer points; rows are grouped and each group charged the upper envelope of its
members' survival functions (a stochastically larger law). The composition is certified by the
connect-dots accountant at ``delta - delta_bad``. Every step moves the bound up, so the answer is a proven
upper bound on the run's epsilon; C = identity gives DP-SGD exactly (no events, ``p~ = p``).
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
from .strategies import Strategy, as_strategy, reject

__all__ = ["MMCCResult", "mmcc_epsilon", "mmcc_row_laws", "with_mmcc"]

_U = float(np.finfo(float).eps) / 2
_SAFE = 1e-9  # relative margin on every transcendental quantity
#: most distinct events (row, column) the general path processes (beyond: refused)
MAX_EVENTS = 2_000_000
#: components of each row's mixture after coarsening
MAX_COMPONENTS = 64


def _up(x: float) -> float:
    return x + abs(x) * _SAFE + 1e-300


def _sum_up(x: FloatArray) -> float:
    """An upper bound on the exact sum of non-negative ``x`` (numpy's summation error is below ``size * u``)."""
    return float(np.sum(x)) * (1.0 + 2.0 * (x.size + 1) * _U)


def _log_mgf_bernoulli(lam: FloatArray, w: FloatArray, mult: FloatArray, p: float) -> FloatArray:
    """``sum_l mult_l log(1 - p + p e^(lam w_l))`` for each ``lam`` (rows) in log space."""
    x = np.multiply.outer(lam, w)
    terms: FloatArray = np.logaddexp(math.log1p(-p) if p < 1.0 else -np.inf, math.log(p) + x)
    return np.asarray(terms @ mult, dtype=np.float64)


def chernoff_quantile(w: FloatArray, mult: FloatArray, s: float, p: float, log_inv_delta: float) -> float:
    """A certified ``tau`` with ``P(sum_l w_l b_l + s N > tau) <= delta`` (``b_l ~ Bern(p)`` with multiplicity
    ``mult_l``, ``N`` standard normal): the Chernoff bound at the best of a grid of ``lambda``, rounded up.

    Parameters
    ----------
    w : FloatArray
        Non-negative weights.
    mult : FloatArray
        Their multiplicities (same shape).
    s : float
        The Gaussian part's standard deviation (``>= 0``).
    p : float
        The Bernoulli probability in ``(0, 1]``.
    log_inv_delta : float
        ``log(1 / delta) > 0``.

    Returns
    -------
    float
        The bound ``tau``.

    Raises
    ------
    ValueError
        ``s`` and ``w`` both zero.
    """
    scale = max(s, float(np.max(w)) if w.size else 0.0)
    if scale <= 0.0:
        raise ValueError("chernoff_quantile needs a positive weight or Gaussian part")
    best = math.inf
    lo, hi = 1e-4 / scale, 1e4 / scale
    for _ in range(2):  # a coarse grid, then a fine one around its best (any lambda gives a valid bound)
        lam = np.geomspace(lo, hi, 41)
        vals = (log_inv_delta + 0.5 * lam**2 * s * s + _log_mgf_bernoulli(lam, w, mult, p)) / lam
        i = int(np.argmin(vals))
        best = min(best, float(vals[i]))
        lo, hi = float(lam[max(i - 1, 0)]), float(lam[min(i + 1, lam.size - 1)])
    return _up(best * (1.0 + 1e-12 * (w.size + 4)))


def _compress(w: FloatArray) -> tuple[FloatArray, FloatArray, float]:
    """Positive weights rounded UP to a geometric grid of ratio 1.01, with their multiplicities, and the sum of
    the smallest ones (at most 1e-3 of the largest together), which are counted as always present (a shift)."""
    w = np.sort(w[w > 0.0])
    if w.size == 0:
        return np.zeros(0), np.zeros(0), 0.0
    small = int(np.searchsorted(np.cumsum(w), 1e-3 * float(w[-1]), side="right"))
    shift = _sum_up(w[:small])
    w = w[small:]
    step = math.log(1.01)
    code = np.ceil(np.log(w) / step + 1e-9)
    uniq, counts = np.unique(code, return_counts=True)
    return np.exp(uniq * step) * (1.0 + 4 * _U), counts.astype(float), shift


def _tilde_p(w: FloatArray, j_weight: float, sigma: float, p: float, log_inv_delta: float, aligned: bool) -> float:
    """The posterior bound ``p~`` for one (row, column) event; ``w`` includes ``w_j = ||c||^2 = j_weight``."""
    vals, mult, shift = _compress(w)
    tau = _up(chernoff_quantile(vals, mult, sigma * math.sqrt(j_weight), p, log_inv_delta) + shift)
    cross = 0.0 if aligned or w.size == 0 else max(0.0, _up(_sum_up(w) - j_weight))
    eps_star = _up((tau + cross) / (sigma * sigma)) - j_weight / (2 * sigma * sigma) * (1 - 1e-12)
    if p >= 1.0:
        return 1.0
    q = float(special.expit(eps_star + math.log(p) - math.log1p(-p)))
    return min(1.0, _up(q))


@dataclass(frozen=True)
class _Law:
    """A law on the grid ``{0, h, 2h, ...}`` as a survival function ``surv[i] = P(T >= i h)`` (``surv[0] = 1``)."""

    h: float
    surv: FloatArray


def _laws_of_sums(m: IntArray, q: FloatArray, h: float, ends: list[int]) -> list[_Law]:
    """For each ``e`` in ``ends`` (increasing), the law of ``sum_(j <= e) m_j h x_j``, ``x_j ~ Bern(q_j)``
    independent, its survival function inflated by the convolution's rounding error."""
    size = int(m[: ends[-1] + 1].sum()) + 1
    pmf = np.zeros(size)
    pmf[0] = 1.0
    top, out, want = 0, [], 0
    for j in range(ends[-1] + 1):
        mj, qj = int(m[j]), float(q[j])
        if qj > 0.0 and mj > 0:
            new = pmf[: top + 1].copy()
            pmf[: top + 1] *= 1.0 - qj
            pmf[mj : mj + top + 1] += qj * new
            top += mj
        if j == ends[want]:
            surv = np.cumsum(pmf[top::-1])[::-1]
            surv = np.minimum(1.0, surv * (1.0 + 8.0 * (j + top + 6) * _U))
            surv[0] = 1.0
            out.append(_Law(h, surv))
            want += 1
    return out


def _envelope(laws: list[_Law]) -> _Law:
    """The law whose survival function is the pointwise largest (stochastically above every member)."""
    size = max(law.surv.size for law in laws)
    out = np.zeros(size)
    for law in laws:
        out[: law.surv.size] = np.maximum(out[: law.surv.size], law.surv)
    return _Law(laws[0].h, out)


def _mixture(law: _Law, sigma: float, tail: float) -> tuple[MixtureOfGaussians, float]:
    """The row's dominating mixture and the mass it leaves out.

    The support is cut where the survival function falls to ``tail`` (at most 1e-10): the components above
    are dropped, their mass ``eta`` left to the mixture's remove direction as a deficit at its largest
    sensitivity (``MixtureOfGaussians``), which is within total variation ``eta`` of a law that keeps them,
    so ``eta`` per row is charged to delta; the add direction only loses mass from ``P`` (safe). The rest is
    coarsened by moving mass UP to at most ``MAX_COMPONENTS`` points (the heaviest kept, and the largest).
    """
    surv = np.maximum.accumulate(law.surv[::-1])[::-1]  # non-increasing (the inflation may break it by ~u)
    cut = int(np.searchsorted(-surv, -min(tail, 1e-10), side="right"))  # first index with surv <= tail
    eta = float(surv[cut]) if cut < surv.size else 0.0
    surv = surv[:cut] if cut < surv.size else surv
    pmf = np.maximum(surv - np.r_[surv[1:], eta], 0.0)
    idx = np.nonzero(pmf > 0.0)[0]
    if idx.size > MAX_COMPONENTS:
        heavy = idx[np.argsort(pmf[idx])[::-1][: MAX_COMPONENTS - 1]]
        keep = np.unique(np.r_[heavy, idx[-1]])
        where = keep[np.searchsorted(keep, idx)]  # the smallest kept point at or above each point
        merged = np.zeros(surv.size)
        np.add.at(merged, where, pmf[idx])
        pmf, idx = merged, keep
    sens = idx.astype(float) * law.h * (1.0 + 4 * _U)
    probs = pmf[idx] * ((1.0 - eta) / math.fsum(pmf[idx].tolist()))
    mog = MixtureOfGaussians(noise_multiplier=sigma, sensitivities=tuple(sens), probabilities=tuple(probs))
    return mog, eta


def _grid(values: FloatArray, row_sum: float, terms: int) -> tuple[float, IntArray]:
    """A grid step ``h`` (``row_sum / cells``, ``cells`` growing with the terms so that rounding every term up
    costs at most about 1 % of ``row_sum``; the common value when all entries are equal) and each entry
    rounded UP to a multiple of it."""
    pos = values[values > 0.0]
    if pos.size and np.all(pos == pos[0]):
        h = float(pos[0])
    else:
        h = row_sum / min(1 << 18, max(4096, 256 * terms))
    m = np.ceil(values / h).astype(np.int64)
    m += (m.astype(float) * h < values).astype(np.int64)
    return h, m


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
    for j in range(n):
        rj = np.nonzero(rows[:, j])[0]
        w = np.zeros(n)
        for t in range(1, rj.size):
            r_prev = rj[t - 1]
            w += rows[r_prev, j] * rows[r_prev]
            qmat[rj[t], j] = _tilde_p(w, float(w[j]), sigma, p, log_inv, aligned)
    h, mall = _grid(rows.ravel(), float(rows.sum(axis=1).max()), int(np.count_nonzero(rows, axis=1).max()))
    mall = mall.reshape(rows.shape)
    laws = []
    for k in range(m_rows):
        sup = np.nonzero(rows[k])[0]
        laws.append(_laws_of_sums(mall[k, sup], qmat[k, sup], h, [sup.size - 1])[0])
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
        Accuracy of the composition (``tightdp._accuracy``).

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
    acc = ConnectDotsAccountant(eps_error=eps_error, rel_error=rel_error)
    for mech, count in res.ledger:
        acc.compose(mech, count)
    out = acc.epsilon(delta - res.delta_bad)
    details = {
        "method": "MMCC conditional composition (Choquette-Choo et al. 2024, arXiv 2310.15526)",
        "delta_bad": res.delta_bad,
        "tail_events": res.events,
        "row_groups": len(res.ledger),
        "gradients": "aligned" if aligned_gradients else "any",
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
) -> Bounds:
    """``bounds`` of a Poisson-sampled run with its upper end replaced by MMCC's where that is smaller.

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
        Accuracy of the composition.

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
        m = mmcc_epsilon(
            strategy=strategy,
            noise_multiplier=sigma,
            steps=n,
            sampling_rate=sampling_rate,
            delta=delta,
            eps_error=eps_error,
            rel_error=rel_error,
        )
    except (TightDPError, ValueError) as exc:  # negative C, too many events, or out of the engine's reach
        details["mmcc"] = f"not used: {exc}"
        return Bounds(bounds.lower, bounds.estimate, bounds.upper, "epsilon", "bound", details)
    details["mmcc"] = {k: v for k, v in m.details.items() if k != "posterior_bounds"} | {"upper": m.upper}
    if m.upper >= bounds.upper:
        return Bounds(bounds.lower, bounds.estimate, bounds.upper, "epsilon", "bound", details)
    lower = min(bounds.lower, m.upper)
    details["upper_used"] = "MMCC conditional composition"
    return Bounds(lower, min(max(m.estimate, lower), m.upper), m.upper, "epsilon", "bound", details)

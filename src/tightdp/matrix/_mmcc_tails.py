"""MMCC's numerical parts (``tightdp.matrix.mmcc`` states the theorem and the proof): the Chernoff tail
quantile, the posterior bound ``p~`` of one (row, column) event, and the laws of the rows' sums on a grid with
their coarsening into mixtures of Gaussians, every rounding upward."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
from scipy import special

from .._types import FloatArray, IntArray
from ..mechanisms.mixture import MixtureOfGaussians

_U = float(np.finfo(float).eps) / 2
_SAFE = 1e-9  # relative margin on every transcendental quantity
#: components of each row's mixture after coarsening
MAX_COMPONENTS = 128


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


#: the grid of ``grid_quantile``: at most this many cells per unit of the Gaussian part's deviation
_CELLS_PER_SD = 64
#: upper-tail mass cut from the grid law (counted as mass at +inf, inside the tail)
_CUT = 1e-40
#: most binomial groups of the grid law (more weights are merged, rounded up)
_MAX_GROUPS = 64
#: most multiply-adds of one convolution of the grid law (beyond: the grid quantile is not computed)
_MAX_WORK = 1 << 24


def grid_quantile(w: FloatArray, mult: FloatArray, shift: float, s: float, p: float, log_inv_delta: float) -> float:
    """A certified ``tau`` with ``P(shift + sum_l w_l b_l + s N > tau) <= delta`` from the law of the Bernoulli part
    on a grid (``b_l ~ Bern(p)`` with multiplicity ``mult_l``, ``N`` standard normal, ``s > 0``).

    Each weight is rounded UP to a multiple of ``h`` (so the grid sum is stochastically larger; beyond
    ``_MAX_GROUPS`` distinct weights they are first rounded up to that many geometric levels); a group of
    ``k`` equal weights is ``Binomial(k, p)``, its log-pmf by ``lgamma`` with a margin of ``1e-12`` times the sum of
    the terms' magnitudes (far above their rounding), the groups convolved directly (non-negative terms: relative
    error at most ``(length + 2) u`` per convolution, inflated for); after each convolution the upper tail below
    ``_CUT`` is cut and its mass counted at ``+inf``. The tail ``sum_x P(X = x) Phi_bar((tau - shift - x) / s)``
    (``ndtr``, inflated 1e-9 relative) is then decreasing in ``tau``, and the returned ``tau`` is the upper end of a
    bisection, checked.

    Parameters
    ----------
    w : FloatArray
        Non-negative weights.
    mult : FloatArray
        Their multiplicities (non-negative integers, same shape).
    shift : float
        A constant added to the sum (``>= 0``).
    s : float
        The Gaussian part's standard deviation (``> 0``).
    p : float
        The Bernoulli probability in ``(0, 1)``.
    log_inv_delta : float
        ``log(1 / delta) > 0``.

    Returns
    -------
    float
        The bound ``tau`` (``inf`` when a convolution would exceed ``_MAX_WORK``: the caller keeps its other
        bound).

    Raises
    ------
    ValueError
        ``s <= 0`` or ``p`` outside ``(0, 1)``.
    """
    if not s > 0.0 or not 0.0 < p < 1.0:
        raise ValueError("grid_quantile needs s > 0 and 0 < p < 1")
    keep = (w > 0.0) & (mult > 0)
    w = w[keep]
    counts: IntArray = mult[keep].astype(np.int64)
    if w.size > _MAX_GROUPS:  # at most _MAX_GROUPS binomial groups: weights rounded UP to a geometric grid
        ratio = (float(w.max()) / float(w.min())) ** (1.0 / (_MAX_GROUPS - 1))
        code = np.ceil(np.log(w / float(w.min())) / math.log(ratio) - 1e-9)
        top = float(w.min()) * np.exp(code * math.log(ratio)) * (1.0 + 16 * _U)
        top = np.maximum(top, w)
        uniq, inv = np.unique(code, return_inverse=True)
        merged_w = np.zeros(uniq.size)
        np.maximum.at(merged_w, inv, top)
        merged_k = np.zeros(uniq.size, dtype=np.int64)
        np.add.at(merged_k, inv, counts)
        w, counts = merged_w, merged_k
    h = s / _CELLS_PER_SD
    pmf, lost, inflate = np.ones(1), 0.0, 1.0
    for wi, ki in zip(w.tolist(), counts.tolist(), strict=True):
        m = int(math.ceil(wi / h))
        m += int(m * h < wi)
        k = np.arange(ki + 1, dtype=float)
        terms = [special.gammaln(ki + 1.0), special.gammaln(k + 1.0), special.gammaln(ki - k + 1.0)]
        logp = terms[0] - terms[1] - terms[2] + k * math.log(p) + (ki - k) * math.log1p(-p)
        mag = abs(terms[0]) + terms[1] + terms[2] + k * abs(math.log(p)) + (ki - k) * abs(math.log1p(-p))
        group = np.exp(logp + 1e-12 * mag + 1e-300)
        # the convolution would outgrow the budget: give up (the Chernoff bound stands)
        if pmf.size * (ki * m + 1) > _MAX_WORK:
            return math.inf
        law = np.zeros(ki * m + 1)
        law[::m] = group
        pmf = np.convolve(pmf, law)
        inflate *= 1.0 + 2.0 * (min(pmf.size, law.size) + 2) * _U
        tail = np.cumsum(pmf[::-1])[::-1]
        cut = int(np.searchsorted(-tail, -_CUT, side="right"))  # first index whose upper tail is <= _CUT
        if cut < pmf.size:
            lost += float(tail[cut]) * (1.0 + 2.0 * (pmf.size + 2) * _U)
            pmf = pmf[:cut]
    pmf = pmf * inflate * (1.0 + 1e-9)
    x = shift + np.arange(pmf.size) * h * (1.0 + 4 * _U)
    target = math.exp(-log_inv_delta) * (1.0 - 1e-9)

    def tail_up(tau: float) -> float:
        sf = special.ndtr(-(tau - x) / s) * (1.0 + 1e-9)
        return _sum_up(pmf * sf) + lost * (1.0 + 4 * _U)

    lo = float(x[0]) if lost < target else math.inf
    if not math.isfinite(lo):
        return math.inf
    hi = float(x[-1]) + s * (2.0 + math.sqrt(2.0 * log_inv_delta))
    while tail_up(hi) > target:
        if hi > 1e300:
            return math.inf
        hi = 2.0 * hi + s
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if tail_up(mid) > target:
            lo = mid
        else:
            hi = mid
    return _up(hi)


def _tilde_p(
    w: FloatArray, j_weight: float, sigma: float, p: float, log_inv_delta: float, aligned: bool, grid: bool = True
) -> float:
    """The posterior bound ``p~`` for one (row, column) event; ``w`` includes ``w_j = ||c||^2 = j_weight``: the
    smaller of the Chernoff and (``grid``) the grid tail quantiles, both certified."""
    vals, mult, shift = _compress(w)
    s = sigma * math.sqrt(j_weight)
    tau = _up(chernoff_quantile(vals, mult, s, p, log_inv_delta) + shift)
    if grid and 0.0 < p < 1.0 and s > 0.0:
        tau = min(tau, grid_quantile(vals, mult, shift, s, p, log_inv_delta))
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
    coarsened by moving mass UP to at most ``MAX_COMPONENTS`` points, the largest always among them (the
    heaviest ``k`` and points spread evenly over the support above them, for a few ``k``: whichever leaves the
    smallest mean).
    """
    surv = np.maximum.accumulate(law.surv[::-1])[::-1]  # non-increasing (the inflation may break it by ~u)
    cut = int(np.searchsorted(-surv, -min(tail, 1e-10), side="right"))  # first index with surv <= tail
    eta = float(surv[cut]) if cut < surv.size else 0.0
    surv = surv[:cut] if cut < surv.size else surv
    pmf = np.maximum(surv - np.r_[surv[1:], eta], 0.0)
    idx = np.nonzero(pmf > 0.0)[0]
    if idx.size > MAX_COMPONENTS:
        order = idx[np.argsort(pmf[idx])[::-1]]
        # kept sets, each with the largest point: the heaviest ``k`` points and points spread evenly over the
        # support above the largest of them, for a few ``k``. Any is valid; the one whose coarsened law has the
        # smallest mean is used
        best_mean, best_pmf, best_keep = math.inf, pmf, idx
        for k, whole in itertools.product(
            (MAX_COMPONENTS - 1, (3 * MAX_COMPONENTS) // 4, MAX_COMPONENTS // 2, 1), (0, 1)
        ):
            heavy = order[:k]
            above = idx if whole else idx[idx > heavy.max()]
            picks = np.unique(np.linspace(0, max(above.size - 1, 0), MAX_COMPONENTS - 1 - k).astype(np.int64))
            keep = np.unique(np.r_[heavy, above[picks] if above.size else heavy, idx[-1]])
            where = keep[np.searchsorted(keep, idx)]  # the smallest kept point at or above each point
            merged = np.zeros(surv.size)
            np.add.at(merged, where, pmf[idx])
            x = keep * (law.h / sigma)
            logw = np.log(np.maximum(merged[keep], 1e-300))
            # log E exp(T T' / sigma^2) over independent copies: the chi-square divergence plus one
            mean = float(special.logsumexp(logw[:, None] + logw[None, :] + np.multiply.outer(x, x)))
            if mean < best_mean:
                best_mean, best_pmf, best_keep = mean, merged, keep
        pmf, idx = best_pmf, best_keep
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
    return h, _round_up(values, h)


def _round_up(values: FloatArray, h: float) -> IntArray:
    """Each entry rounded UP to a multiple of ``h`` (as the multiple's index)."""
    m: IntArray = np.ceil(values / h).astype(np.int64)
    m += (m.astype(float) * h < values).astype(np.int64)
    return m

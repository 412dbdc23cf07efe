"""Participation patterns and the L2 sensitivity of a strategy matrix over them, certified two-sided.

A user (or example) who takes part at the steps of a pattern ``pi`` with gradients ``g_i`` (``||g_i|| <= 1``)
moves the release ``C x + z`` by ``C_pi G`` (the columns ``pi`` of ``C``, the rows ``g_i``), so

    ``sens(C, Pi)^2 = max_{pi in Pi} max_{||g_i|| <= 1} sum_{i, j in pi} M_ij <g_i, g_j>``,   ``M = C^T C``

(Choquette-Choo et al. 2023, arXiv 2306.08153, Sec. 2 / Eq. (2)). Facts used below, each proven here:

* (F1) **Non-negative Gram block.** If ``M_ij >= 0`` on ``pi``, the inner maximum is ``sum_{i,j in pi} M_ij``:
  ``<g_i, g_j> <= 1`` bounds every term, and equal unit gradients attain it.
* (F2) **Signed block.** With signs ``s_i = +-1`` and ``g_i = s_i g`` the value ``s^T M_pi s`` is attained
  (a lower bound); ``sum |M_ij|`` and ``|pi| lambda_max(M_pi)`` bound it from above (the Gram matrix of
  the ``g_i`` is PSD with unit diagonal, so ``tr(M_pi Gamma) <= lambda_max tr(Gamma)``).
* (F3) **Orthogonal columns.** If columns of ``C`` at least ``b`` apart are orthogonal (``C`` has at most
  ``b`` bands) and every pattern is ``b``-separated, the cross terms vanish and the value is
  ``sum_{i in pi} ||C_i||^2``, maximised exactly by a dynamic programme (jax_privacy's ``VecSens``, BandMF
  paper Alg. 3).
* (F4) **Toeplitz, non-negative, non-increasing** ``c_0 >= c_1 >= ... >= 0``: for ``i <= j``,
  ``M_ij = sum_{m=0}^{n-1-j} c_m c_(m + j - i)`` is non-increasing in ``j - i`` and in ``j``. A ``b``-separated
  pattern ``p_1 < ... < p_m`` has ``p_r >= (r-1) b`` and ``p_s - p_r >= (s-r) b``, so each of its terms is at
  most the matching term of ``{0, b, 2b, ...}``, which with (F1) is exact worst (McMahan et al. 2024,
  arXiv 2405.13763 Thm 2; jax_privacy ``toeplitz.minsep_sensitivity_squared``). The same holds for the
  cyclic patterns ``{j, j + p, ...}`` (pattern ``j = 0`` is worst).
* (F5) **Two-stage bound** (jax_privacy ``get_min_sep_sensitivity_upper_bound``): maximise each row of
  ``|M|`` over patterns, then the row maxima over patterns: an upper bound for any ``C``.
* (F6) **One participation per epoch** (``PerEpoch``): the same two stages, each separable over the epochs
  (``_per_epoch``'s docstring); for a banded ``C`` whose bands fit in an epoch (``b <= t + 1``) only consecutive
  epochs interact and a chain programme over the epochs gives ``max sum |M|`` exactly.

Where none makes the answer exact, ``upper`` comes from (F2)/(F5) and ``lower`` is the attained value of the
worst explicit pattern found (with its signs); both are reported and ``exact`` is ``False``.

Floating point: every value is a sum of at most ``n + k^2`` products bounded by ``kappa^2`` (the largest
squared column norm; ``|M_ij| <= kappa^2`` by Cauchy-Schwarz), so its rounding error is at most
``(n + k^2) u k^2 kappa^2``; four times that is added to ``upper^2`` and taken from ``lower^2``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from .._blas import one_blas_thread
from .._caches import register as _register_cache
from .._types import ArrayLike, FloatArray
from .._validation import check_count
from .participation import SINGLE, Cyclic, MinSeparation, Participation, PerEpoch
from .strategies import Strategy, reject

__all__ = [
    "SINGLE",
    "Cyclic",
    "MinSeparation",
    "Participation",
    "PerEpoch",
    "SensitivityBounds",
    "pattern_value",
    "sensitivity",
]

_U = float(np.finfo(float).eps) / 2
#: patterns enumerated at most by the exact search (beyond it: certified bounds)
BRUTE_FORCE_LIMIT = 20_000


@dataclass(frozen=True)
class SensitivityBounds:
    """``lower <= sens(C, Pi) <= upper``; ``lower`` is attained by ``worst_pattern`` (with ``signs``).

    Parameters
    ----------
    lower, upper : float
        The certified bounds on the sensitivity.
    exact : bool
        Whether they coincide by a proof (``upper`` attained).
    worst_pattern : tuple of int
        The steps of the pattern attaining ``lower``.
    signs : tuple of int
        The gradients' signs on it (all 1 for a non-negative Gram matrix).
    method : str
        Which fact (F1-F5, module docstring) gave the bounds.

    Raises
    ------
    TypeError
        Missing fields (a plain record: ``sensitivity`` builds it).
    """

    lower: float
    upper: float
    exact: bool
    worst_pattern: tuple[int, ...]
    signs: tuple[int, ...]
    method: str

    def to_dict(self) -> dict[str, Any]:
        """The bounds as a JSON-ready dict (without the signs).

        Returns
        -------
        dict
            ``lower``, ``upper``, ``exact``, ``method`` and ``worst_pattern``.
        """
        return {
            "lower": self.lower,
            "upper": self.upper,
            "exact": self.exact,
            "method": self.method,
            "worst_pattern": list(self.worst_pattern),
        }


def _slack(n: int, k: int, kappa2: float) -> float:
    return 4.0 * (n + k * k) * _U * k * k * kappa2


def _finish(
    lo2: float,
    hi2: float,
    n: int,
    k: int,
    kappa2: float,
    pattern: Iterable[int],
    signs: Iterable[float],
    method: str,
    exact: bool,
) -> SensitivityBounds:
    s = _slack(n, k, kappa2)
    lo = math.sqrt(max(lo2 - s, 0.0))
    hi = math.sqrt(hi2 + s)
    return SensitivityBounds(lo, hi, exact, tuple(int(i) for i in pattern), tuple(int(v) for v in signs), method)


def pattern_value(c: FloatArray, pattern: ArrayLike, signs: ArrayLike | None = None) -> float:
    """``||sum_{i in pattern} s_i C[:, i]||^2``: the attained squared sensitivity of a pattern (F1, F2).

    Parameters
    ----------
    c : FloatArray
        The strategy matrix.
    pattern : array_like of int
        The steps taken.
    signs : array_like of float, optional
        The gradients' signs (default all 1).

    Returns
    -------
    float
        The squared norm.

    Raises
    ------
    IndexError
        A step outside ``c``'s columns.
    """
    idx = np.asarray(pattern, int)
    s = np.ones(idx.size) if signs is None else np.asarray(signs, float)
    v = c[:, idx] @ s
    return float(v @ v)


def _best_signs(m: FloatArray) -> tuple[float, FloatArray]:
    """A sign vector with a large ``s^T M s`` (exhaustive up to 12 entries, else eigenvector + flips)."""
    k = m.shape[0]
    if np.all(m >= 0):
        return float(m.sum()), np.ones(k)
    if k <= 12:
        best, arg = -math.inf, np.ones(k)
        for tail in itertools.product((1.0, -1.0), repeat=k - 1):
            s = np.array((1.0,) + tail)
            v = float(s @ m @ s)
            if v > best:
                best, arg = v, s
        return best, arg
    vecs = np.linalg.eigh(m)[1]
    s = np.where(vecs[:, -1] >= 0, 1.0, -1.0)
    val = float(s @ m @ s)
    for _ in range(4 * k if k <= 300 else 0):  # single flips while they help (O(k^2) each: small patterns only)
        gains = -4.0 * s * (m @ s - np.diag(m) * s)
        i = int(np.argmax(gains))
        if gains[i] <= 0:
            break
        s[i] = -s[i]
        val = float(s @ m @ s)
    return val, s


def _pattern_bounds(m_full: FloatArray, pattern: ArrayLike) -> tuple[float, float, FloatArray]:
    """``(attained lower, upper, signs)`` of the squared sensitivity of one pattern (F1, F2)."""
    idx = np.asarray(pattern, int)
    m = m_full[np.ix_(idx, idx)]
    lo, signs = _best_signs(m)
    if np.all(m >= 0):
        return lo, lo, signs
    hi = min(float(np.abs(m).sum()), idx.size * float(np.linalg.eigvalsh(m)[-1]) * (1 + 8 * idx.size * _U))
    return lo, max(hi, lo), signs


def _dp_max(x: FloatArray, sep: int, k: int, *, keep: bool = False) -> FloatArray:
    """``F[j, i]``: the largest sum of at most ``j`` entries of ``x[i:]``, pairwise ``>= sep`` apart
    (BandMF paper Alg. 3; rows ``x`` may be a matrix: one programme per row, vectorised). Only the last layer
    ``F[k]`` unless ``keep`` (the traceback needs them all)."""
    x = np.atleast_2d(x)
    r, n = x.shape
    if not keep and k >= -(-n // sep):
        # the count never binds (a sep-separated pattern has at most ceil(n / sep) steps): one backward pass of
        # F[i] = max(F[i + 1], x_i + F[i + sep]), vectorised over the rows, instead of k layers
        f = np.zeros((r, n + sep + 1))
        for i in range(n - 1, -1, -1):
            np.maximum(f[:, i + 1], x[:, i] + f[:, i + sep], out=f[:, i])
        return f[:, : n + sep]
    prev = np.zeros((r, n + sep))
    layers = [prev]
    for _ in range(k):
        g = np.zeros((r, n + sep))
        g[:, :n] = x + prev[:, sep : sep + n]
        prev = np.maximum.accumulate(g[:, ::-1], axis=1)[:, ::-1]
        if keep:
            layers.append(prev)
    return np.stack(layers) if keep else prev


def _top_k_sum(x: FloatArray, k: int) -> FloatArray:
    """Row-wise sum of the ``k`` largest positive entries: the separation constraint relaxed (an upper bound)."""
    x = np.atleast_2d(x)
    k = min(k, x.shape[1])
    part = -np.partition(-x, k - 1, axis=1)[:, :k]
    return np.asarray(np.maximum(part, 0.0).sum(axis=1), dtype=np.float64)


def _two_stage_bound(absm: FloatArray, sep: int, k: int) -> float:
    """F5: the two-stage dynamic programme on ``|M|``; when it would cost more than ~1e9 operations the
    separation is relaxed (sums of the ``k`` largest entries): still an upper bound."""
    n = absm.shape[0]
    if sep == 1 or k * n * n > 1e9:
        return float(_top_k_sum(_top_k_sum(absm, k)[None, :], k)[0])
    row = _dp_max(absm, sep, k)[:, 0]
    return float(_dp_max(row, sep, k)[0, 0])


def _dp_pattern(x: FloatArray, sep: int, k: int) -> tuple[float, tuple[int, ...]]:
    """The DP's optimum for one vector ``x`` and a pattern attaining it (traceback)."""
    f = _dp_max(x, sep, k, keep=True)[:, 0, :]
    n = x.size
    pat, i, j = [], 0, k
    while j > 0 and i < n:
        take = x[i] + f[j - 1, i + sep]
        if take >= f[j, i + 1] and take > 0:
            pat.append(i)
            i, j = i + sep, j - 1
        else:
            i += 1
    return float(f[k, 0]), tuple(pat)


def _separation(participation: Participation) -> int:
    """The spacing of the patterns: a cyclic period or a minimum separation."""
    if isinstance(participation, Cyclic):
        return participation.period
    if isinstance(participation, MinSeparation):
        return participation.min_sep
    reject(f"participation must be MinSeparation or Cyclic, got {participation!r}")


def _monotone_toeplitz(coefs: FloatArray | None) -> bool:
    return coefs is not None and bool(np.all(coefs >= 0) and np.all(np.diff(coefs) <= 0))


@one_blas_thread
def sensitivity(strategy: Strategy, participation: Participation = SINGLE, *, steps: int) -> SensitivityBounds:
    """Certified bounds on the L2 sensitivity of ``strategy`` over ``steps`` steps and ``participation``.

    Parameters
    ----------
    strategy : Strategy
        The strategy matrix ``C``.
    participation : Participation
        ``SINGLE`` (default), ``MinSeparation(max_participations=k, min_sep=b)`` or ``Cyclic(period=p)``.
    steps : int
        The number of steps ``n`` (columns of ``C``).

    Returns
    -------
    SensitivityBounds
        ``lower`` attained by ``worst_pattern`` (an explicit pair of neighbouring inputs), ``upper`` proven;
        ``exact`` when they coincide up to rounding by one of (F1)-(F4); ``method`` names the route.

    Raises
    ------
    ValueError
        Bad ``steps`` or a participation that is not a ``Participation``.
    """
    n = check_count("steps", steps)
    if not isinstance(strategy, Strategy):
        reject(f"strategy must be a tightdp.matrix Strategy, got {strategy!r}")
    if not isinstance(participation, Participation):
        reject(f"participation must be a Participation (SINGLE, MinSeparation, Cyclic), got {participation!r}")
    return _sensitivity(strategy, participation, n)


def _exact_search(m: FloatArray, pats: list[tuple[int, ...]], n: int, k: int, kappa2: float) -> SensitivityBounds:
    """The exact search over every maximal pattern (F1; for a signed ``M`` the subsets of patterns of at most 8
    steps are scored too, larger ones bounded by ``sum |M|``, F2)."""
    nonneg = bool(np.all(m >= 0))
    arg: tuple[int, ...] = ()
    best_lo, best_hi, arg_s = -math.inf, -math.inf, np.zeros(0)
    for p in pats:
        cands = (
            [p]
            if nonneg
            else [q for r in range(1, len(p) + 1) for q in itertools.combinations(p, r)]
            if len(p) <= 8
            else [p]
        )
        for q in cands:
            lo, hi, s = _pattern_bounds(m, q)
            if lo > best_lo:
                best_lo, arg, arg_s = lo, q, s
            best_hi = max(best_hi, hi)
    if not nonneg and any(len(p) > 8 for p in pats):
        # patterns' subsets not enumerated: a subset's value is at most sum |M| over the pattern
        best_hi = max(best_hi, max(float(np.abs(m[np.ix_(p, p)]).sum()) for p in pats))
    exact = best_hi <= best_lo
    how = "exhaustive search over patterns" + (
        " (non-negative Gram matrix, F1)" if nonneg else " (signed Gram matrix: signs below, F2 above)"
    )
    return _finish(best_lo, max(best_hi, best_lo), n, k, kappa2, arg, arg_s, how, exact)


def _per_epoch(strategy: Strategy, participation: PerEpoch, n: int) -> SensitivityBounds:
    """(F6) At most one participation per epoch. For such a pattern ``S``, ``sum_(i,j in S) |M_ij| <= sum_(i in S)
    R_i`` with ``R_i = sum_e max_(j in e) |M_ij|`` (``S`` meets each epoch at most once), at most ``sum_e max_(i in
    e) R_i``: the upper bound (exact for tree aggregation over epochs that are whole subtrees, where every full
    pattern has the same value). Below: each epoch's argmax of ``R``, improved by coordinate ascent on ``sum_(i,j)
    M_ij``, scored exactly with its best signs (F1, F2)."""
    epochs = participation.epochs(n)
    k = len(epochs)
    c = strategy.matrix(n)
    m = c.T @ c
    col2 = np.diag(m).copy()
    kappa2 = float(col2.max())
    if k == 1:
        j = int(np.argmax(col2))
        return _finish(kappa2, kappa2, n, 1, kappa2, (j,), (1,), "single participation: largest column norm", True)
    if participation.count(n, BRUTE_FORCE_LIMIT) <= BRUTE_FORCE_LIMIT:
        return _exact_search(m, list(participation.patterns(n)), n, k, kappa2)
    absm = np.abs(m)
    b = strategy.bands(n)
    if b is not None and b <= participation.steps_per_epoch + 1:
        # only consecutive epochs interact (steps two epochs apart are > t >= b - 1 apart): a chain programme over
        # the epochs maximises sum |M| exactly (F2's upper value; F1's exact value when M >= 0)
        hi, pat = _epoch_chain(absm, epochs)
        lo, _, signs = _pattern_bounds(m, pat)
        return _finish(
            lo,
            max(hi, lo),
            n,
            k,
            kappa2,
            pat,
            signs,
            "one participation per epoch, banded C: chain programme over the epochs on |C^T C| (F6)",
            bool(np.all(m >= 0)) or hi <= lo,  # M >= 0: the programme's value is F1's exact value
        )
    rows = np.zeros(n)
    for e in epochs:
        rows += absm[:, e.start : e.stop].max(axis=1)
    hi = float(sum(rows[e.start : e.stop].max() for e in epochs))
    pat = [e.start + int(np.argmax(rows[e.start : e.stop])) for e in epochs]
    for _ in range(3):  # coordinate ascent on the pattern's sum of M (F1's value)
        for i, e in enumerate(epochs):
            others = pat[:i] + pat[i + 1 :]
            gain = col2[e.start : e.stop] + 2.0 * m[e.start : e.stop][:, others].sum(axis=1)
            pat[i] = e.start + int(np.argmax(gain))
    lo, _, signs = _pattern_bounds(m, pat)
    return _finish(
        lo,
        max(hi, lo),
        n,
        k,
        kappa2,
        pat,
        signs,
        "one participation per epoch: separable bound on |C^T C| (F6) above, best explicit pattern below",
        hi <= lo,
    )


def _epoch_chain(absm: FloatArray, epochs: list[range]) -> tuple[float, list[int]]:
    """``max sum_(i,j in S) |M_ij|`` over patterns ``S`` with one step per epoch when only consecutive epochs
    interact, by a chain (Viterbi) programme, and a pattern attaining it."""
    first = epochs[0]
    value = np.diag(absm)[first.start : first.stop].copy()
    back: list[FloatArray] = []
    for prev, e in itertools.pairwise(epochs):
        scores = value[:, None] + 2.0 * absm[prev.start : prev.stop, e.start : e.stop]
        arg = np.argmax(scores, axis=0)
        back.append(arg)
        value = scores[arg, np.arange(len(e))] + np.diag(absm)[e.start : e.stop]
    j = int(np.argmax(value))
    pat = [epochs[-1].start + j]
    for e, arg in zip(reversed(epochs[:-1]), reversed(back), strict=True):
        j = int(arg[j])
        pat.append(e.start + j)
    return float(value.max()), pat[::-1]


@_register_cache
@lru_cache(maxsize=64)
def _sensitivity(strategy: Strategy, participation: Participation, n: int) -> SensitivityBounds:
    """``sensitivity`` on validated arguments, memoised: it does not depend on the noise, so a calibration's or a
    sweep's repeated calls share it (strategies and participations are frozen and hashable)."""
    if isinstance(participation, PerEpoch):
        return _per_epoch(strategy, participation, n)
    k = participation.max_count(n)
    coefs = strategy.toeplitz_coefs(n)
    if coefs is not None:
        kappa2 = float(coefs @ coefs)
        if k == 1:
            return _finish(kappa2, kappa2, n, 1, kappa2, (0,), (1,), "single participation: largest column norm", True)
        sep = _separation(participation)
        if _monotone_toeplitz(coefs):
            pat = tuple(range(0, sep * k, sep))[:k]
            v = np.zeros(n)
            for start in pat:
                v[start:] += coefs[: n - start]
            val = float(v @ v)
            return _finish(
                val,
                val,
                n,
                k,
                kappa2,
                pat,
                (1,) * len(pat),
                "non-negative non-increasing Toeplitz: pattern 0, b, 2b, ... is worst (F4)",
                True,
            )
    c = strategy.matrix(n)
    col2 = np.einsum("ij,ij->j", c, c)
    kappa2 = float(col2.max())
    if k == 1:
        j = int(np.argmax(col2))
        return _finish(kappa2, kappa2, n, 1, kappa2, (j,), (1,), "single participation: largest column norm", True)
    sep = _separation(participation)
    b = strategy.bands(n)
    if b is not None and b <= sep:  # F3: the patterns' columns are orthogonal
        if isinstance(participation, Cyclic):
            sums = [float(col2[j::sep].sum()) for j in range(min(sep, n))]
            j = int(np.argmax(sums))
            pat = tuple(range(j, n, sep))
            val = sums[j]
        else:
            val, pat = _dp_pattern(col2, sep, k)
        return _finish(
            val,
            val,
            n,
            k,
            kappa2,
            pat,
            (1,) * len(pat),
            f"{b}-banded strategy, patterns {sep} apart: orthogonal columns (F3)",
            True,
        )
    m = c.T @ c
    nonneg = bool(np.all(m >= 0))
    if nonneg and isinstance(participation, MinSeparation) and sep == 1 and k >= n:
        # every step may be taken: with M >= 0 adding a step never lowers the value (F1), so all steps is worst
        val = pattern_value(c, range(n))
        return _finish(
            val,
            val,
            n,
            n,
            kappa2,
            tuple(range(n)),
            (1,) * n,
            "non-negative Gram matrix, every step allowed: all steps is worst (F1)",
            True,
        )
    pats: list[tuple[int, ...]] | None = None
    if isinstance(participation, Cyclic) or (
        isinstance(participation, MinSeparation) and participation.count(n, BRUTE_FORCE_LIMIT) <= BRUTE_FORCE_LIMIT
    ):
        pats = list(participation.patterns(n))
    if pats is not None:  # exact search over every pattern (subsets: F2's bounds cover them too)
        return _exact_search(m, pats, n, k, kappa2)
    # F5 upper bound, explicit patterns below
    hi = _two_stage_bound(np.abs(m), sep, k)
    cands = [
        _dp_pattern(col2, sep, k)[1],
        tuple(range(0, sep * k, sep))[:k],
        tuple(range(n - 1 - sep * (k - 1), n, sep))[-k:],
    ]
    arg2: tuple[int, ...] = ()
    best_lo, arg_s = -math.inf, np.zeros(0)
    for cand in cands:
        q = tuple(i for i in cand if 0 <= i < n)
        lo, _, s = _pattern_bounds(m, q)
        if lo > best_lo:
            best_lo, arg2, arg_s = lo, q, s
    exact = hi <= best_lo
    return _finish(
        best_lo,
        max(hi, best_lo),
        n,
        k,
        kappa2,
        arg2,
        arg_s,
        "two-stage bound on |C^T C| (F5) above, best explicit pattern below",
        exact,
    )

"""Per-example Renyi-DP accounting for DP-SGD / DP-GD: the RDP baseline of Koskela et al. 2023, Fig. 1 (right) and the
individual RDP filter of Feldman and Zrnic (2021, Thm 4.3), which Koskela et al. 2023, Sec. 5 and App. A build on.

Each recorded step of example ``i`` is the Poisson-subsampled Gaussian mechanism with noise multiplier
``sigma / r`` (``r = min(g, C) / C``, rounded *up* to its bucket's ratio, Koskela et al. 2023, App. D.2). Its RDP curve
``rho_b(alpha)`` is increasing in ``r``, so the bucket's curve bounds every step recorded into it;
RDP composes by adding curves order by order (Mironov 2017, Prop. 1), and the per-example curve is
``sum_b counts[i, b] rho_b(alpha)``, a matrix product. It is converted to (epsilon, delta) by Canonne,
Kamath, Steinke (2020) Prop. 12 (Koskela et al. 2023, Lemma C.4), minimised over the order grid, with the
Bretagnolle-Huber shortcut for large delta -- exactly ``accountants._rdp_math.epsilon_from_rdp``,
vectorised over examples. The curves come from ``accountants._rdp_math.poisson_gaussian_rdp`` (MTZ
2019, exact at every order, remove direction, which bounds the add direction) or, for
``sampling_rate = 1``, the Gaussian's ``alpha r^2 / (2 sigma^2)``.

What it promises: a certified *upper* bound on each example's epsilon of its recorded sequence (the
RDP conversion is lossy; no lower bound). Floating-point terms are covered by a relative margin of
``_REL_MARGIN`` on the composed curve (the series' own rounding is far below it). Under fully adaptive
composition the RDP curves of an individual *filter* (``rdp_filter_active``) are a proven guarantee
(Feldman and Zrnic 2021, Thm 3.1 / 4.3: if ``sum_m rho_m(alpha) <= b(alpha)`` almost surely for a
budget ``b`` fixed in advance, the output is ``(alpha, b(alpha))``-RDP, at every order at once).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import cast

import numpy as np

from .._caches import register as _register_cache
from .._gdp_math import largest_within
from .._types import AnyArray, BoolArray, FloatArray
from .._validation import check_delta, check_positive, check_real
from ..accountants._rdp_math import gaussian_rdp, poisson_gaussian_rdp

__all__ = ["INDIVIDUAL_ORDERS", "bucket_rdp_table", "epsilons_from_rdp_rows", "gaussian_budget_mu", "rdp_filter_active"]

#: Orders of the per-example curves: 86 orders (the fractional MTZ series is the slow part, so
#: fractional orders only in steps of 1/2 below 12); the optimum is interior from epsilon ~ 0.05 to
#: ~ 50 at delta = 1e-5. Against the library's dense grid (``_rdp_math.DEFAULT_ORDERS``, 429 orders)
#: the epsilon is at most about 1% larger.
INDIVIDUAL_ORDERS = np.unique(
    np.concatenate(
        [
            [1.25, 1.5, 1.75],
            np.arange(2.0, 12.0, 0.5),
            np.arange(12.0, 65.0),
            [80.0, 96.0, 128.0, 160.0, 192.0, 256.0, 384.0, 512.0, 768.0, 1024.0],
        ]
    )
)
_REL_MARGIN = 1e-9  # relative margin on composed RDP curves (series evaluation and summation rounding)


def _curve(noise: float, q: float, orders: FloatArray) -> FloatArray:
    """The RDP curve of one step (noise multiplier ``noise``, sampling rate ``q``) at ``orders`` (memoised)."""
    return _curve_at(float(noise), float(q), np.ascontiguousarray(orders, dtype=float).tobytes())


@_register_cache
@lru_cache(maxsize=4096)
def _curve_at(noise: float, q: float, orders: bytes) -> FloatArray:
    """``_curve`` keyed by the orders' bytes (read-only: the memo shares it)."""
    o = np.frombuffer(orders, dtype=float)
    out = gaussian_rdp(mu=1.0 / noise, orders=o) if q >= 1.0 else poisson_gaussian_rdp(q=q, sigma=noise, orders=o)
    out = np.asarray(out, dtype=float)
    out.flags.writeable = False
    return out


def bucket_rdp_table(
    sigma: float, q: float, ratios: FloatArray, orders: FloatArray, used: FloatArray | None = None
) -> FloatArray:
    """``(len(ratios), len(orders))`` table: row ``b`` is the RDP curve (upper bound) of one step of the
    Poisson-subsampled Gaussian with sensitivity ratio ``ratios[b]`` (noise multiplier
    ``sigma / ratios[b]``); ratio 0 gives the zero curve.

    Parameters
    ----------
    sigma : float
        Noise multiplier of a full-sensitivity step, ``> 0``.
    q : float
        Poisson sampling rate in ``(0, 1]``.
    ratios : array_like
        Sensitivity ratios of the buckets, in ``[0, 1]``.
    orders : numpy.ndarray
        Rényi orders ``> 1``.
    used : numpy.ndarray, optional
        Boolean mask of the rows to fill (the others stay 0); default all.

    Returns
    -------
    numpy.ndarray
        The table, float64 of shape ``(len(ratios), len(orders))``.

    Raises
    ------
    ValueError
        ``sigma`` not positive or ``q`` outside ``(0, 1]``.

    References
    ----------
    Mironov, Talwar, Zhang 2019 (subsampled Gaussian RDP); Koskela et al. 2023, Sec. 5.
    """
    check_positive("sigma", sigma)
    check_real("q", q, low=0.0, low_open=True, high=1.0, high_open=False)
    ratios = np.asarray(ratios, float)
    table = np.zeros((ratios.size, orders.size))
    rows = range(ratios.size) if used is None else np.nonzero(used)[0]
    for b in rows:
        if ratios[b] > 0:
            table[b] = _curve(float(sigma / ratios[b]), float(q), orders)
    return table


def compose_rows(counts: AnyArray, table: FloatArray, block: int = 65536) -> FloatArray:
    """Per-row composed curves ``counts @ table`` with the relative margin, in row blocks."""
    out = np.empty((counts.shape[0], table.shape[1]))
    for s in range(0, counts.shape[0], block):
        out[s : s + block] = np.asarray(counts[s : s + block], dtype=float) @ table
    return out * (1.0 + _REL_MARGIN)


def epsilons_from_rdp_rows(orders: FloatArray, rdp: FloatArray, delta: float) -> tuple[FloatArray, FloatArray]:
    """``_rdp_math.epsilon_from_rdp`` for every row of ``rdp`` (shape ``(N, len(orders))``): the smallest
    epsilon over the orders of CKS 2020 Prop. 12 (Koskela et al. 2023, Lemma C.4), clipped at 0; 0 where
    ``delta >= sqrt(1 - exp(-min_alpha rdp))`` (Bretagnolle-Huber); a row of zeros gives 0.

    Parameters
    ----------
    orders : array_like
        Rényi orders ``> 1``.
    rdp : array_like
        RDP curves, shape ``(N, len(orders))`` (upper bounds).
    delta : float
        Target delta in ``(0, 1)``.

    Returns
    -------
    tuple of numpy.ndarray
        ``(epsilons, optimal orders)``, each of length N; the epsilons are certified upper bounds.

    Raises
    ------
    ValueError
        ``delta`` out of range.

    References
    ----------
    Mironov 2017, Prop. 3; Canonne, Kamath, Steinke 2020, Prop. 12; Koskela et al. 2023, Lemma C.4.
    """
    delta = check_delta("delta", delta)
    a = np.asarray(orders, float)[None, :]
    r = np.asarray(rdp, float)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        terms = r + np.log1p(-1.0 / a) - (math.log(delta) + np.log(a)) / (a - 1.0)
    terms = np.where(np.isfinite(r), terms, math.inf)
    k = np.argmin(terms, axis=1)
    eps = np.maximum(terms[np.arange(r.shape[0]), k], 0.0)
    kl = np.min(np.where(np.isfinite(r), r, math.inf), axis=1)
    eps = np.where(delta * delta >= -np.expm1(-kl), 0.0, eps)
    return eps, np.asarray(orders, float)[k]


def gaussian_budget_mu(epsilon: float, delta: float, orders: FloatArray) -> float:
    """The largest ``B`` whose Gaussian RDP curve ``alpha B^2 / 2`` converts to at most ``epsilon``.

    The budget of Koskela et al. 2023, Sec. 5: the filtered composition is RDP-dominated by ``N(B, 1)`` vs ``N(0, 1)``
    (eq. (5.3)) and that curve, rounded up by ``_REL_MARGIN``, is converted to (epsilon, delta) by CKS
    2020 Prop. 12 over ``orders`` (Koskela et al. 2023, Lemma C.4). This is an RDP conversion, not the mu-GDP curve
    (C.2): for the same (epsilon, delta) it gives a smaller ``B`` than ``gdp.gdp_mu`` (Koskela et al. 2023, Sec. 4.1).
    Root of ``epsilon(B) = epsilon`` by ``tightdp._gdp_math.largest_within`` (the search ``gdp_mu``
    uses too; relative tolerance ``1e-12``); the answer is a ``B`` whose converted epsilon was evaluated and
    found ``<= epsilon``.

    Parameters
    ----------
    epsilon : float
        Target epsilon, ``>= 0``.
    delta : float
        Target delta in ``(0, 1)``.
    orders : array_like
        Renyi orders ``> 1``.

    Returns
    -------
    float
        The budget ``B`` (rounded down).

    Raises
    ------
    ValueError
        No ``B <= 1e6`` exceeds ``epsilon`` (an epsilon too large for an RDP budget).
    """
    orders = np.asarray(orders, float)

    def eps_of(b: float) -> float:
        curve = gaussian_rdp(mu=b, orders=orders)[None, :] * (1.0 + _REL_MARGIN)
        return float(epsilons_from_rdp_rows(orders, curve, delta)[0][0])

    out = largest_within(lambda b: eps_of(b) - epsilon, rtol=1e-12)
    if out is None:
        raise ValueError(f"epsilon={epsilon!r} is too large for an RDP budget")
    return out


def rdp_filter_active(spent: FloatArray, next_step: FloatArray, budget: FloatArray) -> BoolArray:
    """Individual RDP filter (Feldman and Zrnic 2021, Alg. 3 / Thm 4.3, with the budget curve ``budget``
    fixed in advance at every order): example ``i`` takes the next step iff
    ``spent[i] + next_step[i] <= budget`` at *every* order (each order's filter is valid on its own,
    so the conjunction is valid at all orders at once).

    Parameters
    ----------
    spent : numpy.ndarray
        Each example's composed RDP so far, shape ``(N, len(orders))``.
    next_step : numpy.ndarray
        Each example's RDP of the next step, same shape.
    budget : numpy.ndarray
        The budget curve, length ``len(orders)``.

    Returns
    -------
    numpy.ndarray
        Boolean, length N: whether each example may take the next step.

    Raises
    ------
    ValueError
        Shapes that do not broadcast.

    References
    ----------
    Feldman and Zrnic 2021, Alg. 3, Thm 4.3; Koskela et al. 2023, Sec. 5.
    """
    return cast("BoolArray", np.all(spent + next_step <= budget[None, :], axis=1))

"""A one-dimensional certified lower bound for random allocation and shuffling: the post-processing
``max_i x_i`` of the epoch's output, its cell masses with certified relative errors, merged onto the
privacy-loss grid (a dominated pair), and the composition of such pairs into a lower bound on epsilon.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np
from scipy import special

from .._caches import register as _register_cache
from .._types import FloatArray
from ..errors import PrecisionError
from ._allocation_epoch import _U, _merge_to_grid

if TYPE_CHECKING:
    from ..pld import DiscretisedLoss

#: cells whose computed mass may be off by more than this factor are dropped (a dominated pair may lose atoms)
_CELL_REL_MAX = 1e-7


def max_statistic_cells(
    sigma: float, t: int, mean_p: float = 1.0, mean_q: float = 0.0, cells: int = 20000, shifted: int = 1
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray]:
    """Cell masses of ``M = max_i x_i`` under ``P`` and ``Q`` (see ``max_statistic_pld``) on ``cells``
    equal cells, each with a certified relative error bound.

    ``log F(m) = k log_ndtr((m - mean)/s) + (t - k) log_ndtr(m/s)`` is computed with absolute error at most
    ``a(m)``: each ``log Phi(x)`` with the error bound of ``log_ndtr_and_error`` below (the upper tail's
    relative error grows like ``x^2 u``: scipy's own ``log_ndtr`` is off by 2e-9 relative at ``x = 12``, so
    it is not used there), then the sum's rounding. Where ``F(m_{i+1}) <= 1/2`` the cell mass is taken from the CDF in log space,
    ``F(m_{i+1}) (-expm1(log F(m_i) - log F(m_{i+1})))``: with ``D = log F(m_{i+1}) - log F(m_i) > 0``,
    ``|d log(1 - e^{-D}) / dD| = 1 / (e^D - 1) <= 1 / D``, so its relative error is at most
    ``a_{i+1} + (a_i + a_{i+1}) / D`` (first order, doubled) plus a few ulps. Elsewhere it is a difference
    of survival values ``S = -expm1(log F)``, each with absolute error ``a (1 - S) + 2 u S``: relative error
    ``(err_i + err_{i+1}) / mass + 2 u``. (So the lower tail is not a difference of values near 1.)

    Returns ``(edges, P, Q, rel_p, rel_q)``: the ``cells + 1`` edges and, per cell, the masses and their
    relative error bounds (infinite where the mass is 0).
    """
    if not 1 <= shifted <= t:
        raise ValueError(f"shifted must be in 1..t = {t}, got {shifted!r}")
    lo = min(mean_p, mean_q) - 9.0 * sigma
    hi = max(mean_p, mean_q) + 10.0 * sigma + sigma * math.sqrt(2.0 * math.log(max(t, 2)))
    m = np.linspace(lo, hi, cells + 1)

    def log_ndtr_and_error(mean: float) -> tuple[FloatArray, FloatArray]:
        # log Phi(x) and an absolute error bound. x <= 0: scipy's log_ndtr (within 4.5 ulps of its value,
        # checked against mpmath); x > 0: log1p(-ndtr(-x)), ndtr(-x) within 3.4 u (1 + x^2) relative (x's
        # conditioning; checked against mpmath), bounded here by 8 u (1 + x^2). Plus the rounding of x
        # itself, dx = u (2|x| + (|m| + |mean|) / s), times the slope phi(x) / Phi(x): at most |x| + 1 for
        # x <= 0 (Mills ratio), at most 2 Phi(-x) (x + 1) for x > 0.
        x = (m - mean) / sigma
        ax = np.abs(x)
        dx = _U * (2.0 * ax + (np.abs(m) + abs(mean)) / sigma)
        tail = special.ndtr(-ax)
        neg = x <= 0
        v = np.where(neg, special.log_ndtr(np.minimum(x, 0.0)), np.log1p(-tail))
        err = np.where(
            neg,
            8 * _U * np.abs(v) + (ax + 1.0) * dx,
            2.0 * tail * (8 * _U * (1.0 + ax * ax) + (ax + 1.0) * dx) + 2 * _U * np.abs(v) + 1e-300,
        )
        return v, err

    rest, rest_err = log_ndtr_and_error(0.0)
    out = []
    for mean in (mean_p, mean_q):
        own, own_err = log_ndtr_and_error(mean)
        log_f = shifted * own + (t - shifted) * rest
        a = (
            shifted * own_err
            + (t - shifted) * rest_err
            + 4 * _U * (shifted * np.abs(own) + (t - shifted) * np.abs(rest))
        )
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            # lower part: from the CDF in log space
            d = log_f[1:] - log_f[:-1]
            low = np.exp(log_f[1:]) * -np.expm1(-d)
            rel_low = 2.0 * (a[1:] + (a[:-1] + a[1:]) / d) + 8 * _U
            # upper part: differences of survival values
            sf = -np.expm1(log_f)
            err = a * (1.0 - sf) + 2 * _U * sf
            high = sf[:-1] - sf[1:]
            rel_high = (err[:-1] + err[1:]) / high + 2 * _U
        use_low = log_f[1:] <= -math.log(2.0)
        mass = np.maximum(np.where(use_low, low, high), 0.0)
        rel = np.where(use_low, rel_low, rel_high)
        # subnormal masses have no relative accuracy: dropped with the infinite bounds
        rel = np.where((mass > 1e-290) & np.isfinite(rel) & (rel >= 0), rel, np.inf)
        out.append((mass, rel))
    (P, rp), (Q, rq) = out
    return m, P, Q, rp, rq


@_register_cache
@lru_cache(maxsize=8)
def max_statistic_pld(
    sigma: float,
    t: int,
    h: float,
    mean_p: float = 1.0,
    mean_q: float = 0.0,
    reverse: bool = False,
    cells: int = 20000,
    shifted: int = 1,
) -> DiscretisedLoss:
    """A discretised loss on ``h Z`` *dominated* by the pair ``P = (1/t) sum_i N(mean_p e_i, s^2 I)``
    against ``Q = (1/t) sum_i N(mean_q e_i, s^2 I)`` (``reverse``: ``Q`` against ``P``); with
    ``shifted = k``, ``P`` and ``Q`` are the uniform mixtures over the ``k``-subsets ``S`` of the steps of
    ``N(mean 1_S, s^2 I)`` (``mean_q = 0``: one epoch of k-out-of-``t`` allocation, remove direction).

    ``mean_q = 0`` is one epoch of 1-out-of-``t`` allocation (remove direction);
    ``(2, 1)`` is Chua et al.'s shuffling pair (2403.17673). The post-processing
    ``M = max_i x_i`` is a garbling, so its pair ``F(m) = Phi((m - mean)/s) Phi(m/s)^(t-1)``
    is dominated (Blackwell); its cells are merged into atoms (a garbling) and
    onto the loss grid (merge-to-the-grid), so the result is dominated for any
    mesh (``k`` shifted coordinates: ``Phi((m - mean)/s)^k Phi(m/s)^(t-k)``, the same for every ``S``).

    Floating point (``max_statistic_cells``): every cell mass carries a certified relative error; cells
    whose bound exceeds ``_CELL_REL_MAX`` are dropped with the mass outside the cell range (dropping atoms
    of a pair only lowers its hockey-stick divergence), the others' ratios are within ``1 +- (r_P + r_Q)``
    of the exact ones, so every loss is lowered by ``2 (r_P + r_Q)`` (lowering losses lowers delta), and the
    masses carry ``rel_error = r_P`` (the composition's ``(1 +- r)^k`` factors). Cheap for any ``sigma``.
    """
    from ..pld import DiscretisedLoss

    _, P, Q, rp, rq = max_statistic_cells(sigma, t, mean_p, mean_q, cells, shifted)
    if reverse:
        P, Q, rp, rq = Q, P, rq, rp
    keep = (P > 0) & (Q > 0) & (rp <= _CELL_REL_MAX) & (rq <= _CELL_REL_MAX)
    if not np.any(keep):
        raise PrecisionError("max statistic: no cell mass is certified")
    r_p, r_q = float(np.max(rp[keep])), float(np.max(rq[keep]))
    i0, pmf = _merge_to_grid(P[keep] / Q[keep], P[keep], h)
    return DiscretisedLoss(
        h=h,
        start=i0,
        pmf=pmf,
        shift=-(2.0 * (r_p + r_q) + 1e-12),
        infinity_mass=0.0,
        truncated_mass=0.0,
        mean_error=0.0,
        coupling_range=0.0,
        tv_error=0.0,
        rel_error=r_p + 16 * _U,
    )


def lower_bound_epsilon(
    dominated_fn: Callable[[float], DiscretisedLoss], epochs: int, delta: float, h0: float, passes: int = 3
) -> float:
    """The best certified lower bound on epsilon from compositions of ``dominated_fn(h)`` over ``epochs``
    on meshes ``h0, h0/2, ...`` (each pass is a bound on its own; the largest is kept)."""
    from ..pld import chernoff_epsilon, compose, epsilon_bounds

    best, h = 0.0, h0
    for _ in range(passes):
        d = dominated_fn(h)
        parts = [(d, epochs)]
        tilt = chernoff_epsilon(parts, delta)[1] if delta < 1e-6 else 0.0
        comp = compose(parts, tilt=tilt, tau=1e-13 if tilt else min(1e-6, 5e-5 * delta))
        lo = epsilon_bounds(comp, delta, 1e-300, need="lower").lower
        if lo <= best + 1e-3:
            best = max(best, lo)
            break
        best = max(best, lo)
        h /= 2.0
    return best

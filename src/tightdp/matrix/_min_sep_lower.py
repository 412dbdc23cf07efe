"""The lower end of ``tightdp.matrix.accounting.MinSepSampling``: the explicit pair of a record with a fixed
gradient direction, post-processed by a linear statistic that counts its participations in a window (a 1-D
mixture of Gaussians over the renewal chain's exact count law, ``_renewal``).

**Rounding of the lower end.** The mixing law ``w`` of the count statistic is computed in floating point; every
computed probability is within relative ``rho_law`` (``law_error``) of the exact one. Its tails (exact mass
``d``) are dropped and the rest normalised, so the analysed ``P~ = sum w~_k N(k, s^2)`` satisfies, as densities,
``p~ >= (1 - rho) p - d_D`` and ``p~ <= (1 + rho) p + r phi_top`` (``d_D`` the dropped components, ``r`` the
normalisation residue that ``MixtureOfGaussians`` puts on its top component, remove side only). Hence
``H_eps(P || Q) >= (H_(eps + log(1 + rho))(P~ || Q) - r) / (1 + rho)`` and ``H_eps(Q || P) >= H_(eps - log(1 -
rho))(Q || P~) - e^eps d``. If ``L`` is a certified lower end of ``(P~, Q)`` at ``delta1 = (1 + rho) delta + r +
e^L d``, then for every ``eps < L - log((1 + rho) / (1 - rho))`` one of the two directions of the attained pair
exceeds ``delta``: ``L - log((1 + rho) / (1 - rho))`` is a lower end of the attained pair. The tails are cut
at ``1e-3 delta e^-eps`` (an estimate of ``eps``), so ``e^L d`` stays negligible.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import numpy as np
from scipy import linalg, special

from .._caches import register as _register_cache
from .._types import FloatArray
from ..errors import TightDPError
from ..mechanisms.mixture import MixtureOfGaussians
from ._ledgers import _epsilon_of, _up
from ._renewal import law_error, participation_law
from .strategies import Strategy

__all__ = ["projection_lower", "projection_scale", "projection_solver"]

_U = float(np.finfo(float).eps) / 2
#: most bands solved through LAPACK's banded solver (its band storage is ``bands x n``)
BANDED_SOLVE_MAX = 512


#: ``C^T v`` and an entrywise bound on its floating-point error
Apply = Callable[[FloatArray], tuple[FloatArray, FloatArray]]


@_register_cache
@lru_cache(maxsize=16)
def projection_solver(strategy: Strategy, n: int) -> tuple[Callable[[FloatArray], FloatArray], Apply] | None:
    """A solver of ``C^T v = w`` (least norm) and the product ``v -> C^T v`` with its rounding bound (memoised: it
    does not depend on the noise; the functions returned are pure).

    A banded Toeplitz ``C`` (``c_0 != 0``) never materialises the matrix: ``C^T`` is upper-banded, solved by
    LAPACK's banded solver, and ``(C^T v)_j = sum_(k < b) c_k v_(j + k)`` is summed band by band (error at most
    ``1.01 (b + 2) u_f sum_k |c_k| |v_(j + k)|``). An invertible causal ``C``: a triangular solve; else ``v = C
    (C^T C)^{-1} w`` through a Cholesky factor (error bound ``1.01 (m + 2) u_f (|C|^T |v|)_j``, ``m`` rows).

    Parameters
    ----------
    strategy : Strategy
        The strategy ``C``.
    n : int
        Steps.

    Returns
    -------
    tuple or None
        ``(solve, apply)``; ``None`` when ``C^T C`` is singular.
    """
    coefs = strategy.toeplitz_coefs(n)
    b = strategy.bands(n)
    if coefs is not None and b is not None and coefs[0] != 0.0:
        cb = np.asarray(coefs[:b], float)
        acb = np.abs(cb)

        def apply_t(v: FloatArray) -> tuple[FloatArray, FloatArray]:
            # direct sums (np.correlate, no FFT): u_j = sum_k c_k v_(j + k) is entry j + b - 1 of the full one
            u = np.correlate(v, cb, "full")[b - 1 : b - 1 + n]
            mag = np.correlate(np.abs(v), acb, "full")[b - 1 : b - 1 + n]
            return u, 1.01 * (b + 2) * _U * mag

        if b <= BANDED_SOLVE_MAX:
            ab = np.zeros((b, n))
            for k in range(b):  # upper form: ab[b - 1 - k, j] = (C^T)[j - k, j] = c_k
                ab[b - 1 - k, k:] = cb[k]

            def solve_t(w: FloatArray) -> FloatArray:
                return np.asarray(linalg.solve_banded((0, b - 1), ab, w, check_finite=False), float)

        else:  # many bands (a BLT): back substitution, O(n b) time and O(n) memory

            def solve_t(w: FloatArray) -> FloatArray:
                v = np.zeros(n)
                for j in range(n - 1, -1, -1):
                    span = min(b, n - j)
                    v[j] = (w[j] - float(cb[1:span] @ v[j + 1 : j + span])) / cb[0]
                return v

        return solve_t, apply_t
    c = strategy.matrix(n)
    m = c.shape[0]

    def apply_c(v: FloatArray) -> tuple[FloatArray, FloatArray]:
        return c.T @ v, 1.01 * (m + 2) * _U * (np.abs(c).T @ np.abs(v))

    if strategy.causal and c.shape[0] == c.shape[1] and bool(np.all(np.diag(c) != 0.0)):
        ct = np.ascontiguousarray(c.T)
        return lambda w: np.asarray(linalg.solve_triangular(ct, w, lower=False, check_finite=False), float), apply_c
    try:
        fac = linalg.cho_factor(c.T @ c, check_finite=False)
    except linalg.LinAlgError:
        return None
    return lambda w: np.asarray(c @ linalg.cho_solve(fac, w, check_finite=False), float), apply_c


def projection_scale(apply: Apply, v: FloatArray, weights: FloatArray) -> float | None:
    """``||v|| / lambda`` (rounded up) of a linear statistic ``<v, y>`` whose mean is ``lambda <weights, x>`` for an
    attained gradient sequence.

    With ``u = C^T v`` (computed, each entry within ``e_j`` of the exact value, ``apply``'s bound) and ``lambda <=
    min_j (u_j - e_j) / weights_j`` over the support, the record whose gradient is ``g_j = lambda weights_j /
    (C^T v)_j`` (in ``[0, 1]``) times a fixed unit vector on the support and zero elsewhere gives ``<v, y> ~
    N(lambda <weights, x>, sigma^2 ||v||^2)``.

    Parameters
    ----------
    apply : callable
        ``v -> (C^T v, entrywise error bound)`` (``projection_solver``).
    v : numpy.ndarray
        Any vector of floats, one per row of ``C`` (ideally ``C^T v = weights``).
    weights : numpy.ndarray
        Non-negative weights on the ``n`` steps.

    Returns
    -------
    float or None
        ``||v|| / lambda`` rounded up; ``None`` when no positive ``lambda`` is found.
    """
    if not np.all(np.isfinite(v)):
        return None
    u, err = apply(v)
    sup = weights > 0
    lam = float(np.min((u[sup] - err[sup] - 1e-300) / weights[sup])) * (1.0 - 4 * _U)
    if not lam > 0.0:
        return None
    vv = v * v
    if not np.all(np.isfinite(vv)) or not math.isfinite(float(np.sum(vv))):  # a statistic far too noisy anyway
        return None
    norm = math.sqrt(math.fsum(vv.tolist())) * (1.0 + 2 * (v.size + 4) * _U)
    return _up(norm / lam, 1)


def _trim(pmf: FloatArray, tail: float) -> tuple[int, int, float]:
    """``(first, last, dropped)``: the counts kept when at most ``tail`` of the mass is dropped at each end."""
    cum = np.cumsum(pmf)
    first = int(np.searchsorted(cum, tail, side="right"))  # cum[first - 1] <= tail
    rcum = np.cumsum(pmf[::-1])
    last = pmf.size - 1 - int(np.searchsorted(rcum, tail, side="right"))
    first = min(first, last)
    dropped = (float(cum[first - 1]) if first > 0 else 0.0) + (
        float(rcum[pmf.size - 2 - last]) if last < pmf.size - 1 else 0.0
    )
    return first, last, dropped


def _mixture_epsilon_estimate(pmf: FloatArray, scale: float, delta: float) -> float:
    """A fast (uncertified) epsilon of ``(sum_k pmf_k N(k, s^2), N(0, s^2))`` at ``delta``, both directions, from
    half-line tests on a grid; used only to choose which statistic the certified engine evaluates."""
    first, last, _ = _trim(pmf, 1e-3 * delta)
    k = np.arange(first, last + 1, dtype=float)
    w = pmf[first : last + 1]
    xs = np.linspace(min(0.0, k[0]) - 12 * scale, k[-1] + 12 * scale, 3000)
    z = (xs[:, None] - k[None, :]) / scale
    p_sf = special.ndtr(-z) @ w  # P(X > x)
    p_cdf = special.ndtr(z) @ w
    q_sf = special.ndtr(-xs / scale)
    q_cdf = special.ndtr(xs / scale)

    def delta_at(eps: float) -> float:
        e = math.exp(eps)
        return float(max(np.max(p_sf - e * q_sf), np.max(q_cdf - e * p_cdf)))

    if delta_at(0.0) <= delta:
        return 0.0
    lo, hi = 0.0, 1.0
    while delta_at(hi) > delta and hi < 700.0:  # e^eps must stay finite: the bracket stops at 700
        lo, hi = hi, min(2 * hi, 700.0)
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if delta_at(mid) > delta else (lo, mid)
    return lo


def _windows(n: int) -> list[tuple[int, int]]:
    lengths = sorted({n} | {min(n, 4**i) for i in range(1 + n.bit_length() // 2)})
    out = {(0, L) for L in lengths} | {(n - L, n) for L in lengths}
    return sorted(out)


def projection_lower(
    strategy: Strategy,
    sigma: float,
    n: int,
    p: float,
    min_sep: int,
    warm_start: bool,
    delta: float,
    upper: float,
    eps_error: float | None,
    rel_error: float | None,
) -> tuple[float, dict[str, Any]]:
    """The certified lower end from the best window statistic (``MinSepSampling``'s docstring, "Lower").

    Parameters
    ----------
    strategy : Strategy
        The strategy ``C``.
    sigma : float
        The noise multiplier.
    n : int
        Steps.
    p : float
        The rate.
    min_sep : int
        The least distance.
    warm_start : bool
        The stationary start.
    delta : float
        The target delta.
    upper : float
        A proven upper end of the run (caps the first guess of the rounding slack).
    eps_error, rel_error : float or None
        Accuracy of the engine.

    Returns
    -------
    tuple
        ``(lower end, details)``; ``0.0`` when no statistic is usable.
    """
    cands: list[tuple[float, int, int, float, FloatArray]] = []
    solver = projection_solver(strategy, n)
    if solver is None:
        return 0.0, {"lower": "C^T C is singular: no linear statistic"}
    solve, apply = solver
    for a, z in _windows(n):
        w = np.zeros(n)
        w[a:z] = 1.0
        with np.errstate(all="ignore"):
            proj = projection_scale(apply, solve(w), w)
        if proj is None:
            continue
        scale = _up(proj * sigma, 1)  # a larger noise is a post-processing (add independent noise)
        pmf = participation_law(n, p, min_sep, warm_start, a, z)
        cands.append((_mixture_epsilon_estimate(pmf, scale, delta), a, z, scale, pmf))
    if not cands:
        return 0.0, {"lower": "no usable linear statistic"}
    cands.sort(key=lambda r: -r[0])
    rho_law = law_error(n, min_sep)  # relative error of every computed probability
    best, where, shift_used = 0.0, None, 0.0
    for est, a, z, scale, pmf in cands[:2]:
        # the tails of the count's law are dropped (mass d, tiny against delta e^-eps) and the rest normalised
        first, last, dropped = _trim(pmf, 1e-3 * delta * math.exp(-min(est, upper, 600.0)))
        kept = pmf[first : last + 1]
        size = kept.size
        total = math.fsum(kept.tolist()) * (1.0 + 2 * (size + 2) * _U)  # at least the sum: fsum(probs) <= 1
        probs = kept / total
        while math.fsum(probs.tolist()) > 1.0:  # not expected; each pass costs one more ulp in rho
            probs = probs * (1.0 - 2 * _U)
            rho_law += 2 * _U
        residue = max(0.0, 1.0 - math.fsum(probs.tolist()))  # MixtureOfGaussians adds it at the top (remove side)
        d = dropped * (1.0 + 2 * rho_law + 2 * (pmf.size + 2) * _U)  # the exact mass of the dropped tails
        rho = 2.5 * (rho_law + 2 * (size + 2) * _U) + 1.1 * d / (1.0 - d)
        shift = math.log1p(rho) - math.log1p(-rho)
        mog = MixtureOfGaussians(
            noise_multiplier=scale,
            sensitivities=tuple(float(k) for k in range(first, last + 1)),
            probabilities=tuple(probs),
        )
        # certify (P~, Q) at delta1 = (1 + rho) delta + residue + e^lo d (module docstring: rounding); a first
        # guess of e^lo from the estimate, then once more at the answer's own if the guess was short (a larger
        # delta only lowers the answer, so the second pass settles)
        guess = min(est, upper, 700.0)
        lo = 0.0
        for _ in range(3):
            delta1 = (1.0 + rho) * delta + residue + math.exp(guess) * d
            if delta1 >= 1.0:
                lo = 0.0
                break
            try:
                lo = _epsilon_of([(mog, 1)], delta1 * (1.0 + 4 * _U), eps_error, rel_error).lower
            except TightDPError:
                lo = 0.0
                break
            if lo <= guess:
                break
            guess = min(lo, 700.0)
        else:
            lo = 0.0  # not settled: claim nothing
        lo = lo - shift
        if lo > best:
            best, where, shift_used = lo, (a, z, scale), shift
    if where is None:
        return 0.0, {"lower": "no statistic with a positive certified lower end"}
    a, z, scale = where
    return best, {
        "lower": (
            f"explicit pair (a fixed-direction gradient), post-processed by the linear statistic counting the "
            f"participations in steps [{a}, {z}): a 1-D mixture of N(k, {scale:.6g}^2) with the exact renewal law "
            f"(rounding: lower end moved down by {shift_used:.3g})"
        )
    }

"""b-min-sep sampling with a matrix mechanism: the certified ends of ``tightdp.matrix.accounting.MinSepSampling``
(its docstring states the proofs; Dong & Ganesh 2026, arXiv 2602.09338; jax_privacy's ``BMinSepSampling``).

The sampler is a renewal process per record: at every step a record that did not take part in the previous
``min_sep - 1`` steps ("eligible") joins the batch with probability ``p``, on a fresh coin. The chain's state
is ``d``, the number of steps until the record is eligible again (``0``: eligible now); a participation sets
``d = min_sep - 1``. A cold start is ``d = 0``; the warm (stationary) start is jax_privacy's: ``d = 0`` with
probability ``1 / (1 + (min_sep - 1) p)`` and ``d = k`` (``k = 1 .. min_sep - 1``) with ``p / (1 + (min_sep - 1)
p)`` each.

**Rounding slack of the lower end.** The mixing law ``w`` of the count statistic is computed in floating point
as ``w~`` with ``||w~ - w||_1 <= eta`` (``law_error``, doubled for the normalisation). The pair ``(P~, Q)`` built on
``w~`` is within total variation ``eta`` of the attained ``(P, Q)`` on the record's side, so
``H_eps(P || Q) >= H_eps(P~ || Q) - eta`` and ``H_eps(Q || P) >= H_eps(Q || P~) - e^eps eta``. If ``lo`` is a
certified lower end of ``(P~, Q)`` at ``delta + gamma`` with ``gamma >= e^lo eta``, then at every
``eps < lo`` the attained pair has ``delta(eps) > delta + gamma - e^eps eta >= delta``: ``lo`` is a lower end of
the attained pair at ``delta``.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy import linalg, optimize, special

from .._types import FloatArray
from ..bounds import Bounds
from ..errors import TightDPError
from ..mechanisms.basic import Gaussian
from ..mechanisms.mixture import MixtureOfGaussians
from ._ledgers import Ledger, _column_norms, _combine, _down, _epsilon_of, _grouped_up, _sampled, _sens_details, _up
from .sensitivity import Cyclic, MinSeparation, sensitivity
from .strategies import Strategy

__all__ = [
    "block_lengths",
    "block_split",
    "initial_state",
    "law_error",
    "min_sep_epsilon",
    "participation_law",
    "projection_scale",
    "tighter",
]

_U = float(np.finfo(float).eps) / 2


def initial_state(p: float, min_sep: int, warm_start: bool) -> FloatArray:
    """The law of the chain's state ``d`` (steps until eligible) at step 0.

    Parameters
    ----------
    p : float
        The rate ``p`` in ``(0, 1]``.
    min_sep : int
        The least distance between two participations (``>= 1``).
    warm_start : bool
        The stationary start (jax_privacy's ``warm_start=True``) or eligible at step 0.

    Returns
    -------
    numpy.ndarray
        ``min_sep`` probabilities, index ``d``.
    """
    out = np.zeros(min_sep)
    if not warm_start or min_sep == 1:
        out[0] = 1.0
        return out
    out[0] = 1.0 / (1.0 + (min_sep - 1) * p)
    out[1:] = p * out[0]
    return out


def participation_law(
    n: int, p: float, min_sep: int, warm_start: bool, start: int = 0, stop: int | None = None
) -> FloatArray:
    """The exact law of the number of participations in steps ``[start, stop)`` of an ``n``-step run.

    A dynamic program over the renewal chain (module docstring): ``law[d, k]`` is the probability of state
    ``d`` with ``k`` participations counted so far. Every entry is a sum of at most two non-negative terms,
    each a product by ``p`` or ``1 - p``, so in floating point each computed entry is within relative
    ``(3 t + 8) u`` of the exact one after ``t`` steps (``law_error`` bounds the total).

    Parameters
    ----------
    n : int
        Steps of the run (the window must lie in ``[0, n]``).
    p : float
        The rate in ``(0, 1]``.
    min_sep : int
        The least distance between two participations.
    warm_start : bool
        The stationary start.
    start, stop : int, optional
        The window (default the whole run).

    Returns
    -------
    numpy.ndarray
        ``pmf[k]``, ``k = 0 .. ceil((stop - start) / min_sep)``.

    Raises
    ------
    ValueError
        A window outside ``[0, n]``.
    """
    stop = n if stop is None else stop
    if not 0 <= start <= stop <= n:
        raise ValueError(f"window [{start}, {stop}) must lie in [0, {n}]")
    law = initial_state(p, min_sep, warm_start)
    for _ in range(start):  # before the window: the state only
        eligible = law[0]
        law = np.r_[law[1:], 0.0]
        law[0] += eligible * (1.0 - p)
        law[-1] += eligible * p
    kmax = -(-(stop - start) // min_sep)
    joint = np.zeros((min_sep, kmax + 1))
    joint[:, 0] = law
    for _ in range(stop - start):
        eligible = joint[0].copy()
        joint = np.vstack([joint[1:], np.zeros((1, kmax + 1))])
        joint[0] += eligible * (1.0 - p)
        joint[-1, 1:] += eligible[:-1] * p
    return np.asarray(joint.sum(axis=0), dtype=np.float64)


def law_error(n: int, min_sep: int) -> float:
    """A bound on the l1 distance between ``participation_law``'s floating-point answer and the exact law.

    Parameters
    ----------
    n : int
        Steps of the run.
    min_sep : int
        The least distance (the final sum over states adds ``min_sep`` terms).

    Returns
    -------
    float
        The bound (the exact law sums to one).
    """
    return 1.01 * (3 * n + min_sep + 16) * _U


def projection_solver(strategy: Strategy, n: int) -> tuple[FloatArray, Callable[[FloatArray], Any]] | None:
    """``C`` and a solver of ``C^T v = w`` (least norm): a triangular solve for an invertible causal ``C``,
    else ``v = C (C^T C)^{-1} w`` through a Cholesky factor; ``None`` when ``C^T C`` is singular.

    Parameters
    ----------
    strategy : Strategy
        The strategy ``C``.
    n : int
        Steps.

    Returns
    -------
    tuple or None
        ``(C, solve)``.
    """
    c = strategy.matrix(n)
    if strategy.causal and c.shape[0] == c.shape[1] and bool(np.all(np.diag(c) != 0.0)):
        ct = np.ascontiguousarray(c.T)
        return c, lambda w: linalg.solve_triangular(ct, w, lower=False, check_finite=False)
    try:
        fac = linalg.cho_factor(c.T @ c, check_finite=False)
    except linalg.LinAlgError:
        return None
    return c, lambda w: c @ linalg.cho_solve(fac, w, check_finite=False)


def projection_scale(c: FloatArray, v: FloatArray, weights: FloatArray) -> float | None:
    """``||v|| / lambda`` (rounded up) of a linear statistic ``<v, y>`` whose mean is ``lambda <weights, x>`` for an
    attained gradient sequence.

    With ``u = C^T v`` (computed; each entry within ``e_j = 1.01 (m + 2) u_f (|C|^T |v|)_j`` of the exact value,
    ``m`` the rows, ``u_f`` the unit roundoff) and ``lambda <= min_j (u_j - e_j) / weights_j`` over the support,
    the record whose gradient is ``g_j = lambda weights_j / (C^T v)_j`` (in ``[0, 1]``) times a fixed unit vector
    on the support and zero elsewhere gives ``<v, y> ~ N(lambda <weights, x>, sigma^2 ||v||^2)``.

    Parameters
    ----------
    c : numpy.ndarray
        The matrix ``C`` (``m x n``).
    v : numpy.ndarray
        Any vector of ``m`` floats (ideally ``C^T v = weights``).
    weights : numpy.ndarray
        Non-negative weights on the ``n`` steps.

    Returns
    -------
    float or None
        ``||v|| / lambda`` rounded up; ``None`` when no positive ``lambda`` is found.
    """
    if not np.all(np.isfinite(v)):
        return None
    m = c.shape[0]
    u = c.T @ v
    err = 1.01 * (m + 2) * _U * (np.abs(c).T @ np.abs(v)) + 1e-300
    sup = weights > 0
    lam = float(np.min((u[sup] - err[sup]) / weights[sup])) * (1.0 - 4 * _U)
    if not lam > 0.0:
        return None
    norm = math.sqrt(math.fsum((v * v).tolist())) * (1.0 + 2 * (m + 4) * _U)
    return _up(norm / lam, 1)


def _mixture_epsilon_estimate(pmf: FloatArray, scale: float, delta: float) -> float:
    """A fast (uncertified) epsilon of ``(sum_k pmf_k N(k, s^2), N(0, s^2))`` at ``delta``, both directions; used
    only to choose which statistic the certified engine evaluates."""
    k = np.arange(pmf.size, dtype=float)
    keep = pmf > 0
    k, w = k[keep], pmf[keep]
    lw = np.log(w)

    def loss(x: float) -> float:
        return float(special.logsumexp(lw + (2 * k * x - k * k) / (2 * scale * scale)))

    def delta_at(eps: float) -> float:
        span = (k.max() + 40.0) * scale + 40.0 * scale
        try:
            x_hi = optimize.brentq(lambda x: loss(x) - eps, -span, span)
            rem = float(np.sum(w * special.ndtr((k - x_hi) / scale)) - math.exp(eps) * special.ndtr(-x_hi / scale))
        except ValueError:
            rem = 0.0
        try:
            x_lo = optimize.brentq(lambda x: loss(x) + eps, -span, span)
            add = float(special.ndtr(x_lo / scale) - math.exp(eps) * np.sum(w * special.ndtr((x_lo - k) / scale)))
        except ValueError:
            add = 0.0
        return max(rem, add)

    if delta_at(0.0) <= delta:
        return 0.0
    lo, hi = 0.0, 1.0
    while delta_at(hi) > delta and hi < 1e4:
        lo, hi = hi, 2 * hi
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
    c, solve = solver
    for a, z in _windows(n):
        w = np.zeros(n)
        w[a:z] = 1.0
        proj = projection_scale(c, np.asarray(solve(w), float), w)
        if proj is None:
            continue
        scale = _up(proj * sigma, 1)  # a larger noise is a post-processing (add independent noise)
        pmf = participation_law(n, p, min_sep, warm_start, a, z)
        cands.append((_mixture_epsilon_estimate(pmf, scale, delta), a, z, scale, pmf))
    if not cands:
        return 0.0, {"lower": "no usable linear statistic"}
    cands.sort(key=lambda r: -r[0])
    eta = 2.0 * law_error(n, min_sep)  # the law's rounding plus MixtureOfGaussians' normalisation
    best, where, slack_used = 0.0, None, 0.0
    for est, a, z, scale, pmf in cands[:2]:
        probs = pmf / math.fsum(pmf.tolist())
        mog = MixtureOfGaussians(
            noise_multiplier=scale, sensitivities=tuple(float(k) for k in range(probs.size)), probabilities=tuple(probs)
        )
        # certify at delta + slack with slack >= e^lo eta (module docstring: rounding slack); a first guess from
        # the estimate, then once more at the answer's own e^lo eta if the guess was short (a larger delta only
        # lowers the answer, so the second pass settles)
        slack = math.exp(min(est, upper, 700.0)) * eta
        lo = 0.0
        for _ in range(3):
            if delta + slack >= 1.0:
                lo = 0.0
                break
            try:
                lo = _epsilon_of([(mog, 1)], delta + slack, eps_error, rel_error).lower
            except TightDPError:
                lo = 0.0
                break
            need = math.exp(min(lo, 700.0)) * eta
            if need <= slack:
                break
            slack = need
        else:
            lo = 0.0  # not settled: claim nothing
        if lo > best:
            best, where, slack_used = lo, (a, z, scale), slack
    if where is None:
        return 0.0, {"lower": "no statistic with a positive certified lower end"}
    a, z, scale = where
    return best, {
        "lower": (
            f"explicit pair (a fixed-direction gradient), post-processed by the linear statistic counting the "
            f"participations in steps [{a}, {z}): a 1-D mixture of N(k, {scale:.6g}^2) with the exact renewal law "
            f"(certified at delta + {slack_used:.3g} for rounding)"
        )
    }


def block_lengths(bands: int, min_sep: int, n: int) -> list[int]:
    """The block lengths ``L`` tried by ``block_split``: ``1`` (plain noise splitting) and, up to ``min(min_sep,
    n)``, the powers of two and the least ``L`` for each split count ``k = 1 + ceil((bands - 1) / L)``.

    Parameters
    ----------
    bands : int
        The band count ``b``.
    min_sep : int
        The least distance between participations.
    n : int
        Steps.

    Returns
    -------
    list of int
        Sorted lengths.
    """
    top = min(min_sep, n)
    out = {1} | {1 << i for i in range(top.bit_length()) if 1 << i <= top}
    for k in (2, 3, 5, 9):  # the least L with 1 + ceil((b - 1) / L) <= k
        length = -(-(bands - 1) // (k - 1)) if bands > 1 else 1
        if 1 <= length <= top:
            out.add(length)
    return sorted(out)


def block_split(
    norms: FloatArray,
    sigma: float,
    n: int,
    p: float,
    bands: int,
    length: int,
    delta: float,
    eps_error: float | None,
    rel_error: float | None,
) -> tuple[Bounds, str]:
    """Block noise splitting with Poisson domination (``MinSepSampling``'s docstring, upper bound 2).

    The steps are cut into blocks of ``L = length <= min_sep`` steps (so at most one participation each) and the
    noise into ``k = 1 + ceil((bands - 1) / L)`` parts; part ``r`` carries the blocks ``i = r (mod k)``, whose row
    windows (``L + bands - 1`` rows from the block's first step) are disjoint. The run is dominated by ``ceil(n /
    L)`` Poisson-subsampled Gaussians at rate ``1 - (1 - p)^L``, noise ``sigma / sqrt(k)`` and the block's
    largest column norm as sensitivity. ``L = 1`` is plain noise splitting (DP-SGD at rate ``p``).

    Parameters
    ----------
    norms : numpy.ndarray
        The column norms of ``C``.
    sigma : float
        The noise multiplier.
    n : int
        Steps.
    p : float
        The rate.
    bands : int
        The band count.
    length : int
        The block length ``L`` (at most ``min_sep``).
    delta : float
        The target delta.
    eps_error, rel_error : float or None
        Accuracy of the engine.

    Returns
    -------
    tuple
        ``(certified epsilon of the dominating composition, description)``.

    Raises
    ------
    PrecisionError
        The composition is out of the engine's reach.
    """
    k = 1 + -(-(bands - 1) // length)
    # the block rate 1 - (1 - p)^L, rounded up (log1p / expm1 are within a few ulps)
    rate = 1.0 if p >= 1.0 else min(1.0, -math.expm1(length * math.log1p(-p)) * (1.0 + 64 * _U))
    blocks = [float(norms[i : i + length].max()) for i in range(0, n, length)]
    ledger = [(_sampled(sigma / math.sqrt(k), v, rate), c) for v, c in _grouped_up(blocks, n)]
    how = (
        f"noise splitting ({bands} bands) and Poisson domination: DP-SGD at rate {p:g}, noise sigma / sqrt({bands}), "
        "step s at sensitivity ||C_s||"
        if length == 1
        else f"block noise splitting ({bands} bands, blocks of {length} steps, noise sigma / sqrt({k})) and Poisson "
        f"domination at the block rate 1 - (1 - p)^{length} = {rate:.6g}"
    )
    return _epsilon_of(ledger, delta, eps_error, rel_error), how


def min_sep_epsilon(
    strategy: Strategy,
    sigma: float,
    n: int,
    p: float,
    min_sep: int,
    warm_start: bool,
    delta: float,
    eps_error: float | None,
    rel_error: float | None,
) -> Bounds:
    """The certified interval of ``MinSepSampling`` (its docstring states the proofs).

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
    eps_error, rel_error : float or None
        Accuracy of the engine.

    Returns
    -------
    Bounds
        The interval with ``details``.

    Raises
    ------
    PrecisionError
        No upper bound within the engine's reach.
    """
    s = sensitivity(strategy, MinSeparation(max_participations=-(-n // min_sep), min_sep=min_sep), steps=n)
    plain: Ledger = [(Gaussian(noise_multiplier=sigma, sensitivity=s.upper), 1)]
    ups = [(_epsilon_of(plain, delta, eps_error, rel_error), "no amplification (every min-sep pattern)")]
    b = strategy.bands(n)
    if b is not None:
        norms = _column_norms(strategy, n)
        for length in block_lengths(b, min_sep, n):
            with contextlib.suppress(TightDPError):
                ups.append(block_split(norms, sigma, n, p, b, length, delta, eps_error, rel_error))
    if p == 1.0 and not warm_start and min_sep < n:
        # deterministic run: the one pattern 0, min_sep, 2 min_sep, ... (a subset of the cyclic patterns)
        cyc = sensitivity(strategy, Cyclic(period=min_sep), steps=n)
        ups.append(
            (
                _epsilon_of(
                    [(Gaussian(noise_multiplier=sigma, sensitivity=cyc.upper), 1)], delta, eps_error, rel_error
                ),
                "no amplification (p = 1, cold start: the one pattern 0, min_sep, 2 min_sep, ...; cyclic sensitivity)",
            )
        )
    up, how = min(ups, key=lambda r: r[0].upper)
    if p == 1.0 and not warm_start:
        x = np.zeros(n)
        x[::min_sep] = 1.0
        c = strategy.matrix(n)
        col = c @ x
        sens = _down(math.sqrt(math.fsum((col * col).tolist())), c.shape[0] + n)
        lo = _epsilon_of([(Gaussian(noise_multiplier=sigma, sensitivity=sens), 1)], delta, eps_error, rel_error).lower
        details = {
            **_sens_details(s),
            "upper": how,
            "lower": "explicit pair: a fixed unit gradient on the one pattern (p = 1, cold start), a Gaussian",
        }
        return _combine(lo, up, details)
    lo, lo_details = projection_lower(strategy, sigma, n, p, min_sep, warm_start, delta, up.upper, eps_error, rel_error)
    details = {**_sens_details(s), "upper": how, **lo_details}
    return _combine(lo, up, details)


def tighter(a: Bounds, b: Bounds, name: str) -> Bounds:
    """The intersection of two certified intervals of the same run, ``details`` naming the source of each end.

    Parameters
    ----------
    a : Bounds
        The first interval (its ``details`` kept).
    b : Bounds
        Another interval of the same run.
    name : str
        What ``b`` is, for ``details``.

    Returns
    -------
    Bounds
        ``[max lower, min upper]``.
    """
    details = dict(a.details)
    details[name] = [b.lower, b.upper]
    if b.upper < a.upper:
        details["upper"] = f"{name}: {b.details.get('upper', b.details.get('upper_used', 'certified'))}"
    if b.lower > a.lower:
        details["lower"] = f"{name}: {b.details.get('lower', 'explicit pair')}"
    up = b if b.upper < a.upper else a
    return _combine(max(a.lower, b.lower), up, details)

"""b-min-sep sampling with a matrix mechanism: the certified ends of ``tightdp.matrix.accounting.MinSepSampling``
(its docstring states the proofs; Dong & Ganesh 2026, arXiv 2602.09338; jax_privacy's ``BMinSepSampling``).

The sampler is a renewal process per record: at every step a record that did not take part in the previous
``min_sep - 1`` steps ("eligible") joins the batch with probability ``p``, on a fresh coin. The chain's state
is ``d``, the number of steps until the record is eligible again (``0``: eligible now); a participation sets
``d = min_sep - 1``. A cold start is ``d = 0``; the warm (stationary) start is jax_privacy's: ``d = 0`` with
probability ``1 / (1 + (min_sep - 1) p)`` and ``d = k`` (``k = 1 .. min_sep - 1``) with ``p / (1 + (min_sep - 1)
p)`` each.

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

import contextlib
import math
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy import linalg, special

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
    # state d is stored at index (ptr + d) % min_sep: one step moves ptr on (d -> d - 1), the eligible
    # state's mass splits into "stay eligible" (new d = 0) and "participate" (new d = min_sep - 1)
    law = initial_state(p, min_sep, warm_start)
    q = 1.0 - p
    ptr = 0
    for _ in range(start):  # before the window: the state only
        eligible = law[ptr]
        law[ptr] = eligible * p
        ptr = (ptr + 1) % min_sep
        law[ptr] += eligible * q
    kmax = -(-(stop - start) // min_sep)
    joint = np.zeros((min_sep, kmax + 1))
    joint[:, 0] = law
    for t in range(stop - start):
        top = min(kmax, t // min_sep + 1)  # counts above are still zero
        eligible = joint[ptr, : top + 1].copy()
        joint[ptr, 0] = 0.0
        joint[ptr, 1 : top + 1] = eligible[:top] * p
        ptr = (ptr + 1) % min_sep
        joint[ptr, : top + 1] += eligible * q
    return np.asarray(joint.sum(axis=0), dtype=np.float64)


def law_error(n: int, min_sep: int) -> float:
    """A bound on the relative error of every probability ``participation_law`` computes (so also on the l1
    distance to the exact law).

    Parameters
    ----------
    n : int
        Steps of the run.
    min_sep : int
        The least distance (the final sum over states adds ``min_sep`` terms).

    Returns
    -------
    float
        The bound ``1.01 (3 n + min_sep + 16) u`` (``u`` the unit roundoff).
    """
    return 1.01 * (3 * n + min_sep + 16) * _U


#: ``C^T v`` and an entrywise bound on its floating-point error
Apply = Callable[[FloatArray], tuple[FloatArray, FloatArray]]


def projection_solver(strategy: Strategy, n: int) -> tuple[Callable[[FloatArray], FloatArray], Apply] | None:
    """A solver of ``C^T v = w`` (least norm) and the product ``v -> C^T v`` with its rounding bound.

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
        ab = np.zeros((b, n))
        for k in range(b):  # upper form: ab[b - 1 - k, j] = (C^T)[j - k, j] = c_k
            ab[b - 1 - k, k:] = cb[k]

        def solve_t(w: FloatArray) -> FloatArray:
            return np.asarray(linalg.solve_banded((0, b - 1), ab, w, check_finite=False), float)

        def apply_t(v: FloatArray) -> tuple[FloatArray, FloatArray]:
            u, mag = np.zeros(n), np.zeros(n)
            for k in range(b):
                u[: n - k] += cb[k] * v[k:]
                mag[: n - k] += abs(cb[k]) * np.abs(v[k:])
            return u, 1.01 * (b + 2) * _U * mag

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
    norm = math.sqrt(math.fsum((v * v).tolist())) * (1.0 + 2 * (v.size + 4) * _U)
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
    while delta_at(hi) > delta and hi < 700.0:
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

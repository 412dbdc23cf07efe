"""Balls-in-bins and per-epoch random allocation with a matrix mechanism: the certified ends of
``tightdp.matrix.accounting.BallsInBins`` and ``EpochAllocation`` (their docstrings state the proofs)."""

from __future__ import annotations

import contextlib
import math
from typing import Any

import numpy as np

from ..bounds import Bounds
from ..errors import PrecisionError
from ..mechanisms.allocation import RandomAllocation
from ..mechanisms.basic import Gaussian
from ..schemes import allocation_epsilon, cyclic_allocation_epsilon
from ._ledgers import _column_norms, _combine, _down, _epsilon_of, _grouped, _sampled, _sens_details, _up
from ._min_sep_lower import projection_scale, projection_solver
from ._row_weights import weighted_block_norms
from ._whitening import toeplitz_min_singular_lower
from .allocation import MIN_ALLOCATION_SIGMA, mode_gram, sandwich_lower, sandwich_upper
from .class_split import class_split_upper, low_noise_upper
from .sensitivity import Cyclic, PerEpoch, sensitivity
from .strategies import Strategy

__all__: list[str] = []


def _whitened_lower(scheme: Any, strategy: Strategy, sigma: float, n: int, **kw: Any) -> float:
    """The certified lower end of DP-SGD at noise ``sigma / s_min`` under ``scheme`` (``tightdp.matrix._whitening``:
    a post-processing of the fixed-unit-gradient pair); 0 where ``s_min`` is not available or out of reach."""
    s_min = toeplitz_min_singular_lower(strategy, n)
    if s_min <= 0.0 or sigma / s_min < MIN_ALLOCATION_SIGMA:
        return 0.0
    try:
        return float(scheme(noise_multiplier=sigma / s_min, **kw).lower)
    except PrecisionError:
        return 0.0


def _epoch_projection_mu(strategy: Strategy, sigma: float, n: int, t: int) -> float:
    """``mu`` of the Gaussian pair that a linear statistic of the run attains under per-epoch allocation (``0`` when
    the solver is unavailable): with weights ``a_e`` constant on each epoch, ``<v, y>`` with ``C^T v = B a`` has
    mean ``lambda sum_e a_e`` whatever steps the record drew (one per epoch), so it is ``N(lambda sum_e a_e,
    sigma^2 ||v||^2)`` against ``N(0, .)``: a Gaussian mechanism, post-processing the record with a fixed unit
    gradient (scaled by ``g_j`` in ``[0, 1]`` to absorb the solve's residual, ``_min_sep_lower.projection_scale``).
    ``a = (V^T V)^{-1} 1`` (``V = C^(-T) B``) maximises ``sum a / ||V a||``; all-ones weights are tried too."""
    solver = projection_solver(strategy, n)
    if solver is None:
        return 0.0
    solve, apply = solver
    epochs = n // t
    basis = np.zeros((n, epochs))
    basis[np.arange(n), np.arange(n) // t] = 1.0
    cols = np.stack([solve(basis[:, e]) for e in range(epochs)], axis=1)
    candidates = [np.ones(epochs)]
    with contextlib.suppress(np.linalg.LinAlgError):
        a = np.linalg.solve(cols.T @ cols, np.ones(epochs))
        if np.all(a > 0):
            candidates.append(a / a.max())
    best = 0.0
    for a in candidates:
        weights = basis @ a
        scale = projection_scale(apply, cols @ a, weights)
        if scale is not None:
            best = max(best, float(np.sum(a)) * (1.0 - 1e-12) / (sigma * scale))
    return best


#: at most this many block sizes are certified for per-epoch allocation (spread over the divisors of the epoch)
_MAX_BLOCK_SIZES = 6


def _block_sizes(t: int, b: int) -> list[tuple[int, int]]:
    """``(L, k)`` for block sizes ``L`` dividing the epoch's ``t`` steps, with ``k = 1 + ceil((b - 1) / L)`` noise
    parts (so that blocks of one part are at least ``b - 1`` steps apart); at most ``_MAX_BLOCK_SIZES`` of them,
    spread over the divisors, smallest first."""
    divisors = [d for d in range(1, t + 1) if t % d == 0 and d < t]
    if len(divisors) > _MAX_BLOCK_SIZES:
        pick = np.unique(np.round(np.linspace(0, len(divisors) - 1, _MAX_BLOCK_SIZES)).astype(int))
        divisors = [divisors[i] for i in pick]
    return [(d, 1 + -(-(b - 1) // d)) for d in divisors]


def _epoch_allocation(
    strategy: Strategy,
    sigma: float,
    n: int,
    t: int,
    delta: float,
    eps_error: float | None,
    rel_error: float | None,
) -> Bounds:
    if n % t:
        raise ValueError(f"steps ({n}) must be a whole number of epochs of steps_per_epoch={t}")
    epochs = n // t
    norms = _column_norms(strategy, n)
    b = strategy.bands(n)
    if b == 1:
        hi = allocation_epsilon(
            noise_multiplier=sigma / _up(float(norms.max()), n),
            steps_per_epoch=t,
            epochs=epochs,
            delta=delta,
            eps_error=eps_error,
            rel_error=rel_error,
        )
        diag_lo = allocation_epsilon(
            noise_multiplier=sigma / _down(float(norms.min()), n),
            steps_per_epoch=t,
            epochs=epochs,
            delta=delta,
            eps_error=eps_error,
            rel_error=rel_error,
        )
        return _combine(diag_lo.lower, hi, {"method": "diagonal strategy: random allocation (certified pairs)"})
    s = sensitivity(strategy, PerEpoch(steps_per_epoch=t), steps=n)
    hi = _epsilon_of([(Gaussian(noise_multiplier=sigma, sensitivity=s.upper), 1)], delta, eps_error, rel_error)
    details = {**_sens_details(s), "upper": "no amplification (any one step per epoch), certified"}
    if b is not None:  # block splitting (EpochAllocation's docstring); L = 1 is plain noise splitting
        for size, parts in _block_sizes(t, b):
            weighted = float(weighted_block_norms(strategy, n, b, size).max())
            sig = sigma / weighted
            if sig < MIN_ALLOCATION_SIGMA:
                continue
            try:
                split = allocation_epsilon(
                    noise_multiplier=sig,
                    steps_per_epoch=t // size,
                    epochs=epochs,
                    delta=delta,
                    eps_error=eps_error,
                    rel_error=rel_error,
                )
            except PrecisionError:
                continue
            if split.upper < hi.upper:
                hi = split
                details["upper"] = (
                    f"block splitting: blocks of {size} steps, each row's noise shared among the {parts} or fewer "
                    f"blocks covering it: per-epoch random allocation of 1 of {t // size} blocks at noise sigma / "
                    f"largest weighted block norm = {sig:.6g} (certified pairs)"
                )
    if b is not None and t >= b:
        lower_ledger = [(_sampled(sigma, v, 1.0 / t), c) for v, c in _grouped(norms[0::t], n)]
        lo = _epsilon_of(lower_ledger, delta, eps_error, rel_error).lower
        details["lower"] = f"DP-SGD reduction: gradient only at each epoch's first step, rate 1/{t} (explicit pair)"
    else:
        lo = _epsilon_of(
            [(_sampled(sigma, float(_down(norms.max(), n)), 1.0 / t), 1)], delta, eps_error, rel_error
        ).lower
        details["lower"] = "one step of the largest column at rate 1/steps_per_epoch (explicit pair)"
    white = _whitened_lower(
        allocation_epsilon,
        strategy,
        sigma,
        n,
        steps_per_epoch=t,
        epochs=epochs,
        delta=delta,
        eps_error=eps_error,
        rel_error=rel_error,
    )
    if white > lo:
        lo = white
        details["lower"] = (
            "whitening: DP-SGD with per-epoch random allocation at noise sigma / s_min(C) (explicit pair)"
        )
    mu = _epoch_projection_mu(strategy, sigma, n, t)
    if mu > 0.0:
        proj = _epsilon_of([(Gaussian(noise_multiplier=1.0 / mu), 1)], delta, eps_error, rel_error).lower
        if proj > lo:
            lo = proj
            details["lower"] = (
                f"a linear statistic whose mean is the same for every draw (weights constant on each epoch): a "
                f"Gaussian pair, mu = {mu:.6g} (explicit pair, post-processed)"
            )
    details["note"] = "no tight amplified bound for banded C under per-epoch allocation is implemented"
    return _combine(lo, hi, details)


def _balls_in_bins(
    strategy: Strategy,
    sigma: float,
    n: int,
    t: int,
    delta: float,
    eps_error: float | None,
    rel_error: float | None,
) -> Bounds:
    if t > n:
        raise ValueError(f"cycle_length ({t}) must be at most steps ({n})")
    s = sensitivity(strategy, Cyclic(period=t), steps=n)
    plain = _epsilon_of([(Gaussian(noise_multiplier=sigma, sensitivity=s.upper), 1)], delta, eps_error, rel_error)
    g = mode_gram(strategy, n, t)
    up, arg_up, how_up = sandwich_upper(g, sigma, delta, eps_error, rel_error)
    split_up, classes, consts = class_split_upper(g, sigma, delta, eps_error, rel_error)
    if split_up < up:
        up, how_up, arg_up = (
            split_up,
            f"class splitting (bins mod {classes}), entrywise (or mixed) comparison within each class",
            None,
        )
    white = _whitened_lower(
        cyclic_allocation_epsilon,
        strategy,
        sigma,
        n,
        steps_per_cycle=t,
        steps=n,
        delta=delta,
        eps_error=eps_error,
        rel_error=rel_error,
    )
    coefs = strategy.toeplitz_coefs(n)
    nonneg = (coefs is not None and bool(np.all(coefs >= 0))) or bool(np.all(strategy.matrix(n) >= 0))
    details: dict[str, Any] = {**_sens_details(s)}
    b = strategy.bands(n)
    split = math.inf
    if nonneg and b is not None and b > 1:
        # noise splitting, each row's noise shared by signal (tightdp.matrix._row_weights, blocks of one step):
        # the richer release has orthogonal modes, bin j's of squared norm sum_i A_(j + i t)^2 <= m2 at noise
        # sigma (equal shares: A_s^2 = b ||C_s||^2)
        col2 = weighted_block_norms(strategy, n, b, 1) ** 2
        m2 = _up(max(float(col2[j::t].sum()) for j in range(t)), n)
        sig = sigma / math.sqrt(m2)
        if sig >= MIN_ALLOCATION_SIGMA:
            try:
                split = _epsilon_of(
                    [(RandomAllocation(mechanism=Gaussian(noise_multiplier=sig), steps_per_epoch=t), 1)],
                    delta,
                    eps_error,
                    rel_error,
                ).upper
            except PrecisionError:
                split = math.inf
    if nonneg and min(up, split) < plain.upper:
        if split < up:
            details["upper"] = (
                f"noise splitting ({b} bands, each row's noise shared by signal): random allocation of 1 of {t} "
                "with orthogonal modes, "
                f"noise per unit sensitivity {sig:.6g}, of 2410.06266's dominating pair"
            )
            up = split
        else:
            details["upper"] = (
                f"{how_up} from above (c, d) = {arg_up} of 2410.06266's dominating pair"
                if arg_up is not None
                else f"{how_up}: (classes of k bins, c, d) = {[(k, round(c, 6), round(d, 6)) for k, c, d in consts]} "
                "of 2410.06266's dominating pair"
            )
        hi = Bounds(0.0, up, up, "epsilon", "bound", {})
    else:
        details["upper"] = "no amplification (sensitivity over the cyclic patterns), certified"
        hi = plain
        low_up, low_how = low_noise_upper(g, sigma, delta, eps_error, rel_error) if nonneg else (math.inf, "")
        if low_up < plain.upper:
            details["upper"] = f"{low_how}, at low noise per unit sensitivity, of 2410.06266's dominating pair"
            hi = Bounds(0.0, low_up, low_up, "epsilon", "bound", {})
        elif up == math.inf or not nonneg:
            details["note"] = (
                "the amplified upper bound for banded C under balls-in-bins (Schuchardt & Kalinin "
                "2026) is not implemented: the interval can be wide"
            )
    lo, arg_lo, how_lo = sandwich_lower(
        g, sigma, delta, eps_error, rel_error, nonnegative=nonneg, upper=float(hi.upper)
    )
    details["lower"] = f"explicit pair (fixed unit gradient), {how_lo or 'no comparison in reach'} (c', d') = {arg_lo}"
    if white > lo:
        lo = white
        details["lower"] = "whitening: DP-SGD with balls-in-bins at noise sigma / s_min(C) (explicit pair)"
    return _combine(lo, hi, details)

"""The smallest noise multiplier whose certified epsilon meets a target, for a matrix-mechanism run.

Feasibility is judged on the certified upper bound of ``matrix_epsilon`` only, and the answer is a point where
that bound was evaluated and found ``<= target`` (``tightdp._numerics.falling_root`` keeps the feasible end of
its bracket). The answer is rounded up to ``DIGITS`` significant digits and re-certified, so the printed value is
the certified one. Tightness is shown where it can be: the certified *lower* bound at ``(1 - 1%)`` of the answer
is reported (above the target means no noise 1 % smaller can meet it).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

from .._numerics import falling_root
from .._validation import check_delta, check_positive
from ..bounds import Bounds
from ..errors import PrecisionError
from .accounting import Sampler, matrix_epsilon

__all__ = ["DIGITS", "MatrixCalibration", "calibrate_matrix_noise"]

#: significant digits of the returned noise multiplier (rounded up)
DIGITS = 4


@dataclass(frozen=True)
class MatrixCalibration:
    """The calibrated ``noise_multiplier``, its certified ``epsilon`` interval (``upper <= target_epsilon``) and
    ``details`` (the neighbour 1 % below and its interval, evaluations, seconds).

    Parameters
    ----------
    noise_multiplier : float
        The calibrated noise multiplier.
    epsilon : Bounds
        Its certified epsilon interval.
    target_epsilon : float
        The target asked for.
    delta : float
        The delta of the target.
    details : dict, optional
        Diagnostics (default empty).

    Raises
    ------
    TypeError
        Missing fields (a plain record: ``calibrate_matrix_noise`` builds it).
    """

    noise_multiplier: float
    epsilon: Bounds
    target_epsilon: float
    delta: float
    details: dict[str, Any] = field(default_factory=dict)


def _round_up(x: float, digits: int) -> float:
    e = math.floor(math.log10(x)) - digits + 1
    return math.ceil(x / 10.0**e) * 10.0**e


def calibrate_matrix_noise(
    *,
    target_epsilon: float,
    delta: float,
    strategy: Any,
    steps: int,
    sampler: Sampler | None = None,
    bands: int | None = None,
    eps_error: float | None = None,
    rel_error: float | None = None,
    max_noise: float = 1e4,
) -> MatrixCalibration:
    """The smallest noise multiplier (to ``DIGITS`` digits, rounded up) whose certified epsilon upper bound for the
    run ``matrix_epsilon(strategy=..., steps=..., sampler=...)`` is at most ``target_epsilon`` at ``delta``.

    Parameters
    ----------
    target_epsilon, delta : float
        The target.
    strategy, steps, sampler, bands, eps_error, rel_error
        As for ``tightdp.matrix.matrix_epsilon``.
    max_noise : float
        Search no further (``ValueError`` if even this noise misses the target).

    Returns
    -------
    MatrixCalibration

    Raises
    ------
    ValueError
        Bad arguments or an unreachable target.
    """
    target = check_positive("target_epsilon", target_epsilon)
    delta = check_delta("delta", delta)
    max_noise = check_positive("max_noise", max_noise)
    t0 = time.perf_counter()
    calls = [0]

    def upper(sigma: float) -> float:
        calls[0] += 1
        try:
            b = matrix_epsilon(
                strategy=strategy,
                noise_multiplier=sigma,
                steps=steps,
                delta=delta,
                sampler=sampler,
                bands=bands,
                eps_error=eps_error,
                rel_error=rel_error,
            )
        except PrecisionError:
            return math.inf
        return b.upper if b.upper is not None else math.inf

    matrix_epsilon(
        strategy=strategy,
        noise_multiplier=1.0,
        steps=steps,
        delta=delta,
        sampler=sampler,
        bands=bands,
        eps_error=eps_error,
        rel_error=rel_error,
    )  # validates every argument before the search
    lo, hi = 1.0, 1.0
    if upper(hi) <= target:
        while lo > 1e-3 and upper(lo) <= target:
            hi, lo = lo, lo / 2.0
    else:
        while upper(hi) > target:
            lo, hi = hi, hi * 2.0
            if hi > max_noise:
                raise ValueError(f"target_epsilon {target!r} is not met even with noise_multiplier {max_noise:g}")
    g = lambda u: upper(math.exp(u)) - target
    u = falling_root(g, math.log(lo), math.log(hi), xtol=1e-5)
    sigma = _round_up(math.exp(u), DIGITS)
    best = matrix_epsilon(
        strategy=strategy,
        noise_multiplier=sigma,
        steps=steps,
        delta=delta,
        sampler=sampler,
        bands=bands,
        eps_error=eps_error,
        rel_error=rel_error,
    )
    if not best.upper <= target:  # rounding up never raises the bound of a sound accountant; stay safe anyway
        sigma = _round_up(sigma * 1.001, DIGITS)
        best = matrix_epsilon(
            strategy=strategy,
            noise_multiplier=sigma,
            steps=steps,
            delta=delta,
            sampler=sampler,
            bands=bands,
            eps_error=eps_error,
            rel_error=rel_error,
        )
        if not best.upper <= target:
            raise RuntimeError("internal error: calibration ended on an infeasible point")
    below = matrix_epsilon(
        strategy=strategy,
        noise_multiplier=sigma * 0.99,
        steps=steps,
        delta=delta,
        sampler=sampler,
        bands=bands,
        eps_error=eps_error,
        rel_error=rel_error,
    )
    details = {
        "evaluations": calls[0] + 3,
        "seconds": time.perf_counter() - t0,
        "tightness": {
            "noise_multiplier": sigma * 0.99,
            "epsilon": [below.lower, below.upper],
            "proved_infeasible": bool(below.lower is not None and below.lower > target),
        },
    }
    return MatrixCalibration(sigma, best, target, delta, details)

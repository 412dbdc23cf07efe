"""b-min-sep sampling with a matrix mechanism: the certified ends of ``tightdp.matrix.accounting.MinSepSampling``
(its docstring states the proofs; Dong & Ganesh 2026, arXiv 2602.09338; jax_privacy's ``BMinSepSampling``): the
upper bounds (no amplification, block noise splitting with Poisson domination) and the interval; the lower end
is ``_min_sep_lower``'s, the renewal chain ``_renewal``'s.
"""

from __future__ import annotations

import contextlib
import math

import numpy as np

from ..bounds import Bounds
from ..errors import TightDPError
from ..mechanisms.basic import Gaussian
from ..mechanisms.mixture import MixtureOfGaussians
from ._ledgers import (
    Ledger,
    _column_norms,
    _combine,
    _down,
    _epsilon_of,
    _grouped_up,
    _pattern_norm_ledger,
    _sampled,
    _sens_details,
    _up,
)
from ._min_sep_lower import projection_lower
from ._renewal import law_error, participation_law
from ._row_weights import weighted_block_norms
from .sensitivity import Cyclic, MinSeparation, sensitivity
from .strategies import Strategy

__all__ = ["block_lengths", "block_proxy", "block_split", "count_mixture", "min_sep_epsilon", "tighter"]

_U = float(np.finfo(float).eps) / 2


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


def block_proxy(strategy: Strategy, sigma: float, n: int, p: float, bands: int, length: int) -> float:
    """The CLT ``mu`` of ``block_split``'s composition (``q sqrt(T (e^(A^2 / s^2) - 1))``, Bu et al. 2020): an
    uncertified screen that decides which block lengths the engine certifies.

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
    bands : int
        The band count.
    length : int
        The block length.

    Returns
    -------
    float
        The proxy (``inf`` when it overflows).
    """
    rate = 1.0 if p >= 1.0 else -math.expm1(length * math.log1p(-p))
    blocks = weighted_block_norms(strategy, n, bands, length)
    with np.errstate(over="ignore"):
        total = float(np.sum(np.expm1(np.minimum(blocks**2 / sigma**2, 700.0))))
    return rate * math.sqrt(total) if rate < 1.0 else math.sqrt(float(np.sum(blocks**2))) / sigma


def block_split(
    strategy: Strategy,
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

    The steps are cut into blocks of ``L = length <= min_sep`` steps (so at most one participation each) and each
    row's noise is shared among the blocks whose row windows (``L + bands - 1`` rows from the block's first step)
    cover it (``tightdp.matrix._row_weights``). The run is dominated by ``ceil(n / L)`` Poisson-subsampled
    Gaussians at rate ``1 - (1 - p)^L``, noise ``sigma`` and the block's weighted norm ``A_m`` as sensitivity
    (equal shares: ``sqrt(k)`` times its largest column norm, ``k = 1 + ceil((bands - 1) / L)``). ``L = 1`` is
    plain noise splitting (DP-SGD at rate ``p``).

    Parameters
    ----------
    strategy : Strategy
        The strategy ``C``, ``bands``-banded.
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
    # the block rate 1 - (1 - p)^L, rounded up (log1p / expm1 are within a few ulps)
    rate = 1.0 if p >= 1.0 else min(1.0, -math.expm1(length * math.log1p(-p)) * (1.0 + 64 * _U))
    blocks = weighted_block_norms(strategy, n, bands, length)
    ledger = [(_sampled(sigma, v, rate), c) for v, c in _grouped_up(blocks, n)]
    how = (
        f"noise splitting ({bands} bands, each row's noise shared by signal) and Poisson domination: DP-SGD at "
        f"rate {p:g}, noise sigma, step s at its weighted norm (largest {float(blocks.max()):.6g})"
        if length == 1
        else f"block noise splitting ({bands} bands, blocks of {length} steps, each row's noise shared by signal, "
        f"largest weighted block norm {float(blocks.max()):.6g}) and Poisson domination at the block rate "
        f"1 - (1 - p)^{length} = {rate:.6g}"
    )
    return _epsilon_of(ledger, delta, eps_error, rel_error), how


def _pattern_norm_lower(strategy: Strategy, n: int, min_sep: int) -> float:
    """A lower bound on ``||C x||`` for the pattern ``x = 1`` at ``0, min_sep, 2 min_sep, ...``: each computed
    entry of ``C x`` is within ``1.01 (n + 2) u (|C| x)_i`` of the exact one (a sum of at most ``n`` terms), so
    its magnitude less that bound is a lower bound; the norm is rounded down."""
    x = np.zeros(n)
    x[::min_sep] = 1.0
    coefs = strategy.toeplitz_coefs(n)
    if coefs is not None:  # (C x)_i = sum_k c_k x_(i - k), without the dense matrix
        col = np.convolve(coefs, x)[:n]
        mag = np.convolve(np.abs(coefs), x)[:n]
    else:
        c = strategy.matrix(n)
        col, mag = c @ x, np.abs(c) @ x
    low = np.maximum(np.abs(col) - 1.01 * (n + 2) * _U * mag * (1.0 + 1e-9), 0.0)
    return _down(math.sqrt(math.fsum((low * low).tolist())), low.size)


def count_mixture(
    strategy: Strategy,
    sigma: float,
    n: int,
    p: float,
    min_sep: int,
    warm_start: bool,
    cap: float,
    delta: float,
    eps_error: float | None,
    rel_error: float | None,
) -> tuple[Bounds, str]:
    """The count mixture upper end of b-min-sep sampling (``MinSepSampling``'s docstring, 3): one mixture of
    Gaussians at noise ``sigma`` over the renewal chain's exact participation count ``K`` (``_renewal``), with
    shift ``min(sqrt(K) A, cap)`` when every two participations have disjoint row windows (a ``b``-banded ``C`` and
    ``min_sep >= b``: orthogonal columns), else ``min(K A, cap)`` (``A`` the largest column norm, rounded up). The
    law's masses for ``K >= 1`` are raised by its rounding bound and ``K = 0`` takes the rest.

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
    cap : float
        The sensitivity over every min-sep pattern (a certified upper bound).
    delta : float
        The target delta.
    eps_error, rel_error : float or None
        Accuracy of the engine.

    Returns
    -------
    tuple
        ``(Bounds, description)``.

    Raises
    ------
    TightDPError
        The mixture out of the engine's reach.
    """
    law = participation_law(n, p, min_sep, warm_start)
    w = np.minimum(law * (1.0 + 2.0 * law_error(n, min_sep) + 1e-12), 1.0)
    w[0] = max(0.0, 1.0 - float(w[1:].sum()))
    keep = w > 0.0
    counts = np.arange(law.size, dtype=float)[keep]
    top = _up(float(_column_norms(strategy, n).max()), n)
    b = strategy.bands(n)
    apart = b is not None and min_sep >= b
    shifts = np.minimum(np.sqrt(counts) * top if apart else counts * top, cap)
    mix = MixtureOfGaussians(
        noise_multiplier=sigma,
        sensitivities=tuple(float(x) for x in shifts),
        probabilities=tuple(float(x) for x in w[keep]),
    )
    how = "count mixture: the participation count's exact law, shift " + (
        "sqrt(K) x largest column norm (participations on disjoint rows)" if apart else "K x largest column norm"
    )
    return _epsilon_of([(mix, 1)], delta, eps_error, rel_error), how


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
        # only the two most promising block lengths by the CLT proxy, and none far above no amplification
        # (skipping an upper bound is always safe; the proxy only saves the engine hopeless compositions)
        mu_plain = s.upper / sigma
        ranked = sorted(
            (block_proxy(strategy, sigma, n, p, b, length), length) for length in block_lengths(b, min_sep, n)
        )
        for mu, length in ranked[:2]:
            if mu <= 1.5 * mu_plain:
                with contextlib.suppress(TightDPError):
                    ups.append(block_split(strategy, sigma, n, p, b, length, delta, eps_error, rel_error))
    with contextlib.suppress(TightDPError):
        ups.append(count_mixture(strategy, sigma, n, p, min_sep, warm_start, s.upper, delta, eps_error, rel_error))
    norm_mix = _pattern_norm_ledger(strategy, sigma, n, p, s.upper, _column_norms(strategy, n))
    if norm_mix is not None:  # the pattern lies below a Poisson one (MinSepSampling's docstring, 5.)
        with contextlib.suppress(TightDPError):
            ups.append(
                (
                    _epsilon_of(norm_mix, delta, eps_error, rel_error),
                    "pattern-norm mixture of Poisson sampling at the same rate (shift ||C x||, its law by dynamic "
                    "programming; every b-min-sep pattern lies below a Poisson one)",
                )
            )
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
        sens = _pattern_norm_lower(strategy, n, min_sep)
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

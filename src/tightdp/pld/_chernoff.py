"""Chernoff windows, tilts and moments of a composition of discretised losses (Koskela et al. 2020, Sec. 7).

The tilted composition's mass outside a window is bounded by Chernoff from the exact cumulant generating
functions of the discretised terms; the saddle-point tilt centres an FFT at the epsilon of interest. Any theta
gives a valid bound: the searches here only make windows tighter.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from .._numerics import falling_root
from .._types import FloatArray
from ..errors import PrecisionError
from .discretise import DiscretisedLoss, Terms

__all__ = ["chernoff_epsilon", "chernoff_window", "saddle_epsilon", "saddle_tilt"]


def _tilted_weights(d: DiscretisedLoss, tilt: float) -> FloatArray:
    """``pmf * exp(tilt * y)``, normalised to sum 1 (no logs needed when ``tilt == 0``).

    Cached on ``d`` for the two most recent tilts (the window search, the moments and the FFT of
    one composition all need the same vector); the returned array is read-only.
    """
    cache: dict[float, FloatArray] = d.__dict__.setdefault("_tilted_cache", {})
    w: FloatArray | None = cache.get(tilt)
    if w is not None:
        return w
    if tilt == 0.0:
        w = d.pmf / d.pmf.sum()
    else:
        with np.errstate(divide="ignore"):
            lw = np.log(d.pmf) + tilt * d.grid
        w = np.exp(lw - lw.max())
        w /= w.sum()
    w.flags.writeable = False
    if len(cache) >= 2:
        cache.pop(next(iter(cache)))
    cache[tilt] = w
    return w


def _term_moments(d: DiscretisedLoss, tilt: float) -> tuple[float, float]:
    """Mean and variance of one tilted term (cached on ``d`` per tilt)."""
    cache: dict[float, tuple[float, float]] = d.__dict__.setdefault("_moment_cache", {})
    out = cache.get(tilt)
    if out is None:
        w = _tilted_weights(d, tilt)
        g = d.grid
        # einsum, not BLAS dot: these only choose windows' thetas and tilts, and a threaded dot
        # stalls for milliseconds on mid-sized vectors when the machine is loaded
        mu = float(np.einsum("i,i->", w, g))
        c = g - mu
        out = (mu, float(np.einsum("i,i,i->", w, c, c)))
        if len(cache) >= 8:
            cache.pop(next(iter(cache)))
        cache[tilt] = out
    return out


def _moments(terms: Terms, tilt: float) -> tuple[float, float]:
    """Mean and variance of the tilted composition (exact, on the unshifted grid)."""
    m = v = 0.0
    for d, c in terms:
        mu, var = _term_moments(d, tilt)
        m += c * mu
        v += c * var
    return m, v


def chernoff_epsilon(terms: Terms, delta: float) -> tuple[float, float]:
    """``(eps_guess, tilt)``: where ``delta(eps)`` is decided and the tilt that centres the FFT there.

    A normal approximation of the composition gives the Chernoff point
    ``m + sqrt(2 v log(1/delta))`` and the tilt ``sqrt(2 log(1/delta) / v)``.
    Only the accuracy of the answer depends on this choice, never its
    validity; the accountant re-centres if the answer falls outside the window.
    ``saddle_epsilon`` aims better where bounded losses sit beside a Gaussian.

    Parameters
    ----------
    terms : sequence of (DiscretisedLoss, int)
        The discretised losses and how many times each is composed.
    delta : float
        The target delta in (0, 1).

    Returns
    -------
    tuple of float
        ``(eps_guess, tilt)``, ``tilt >= 0``.

    Raises
    ------
    ValueError
        If ``delta`` is negative (``log(1 / delta)``), for a composition with positive variance.
    ZeroDivisionError
        If ``delta == 0``, for a composition with positive variance.

    References
    ----------
    Koskela et al. 2020 (Fourier accountant), Sec. 7 (Chernoff bounds).
    """
    m, v = _moments(terms, 0.0)
    shift = sum(c * d.shift for d, c in terms)
    if v <= 0:
        return m + shift, 0.0
    z = math.sqrt(2.0 * math.log(1.0 / delta))
    guess = m + shift + z * math.sqrt(v)
    # a bounded loss (atoms, Laplace) cannot exceed the sum of its largest atoms: aim inside that range,
    # where the saddle-point tilt is finite (beyond it the tilt would run off to its cap)
    top = sum(c * (float(d.grid[np.flatnonzero(d.pmf > 0)[-1]]) + d.shift) for d, c in terms if np.any(d.pmf > 0))
    if guess >= m + shift + 0.999 * (top - m - shift):  # only then would the tilt run off to its cap
        guess = m + shift + 0.9 * max(top - m - shift, 0.0)
    return guess, saddle_tilt(terms, guess)


def saddle_epsilon(terms: Terms, delta: float) -> tuple[float, float]:
    """``(eps_guess, tilt)`` from the saddle-point approximation of the hockey-stick divergence:
    ``delta(eps) ~ exp(K(t) - t eps) / (t (t + 1) sqrt(2 pi K''(t)))`` at the tilt ``t`` whose tilted mean
    ``K'(t)`` is ``eps`` (``K`` the composition's exact CGF under ``P``), solved for ``t`` (its log falls with
    ``t``: ``(K - t K')' = -t K''``); the guess is ``K'(t)``. For Gaussian losses this is ``chernoff_epsilon``'s
    normal point less the prefactor's share; for bounded losses (atoms, randomized response) beside a Gaussian
    the normal point can sit far above the answer, and an FFT tilted there loses the answer to round-off (a
    Gaussian with six randomized responses at delta 9e-12: a normal point near 29, tilt 14, against an answer of
    18.5). Where the search fails it returns ``chernoff_epsilon``'s choice. Only accuracy depends on it.

    Parameters
    ----------
    terms : sequence of (DiscretisedLoss, int)
        The discretised losses and how many times each is composed.
    delta : float
        The target delta in (0, 1).

    Returns
    -------
    tuple of float
        ``(eps_guess, tilt)``, ``tilt >= 0``.

    Raises
    ------
    ValueError
        As ``chernoff_epsilon``, where it is the fallback.
    ZeroDivisionError
        As ``chernoff_epsilon``, where it is the fallback.
    """
    v = _moments(terms, 0.0)[1]
    shift = sum(c * d.shift for d, c in terms)
    if v <= 0 or not 0.0 < delta < 1.0:
        return chernoff_epsilon(terms, delta)
    log_delta = math.log(delta)

    def g(th: float) -> float:
        mu, var = _moments(terms, th)
        if var <= 0.0:
            return -math.inf  # all mass at the top: beyond every answer
        val = _cgf(terms, th) - th * mu - math.log(th * (th + 1.0) * math.sqrt(2.0 * math.pi * var)) - log_delta
        return val if math.isfinite(val) else math.nan

    lo, hi = 1e-6, 1.0
    try:
        if not g(lo) > 0.0:
            return chernoff_epsilon(terms, delta)
        while g(hi) > 0.0:
            lo, hi = hi, hi * 4.0
            if hi > 1e4:
                return chernoff_epsilon(terms, delta)
        th = falling_root(g, lo, hi, xtol=1e-4, rtol=1e-4)
    except (PrecisionError, OverflowError, ValueError, ZeroDivisionError):
        return chernoff_epsilon(terms, delta)
    return _moments(terms, th)[0] + shift, th


def saddle_tilt(terms: Terms, eps: float) -> float:
    """``theta >= 0`` whose tilted composition has mean ``eps`` (0 if ``eps`` is below the mean).

    Parameters
    ----------
    terms : sequence of (DiscretisedLoss, int)
        The discretised losses and how many times each is composed.
    eps : float
        The loss value the tilted composition should be centred on.

    Returns
    -------
    float
        The saddle-point tilt, within ``1e-4`` absolute and relative (``1e4`` at most: the search's cap).

    Raises
    ------
    PrecisionError
        If the tilted mean is NaN (``tightdp._numerics.falling_root``).
    """
    shift = sum(c * d.shift for d, c in terms)
    target = eps - shift

    def mean(th: float) -> float:
        return sum(c * d.d_log_mgf(th) for d, c in terms)

    if mean(0.0) >= target:
        return 0.0
    hi = 1.0
    while mean(hi) < target and hi < 1e4:
        hi *= 4.0
    if mean(hi) < target:
        return hi
    return falling_root(lambda th: target - mean(th), 0.0, hi, xtol=1e-4, rtol=1e-4)


def _cgf(terms: Terms, theta: float) -> float:
    return sum(c * d.log_mgf(theta) for d, c in terms)


#: the window search's theta grid, relative to the normal-theory optimum (np.geomspace costs 0.2 ms a call)
_WINDOW_THETAS = np.geomspace(1e-3, 1.5, 20)
_WINDOW_THETAS.flags.writeable = False


def _window(terms: Terms, tilt: float, tau: float) -> tuple[float, float, float]:
    """``[lo, hi]`` (unshifted grid units) with tilted mass <= tau outside on each side (Chernoff).

    The exact CGF is evaluated on a geometric grid of ``theta`` around the
    normal-theory optimum; any ``theta`` gives a valid bound, the search only
    makes the window tighter.
    """
    K0 = _cgf(terms, tilt)
    _, v = _moments(terms, tilt)
    base = math.sqrt(2.0 * math.log(1.0 / tau) / max(v, 1e-300))
    # heavy-tailed losses (rare large steps) want a much smaller theta than the variance suggests
    ths = base * _WINDOW_THETAS
    both = np.concatenate([ths, -ths])  # one pass over the blocks for both sides
    k_up = np.zeros(both.size)
    for d, c in terms:
        k_up += c * d.log_mgf_upper(tilt + both)
    with np.errstate(invalid="ignore", over="ignore"):
        vals = (k_up - K0 - math.log(tau)) / np.abs(both)
    th_up = _argmin_theta(vals[: ths.size], ths)
    th_dn = _argmin_theta(vals[ths.size :], ths)
    k_up, k_dn = sum((c * d.log_mgf_many((tilt + th_up, tilt - th_dn)) for d, c in terms), np.zeros(2))
    hi = (float(k_up) - K0 - math.log(tau)) / th_up
    lo = -(float(k_dn) - K0 - math.log(tau)) / th_dn
    return lo, hi, K0


def chernoff_window(terms: Terms, tilt: float, tau: float) -> tuple[float, float]:
    """``(lo, hi)`` in loss units (shifts included) outside which the ``tilt``-tilted composition has
    at most ``tau`` mass on each side (Chernoff bounds from the exact CGFs): the window ``compose``
    would use. For planning (grid sizes); ``compose`` computes and charges its own window.

    Parameters
    ----------
    terms : sequence of (DiscretisedLoss, int)
        The discretised losses and how many times each is composed (terms without mass are ignored).
    tilt : float
        The exponential tilt.
    tau : float
        The mass allowed outside on each side, in (0, 1).

    Returns
    -------
    tuple of float
        ``(lo, hi)`` in loss units.

    Raises
    ------
    ValueError
        If no term has a positive count and mass ("nothing to compose").

    References
    ----------
    Koskela et al. 2020 (Fourier accountant), Sec. 7 (Chernoff bounds on the window).
    """
    terms = [(d, int(c)) for d, c in terms if c > 0 and d.mass > 0]
    if not terms:
        raise ValueError("nothing to compose")
    lo, hi, _ = _window(terms, tilt, tau)
    shift = sum(c * d.shift for d, c in terms)
    return lo + shift, hi + shift


def _argmin_theta(vals: FloatArray, thetas: FloatArray) -> float:
    """``|theta|`` at the smallest finite value (the first theta if none is finite)."""
    i = int(np.argmin(np.where(np.isfinite(vals), vals, np.inf)))
    return float(abs(thetas[i]))


def _pick_theta(
    terms: Terms, tilt: float, thetas: FloatArray, objective: Callable[[FloatArray, FloatArray], FloatArray]
) -> float:
    """The theta (returned as ``|theta|``) minimising ``objective`` on cheap block upper bounds of the CGF.

    Only the choice of theta uses the block bounds; the caller evaluates the exact
    CGF at the chosen theta, so the resulting bound is exact for that theta.
    """
    k_up = np.zeros(thetas.size)
    for d, c in terms:
        k_up += c * d.log_mgf_upper(tilt + thetas)
    with np.errstate(invalid="ignore", over="ignore"):
        vals = objective(k_up, thetas)
    return _argmin_theta(vals, thetas)


def _tail_masses(terms: Terms, tilt: float, K0: float, bot: float, top: float) -> tuple[float, float]:
    """Chernoff bounds on the tilted mass below ``bot`` and above ``top`` (a wide geometric grid of theta)."""
    m, v = _moments(terms, tilt)
    v = max(v, 1e-300)
    th_hi = np.geomspace(1e-2, min(1e4, max(1.0, 4.0 * max(top - m, 0.0) / v)), 24)
    th_lo = np.geomspace(1e-2, min(1e4, max(1.0, 4.0 * max(m - bot, 0.0) / v)), 24)
    a = _pick_theta(terms, tilt, th_hi, lambda k, th: k - K0 - th * top)
    b = _pick_theta(terms, tilt, -th_lo, lambda k, th: k - K0 - th * bot)
    with np.errstate(over="ignore"):
        t_hi = math.exp(min(_cgf(terms, tilt + a) - K0 - a * top, 0.0))
        t_lo = math.exp(min(_cgf(terms, tilt - b) - K0 + b * bot, 0.0))
    return t_lo, t_hi

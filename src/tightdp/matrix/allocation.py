"""Balls-in-bins with a matrix mechanism, certified deterministically by a Loewner sandwich of the modes' Gram matrix.

Balls-in-bins (jax_privacy ``BallsInBinsSampling``; Choquette-Choo et al., ICLR 2025, arXiv 2410.06266;
Chua et al. 2412.16802): each record is put once in a uniform bin ``j`` of ``t = cycle_length`` and takes
part at steps ``j, j + t, j + 2t, ...``. With ``x_j`` that pattern's indicator and ``mu_j = C x_j`` (the
"modes"), the run of a record with a fixed unit gradient is the pair

    ``P = (1/t) sum_j N(mu_j, sigma^2 I)``  versus  ``Q = N(0, sigma^2 I)``,

which for a non-negative ``C`` dominates the run (2410.06266; the pair jax_privacy's Monte Carlo accountant
samples). Its privacy loss depends on the output only through ``<mu_j, y>``, so only the Gram matrix
``G = [<mu_j, mu_k>]`` matters.

**Sandwich lemma.** If ``G_nu`` and ``G_mu`` are Gram matrices with ``G_mu <= G_nu`` (Loewner order), there is a
contraction ``A`` with ``A nu_j = mu_j`` for all ``j``, and ``y = A w + N(0, sigma^2 (I - A A^T))`` maps
``N(nu_j, sigma^2 I)`` to ``N(mu_j, sigma^2 I)`` and ``N(0, sigma^2 I)`` to itself: the ``mu`` pair is a
post-processing of the ``nu`` pair, in both directions. For ``G_nu = c J + d I`` (``J`` all ones) the modes
``nu_j = sqrt(c) u + sqrt(d) e_j`` (orthonormal ``u, e_j``) split the pair into independent parts: a Gaussian
mechanism of sensitivity ``sqrt(c)`` and one 1-of-``t`` random allocation of Gaussians of sensitivity
``sqrt(d)`` (``tightdp.mechanisms.RandomAllocation``, certified both ways). Hence

* ``G <= c J + d I`` gives a certified **upper** bound (given the dominating pair above);
* ``c' J + d' I <= G`` gives a certified **lower** bound: the ``(c', d')`` pair is then a post-processing of
  the explicit pair above (a record with a fixed unit gradient), so its epsilon is below the run's.

Both are exact when ``G`` is compound symmetric (a diagonal ``C``: plain random allocation); for banded ``C``
the interval widens with how far ``G`` is from ``c J + d I``. Every semidefinite inequality is checked
numerically and the constants are moved to the safe side by the eigenvalue solver's error bound.
"""

from __future__ import annotations

import math

import numpy as np

from ..accountants.connect_dots import ConnectDotsAccountant
from ..errors import PrecisionError
from ..mechanisms.allocation import RandomAllocation
from ..mechanisms.basic import Gaussian
from .strategies import Strategy

__all__ = ["MIN_ALLOCATION_SIGMA", "lower_sandwich", "mode_gram", "sandwich_epsilon", "upper_sandwich"]

_U = float(np.finfo(float).eps) / 2
#: below this noise multiplier per unit sensitivity the allocation's lattice is too long to be practical
MIN_ALLOCATION_SIGMA = 0.8


def mode_gram(strategy: Strategy, n: int, t: int) -> np.ndarray:
    """``G = [<C x_j, C x_k>]`` for the cyclic patterns ``x_j`` (``j < t``) of ``n`` steps."""
    x = np.zeros((n, t))
    idx = np.arange(n)
    x[idx, idx % t] = 1.0
    coefs = strategy.toeplitz_coefs(n)
    if coefs is not None:  # C x by FFT convolution along the steps
        size = 1 << (2 * n - 1).bit_length()
        v = np.fft.irfft(np.fft.rfft(coefs, size)[:, None] * np.fft.rfft(x, size, axis=0), size, axis=0)[:n]
    else:
        v = strategy.matrix(n) @ x
    return v.T @ v


def _error(g: np.ndarray, extra: float = 0.0) -> float:
    """A bound on eigenvalue errors of symmetric matrices of ``G``'s size and scale (Weyl + backward stability),
    padded generously; the FFT's own error is covered by the same margin (relative 1e-10 of the norm)."""
    t = g.shape[0]
    return (64.0 * t * _U + 1e-10) * (float(np.linalg.norm(g, "fro")) + extra)


def upper_sandwich(g: np.ndarray, frac: float) -> tuple[float, float]:
    """``(c, d)`` with ``G <= c J + d I`` (checked), ``d`` a fraction ``frac`` of the way from the least admissible
    value (the top eigenvalue of ``G`` on the complement of the ones vector) to the largest eigenvalue."""
    t = g.shape[0]
    ones = np.ones(t) / math.sqrt(t)
    p = np.eye(t) - np.outer(ones, ones)
    w_perp = np.linalg.eigvalsh(p @ g @ p)
    lam_top = float(np.linalg.eigvalsh(g)[-1])
    d_min = max(float(w_perp[-1]), 0.0)
    d = d_min + max(frac, 1e-9) * max(lam_top - d_min, 1e-12 * lam_top)
    h = g - d * np.eye(t)
    # c = max over a with 1^T a = 1 of a^T H a: H is negative definite on the complement of 1
    q = np.linalg.qr(np.column_stack([np.ones(t), np.eye(t)[:, :t - 1]]))[0][:, 1:]
    a_mat = q.T @ h @ q
    b = q.T @ h @ np.ones(t) / t
    c = float(np.ones(t) @ h @ np.ones(t)) / t ** 2
    if t > 1:
        c -= float(b @ np.linalg.solve(a_mat, b))
    c = max(c, 0.0)
    resid = float(np.linalg.eigvalsh(c * np.ones((t, t)) + d * np.eye(t) - g)[0])
    d += max(0.0, -resid) + _error(g, c * t + d)
    return c, d


def lower_sandwich(g: np.ndarray, frac: float) -> tuple[float, float]:
    """``(c', d')`` with ``c' J + d' I <= G`` (checked): ``d'`` a fraction ``frac`` of ``lambda_min(G)``, ``c'`` the
    largest then admissible, ``1 / (1^T (G - d' I)^+ 1)`` (zero when ``1`` leaves the range)."""
    t = g.shape[0]
    w, v = np.linalg.eigh(g)
    d = max(0.0, frac * float(w[0]))
    lam = w - d
    proj = v.T @ np.ones(t)
    tol = 1e-9 * max(float(w[-1]), 1e-300)
    if np.any((lam <= tol) & (np.abs(proj) > 1e-9 * math.sqrt(t))):
        c = 0.0
    else:
        keep = lam > tol
        c = 1.0 / float(np.sum(proj[keep] ** 2 / lam[keep]))
    resid = float(np.linalg.eigvalsh(g - c * np.ones((t, t)) - d * np.eye(t))[0])
    eta = max(0.0, -resid) + _error(g, c * t + d)
    if d >= eta:
        d -= eta
    else:
        c = max(0.0, c - (eta - d) / t)
        d = 0.0
    return c, d


def _pair_epsilon(c: float, d: float, sigma: float, t: int, delta: float, eps_error, rel_error):
    """Bounds on epsilon of Gaussian(sqrt c) x RandomAllocation(1 of t, sqrt d); ``None`` if out of reach."""
    acc = ConnectDotsAccountant(eps_error=eps_error, rel_error=rel_error)
    if c > 0:
        acc.compose(Gaussian(noise_multiplier=sigma, sensitivity=math.sqrt(c)))
    if d > 0:
        if sigma / math.sqrt(d) < MIN_ALLOCATION_SIGMA:
            return None
        acc.compose(RandomAllocation(mechanism=Gaussian(noise_multiplier=sigma, sensitivity=math.sqrt(d)),
                                     num_steps=t))
    if c <= 0 and d <= 0:
        return 0.0, 0.0, 0.0
    try:
        b = acc.epsilon(delta)
    except PrecisionError:
        return None
    return b.lower, b.estimate, b.upper


def sandwich_epsilon(g: np.ndarray, sigma: float, delta: float, eps_error=None, rel_error=None,
                     fracs=(0.0, 0.1)):
    """``(lower, upper, (c, d) used above, (c', d') used below)``: the best of a few sandwiches, each certified.
    ``upper`` is ``inf`` (and ``lower`` 0) where the allocation is out of reach (tiny noise)."""
    t = g.shape[0]
    ones = np.ones(t) / math.sqrt(t)
    p = np.eye(t) - np.outer(ones, ones)
    d_floor = max(float(np.linalg.eigvalsh(p @ g @ p)[-1]), 0.0)
    best_up, arg_up = math.inf, None
    coarse = 0.05
    if d_floor == 0.0 or sigma / math.sqrt(d_floor) >= MIN_ALLOCATION_SIGMA:
        for f in fracs:  # pick the sandwich on a coarse accuracy, then certify it at the one asked for
            c, d = upper_sandwich(g, f)
            r = _pair_epsilon(c, d, sigma, t, delta, coarse, None)
            if r is not None and r[1] < best_up:  # by the estimate: the coarse ends are wide
                best_up, arg_up = r[1], (c, d)
    lo, arg_lo = 0.0, None
    for f in (1.0, 0.0):  # two candidates, each certified at the accuracy asked for
        c, d = lower_sandwich(g, f)
        r = _pair_epsilon(c, d, sigma, t, delta, eps_error, rel_error)
        if r is not None and r[0] > lo:
            lo, arg_lo = r[0], (c, d)
    up = math.inf
    if arg_up is not None:
        r = _pair_epsilon(*arg_up, sigma, t, delta, eps_error, rel_error)
        up = r[2] if r is not None else math.inf
    return lo, up, arg_up, arg_lo

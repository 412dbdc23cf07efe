"""Whitening: a lower end for any sampler from the smallest singular value of a Toeplitz ``C``.

**Lemma (whitening).** Let ``C`` be ``n x n`` with full rank and ``s_min > 0`` a lower bound on its smallest
singular value. For the record whose clipped gradient is a fixed unit vector at every step it takes part in (an
explicit neighbouring pair), the release ``y = C x + z``, ``z ~ N(0, sigma^2 I)``, is mapped by
``y -> C^(-1) y + w``, ``w ~ N(0, sigma^2 (s_min^(-2) I - (C^T C)^(-1)))`` independent (a covariance that is
positive semi-definite because ``(C^T C)^(-1) <= s_min^(-2) I``), to ``x + N(0, (sigma / s_min)^2 I)``: DP-SGD at
noise ``sigma / s_min`` with unit sensitivity and the same participation law. A post-processing of an explicit
pair, so every certified lower end of that DP-SGD is a certified lower end of the run, whatever the sampler.

**The certified ``s_min`` of a lower-triangular Toeplitz ``C``** (first column ``c``). The inverse ``C^(-1)``
is lower-triangular Toeplitz with the first ``n`` coefficients of the power series ``1 / c(z)``. With ``d`` a
computed approximation of them, ``C T(d) = I - R`` where ``R`` is lower-triangular Toeplitz with coefficients
``r = e_0 - (c * d)[:n]``; ``||R||_2 <= ||R||_1 <= sum |r| =: rho`` (the convolution's rounding bounded by the
standard ``gamma_m`` estimate). If ``rho < 1``, ``C^(-1) = T(d) (I - R)^(-1)`` and ``||C^(-1)||_2 <=
||T(d)||_2 / (1 - rho)``. A finite section of a Toeplitz matrix is a compression of multiplication by its symbol on
``L^2`` of the circle, so ``||T(d)||_2 <= sup_w |sum_k d_k e^(i k w)|``, bounded by the largest modulus on an
FFT grid of ``M`` points plus ``(pi / M) sum_k k |d_k|`` (the derivative between grid points) plus the FFT's
rounding. Then ``s_min >= (1 - rho) / sup``, rounded down. For BandMF's coefficients it is within 1 % of the
SVD's value at a fraction of its cost.
"""

from __future__ import annotations

import math

import numpy as np

from .strategies import Strategy

__all__ = ["toeplitz_min_singular_lower"]

_U = float(np.finfo(float).eps) / 2


def _gamma(m: int) -> float:
    return m * _U / (1.0 - m * _U)


def toeplitz_min_singular_lower(strategy: Strategy, n: int) -> float:
    """A certified lower bound on the smallest singular value of ``strategy``'s ``n x n`` matrix (module
    docstring); 0 when the strategy is not Toeplitz or the bound is out of reach (a symbol with zeros inside
    the disc, where the inverse series grows).

    Parameters
    ----------
    strategy : Strategy
        The strategy ``C``.
    n : int
        Steps (``>= 1``).

    Returns
    -------
    float
        ``s_min`` with ``sigma_min(C) >= s_min >= 0``.

    Raises
    ------
    ValueError
        ``n`` out of the strategy's range (from ``strategy.toeplitz_coefs``).
    """
    coefs = strategy.toeplitz_coefs(n)
    if coefs is None:
        return 0.0
    c = np.asarray(coefs, dtype=np.float64)
    nz = np.flatnonzero(c)
    if c[0] == 0.0 or nz.size == 0:
        return 0.0
    c = c[: int(nz[-1]) + 1]  # the bands
    impulse = np.zeros(n)
    impulse[0] = 1.0
    from scipy import signal  # lazily: scipy.signal (and scipy.stats under it) cost 0.6 s of `import tightdp`

    d = signal.lfilter([1.0], c, impulse)  # the first n coefficients of 1 / c(z)
    abs_d = np.abs(d)
    total = float(abs_d.sum())
    if not np.all(np.isfinite(d)) or total > 1e12:
        return 0.0
    m = min(c.size, n)
    conv = np.convolve(c, d)[:n]
    conv[0] -= 1.0
    abs_conv = np.convolve(np.abs(c), abs_d)[:n]
    rho = (float(np.abs(conv).sum()) + 2.0 * _gamma(m + 1) * float(abs_conv.sum())) * (1.0 + 4.0 * n * _U)
    if not rho < 0.5:
        return 0.0
    size = 1 << max(12, (16 * n - 1).bit_length())
    modulus = np.abs(np.fft.fft(d, size))
    deriv = float(np.sum(np.arange(n) * abs_d))
    fft_err = 8.0 * math.log2(size) * _U * total
    sup = (float(modulus.max()) + math.pi / size * deriv + fft_err) * (1.0 + 1e-12)
    return max(0.0, (1.0 - rho) / sup * (1.0 - 1e-12))

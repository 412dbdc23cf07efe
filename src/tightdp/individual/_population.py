"""Every example's delta(eps) / eps(delta) at once, from bucket counts (000 App. D, Lemma D.1, Thm D.2).

Each example ``i`` composed ``c[i, b]`` steps of bucket ``b``'s mechanism. With
the bucket PLDs ``a_b`` on one lattice ``h Z`` and their DFTs ``F_b`` (length
``n``, pre-computed once), the example's composed PLD has DFT
``prod_b F_b^{c[i,b]} = exp(sum_b c[i,b] log F_b)``: for the whole population
that is one matrix product ``counts @ log F`` (real and imaginary parts
separately; with integer counts the principal branch of ``log`` is exact).
``delta(eps)`` is then an ``O(n)`` inner product by Plancherel (Lemma D.1,
``deltas``), and ``eps(delta)`` comes from one inverse real FFT per example and
suffix sums (``epsilons``), both in chunks of examples.

Everything added to delta so that the result is a certified upper bound of the
composition of the bucket PLDs (which dominate the real steps):

* ``infinity``: ``1 - prod_b (1 - p_inf_b)^{c_b}``, rounded up;
* ``wrap``: the circular FFT folds mass above the window top onto its bottom.
  A Chernoff bound with the exact cumulant generating functions of the
  discrete bucket PLDs bounds that mass (mass folded from below lands at the
  top and can only increase delta);
* ``float``: spectral round-off. With ``gamma = 5 u log2 n`` bounding the error
  of each DFT coefficient of a probability vector, the exact product differs
  from the computed one by at most ``prod (|F~|+gamma)^c - prod |F~|^c``
  plus the rounding of ``exp(sum c log F~)``; by Parseval the l1 error of the
  inverse transform is at most the l2 norm of the spectral error, plus
  ``gamma ||S||_2`` for the inverse FFT itself; the weights ``(1 - e^{eps-x})_+``
  lie in ``[0, 1]``;
* ``slack``: ``sum_b c_b float_slack_b`` from the bucket discretisation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import fft as sfft
from scipy import special

from ._dominating import DominatingPLD

__all__ = ["BucketSpectra", "population_epsilons", "population_deltas"]

_U = np.finfo(float).eps / 2
_THETAS = np.geomspace(1e-2, 2e3, 48)
_Z_LO, _Z_HI = 8.0, 12.0


@dataclass(eq=False)
class BucketSpectra:
    """Pre-computed per-bucket data on one window (``n`` points starting at lattice index ``j0``)."""

    h: float
    n: int
    j0: int
    logabs: np.ndarray      # (B, n//2+1) log|F_b| (clamped)
    arg: np.ndarray         # (B, n//2+1)
    log_up: np.ndarray      # (B, n//2+1) log(|F_b| + gamma) - logabs
    log1m_inf: np.ndarray   # (B,) log(1 - p_inf_b)
    cgf: np.ndarray         # (B, T) log-MGF of the finite part at _THETAS
    slack: np.ndarray       # (B,)
    wts: np.ndarray         # rfft weights (1, 2, ..., 2, 1)

    @property
    def x(self) -> np.ndarray:
        return (self.j0 + np.arange(self.n)) * self.h


def moments_table(plds: list[DominatingPLD]) -> tuple[np.ndarray, np.ndarray]:
    mv = np.array([p.moments() for p in plds])
    return mv[:, 0] * np.array([p.pmf.sum() for p in plds]), mv[:, 1]


def choose_window(plds: list[DominatingPLD], counts: np.ndarray, h: float) -> tuple[int, int]:
    """A common window ``[j0, j0 + n)`` covering every example's composed PLD (mean -8 sd .. mean +12 sd)."""
    means, vars_ = moments_table(plds)
    m = counts @ means
    sd = np.sqrt(np.maximum(counts @ vars_, 0.0))
    lo = min(float(np.min(m - _Z_LO * sd)), 0.0) - 8 * h
    hi = max(float(np.max(m + _Z_HI * sd)), 0.0) + 8 * h
    j0 = math.floor(lo / h)
    n = sfft.next_fast_len(max(64, math.ceil(hi / h) - j0 + 1), real=True)
    n += n % 2
    return j0, n


def bucket_spectra(plds: list[DominatingPLD], h: float, j0: int, n: int) -> BucketSpectra:
    gamma = 5.0 * _U * math.log2(n)
    k = n // 2 + 1
    logabs = np.empty((len(plds), k))
    arg = np.empty((len(plds), k))
    log_up = np.empty((len(plds), k))
    for b, p in enumerate(plds):
        idx = (p.start + np.arange(p.pmf.size)) % n
        vec = np.bincount(idx, weights=p.pmf, minlength=n)
        F = sfft.rfft(vec)
        mag = np.abs(F)
        with np.errstate(divide="ignore"):
            la = np.maximum(np.log(mag), -1e4)
        logabs[b] = la
        arg[b] = np.angle(F)
        log_up[b] = np.log(mag + gamma) - la
    inf = np.array([p.infinity_mass for p in plds])
    with np.errstate(divide="ignore"):
        log1m = np.log1p(-inf)
    cgf = np.array([p.log_mgf(_THETAS) for p in plds])
    slack = np.array([p.float_slack for p in plds])
    wts = np.full(k, 2.0)
    wts[0] = 1.0
    wts[-1] = 1.0
    return BucketSpectra(h, n, j0, logabs, arg, log_up, log1m, cgf, slack, wts)


def _extras(bs: BucketSpectra, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per example: infinity mass (rounded up), wrap-around bound, discretisation slack."""
    K = counts.sum(axis=1)
    s = counts @ bs.log1m_inf                     # <= 0
    inf_mass = np.minimum(1.0, -np.expm1(s * (1 + 4 * _U * bs.log1m_inf.size)) + 8 * _U * K * 1e-3)
    inf_mass = np.where(np.isneginf(s), 1.0, inf_mass)
    top = (bs.j0 + bs.n) * bs.h
    cg = counts @ bs.cgf                          # (N, T)
    logb = cg - _THETAS[None, :] * top
    logb += 1e-12 * (np.abs(cg) + _THETAS[None, :] * abs(top))
    wrap = np.exp(np.minimum(np.min(logb, axis=1), 0.0))
    slack = counts @ bs.slack * (1 + 1e-12)
    return inf_mass, wrap, slack


def _spectra(bs: BucketSpectra, counts: np.ndarray):
    """Product spectra (window-aligned) and the per-example l1 bound of their round-off."""
    cf = counts.astype(float)
    K = cf.sum(axis=1)
    re = cf @ bs.logabs
    im = cf @ bs.arg
    R = cf @ bs.log_up
    B = counts.shape[1]
    E = 2 * _U * (B + 4) * (np.abs(re) + K[:, None] * (math.pi + 1.0))
    mag = np.exp(re)
    k = np.arange(bs.logabs.shape[1])
    phase = im + (2 * math.pi / bs.n) * ((bs.j0 % bs.n) * k)[None, :]
    spec = mag * np.exp(1j * phase)
    with np.errstate(over="ignore"):
        dlt = np.maximum(np.exp(re + R + E) - mag, 0.0) + 8 * _U * np.exp(re + R + E)
    gamma = 5.0 * _U * math.log2(bs.n)
    err = np.sqrt(dlt ** 2 @ bs.wts) + gamma * np.sqrt(mag ** 2 @ bs.wts)
    return spec, err


def population_epsilons(bs: BucketSpectra, counts: np.ndarray, delta: float, chunk: int = 1024):
    """Upper bounds on every example's eps(delta) and the delta budget spent on error terms."""
    N = counts.shape[0]
    eps = np.zeros(N)
    spent = np.zeros(N)
    x = bs.x
    ex = np.exp(-x)
    for s0 in range(0, N, chunk):
        c = counts[s0:s0 + chunk]
        inf_mass, wrap, slack = _extras(bs, c)
        spec, ferr = _spectra(bs, c)
        w = sfft.irfft(spec, bs.n, axis=1)
        np.maximum(w, 0.0, out=w)
        # suffix sums A_t = sum_{u>=t} w_u, Bs_t = sum_{u>=t} w_u e^{-x_u}; their round-off <= n u sum w
        A = np.cumsum(w[:, ::-1], axis=1)[:, ::-1]
        Bs = np.cumsum((w * ex)[:, ::-1], axis=1)[:, ::-1]
        cum_err = 2 * bs.n * _U * A[:, 0] * (1 + 1e-9)
        extra = inf_mass + wrap + slack + ferr + cum_err
        target = delta - extra
        spent[s0:s0 + chunk] = extra
        # delta~ at eps = x_t is A_{t+1} - e^{x_t} Bs_{t+1}
        A1 = np.concatenate([A[:, 1:], np.zeros((A.shape[0], 1))], axis=1)
        B1 = np.concatenate([Bs[:, 1:], np.zeros((A.shape[0], 1))], axis=1)
        with np.errstate(over="ignore", invalid="ignore"):
            dgrid = A1 - np.exp(x)[None, :] * B1
        okg = dgrid <= target[:, None]
        okg[:, x < 0] = False
        t = np.argmax(okg, axis=1)
        found = okg[np.arange(okg.shape[0]), t]
        # delta~(0) <= target  ->  eps = 0
        i0 = int(np.searchsorted(x, 0.0, side="right"))  # first x > 0
        d0 = A[:, i0] - Bs[:, i0]  # eps = 0: sum_{x>0} w (1 - e^{-x})
        zero = d0 <= target
        # inside the cell (x_{t-1}, x_t]: delta~(eps) = A_t - e^eps Bs_t
        rows = np.arange(c.shape[0])
        At, Bt = A[rows, t], Bs[rows, t]
        with np.errstate(divide="ignore", invalid="ignore"):
            e_cell = np.log(np.maximum(At - target, 1e-300)) - np.log(np.maximum(Bt, 1e-300))
        e_cell = np.clip(e_cell, x[np.maximum(t - 1, 0)], x[t])
        e_cell = e_cell + 1e-12 * (1.0 + np.abs(e_cell))
        res = np.where(found, np.maximum(e_cell, 0.0), math.inf)
        res = np.where(zero, 0.0, res)
        res = np.where(target <= 0, math.inf, res)
        eps[s0:s0 + chunk] = res
    return eps, spent


def population_deltas(bs: BucketSpectra, counts: np.ndarray, epsilon: float, chunk: int = 2048):
    """Upper bounds on every example's delta(epsilon) by Plancherel (000 Lemma D.1)."""
    x = bs.x
    with np.errstate(over="ignore"):
        g = np.where(x > epsilon, -np.expm1(epsilon - x), 0.0)
    G = sfft.rfft(g)  # the window shift is already in the spectra's phase
    N = counts.shape[0]
    out = np.zeros(N)
    gw = np.conj(G) * bs.wts
    g1 = float(np.sum(np.abs(G) * bs.wts))
    for s0 in range(0, N, chunk):
        c = counts[s0:s0 + chunk]
        inf_mass, wrap, slack = _extras(bs, c)
        spec, ferr = _spectra(bs, c)
        val = (spec.real @ gw.real - spec.imag @ gw.imag) / bs.n
        # rounding of the inner product: n u sum |G||S| / n <= u * g1 * max|S|
        ip_err = 4 * bs.logabs.shape[1] * _U * g1 * np.max(np.abs(spec), axis=1) / bs.n
        out[s0:s0 + chunk] = np.minimum(1.0, np.maximum(val, 0.0) + ferr + ip_err + inf_mass + wrap + slack)
    return out

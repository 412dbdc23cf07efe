"""Every example's delta(eps) / eps(delta) at once, from bucket counts (000 App. D, Lemma D.1, Thm D.2).

Each example ``i`` composed ``c[i, b]`` steps of bucket ``b``'s mechanism. With
the bucket PLDs ``a_b`` on one lattice ``h Z`` and their DFTs ``F_b`` (length
``n``, pre-computed once), the example's composed PLD has DFT
``prod_b F_b^{c[i,b]} = exp(sum_b c[i,b] log F_b)``: for the whole population
that is one matrix product ``counts @ log F`` (real and imaginary parts
separately; with integer counts the principal branch of ``log`` is exact).
``delta(eps)`` is then an ``O(n)`` inner product by Plancherel (Lemma D.1)
with the pre-computed DFT of the weight vector ``(1 - e^{eps - x})_+``; for a
shared grid of epsilons that is one more matrix product, and ``eps(delta)``
follows by a safe chord in ``alpha = e^eps``. Frequencies whose coefficient is
below ``e^-70`` for every example of a chunk (in bound) are dropped, so a
chunk costs ``O(k_sig)`` per example where ``k_sig`` is the number of
significant frequencies (often far fewer than ``n``); examples are processed
sorted by spread so that chunks are homogeneous.

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
    suffmax: np.ndarray     # (B, n//2+1) max over k' >= k of logabs + log_up

    @property
    def x(self) -> np.ndarray:
        return (self.j0 + np.arange(self.n)) * self.h


def moments_table(plds: list[DominatingPLD]) -> tuple[np.ndarray, np.ndarray]:
    mv = np.array([p.moments() for p in plds])
    return mv[:, 0] * np.array([p.pmf.sum() for p in plds]), mv[:, 1]


def _chernoff_reach(plds: list[DominatingPLD], counts: np.ndarray, log_target: float, sign: float) -> float:
    """Smallest ``a`` with ``P(sign * L >= a) <= e^log_target`` for every example, by the Chernoff bound
    ``P(sign L >= a) <= exp(K(sign theta) - theta a)`` with the exact cumulant generating functions of the
    discrete bucket PLDs (the same bound ``_extras`` charges for the wrap-around)."""
    cgf = np.array([p.log_mgf(sign * _THETAS) for p in plds])      # (B, T)
    cg = counts @ cgf                                                 # (N, T)
    with np.errstate(invalid="ignore"):
        a = np.min((cg - log_target) / _THETAS[None, :], axis=1)
    a = a[np.isfinite(a)]
    return float(np.max(a)) if a.size else 0.0


def choose_window(plds: list[DominatingPLD], counts: np.ndarray, h: float,
                  target: float | None = None) -> tuple[int, int]:
    """A common window ``[j0, j0 + n)`` covering every example's composed PLD: mean -8 sd .. mean +12 sd,
    widened (``target`` given) until the Chernoff bound on the mass outside is ``<= target`` on both
    sides. Subsampled PLDs are heavy-tailed: for few steps the mass beyond mean + 12 sd can be far
    above delta, and the wrap-around term (charged in full to delta) made epsilon infinite."""
    means, vars_ = moments_table(plds)
    m = counts @ means
    sd = np.sqrt(np.maximum(counts @ vars_, 0.0))
    lo = min(float(np.min(m - _Z_LO * sd)), 0.0)
    hi = max(float(np.max(m + _Z_HI * sd)), 0.0)
    if target is not None:
        lt = math.log(target)
        hi = max(hi, _chernoff_reach(plds, counts, lt, 1.0) * (1 + 1e-9))
        lo = min(lo, -_chernoff_reach(plds, counts, lt, -1.0) * (1 + 1e-9))
    lo -= 8 * h
    hi += 8 * h
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
    suffmax = np.maximum.accumulate((logabs + log_up)[:, ::-1], axis=1)[:, ::-1]
    return BucketSpectra(h, n, j0, logabs, arg, log_up, log1m, cgf, slack, wts, suffmax)


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


_FLUSH = 1e-150  # spectral coefficients bounded below this are flushed to zero (see _spectra)
_LOG_CUT = -70.0  # spectral coefficients below e^-70 (in bound) are dropped; their l2 mass is bounded


def _spectra(bs: BucketSpectra, counts: np.ndarray):
    """Product spectra (window-aligned, truncated to the significant frequencies) and the l1
    bound of everything that makes them differ from the exact composed PLD's spectrum."""
    cf = counts.astype(float)
    K = cf.sum(axis=1)
    B = counts.shape[1]
    ee = 2 * _U * (B + 4)
    # smallest prefix [0, kc) outside which every coefficient is below e^_LOG_CUT: for k >= kc,
    # log|S_k| <= re + R + E <= (1 - ee) c @ suffmax_b(kc) + ee K (max log_up + pi + 1)
    full = bs.logabs.shape[1]
    slack_k = ee * K * (float(np.max(bs.log_up)) + math.pi + 1.0)
    kc = min(64, full)
    while kc < full:
        b = cf @ bs.suffmax[:, kc]
        if np.max(np.where(b < 0, (1 - ee) * b, b) + slack_k) <= _LOG_CUT:
            break
        kc = min(2 * kc, full)
    re = cf @ bs.logabs[:, :kc]
    R = cf @ bs.log_up[:, :kc]
    U = re + R + ee * (np.abs(re) + K[:, None] * (math.pi + 1.0))  # log of a bound on |S|
    sig = np.nonzero(np.max(U, axis=0) > _LOG_CUT)[0]
    kmax = int(sig[-1]) + 1 if sig.size else 1
    re, U = re[:, :kmax], U[:, :kmax]
    im = cf @ bs.arg[:, :kmax]
    bound = np.exp(U)
    # coefficients whose bound is below _FLUSH are set to 0 (subnormal operands made the products
    # below ~100x slower); |S_k| <= _FLUSH there, at most n of them: sqrt(n) _FLUSH in l2
    tiny = bound < _FLUSH
    mag = np.where(tiny, 0.0, np.exp(np.where(tiny, 0.0, re)))
    bound = np.where(tiny, 0.0, bound)
    k = np.arange(kmax)
    phase = im + (2 * math.pi / bs.n) * ((bs.j0 % bs.n) * k)[None, :]
    spec = mag * np.exp(1j * phase)
    dlt = np.maximum(bound - mag, 0.0) + 8 * _U * bound
    w = bs.wts[:kmax]
    gamma = 5.0 * _U * math.log2(bs.n)
    # dropped frequencies: each |S_k| <= e^_LOG_CUT, at most n of them
    tail = math.sqrt(bs.n) * (math.exp(_LOG_CUT) + _FLUSH)
    err = np.sqrt((dlt ** 2) @ w) + gamma * np.sqrt((mag ** 2) @ w) + tail
    return spec, err, kmax


_WEIGHT_CELLS = 1 << 21  # grid points x window points per block of hockey-stick weights


def _weights_dft(bs: BucketSpectra, eps_grid: np.ndarray, kmax: int):
    """DFTs of the hockey-stick weights ``(1 - e^{eps - x})_+`` on the window, one row per eps (Lemma D.1),
    truncated to the first ``kmax`` frequencies (computed in blocks of rows: bounded memory)."""
    key = (eps_grid.tobytes(), kmax)
    cache = bs.__dict__.setdefault("_gcache", {})
    if key not in cache:
        x = bs.x
        G = np.empty((eps_grid.size, kmax), dtype=complex)
        rows = max(1, _WEIGHT_CELLS // bs.n)
        for r0 in range(0, eps_grid.size, rows):
            e = eps_grid[r0:r0 + rows, None]
            with np.errstate(over="ignore"):
                g = np.where(x[None, :] > e, -np.expm1(e - x[None, :]), 0.0)
            G[r0:r0 + rows] = sfft.rfft(g, axis=1)[:, :kmax]
        l1 = np.sum(np.abs(G) * bs.wts[None, :kmax], axis=1)
        cache.clear()
        Gw = np.conj(G) * bs.wts[None, :kmax]
        cache[key] = (np.ascontiguousarray(Gw.real.T), np.ascontiguousarray(Gw.imag.T), l1)
    return cache[key]


def _delta_grid(bs: BucketSpectra, pre, eps_grid: np.ndarray):
    """Certified upper bounds on delta at every grid epsilon for every example of a chunk (Plancherel,
    O(n) each); ``pre = _prepare(bs, counts)``."""
    sre, sim, smax, kmax, extra = pre
    GrT, GiT, l1 = _weights_dft(bs, eps_grid, kmax)
    val = (sre @ GrT - sim @ GiT) / bs.n
    ip_err = (4 * kmax + 8) * _U * smax[:, None] * l1[None, :] / bs.n
    return np.minimum(1.0, np.maximum(val, 0.0) + ip_err + extra[:, None])


def _prepare(bs: BucketSpectra, counts: np.ndarray):
    """Product spectra of a chunk and its error terms (everything but the weights)."""
    inf_mass, wrap, slack = _extras(bs, counts)
    spec, ferr, kmax = _spectra(bs, counts)
    smax = np.max(np.abs(spec), axis=1)
    # contiguous real and imaginary parts: a matrix product with the strided views of a complex
    # array bypasses BLAS and was about 100x slower (most of the time of a query)
    return (np.ascontiguousarray(spec.real), np.ascontiguousarray(spec.imag), smax, kmax,
            inf_mass + wrap + slack + ferr)


def _order(bs: BucketSpectra, counts: np.ndarray) -> np.ndarray:
    """Examples sorted by composed variance, so that each chunk needs a similar number of frequencies."""
    return np.argsort(counts @ np.abs(bs.logabs[:, min(4, bs.logabs.shape[1] - 1)]), kind="stable")


def _chord_eps(D: np.ndarray, eps_grid: np.ndarray, delta: float):
    """Per row: upper bound on eps(delta) from certified upper values ``D`` on ``eps_grid`` (inf if none
    is <= delta), and the bracket ``[eps_grid[j-1], eps_grid[j]]`` it lies in."""
    m = D.shape[0]
    alpha = np.exp(eps_grid)
    ok = D <= delta
    first = np.argmax(ok, axis=1)
    found = ok[np.arange(m), first]
    e = np.full(m, math.inf)
    lo = np.full(m, math.nan)
    hi = np.full(m, math.nan)
    zero = found & (first == 0)
    e[zero] = eps_grid[0]
    lo[zero] = eps_grid[0]
    hi[zero] = eps_grid[0]
    mid = found & (first > 0)
    if np.any(mid):
        r = np.nonzero(mid)[0]
        j = first[r]
        d0, d1 = D[r, j - 1], D[r, j]
        a0, a1 = alpha[j - 1], alpha[j]
        frac = np.where(d0 > d1, (d0 - delta) / np.maximum(d0 - d1, 1e-300), 1.0)
        a = a0 + np.clip(frac, 0.0, 1.0) * (a1 - a0)
        val = np.log(a)
        e[r] = np.minimum(val + 1e-12 * (1.0 + val), eps_grid[j])
        lo[r] = eps_grid[j - 1]
        hi[r] = eps_grid[j]
    return e, lo, hi


def population_epsilons(bs: BucketSpectra, counts: np.ndarray, delta: float, chunk: int = 2048,
                        grid_points: int = 256, refinements: int = 3):
    """Upper bounds on every example's eps(delta) and the delta spent on error terms.

    delta is evaluated on a shared grid of epsilons (pre-computed weight DFTs);
    between grid points the curve is convex in ``alpha = e^eps`` (000 App. C.6),
    so the chord through two certified upper values lies above it and the
    chord's crossing of ``delta`` is an upper bound on epsilon. The grid is then
    refined (``refinements`` times) over the brackets found in a chunk; every
    pass gives a certified bound and the smallest is kept.
    """
    N = counts.shape[0]
    top = float(bs.x[-1])
    G = int(min(grid_points, max(32, (2 * _WEIGHT_CELLS) // bs.n)))
    G1 = 48  # points of each refinement pass (shared by the distinct brackets of a chunk)
    eps_grid = np.linspace(0.0, max(top, 1e-3), G)
    eps = np.zeros(N)
    spent = np.zeros(N)
    order = _order(bs, counts)
    for s0 in range(0, N, chunk):
        rows = order[s0:s0 + chunk]
        pre = _prepare(bs, counts[rows])
        spent[rows] = pre[4]
        e, lo, hi = _chord_eps(_delta_grid(bs, pre, eps_grid), eps_grid, delta)
        for _ in range(refinements):
            fin = np.isfinite(lo) & (hi > lo)
            if not np.any(fin):
                break
            br = np.unique(np.stack([lo[fin], hi[fin]], axis=1), axis=0)
            if np.all(br[:, 1] - br[:, 0] <= 1e-6 * (1.0 + br[:, 1])):
                break
            # any increasing grid works (the chord argument holds between any two epsilons)
            per = max(3, G1 // br.shape[0] + 1)
            grid = np.unique(np.concatenate([np.linspace(a, b, per) for a, b in br]))
            e2, lo2, hi2 = _chord_eps(_delta_grid(bs, pre, grid), grid, delta)
            # rows whose bracket lies in [a, b] get a (certified) bracket on the finer grid
            better = fin & np.isfinite(e2)
            e = np.where(better, np.minimum(e, e2), e)
            lo = np.where(better, lo2, np.nan)
            hi = np.where(better, hi2, np.nan)
        eps[rows] = e
    return eps, spent


def population_deltas(bs: BucketSpectra, counts: np.ndarray, epsilon: float, chunk: int = 2048):
    """Upper bounds on every example's delta(epsilon) by Plancherel (000 Lemma D.1)."""
    N = counts.shape[0]
    out = np.zeros(N)
    order = _order(bs, counts)
    for s0 in range(0, N, chunk):
        rows = order[s0:s0 + chunk]
        D = _delta_grid(bs, _prepare(bs, counts[rows]), np.array([float(epsilon)]))
        out[rows] = D[:, 0]
    return out

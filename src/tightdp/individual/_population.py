"""Every example's delta(eps) / eps(delta) at once, from bucket counts (Koskela et al. 2023, App. D, Lemma D.1, Thm D.2).

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

The chunked products over the ledger's rows (in memory or on a dask cluster) are in ``_chunks``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, cast

import numpy as np
from scipy import fft as sfft

from .._caches import register as _register_cache
from .._types import AnyArray, FloatArray
from ._chunks import ROW_BLOCK, hash_weights, map_chunks, rows_at, rows_exact
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
    logabs: FloatArray  # (B, n//2+1) log|F_b| (clamped)
    arg: FloatArray  # (B, n//2+1)
    log_up: FloatArray  # (B, n//2+1) log(|F_b| + gamma) - logabs
    log1m_inf: FloatArray  # (B,) log(1 - p_inf_b)
    cgf: FloatArray  # (B, T) log-MGF of the finite part at _THETAS
    slack: FloatArray  # (B,)
    wts: FloatArray  # rfft weights (1, 2, ..., 2, 1)
    suffmax: FloatArray  # (B, n//2+1) max over k' >= k of logabs + log_up
    rel: FloatArray | None = None  # (B,) relative error of the atoms' masses
    shift: FloatArray | None = None  # (B,) <= 0: losses of a dominated pair lie this far below the lattice
    cgf_neg: FloatArray | None = None  # (B, T) log-MGF of the finite part at -_THETAS (lower tail)
    plds: list[DominatingPLD] | None = None  # the bucket PLDs (for per-chunk windows, ``_chunk_spectra``)
    target: float | None = None  # the wrap-around target the window was sized for

    @property
    def x(self) -> FloatArray:
        return (self.j0 + np.arange(self.n)) * self.h


def moments_table(plds: list[DominatingPLD]) -> tuple[FloatArray, FloatArray]:
    """Per bucket PLD: its mean times its mass, and its second moment (``DominatingPLD.moments``)."""
    out: tuple[FloatArray, FloatArray] = _moments_table(tuple(plds))
    return out


@_register_cache
@lru_cache(maxsize=1)  # the last table: the chunks of one query share the bucket PLDs (keyed by identity)
def _moments_table(plds: tuple[DominatingPLD, ...]) -> tuple[FloatArray, FloatArray]:
    mv = np.array([p.moments() for p in plds])
    return mv[:, 0] * np.array([p.pmf.sum() for p in plds]), mv[:, 1]


def _chernoff_reach(
    plds: list[DominatingPLD], counts: AnyArray, log_target: float, sign: float, cgf: FloatArray | None = None
) -> float:
    """Smallest ``a`` with ``P(sign * L >= a) <= e^log_target`` for every example, by the Chernoff bound
    ``P(sign L >= a) <= exp(K(sign theta) - theta a)`` with the exact cumulant generating functions of the
    discrete bucket PLDs (the same bound ``_extras`` charges for the wrap-around); ``cgf``: the (B, T)
    table at ``sign * _THETAS`` if already computed."""
    if cgf is None:
        cgf = np.array([p.log_mgf(sign * _THETAS) for p in plds])  # (B, T)

    def reach(block: AnyArray) -> float:  # per row the best theta, then the largest over the rows (exact: min / max)
        cg = block @ cgf  # (rows, T)
        with np.errstate(invalid="ignore"):
            a = np.min((cg - log_target) / _THETAS[None, :], axis=1)
        if hasattr(a, "dask"):
            import dask.array as da

            return float(da.nanmax(da.where(da.isfinite(a), a, np.nan)).compute()) if a.shape[0] else math.nan
        a = a[np.isfinite(a)]
        return float(np.max(a)) if a.size else math.nan

    if hasattr(counts, "dask"):
        r = reach(counts)
    else:  # blocks of rows: the (N, T) table would be 48 floats per example
        r = max(
            [reach(counts[i : i + ROW_BLOCK]) for i in range(0, counts.shape[0], ROW_BLOCK)] + [math.nan],
            key=lambda v: -math.inf if math.isnan(v) else v,
        )
    return 0.0 if math.isnan(r) else r


def choose_window(
    plds: list[DominatingPLD],
    counts: AnyArray,
    h: float,
    target: float | None = None,
    cgfs: tuple[Any, ...] | None = None,
) -> tuple[int, int]:
    """A common window ``[j0, j0 + n)`` covering every example's composed PLD: mean -8 sd .. mean +12 sd,
    widened (``target`` given) until the Chernoff bound on the mass outside is ``<= target`` on both
    sides. Subsampled PLDs are heavy-tailed: for few steps the mass beyond mean + 12 sd can be far
    above delta, and the wrap-around term (charged in full to delta) made epsilon infinite."""
    means, vars_ = moments_table(plds)
    m = rows_at(counts, means)
    sd = np.sqrt(np.maximum(rows_at(counts, vars_), 0.0))
    lo = min(float(np.min(m - _Z_LO * sd)), 0.0)
    hi = max(float(np.max(m + _Z_HI * sd)), 0.0)
    if target is not None:
        lt = math.log(target)
        cp, cn = cgfs if cgfs is not None else (None, None)
        hi = max(hi, _chernoff_reach(plds, counts, lt, 1.0, cp) * (1 + 1e-9))
        lo = min(lo, -_chernoff_reach(plds, counts, lt, -1.0, cn) * (1 + 1e-9))
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
    rel = np.array([getattr(p, "rel_error", 0.0) for p in plds])
    shift = np.array([getattr(p, "shift", 0.0) for p in plds])
    cgf_neg = np.array([p.log_mgf(-_THETAS) for p in plds])
    return BucketSpectra(
        h, n, j0, logabs, arg, log_up, log1m, cgf, slack, wts, suffmax, rel, np.minimum(shift, 0.0), cgf_neg
    )


def _extras(bs: BucketSpectra, counts: AnyArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Per example: infinity mass (rounded up), wrap-around bound, discretisation slack."""
    K = counts.sum(axis=1)
    s = counts @ bs.log1m_inf  # <= 0
    inf_mass = np.minimum(1.0, -np.expm1(s * (1 + 4 * _U * bs.log1m_inf.size)) + 8 * _U * K * 1e-3)
    inf_mass = np.where(np.isneginf(s), 1.0, inf_mass)
    top = (bs.j0 + bs.n) * bs.h
    cg = counts @ bs.cgf  # (N, T)
    logb = cg - _THETAS[None, :] * top
    logb += 1e-12 * (np.abs(cg) + _THETAS[None, :] * abs(top))
    wrap = np.exp(np.minimum(np.min(logb, axis=1), 0.0))
    slack = counts @ bs.slack * (1 + 1e-12)
    return inf_mass, wrap, slack


_FLUSH = 1e-150  # spectral coefficients bounded below this are flushed to zero (see _spectra)
_LOG_CUT = -70.0  # spectral coefficients below e^-70 (in bound) are dropped; their l2 mass is bounded
#: with a target (the delta the error terms must stay below), the dropped frequencies may cost up to this share of it
_CUT_SHARE = 1e-5


def _log_cut(bs: BucketSpectra) -> float:
    """The level below which a spectral coefficient (in bound) is dropped: ``e^-70``, or, when the window was
    sized for a ``target``, the level at which even ``n`` dropped coefficients cost at most ``_CUT_SHARE`` of it
    (``sqrt(n) e^cut``, the l2 term that ``_spectra`` charges). After few steps the composed PLDs sit on few
    lattice points and their spectra decay slowly: at ``e^-70`` every frequency was kept (2000 examples after 5
    steps at delta 1e-5: 8193 of 8193, against 4334 at this cut, whose tail costs ``1e-7`` of delta)."""
    if bs.target is None or not bs.target > 0.0:
        return _LOG_CUT
    return max(_LOG_CUT, math.log(_CUT_SHARE * bs.target / math.sqrt(bs.n)))


def _spectra(bs: BucketSpectra, counts: AnyArray) -> Any:
    """Product spectra (window-aligned, truncated to the significant frequencies) and the l1
    bound of everything that makes them differ from the exact composed PLD's spectrum."""
    cf = counts.astype(float)
    K = cf.sum(axis=1)
    B = counts.shape[1]
    ee = 2 * _U * (B + 4)
    # smallest prefix [0, kc) outside which every coefficient is below e^cut: for k >= kc,
    # log|S_k| <= re + R + E <= (1 - ee) c @ suffmax_b(kc) + ee K (max log_up + pi + 1)
    full = bs.logabs.shape[1]
    cut = _log_cut(bs)
    slack_k = ee * K * (float(np.max(bs.log_up)) + math.pi + 1.0)
    kc = min(64, full)
    while kc < full:
        b = cf @ bs.suffmax[:, kc]
        if np.max(np.where(b < 0, (1 - ee) * b, b) + slack_k) <= cut:
            break
        kc = min(2 * kc, full)
    re = cf @ bs.logabs[:, :kc]
    R = cf @ bs.log_up[:, :kc]
    U = re + R + ee * (np.abs(re) + K[:, None] * (math.pi + 1.0))  # log of a bound on |S|
    sig = np.nonzero(np.max(U, axis=0) > cut)[0]
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
    # dropped frequencies: each |S_k| <= e^cut, at most n of them
    tail = math.sqrt(bs.n) * (math.exp(cut) + _FLUSH)
    err = np.sqrt((dlt**2) @ w) + gamma * np.sqrt((mag**2) @ w) + tail
    return spec, err, kmax


_WEIGHT_CELLS = 1 << 21  # grid points x frequencies per block of hockey-stick weights


def _trig_table(bs: BucketSpectra) -> tuple[FloatArray, FloatArray]:
    """``cos(pi r / n)`` and ``sin(pi r / n)`` for ``r = 0..2n-1`` (sines exactly 0 at r = 0, n), cached."""
    tab = bs.__dict__.get("_trig")
    if tab is None:
        r = np.arange(2 * bs.n)
        c = np.cos((math.pi / bs.n) * r)
        sn = np.where(r % bs.n == 0, 0.0, np.sin((math.pi / bs.n) * r))
        c[0], c[bs.n] = 1.0, -1.0
        tab = (c, sn)
        bs.__dict__["_trig"] = tab
    return tab


def _weights_closed(bs: BucketSpectra, eps: FloatArray, kmax: int) -> Any:
    """rfft of the hockey-stick weights ``g_j = (1 - e^{eps - x_j})_+`` on the window, frequencies
    ``0..kmax-1``, in closed form (two geometric series; no length-n FFT per epsilon).

    With ``x_j = (j0 + j) h``, ``m`` the first ``j`` with ``x_j > eps``, ``L = n - m``,
    ``theta = 2 pi k / n``, ``z = e^{-i theta}``, ``w = e^{-h} z`` and ``r = k m mod 2n``
    (so ``theta m / 2 = pi r / n`` mod 2 pi), writing ``c_r, s_r = cos, sin(pi r / n)``:

    ``A_k = sum_{j >= m} z^j = -(c_r - i s_r)(c_k + i s_k) s_r / s_k`` (``L`` at k = 0),
    ``B_k = sum_{j >= m} e^{eps - x_j} z^j = e^{eps - x_m} (c_r - i s_r)^2 N / D``, with
    ``N = expm1(-h L + i theta m) = expm1(-h L)(1 - 2 s_r^2) - 2 s_r^2 + 2 i e^{-h L} s_r c_r`` and
    ``D = expm1(-h - i theta)`` (no cancellation in either real part), and ``G_k = A_k - B_k``.

    Error bound (first order, inflated by 1 %): every angle is ``pi r / n`` with an exact integer
    ``r < 2n``, so it is within ``19u`` of the truth and each table entry (numpy's sine / cosine,
    at most 4 ulp) within ``tau = 32u`` absolutely. With ``q = s_r / s_k`` (``|A| = |q|``):
    ``|dA| <= (4 tau + 14u)|q| + tau (1 + |q|) / |s_k|`` (0 at k = 0, where ``A_0 = L`` is exact);
    ``|dN|, |dD| <= 12 tau + 8u |N|, 8u |D|``, ``|(c_r - i s_r)^2|`` is within ``5 tau`` of 1, so
    ``|dB| <= e^d ((|dN| + |N / D| |dD|) / |D| + 5 tau |N / D|) + 8u |B|``. Returns ``G`` (G x kmax,
    complex) and the bound ``err`` on ``|G - G_exact|``.
    """
    n, h, j0 = bs.n, bs.h, bs.j0
    ct, st = _trig_table(bs)
    eps = np.asarray(eps, float)
    k = np.arange(kmax, dtype=np.int64)
    m = np.clip(np.floor(eps / h).astype(np.int64) - j0 + 1, 0, n)
    # float check of the lattice comparison (x_{m-1} <= eps < x_m); a residual misplacement is charged below
    m = np.where((m > 0) & ((j0 + m - 1) * h > eps), m - 1, m)
    m = np.where((m < n) & ((j0 + m) * h <= eps), m + 1, m)
    L = (n - m).astype(float)
    r = (k[None, :] * m[:, None]) % (2 * n)
    cr, sr = ct.take(r), st.take(r)
    ck, sk = ct[k], st[k]
    er = cr - 1j * sr
    with np.errstate(divide="ignore", invalid="ignore"):
        A = -(er * (ck + 1j * sk)[None, :]) * (sr / sk[None, :])
    A[:, 0] = L
    EL = np.expm1(-h * L)[:, None]
    s2 = 2.0 * sr * sr
    N = (EL * (1.0 - s2) - s2) + 1j * (2.0 * np.exp(-h * L)[:, None] * sr * cr)
    D = (math.expm1(-h) * ct[2 * k % (2 * n)] - 2.0 * sk * sk) - 1j * (math.exp(-h) * st[2 * k % (2 * n)])
    d = np.minimum(eps - (j0 + m) * h, 0.0)  # eps - x_m in (-h, 0]
    B = (np.exp(d)[:, None] * (er * er)) * (N / D[None, :])
    G = A - B
    tau = 32 * _U
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.abs(sr / sk[None, :])
        eA = (4 * tau + 14 * _U) * q + tau * (1.0 + q) / sk[None, :]
    eA[:, 0] = 0.0
    aN, aD = np.abs(N), np.abs(D)[None, :]
    R = aN / aD
    eN = 12 * tau + 8 * _U * aN
    eD = np.where(np.arange(kmax)[None, :] == 0, 4 * _U * aD, 12 * tau + 8 * _U * aD)
    eB = np.exp(d)[:, None] * ((eN + R * eD) / aD + 5 * tau * R) + 8 * _U * np.abs(B)
    err = 1.01 * (eA + eB) + 2 * _U * np.abs(G)
    # a weight misclassified at the float lattice comparison (eps within rounding of x_{m-1} or x_m) is at
    # most |1 - e^{eps - x}| <= 4u (1 + |eps|), and moves |G_k| by at most that
    tol = 1e-12 * (1.0 + np.abs(eps))
    near = (np.abs(eps - (j0 + m - 1) * h) <= tol) | (np.abs((j0 + m) * h - eps) <= tol)
    err += np.where(near, 8 * _U * (1.0 + np.abs(eps)), 0.0)[:, None]
    return G, err


def _weights_dft(bs: BucketSpectra, eps_grid: FloatArray, kmax: int) -> Any:
    """Conjugated, rfft-weighted DFTs of the hockey-stick weights at every grid epsilon (Lemma D.1),
    transposed for the products, with their l1 norms and error bounds (``_weights_closed``; blocks of
    rows: bounded memory). The values for a grid are cached for the largest ``kmax`` asked (they do
    not depend on it); everything returned is computed from exactly the first ``kmax`` frequencies,
    so a chunk's answer does not depend on which chunks ran before it (sharded runs are bit-identical)."""
    key = eps_grid.tobytes()
    cache = bs.__dict__.setdefault("_gcache", {})
    hit = cache.get(key)
    if hit is None or hit[0] < kmax:
        G = np.empty((eps_grid.size, kmax), dtype=complex)
        E = np.empty((eps_grid.size, kmax))
        rows = max(1, _WEIGHT_CELLS // max(kmax, 1))
        for r0 in range(0, eps_grid.size, rows):
            G[r0 : r0 + rows], E[r0 : r0 + rows] = _weights_closed(bs, eps_grid[r0 : r0 + rows], kmax)
        cache.clear()
        hit = (kmax, G, E, {})
        cache[key] = hit
    _, G, E, derived = hit
    if kmax not in derived:
        g, e = G[:, :kmax], E[:, :kmax]
        w = bs.wts[None, :kmax]
        Gw = np.conj(g) * w
        derived[kmax] = (
            np.ascontiguousarray(Gw.real.T),
            np.ascontiguousarray(Gw.imag.T),
            np.sum(np.abs(g) * w, axis=1),
            np.sum(e * w, axis=1),
        )
    return derived[kmax]


def _delta_grid(bs: BucketSpectra, pre: Any, eps_grid: FloatArray) -> FloatArray:
    """Certified bounds on delta at every grid epsilon for every example of a chunk (Plancherel,
    O(kmax) each); ``pre = _prepare(bs, counts, lower)``: upper bounds, or lower bounds if ``lower``."""
    sre, sim, smax, kmax, extra, factor, lower, lift = pre
    grid = eps_grid + lift if lower else eps_grid
    GrT, GiT, l1, el1 = _weights_dft(bs, grid, kmax)
    val = (sre @ GrT - sim @ GiT) / bs.n
    # inner-product rounding, and the closed-form weights' own error (|S_k| <= smax)
    ip_err = ((4 * kmax + 8) * _U * l1[None, :] + el1[None, :]) * smax[:, None] / bs.n
    if lower:
        return cast("FloatArray", np.maximum(0.0, (val - ip_err - extra[:, None]) * factor[:, None]))
    return cast("FloatArray", np.minimum(1.0, (np.maximum(val, 0.0) + ip_err + extra[:, None]) * factor[:, None]))


def _prepare(bs: BucketSpectra, counts: AnyArray, lower: bool = False) -> Any:
    """Product spectra of a chunk and its error terms (everything but the weights).

    Upper bounds (pairs that dominate): ``extra`` = mass at +inf + wrap-around from above +
    discretisation slack + spectral error, and the atoms' relative error enters as the factor
    ``prod_b (1 - r_b)^{-c_b}``. Lower bounds (dominated pairs): ``extra`` = mass outside the window on
    *both* sides (folded mass can land anywhere with weight <= 1) + spectral error + slack, the factor is
    ``prod_b (1 + r_b)^{-c_b}``, and the epsilons are lifted by ``lift = max_i sum_b c_ib |shift_b|`` (the
    dominated losses lie that far below the lattice; delta is decreasing in epsilon)."""
    inf_mass, wrap, slack = _extras(bs, counts)
    spec, ferr, kmax = _spectra(bs, counts)
    smax = np.max(np.abs(spec), axis=1)
    cf = counts.astype(float)
    rel = np.zeros(counts.shape[1]) if bs.rel is None else bs.rel
    grow = 1.0 + 4 * _U * (counts.shape[1] + 4)
    if lower:
        bottom = bs.j0 * bs.h
        cgn = cf @ bs.cgf_neg
        logb = cgn + _THETAS[None, :] * bottom + 1e-12 * (np.abs(cgn) + _THETAS[None, :] * abs(bottom))
        wrap_lo = np.exp(np.minimum(np.min(logb, axis=1), 0.0))
        extra = wrap + wrap_lo + slack + ferr
        factor = np.exp(-(cf @ np.log1p(rel)) * grow) * (1 - 8 * _U)
        shift = np.zeros(counts.shape[1]) if bs.shift is None else bs.shift
        lift = float(np.max(-(cf @ shift))) * grow if counts.shape[0] else 0.0
    else:
        extra = inf_mass + wrap + slack + ferr
        factor = np.exp(-(cf @ np.log1p(-rel)) * grow) * (1 + 8 * _U)
        lift = 0.0
    # contiguous real and imaginary parts: a matrix product with the strided views of a complex
    # array bypasses BLAS and was about 100x slower (most of the time of a query)
    return (np.ascontiguousarray(spec.real), np.ascontiguousarray(spec.imag), smax, kmax, extra, factor, lower, lift)


def _chunk_spectra(bs: BucketSpectra, counts: AnyArray) -> BucketSpectra:
    """Bucket spectra on a window sized for one chunk of examples (same lattice, same wrap-around
    target, ``choose_window``), if it is at most a quarter of the population's window; else ``bs``.

    Examples are processed sorted by spread, so a chunk of low-variance examples (small norms) has a
    composed PLD far narrower than the worst example's. On the population's window their spectra
    decay slowly (thousands of significant frequencies); on their own window the same lattice needs
    a few hundred. The error analysis is unchanged: the circular convolution on any window that
    the Chernoff bound covers folds only the (bounded) mass outside it."""
    if bs.plds is None or counts.shape[0] == 0:
        return bs
    j0, n = choose_window(bs.plds, counts, bs.h, bs.target, cgfs=(bs.cgf, bs.cgf_neg))
    if 4 * n > bs.n:
        return bs
    out = bucket_spectra(bs.plds, bs.h, j0, n)
    out.plds, out.target = None, bs.target
    return out


def _order(bs: BucketSpectra, counts: AnyArray) -> AnyArray:
    """Examples sorted by composed variance, so that each chunk needs a similar number of frequencies.

    Both keys are exact integer functions of a row's content: the variance key (each bucket's
    ``|log|F_b||`` at the fifth frequency, quantised to ``2^24`` levels) and, for its ties (rows that differ
    only in buckets of zero weight, e.g. a dominated pair that is a point mass at loss 0), a 64-bit
    linear hash of the row; only then position. So the chunks depend on the rows' contents and on the
    relative position of *identical* rows only (unless two different rows collide in both keys, about
    ``N^2 2^-64``): a ledger whose rows were permuted keeping identical rows in their relative order (the
    sorted cluster copy of ``individual.sharded``) is cut into the same chunks, and every example's
    answer is bit-identical. (Float keys from BLAS could differ in the last bit between two copies of
    one row at different positions of a block.)"""
    w = np.abs(bs.logabs[:, min(4, bs.logabs.shape[1] - 1)])
    top = float(np.max(w)) if w.size else 0.0
    wq = np.rint(w * ((1 << 24) / top)).astype(np.int64) if top > 0 else np.zeros(w.size, np.int64)
    return cast("FloatArray", np.lexsort((rows_exact(counts, hash_weights(w.size)), rows_exact(counts, wq))))


def _chord_eps(D: FloatArray, eps_grid: FloatArray, delta: float) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Per row: upper bound on eps(delta) from certified upper values ``D`` on ``eps_grid`` (inf if none
    is <= delta), and the bracket ``[eps_grid[j-1], eps_grid[j]]`` it lies in."""
    m = D.shape[0]
    alpha = np.exp(eps_grid)
    ok = delta >= D
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


def _step_eps_lower(D: FloatArray, eps_grid: FloatArray, delta: float) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Per row: a lower bound on eps(delta) from certified lower values ``D`` on ``eps_grid``: the
    largest grid epsilon whose lower delta is still above ``delta`` (0 if none), and the bracket
    ``[eps_grid[j], eps_grid[j + 1]]`` in which eps(delta) may lie (NaN if the grid's last point)."""
    D.shape[0]
    above = delta < D
    any_ = above.any(axis=1)
    last = D.shape[1] - 1 - np.argmax(above[:, ::-1], axis=1)
    e = np.where(any_, eps_grid[last], 0.0)
    lo = np.where(any_, eps_grid[last], np.nan)
    nxt = np.minimum(last + 1, D.shape[1] - 1)
    hi = np.where(any_ & (last + 1 < D.shape[1]), eps_grid[nxt], np.nan)
    lo = np.where(np.isnan(hi), np.nan, lo)
    return e, lo, hi


def _chunk_epsilons(
    bs: BucketSpectra, cc: AnyArray, delta: float, G: int, refinements: int, lower: bool
) -> tuple[FloatArray, FloatArray]:
    """One chunk of ``population_epsilons`` (rows sorted by spread): bounds and delta spent."""
    G1 = 48  # points of each refinement pass (shared by the distinct brackets of a chunk)
    cb = _chunk_spectra(bs, cc)
    eps_grid = np.linspace(0.0, max(float(cb.x[-1]), 1e-3), G)
    pick = _step_eps_lower if lower else _chord_eps
    better_of = np.maximum if lower else np.minimum
    pre = _prepare(cb, cc, lower)
    e, lo, hi = pick(_delta_grid(cb, pre, eps_grid), eps_grid, delta)
    for _ in range(refinements):
        fin = np.isfinite(lo) & np.isfinite(hi) & (hi > lo)
        if not np.any(fin):
            break
        br = np.unique(np.stack([lo[fin], hi[fin]], axis=1), axis=0)
        if np.all(br[:, 1] - br[:, 0] <= 1e-6 * (1.0 + br[:, 1])):
            break
        # any increasing grid works (the chord argument holds between any two epsilons)
        per = max(3, G1 // br.shape[0] + 1)
        grid = np.unique(np.concatenate([np.linspace(a, b, per) for a, b in br]))
        e2, lo2, hi2 = pick(_delta_grid(cb, pre, grid), grid, delta)
        # rows whose bracket lies in [a, b] get a (certified) bracket on the finer grid
        ok2 = np.isfinite(e2) if not lower else np.isfinite(lo2) | (e2 > 0)
        better = fin & ok2
        e = np.where(better, better_of(e, e2), e)
        lo = np.where(better, lo2, np.nan)
        hi = np.where(better, hi2, np.nan)
    return e, pre[4]


def _chunk_deltas(bs: BucketSpectra, cc: AnyArray, epsilon: float) -> tuple[FloatArray, FloatArray]:
    cb = _chunk_spectra(bs, cc)
    D = _delta_grid(cb, _prepare(cb, cc), np.array([float(epsilon)]))
    return D[:, 0], D[:, 0]


def population_epsilons(
    bs: BucketSpectra,
    counts: AnyArray,
    delta: float,
    chunk: int = 512,
    grid_points: int = 256,
    refinements: int = 3,
    *,
    lower: bool = False,
) -> tuple[FloatArray, FloatArray]:
    """Bounds on every example's eps(delta) and the delta spent on error terms.

    Upper bounds (``lower=False``, pairs that dominate): delta is evaluated on a
    shared grid of epsilons; between grid points the curve is convex in
    ``alpha = e^eps`` (Koskela et al. 2023, App. C.6), so the chord through two certified upper
    values lies above it and the chord's crossing of ``delta`` is an upper bound
    on epsilon. Lower bounds (``lower=True``, dominated pairs): a grid epsilon
    whose certified lower delta is above ``delta`` is below eps(delta). Either
    way the grid is then refined (``refinements`` times) over the brackets found
    in a chunk; every pass gives a certified bound and the best is kept.
    ``counts`` may be a dask array (``_chunks.map_chunks``).
    """
    N = counts.shape[0]
    G = int(min(grid_points, max(32, (2 * _WEIGHT_CELLS) // bs.n)))
    eps = np.zeros(N)
    spent = np.zeros(N)
    order = _order(bs, counts)
    for rows, (e, sp) in map_chunks(
        _chunk_epsilons, bs, counts, order, chunk, float(delta), G, refinements, bool(lower)
    ):
        eps[rows] = e
        spent[rows] = sp
    return eps, spent


def population_deltas(bs: BucketSpectra, counts: AnyArray, epsilon: float, chunk: int = 512) -> FloatArray:
    """Upper bounds on every example's delta(epsilon) by Plancherel (Koskela et al. 2023, Lemma D.1)."""
    out = np.zeros(counts.shape[0])
    for rows, (d, _) in map_chunks(_chunk_deltas, bs, counts, _order(bs, counts), chunk, float(epsilon)):
        out[rows] = d
    return out

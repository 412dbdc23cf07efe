"""Per-example privacy ledger for DP-SGD / DP-GD (000 Sec. 3-5, App. C.2, App. D).

At every step each example ``i`` has an unclipped gradient norm ``g_i``. Its
contribution to the noisy clipped sum has sensitivity ``min(g_i, C)``, so the
step is, for that example, the (Poisson-subsampled) Gaussian mechanism with
effective noise multiplier ``sigma * C / min(g_i, C)`` (000 App. C.2, D.2).
``g_i = 0`` is no privacy loss; ``NaN`` ("not computed") is the worst case.
Under Poisson sampling this holds whether or not the example was drawn, so a
sparse ``record_step(norms, indices=batch)`` records the unlisted examples by
the ``missing_norms`` policy (worst case ``C`` by default; ``"last-seen"`` is an
approximation and is labelled as one).

**Ledger.** The scaled ratio ``y = min(g B / C, B)`` is rounded *up* to the
bucket ``b = ceil(y)`` of ``B = num_buckets`` buckets (each widened by a
relative ``1e-9`` so that float rounding cannot cross a bucket edge), i.e. the noise
multiplier is rounded *down* to the sigma-grid ``{sigma B / b}``; the rounded
mechanism dominates the real one (data-processing inequality, 000 Thm D.2).
Each example keeps only its bucket counts: memory ``O(N B)``, and the ledger
never depends on the order of steps. Steps are buffered as one byte per
example and folded into the counts by ``np.bincount`` (``_flush``). The lowest
position ``y - (b - 1)`` of any recorded ratio within its bucket is kept too
(lower bounds). With ``sampling_rate = 1`` the exact sum of ``r^2`` is kept as
well (per-example GDP, 000 Thm 11).

**What is computed.** ``epsilons(delta)`` gives, for each example, a certified
interval ``[lower, upper]`` around the epsilon of the composition of its
recorded per-step mechanisms under add/remove of that example (both
directions, the max); ``deltas(epsilon)`` a certified upper bound on delta:

* ``sampling_rate = 1`` (DP-GD): the composition of Gaussian mechanisms with
  ``mu_t = r_t / sigma`` is exactly ``sqrt(sum mu_t^2)``-GDP (000 Thm 11); the
  conversion (C.2) is exact, rounded outwards. No buckets are involved.
* ``sampling_rate < 1`` (DP-SGD): each bucket's PLD is replaced by a dominating
  discrete pair (upper end) or a dominated one at the bucket's lower ratio
  (lower end) on a lattice (``tightdp.pld.dominance``, ``_dominating``), and
  composed per example by pre-computed FFTs and one matrix product per chunk of
  examples (000 App. D, ``_population``); every numerical error is added to
  (upper) or subtracted from (lower) delta.

**What is not promised.** The sequence of norms is itself chosen adaptively
from earlier outputs. For Gaussian steps (``sampling_rate = 1``) a budget
fixed *in advance* and enforced by the filter (``active``) is a proven
guarantee (000 Thm 11-12, Alg. 1). A per-example epsilon read off *after* the
fact is an odometer reading, not a guarantee fixed before training. For
DP-SGD, 000 Sec. 5 only gives an approximative filter, and the natural PLD /
f-DP filter is not valid under fully adaptive composition (Tran, Koskela,
Raisa, Honkela 2026, arXiv 2602.06756; only GDP-based filters are proven); the
per-example epsilon is then the accounting of the realised sequence, not a
theorem about the adaptive algorithm.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import numbers
import os
import tempfile
from typing import Any

import numpy as np

from .._validation import check_choice, check_count, check_delta, check_epsilon, check_positive, \
    check_probability
from ..bounds import Bounds
from ..errors import PrecisionError
from ..mechanisms.losses import poisson_gaussian_loss
from ._dominating import DominatingPLD, dominated_pld, dominating_pld_core
from ._population import _chunk_spectra, _delta_grid, _map_chunks, _order, _prepare, bucket_spectra, \
    choose_window, population_deltas, population_epsilons, rows_at, single_threaded_blas
from .gdp import gdp_delta_bounds
from .rdp import INDIVIDUAL_ORDERS, bucket_rdp_table, compose_rows, epsilons_from_rdp_rows, gaussian_budget_mu, \
    rdp_filter_active

__all__ = ["IndividualAccountant"]

_U = np.finfo(float).eps / 2
_FORMAT = "tightdp.IndividualAccountant/2"
_FORMATS_READ = ("tightdp.IndividualAccountant/1", _FORMAT)
_MARGIN = 1e-9  # relative upward margin of every bucket's sensitivity ratio
_MAX_FFT = 1 << 15  # largest FFT window of the fast path: a wider one means few steps and a tiny delta
# (heavy tails far out at a mesh sized for the bulk); its inner-product rounding term (kmax u per
# frequency) then floors delta near 1e-9, so the mesh is coarsened and few-row ledgers are composed
# exactly as well (``_eps_counts``)
_ERR_SHARE = 0.01  # wrap-around and discretisation slack are each sized to at most this share of delta
_DELTAS_TARGET = 1e-12  # deltas(epsilon): wrap-around sized to at most this (absolute)
_SLACK_SHARE_FINE = 0.25  # second pass (finer mesh): slack up to this share of delta
_FALLBACK_GROUPS = 32  # most compositions the exact fallback runs per query
_COUNT_MAX = int(np.iinfo(np.int32).max)
_CLIP_MIN = float(np.finfo(float).tiny)  # smallest normal float: a subnormal C has no relative precision
#: memory cap of the ledger (bucket counts, 4 bytes per example and bucket): 16 GiB, or a quarter
#: of the physical memory if that is smaller. Queries need transient copies of a similar size.
_LEDGER_CAP_BYTES = 16 << 30
#: pending per-step bucket indices (uint8/uint16, one row per step) are folded into the counts with one
#: np.bincount per block of examples once this many bytes are buffered (see ``_flush``)
_BUFFER_BYTES = 64 << 20
_BUFFER_STEPS = (8, 1024)  # fewest / most buffered steps
_MISSING = ("worst-case", "last-seen")
_GRIDS = ("uniform", "paper")
_METHODS = ("pld", "rdp", "gdp")
_RULES = ("pld", "paper", "rdp")
_FIT_POINTS = 64  # epsilon grid of the per-example mu-GDP fit (000 App. D.2)
_FIT_DELTA_MIN = 1e-10  # the fit's epsilon range reaches the worst case's epsilon at this delta
_FRAC_FLOOR = 1.0 / 64  # see IndividualAccountant._note_frac


class IndividualAccountant:
    """Per-example privacy ledger (see the module docstring for what each number means).

    Parameters
    ----------
    num_examples: N, the number of examples tracked.
    noise_multiplier: sigma (noise standard deviation divided by the clipping norm).
    clip_norm: C.
    sampling_rate: Poisson sampling probability q (1 for full-batch DP-GD).
    num_buckets: B, the size of the sigma-grid (000 App. D.2). Each recorded
        sensitivity ratio is rounded up by less than ``1/B``.
    mesh: lattice spacing of the PLDs (``sampling_rate < 1``); default: chosen at
        query time so that the worst example's composed PLD has about
        ``resolution`` grid points per standard deviation.
    resolution: see ``mesh``.
    sigma_grid: ``"uniform"`` (default): buckets uniform in the sensitivity ratio, ``b / B``, each
        ratio rounded up by less than ``1 / B``. ``"paper"``: 000 App. D.2's grid, uniform in the
        noise ratio: ``sigma_i = sigma + i (sigma_max - sigma) / n`` with ``n = B - 1`` intervals (the
        ``B`` buckets are ``sigma_0 .. sigma_n``), an effective noise ``sigma C / min(g, C)`` in
        ``[sigma_i, sigma_{i+1})`` rounded down to ``sigma_i`` and one above ``sigma_max`` to
        ``sigma_max`` (eq. (D.2)); a zero norm stays exact (no privacy loss). Both grids only round
        the noise down (000 Thm D.2), so every bound stays certified; the paper's grid is coarse near
        ratio 1 (``sigma_1 - sigma_0`` is a ratio step of about ``(sigma_max / sigma - 1) / n``) and
        rounds every ratio below ``sigma / sigma_max`` up to it, so it is looser for the same ``B``
        (``examples/papers/p000_individual.py`` reports by how much). Sums of squares for
        ``sampling_rate = 1`` are exact either way.
    sigma_max: the paper grid's largest noise multiplier (default ``10 * noise_multiplier``).
    """

    def __init__(self, num_examples: int, noise_multiplier: float, clip_norm: float,
                 sampling_rate: float = 1.0, *, num_buckets: int = 100, mesh: float | None = None,
                 resolution: float = 1600.0, missing_norms: str = "worst-case", sigma_grid: str = "uniform",
                 sigma_max: float | None = None) -> None:
        self._n = check_count("num_examples", num_examples)
        self._sigma = check_positive("noise_multiplier", noise_multiplier)
        self._clip = _check_clip_norm(clip_norm)
        self._q = check_probability("sampling_rate", sampling_rate)
        self._B = check_count("num_buckets", num_buckets)
        if self._B > 10_000:
            raise ValueError(f"num_buckets must be <= 10000, got {num_buckets!r}")
        self._missing = check_choice("missing_norms", missing_norms, _MISSING)
        self._grid = check_choice("sigma_grid", sigma_grid, _GRIDS)
        self._sigma_max = None
        self._edges = None  # paper grid: nominal bucket ratios, edges[0] = 0 < edges[1] < ... = 1
        if self._grid == "paper":
            smax = 10.0 * self._sigma if sigma_max is None else check_positive("sigma_max", sigma_max)
            if not smax > self._sigma or not math.isfinite(smax):
                raise ValueError(f"sigma_max must be finite and > noise_multiplier={self._sigma!r}, "
                                 f"got {sigma_max!r}")
            self._sigma_max = smax
            n_int = self._B - 1
            i = np.arange(self._B - 1, -1, -1, dtype=float)  # bucket b = 1..B <-> sigma_{B - b}
            sig_i = self._sigma + i * (smax - self._sigma) / n_int if n_int else np.array([self._sigma])
            self._edges = np.concatenate([[0.0], self._sigma / sig_i])
            self._edges[-1] = 1.0
        elif sigma_max is not None:
            raise ValueError("sigma_max is an option of sigma_grid='paper' only")
        _check_ledger_size(self._n, self._B, self._q)
        self._mesh = None if mesh is None else check_positive("mesh", mesh)
        self._resolution = check_positive("resolution", resolution)
        self._counts = np.zeros((self._n, self._B + 1), dtype=np.int32)
        self._sumsq = np.zeros(self._n) if self._q == 1.0 else None
        self._steps = 0
        self._cache: dict[Any, Any] = {}
        # recording state: pending bucket indices (one row per step, folded into _counts by _flush), the
        # smallest position y - (b - 1) in (0, 1] of any recorded scaled ratio y = min(g, C) B / C within
        # its bucket b = ceil(y) (lower bounds, see _lower_ratios), and for the last-seen policy each
        # example's last bucket / ratio and its number of approximated steps
        self._scale = self._B / self._clip  # inf for a tiny C: _scaled_ratios then divides first
        self._code_dtype = np.uint8 if self._B <= 255 else np.uint16
        self._buf: np.ndarray | None = None
        self._pending = 0
        self._ybuf = np.empty(0)
        self._cbuf = np.empty(0)
        self._frac_min = 1.0
        if self._missing == "last-seen":
            self._last = np.full(self._n, self._B, dtype=self._code_dtype)
            self._last_r = np.ones(self._n) if self._q == 1.0 else None
            self._approx = np.zeros(self._n, dtype=np.int32)
        else:
            self._last = self._last_r = self._approx = None

    # ------------------------------------------------------------ properties
    @property
    def num_examples(self) -> int:
        return self._n

    @property
    def steps(self) -> int:
        """Number of recorded steps."""
        return self._steps

    @property
    def bucket_counts(self) -> np.ndarray:
        """Read-only ``(N, B + 1)`` counts; column ``b`` counts steps with ratio rounded to ``b / B``."""
        self._flush()
        v = self._counts.view()
        v.flags.writeable = False
        return v

    @property
    def approximated_steps(self) -> np.ndarray:
        """Per example, the number of steps recorded with an imputed last-seen norm below the clip
        (``missing_norms="last-seen"``; all zero under the default worst-case policy). An example with
        a positive count has an *approximate* epsilon, not a certified one."""
        out = np.zeros(self._n, dtype=np.int32) if self._approx is None else self._approx.copy()
        out.flags.writeable = False
        return out

    def options(self) -> dict[str, Any]:
        return {"num_examples": self._n, "noise_multiplier": self._sigma, "clip_norm": self._clip,
                "sampling_rate": self._q, "num_buckets": self._B, "mesh": self._mesh,
                "resolution": self._resolution, "missing_norms": self._missing, "sigma_grid": self._grid,
                "sigma_max": self._sigma_max}

    # -------------------------------------------------------------- recording
    def _check_norms(self, grad_norms, shape) -> np.ndarray:
        arr = _as_norm_array(grad_norms)
        if arr.shape != shape:
            raise ValueError(f"grad_norms must have shape {shape}, got {arr.shape}")
        if arr.size:
            mn = arr.min()
            if not mn >= 0 and (arr < 0).any():  # NaN minimum: NaN marks a norm that was not computed
                raise ValueError(f"grad_norms must be >= 0 (NaN marks a norm that was not computed), "
                                 f"got {arr[arr < 0].flat[0]!r}")
        return arr

    def _check_indices(self, indices, size: int) -> np.ndarray:
        try:
            raw = np.asarray(indices)
        except (TypeError, ValueError):
            raise ValueError(f"indices must be an array of example indices, got {type(indices).__name__}") from None
        if raw.ndim != 1 or raw.dtype.kind not in "iu" or raw.dtype == np.bool_:
            raise ValueError(f"indices must be a 1-D integer array, got dtype {raw.dtype} and shape {raw.shape}")
        if raw.size != size:
            raise ValueError(f"indices must have one entry per norm ({size}), got {raw.size}")
        idx = raw.astype(np.intp)
        if idx.size and (idx.min() < 0 or idx.max() >= self._n):
            raise ValueError(f"indices must lie in [0, {self._n}), got {int(idx.min())}..{int(idx.max())}")
        if idx.size > 1 and np.unique(idx).size != idx.size:
            raise ValueError("indices must not repeat an example within one step")
        return idx

    def _row(self) -> np.ndarray:
        """The next free row of the pending-index buffer (folding the buffer into the counts if full)."""
        if self._buf is None:
            item = np.dtype(self._code_dtype).itemsize
            k = int(min(_BUFFER_STEPS[1], max(_BUFFER_STEPS[0], _BUFFER_BYTES // max(1, self._n * item))))
            self._buf = np.empty((k, self._n), dtype=self._code_dtype)
        if self._pending == self._buf.shape[0]:
            self._flush()
        return self._buf[self._pending]

    def _flush(self) -> None:
        """Add the pending rows to the counts: one np.bincount per block of examples (the block's cells
        stay in cache), instead of a scattered increment of the (N, B + 1) array at every step."""
        k = self._pending
        if k == 0:
            return
        buf = self._buf[:k]
        cols = self._B + 1
        if cols * 256 <= 65536:
            width, dt = 256, np.uint16  # block codes fit in uint16; 256 examples' cells stay in cache
        else:
            width, dt = max(64, (1 << 18) // k), np.intp
        base = (np.arange(width) * cols).astype(dt)
        counts = self._counts
        for e0 in range(0, self._n, width):
            e1 = min(self._n, e0 + width)
            codes = buf[:, e0:e1] + base[None, :e1 - e0]
            hist = np.bincount(codes.ravel(), minlength=(e1 - e0) * cols)
            counts[e0:e1] += hist.reshape(e1 - e0, cols).astype(np.int32)
        self._pending = 0

    def _ledger(self) -> np.ndarray:
        """The bucket counts with every pending step added."""
        self._flush()
        return self._counts

    def _codes(self, arr: np.ndarray, out: np.ndarray) -> float:
        """Bucket indices of ``arr`` written to ``out`` (``_bucket_index`` through reused buffers); returns
        the smallest position ``y - (b - 1)`` of the step's scaled ratios within their buckets (1 if none)."""
        n = arr.size
        if self._edges is not None:  # paper grid (000 eq. (D.2)): smallest bucket whose ratio is >= r
            r = _clipped_ratio(arr, self._clip)
            np.copyto(out, np.minimum(np.searchsorted(self._edges[1:], r, side="left") + 1, self._B),
                      casting="unsafe")
            out[arr == 0] = 0
            return 0.0  # lower bounds: each bucket's lower edge
        if self._ybuf.size < n:
            self._ybuf, self._cbuf = np.empty(n), np.empty(n)
        y = _scaled_ratio(arr, self._clip, self._B, self._scale, out=self._ybuf[:n])
        if self._frac_min <= 0.0:  # the positions cannot lower it any further: indices only
            _ceil_index(y, arr, out)
            return 0.0
        c = np.ceil(y, out=self._cbuf[:n])
        np.copyto(out, c, casting="unsafe")  # integers in [0, B]: exact
        if n and not out.all():  # some index 0: only a norm of exactly 0 may stay there
            zero = out == 0
            under = zero & ~(arr == 0)
            if under.any():  # a positive norm whose ratio underflowed: bucket 1, position 0
                out[under] = 1
                c[under] = 1.0
        frac = float(np.subtract(y, c, out=c).min()) + 1.0 if n else 1.0
        return frac

    def _note_frac(self, frac: float) -> None:
        # below 1/64 of a bucket the gain in the lower bounds is not worth two passes per step: 0 (the
        # bucket's lower edge, always valid) and stop tracking
        f = min(self._frac_min, max(frac, 0.0))
        self._frac_min = 0.0 if f < _FRAC_FLOOR else f

    def record_step(self, grad_norms, indices=None) -> None:
        """Record one step.

        Dense (``indices=None``): ``grad_norms[i]`` is example i's unclipped gradient norm at this
        step (0: the example does not contribute).

        Sparse: ``grad_norms[j]`` is the norm of example ``indices[j]`` (e.g. the examples in this
        step's Poisson batch). Under Poisson sampling every example's step is the subsampled
        mechanism at its *own* sensitivity, whether or not it was drawn (000 App. D.2), so the
        examples not listed still need a norm; the constructor's ``missing_norms`` policy gives it:

        * ``"worst-case"`` (default): sensitivity ``C``; every answer stays a certified bound;
        * ``"last-seen"``: the bucket of the example's last recorded norm (worst case before the
          first). This is an *approximation* (norms change as the model trains): answers touching
          such steps are labelled ``kind="approximation"`` and ``approximated_steps`` counts them.

        To keep certified answers with tight per-example values, compute the norms of all examples
        and record densely. ``NaN`` (a norm that was not computed) and ``+inf`` count as the worst
        case (sensitivity ``C``); negative values, booleans and strings are rejected. Nothing is
        recorded if any argument is invalid.
        """
        if indices is None:
            arr = self._check_norms(grad_norms, (self._n,))
            idx = None
        else:
            arr = _as_norm_array(grad_norms)
            if arr.ndim != 1:
                raise ValueError(f"grad_norms must be 1-D with indices, got shape {arr.shape}")
            idx = self._check_indices(indices, arr.size)
            arr = self._check_norms(arr, (idx.size,))
        if self._steps + 1 > _COUNT_MAX:
            raise OverflowError("bucket counts would overflow int32")
        row = self._row()
        if idx is None:
            self._note_frac(self._codes(arr, row))
            if self._sumsq is not None:
                self._sumsq += np.square(_clipped_ratio(arr, self._clip))
            if self._last is not None:  # a dense record is every example's last-seen norm
                self._last[:] = row
                if self._last_r is not None:
                    self._last_r[:] = _clipped_ratio(arr, self._clip)
        else:
            sub = np.empty(idx.size, dtype=self._code_dtype)
            self._note_frac(self._codes(arr, sub))
            r_sub = None if self._sumsq is None else _clipped_ratio(arr, self._clip)
            if self._last is None:  # worst case for the examples not listed (y = B: position 1)
                row.fill(self._B)
                if self._sumsq is not None:
                    r_all = np.ones(self._n)
            else:
                row[:] = self._last
                approx = self._last < self._B
                approx[idx] = False
                self._approx += approx
                if self._sumsq is not None:
                    r_all = self._last_r.copy()
                self._last[idx] = sub
                if self._last_r is not None:
                    self._last_r[idx] = r_sub
            row[idx] = sub
            if self._sumsq is not None:
                r_all[idx] = r_sub
                self._sumsq += np.square(r_all)
        self._pending += 1
        self._steps += 1
        self._cache.clear()

    def record_steps(self, grad_norms) -> None:
        """Record several steps at once: ``grad_norms`` has shape ``(steps, num_examples)`` (dense)."""
        arr = _as_norm_array(grad_norms)
        if arr.ndim != 2:
            raise ValueError(f"grad_norms must be 2-D (steps, num_examples), got shape {np.shape(arr)}")
        arr = self._check_norms(arr, (arr.shape[0], self._n))
        if arr.shape[0] == 0:
            return
        if self._steps + arr.shape[0] > _COUNT_MAX:
            raise OverflowError("bucket counts would overflow int32")
        for t in range(arr.shape[0]):
            row = self._row()
            self._note_frac(self._codes(arr[t], row))
            self._pending += 1
        if self._sumsq is not None:
            self._sumsq += np.sum(np.square(_clipped_ratio(arr, self._clip)), axis=0)
        if self._last is not None:  # a dense record is every example's last-seen norm
            self._last[:] = self._buf[self._pending - 1]
            if self._last_r is not None:
                self._last_r[:] = _clipped_ratio(arr[-1], self._clip)
        self._steps += arr.shape[0]
        self._cache.clear()

    # ---------------------------------------------------------------- queries
    def mus(self) -> np.ndarray:
        """Per-example GDP parameters ``sqrt(sum_t r_t^2) / sigma`` (sampling_rate = 1 only), rounded up."""
        if self._sumsq is None:
            raise ValueError("per-example GDP needs sampling_rate = 1 (the subsampled Gaussian is not GDP)")
        # float summation of s nonnegative terms: relative error <= s u; then sqrt and division
        s = self._sumsq * (1.0 + (self._steps + 4) * 2 * _U)
        return np.sqrt(s) / self._sigma * (1.0 + 4 * _U)

    def _mesh_for(self, counts: np.ndarray) -> float:
        if self._mesh is not None:
            return self._mesh
        r2 = self._nominal_ratios() ** 2
        k_eff = float(np.max(rows_at(counts, r2))) if counts.shape[0] else 1.0
        s1 = self._q * math.sqrt(math.expm1(min(1.0 / self._sigma ** 2, 700.0)))
        h = math.sqrt(max(k_eff, 1.0)) * s1 / self._resolution
        return float(min(max(h, 1e-5), 0.05))

    def _nominal_ratios(self) -> np.ndarray:
        """The ratio every bucket stands for (before the relative margin): ``b / B`` or the paper grid's."""
        return np.arange(self._B + 1) / self._B if self._edges is None else self._edges

    def _ratio_of(self, b: int) -> float:
        """The sensitivity ratio bucket ``b`` stands for, rounded up by the relative ``_MARGIN``."""
        if self._edges is None:
            return _bucket_ratio(b, self._B)
        return float(self._edges[b]) * (1.0 + _MARGIN)

    def _lower_ratio(self, b: int) -> float:
        """A lower bound on every sensitivity ratio recorded into bucket ``b``: each has a scaled ratio
        ``y >= b - 1 + frac_min`` (``_frac_min``: the lowest position within its bucket of any recorded
        ``y``), and the exact ratio is at least ``y (1 - 2u) / B``; the relative ``_MARGIN`` covers that.
        Paper grid: the bucket's lower edge."""
        if self._edges is not None:
            return float(self._edges[b - 1]) * (1.0 - _MARGIN)
        return max(0.0, b - 1 + self._frac_min) / self._B * (1.0 - _MARGIN)

    def _plds(self, h: float, buckets: tuple[int, ...], direction: str, lower: bool = False):
        """Per-bucket discrete pairs on ``h Z``: dominating ones at the bucket's upper ratio (``b / B``,
        rounded up), or dominated ones at its lower ratio (``_lower_ratio``; a bucket whose lower ratio is
        0 becomes a point mass at loss 0, the mechanism without privacy loss)."""
        key = ("pld", h, direction, lower)
        store = self._cache.setdefault(key, {})
        out = []
        for b in buckets:
            if b not in store:
                ratio = self._lower_ratio(b) if lower else self._ratio_of(b)
                pld = None
                if ratio > 0:
                    loss = poisson_gaussian_loss(sigma=self._sigma / ratio, q=self._q, direction=direction)
                    pld = dominated_pld(loss, h) if lower else dominating_pld_core(loss, h)
                store[b] = pld if pld is not None else DominatingPLD(h, 0, np.ones(1), 0.0, 0.0)
            out.append(store[b])
        return out

    def _pld_setup(self, counts: np.ndarray, h: float | None = None, target: float | None = None,
                   slack_target: float | None = None, lower: bool = False):
        """Bucket spectra for both directions. ``target``: the delta the error terms must stay well below
        (the window is widened until the wrap-around is at most ``target``, within ``_MAX_FFT`` points);
        ``slack_target`` (default ``target``): the mesh is coarsened until the discretisation slack fits."""
        slack_target = target if slack_target is None else slack_target
        used = tuple(int(b) for b in np.nonzero(np.asarray(counts[:, 1:].sum(axis=0)))[0] + 1)
        if not used:
            return None
        c = counts[:, list(used)]
        h = self._mesh_for(counts) if h is None else h
        setups = []
        for direction in ("remove", "add"):
            for _ in range(12):
                plds = self._plds(h, used, direction, lower)
                if slack_target is not None and slack_target > 0 and h < 0.05:
                    slack = float(np.max(rows_at(c, np.array([p.float_slack for p in plds]))))
                    if slack > slack_target:  # the slack shrinks about like 1/h^2
                        h = min(0.05, h * min(10.0, max(1.25, math.sqrt(slack / slack_target))))
                        continue
                j0, n = choose_window(plds, c, h, target)
                if n <= _MAX_FFT:
                    break
                h *= n / (_MAX_FFT // 2)  # window too large for the mesh: coarsen
            bs = bucket_spectra(plds, h, j0, n)
            bs.plds, bs.target = plds, target  # per-chunk windows (``_population._chunk_spectra``)
            setups.append((direction, bs, h))
        return c, setups

    def _eps_counts(self, counts: np.ndarray, delta: float, h: float | None = None, *,
                    fallback: bool = True) -> tuple[np.ndarray, dict]:
        """Certified per-row epsilons (fast path; rows it cannot certify go to ``_exact_fallback``)."""
        h0 = self._mesh_for(counts) if h is None else h
        setup = self._pld_setup(counts, h0, _ERR_SHARE * delta)
        if setup is None:
            return np.zeros(counts.shape[0]), {}
        c, setups = setup
        info: dict[str, Any] = {}
        per: dict[str, np.ndarray] = {}
        eps = self._eps_setups(c, setups, delta, info, per=per)
        # which direction attains each example's upper bound (its lower bound is computed for that one)
        self._cache["winner"] = (per.get("add", eps) > per.get("remove", eps)) if per else None
        if max(hh for _, _, hh in setups) > 1.01 * h0:
            # the mesh was coarsened so that the discretisation slack is a small share of delta; that
            # can also lose resolution (long runs): a second pass that allows more slack on the finer
            # mesh, and the smaller of the two certified bounds is kept
            _, fine = self._pld_setup(counts, h0, _ERR_SHARE * delta, _SLACK_SHARE_FINE * delta)
            if max(hh for _, _, hh in fine) < max(hh for _, _, hh in setups):
                eps = np.minimum(eps, self._eps_setups(c, fine, delta, {}))
        # an example with no step of positive sensitivity composed only mechanisms without privacy loss:
        # epsilon 0 exactly (the lattice's error terms alone can keep a large window from showing it)
        idle = ~np.asarray(c.any(axis=1))
        eps = np.where(idle, 0.0, eps)
        bad = ~np.isfinite(eps)
        if fallback and np.any(bad):
            eps = eps.copy()
            eps[bad], info["fallback"] = self._exact_fallback(np.asarray(counts[np.nonzero(bad)[0]]), delta)
        if fallback and h0 is not None and max(hh for _, _, hh in setups) > 4 * h0:
            # the mesh had to be much coarser than the resolution asks (a window wider than _MAX_FFT):
            # the answer is certified but may be loose; if few compositions suffice, take the exact one too
            live = np.nonzero(np.asarray(counts[:, 1:].any(axis=1)) & ~bad)[0]
            rows = np.asarray(counts[live])
            if live.size and np.unique(rows, axis=0).shape[0] <= _FALLBACK_GROUPS // 4:
                ex, more = self._exact_fallback(rows, delta)
                info.setdefault("fallback", more)
                eps = eps.copy()
                eps[live] = np.minimum(eps[live], ex)  # both certified upper bounds
        return eps, info

    @staticmethod
    def _eps_setups(c: np.ndarray, setups, delta: float, info: dict, lower: bool = False,
                    per: dict | None = None, rows: dict | None = None) -> np.ndarray:
        """Both directions' bounds, the larger kept (upper: the bound of the max; lower: a lower bound of
        it). ``rows[direction]``: compute that direction only for those rows (lower bounds: any one
        direction's lower bound is a lower bound of the max)."""
        eps = np.zeros(c.shape[0])
        for direction, bs, h in setups:
            sel = None if rows is None else rows.get(direction)
            if sel is not None and sel.size == 0:
                continue
            e, spent = population_epsilons(bs, c if sel is None else c[sel], delta, lower=lower)
            if sel is None:
                eps = np.maximum(eps, e)
            else:
                eps[sel] = np.maximum(eps[sel], e)
            if per is not None:
                per[direction] = e
            info[direction] = {"mesh": h, "fft_size": bs.n, "max_error_delta": float(np.max(spent)) if spent.size
                               else 0.0}
        return eps

    def _eps_lower_counts(self, counts: np.ndarray, delta: float, h: float,
                          winner: np.ndarray | None = None) -> tuple[np.ndarray, dict]:
        """Certified per-row *lower* bounds on epsilon: the same lattice machinery on dominated bucket
        pairs (``_dominating.dominated_pld``, merge-to-the-grid) at each bucket's lower ratio, for the
        direction (remove / add) that attains the row's upper bound (half the work of both). A
        dominated pair composes like a dominating one (each step is a post-processing of the true
        one), so the composed lower delta is below the true composed delta, and a grid epsilon whose
        certified lower delta exceeds ``delta`` lies below the true epsilon."""
        setup = self._pld_setup(counts, h, _ERR_SHARE * delta, None, lower=True)
        if setup is None:
            return np.zeros(counts.shape[0]), {}
        c, setups = setup
        info: dict[str, Any] = {}
        rows = None
        if winner is not None and winner.shape == (c.shape[0],):
            rows = {"add": np.nonzero(winner)[0], "remove": np.nonzero(~winner)[0]}
        lo = self._eps_setups(c, setups, delta, info, lower=True, rows=rows)
        return np.where(np.asarray(c.any(axis=1)), lo, 0.0), info

    def _exact_fallback(self, counts: np.ndarray, delta: float) -> tuple[np.ndarray, dict]:
        """Certified epsilons of the rows the fast path could not certify, from the core engine
        (``ConnectDotsAccountant`` composing ``PoissonSampled(Gaussian)`` steps of each bucket's ratio).

        Rows with the same counts share one composition; if there are more than ``_FALLBACK_GROUPS``
        of them, each row is replaced by the dominating sequence of the same length at its largest
        bucket (data-processing inequality, 000 Thm D.2), and failing that by the worst case.
        """
        from ..accountants import ConnectDotsAccountant
        from ..mechanisms import Gaussian, PoissonSampled

        def compose(row: np.ndarray) -> float:
            acc = ConnectDotsAccountant(eps_error=0.005)
            terms = [(PoissonSampled(mechanism=Gaussian(noise_multiplier=self._sigma,
                                                        sensitivity=self._ratio_of(b)),
                                     sampling_rate=self._q), int(row[b]))
                     for b in range(1, self._B + 1) if row[b] > 0]
            if not terms:
                return 0.0
            acc.compose(terms)
            try:
                up = float(acc.epsilon(delta).upper)
            except PrecisionError as exc:
                raise PrecisionError(f"per-example epsilon at delta={delta:g}: the FFT fast path's error terms "
                                     f"(wrap-around, discretisation slack, round-off) exceed delta and the "
                                     f"exact composition failed too ({exc}); use a larger delta") from exc
            if not math.isfinite(up) or up < 0:
                raise PrecisionError(f"per-example epsilon at delta={delta:g}: no certified finite bound "
                                     f"(core engine returned {up!r}); use a larger delta")
            return up

        rows = np.asarray(counts, dtype=np.int64)
        method = "exact rows"
        uniq, inv = np.unique(rows, axis=0, return_inverse=True)
        if uniq.shape[0] > _FALLBACK_GROUPS:
            method = "largest bucket"
            K = rows.sum(axis=1)
            top = np.where(rows[:, 1:].any(axis=1), self._B - np.argmax(rows[:, :0:-1] > 0, axis=1), 0)
            dom = np.zeros_like(rows)
            dom[np.arange(rows.shape[0]), top] = K
            uniq, inv = np.unique(dom, axis=0, return_inverse=True)
            if uniq.shape[0] > _FALLBACK_GROUPS:
                method = "worst case"
                dom[:] = 0
                dom[:, self._B] = np.where(rows[:, 1:].any(axis=1), K, 0)
                dom[:, 0] = K - dom[:, self._B]
                uniq, inv = np.unique(dom, axis=0, return_inverse=True)
                if uniq.shape[0] > _FALLBACK_GROUPS:
                    uniq = np.zeros((1, self._B + 1), dtype=np.int64)
                    uniq[0, self._B] = int(K.max())
                    inv = np.where(rows[:, 1:].any(axis=1), 0, -1)
        vals = np.array([compose(u) for u in uniq])
        out = np.where(np.asarray(inv).reshape(-1) >= 0, vals[np.maximum(np.asarray(inv).reshape(-1), 0)], 0.0)
        return out, {"rows": int(rows.shape[0]), "compositions": int(uniq.shape[0]), "method": method,
                     "engine": "ConnectDotsAccountant"}

    def epsilons(self, delta: float, *, lower: bool = True, method: str = "pld") -> Bounds:
        """Every example's epsilon at ``delta``, as an interval per example (arrays of length N).

        ``method`` (000 Fig. 1 compares the three):

        * ``"pld"`` (default): the certified interval described below (000 Sec. 5, App. D).
        * ``"rdp"``: a certified *upper* bound through per-example RDP curves and the RDP conversion
          (000 Lemma C.4; ``tightdp.individual.rdp``); ``lower`` is None. Always at least the PLD
          upper bound up to the PLD's own error terms (the conversion is lossy).
        * ``"gdp"``: ``sampling_rate = 1``: the exact per-example mu-GDP (000 Thm 11), the same numbers
          as ``"pld"``, ``kind="bound"``. ``sampling_rate < 1``: the epsilon of each example's fitted
          mu-GDP curve (``gdp_mus``, 000 App. D.2 / Sec. 5), ``kind="approximation"``: the fit is
          checked to dominate the example's certified delta(epsilon) only on ``[0, epsilon_max]``
          (``details``), so an answer at most ``epsilon_max`` is a certified upper bound
          (``details["certified"]`` marks them) and a larger one is not; ``lower`` is None.

        ``upper[i]`` is a certified upper bound and ``lower[i]`` a certified lower bound on the
        epsilon of the *exact* heterogeneous composition of example i's recorded steps (the
        Poisson-subsampled Gaussian at each step's recorded sensitivity ``min(g, C)``, both
        neighbouring directions), when every step was recorded with a computed norm (dense
        ``record_step``, or sparse with ``missing_norms="worst-case"``, which records the unlisted
        examples at sensitivity ``C``: then the interval is for that worst-case sequence).

        * ``upper``: each bucket's sensitivity interval is rounded up and its PLD replaced by a
          dominating discrete pair (000 Thm D.2, App. D; ``tightdp.pld.dominance.dominating``),
          composed by FFT and read off by Plancherel (Lemma D.1); every numerical error is added
          to delta. For ``sampling_rate = 1``: the exact per-example GDP (000 Thm 11).
        * ``lower``: each bucket's lower ratio (``b - 1 + frac`` buckets, ``frac`` the lowest recorded
          position within a bucket, so exact when norms sit on the grid ``k C / B``) and a
          *dominated* pair (merge to the grid, ``tightdp.pld.dominance.dominated``), which
          composes like the dominating one; every numerical error is subtracted. ``lower=False``
          skips it (about half the query time) and returns ``lower=None``.

        What it promises: the privacy of the steps *as recorded*, read off after the fact (an
        odometer, not a guarantee fixed before training; 000 Sec. 5). Fixed-in-advance
        per-example guarantees under fully adaptive composition are proven only for GDP-based
        filters (000 Thm 11-12; Tran, Koskela, Raisa, Honkela 2026, arXiv 2602.06756, show that the
        natural PLD / f-DP filter is not valid under fully adaptive composition). With
        ``missing_norms="last-seen"`` an example with imputed steps (``approximated_steps > 0``) has no
        certified interval: the result's ``kind`` is then ``"approximation"`` and
        ``details["approximate_examples"]`` counts them.
        """
        m = check_choice("method", method, _METHODS)
        if m == "rdp":
            return self._rdp_epsilons(delta)
        if m == "gdp" and self._q < 1.0:
            return self._gdp_fit_epsilons(delta)
        if self._q == 1.0:  # closed form: no products to thread
            return self._epsilons(delta, lower)
        with single_threaded_blas():
            return self._epsilons(delta, lower)

    # ------------------------------------------------------- RDP and mu-GDP per example
    def rdp_curves(self, orders=None) -> tuple[np.ndarray, np.ndarray]:
        """Per-example RDP curves: ``(orders, curves)`` with ``curves[i, j]`` a certified upper bound on
        example i's Renyi divergence of order ``orders[j]`` (both directions) for its recorded steps.

        ``sampling_rate = 1``: ``alpha mu_i^2 / 2`` from the exact per-example GDP parameter (``mus``).
        ``sampling_rate < 1``: ``sum_b counts[i, b] rho_b(alpha)``, ``rho_b`` the Poisson-subsampled
        Gaussian's curve (Mironov, Talwar, Zhang 2019) at bucket ``b``'s ratio, rounded up
        (``tightdp.individual.rdp``). Default orders: ``rdp.INDIVIDUAL_ORDERS``.
        """
        if orders is None:
            o = INDIVIDUAL_ORDERS
        else:
            o = np.unique(np.asarray(orders, dtype=float).reshape(-1))
            if o.size == 0 or not np.all(np.isfinite(o)) or np.any(o <= 1.0):
                raise ValueError(f"orders must be finite numbers > 1, got {orders!r}")
        if self._q == 1.0:
            mu = self.mus()
            return o, (0.5 * (mu * mu)[:, None] * o[None, :]) * (1.0 + 4 * _U)
        counts = np.asarray(self._ledger())
        used = np.asarray(counts.sum(axis=0) > 0)
        ratios = np.array([self._ratio_of(b) if b else 0.0 for b in range(self._B + 1)])
        table = bucket_rdp_table(self._sigma, self._q, ratios, o, used)
        return o, compose_rows(counts, table)

    def _rdp_epsilons(self, delta: float) -> Bounds:
        dlt = check_delta("delta", delta)
        orders, curves = self.rdp_curves()
        eps, best = epsilons_from_rdp_rows(orders, curves, dlt)
        return Bounds(None, eps, eps, "epsilon", self._kind(), {
            "method": "rdp", "steps": self._steps, "optimal_orders": best, "num_buckets": self._B,
            "source": "Mironov, Talwar, Zhang 2019 (subsampled Gaussian RDP); 000 Lemma C.4 "
                      "(Canonne, Kamath, Steinke 2020 Prop. 12) conversion"})

    def _kind(self) -> str:
        return "approximation" if self._approx is not None and np.any(self._approx) else "bound"

    def gdp_mus(self, *, epsilon_max: float | None = None, points: int = _FIT_POINTS,
                delta_min: float = _FIT_DELTA_MIN) -> Bounds:
        """Per-example mu-GDP parameters (000 Thm 11 for DP-GD; the fit of App. D.2 / Sec. 5 for DP-SGD).

        ``sampling_rate = 1``: the exact ``sqrt(sum_t r_t^2) / sigma`` (``mus``), ``kind="bound"``.

        ``sampling_rate < 1``: the subsampled Gaussian is not GDP, and 000 fits each example a mu-GDP
        curve "using the bisection method" (App. D.2; Sec. 5: by the CLT the composed PLD looks
        Gaussian, "it is then easy to numerically approximate mu", Fig. 1 left). Here: the certified
        upper bounds ``d_ij`` on example i's delta at ``eps_j`` (``points`` values evenly spaced on
        ``[0, epsilon_max]``, both directions, one Plancherel pass, 000 Lemma D.1) and the smallest
        ``mu_i`` (bisection, rounded up) with ``delta_GDP(eps_{j+1}; mu_i) >= d_ij`` for every j with
        ``d_ij >= t_i``, the GDP curve rounded down; ``t_i = max(delta_min, 4 min_j d_ij)`` (the
        certified curve levels off at its numerical error terms, about 1e-10 after 10^3 steps, and a
        GDP curve through that floor would force a large mu on every example). As both curves
        decrease in epsilon, the fitted curve then dominates the example's true delta(epsilon) on
        ``[0, eps*]`` (both directions, so also on ``[-eps*, 0]``), ``eps*`` the first grid point with
        ``d_ij < t_i``, and beyond ``eps*`` the true delta is below ``t_i``; hence
        ``gdp_epsilon(delta, mu_i)`` is a certified upper bound on the example's epsilon for every
        ``delta >= t_i`` (``details["certified_above"]``). Below ``t_i`` nothing is checked, so
        ``kind="approximation"``: a mu that dominates for *every* epsilon need not exist (the
        subsampled Gaussian's loss has a heavier right tail than a Gaussian's), and 000 Sec. 5's use
        of mu (Blackwell's theorem, eq. (5.2)) needs all epsilon.
        Default ``epsilon_max``: the worst case's epsilon at ``delta_min``.
        """
        pts = check_count("points", points, minimum=2)
        if self._q == 1.0:
            mu = self.mus()
            return Bounds(None, mu, mu, "mu", self._kind(), {"method": "gdp", "source": "000 Thm 11"})
        dmin = check_delta("delta_min", delta_min)
        counts = self._ledger()
        if epsilon_max is None:
            emax = float(self.worst_case_epsilon(dmin).upper)
        else:
            emax = check_positive("epsilon_max", epsilon_max)
        grid = np.linspace(0.0, max(emax, 1e-6), pts)
        with single_threaded_blas():
            mu, above = self._gdp_fit_counts(counts, grid, dmin)
        return Bounds(None, mu, mu, "mu", "approximation", {
            "method": "gdp-fit", "epsilon_max": float(grid[-1]), "points": pts, "steps": self._steps,
            "delta_min": dmin, "certified_above": above,
            "source": "000 App. D.2 (bisection on the per-example PLD's delta(epsilon)), Sec. 5"})

    def _delta_curves(self, counts, grid: np.ndarray) -> np.ndarray:
        """Certified upper bounds on every row's delta at each epsilon of ``grid`` (max of both
        directions): the Plancherel inner products of 000 Lemma D.1 with every error term added."""
        setup = self._pld_setup(counts, None, _DELTAS_TARGET, 0.0)
        out = np.zeros((counts.shape[0], grid.size))
        if setup is None:
            return out
        c, setups = setup
        for _direction, bs, _h in setups:
            for rows, (d, _) in _map_chunks(_chunk_delta_grid, bs, c, _order(bs, c), 2048, grid):
                out[rows] = np.maximum(out[rows], d)
        idle = ~np.asarray(c.any(axis=1))
        out[idle] = 0.0  # no step with privacy loss: delta 0 exactly
        return np.minimum(out, 1.0)

    def _gdp_fit_counts(self, counts, grid: np.ndarray, delta_min: float) -> tuple[np.ndarray, np.ndarray]:
        """The fitted mu of ``gdp_mus`` for every row of ``counts`` on the epsilon ``grid``, and the delta
        above which each row's fitted curve is certified (``t_i``; inf if its curve never fell below)."""
        D = self._delta_curves(counts, grid)
        t = np.maximum(delta_min, 4.0 * D.min(axis=1))
        low = D < t[:, None]
        first = np.where(low.any(axis=1), np.argmax(low, axis=1), D.shape[1])
        # d_ij must lie below delta_GDP(eps_{j+1}; mu) for every j before the first point below delta_min
        need = np.where(np.arange(D.shape[1] - 1)[None, :] < first[:, None], D[:, :-1], 0.0)
        at = np.broadcast_to(grid[1:][None, :], need.shape)

        def ok(m: np.ndarray) -> np.ndarray:
            lo = gdp_delta_bounds(at, np.broadcast_to(m[:, None], need.shape))[0]
            return np.all(lo >= need, axis=1)

        n = D.shape[0]
        lo, hi = np.zeros(n), np.ones(n)
        grow = ~ok(hi)
        while np.any(grow):
            hi = np.where(grow, 2.0 * hi, hi)
            if np.any(hi > 1e6):
                raise PrecisionError("per-example mu-GDP fit: no mu <= 1e6 dominates the delta curve")
            grow = ~ok(hi)
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            good = ok(mid)
            hi = np.where(good, mid, hi)
            lo = np.where(good, lo, mid)
            if np.all(hi - lo <= 1e-10 * hi):
                break
        return np.where(np.all(need <= 0.0, axis=1), 0.0, hi), np.where(low.any(axis=1), t, np.inf)

    def _gdp_fit_epsilons(self, delta: float) -> Bounds:
        dlt = check_delta("delta", delta)
        fit = self.gdp_mus()
        mu = np.asarray(fit.upper, float)
        eps = _gdp_eps_vec(dlt, mu)
        d = fit.details
        cert = (eps <= d["epsilon_max"]) | (dlt >= np.asarray(d["certified_above"]))
        kind = "bound" if bool(np.all(cert)) and self._kind() == "bound" else "approximation"
        return Bounds(None, eps, eps, "epsilon", kind, {
            **d, "mu": mu, "certified": cert,
            "note": "epsilon of each example's fitted mu-GDP curve (000 App. D.2); a certified upper bound "
                    "where certified is True (the fit dominates the example's delta curve there)"})

    def _epsilons(self, delta: float, lower: bool) -> Bounds:
        """``epsilons`` (BLAS limited to one thread by the caller)."""
        dlt = check_delta("delta", delta)
        if not isinstance(lower, (bool, np.bool_)):
            raise ValueError(f"lower must be True or False, got {lower!r}")
        details: dict[str, Any] = {"steps": self._steps, "num_buckets": self._B, "missing_norms": self._missing}
        lo = None
        if self._q == 1.0:
            mu = self.mus()
            up = _gdp_eps_vec(dlt, mu)
            if lower:
                s = self._sumsq * (1.0 - (self._steps + 4) * 2 * _U)
                lo = np.minimum(_gdp_eps_lower_vec(dlt, np.sqrt(np.maximum(s, 0.0)) / self._sigma * (1.0 - 4 * _U)),
                                up)
            details.update(method="gdp", source="000 Thm 11, eq. (C.2)")
        else:
            counts = self._ledger()
            up, info = self._eps_counts(counts, dlt)
            win = self._cache.pop("winner", None)
            # every example is dominated by the all-worst-case sequence of the same length
            # (000 Thm D.2's data-processing argument), so that bound applies to each example too
            worst = self.worst_case_epsilon(dlt).upper
            up = np.minimum(up, worst)
            details.update(worst_case_epsilon=worst)
            details.update(method="pld", source="000 App. D (dominating bucket PLDs, FFT, Plancherel)", **info)
            if lower:
                h = max(v["mesh"] for k, v in info.items() if k in ("remove", "add")) if info else None
                lo, linfo = self._eps_lower_counts(counts, dlt, h, win)
                lo = np.minimum(lo, up)  # both certified: lower <= true <= upper (a tie at most)
                details.update(lower={"method": "dominated bucket PLDs (merge to the grid) at each bucket's "
                                                "lower ratio", "frac_min": self._frac_min, **linfo})
        kind = "bound"
        n_approx = int(np.count_nonzero(self._approx)) if self._approx is not None else 0
        if n_approx:
            kind = "approximation"
            details.update(approximate_examples=n_approx,
                           note="missing norms imputed from each example's last-seen norm "
                                "(approximated_steps > 0): those examples' intervals are not certified")
        if not np.all(np.isfinite(up)):  # unreachable: the fallback certifies or raises
            raise PrecisionError("per-example epsilon: no certified finite bound; use a larger delta")
        return Bounds(lo, up, up, "epsilon", kind, details)

    def deltas(self, epsilon: float) -> Bounds:
        """Every example's delta at ``epsilon`` (certified upper bounds, array of length N)."""
        if self._q == 1.0:
            return self._deltas(epsilon)
        with single_threaded_blas():
            return self._deltas(epsilon)

    def _deltas(self, epsilon: float) -> Bounds:
        eps = check_epsilon("epsilon", epsilon)
        if math.isinf(eps):
            raise ValueError("epsilon must be finite")
        details: dict[str, Any] = {"steps": self._steps, "num_buckets": self._B}
        if self._q == 1.0:
            _, d, up = gdp_delta_bounds(eps, self.mus())
            details.update(method="gdp", source="000 Thm 11, eq. (C.2)")
            return Bounds(None, d, up, "delta", "bound", details)
        out = self._deltas_at(self._ledger(), eps, 0.0)
        if out is None:
            z = np.zeros(self._n)
            return Bounds(None, z, z, "delta", "bound", details)
        # the discretisation slack is an absolute term: if it is not small next to the answers,
        # a second pass on a mesh sized for them (both passes are certified; the smaller is kept)
        pos = out[np.asarray(self._ledger()[:, 1:].any(axis=1))]
        tgt = 0.01 * float(np.min(pos)) if pos.size else 0.0
        if tgt > 0 and self._cache.get(("deltas_slack", eps), math.inf) > tgt:
            out = np.minimum(out, self._deltas_at(self._ledger(), eps, tgt))
        details.update(method="pld", source="000 Lemma D.1 (Plancherel)")
        return Bounds(None, out, out, "delta", "bound", details)

    def _deltas_at(self, counts: np.ndarray, eps: float, slack_target: float) -> np.ndarray | None:
        setup = self._pld_setup(counts, None, _DELTAS_TARGET, slack_target)
        if setup is None:
            return None
        c, setups = setup
        out = np.zeros(counts.shape[0])
        slack = 0.0
        for direction, bs, h in setups:
            out = np.maximum(out, population_deltas(bs, c, eps))
            slack = max(slack, float(np.max(rows_at(c, bs.slack))))
        out = np.where(np.asarray(c.any(axis=1)), out, 0.0)  # no step with privacy loss: delta 0 exactly
        self._cache[("deltas_slack", eps)] = slack
        return np.minimum(out, 1.0)

    def worst_case_epsilon(self, delta: float) -> Bounds:
        """Epsilon of an example with every recorded step at full sensitivity (the usual DP-SGD bound)."""
        dlt = check_delta("delta", delta)
        if self._steps == 0:
            return Bounds(0.0, 0.0, 0.0, "epsilon", "bound", {"note": "nothing recorded"})
        if self._q == 1.0:
            mu = math.sqrt(self._steps) / self._sigma * (1.0 + 4 * _U)
            e = float(_gdp_eps_vec(dlt, np.array([mu]))[0])
            return Bounds(None, e, e, "epsilon", "bound", {"method": "gdp", "mu": mu})
        row = np.zeros((1, self._B + 1), dtype=np.int64)
        row[0, self._B] = self._steps
        e, info = self._eps_counts(row, dlt, self._mesh_for(self._ledger()))
        return Bounds(None, float(e[0]), float(e[0]), "epsilon", "bound", {"method": "pld", **info})

    def active(self, epsilon: float, delta: float, grad_norms=None, *, rule: str | None = None) -> np.ndarray:
        """Boolean mask of examples whose budget ``(epsilon, delta)`` allows one more step.

        The caller records the step with norm 0 for the inactive examples (they do not contribute).
        ``grad_norms``: the coming step's norms, computed before the release (Alg. 1 requires that);
        None: the worst case ``C`` for every example. ``rule`` None (the default) is a proven filter:
        the GDP filter for DP-GD and ``"rdp"`` for DP-SGD. What each filter promises:

        ``sampling_rate = 1`` (DP-GD), ``rule`` "pld" or "paper": the individual GDP filter (000 Alg. 1,
        eq. (4.1)) with budget ``B = gdp_mu(epsilon, delta)``: example i stays active iff
        ``sum_t mu_t^2 + mu_next^2 <= B^2``, ``mu_next = min(g_i, C) / (C sigma)``. Proven: every
        example is ``B``-GDP, hence ``(epsilon, delta)``-DP, under fully adaptive composition
        (000 Thm 11, 12, Cor. C.2); tight for the Gaussian mechanism. With ``grad_norms=None`` an
        example once dropped stays dropped.

        ``rule="rdp"`` (any sampling rate): the individual RDP filter of Feldman and Zrnic (2021,
        Alg. 3, Thm 4.3) at one order ``alpha*``, with the budget ``b(alpha*)`` that 000 Lemma C.4
        converts to exactly ``epsilon`` at ``delta``: active iff the example's certified RDP of order
        ``alpha*`` after the next step is at most ``b(alpha*)``. ``alpha*`` depends on the options and
        ``(epsilon, delta)`` only, not on the data: the order that allows the most worst-case steps
        (largest ``b(alpha) / rho_worst(alpha)``, as Feldman and Zrnic budget the worst-case run).
        Proven under fully adaptive composition; certified (RDP curves rounded up). Looser than the
        GDP filter for DP-GD (RDP's conversion is lossy, 000 Sec. 4.1).
        (A budget at *every* order, e.g. the whole curve ``alpha B_R^2 / 2``, would also be valid but
        stops DP-SGD almost at once: the subsampled Gaussian's RDP at large orders grows like the
        unsubsampled one's.)

        ``rule="paper"`` with ``sampling_rate < 1``: 000 Sec. 5 as stated: example i stays active iff
        the mu of its fitted mu-GDP curve after the next step (``gdp_mus``, App. D.2) is at most
        ``B_R``, the largest ``B`` whose Gaussian RDP curve ``alpha B^2 / 2`` converts to
        ``(epsilon, delta)`` by 000 Lemma C.4 (``rdp.gaussian_budget_mu``; Sec. 5 converts the RDP of
        ``N(B, 1)`` vs ``N(0, 1)``,
        eq. (5.3), to (epsilon, delta)). Promise: none proven. Were the fitted curve a true mu-GDP
        bound for every epsilon, eq. (5.1)-(5.3) would make the example RDP-dominated by
        ``N(mu, 1)`` vs ``N(0, 1)`` at every order, and the guarantee would follow from Feldman and
        Zrnic's filter. But the fit is checked only down to a delta of about 1e-10 (``gdp_mus``), and for
        DP-SGD no small mu is a true bound at every epsilon (the composition's RDP at large orders
        grows like that of the unsubsampled mechanism, about ``k alpha r^2 / (2 sigma^2)``), so the
        rule admits steps that a proven RDP filter with the same curve would refuse. It is here to
        reproduce the paper; ``"rdp"`` is the proven choice.

        ``rule="pld"`` with ``sampling_rate < 1``: tightdp's heuristic: active iff the
        example's certified PLD epsilon after one more worst-case step (``grad_norms`` is not used)
        is at most ``epsilon``. It admits the most steps (no RDP conversion), and the epsilons are
        certified for the recorded sequence, but it is *not* a guarantee under fully adaptive
        composition: Tran, Koskela, Raisa, Honkela 2026 (arXiv 2602.06756) show that PLD / f-DP
        filters are not valid there; only GDP-based filters (and RDP ones) are proven. Use it as an
        odometer-driven stopping heuristic, and ``"rdp"`` when the filter must be a guarantee.
        """
        r = ("pld" if self._q == 1.0 else "rdp") if rule is None else check_choice("rule", rule, _RULES)
        if self._q == 1.0 and r != "rdp":
            return self._active(epsilon, delta, grad_norms)
        with single_threaded_blas():
            if r == "pld":
                return self._active(epsilon, delta, grad_norms)
            return self._active_rdp(epsilon, delta, grad_norms, paper=(r == "paper"))

    def _next_codes(self, grad_norms) -> np.ndarray:
        """Bucket index of every example's coming step (worst case ``B`` if ``grad_norms`` is None)."""
        if grad_norms is None:
            return np.full(self._n, self._B, dtype=np.intp)
        arr = self._check_norms(grad_norms, (self._n,))
        out = np.empty(self._n, dtype=self._code_dtype)
        saved = (self._ybuf, self._cbuf)
        self._codes(arr, out)
        self._ybuf, self._cbuf = saved
        return out.astype(np.intp)

    def _active_rdp(self, epsilon: float, delta: float, grad_norms, paper: bool) -> np.ndarray:
        """``rule="rdp"`` (Feldman and Zrnic's individual RDP filter) and ``rule="paper"`` (000 Sec. 5)."""
        eps = check_epsilon("epsilon", epsilon)
        dlt = check_delta("delta", delta)
        if math.isinf(eps):
            return np.ones(self._n, dtype=bool)
        nxt = self._next_codes(grad_norms)
        if not paper:
            orders, spent = self.rdp_curves()
            if self._q == 1.0:
                r = np.ones(self._n) if grad_norms is None else \
                    _clipped_ratio(self._check_norms(grad_norms, (self._n,)), self._clip)
                step = 0.5 * ((r / self._sigma) ** 2)[:, None] * orders[None, :] * (1.0 + 8 * _U)
            else:
                ratios = np.array([self._ratio_of(b) if b else 0.0 for b in range(self._B + 1)])
                used = np.zeros(self._B + 1, dtype=bool)
                used[np.unique(nxt)] = True
                step = bucket_rdp_table(self._sigma, self._q, ratios, orders, used)[nxt] * (1.0 + 1e-9)
            # Lemma C.4 solved for the RDP budget at each order, rounded down
            bvec = eps - np.log1p(-1.0 / orders) + (math.log(dlt) + np.log(orders)) / (orders - 1.0)
            bvec = bvec - 1e-12 * (np.abs(bvec) + eps + abs(math.log(dlt)))
            rho_w = bucket_rdp_table(self._sigma, self._q, np.array([_bucket_ratio(self._B, self._B)]), orders)[0]
            k = int(np.argmax(np.where(bvec > 0, bvec / np.maximum(rho_w, 1e-300), -np.inf)))
            return rdp_filter_active(spent[:, k:k + 1], step[:, k:k + 1], bvec[k:k + 1])
        counts = np.asarray(self._ledger()).astype(np.int64)
        counts[np.arange(self._n), nxt] += 1
        worst = np.zeros((1, self._B + 1), dtype=np.int64)
        worst[0, self._B] = self._steps + 1
        emax = float(self._eps_counts(worst, _FIT_DELTA_MIN)[0][0])
        mu, _ = self._gdp_fit_counts(counts, np.linspace(0.0, max(emax, 1e-6), _FIT_POINTS), _FIT_DELTA_MIN)
        return mu <= gaussian_budget_mu(eps, dlt, INDIVIDUAL_ORDERS)

    def _active(self, epsilon: float, delta: float, grad_norms=None) -> np.ndarray:
        eps = check_epsilon("epsilon", epsilon)
        dlt = check_delta("delta", delta)
        if self._q == 1.0:
            from .gdp import gdp_mu
            B = gdp_mu(eps, dlt)
            if grad_norms is None:
                nxt = np.ones(self._n)
            else:
                nxt = _clipped_ratio(self._check_norms(grad_norms, (self._n,)), self._clip)
            total = (self._sumsq + nxt * nxt) * (1.0 + (self._steps + 8) * 2 * _U) / self._sigma ** 2
            return total * (1.0 + 8 * _U) <= B * B
        bump = np.zeros(self._B + 1, dtype=np.int64)
        bump[self._B] = 1
        counts = self._ledger().astype(np.int64) + bump  # (a dask-backed ledger stays lazy)
        # an epsilon the fast path cannot certify (inf) drops the example: conservative for a filter
        e, _ = self._eps_counts(counts, dlt, fallback=False)
        return e <= eps

    # ---------------------------------------------------------- persistence
    def save(self, path) -> None:
        """Write the ledger atomically (temporary file in the same directory, then ``os.replace``)."""
        path = os.fspath(path)
        meta = json.dumps({"format": _FORMAT, "options": self.options(), "steps": self._steps})
        buf = io.BytesIO()
        arrays = {"counts": self._ledger(), "meta": np.frombuffer(meta.encode(), dtype=np.uint8)}
        if self._sumsq is not None:
            arrays["sumsq"] = self._sumsq
        arrays.update(self._extra_state())
        np.savez(buf, **arrays)
        d = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(prefix=".tightdp-", suffix=".tmp", dir=d)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(buf.getvalue())
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):  # best effort: never mask the original error
                os.unlink(tmp)
            raise

    def _extra_state(self) -> dict[str, np.ndarray]:
        """Recording state beyond the counts (format 2): per-bucket lowest scaled ratio, last-seen data."""
        out = {"frac_min": np.array([self._frac_min])}
        if self._last is not None:
            out.update(last=self._last, approx=self._approx)
            if self._last_r is not None:
                out["last_r"] = self._last_r
        return out

    def _set_extra_state(self, z, fmt: str) -> None:
        """Inverse of ``_extra_state`` (validated). A format-1 ledger has no recorded positions: bucket
        ``b`` then stands for every ratio above ``(b - 1) / B`` (``b = ceil(y)``, so ``y > b - 1``)."""
        if fmt == _FORMATS_READ[0] or "frac_min" not in z:
            self._frac_min = 0.0
            return
        fm = np.array(z["frac_min"], dtype=float).reshape(-1)
        if fm.shape != (1,) or not 0.0 <= fm[0] <= 1.0:
            raise ValueError("saved bucket positions do not match the saved options")
        self._frac_min = float(fm[0])
        if self._last is not None:
            last, approx = np.array(z["last"]), np.array(z["approx"])
            if last.shape != (self._n,) or approx.shape != (self._n,) or np.any(last > self._B) \
                    or np.any(approx < 0):
                raise ValueError("saved last-seen state does not match the saved options")
            self._last = last.astype(self._code_dtype)
            self._approx = approx.astype(np.int32)
            if self._last_r is not None:
                self._last_r = np.array(z["last_r"], dtype=float)

    @classmethod
    def load(cls, path) -> "IndividualAccountant":
        """Read a ledger written by ``save`` (exact round-trip; format-1 files load too)."""
        try:
            with np.load(os.fspath(path), allow_pickle=False) as z:
                meta = json.loads(bytes(z["meta"]).decode())
                counts = np.array(z["counts"])
                sumsq = np.array(z["sumsq"]) if "sumsq" in z.files else None
                extra = {k: np.array(z[k]) for k in ("frac_min", "last", "approx", "last_r") if k in z.files}
        except (OSError, KeyError, ValueError) as exc:
            raise ValueError(f"path {os.fspath(path)!r} is not a saved IndividualAccountant: {exc}") from None
        if meta.get("format") not in _FORMATS_READ:
            raise ValueError(f"path {os.fspath(path)!r} has unknown format {meta.get('format')!r}")
        acc = cls(**meta["options"])
        try:
            acc._set_extra_state(extra, meta["format"])
        except KeyError as exc:
            raise ValueError(f"path {os.fspath(path)!r}: saved ledger lacks {exc}") from None
        if counts.shape != acc._counts.shape or counts.dtype != np.int32 or np.any(counts < 0):
            raise ValueError("saved bucket counts do not match the saved options")
        if (sumsq is None) != (acc._sumsq is None) or (sumsq is not None and sumsq.shape != (acc._n,)):
            raise ValueError("saved GDP sums do not match the saved options")
        steps = check_count("steps", meta["steps"], minimum=0)
        if np.any(counts.sum(axis=1, dtype=np.int64) != steps):
            raise ValueError("saved bucket counts do not add up to the saved number of steps")
        acc._counts = counts
        acc._sumsq = sumsq
        acc._steps = steps
        return acc

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, IndividualAccountant):
            return NotImplemented
        same_sq = (self._sumsq is None and other._sumsq is None) or (
            self._sumsq is not None and other._sumsq is not None and np.array_equal(self._sumsq, other._sumsq))
        return (self.options() == other.options() and self._steps == other._steps
                and np.array_equal(self._ledger(), other._ledger()) and same_sq
                and self._frac_min == other._frac_min
                and np.array_equal(self.approximated_steps, other.approximated_steps))

    def __repr__(self) -> str:
        return (f"IndividualAccountant(num_examples={self._n}, noise_multiplier={self._sigma}, "
                f"clip_norm={self._clip}, sampling_rate={self._q}; {self._steps} steps)")


def _chunk_delta_grid(bs, cc: np.ndarray, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One chunk of ``_delta_curves``: certified upper deltas on the grid (``_population``'s own
    chunk window, product spectra and error terms)."""
    cb = _chunk_spectra(bs, cc)
    D = _delta_grid(cb, _prepare(cb, cc), grid)
    return D, D


def _gdp_eps_vec(delta: float, mu: np.ndarray) -> np.ndarray:
    """Vectorised ``gdp_epsilon``: bisection on every example at once, upper end returned."""
    mu = np.asarray(mu, float)
    lo = np.zeros_like(mu)
    hi = np.maximum(1.0, mu * mu + 10.0 * mu + 10.0)
    ok = lambda e: gdp_delta_bounds(e, mu)[2] <= delta
    grow = ~ok(hi)
    while np.any(grow):
        hi = np.where(grow, 2 * hi, hi)
        grow = ~ok(hi)
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        good = ok(mid)
        hi = np.where(good, mid, hi)
        lo = np.where(good, lo, mid)
    out = np.where(ok(np.zeros_like(mu)), 0.0, hi)
    return np.where(mu == 0, 0.0, out)


def _gdp_eps_lower_vec(delta: float, mu: np.ndarray) -> np.ndarray:
    """Vectorised certified *lower* end of ``gdp_epsilon``: the largest bisection point whose GDP delta,
    rounded down, is still above ``delta`` (0 if none)."""
    mu = np.asarray(mu, float)
    lo = np.zeros_like(mu)
    hi = np.maximum(1.0, mu * mu + 10.0 * mu + 10.0)
    above = lambda e: gdp_delta_bounds(e, mu)[0] > delta
    grow = above(hi)
    while np.any(grow):
        lo = np.where(grow, hi, lo)
        hi = np.where(grow, 2 * hi, hi)
        grow = above(hi)
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        a = above(mid)
        lo = np.where(a, mid, lo)
        hi = np.where(a, hi, mid)
    return np.where((mu == 0) | ~above(lo), 0.0, lo)


# ------------------------------------------------------------------ private helpers (validation, buckets)
def _check_clip_norm(value) -> float:
    """``clip_norm`` must be a finite *normal* positive float (a subnormal one has no relative precision)."""
    c = check_positive("clip_norm", value)
    if c < _CLIP_MIN:
        raise ValueError(f"clip_norm must be >= {_CLIP_MIN:g} (a normal float), got {value!r}")
    return c


def _ledger_cap_bytes() -> int:
    cap = _LEDGER_CAP_BYTES
    try:
        phys = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        if phys > 0:
            cap = min(cap, phys // 4)
    except (AttributeError, ValueError, OSError):  # not available on this platform: the fixed cap
        pass
    return int(cap)


def _check_ledger_size(n: int, buckets: int, q: float) -> None:
    """Refuse, before allocating, a ledger larger than the cap (``_LEDGER_CAP_BYTES``)."""
    need = n * (buckets + 1) * 4 + (8 * n if q == 1.0 else 0)
    cap = _ledger_cap_bytes()
    if need > cap:
        raise ValueError(f"num_examples={n} with num_buckets={buckets} needs a {need / 2 ** 30:.3g} GiB ledger "
                         f"(4 bytes per example and bucket), above the cap of {cap / 2 ** 30:.3g} GiB "
                         f"(16 GiB or a quarter of the physical memory); use fewer examples per accountant "
                         f"or fewer buckets")


def _as_norm_array(values) -> np.ndarray:
    """Gradient norms as a float array; booleans, strings, complex numbers and other objects are rejected."""
    try:
        raw = np.asarray(values)
    except (TypeError, ValueError):
        raise ValueError(f"grad_norms must be an array of numbers, got {type(values).__name__}") from None
    kind = raw.dtype.kind
    if kind == "O":
        flat = raw.ravel()
        if not all(isinstance(v, (numbers.Real, np.floating, np.integer)) and not isinstance(v, (bool, np.bool_))
                   for v in flat):
            raise ValueError("grad_norms must be an array of real numbers (no booleans, strings or objects)")
    elif kind not in "iuf":
        raise ValueError(f"grad_norms must be an array of real numbers, got dtype {raw.dtype} "
                         f"(booleans, strings and complex numbers are not norms)")
    try:
        return np.asarray(raw, dtype=float)
    except (TypeError, ValueError, OverflowError):
        raise ValueError("grad_norms must be an array of real numbers") from None


def _bucket_ratio(b: int, buckets: int) -> float:
    """The sensitivity ratio bucket ``b`` stands for (rounded up by the relative ``_MARGIN``)."""
    return (b / buckets) * (1.0 + _MARGIN)


def _clipped_ratio(norms: np.ndarray, clip: float) -> np.ndarray:
    """``min(g, C) / C`` in [0, 1] (NaN and +inf -> 1), correctly rounded: never overflows."""
    m = np.fmin(norms, clip)  # fmin: NaN -> C (worst case)
    return np.minimum(m / clip, 1.0)


def _scaled_ratio(norms: np.ndarray, clip: float, buckets: int, scale: float | None = None,
                  out: np.ndarray | None = None) -> np.ndarray:
    """``y = min(g B / C, B)`` for norms ``g >= 0`` (NaN and +inf -> ``B``), two roundings.

    ``scale = fl(B / C)``; ``y = min(fl(g * scale), B)``, so ``y`` is within a relative
    ``2u`` of the exact ``min(g, C) B / C`` (both roundings are relative, ``fmin``
    clamps exactly and maps NaN to ``B``; ``g * scale`` may overflow to ``+inf``, which
    is clamped too). If ``B / C`` itself overflows (a ``C`` below about ``B * 5.6e-309``)
    the ratio is formed as ``(min(g, C) / C) * B`` instead (the same two roundings).
    """
    scale = buckets / clip if scale is None else scale
    if math.isfinite(scale):
        with np.errstate(over="ignore"):  # a huge norm overflows to +inf, clamped to B below
            y = np.multiply(norms, scale, out=out)
        return np.fmin(y, float(buckets), out=y)
    y = np.fmin(norms, clip, out=out)
    np.divide(y, clip, out=y)
    return np.multiply(y, float(buckets), out=y)


def _ceil_index(y: np.ndarray, norms: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``out = ceil(y)`` (an integer array), clamped to at least 1 for every positive norm whose ``y``
    underflowed to 0 (checked cheaply: only where an index is 0)."""
    np.ceil(y, out=out, casting="unsafe")
    if out.size and not out.all():
        under = (out == 0) & ~(norms == 0)  # NaN is not 0 (and has y = B anyway)
        out[under] = 1
    return out


def _bucket_index(norms: np.ndarray, clip: float, buckets: int) -> np.ndarray:
    """Smallest bucket ``b`` in ``0..B`` whose sensitivity ``(b / B)(1 + _MARGIN)`` is >= ``min(g, C) / C``.

    ``b = ceil(y)`` with ``y = min(fl(g fl(B / C)), B)`` (``_scaled_ratio``): ``y`` is at
    least ``(1 - 2u)`` times the exact ``min(g, C) B / C``, which the relative ``_MARGIN``
    covers, and the ``fmin`` clamp keeps a norm at (or rounded above) the clip in bucket
    ``B``, never beyond. The index is clamped to ``[1, B]`` for every positive norm (an
    underflowed ratio still lands in bucket 1) and is 0 only for a norm of exactly 0.
    This is the function ``record_step`` applies (through reused buffers).
    """
    norms = np.asarray(norms, dtype=float)
    y = _scaled_ratio(norms, clip, buckets)
    return _ceil_index(y, norms, np.empty(norms.shape, dtype=np.intp))

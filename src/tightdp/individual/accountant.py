"""Per-example privacy ledger for DP-SGD / DP-GD (Koskela et al. 2023, Sec. 3-5, App. C.2, App. D).

At every step each example ``i`` has an unclipped gradient norm ``g_i``. Its
contribution to the noisy clipped sum has sensitivity ``min(g_i, C)``, so the
step is, for that example, the (Poisson-subsampled) Gaussian mechanism with
effective noise multiplier ``sigma * C / min(g_i, C)`` (Koskela et al. 2023, App. C.2, D.2).
``g_i = 0`` is no privacy loss; ``NaN`` ("not computed") is the worst case.
Under Poisson sampling this holds whether or not the example was drawn, so a
sparse ``record_step(norms, indices=batch)`` records the unlisted examples by
the ``missing_norms`` policy (worst case ``C`` by default; ``"last-seen"`` is an
approximation and is labelled as one).

**Ledger.** The scaled ratio ``y = min(g B / C, B)`` is rounded *up* to the
bucket ``b = ceil(y)`` of ``B = num_buckets`` buckets (each widened by a
relative ``1e-9`` so that float rounding cannot cross a bucket edge), i.e. the noise
multiplier is rounded *down* to the sigma-grid ``{sigma B / b}``; the rounded
mechanism dominates the real one (data-processing inequality, Koskela et al. 2023, Thm D.2).
Each example keeps only its bucket counts: memory ``O(N B)``, and the ledger
never depends on the order of steps. Steps are buffered as one byte per
example and folded into the counts by ``np.bincount`` (``_flush``). The lowest
position ``y - (b - 1)`` of any recorded ratio within its bucket is kept too
(lower bounds). With ``sampling_rate = 1`` the exact sum of ``r^2`` is kept as
well (per-example GDP, Koskela et al. 2023, Thm 11).

**What is computed.** ``epsilons(delta)`` gives, for each example, a certified
interval ``[lower, upper]`` around the epsilon of the composition of its
recorded per-step mechanisms under add/remove of that example (both
directions, the max); ``deltas(epsilon)`` a certified upper bound on delta:

* ``sampling_rate = 1`` (DP-GD): the composition of Gaussian mechanisms with
  ``mu_t = r_t / sigma`` is exactly ``sqrt(sum mu_t^2)``-GDP (Koskela et al. 2023, Thm 11); the
  conversion (C.2) is exact, rounded outwards. No buckets are involved.
* ``sampling_rate < 1`` (DP-SGD): each bucket's PLD is replaced by a dominating
  discrete pair (upper end) or a dominated one at the bucket's lower ratio
  (lower end) on a lattice (``tightdp.pld.dominance``, ``_dominating``), and
  composed per example by pre-computed FFTs and one matrix product per chunk of
  examples (Koskela et al. 2023, App. D, ``_population``); every numerical error is added to
  (upper) or subtracted from (lower) delta.

**What is not promised.** The sequence of norms is itself chosen adaptively
from earlier outputs. For Gaussian steps (``sampling_rate = 1``) a budget
fixed *in advance* and enforced by the filter (``active``) is a proven
guarantee (Koskela et al. 2023, Thm 11-12, Alg. 1). A per-example epsilon read off *after* the
fact is an odometer reading, not a guarantee fixed before training. For
DP-SGD, Koskela et al. 2023, Sec. 5 only gives an approximative filter, and the natural PLD /
f-DP filter is not valid under fully adaptive composition (Tran, Koskela,
Raisa, Honkela 2026, arXiv 2602.06756; only GDP-based filters are proven); the
per-example epsilon is then the accounting of the realised sequence, not a
theorem about the adaptive algorithm.

**Layout.** This module holds the constructor and the recording; the queries live beside it, each
a one-level mixin over the same state: ``_pld_queries`` (``epsilons``, ``deltas``,
``worst_case_epsilon``), ``_rdp_gdp`` (``mus``, ``rdp_curves``, ``gdp_mus``), ``_filters``
(``active``), ``_persistence`` (``save``, ``load``); ``_buckets`` has the bucket geometry and the
input checks as plain functions.
"""

from __future__ import annotations

import math
from typing import Any, cast

import numpy as np

from .._types import AnyArray, ArrayLike, FloatArray
from .._validation import check_choice, check_count, check_positive, check_probability
from ..errors import PrecisionError
from ._buckets import (
    _COUNT_MAX,
    _as_norm_array,
    _ceil_index,
    _check_clip_norm,
    _check_ledger_size,
    _clipped_ratio,
    _scaled_ratio,
    check_indices,
    check_norms,
)
from ._filters import _Filters
from ._persistence import _Persistence
from ._pld_queries import _PLDQueries
from ._rdp_gdp import _RDPGDPMethods

__all__ = ["IndividualAccountant"]

#: pending per-step bucket indices (uint8/uint16, one row per step) are folded into the counts with one
#: np.bincount per block of examples once this many bytes are buffered (see ``_flush``)
_BUFFER_BYTES = 64 << 20
_BUFFER_STEPS = (8, 1024)  # fewest / most buffered steps
_MISSING = ("worst-case", "last-seen")
_GRIDS = ("uniform", "paper")
_FRAC_FLOOR = 1.0 / 64  # see IndividualAccountant._note_frac


class IndividualAccountant(_PLDQueries, _RDPGDPMethods, _Filters, _Persistence):
    """Per-example privacy ledger for DP-SGD / DP-GD (Koskela et al. 2023, Sec. 3-5, App. C.2, App. D).

    Records each step's per-example gradient norms (``record_step``) and answers, per example, certified
    epsilon intervals (``epsilons``), deltas (``deltas``), RDP curves and mu-GDP parameters
    (``rdp_curves``, ``gdp_mus``), and filters (``active``). The module docstring says what each number
    means and what is not promised.

    Parameters
    ----------
    num_examples : int
        N, the number of examples tracked.
    noise_multiplier : float
        sigma, the noise standard deviation divided by the clipping norm.
    clip_norm : float
        C, the clipping norm (a normal positive float).
    sampling_rate : float
        Poisson sampling probability q; 1 (the default) for full-batch DP-GD.
    num_buckets : int
        B, the size of the sigma-grid (Koskela et al. 2023, App. D.2), at most 10000. Each recorded sensitivity ratio is
        rounded up by less than ``1 / B``.
    mesh : float, optional
        Lattice spacing of the PLDs (``sampling_rate < 1``); default: chosen at query time so that the
        worst example's composed PLD has about ``resolution`` grid points per standard deviation.
    resolution : float
        See ``mesh``.
    missing_norms : {"worst-case", "last-seen"}
        The norm of an example not listed in a sparse ``record_step``: the clip norm (certified), or the
        example's last recorded one (an approximation, labelled as one).
    sigma_grid : {"uniform", "paper"}
        ``"uniform"`` (default): buckets uniform in the sensitivity ratio, ``b / B``, each ratio rounded
        up by less than ``1 / B``. ``"paper"``: Koskela et al. 2023, App. D.2's grid, uniform in the noise ratio:
        ``sigma_i = sigma + i (sigma_max - sigma) / n`` with ``n = B - 1`` intervals (the ``B`` buckets
        are ``sigma_0 .. sigma_n``), an effective noise ``sigma C / min(g, C)`` in
        ``[sigma_i, sigma_{i+1})`` rounded down to ``sigma_i`` and one above ``sigma_max`` to
        ``sigma_max`` (eq. (D.2)); a zero norm stays exact (no privacy loss). Both grids only round the
        noise down (Koskela et al. 2023, Thm D.2), so every bound stays certified; the paper's grid is coarse near ratio 1
        (``sigma_1 - sigma_0`` is a ratio step of about ``(sigma_max / sigma - 1) / n``) and rounds every
        ratio below ``sigma / sigma_max`` up to it, so it is looser for the same ``B``
        (``examples/papers/p000_individual.py`` reports by how much). Sums of squares for
        ``sampling_rate = 1`` are exact either way.
    sigma_max : float, optional
        The paper grid's largest noise multiplier (default ``10 * noise_multiplier``).

    Raises
    ------
    ValueError
        An argument out of its range (the message names it), ``sigma_max`` without
        ``sigma_grid="paper"``, or a ledger above the memory cap (16 GiB or a quarter of the physical
        memory).

    References
    ----------
    Koskela et al. 2023 (individual privacy accounting with Gaussian DP): Thm 11 and eq. (C.2) (DP-GD,
    exact mu-GDP), Lemma D.1 and Thm D.2 (per-example PLDs by Plancherel on the sigma-grid of App. D.2),
    Lemma C.4 (RDP conversion), eq. (4.1) and Alg. 2 (filters).
    """

    def __init__(
        self,
        *,
        num_examples: int,
        noise_multiplier: float,
        clip_norm: float,
        sampling_rate: float = 1.0,
        num_buckets: int = 100,
        mesh: float | None = None,
        resolution: float = 1600.0,
        missing_norms: str = "worst-case",
        sigma_grid: str = "uniform",
        sigma_max: float | None = None,
    ) -> None:
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
                raise ValueError(f"sigma_max must be finite and > noise_multiplier={self._sigma!r}, got {sigma_max!r}")
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
        self._code_dtype: type[np.unsignedinteger[Any]] = np.uint8 if self._B <= 255 else np.uint16
        self._buf: AnyArray | None = None
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
        """N, the number of examples tracked."""
        return self._n

    @property
    def steps(self) -> int:
        """Number of recorded steps."""
        return self._steps

    @property
    def bucket_counts(self) -> AnyArray:
        """Read-only ``(N, B + 1)`` counts; column ``b`` counts steps with ratio rounded to ``b / B``."""
        self._flush()
        v = self._counts.view()
        v.flags.writeable = False
        return v

    @property
    def approximated_steps(self) -> AnyArray:
        """Per example, the number of steps recorded with an imputed last-seen norm below the clip
        (``missing_norms="last-seen"``; all zero under the default worst-case policy). An example with
        a positive count has an *approximate* epsilon, not a certified one."""
        out = np.zeros(self._n, dtype=np.int32) if self._approx is None else self._approx.copy()
        out.flags.writeable = False
        return out

    def options(self) -> dict[str, Any]:
        """The constructor's arguments (``IndividualAccountant(**acc.options())`` is an empty copy).

        Returns
        -------
        dict
            Argument name to value, JSON-ready.
        """
        return {
            "num_examples": self._n,
            "noise_multiplier": self._sigma,
            "clip_norm": self._clip,
            "sampling_rate": self._q,
            "num_buckets": self._B,
            "mesh": self._mesh,
            "resolution": self._resolution,
            "missing_norms": self._missing,
            "sigma_grid": self._grid,
            "sigma_max": self._sigma_max,
        }

    # -------------------------------------------------------------- recording
    def _row(self) -> FloatArray:
        """The next free row of the pending-index buffer (folding the buffer into the counts if full)."""
        if self._buf is None:
            item = np.dtype(self._code_dtype).itemsize
            k = int(min(_BUFFER_STEPS[1], max(_BUFFER_STEPS[0], _BUFFER_BYTES // max(1, self._n * item))))
            self._buf = np.empty((k, self._n), dtype=self._code_dtype)
        if self._pending == self._buf.shape[0]:
            self._flush()
        return cast("FloatArray", self._buf[self._pending])

    def _flush(self) -> None:
        """Add the pending rows to the counts: one np.bincount per block of examples (the block's cells
        stay in cache), instead of a scattered increment of the (N, B + 1) array at every step."""
        k = self._pending
        if k == 0:
            return
        assert self._buf is not None  # allocated with the first pending row
        buf = self._buf[:k]
        cols = self._B + 1
        dt: type[np.integer[Any]]
        if cols * 256 <= 65536:
            width, dt = 256, np.uint16  # block codes fit in uint16; 256 examples' cells stay in cache
        else:
            width, dt = max(64, (1 << 18) // k), np.intp
        base = (np.arange(width) * cols).astype(dt)
        counts = self._counts
        for e0 in range(0, self._n, width):
            e1 = min(self._n, e0 + width)
            codes = buf[:, e0:e1] + base[None, : e1 - e0]
            hist = np.bincount(codes.ravel(), minlength=(e1 - e0) * cols)
            counts[e0:e1] += hist.reshape(e1 - e0, cols).astype(np.int32)
        self._pending = 0

    def _ledger(self) -> AnyArray:
        """The bucket counts with every pending step added."""
        self._flush()
        return self._counts

    def _codes(self, arr: FloatArray, out: AnyArray) -> float:
        """Bucket indices of ``arr`` written to ``out`` (``_bucket_index`` through reused buffers); returns
        the smallest position ``y - (b - 1)`` of the step's scaled ratios within their buckets (1 if none)."""
        n = arr.size
        if self._edges is not None:  # paper grid (Koskela et al. 2023, eq. (D.2)): smallest bucket whose ratio is >= r
            r = _clipped_ratio(arr, self._clip)
            np.copyto(out, np.minimum(np.searchsorted(self._edges[1:], r, side="left") + 1, self._B), casting="unsafe")
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

    def record_step(self, grad_norms: ArrayLike, indices: ArrayLike | None = None) -> None:
        """Record one step.

        Dense (``indices=None``): ``grad_norms[i]`` is example i's unclipped gradient norm at this
        step (0: the example does not contribute).

        Sparse: ``grad_norms[j]`` is the norm of example ``indices[j]`` (e.g. the examples in this
        step's Poisson batch). Under Poisson sampling every example's step is the subsampled
        mechanism at its *own* sensitivity, whether or not it was drawn (Koskela et al. 2023, App. D.2), so the
        examples not listed still need a norm; the constructor's ``missing_norms`` policy gives it:

        * ``"worst-case"`` (default): sensitivity ``C``; every answer stays a certified bound;
        * ``"last-seen"``: the bucket of the example's last recorded norm (worst case before the
          first). This is an *approximation* (norms change as the model trains): answers touching
          such steps are labelled ``kind="approximation"`` and ``approximated_steps`` counts them.

        To keep certified answers with tight per-example values, compute the norms of all examples
        and record densely. ``NaN`` (a norm that was not computed) and ``+inf`` count as the worst
        case (sensitivity ``C``); negative values, booleans and strings are rejected. Nothing is
        recorded if any argument is invalid.

        Parameters
        ----------
        grad_norms : array_like
            Unclipped per-example gradient norms, ``>= 0`` (NaN: not computed): shape ``(N,)``, or one
            per entry of ``indices``.
        indices : array_like of int, optional
            Distinct example indices in ``[0, N)`` (sparse recording).

        Raises
        ------
        ValueError
            A wrong shape, a negative norm, a non-numeric entry, or a bad or repeated index.
        PrecisionError
            More than ``2**31 - 1`` steps (the bucket counts are int32).
        """
        if indices is None:
            arr = check_norms(grad_norms, (self._n,))
            idx = None
        else:
            arr = _as_norm_array(grad_norms)
            if arr.ndim != 1:
                raise ValueError(f"grad_norms must be 1-D with indices, got shape {arr.shape}")
            idx = check_indices(indices, arr.size, self._n)
            arr = check_norms(arr, (idx.size,))
        if self._steps + 1 > _COUNT_MAX:
            raise PrecisionError(f"bucket counts would overflow int32: at most {_COUNT_MAX} steps per ledger")
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
                assert self._approx is not None  # kept with _last ("last-seen")
                self._approx += approx
                if self._sumsq is not None:
                    assert self._last_r is not None  # kept with _last when the sampling rate is 1
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

    def record_steps(self, grad_norms: ArrayLike) -> None:
        """Record several dense steps at once (``record_step`` for each row, in one pass).

        Parameters
        ----------
        grad_norms : array_like
            Shape ``(steps, num_examples)``: row ``t`` is step ``t``'s unclipped per-example norms.

        Raises
        ------
        ValueError
            As ``record_step``.
        PrecisionError
            More than ``2**31 - 1`` steps in total.
        """
        arr = _as_norm_array(grad_norms)
        if arr.ndim != 2:
            raise ValueError(f"grad_norms must be 2-D (steps, num_examples), got shape {np.shape(arr)}")
        arr = check_norms(arr, (arr.shape[0], self._n))
        if arr.shape[0] == 0:
            return
        if self._steps + arr.shape[0] > _COUNT_MAX:
            raise PrecisionError(f"bucket counts would overflow int32: at most {_COUNT_MAX} steps per ledger")
        for t in range(arr.shape[0]):
            row = self._row()
            self._note_frac(self._codes(arr[t], row))
            self._pending += 1
        if self._sumsq is not None:
            self._sumsq += np.sum(np.square(_clipped_ratio(arr, self._clip)), axis=0)
        if self._last is not None:  # a dense record is every example's last-seen norm
            assert self._buf is not None  # the rows just recorded
            self._last[:] = self._buf[self._pending - 1]
            if self._last_r is not None:
                self._last_r[:] = _clipped_ratio(arr[-1], self._clip)
        self._steps += arr.shape[0]
        self._cache.clear()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, IndividualAccountant):
            return NotImplemented
        same_sq = (self._sumsq is None and other._sumsq is None) or (
            self._sumsq is not None and other._sumsq is not None and np.array_equal(self._sumsq, other._sumsq)
        )
        return (
            self.options() == other.options()
            and self._steps == other._steps
            and np.array_equal(self._ledger(), other._ledger())
            and same_sq
            and self._frac_min == other._frac_min
            and np.array_equal(self.approximated_steps, other.approximated_steps)
        )

    def __repr__(self) -> str:
        return (
            f"IndividualAccountant(num_examples={self._n}, noise_multiplier={self._sigma}, "
            f"clip_norm={self._clip}, sampling_rate={self._q}; {self._steps} steps)"
        )

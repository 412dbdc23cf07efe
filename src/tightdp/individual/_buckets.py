"""The per-example ledger's buckets and input checks (Koskela et al. 2023, App. D.2): plain functions, no state.

A recorded gradient norm ``g`` becomes the sensitivity ratio ``min(g, C) / C``, scaled to
``y = min(g B / C, B)`` and rounded up to the bucket ``b = ceil(y)`` (each bucket's ratio widened by
the relative ``_MARGIN``, so that float rounding never crosses a bucket edge): the noise multiplier is
rounded down to the sigma-grid ``{sigma B / b}``, and the rounded mechanism dominates the real one
(data-processing inequality, Koskela et al. 2023, Thm D.2). ``IndividualAccountant.record_step`` applies
``_bucket_index`` through reused buffers.
"""

from __future__ import annotations

import math
import numbers
import os

import numpy as np

from .._types import AnyArray, ArrayLike, FloatArray
from .._validation import check_positive

_U = np.finfo(float).eps / 2
_MARGIN = 1e-9  # relative upward margin of every bucket's sensitivity ratio
_COUNT_MAX = int(np.iinfo(np.int32).max)
_CLIP_MIN = float(np.finfo(float).tiny)  # smallest normal float: a subnormal C has no relative precision
#: memory cap of the ledger (bucket counts, 4 bytes per example and bucket): 16 GiB, or a quarter
#: of the physical memory if that is smaller. Queries need transient copies of a similar size.
_LEDGER_CAP_BYTES = 16 << 30


def check_norms(grad_norms: ArrayLike, shape: tuple[int, ...]) -> FloatArray:
    """``grad_norms`` as a float array of ``shape``, every entry ``>= 0`` or NaN (a norm not computed).

    Raises
    ------
    ValueError
        A wrong shape, a negative norm, or anything that is not an array of real numbers.
    """
    arr = _as_norm_array(grad_norms)
    if arr.shape != shape:
        raise ValueError(f"grad_norms must have shape {shape}, got {arr.shape}")
    if arr.size:
        mn = arr.min()
        if not mn >= 0 and (arr < 0).any():  # NaN minimum: NaN marks a norm that was not computed
            raise ValueError(
                f"grad_norms must be >= 0 (NaN marks a norm that was not computed), got {arr[arr < 0].flat[0]!r}"
            )
    return arr


def check_indices(indices: ArrayLike | None, size: int, num_examples: int) -> AnyArray:
    """``indices`` as a 1-D ``intp`` array of ``size`` distinct example indices in ``[0, num_examples)``.

    Raises
    ------
    ValueError
        A non-integer or wrongly sized array, an index out of range, or a repeated index.
    """
    try:
        raw = np.asarray(indices)
    except (TypeError, ValueError):
        raise ValueError(f"indices must be an array of example indices, got {type(indices).__name__}") from None
    if raw.ndim != 1 or raw.dtype.kind not in "iu" or raw.dtype == np.bool_:
        raise ValueError(f"indices must be a 1-D integer array, got dtype {raw.dtype} and shape {raw.shape}")
    if raw.size != size:
        raise ValueError(f"indices must have one entry per norm ({size}), got {raw.size}")
    idx = raw.astype(np.intp)
    if idx.size and (idx.min() < 0 or idx.max() >= num_examples):
        raise ValueError(f"indices must lie in [0, {num_examples}), got {int(idx.min())}..{int(idx.max())}")
    if idx.size > 1 and np.unique(idx).size != idx.size:
        raise ValueError("indices must not repeat an example within one step")
    return idx


def _check_clip_norm(value: object) -> float:
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
        raise ValueError(
            f"num_examples={n} with num_buckets={buckets} needs a {need / 2**30:.3g} GiB ledger "
            f"(4 bytes per example and bucket), above the cap of {cap / 2**30:.3g} GiB "
            f"(16 GiB or a quarter of the physical memory); use fewer examples per accountant "
            f"or fewer buckets"
        )


def _as_norm_array(values: ArrayLike) -> FloatArray:
    """Gradient norms as a float array; booleans, strings, complex numbers and other objects are rejected."""
    try:
        raw = np.asarray(values)
    except (TypeError, ValueError):
        raise ValueError(f"grad_norms must be an array of numbers, got {type(values).__name__}") from None
    kind = raw.dtype.kind
    if kind == "O":
        flat = raw.ravel()
        if not all(
            isinstance(v, (numbers.Real, np.floating, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in flat
        ):
            raise ValueError("grad_norms must be an array of real numbers (no booleans, strings or objects)")
    elif kind not in "iuf":
        raise ValueError(
            f"grad_norms must be an array of real numbers, got dtype {raw.dtype} "
            f"(booleans, strings and complex numbers are not norms)"
        )
    try:
        return np.asarray(raw, dtype=float)
    except (TypeError, ValueError, OverflowError):
        raise ValueError("grad_norms must be an array of real numbers") from None


def _bucket_ratio(b: int, buckets: int) -> float:
    """The sensitivity ratio bucket ``b`` stands for (rounded up by the relative ``_MARGIN``)."""
    return (b / buckets) * (1.0 + _MARGIN)


def _clipped_ratio(norms: FloatArray, clip: float) -> FloatArray:
    """``min(g, C) / C`` in [0, 1] (NaN and +inf -> 1), correctly rounded: never overflows."""
    m = np.fmin(norms, clip)  # fmin: NaN -> C (worst case)
    return np.minimum(m / clip, 1.0)


def _scaled_ratio(
    norms: FloatArray, clip: float, buckets: int, scale: float | None = None, out: FloatArray | None = None
) -> FloatArray:
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


def _ceil_index(y: FloatArray, norms: FloatArray, out: FloatArray) -> FloatArray:
    """``out = ceil(y)`` (an integer array), clamped to at least 1 for every positive norm whose ``y``
    underflowed to 0 (checked cheaply: only where an index is 0)."""
    np.ceil(y, out=out, casting="unsafe")
    if out.size and not out.all():
        under = (out == 0) & ~(norms == 0)  # NaN is not 0 (and has y = B anyway)
        out[under] = 1
    return out


def _bucket_index(norms: FloatArray, clip: float, buckets: int) -> FloatArray:
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

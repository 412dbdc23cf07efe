"""One validation layer for every public entry point.

Each checker names the argument and the offending value in its ``ValueError``,
so that the CLI can print the message as its single line of output. Checks run
before any state is touched (compose-then-fail never half-applies).

Declared domains, besides each argument's own interval:

* a number is a real number: not a bool, not a string, not NaN;
* magnitudes are at most ``MAX_MAGNITUDE`` (1e12) and positive reals at least
  ``MIN_POSITIVE`` (1e-300): beyond them the privacy losses leave double
  precision, and refusing up front beats an ``OverflowError`` deep inside;
* counts (steps, compositions, sizes) are whole numbers up to ``MAX_COUNT`` (1e12);
* a target delta is at least ``MIN_DELTA`` (1e-300; subnormal deltas have no
  usable logarithm).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Collection
from typing import cast

import numpy as np
import numpy.typing as npt

#: ``tightdp._types.FloatArray`` spelt out: ``_types`` shares this module's layer (``tests/core/test_layout.py``)
FloatArray = npt.NDArray[np.float64]

MAX_MAGNITUDE = 1e12
MIN_POSITIVE = 1e-300
MAX_COUNT = 10**12
MIN_DELTA = 1e-300

__all__ = [
    "MAX_MAGNITUDE",
    "MAX_COUNT",
    "check_real_array",
    "check_real",
    "check_positive",
    "check_nonnegative",
    "check_probability",
    "check_delta",
    "check_epsilon",
    "check_count",
    "check_eps_error",
    "check_choice",
]


def _as_float(name: str, value: object) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    try:
        x = float(value)
    except OverflowError:
        raise ValueError(
            f"{name} must be at most {MAX_MAGNITUDE:g} in magnitude, got a number too large for a float"
        ) from None
    if math.isnan(x):
        raise ValueError(f"{name} must be a number, got NaN")
    return x


def check_real(
    name: str,
    value: object,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = True,
    high_open: bool = True,
    allow_inf: bool = False,
) -> float:
    """Return ``value`` as a float after checking it lies in the declared interval."""
    x = _as_float(name, value)
    if math.isinf(x) and not allow_inf:
        raise ValueError(f"{name} must be finite, got {x!r}")
    if high is None and math.isfinite(x) and abs(x) > MAX_MAGNITUDE:
        raise ValueError(f"{name} must be at most {MAX_MAGNITUDE:g} in magnitude, got {value!r}")
    if low is not None and (x < low or (low_open and x == low)):
        op = ">" if low_open else ">="
        raise ValueError(f"{name} must be {op} {low:g}, got {value!r}")
    if high is not None and (x > high or (high_open and x == high)):
        op = "<" if high_open else "<="
        raise ValueError(f"{name} must be {op} {high:g}, got {value!r}")
    return x


def check_positive(name: str, value: object, *, allow_inf: bool = False) -> float:
    """``value`` in [1e-300, 1e12] (``MIN_POSITIVE``, ``MAX_MAGNITUDE``): a scale, a noise level, a norm."""
    x = check_real(name, value, low=0.0, allow_inf=allow_inf)
    if x < MIN_POSITIVE:
        raise ValueError(
            f"{name} must be >= {MIN_POSITIVE:g} (a positive number too small to compute with), got {value!r}"
        )
    return x


def check_nonnegative(name: str, value: object, *, allow_inf: bool = False) -> float:
    """``value`` in [0, inf)."""
    return check_real(name, value, low=0.0, low_open=False, allow_inf=allow_inf)


def check_probability(name: str, value: object) -> float:
    """A sampling rate: ``value`` in [1e-300, 1] (``MIN_POSITIVE``)."""
    x = check_real(name, value, low=0.0, high=1.0, high_open=False)
    if x < MIN_POSITIVE:
        raise ValueError(
            f"{name} must be >= {MIN_POSITIVE:g} (a positive number too small to compute with), got {value!r}"
        )
    return x


def check_delta(name: str, value: object) -> float:
    """A target delta: ``value`` in [1e-300, 1) (``MIN_DELTA``)."""
    x = check_real(name, value, low=0.0, high=1.0)
    if x < MIN_DELTA:
        raise ValueError(f"{name} must be >= {MIN_DELTA:g} (smaller deltas leave double precision), got {value!r}")
    return x


def check_epsilon(name: str, value: object) -> float:
    """A target epsilon: ``value`` in [0, inf)."""
    return check_nonnegative(name, value)


def check_eps_error(name: str, value: object) -> float:
    """An accuracy target for epsilon: ``value`` in [1e-9, 10] (finer than 1e-9 is below what the
    grids and the float error terms can deliver; a request for it is refused, not silently widened)."""
    return check_real(name, value, low=1e-9, low_open=False, high=10.0, high_open=False)


def check_count(name: str, value: object, *, minimum: int = 1) -> int:
    """A whole number of steps / compositions, at least ``minimum``.

    Integral floats such as ``1e4`` are accepted; ``10.5``, NaN, booleans and
    strings are rejected.
    """
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if isinstance(value, (numbers.Integral, np.integer)):
        n = int(value)
    elif isinstance(value, (numbers.Real, np.floating)):
        x = float(value)
        if not math.isfinite(x) or not x.is_integer():
            raise ValueError(f"{name} must be an integer, got {value!r}")
        n = int(x)
    else:
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if n < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")
    if n > MAX_COUNT:
        raise ValueError(f"{name} must be <= {MAX_COUNT:.0e}, got {value!r}")
    return n


def check_choice(name: str, value: object, choices: Collection[str]) -> str:
    """``value`` one of ``choices`` (strings)."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(str, choices))}; got {value!r}")
    return cast(str, value)  # equal to one of the strings in ``choices``


def check_real_array(
    name: str, values: object, *, low: float | None = None, low_open: bool = False, allow_nan: bool = False
) -> FloatArray:
    """A 1-D float array (scalars become length-1 arrays) with optional lower limit."""
    if isinstance(values, (str, bytes, bool, np.bool_)):
        raise ValueError(f"{name} must be a number or an array of numbers, got {values!r}")
    try:
        raw = np.asarray(values)
        if raw.dtype.kind not in "iuf":  # bools, strings, objects: not numbers
            raise TypeError
        arr: FloatArray = np.asarray(raw, dtype=float)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name} must be a number or an array of numbers, got {values!r}") from None
    arr = np.atleast_1d(arr)  # float64, at least one dimension
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a scalar or a 1-D array, got shape {arr.shape}")
    if not allow_nan and np.isnan(arr).any():
        raise ValueError(f"{name} must not contain NaN")
    if low is not None:
        bad = (arr <= low) if low_open else (arr < low)
        if np.any(bad & ~np.isnan(arr)):
            op = ">" if low_open else ">="
            raise ValueError(f"{name} must be {op} {low:g}, got {arr[bad][0]!r}")
    big = np.isfinite(arr) & (np.abs(arr) > MAX_MAGNITUDE)
    if big.any():
        raise ValueError(f"{name} must be at most {MAX_MAGNITUDE:g} in magnitude, got {arr[big][0]!r}")
    return arr

"""One validation layer for every public entry point.

Each checker names the argument and the offending value in its ``ValueError``,
so that the CLI can print the message as its single line of output. Checks run
before any state is touched (compose-then-fail never half-applies).
"""

from __future__ import annotations

import math
import numbers

import numpy as np

__all__ = [
    "check_real",
    "check_positive",
    "check_nonnegative",
    "check_probability",
    "check_delta",
    "check_epsilon",
    "check_count",
    "check_choice",
]


def _as_float(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    x = float(value)
    if math.isnan(x):
        raise ValueError(f"{name} must be a number, got NaN")
    return x


def check_real(name: str, value, *, low: float | None = None, high: float | None = None,
               low_open: bool = True, high_open: bool = True, allow_inf: bool = False) -> float:
    """Return ``value`` as a float after checking it lies in the declared interval."""
    x = _as_float(name, value)
    if math.isinf(x) and not allow_inf:
        raise ValueError(f"{name} must be finite, got {x!r}")
    if low is not None and (x < low or (low_open and x == low)):
        op = ">" if low_open else ">="
        raise ValueError(f"{name} must be {op} {low:g}, got {value!r}")
    if high is not None and (x > high or (high_open and x == high)):
        op = "<" if high_open else "<="
        raise ValueError(f"{name} must be {op} {high:g}, got {value!r}")
    return x


def check_positive(name: str, value, *, allow_inf: bool = False) -> float:
    """``value`` in (0, inf)."""
    return check_real(name, value, low=0.0, allow_inf=allow_inf)


def check_nonnegative(name: str, value, *, allow_inf: bool = False) -> float:
    """``value`` in [0, inf)."""
    return check_real(name, value, low=0.0, low_open=False, allow_inf=allow_inf)


def check_probability(name: str, value) -> float:
    """A sampling rate: ``value`` in (0, 1]."""
    return check_real(name, value, low=0.0, high=1.0, high_open=False)


def check_delta(name: str, value) -> float:
    """A target delta: ``value`` in (0, 1)."""
    return check_real(name, value, low=0.0, high=1.0)


def check_epsilon(name: str, value) -> float:
    """A target epsilon: ``value`` in [0, inf)."""
    return check_nonnegative(name, value)


def check_count(name: str, value, *, minimum: int = 1) -> int:
    """A whole number of steps / compositions, at least ``minimum``.

    Integral floats such as ``1e4`` are accepted; ``10.5``, NaN, booleans and
    strings are rejected.
    """
    if isinstance(value, bool):
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
    return n


def check_choice(name: str, value, choices) -> str:
    """``value`` one of ``choices`` (strings)."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(str, choices))}; got {value!r}")
    return value


def check_real_array(name: str, values, *, low: float | None = None, low_open: bool = False,
                     allow_nan: bool = False) -> np.ndarray:
    """A 1-D float array (scalars become length-1 arrays) with optional lower limit."""
    try:
        arr = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number or an array of numbers, got {values!r}") from None
    arr = np.atleast_1d(arr)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a scalar or a 1-D array, got shape {arr.shape}")
    if not allow_nan and np.isnan(arr).any():
        raise ValueError(f"{name} must not contain NaN")
    if low is not None:
        bad = (arr <= low) if low_open else (arr < low)
        if np.any(bad & ~np.isnan(arr)):
            op = ">" if low_open else ">="
            raise ValueError(f"{name} must be {op} {low:g}, got {arr[bad][0]!r}")
    return arr

"""The accuracy every certified answer is computed to, unless the caller asks for another.

An answer is an interval ``[lower, upper]``; its accuracy is the width asked for:

* **relative** (the default): ``upper - lower <= 2 max(rel_error * epsilon, eps_error)`` with
  ``rel_error = DEFAULT_REL_ERROR = 1e-3`` and the floor ``eps_error = REL_ERROR_FLOOR = 5e-5``:
  epsilon stated to about three significant digits at every scale (a width of at most 0.2 % of
  epsilon, or 1e-4 below epsilon = 0.05);
* **absolute**: ``eps_error=x`` alone, ``upper - lower <= 2 x`` (the PRV accountant's coupling
  half-width, Gopi et al. 2021, Thm 5.5, and what every accountant but the default one understands);
* both: the larger of the two widths.

Only the default accountant (``connect-dots``) refines towards a relative target; the others
take ``eps_error`` and keep their own absolute default when none is given.
"""

from __future__ import annotations

import math

from ._validation import check_eps_error, check_real

__all__ = ["DEFAULT_REL_ERROR", "REL_ERROR_FLOOR", "check_accuracy", "describe_accuracy", "absolute_error_at"]

#: the relative accuracy of every answer unless told otherwise
DEFAULT_REL_ERROR = 1e-3
#: the absolute half-width below which a relative target does not go (epsilon below 0.05)
REL_ERROR_FLOOR = 5e-5


def check_rel_error(name: str, value: object) -> float:
    """A relative accuracy: a number in [1e-6, 0.5]."""
    return check_real(name, value, low=1e-6, low_open=False, high=0.5, high_open=False)


def check_accuracy(eps_error: object = None, rel_error: object = None) -> tuple[float | None, float | None]:
    """Validated ``(eps_error, rel_error)``; ``None`` stays ``None`` (the default accuracy)."""
    e = None if eps_error is None else check_eps_error("eps_error", eps_error)
    r = None if rel_error is None else check_rel_error("rel_error", rel_error)
    return e, r


def resolve_accuracy(eps_error: object = None, rel_error: object = None) -> tuple[float, float | None]:
    """The ``(eps_error, rel_error)`` an answer is refined to: both ``None`` is the default relative
    accuracy; ``eps_error`` alone is absolute; ``rel_error`` alone has the floor ``REL_ERROR_FLOOR``."""
    e, r = check_accuracy(eps_error, rel_error)
    if e is None and r is None:
        return REL_ERROR_FLOOR, DEFAULT_REL_ERROR
    if e is None:
        return REL_ERROR_FLOOR, r
    return e, r


def absolute_error_at(epsilon: float, eps_error: object = None, rel_error: object = None) -> float:
    """The absolute half-width the accuracy ``(eps_error, rel_error)`` asks for at an answer near
    ``epsilon`` (a calibration target, say): ``max(eps_error, rel_error * epsilon)``."""
    e, r = resolve_accuracy(eps_error, rel_error)
    if r is None or not math.isfinite(epsilon):
        return e
    return max(e, r * max(epsilon, 0.0))


def describe_accuracy(eps_error: object = None, rel_error: object = None) -> str:
    """One phrase for reports and help texts: ``relative 0.001 (at least 5e-05 absolute)``."""
    e, r = resolve_accuracy(eps_error, rel_error)
    if r is None:
        return f"absolute eps_error {e:g} (width <= {2 * e:g})"
    return f"relative {r:g} (width <= 2 max({r:g} epsilon, {e:g}))"

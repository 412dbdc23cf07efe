"""Exceptions that tightdp raises besides ``ValueError`` for bad input.

Every error of tightdp's own is a ``TightDPError``; each also derives from the built-in exception a caller
would expect (``ValueError``, ``TypeError``, ``ArithmeticError``), so ``except ValueError`` keeps working.
"""

__all__ = [
    "TightDPError",
    "CalibrationError",
    "UnsupportedMechanismError",
    "PrecisionError",
    "GridTooLargeError",
    "LossRangeError",
]


class TightDPError(Exception):
    """Base class of tightdp's own errors."""


class CalibrationError(TightDPError, ValueError):
    """A calibration target cannot be met within the searched range (the message says what was tried)."""


class UnsupportedMechanismError(TightDPError, TypeError):
    """An accountant was asked to compose a mechanism it cannot analyse."""


class PrecisionError(TightDPError, ArithmeticError):
    """The numerics cannot certify an answer (e.g. float error would dominate).

    Raised instead of returning a number that might be wrong; the message says
    why and what to change.
    """


class GridTooLargeError(PrecisionError):
    """The grid an answer needs exceeds the memory cap (ε far too large for the error budget).

    A finer accountant cannot help (it would need an even larger grid), so
    accountants with a fallback re-raise it instead of retrying.
    """


class LossRangeError(PrecisionError):
    """A single step's privacy loss leaves the range double precision can exponentiate (|loss| > 700).

    Such a step has an epsilon in the hundreds on its own; the message says
    which step and, where one exists, a certified bound from a closed form.
    """

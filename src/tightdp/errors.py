"""Exceptions that tightdp raises besides ``ValueError`` for bad input."""


class TightDPError(Exception):
    """Base class of tightdp's own errors."""


class UnsupportedMechanismError(TightDPError, TypeError):
    """An accountant was asked to compose a mechanism it cannot analyse."""


class PrecisionError(TightDPError, ArithmeticError):
    """The numerics cannot certify an answer (e.g. float error would dominate).

    Raised instead of returning a number that might be wrong; the message says
    why and what to change.
    """

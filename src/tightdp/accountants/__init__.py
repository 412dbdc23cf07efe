"""Accountants behind one interface (``compose`` / ``epsilon`` / ``delta``)."""

from .base import ACCOUNTANTS, Accountant, accountant_from_dict

__all__ = ["Accountant", "ACCOUNTANTS", "accountant_from_dict"]

"""Accountants behind one interface (``compose`` / ``epsilon`` / ``delta``)."""

from .base import ACCOUNTANTS, Accountant, accountant_from_dict
from .rdp import RDPAccountant
from .gdp import GDPAccountant

__all__ = ["Accountant", "ACCOUNTANTS", "accountant_from_dict"]
__all__ += ["RDPAccountant", "GDPAccountant"]

"""Accountants behind one interface (``compose`` / ``epsilon`` / ``delta``).

``create(name, eps_error=...)`` builds any registered accountant by name (the
CLI's ``--accountant``), passing only the options that accountant takes.
"""

import inspect
from typing import Any

from .base import ACCOUNTANTS, Accountant, accountant_from_dict
from .connect_dots import ConnectDotsAccountant
from .edgeworth import EdgeworthAccountant
from .fourier import FourierAccountant
from .gdp import GDPAccountant
from .prv import PRVAccountant
from .rdp import RDPAccountant

#: the accountant every convenience function, the CLI and the integrations use unless told otherwise:
#: dominance-based certified bounds, with the PRV accountant behind it for what it cannot discretise
DEFAULT_ACCOUNTANT = "connect-dots"

__all__ = [
    "Accountant",
    "ACCOUNTANTS",
    "DEFAULT_ACCOUNTANT",
    "accountant_from_dict",
    "create",
    "PRVAccountant",
    "FourierAccountant",
    "RDPAccountant",
    "GDPAccountant",
    "ConnectDotsAccountant",
    "EdgeworthAccountant",
]


def create(name: str, **options: Any) -> Accountant:
    """A fresh accountant called ``name``; options it does not take (or that are None) are ignored.

    Parameters
    ----------
    name : str
        A registered accountant name (``ACCOUNTANTS``), e.g. ``"connect-dots"``, ``"prv"``, ``"rdp"``.
    **options
        Constructor keyword arguments; those the accountant does not take, or given as None, are dropped.

    Returns
    -------
    Accountant
        The new accountant, with an empty ledger.

    Raises
    ------
    ValueError
        An unknown ``name``, or an option value out of its domain.
    """
    cls = ACCOUNTANTS.get(name) if isinstance(name, str) else None
    if cls is None:
        raise ValueError(f"accountant must be one of {', '.join(sorted(ACCOUNTANTS))}; got {name!r}")
    params = inspect.signature(cls.__init__).parameters
    return cls(**{k: v for k, v in options.items() if k in params and v is not None})

"""The d-dimensional discrete Gaussian: a proven dominating ledger of one-dimensional discrete Gaussians and
attained worst directions (``DiscreteGaussianVector``; the dominance lemma is ``mechanisms.discrete``'s)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .._validation import check_count, check_positive
from .base import Mechanism
from .discrete import DiscreteGaussian

__all__ = ["DiscreteGaussianVector"]


@dataclass(frozen=True, kw_only=True)
class DiscreteGaussianVector:
    """The d-dimensional discrete Gaussian ``N_Z(0, sigma^2)^d`` on an integer vector query whose neighbours
    differ by an integer shift ``v`` with ``|v_i| <= linf_sensitivity``, at most ``max_coordinates`` non-zero
    coordinates and, if given, ``||v||_2 <= l2_sensitivity`` (Canonne, Kamath, Steinke 2020, Sec. 3.1's
    setting; a histogram or count vector to which a record adds at most ``linf_sensitivity`` in at most
    ``max_coordinates`` cells).

    Dominating pair (proof). The noise is a product, so the pair of a shift ``v`` is the product over the
    coordinates of the one-dimensional pairs ``(N_Z(0), N_Z(v_i))``. By the module docstring's (i) each is
    dominated (every ``alpha``) by the pair of the shift ``m = min(linf_sensitivity, floor(l2_sensitivity))``
    (a non-zero integer coordinate is at least 1 in size, so ``|v_i| <= ||v||_2``), and a zero coordinate is
    the identity pair, dominated by any. Dominance is preserved by products (Blackwell: a post-processing
    of each factor is a post-processing of the product), and the number of non-zero coordinates is at most
    ``c = min(max_coordinates, floor(l2_sensitivity^2), dimension)`` (each contributes at least 1 to
    ``||v||_2^2``). So every neighbour's pair is dominated by ``c`` compositions of the one-dimensional pair
    of shift ``m``: ``upper_ledger()``, which any accountant composes (it is *not* the continuous Gaussian's).

    Attained pairs (lower end, ``attained_ledgers()``): the explicit worst directions ``v = m e_1`` (one
    coordinate moved by ``m``), ``v = (1, ..., 1, 0, ...)`` on ``min(c', d)`` coordinates with ``c'`` the
    largest count with ``c' <= max_coordinates`` and ``c' <= l2^2``, and ``v = m`` on ``floor(l2^2 / m^2)``
    coordinates (capped as before): each is an admissible neighbour, so its certified lower bound bounds the
    mechanism's epsilon from below. Where ``l2_sensitivity`` does not bind (or ``m = 1``), the last one is
    the dominating ledger itself and the interval is exact.

    Parameters
    ----------
    sigma : float
        Scale of each coordinate's discrete Gaussian, in ``[1e-3, 1e5]``.
    dimension : int
        Number of coordinates ``d``, a positive integer.
    linf_sensitivity : int, default 1
        Largest shift of one coordinate, a positive integer.
    max_coordinates : int, default 1
        Most coordinates a record moves, a positive integer.
    l2_sensitivity : float or None, default None
        Cap on ``||v||_2``, at least 1; ``None``: no cap.

    Raises
    ------
    ValueError
        If ``sigma`` lies outside ``[1e-3, 1e5]``, a count is not a positive integer, or ``l2_sensitivity`` is
        below 1.

    References
    ----------
    Canonne, Kamath, Steinke 2020, "The discrete Gaussian for differential privacy", Sec. 3.1.
    """

    sigma: float
    dimension: int
    linf_sensitivity: int = 1
    max_coordinates: int = 1
    l2_sensitivity: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "sigma", DiscreteGaussian(sigma=self.sigma).sigma)
        object.__setattr__(self, "dimension", check_count("dimension", self.dimension))
        object.__setattr__(self, "linf_sensitivity", check_count("linf_sensitivity", self.linf_sensitivity))
        object.__setattr__(self, "max_coordinates", check_count("max_coordinates", self.max_coordinates))
        if self.l2_sensitivity is not None:
            l2 = check_positive("l2_sensitivity", self.l2_sensitivity)
            if l2 < 1.0:
                raise ValueError(f"l2_sensitivity must be >= 1 (a non-zero integer shift has norm >= 1), got {l2!r}")
            object.__setattr__(self, "l2_sensitivity", l2)

    def _limits(self) -> tuple[int, int, float]:
        """``(m, c, l2^2)``: the largest coordinate shift, the most non-zero coordinates, the squared L2 cap."""
        m, c = self.linf_sensitivity, min(self.max_coordinates, self.dimension)
        l2sq = math.inf
        if self.l2_sensitivity is not None:
            l2sq = self.l2_sensitivity**2 * (1.0 + 1e-12)  # (an integer square given as a float)
            m = min(m, int(math.floor(math.sqrt(l2sq))))
            c = min(c, int(math.floor(l2sq)))
        return m, c, l2sq

    def upper_ledger(self) -> list[tuple[Mechanism, int]]:
        """The dominating pair: ``c`` compositions of the one-dimensional discrete Gaussian with shift ``m``.

        Returns
        -------
        list of (Mechanism, int)
            One ``(DiscreteGaussian, count)`` entry, to compose with any accountant.
        """
        m, c, _ = self._limits()
        return [(DiscreteGaussian(sigma=self.sigma, sensitivity=m), c)]

    def attained_ledgers(self) -> list[list[tuple[Mechanism, int]]]:
        """The explicit directions' pairs (class docstring), each as a ledger of one-dimensional pairs.

        Returns
        -------
        list of list of (Mechanism, int)
            Two or three ledgers; each one's certified lower bound bounds the mechanism's epsilon from below.
        """
        m, c, l2sq = self._limits()
        out: list[list[tuple[Mechanism, int]]] = [
            [(DiscreteGaussian(sigma=self.sigma, sensitivity=m), 1)],
            [(DiscreteGaussian(sigma=self.sigma, sensitivity=1), c)],
        ]
        full = min(c, int(math.floor(l2sq / (m * m))) if math.isfinite(l2sq) else c)
        if full >= 1:
            out.append([(DiscreteGaussian(sigma=self.sigma, sensitivity=m), full)])
        return out

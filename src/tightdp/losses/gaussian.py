"""The Gaussian mechanism's loss, ``Y ~ N(mu^2/2, mu^2)`` with ``mu = sensitivity / sigma`` (the mu-GDP curve,
Dong et al. 2022; Gopi et al. 2021, eq. (10))."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._types import ArrayLike, FloatArray
from ._cells import _SQRT2PI, _U, _ndtr, gaussian_mixture_cell_masses
from .base import PrivacyLoss

__all__ = ["GaussianLoss"]


@dataclass(frozen=True)
class GaussianLoss(PrivacyLoss):
    """The privacy loss of the Gaussian mechanism, ``Y ~ N(mu^2/2, mu^2)`` (the mu-GDP curve).

    Parameters
    ----------
    mu : float
        ``sensitivity / sigma``, positive (the caller validates it; ``Gaussian`` does).

    Raises
    ------
    TypeError
        If ``mu`` is missing.

    References
    ----------
    Dong, Roth, Su 2022, "Gaussian differential privacy", Def. 2.6; Gopi et al. 2021, eq. (10).
    """

    mu: float

    @property
    def mean(self) -> float:
        """The loss's mean ``mu^2 / 2``."""
        return 0.5 * self.mu * self.mu

    def cdf(self, s: ArrayLike) -> FloatArray:
        return _ndtr((np.asarray(s, float) - self.mean) / self.mu)

    def sf(self, s: ArrayLike) -> FloatArray:
        return _ndtr((self.mean - np.asarray(s, float)) / self.mu)

    def cell_masses(self, edges: ArrayLike) -> tuple[float, float, FloatArray, tuple[float, float], float]:
        e = np.asarray(edges, float)
        cdf, sf = self.cdf(e), self.sf(e)
        masses, errs = gaussian_mixture_cell_masses(e, (self.mean,), (1.0,), self.mu, cdf, sf)
        return float(cdf[0]), float(sf[-1]), masses, errs, 0.0

    def total_variation(self) -> float | None:
        """``2 Phi(mu / 2) - 1 = erf(mu / (2 sqrt 2))``, within a few ulp; raised by ``1e-12`` relative.

        Returns
        -------
        float or None
            The bound.
        """
        return min(1.0, math.erf(self.mu / (2.0 * math.sqrt(2.0))) * (1.0 + 1e-12))

    def event_masses(self, t: ArrayLike) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray] | None:
        """``E = {L > t}``: ``L ~ N(mu^2/2, mu^2)`` under P and ``N(-mu^2/2, mu^2)`` under Q (``Phi`` to a few ulp,
        moved ``64u`` relative to the safe side).

        Parameters
        ----------
        t : array_like of float
            The loss thresholds, one-dimensional.

        Returns
        -------
        tuple of FloatArray or None
            ``(p, q, p_out, q_out)``, each the shape of ``t``.

        Raises
        ------
        ValueError
            Not raised: every real ``t`` is answered (a NaN mass reads as no bound downstream).
        """
        t = np.asarray(t, float)
        zp, zq = (self.mean - t) / self.mu, (-self.mean - t) / self.mu
        lo, hi = 1.0 - 64.0 * _U, 1.0 + 64.0 * _U
        return _ndtr(zp) * lo, _ndtr(zq) * hi, _ndtr(-zp) * lo, _ndtr(-zq) * hi

    def partial_mean(self, a: float, b: float) -> tuple[float, float]:
        za, zb = (a - self.mean) / self.mu, (b - self.mean) / self.mu
        mass = float(_ndtr(zb) - _ndtr(za)) if za < 0 else float(_ndtr(-za) - _ndtr(-zb))
        val = self.mean * mass + self.mu * (_density(za) - _density(zb))
        return val, 1e-15 * (abs(self.mean) + self.mu + abs(val))


def _density(z: float) -> float:
    return 0.0 if math.isinf(z) else math.exp(-0.5 * z * z) / _SQRT2PI

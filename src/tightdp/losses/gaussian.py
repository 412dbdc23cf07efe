"""The Gaussian mechanism's loss, ``Y ~ N(mu^2/2, mu^2)`` with ``mu = sensitivity / sigma`` (the mu-GDP curve,
Dong et al. 2022; Gopi et al. 2021, eq. (10))."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ._cells import _SQRT2PI, _ndtr, gaussian_mixture_cell_masses
from .base import PrivacyLoss

__all__ = ["GaussianLoss"]


@dataclass(frozen=True)
class GaussianLoss(PrivacyLoss):
    """PRV of the Gaussian mechanism with ``mu = sensitivity / sigma``: ``N(mu^2/2, mu^2)``."""

    mu: float

    @property
    def mean(self) -> float:
        return 0.5 * self.mu * self.mu

    def cdf(self, s):
        return _ndtr((np.asarray(s, float) - self.mean) / self.mu)

    def sf(self, s):
        return _ndtr((self.mean - np.asarray(s, float)) / self.mu)

    def cell_masses(self, edges):
        edges = np.asarray(edges, float)
        cdf, sf = self.cdf(edges), self.sf(edges)
        masses, errs = gaussian_mixture_cell_masses(edges, (self.mean,), (1.0,), self.mu, cdf, sf)
        return float(cdf[0]), float(sf[-1]), masses, errs, 0.0

    def partial_mean(self, a, b):
        za, zb = (a - self.mean) / self.mu, (b - self.mean) / self.mu
        mass = float(_ndtr(zb) - _ndtr(za)) if za < 0 else float(_ndtr(-za) - _ndtr(-zb))
        dens = lambda z: 0.0 if math.isinf(z) else math.exp(-0.5 * z * z) / _SQRT2PI
        val = self.mean * mass + self.mu * (dens(za) - dens(zb))
        return val, 1e-15 * (abs(self.mean) + self.mu + abs(val))

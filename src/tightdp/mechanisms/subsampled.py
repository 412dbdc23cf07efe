"""Subsampled mechanisms (001 Sec. 6): Poisson sampling, sampling without and with replacement."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special, stats

from .._validation import check_choice, check_count, check_probability
from ..errors import UnsupportedMechanismError
from .base import LossPair, Mechanism
from .basic import Gaussian, Laplace
from .losses import (GaussianMixtureLoss, PoissonLaplaceLoss, poisson_gaussian_loss,
                     without_replacement_gaussian_loss)

__all__ = ["PoissonSampled", "SampledWithoutReplacement", "SampledWithReplacement", "RELATIONS"]

RELATIONS = ("add-remove", "remove", "add", "substitute")


def _require_gaussian(mechanism, where: str, *, laplace: bool = False) -> Gaussian:
    if not isinstance(mechanism, Mechanism):
        raise ValueError(f"mechanism must be a tightdp Mechanism, got {mechanism!r}")
    allowed = (Gaussian, Laplace) if laplace else (Gaussian,)
    if not isinstance(mechanism, allowed):
        names = " and ".join(c.__name__ for c in allowed)
        raise UnsupportedMechanismError(
            f"{where} of {type(mechanism).__name__} is not supported; only {names} can be subsampled here")
    return mechanism


@dataclass(frozen=True, kw_only=True)
class PoissonSampled(Mechanism):
    """Poisson sampling: each record joins the batch independently with probability ``sampling_rate``.

    ``relation``: ``"add-remove"`` (default, the worse of both directions),
    ``"remove"`` (001 Sec. 6.1: P = q N(1, s^2) + (1-q) N(0, s^2), Q = N(0, s^2)),
    ``"add"`` (the reverse pair) or ``"substitute"`` (same pair as sampling
    without replacement at rate q, 001 Sec. 6.2 remark).
    """

    type_name = "poisson_sampled"
    mechanism: Mechanism
    sampling_rate: float
    relation: str = "add-remove"

    def __post_init__(self):
        _require_gaussian(self.mechanism, "Poisson subsampling", laplace=True)
        object.__setattr__(self, "sampling_rate", check_probability("sampling_rate", self.sampling_rate))
        check_choice("relation", self.relation, RELATIONS)
        if isinstance(self.mechanism, Laplace) and self.relation == "substitute":
            raise UnsupportedMechanismError("the substitute relation is not supported for subsampled Laplace")

    def privacy_losses(self) -> LossPair:
        if isinstance(self.mechanism, Laplace):
            lap: Laplace = self.mechanism
            b, q = lap.scale / lap.sensitivity, self.sampling_rate
            if q >= 1.0:
                return lap.privacy_losses()
            remove = PoissonLaplaceLoss(q, b, "remove")
            add = PoissonLaplaceLoss(q, b, "add")
            pick = {"remove": (remove, remove), "add": (add, add)}.get(self.relation, (remove, add))
            return LossPair(*pick)
        g: Gaussian = self.mechanism  # type: ignore[assignment]
        sigma = g.noise_multiplier / g.sensitivity
        q = self.sampling_rate
        if self.relation == "substitute":
            loss = without_replacement_gaussian_loss(sigma=sigma, q=q)
            return LossPair(loss, loss)
        remove = poisson_gaussian_loss(sigma=sigma, q=q, direction="remove")
        add = poisson_gaussian_loss(sigma=sigma, q=q, direction="add")
        if self.relation == "remove":
            return LossPair(remove, remove)
        if self.relation == "add":
            return LossPair(add, add)
        return LossPair(remove, add)


@dataclass(frozen=True, kw_only=True)
class SampledWithoutReplacement(Mechanism):
    """A batch of ``sample_size`` distinct records out of ``dataset_size``; substitute relation (001 Sec. 6.2).

    The differing record is in the batch with probability ``q = sample_size / dataset_size``.
    """

    type_name = "sampled_without_replacement"
    mechanism: Mechanism
    sample_size: int
    dataset_size: int

    def __post_init__(self):
        _require_gaussian(self.mechanism, "Sampling without replacement")
        object.__setattr__(self, "sample_size", check_count("sample_size", self.sample_size))
        object.__setattr__(self, "dataset_size", check_count("dataset_size", self.dataset_size))
        if self.sample_size > self.dataset_size:
            raise ValueError(f"sample_size ({self.sample_size}) must be <= dataset_size ({self.dataset_size})")

    @property
    def sampling_rate(self) -> float:
        return self.sample_size / self.dataset_size

    def privacy_losses(self) -> LossPair:
        g: Gaussian = self.mechanism  # type: ignore[assignment]
        loss = without_replacement_gaussian_loss(sigma=g.noise_multiplier / g.sensitivity, q=self.sampling_rate)
        return LossPair(loss, loss)


@dataclass(frozen=True, kw_only=True)
class SampledWithReplacement(Mechanism):
    """``sample_size`` draws with replacement from ``dataset_size`` records; substitute relation (001 Sec. 6.3).

    The differing record appears ``l ~ Binomial(sample_size, 1/dataset_size)``
    times; P and Q are the binomial mixtures of ``N(+-l, s^2)``. Components whose
    weight is below 1e-300 are not represented: their total mass (an exact
    binomial tail) is put at infinite privacy loss, on the safe side.
    """

    type_name = "sampled_with_replacement"
    mechanism: Mechanism
    sample_size: int
    dataset_size: int

    def __post_init__(self):
        _require_gaussian(self.mechanism, "Sampling with replacement")
        object.__setattr__(self, "sample_size", check_count("sample_size", self.sample_size))
        object.__setattr__(self, "dataset_size", check_count("dataset_size", self.dataset_size))

    @property
    def sampling_rate(self) -> float:
        return -math.expm1(self.sample_size * math.log1p(-1.0 / self.dataset_size))

    def privacy_losses(self) -> LossPair:
        g: Gaussian = self.mechanism  # type: ignore[assignment]
        sigma = g.noise_multiplier / g.sensitivity
        m, n = self.sample_size, self.dataset_size
        ells = np.arange(0, m + 1)
        logw = stats.binom.logpmf(ells, m, 1.0 / n)
        keep = logw > math.log(1e-300)
        ells, w = ells[keep], np.exp(logw[keep])
        tail = float(stats.binom.sf(ells.max(), m, 1.0 / n)) if ells.max() < m else 0.0
        loss = _WithReplacementLoss(tuple(map(float, ells)), tuple(map(float, w)),
                                    tuple(map(float, -ells)), tuple(map(float, w)), sigma, tail)
        return LossPair(loss, loss)


@dataclass(frozen=True)
class _WithReplacementLoss(GaussianMixtureLoss):
    """Binomial mixtures of 001 Sec. 6.3 (numerical inverse)."""

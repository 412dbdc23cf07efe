"""Truncated Poisson sampling: Poisson batches capped at ``max_batch_size`` records.

Each of ``dataset_size`` records joins the batch independently with probability
``q``; a batch larger than ``b = max_batch_size`` is cut down to a uniformly random
subset of ``b`` records, then the Gaussian mechanism (noise ``sigma``, unit
sensitivity) runs on it. Add/remove neighbouring. This is dp-accounting 0.6.0's
``TruncatedSubsampledGaussianDpEvent`` (Ganesh 2025, "Tight privacy accounting
for truncated Poisson sampling", arXiv 2508.15089).

**Upper bound** (dp-accounting's construction, ``from_truncated_subsampled_gaussian_mechanism``):
with ``p_T = P(Bin(n - 1, q) >= b)`` (the batch is truncated given that the target
record was sampled) and ``q_T = P(Bin(n, q) > b) b / (p_T n)`` (the target's
sampling probability given truncation), one step is dominated by the pair that,
with a public coin, is with probability ``1 - p_T`` the Poisson-subsampled
Gaussian ``(q, sigma)`` and with probability ``p_T`` the replace-one subsampled
Gaussian ``(q_T, sigma / 2)`` (sensitivity doubled: the target may displace
another record). Its privacy loss is the ``(1 - p_T, p_T)`` mixture of the two
privacy-loss distributions (``FlaggedMixtureLoss``); its dominating and
dominated discretisations are the same mixtures of the components'
(``tightdp.pld.dominance``), so the engine certifies *this pair's* curve from
both sides, and its upper end bounds the truncated mechanism.

**Lower bound** (an explicit dataset pair): every other record has gradient 0.
Then the output is ``N(1{target kept}, sigma^2)`` against ``N(0, sigma^2)`` with
``P(target kept) = q_eff = q E[min(1, b / (1 + Bin(n - 1, q)))]``: exactly the
Poisson-subsampled Gaussian at rate ``q_eff``, composed over the steps. It is
the truth for that dataset pair, so its certified lower end bounds the
mechanism's epsilon from below. ``q_eff <= q``; the gap between the two ends
is the price of the upper bound's analysis (it vanishes as ``b`` grows).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._validation import check_count, check_probability
from ..errors import UnsupportedMechanismError
from .base import LossPair, Mechanism, PrivacyLoss, SelfDiscretisingLoss
from .basic import Gaussian
from .losses import poisson_gaussian_loss, without_replacement_gaussian_loss

__all__ = ["TruncatedPoissonSampled", "FlaggedMixtureLoss", "truncated_poisson_epsilon", "kept_probability"]


def _mix(parts, weights):
    """The weighted mixture of discretised losses on one mesh (a public-coin mixture of pairs)."""
    from ..pld import DiscretisedLoss
    h = parts[0].h
    for d in parts:
        if d.coupling_range != 0.0 or d.mean_error != 0.0 or d.truncated_mass != 0.0:
            raise ValueError("only dominance discretisations can be mixed")
    lo = min(d.start for d in parts)
    hi = max(d.start + d.pmf.size for d in parts)
    pmf = np.zeros(hi - lo)
    for d, w in zip(parts, weights):
        pmf[d.start - lo:d.start - lo + d.pmf.size] += w * d.pmf
    shifts = [d.shift for d in parts]
    # one shift for all atoms: the safe side of the components' (raise for the upper, lower for the lower)
    shift = max(shifts) if all(s >= 0 for s in shifts) else min(shifts)
    return DiscretisedLoss(h=h, start=lo, pmf=pmf, shift=shift,
                           infinity_mass=min(1.0, sum(w * d.infinity_mass for d, w in zip(parts, weights))),
                           truncated_mass=0.0, mean_error=0.0, coupling_range=0.0,
                           tv_error=sum(w * d.tv_error for d, w in zip(parts, weights)) + 4e-16 * pmf.size,
                           rel_error=max(d.rel_error for d in parts) + 4e-16)


@dataclass(frozen=True)
class FlaggedMixtureLoss(SelfDiscretisingLoss):
    """Privacy loss of a public-coin mixture: with probability ``weights[i]`` the pair of ``losses[i]``.

    Its loss distribution is the mixture of the components'; so are its dominating
    and dominated discretisations (``dominating_pld``/``dominated_pld``).
    """

    how_to = "the dominance accountant, connect-dots (dpsgd_epsilon(sampling='truncated-poisson'))"

    weights: tuple[float, ...]
    losses: tuple[PrivacyLoss, ...]

    def dominating_pld(self, h: float, tail: float):
        from ..pld.dominance import dominating
        return _mix([dominating(loss, h, tail) for loss in self.losses], self.weights)

    def dominated_pld(self, h: float, tail: float):
        from ..pld.dominance import dominated
        return _mix([dominated(loss, h, tail) for loss in self.losses], self.weights)

    def spread(self) -> float:
        from ..pld.dominance import loss_spread
        return math.sqrt(sum(w * loss_spread(loss) ** 2 for w, loss in zip(self.weights, self.losses)))


def kept_probability(*, dataset_size: int, sampling_rate: float, max_batch_size: int) -> float:
    """``q E[min(1, b / (1 + Bin(n - 1, q)))]``: the probability that a given record is in the truncated
    batch, rounded down (relative 1e-12) so that the lower bound built on it stays a lower bound."""
    n, q, b = dataset_size, sampling_rate, max_batch_size
    if q >= 1.0:
        return min(1.0, b / n) * (1 - 1e-12)
    from scipy import stats  # lazily: scipy.stats costs 0.3 s of import

    dist = stats.binom(n - 1, q)
    lo = max(0, int(dist.ppf(1e-18)) - 1)
    hi = min(n - 1, int(dist.isf(1e-18)) + 1)
    k = np.arange(lo, hi + 1)
    pmf = dist.pmf(k)
    kept = float(np.sum(pmf * np.minimum(1.0, b / (1.0 + k))))
    # the binomial mass outside [lo, hi] (at most 2e-18) is dropped: a lower value, still a lower bound
    return q * kept * (1.0 - 1e-12)


@dataclass(frozen=True, kw_only=True)
class TruncatedPoissonSampled(Mechanism):
    """One step of Poisson sampling at ``sampling_rate`` from ``dataset_size`` records with batches cut to
    ``max_batch_size`` (dp-accounting's ``TruncatedSubsampledGaussianDpEvent``; Ganesh 2025, 2508.15089).

    ``privacy_losses()`` returns the dominating pair of the module docstring (an
    *upper* bound); ``tightdp.schemes.truncated_poisson_epsilon`` adds the explicit lower bound.
    """

    type_name = "truncated_poisson_sampled"
    mechanism: Mechanism
    sampling_rate: float
    dataset_size: int
    max_batch_size: int

    def __post_init__(self):
        if not isinstance(self.mechanism, Gaussian):
            raise UnsupportedMechanismError(
                f"truncated Poisson sampling of {type(self.mechanism).__name__} is not supported; only Gaussian")
        object.__setattr__(self, "sampling_rate", check_probability("sampling_rate", self.sampling_rate))
        object.__setattr__(self, "dataset_size", check_count("dataset_size", self.dataset_size))
        object.__setattr__(self, "max_batch_size", check_count("max_batch_size", self.max_batch_size))
        if self.max_batch_size > self.dataset_size:
            raise ValueError(f"max_batch_size ({self.max_batch_size}) must be <= dataset_size ({self.dataset_size})")

    @property
    def sigma(self) -> float:
        g: Gaussian = self.mechanism  # type: ignore[assignment]
        return g.noise_multiplier / g.sensitivity

    def truncation(self) -> tuple[float, float]:
        """``(p_T, q_T)`` of the module docstring (dp-accounting 0.6.0's formulas)."""
        from scipy import stats  # lazily (import cost)

        n, q, b = self.dataset_size, self.sampling_rate, self.max_batch_size
        p_t = float(stats.binom.sf(b - 1, n - 1, q))
        if p_t <= 0.0:
            return 0.0, 0.0
        q_t = float(stats.binom.sf(b, n, q)) * b / p_t / n
        return p_t, min(q_t, 1.0)

    def privacy_losses(self) -> LossPair:
        sigma, q = self.sigma, self.sampling_rate
        remove = poisson_gaussian_loss(sigma=sigma, q=q, direction="remove")
        add = poisson_gaussian_loss(sigma=sigma, q=q, direction="add")
        p_t, q_t = self.truncation()
        if p_t == 0.0:
            return LossPair(remove, add)
        # the truncation branch is symmetric (replace one); a slightly pessimistic p_T only moves weight
        # to the (more revealing) doubled-sensitivity branch
        repl = without_replacement_gaussian_loss(sigma=sigma / 2.0, q=q_t)
        p_t = min(1.0, p_t * (1 + 1e-12))
        return LossPair(FlaggedMixtureLoss((1.0 - p_t, p_t), (remove, repl)),
                        FlaggedMixtureLoss((1.0 - p_t, p_t), (add, repl)))


def truncated_poisson_epsilon(**kwargs):
    """Moved to ``tightdp.schemes.truncated_poisson_epsilon`` (it runs accountants; this name forwards to it,
    same keywords; tests/test_layout.py allows this forwarder's lazy import and nothing else)."""
    from ..schemes import truncated_poisson_epsilon as moved
    return moved(**kwargs)

"""Subsampled mechanisms (Koskela et al. 2020, Sec. 6): Poisson sampling, sampling without and with replacement."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special

from .._types import ArrayLike, FloatArray
from .._validation import check_choice, check_count, check_probability
from ..errors import PrecisionError, UnsupportedMechanismError
from ..losses import (
    GaussianMixtureLoss,
    PoissonLaplaceLoss,
    PrivacyLoss,
    poisson_gaussian_loss,
    without_replacement_gaussian_loss,
)
from ._certified_pmf import certified_binomial
from ._mixture_losses import _AccurateTails, _WeightError
from .base import LossPair, Mechanism
from .basic import Gaussian, Laplace

__all__ = ["PoissonSampled", "SampledWithoutReplacement", "SampledWithReplacement", "RELATIONS"]

RELATIONS = ("add-remove", "remove", "add", "substitute")


def _require_gaussian(mechanism: object, where: str, *, laplace: bool = False) -> Gaussian | Laplace:
    if not isinstance(mechanism, Mechanism):
        raise ValueError(f"mechanism must be a tightdp Mechanism, got {mechanism!r}")
    allowed = (Gaussian, Laplace) if laplace else (Gaussian,)
    if not isinstance(mechanism, allowed):
        names = " and ".join(c.__name__ for c in allowed)
        raise UnsupportedMechanismError(
            f"{where} of {type(mechanism).__name__} is not supported; only {names} can be subsampled here"
        )
    return mechanism


@dataclass(frozen=True, kw_only=True)
class PoissonSampled(Mechanism):
    """Poisson sampling: each record joins the batch independently with probability ``sampling_rate``.

    ``relation``: ``"add-remove"`` (default, the worse of both directions),
    ``"remove"`` (Koskela et al. 2020, Sec. 6.1: P = q N(1, s^2) + (1-q) N(0, s^2), Q = N(0, s^2)),
    ``"add"`` (the reverse pair) or ``"substitute"`` (same pair as sampling
    without replacement at rate q, Koskela et al. 2020, Sec. 6.2 remark).

    Attained pair: the differing record's clipped contribution is a fixed vector of the inner
    mechanism's full sensitivity (Laplace: a scalar ``sensitivity``) and every other record contributes 0.
    Remove / add: the output is the inner mechanism at that vector with probability ``q`` (the record is
    sampled) and at 0 otherwise, against the inner mechanism at 0: exactly the returned pairs. Substitute:
    the record's contribution ``+v`` is replaced by ``-v`` (``|v|`` the sensitivity), which gives the
    pair of sampling without replacement. Lower ends are certified.

    Parameters
    ----------
    mechanism : Mechanism
        The mechanism run on each batch: ``Gaussian`` or ``Laplace``.
    sampling_rate : float
        Probability ``q`` in ``(0, 1]`` that a record joins a batch.
    relation : str, default "add-remove"
        One of ``RELATIONS``: ``"add-remove"``, ``"remove"``, ``"add"`` or ``"substitute"`` (Gaussian only).

    Raises
    ------
    ValueError
        If ``mechanism`` is not a tightdp mechanism, ``sampling_rate`` lies outside ``(0, 1]`` or ``relation``
        is not one of ``RELATIONS``.
    UnsupportedMechanismError
        If ``mechanism`` is neither ``Gaussian`` nor ``Laplace``, or ``relation`` is ``"substitute"`` with
        ``Laplace``.

    References
    ----------
    Koskela et al. 2020, Sec. 6.1 (the pairs) and Sec. 6.2 (the substitute relation).
    """

    type_name = "poisson_sampled"
    pair_attained = True
    mechanism: Mechanism
    sampling_rate: float
    relation: str = "add-remove"

    def __post_init__(self) -> None:
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
            remove: PrivacyLoss = PoissonLaplaceLoss(q, b, "remove")
            add: PrivacyLoss = PoissonLaplaceLoss(q, b, "add")
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
    """A batch of ``sample_size`` distinct records out of ``dataset_size``; substitute relation (Koskela et al.
    2020, Sec. 6.2).

    The differing record is in the batch with probability ``q = sample_size / dataset_size``.

    Attained pair: the differing record contributes ``+v`` in one data set and ``-v`` in the other (``|v|``
    the sensitivity), every other record 0: with probability ``q`` the batch holds its slot and the
    outputs are ``N(+v)`` and ``N(-v)``, else both ``N(0)``: the returned pair. Lower ends are certified.

    Parameters
    ----------
    mechanism : Mechanism
        The mechanism run on each batch: ``Gaussian``.
    sample_size : int
        Batch size, a positive integer at most ``dataset_size``.
    dataset_size : int
        Number of records, a positive integer.

    Raises
    ------
    ValueError
        If ``mechanism`` is not a tightdp mechanism, a size is not a positive integer or
        ``sample_size > dataset_size``.
    UnsupportedMechanismError
        If ``mechanism`` is not ``Gaussian``.

    References
    ----------
    Koskela et al. 2020, Sec. 6.2.
    """

    type_name = "sampled_without_replacement"
    pair_attained = True
    mechanism: Mechanism
    sample_size: int
    dataset_size: int

    def __post_init__(self) -> None:
        _require_gaussian(self.mechanism, "Sampling without replacement")
        object.__setattr__(self, "sample_size", check_count("sample_size", self.sample_size))
        object.__setattr__(self, "dataset_size", check_count("dataset_size", self.dataset_size))
        if self.sample_size > self.dataset_size:
            raise ValueError(f"sample_size ({self.sample_size}) must be <= dataset_size ({self.dataset_size})")

    @property
    def sampling_rate(self) -> float:
        """The probability ``sample_size / dataset_size`` that the differing record is in the batch."""
        return self.sample_size / self.dataset_size

    def privacy_losses(self) -> LossPair:
        g: Gaussian = self.mechanism  # type: ignore[assignment]
        loss = without_replacement_gaussian_loss(sigma=g.noise_multiplier / g.sensitivity, q=self.sampling_rate)
        return LossPair(loss, loss)


@dataclass(frozen=True, kw_only=True)
class SampledWithReplacement(Mechanism):
    """``sample_size`` draws with replacement from ``dataset_size`` records; substitute relation (Koskela et
    al. 2020, Sec. 6.3).

    The differing record appears ``l ~ Binomial(sample_size, 1/dataset_size)``
    times; P and Q are the binomial mixtures of ``N(+-l, s^2)``. The weights are
    ``certified_binomial``'s upper ends (exact interval arithmetic), their
    relative error charged as ``weight_error`` (``mechanisms._mixture_losses._WeightError``).
    Components beyond the first ``L`` whose binomial tail is below
    ``_TAIL_CUT`` are not represented (``_WithReplacementLoss`` says why that is
    safe on both sides): an exact-sized upper bound on their mass is put at
    infinite privacy loss for the upper bound and dropped by lower bounds.

    Attained pair: the differing record contributes ``+v`` in one data set and ``-v`` in the other, every
    other record 0; drawn ``l`` times, the outputs are ``N(+l v)`` and ``N(-l v)``: the binomial mixtures
    above. Lower ends are certified (the left-out components are dropped on that side).

    Parameters
    ----------
    mechanism : Mechanism
        The mechanism run on each batch: ``Gaussian``.
    sample_size : int
        Number of draws, a positive integer.
    dataset_size : int
        Number of records, a positive integer.

    Raises
    ------
    ValueError
        If ``mechanism`` is not a tightdp mechanism or a size is not a positive integer.
    UnsupportedMechanismError
        If ``mechanism`` is not ``Gaussian``.

    References
    ----------
    Koskela et al. 2020, Sec. 6.3.
    """

    type_name = "sampled_with_replacement"
    pair_attained = True
    mechanism: Mechanism
    sample_size: int
    dataset_size: int

    def __post_init__(self) -> None:
        _require_gaussian(self.mechanism, "Sampling with replacement")
        object.__setattr__(self, "sample_size", check_count("sample_size", self.sample_size))
        object.__setattr__(self, "dataset_size", check_count("dataset_size", self.dataset_size))

    @property
    def sampling_rate(self) -> float:
        """The probability ``1 - (1 - 1/dataset_size)^sample_size`` that the differing record is drawn at least once."""
        return -math.expm1(self.sample_size * math.log1p(-1.0 / self.dataset_size))

    def privacy_losses(self) -> LossPair:
        g: Gaussian = self.mechanism  # type: ignore[assignment]
        sigma = g.noise_multiplier / g.sensitivity
        loss = _with_replacement_loss(self.sample_size, self.dataset_size, sigma)
        return LossPair(loss, loss)


#: binomial tail mass left out of the mixture (sent to +inf for upper bounds, dropped for lower ones)
_TAIL_CUT = 1e-40
#: largest tolerated ``q_tail / q_kept`` on the outputs whose loss is represented (see ``_WithReplacementLoss``)
_RATIO_CUT = 1e-30


def _with_replacement_loss(m: int, n: int, sigma: float) -> _WithReplacementLoss:
    """Build the truncated mixture and its safe-side masses (see ``_WithReplacementLoss``)."""
    pmf = certified_binomial(m, 1.0 / n)
    up = np.array(pmf.upper)
    lo = np.array(pmf.lower)
    if not lo[0] > 0.0:  # the mixture's weights are relative to "never drawn", whose chance must be a double
        raise PrecisionError(
            f"sample_size={m} draws from dataset_size={n}: the chance that the record is never drawn, "
            f"(1 - 1/{n})^{m}, underflows double precision, so sampling gives no amplification to speak of; "
            "account the Gaussian at the sensitivity of the record's largest likely multiplicity instead"
        )
    # smallest L whose left-out mass, bounded by the sum of the upper ends (rounding: a relative
    # (m + 2) u margin on the float suffix sums), is below the cut
    suffix = np.concatenate([np.cumsum(up[::-1])[::-1], [0.0]]) * (1.0 + (m + 2) * np.finfo(float).eps)
    L = int(np.argmax(suffix[1:] <= _TAIL_CUT))  # suffix[m + 1] = 0, so some L <= m qualifies
    tail = float(suffix[L + 1])
    ells = np.arange(L + 1, dtype=float)
    w = up[: L + 1]
    keep = w > 0
    ells, w = ells[keep], w[keep]
    low_mass, ratio = 0.0, 0.0
    if m > L:
        # x_B: the tail's Q-density is at most _RATIO_CUT of the kept one for x >= x_B (each tail term
        # of q_tail / q_kept <= sum_{l > L} (w_l / w_0) exp(-(l x + l^2 / 2) / s^2) decreases in x)
        lt = np.arange(L + 1, m + 1, dtype=float)
        lw_t = np.log(np.maximum(up[L + 1 :], 1e-320)) - math.log(lo[0])

        def bound(x: float) -> float:
            return float(special.logsumexp(lw_t - (lt * x + 0.5 * lt * lt) / sigma**2))

        x_lo, x_hi = -float(m) - 40.0 * sigma, 0.0
        if bound(x_hi) > math.log(_RATIO_CUT):
            x_b = 0.0
        else:
            for _ in range(200):
                mid = 0.5 * (x_lo + x_hi)
                if bound(mid) <= math.log(_RATIO_CUT):
                    x_hi = mid
                else:
                    x_lo = mid
            x_b = x_hi
        ratio = math.exp(bound(x_b)) * (1.0 + 1e-9)
        # P-mass of the kept components below x_B (their loss is not controlled there): upper bound
        low_mass = float(np.sum(w * special.ndtr((x_b - ells) / sigma))) * (1.0 + 1e-9) + 1e-300
    return _WithReplacementLoss(
        tuple(map(float, ells)),
        tuple(map(float, w)),
        tuple(map(float, -ells)),
        tuple(map(float, w)),
        sigma,
        min(1.0, tail + low_mass),
        weight_error=pmf.rel_error,
        tail_ratio=ratio,
    )


@dataclass(frozen=True)
class _WithReplacementLoss(_WeightError, _AccurateTails, GaussianMixtureLoss):
    """Binomial mixtures of Koskela et al. 2020, Sec. 6.3 (numerical inverse), truncated to the components ``l <= L``.

    Write ``P = P_k + P_t`` and ``Q = Q_k + Q_t`` (kept and left-out components), ``t = P_t(R) = Q_t(R)``.

    * Upper bound: ``(a + b)_+ <= a_+ + b_+`` gives
      ``delta(eps) = int (P - e^eps Q)_+ <= int (P_k - e^eps Q_k)_+ + t``: the pair ``(P_k, Q_k)`` with
      ``t`` at ``+inf`` dominates (``infinity_mass``; ``t`` is bounded from the certified binomial).
    * Lower bound: the true loss ``log((p_k + p_t) / (q_k + q_t)) >= log(p_k / q_k) - log1p(q_t / q_k)``
      at every output; ``q_t / q_k <= tail_ratio`` for ``x >= x_B`` (module function), so there the true
      loss is at least the represented one minus ``log1p(tail_ratio)``, charged like a realised edge
      error (``outputs_at``; it widens the coupling range). Outputs below ``x_B`` carry P-mass
      ``<= Phi(x_B - l)`` summed over the kept components: that mass is added to ``infinity_mass``, which
      is not exact (``infinity_is_exact = False``), so lower bounds drop it as truncated mass.
    * The weights are certified upper ends within ``1 + weight_error`` of the binomial (``_WeightError``).

    Fewer components (about 15 instead of 85 at 600 draws from 60,000) is what makes it fast.
    """

    weight_error: float = 0.0
    tail_ratio: float = 0.0

    def outputs_at(self, s: ArrayLike) -> tuple[FloatArray, float]:
        x, err = super().outputs_at(s)
        if self.tail_ratio:
            err = err + math.log1p(self.tail_ratio) * (1.0 + 1e-6) + 1e-300
        return x, err

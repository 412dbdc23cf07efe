"""Schemes whose steps are drawn independently of each other: Poisson, fixed batches (add/remove or
substitute neighbours), with replacement, truncated Poisson."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import ClassVar, Self

from .._validation import check_count, check_probability
from ..accountants import DEFAULT_ACCOUNTANT
from ..bounds import Bounds
from ..mechanisms import Gaussian, Mechanism, PoissonSampled, SampledWithoutReplacement, SampledWithReplacement
from ..mechanisms.mixture import GroupFixedBatchSampled, GroupPoissonSampled
from ..schemes import truncated_poisson_epsilon
from ._base import GroupAnalysis, Relation, RunLike, SamplingScheme
from ._registry import register_scheme

__all__ = ["Poisson", "FixedBatch", "WithoutReplacement", "WithReplacement", "TruncatedPoisson"]


@register_scheme
@dataclass(frozen=True, kw_only=True)
class Poisson(SamplingScheme):
    """Poisson sampling: each example joins each batch independently with probability ``sampling_rate``.

    Parameters
    ----------
    sampling_rate : float
        The probability ``q`` in (0, 1].

    Raises
    ------
    ValueError
        If ``sampling_rate`` is not in (0, 1].
    """

    sampling_rate: float

    name: ClassVar[str] = "poisson"
    relations: ClassVar[tuple[Relation, ...]] = (
        Relation.ADD_REMOVE,
        Relation.REMOVE,
        Relation.ADD,
        Relation.SUBSTITUTE,
    )
    random_batch_size: ClassVar[bool] = True
    group_analysis: ClassVar[GroupAnalysis] = GroupAnalysis.MIXTURE
    group_summary: ClassVar[str] = "Poisson sampling, sensitivity Binom(k, q) (Ganesh 2024, Thm 3.1)"
    options: ClassVar[tuple[str, ...]] = ("sampling_rate",)
    free_fields: ClassVar[tuple[str, ...]] = ("sampling_rate",)
    summary: ClassVar[str] = "Poisson sampling: each example joins every batch independently with probability q"

    def __post_init__(self) -> None:
        object.__setattr__(self, "sampling_rate", check_probability("sampling_rate", self.sampling_rate))

    def step_mechanism(self, *, noise_multiplier: float, relation: Relation | None = None) -> Mechanism:
        rel = Relation(relation or self.default_relation()).value
        return PoissonSampled(
            mechanism=Gaussian(noise_multiplier=noise_multiplier), sampling_rate=self.sampling_rate, relation=rel
        )

    def group_step(self, *, noise_multiplier: float, group_size: int) -> Mechanism:
        return GroupPoissonSampled(
            noise_multiplier=noise_multiplier, sampling_rate=self.sampling_rate, group_size=group_size
        )

    def sentence(self) -> str:
        return (
            f"Sampling: Poisson. At every step each example joins the batch independently with probability "
            f"q = {self.sampling_rate:.6g}, so batch sizes vary (the sampling of Opacus and of dp_accounting's "
            f"DP-SGD helpers)."
        )

    @classmethod
    def group_sentence(cls) -> str:
        return _MIXTURE_GROUP_SENTENCE

    @classmethod
    def from_options(
        cls,
        *,
        sampling_rate: float | None = None,
        dataset_size: int | None = None,
        batch_size: int | None = None,
        max_batch_size: int | None = None,
    ) -> Self:
        if sampling_rate is None:
            raise ValueError("sampling_rate is required for sampling='poisson'")
        return cls(sampling_rate=sampling_rate)


_MIXTURE_GROUP_SENTENCE = (
    "Group privacy: a group is any set of up to k examples added or removed together (e.g. all records of one "
    "user, if no user has more than k). Its epsilon is computed directly from the group's mixture-of-Gaussians "
    "mechanism (Ganesh 2024, Thm 3.1 / 3.3), not by the much looser group-privacy lemma."
)


@dataclass(frozen=True, kw_only=True)
class _Batches(SamplingScheme):
    """Batches of exactly ``batch_size`` out of ``dataset_size`` (the shared fields and checks)."""

    batch_size: int
    dataset_size: int

    options: ClassVar[tuple[str, ...]] = ("sampling_rate", "dataset_size", "batch_size")

    def __post_init__(self) -> None:
        object.__setattr__(self, "batch_size", check_count("batch_size", self.batch_size))
        object.__setattr__(self, "dataset_size", check_count("dataset_size", self.dataset_size))
        if self.batch_size > self.dataset_size:
            raise ValueError(f"batch_size ({self.batch_size}) must be <= dataset_size ({self.dataset_size})")

    @property
    def sampling_rate(self) -> float:
        """The fraction of the data in one batch, ``batch_size / dataset_size``."""
        return self.batch_size / self.dataset_size

    def batches_per_epoch(self) -> int:
        return math.ceil(self.dataset_size / self.batch_size)


@register_scheme
@dataclass(frozen=True, kw_only=True)
class FixedBatch(_Batches):
    """Fixed batches of ``batch_size`` drawn without replacement from at least ``dataset_size`` other examples,
    add/remove neighbours: the mixture of Gaussians with sensitivity ``2 Hypergeom(B, N + k, k)``
    (Ganesh 2024, Thm 3.3; ``k = 1`` for one example).

    Parameters
    ----------
    batch_size : int
        The batch size ``B``, a positive whole number.
    dataset_size : int
        A lower bound ``N >= B`` on the number of examples outside the protected ones.

    Raises
    ------
    ValueError
        If a size is not a positive whole number, or ``batch_size > dataset_size``.
    """

    name: ClassVar[str] = "fixed-batch"
    group_analysis: ClassVar[GroupAnalysis] = GroupAnalysis.MIXTURE
    group_summary: ClassVar[str] = "fixed batch size, sensitivity 2 Hypergeom(B, N + k, k) (Ganesh 2024, Thm 3.3)"
    summary: ClassVar[str] = (
        "fixed batches of B drawn without replacement, add/remove neighbours (Ganesh 2024, Thm 3.3)"
    )

    def step_mechanism(self, *, noise_multiplier: float, relation: Relation | None = None) -> Mechanism:
        return self.group_step(noise_multiplier=noise_multiplier, group_size=1)

    def group_step(self, *, noise_multiplier: float, group_size: int) -> Mechanism:
        return GroupFixedBatchSampled(
            noise_multiplier=noise_multiplier,
            batch_size=self.batch_size,
            dataset_size=self.dataset_size,
            group_size=group_size,
        )

    def sentence(self) -> str:
        return (
            f"Sampling: fixed batches. Every step draws exactly B = {self.batch_size} examples uniformly "
            f"without replacement from a data set of at least N = {self.dataset_size} examples besides the "
            f"protected ones."
        )

    @classmethod
    def relation_sentence(cls, relation: Relation | str | None = None) -> str:
        return (
            "Neighbouring data sets differ by adding or removing one example (groups: up to k examples) to a "
            "data set of at least N others; with fixed batches a present example displaces another, so it "
            "moves the clipped-gradient sum by up to twice the clipping norm (Ganesh 2024, Thm 3.3)."
        )

    @classmethod
    def group_sentence(cls) -> str:
        return _MIXTURE_GROUP_SENTENCE

    @classmethod
    def from_options(
        cls,
        *,
        sampling_rate: float | None = None,
        dataset_size: int | None = None,
        batch_size: int | None = None,
        max_batch_size: int | None = None,
    ) -> Self:
        if dataset_size is None or batch_size is None:
            raise ValueError("sampling='fixed-batch' needs both dataset_size and batch_size")
        return cls(batch_size=batch_size, dataset_size=dataset_size)


class _Substitute:
    relations: ClassVar[tuple[Relation, ...]] = (Relation.SUBSTITUTE,)
    group_reason: ClassVar[str] = (
        "no group analysis for the substitute relation; use sampling='fixed-batch' (add/remove of a group, "
        "Ganesh 2024, Thm 3.3)"
    )


@register_scheme
@dataclass(frozen=True, kw_only=True)
class WithoutReplacement(_Substitute, _Batches):
    """Batches of ``batch_size`` distinct records out of ``dataset_size``, substitute relation (Koskela et al.
    2020, Sec. 6.2).

    Parameters
    ----------
    batch_size : int
        The batch size ``B``, a positive whole number.
    dataset_size : int
        The data set size ``N >= B``.

    Raises
    ------
    ValueError
        If a size is not a positive whole number, or ``batch_size > dataset_size``.
    """

    name: ClassVar[str] = "without-replacement"
    summary: ClassVar[str] = (
        "fixed batches drawn without replacement, substitute neighbours (Koskela et al. 2020, Sec. 6.2)"
    )

    def step_mechanism(self, *, noise_multiplier: float, relation: Relation | None = None) -> Mechanism:
        return SampledWithoutReplacement(
            mechanism=Gaussian(noise_multiplier=noise_multiplier),
            sample_size=self.batch_size,
            dataset_size=self.dataset_size,
        )

    def sentence(self) -> str:
        return (
            f"Sampling: fixed batches. Every step draws a batch uniformly without replacement (sampling rate "
            f"{self.sampling_rate:.6g}), independently across steps."
        )

    @classmethod
    def from_options(
        cls,
        *,
        sampling_rate: float | None = None,
        dataset_size: int | None = None,
        batch_size: int | None = None,
        max_batch_size: int | None = None,
    ) -> Self:
        if dataset_size is not None and batch_size is not None:
            return cls(batch_size=batch_size, dataset_size=dataset_size)
        if sampling_rate is None:
            raise ValueError("sampling='without-replacement' needs dataset_size and batch_size (or sampling_rate)")
        # under the substitute relation the answer depends on q = B / N alone: any exact B / N will do
        q = check_probability("sampling_rate", sampling_rate)
        f = Fraction(q).limit_denominator(10**9)
        if f.numerator < 1 or f.numerator / f.denominator != q:
            raise ValueError(
                f"sampling_rate {q!r} is not a ratio B / N with N <= 1e9; give dataset_size and batch_size"
            )
        return cls(batch_size=f.numerator, dataset_size=f.denominator)


@register_scheme
@dataclass(frozen=True, kw_only=True)
class WithReplacement(_Substitute, _Batches):
    """``batch_size`` draws with replacement from ``dataset_size`` records, substitute relation (Koskela et al.
    2020, Sec. 6.3).

    Parameters
    ----------
    batch_size : int
        The number of draws ``B``, a positive whole number.
    dataset_size : int
        The data set size ``N >= B``.

    Raises
    ------
    ValueError
        If a size is not a positive whole number, or ``batch_size > dataset_size``.
    """

    name: ClassVar[str] = "with-replacement"
    summary: ClassVar[str] = "batches drawn with replacement, substitute neighbours (Koskela et al. 2020, Sec. 6.3)"

    def step_mechanism(self, *, noise_multiplier: float, relation: Relation | None = None) -> Mechanism:
        return SampledWithReplacement(
            mechanism=Gaussian(noise_multiplier=noise_multiplier),
            sample_size=self.batch_size,
            dataset_size=self.dataset_size,
        )

    def sentence(self) -> str:
        return (
            f"Sampling: with replacement. Every step draws B = {self.batch_size} examples uniformly with "
            f"replacement from N = {self.dataset_size}, independently across steps."
        )

    @classmethod
    def from_options(
        cls,
        *,
        sampling_rate: float | None = None,
        dataset_size: int | None = None,
        batch_size: int | None = None,
        max_batch_size: int | None = None,
    ) -> Self:
        if dataset_size is None:
            raise ValueError(
                "dataset_size is required for sampling='with-replacement' (with replacement the "
                "answer depends on N, not only on q)"
            )
        n = check_count("dataset_size", dataset_size)
        if batch_size is None:
            if sampling_rate is None:
                raise ValueError("sampling='with-replacement' needs batch_size (or sampling_rate)")
            batch_size = max(1, round(check_probability("sampling_rate", sampling_rate) * n))
        return cls(batch_size=batch_size, dataset_size=n)


@register_scheme
@dataclass(frozen=True, kw_only=True)
class TruncatedPoisson(SamplingScheme):
    """Poisson batches at ``sampling_rate`` cut to at most ``max_batch_size`` of ``dataset_size`` records
    (Ganesh 2025, 2508.15089; dp_accounting's ``TruncatedSubsampledGaussianDpEvent``;
    ``tightdp.schemes.truncated_poisson_epsilon``).

    Parameters
    ----------
    sampling_rate : float
        The Poisson probability ``q`` in (0, 1].
    dataset_size : int
        The data set size ``N``, a positive whole number.
    max_batch_size : int
        The cap on a batch, at most ``dataset_size``.

    Raises
    ------
    ValueError
        If an argument is out of its domain, or ``max_batch_size > dataset_size``.
    """

    sampling_rate: float
    dataset_size: int
    max_batch_size: int

    name: ClassVar[str] = "truncated-poisson"
    any_accountant: ClassVar[bool] = False
    random_batch_size: ClassVar[bool] = True
    group_reason: ClassVar[str] = (
        "not applicable: Ganesh 2025's dominating pair holds for one data-set size, while a group's add/remove "
        "chain passes through several and added records can displace others from a truncated batch; no "
        "certified group analysis for truncated Poisson is known"
    )
    options: ClassVar[tuple[str, ...]] = ("sampling_rate", "dataset_size", "max_batch_size")
    free_fields: ClassVar[tuple[str, ...]] = ("sampling_rate",)
    summary: ClassVar[str] = "truncated Poisson: Poisson batches cut to a maximum size"
    report_caveat: ClassVar[str | None] = (
        "Truncated Poisson (batches capped at max_batch_size): the upper end is Ganesh 2025's dominating pair "
        "(dp-accounting's construction), the lower end Poisson sampling at the probability that a record survives "
        "the cut; the gap is the price of the analysis."
    )
    calibration_note: ClassVar[str | None] = (
        "truncated Poisson: the certified interval is as wide as the gap between Ganesh 2025's dominating pair "
        "and the explicit lower bound, so tightness can only be shown within that gap"
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "sampling_rate", check_probability("sampling_rate", self.sampling_rate))
        object.__setattr__(self, "dataset_size", check_count("dataset_size", self.dataset_size))
        object.__setattr__(self, "max_batch_size", check_count("max_batch_size", self.max_batch_size))
        if self.max_batch_size > self.dataset_size:
            raise ValueError(f"max_batch_size ({self.max_batch_size}) must be <= dataset_size ({self.dataset_size})")

    def epsilon(
        self,
        run: RunLike,
        *,
        delta: float,
        accountant: str = DEFAULT_ACCOUNTANT,
        eps_error: float | None = None,
        rel_error: float | None = None,
    ) -> Bounds:
        self._dominance_only(accountant)
        bounds: Bounds = truncated_poisson_epsilon(
            noise_multiplier=run.noise_multiplier,
            sampling_rate=self.sampling_rate,
            dataset_size=self.dataset_size,
            max_batch_size=self.max_batch_size,
            steps=run.steps,
            delta=delta,
            eps_error=eps_error,
            rel_error=rel_error,
        )
        return bounds

    def sentence(self) -> str:
        return (
            f"Sampling: truncated Poisson. Poisson batches at rate q = {self.sampling_rate:.6g} cut to at most "
            f"{self.max_batch_size} examples out of {self.dataset_size}."
        )

    @classmethod
    def from_options(
        cls,
        *,
        sampling_rate: float | None = None,
        dataset_size: int | None = None,
        batch_size: int | None = None,
        max_batch_size: int | None = None,
    ) -> Self:
        if dataset_size is None or max_batch_size is None:
            missing = [n for n, v in (("dataset_size", dataset_size), ("max_batch_size", max_batch_size)) if v is None]
            raise ValueError(
                f"{' and '.join(missing)} required: sampling='truncated-poisson' needs dataset_size and max_batch_size"
            )
        if sampling_rate is None:
            raise ValueError("sampling_rate is required for sampling='truncated-poisson'")
        return cls(sampling_rate=sampling_rate, dataset_size=dataset_size, max_batch_size=max_batch_size)

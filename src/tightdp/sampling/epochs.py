"""Schemes that run in epochs (or cycles) of steps: random allocation (a fresh step every epoch), cyclic
allocation (one step for the whole run: jax_privacy's balls-in-bins), shuffling, a fixed order."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Self

from .._validation import check_count
from ..accountants import DEFAULT_ACCOUNTANT, create
from ..bounds import Bounds
from ..mechanisms import Gaussian, Mechanism
from ..mechanisms import RandomAllocation as AllocationMechanism
from ..schemes import allocation_epsilon, cyclic_allocation_epsilon, shuffle_epsilon
from ._base import GroupAnalysis, Relation, RunLike, SamplingScheme
from ._registry import _epoch_options, register_scheme

__all__ = ["RandomAllocation", "CyclicAllocation", "Shuffle", "FixedOrder", "from_jax_privacy"]


@dataclass(frozen=True, kw_only=True)
class _Epochs(SamplingScheme):
    """A scheme that runs whole epochs of ``steps_per_epoch`` steps (certified function, dominance only)."""

    any_accountant: ClassVar[bool] = False
    per_epoch: ClassVar[bool] = True
    options: ClassVar[tuple[str, ...]] = ("sampling_rate", "dataset_size")

    @property
    def sampling_rate(self) -> float:
        """The fraction of the steps an example is in, ``1 / steps_per_epoch``."""
        return 1.0 / self.epoch_length()  # type: ignore[operator]


_NO_AMPLIFICATION_LEMMA = (
    "Group privacy: a group is any set of up to k examples added or removed together. Its upper bound is the "
    "smaller of the group-privacy lemma (Ganesh 2024, Lemma 1.1) on the certified example-level curve and k "
    "sqrt(epochs)/sigma-GDP without amplification; its lower bound is the example-level one (no tight group "
    "analysis of this sampling is known), so the interval is wide."
)


@register_scheme
@dataclass(frozen=True, kw_only=True)
class RandomAllocation(_Epochs):
    """Every epoch each example is used in ``selected`` of the epoch's ``steps_per_epoch`` steps, drawn afresh
    every epoch (Feldman & Shenfeld 2602.17284; ``tightdp.schemes.allocation_epsilon``).

    Parameters
    ----------
    steps_per_epoch : int
        The steps ``t`` of an epoch, a positive whole number.
    selected : int, default 1
        The steps of each epoch an example is in, at most ``steps_per_epoch``.

    Raises
    ------
    ValueError
        If an argument is not a positive whole number, or ``selected > steps_per_epoch``.
    """

    steps_per_epoch: int
    selected: int = 1

    name: ClassVar[str] = "random-allocation"
    aliases: ClassVar[tuple[str, ...]] = ("balls-in-bins-fresh",)
    summary: ClassVar[str] = (
        "random allocation: every epoch each example is used in one of the epoch's steps, drawn afresh every epoch"
    )
    report_caveat: ClassVar[str | None] = (
        "Random allocation (each example in exactly one step per epoch, drawn afresh every epoch): both ends are "
        "certified (Feldman & Shenfeld 2026's PLD realisation, made certified by dominance). Poisson accounting "
        "describes a different sampling; it is the right figure only if batches were Poisson-sampled. This is "
        "not jax_privacy's balls-in-bins, which fixes each example's step for the whole run (cyclic-allocation)."
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "steps_per_epoch", check_count("steps_per_epoch", self.steps_per_epoch))
        object.__setattr__(self, "selected", check_count("selected", self.selected))
        if self.selected > self.steps_per_epoch:
            raise ValueError(f"selected ({self.selected}) must be <= steps_per_epoch ({self.steps_per_epoch})")

    @property
    def sampling_rate(self) -> float:
        """The fraction of the steps an example is in, ``selected / steps_per_epoch``."""
        return self.selected / self.steps_per_epoch

    @property
    def group_analysis(self) -> GroupAnalysis:  # type: ignore[override]
        """``NO_AMPLIFICATION`` for one step an epoch; ``NONE`` otherwise (no analysis implemented)."""
        return GroupAnalysis.NO_AMPLIFICATION if self.selected == 1 else GroupAnalysis.NONE

    @property
    def group_reason(self) -> str:  # type: ignore[override]
        """Why no group analysis applies (empty for one step an epoch)."""
        return (
            ""
            if self.selected == 1
            else (
                "not applicable: no certified group analysis of random allocation "
                "with more than one step per epoch is implemented"
            )
        )

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
        bounds: Bounds = allocation_epsilon(
            noise_multiplier=run.noise_multiplier,
            steps_per_epoch=self.steps_per_epoch,
            epochs=run.steps // self.steps_per_epoch,
            delta=delta,
            num_selected=self.selected,
            eps_error=eps_error,
            rel_error=rel_error,
        )
        return bounds

    def group_lemma_step(self, *, noise_multiplier: float) -> Mechanism:
        return AllocationMechanism(
            mechanism=Gaussian(noise_multiplier=noise_multiplier), steps_per_epoch=self.steps_per_epoch
        )

    def sentence(self) -> str:
        which = "one" if self.selected == 1 else f"{self.selected}"
        return (
            f"Sampling: random allocation, a fresh step every epoch. In every epoch each example is used in "
            f"exactly {which} of the {self.steps_per_epoch} steps, chosen uniformly at random and "
            f"independently (not jax_privacy's balls-in-bins, which fixes the step for the whole run)."
        )

    @classmethod
    def group_sentence(cls) -> str:
        return _NO_AMPLIFICATION_LEMMA

    @classmethod
    def from_options(
        cls,
        *,
        sampling_rate: float | None = None,
        dataset_size: int | None = None,
        batch_size: int | None = None,
        max_batch_size: int | None = None,
    ) -> Self:
        return cls(steps_per_epoch=_epoch_options(cls.name, sampling_rate, dataset_size))


@register_scheme
@dataclass(frozen=True, kw_only=True)
class CyclicAllocation(_Epochs):
    """Each example is assigned **one** of ``steps_per_cycle`` steps, uniformly, once for the whole run; every
    cycle repeats the assignment (Choquette-Choo et al. ICLR 2025's balls-in-bins; jax_privacy's
    ``BallsInBinsSampling(iterations, cycle_length)``, see ``from_jax_privacy``).
    ``tightdp.schemes.cyclic_allocation_epsilon``.

    Parameters
    ----------
    steps_per_cycle : int
        The steps of a cycle (jax_privacy's ``cycle_length``), a positive whole number.

    Raises
    ------
    ValueError
        If ``steps_per_cycle`` is not a positive whole number.
    """

    steps_per_cycle: int

    name: ClassVar[str] = "cyclic-allocation"
    aliases: ClassVar[tuple[str, ...]] = ("balls-in-bins-fixed",)
    group_reason: ClassVar[str] = (
        "not applicable: no certified group analysis of a fixed (cyclic) assignment is implemented"
    )
    summary: ClassVar[str] = (
        "cyclic allocation: each example is assigned one step of the cycle once for the "
        "whole run, repeated every cycle (jax_privacy's BallsInBinsSampling)"
    )
    report_caveat: ClassVar[str | None] = (
        "Cyclic allocation (jax_privacy's balls-in-bins: each example's step drawn once for the whole run and "
        "repeated every cycle): far less private than a fresh allocation every epoch; Poisson accounting "
        "describes a different sampling."
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "steps_per_cycle", check_count("steps_per_cycle", self.steps_per_cycle))

    @property
    def steps_per_epoch(self) -> int:
        """The steps of a cycle (the scheme's epoch)."""
        return self.steps_per_cycle

    def check_steps(self, steps: int) -> int:
        """``steps`` as it is: a partial last cycle is accounted too (``cyclic_allocation_epsilon(steps=...)``).

        Parameters
        ----------
        steps : int
            The run's number of steps (already a positive whole number).

        Returns
        -------
        int
            ``steps``, unchanged.

        Raises
        ------
        ValueError
            Never: any number of steps is a whole number of cycles and a partial one.
        """
        return steps

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
        bounds: Bounds = cyclic_allocation_epsilon(
            noise_multiplier=run.noise_multiplier,
            steps_per_cycle=self.steps_per_cycle,
            steps=run.steps,
            delta=delta,
            eps_error=eps_error,
            rel_error=rel_error,
        )
        return bounds

    def sentence(self) -> str:
        return (
            f"Sampling: cyclic allocation (jax_privacy's balls-in-bins). Each example is assigned one of the "
            f"{self.steps_per_cycle} steps of a cycle, uniformly at random, once for the whole run; every "
            f"cycle uses the same assignment."
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
        return cls(steps_per_cycle=_epoch_options(cls.name, sampling_rate, dataset_size))


def from_jax_privacy(*, iterations: int, cycle_length: int) -> tuple[CyclicAllocation, int]:
    """``(scheme, steps)`` of jax_privacy's ``BallsInBinsSampling(iterations, cycle_length)``: one bin per
    example for the whole run, repeated every ``cycle_length`` steps (a partial last cycle allowed), so
    ``CyclicAllocation`` and never the fresh-every-epoch ``RandomAllocation``.

    Parameters
    ----------
    iterations : int
        The run's number of steps, a positive whole number.
    cycle_length : int
        The steps of a cycle, a positive whole number.

    Returns
    -------
    tuple of (CyclicAllocation, int)
        The scheme and the number of steps.

    Raises
    ------
    ValueError
        If an argument is not a positive whole number.
    """
    iterations = check_count("iterations", iterations)
    scheme = CyclicAllocation(steps_per_cycle=check_count("cycle_length", cycle_length))
    return scheme, scheme.check_steps(iterations)


@register_scheme
@dataclass(frozen=True, kw_only=True)
class Shuffle(_Epochs):
    """A fresh uniformly random permutation every epoch, cut into ``steps_per_epoch`` fixed batches; zero-out
    neighbours (Chua et al. 2403.17673; ``tightdp.schemes.shuffle_epsilon``).

    Parameters
    ----------
    steps_per_epoch : int
        The batches of an epoch, a positive whole number.

    Raises
    ------
    ValueError
        If ``steps_per_epoch`` is not a positive whole number.
    """

    steps_per_epoch: int

    name: ClassVar[str] = "shuffle"
    relations: ClassVar[tuple[Relation, ...]] = (Relation.ZERO_OUT,)
    amplifies: ClassVar[bool] = False
    group_analysis: ClassVar[GroupAnalysis] = GroupAnalysis.NO_AMPLIFICATION
    summary: ClassVar[str] = "shuffling: a fresh random permutation cut into fixed batches every epoch"
    report_caveat: ClassVar[str | None] = (
        "Shuffled fixed batches: no amplification theorem is known. The upper end is the guarantee without "
        "amplification (sqrt(epochs)/σ-GDP), the lower end Chua et al.'s attack (2403.17673); the true ε lies in "
        "between and no theorem closes the gap. Publishing Poisson accounting's ε for shuffled training is not "
        "backed by any theorem."
    )
    caveat: ClassVar[str | None] = (
        "For shuffled batches no amplification theorem is known: the upper end is the guarantee without "
        "amplification, the lower end Chua et al.'s attack; the true epsilon is in between."
    )
    calibration_note: ClassVar[str | None] = (
        "shuffled batches: the certified upper bound is the one without amplification (no tighter certified "
        "bound is known), so this is the noise that bound needs; the certified lower bound (Chua et al.'s "
        "attack) cannot prove tightness"
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "steps_per_epoch", check_count("steps_per_epoch", self.steps_per_epoch))

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
        bounds: Bounds = shuffle_epsilon(
            noise_multiplier=run.noise_multiplier,
            steps_per_epoch=self.steps_per_epoch,
            epochs=run.steps // self.steps_per_epoch,
            delta=delta,
            eps_error=eps_error,
            rel_error=rel_error,
        )
        return bounds

    def sentence(self) -> str:
        return (
            f"Sampling: shuffling. Every epoch a fresh uniformly random permutation of the data is cut into "
            f"1/q = {self.steps_per_epoch} consecutive batches."
        )

    @classmethod
    def group_sentence(cls) -> str:
        return (
            "Group privacy: a group is any set of up to k examples zeroed out together. Its upper bound is "
            "k sqrt(epochs)/sigma-GDP (no amplification; Dong, Roth, Su 2022 Thm 2.14); its lower bound is "
            "the example-level one (no tight group analysis of this sampling is known), so the interval is "
            "wide."
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
        return cls(steps_per_epoch=_epoch_options(cls.name, sampling_rate, dataset_size))


@register_scheme
@dataclass(frozen=True, kw_only=True)
class FixedOrder(_Epochs):
    """The data in one fixed order, cut into ``steps_per_epoch`` batches, the same every epoch (a
    ``SequentialSampler``): each example is in one known step per epoch, so ``E`` epochs are exactly the
    Gaussian mechanism composed ``E`` times (``sqrt(E)/sigma``-GDP), certified on both sides.

    Parameters
    ----------
    steps_per_epoch : int
        The batches of an epoch, a positive whole number.

    Raises
    ------
    ValueError
        If ``steps_per_epoch`` is not a positive whole number.
    """

    steps_per_epoch: int

    name: ClassVar[str] = "fixed-order"
    amplifies: ClassVar[bool] = False
    group_analysis: ClassVar[GroupAnalysis] = GroupAnalysis.NO_AMPLIFICATION
    summary: ClassVar[str] = "fixed order: the same batches every epoch, each example in one known step"
    report_caveat: ClassVar[str | None] = (
        "Fixed-order batches: no sampling randomness, so no amplification; the interval is the Gaussian mechanism "
        "composed once per epoch, which is exact."
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "steps_per_epoch", check_count("steps_per_epoch", self.steps_per_epoch))

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
        acc = create(accountant, eps_error=eps_error, rel_error=rel_error)
        out = acc.compose(Gaussian(noise_multiplier=run.noise_multiplier), run.steps // self.steps_per_epoch)
        return out.epsilon(delta)

    def sentence(self) -> str:
        return (
            f"Sampling: fixed order. The data is cut into the same {self.steps_per_epoch} batches every epoch, "
            "so each example is used in one known step per epoch."
        )

    @classmethod
    def group_sentence(cls) -> str:
        return (
            "Group privacy: a group is any set of up to k examples added or removed together. Its upper bound "
            "is k sqrt(epochs)/sigma-GDP (each epoch moves the sum by at most k); its lower bound is the "
            "example-level one, so the interval is wide."
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
        return cls(steps_per_epoch=_epoch_options(cls.name, sampling_rate, dataset_size))

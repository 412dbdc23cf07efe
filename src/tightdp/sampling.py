"""What ran, as objects: the batch-sampling schemes of DP-SGD and the one registry of their names.

Each scheme is a frozen, keyword-only, validated dataclass that knows everything a front end needs:
how its run is accounted (``epsilon``: a step mechanism composed by any accountant, or the scheme's
certified function in ``tightdp.schemes``), its neighbouring relation, what group privacy can say
for it (``group_analysis``), the sentences of the privacy statement and report, which of its fields
a calibration may solve for, and how it is built from the keyword spellings of the CLI, the report's
config and the Python convenience keywords (``from_options``). ``tightdp.runs.TrainingRun`` pairs a
scheme with the noise and the length of the run.

The schemes (``SCHEMES`` maps every accepted spelling to its class):

* ``Poisson(sampling_rate)``: each example joins each batch independently (Opacus, dp_accounting);
* ``FixedBatch(batch_size, dataset_size)``: batches of exactly ``B`` drawn without replacement, add/remove
  neighbours (Ganesh [002] Thm 3.3);
* ``WithoutReplacement(batch_size, dataset_size)`` / ``WithReplacement(...)``: substitute relation
  (Koskela et al. [001] Sec. 6.2 / 6.3);
* ``RandomAllocation(steps_per_epoch, selected=1)``: every epoch each example in ``selected`` of the epoch's
  steps, drawn afresh every epoch (Feldman & Shenfeld; ``tightdp.schemes.allocation_epsilon``);
* ``CyclicAllocation(steps_per_cycle)``: each example in **one** step drawn once for the whole run and
  repeated every cycle (Choquette-Choo et al. ICLR 2025's balls-in-bins, jax_privacy's
  ``BallsInBinsSampling(iterations, cycle_length)``; ``from_jax_privacy``);
* ``Shuffle(steps_per_epoch)``: a fresh permutation cut into fixed batches every epoch (zero-out relation,
  Chua et al. 2403.17673);
* ``FixedOrder(steps_per_epoch)``: the same batches every epoch (no randomness: the Gaussian mechanism once
  per epoch);
* ``TruncatedPoisson(sampling_rate, dataset_size, max_batch_size)``: Poisson batches cut to a cap
  (Ganesh 2025, 2508.15089).

The spelling ``"balls-and-bins"`` is refused: tightdp used it for the fresh-every-epoch scheme while
jax_privacy's balls-in-bins fixes the bin for the whole run, which is far less private (issue text:
8.5 times the delta at sigma 1, 8 steps a cycle, 32 steps). A name that means either must mean neither.

The scheme classes are named as their samplers; ``tightdp.RandomAllocation`` (the one-epoch *mechanism*
the accountants compose) keeps its name, so the schemes live in this namespace
(``tightdp.sampling.RandomAllocation``) and are not re-exported at the top level.

Adding a scheme is one subclass of ``SamplingScheme`` decorated with ``register_scheme``: every front end
(``dpsgd_epsilon``, ``privacy_statement``, ``group_epsilon``, ``calibrate``, the CLI, the report) reads
what it needs from the class.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar, Mapping

from ._validation import check_count, check_positive, check_probability
from .accountants import DEFAULT_ACCOUNTANT, create
from .bounds import Bounds
from .errors import UnsupportedMechanismError
from .mechanisms import (Gaussian, Mechanism, PoissonSampled, SampledWithoutReplacement,
                         SampledWithReplacement)
from .mechanisms.mixture import GroupFixedBatchSampled, GroupPoissonSampled

__all__ = ["Relation", "GroupAnalysis", "SamplingScheme", "Poisson", "FixedBatch", "WithoutReplacement",
           "WithReplacement", "RandomAllocation", "CyclicAllocation", "Shuffle", "FixedOrder", "TruncatedPoisson",
           "SCHEMES", "AMBIGUOUS", "DEFAULT_SCHEME", "register_scheme", "unregister_scheme", "scheme_class", "scheme_names",
           "parse_sampling", "from_jax_privacy"]


class Relation(str, enum.Enum):
    """The neighbouring relation a guarantee is stated for."""

    ADD_REMOVE = "add-remove"
    REMOVE = "remove"
    ADD = "add"
    SUBSTITUTE = "substitute"
    ZERO_OUT = "zero-out"

    def __str__(self) -> str:
        return self.value


class GroupAnalysis(enum.Enum):
    """What group privacy (up to ``k`` examples) can say for a scheme (``tightdp.group``)."""

    MIXTURE = "mixture"  # the group's mixture-of-Gaussians step (002 Thm 3.1 / 3.3), tight
    NO_AMPLIFICATION = "no-amplification"  # k sqrt(epochs)/sigma-GDP, with the group-privacy lemma if any
    NONE = "none"  # no certified group analysis: ``group_reason`` says why


# ------------------------------------------------------------------------------------------- base
@dataclass(frozen=True, kw_only=True)
class SamplingScheme:
    """How the batches of a DP-SGD run are drawn (abstract; see the module docstring).

    Class attributes a scheme declares: ``name`` (its registry spelling) and ``aliases``; ``relations``
    (the first is the default); ``any_accountant`` (its step mechanism composes under every accountant,
    else only the dominance accountant's certified function answers); ``per_epoch`` (runs whole epochs
    of ``steps_per_epoch`` steps); ``amplifies`` (False: its certified upper bound is the one without
    amplification); ``group_analysis`` / ``group_reason``; ``options`` (the convenience keywords
    ``from_options`` reads); ``free_fields`` (what ``calibrate`` may solve for besides the noise and the
    length); ``summary`` (a sentence without numbers); ``caveat`` and ``calibration_note``.
    """

    name: ClassVar[str] = ""
    aliases: ClassVar[tuple[str, ...]] = ()
    relations: ClassVar[tuple[Relation, ...]] = (Relation.ADD_REMOVE,)
    any_accountant: ClassVar[bool] = True
    per_epoch: ClassVar[bool] = False
    amplifies: ClassVar[bool] = True
    random_batch_size: ClassVar[bool] = False
    group_analysis: ClassVar[GroupAnalysis] = GroupAnalysis.NONE
    group_reason: ClassVar[str] = "not applicable: the scheme declares no certified group analysis"
    group_summary: ClassVar[str] = ""
    options: ClassVar[tuple[str, ...]] = ()
    free_fields: ClassVar[tuple[str, ...]] = ()
    summary: ClassVar[str] = ""
    caveat: ClassVar[str | None] = None
    report_caveat: ClassVar[str | None] = None
    calibration_note: ClassVar[str | None] = None

    # ---- what the run is (each scheme has ``sampling_rate``, a field or a property: the expected fraction of
    # the data in one step; the epoch-based ones ``steps_per_epoch``)
    def epoch_length(self) -> int | None:
        """Steps of one epoch (``None`` where the scheme has no epochs of its own)."""
        return getattr(self, "steps_per_epoch", None)

    def batches_per_epoch(self) -> int:
        """The steps one pass over the data counts (``steps = ceil(epochs * batches_per_epoch)``)."""
        return self.epoch_length() or math.ceil(1.0 / self.sampling_rate)  # type: ignore[attr-defined]

    def check_steps(self, steps: int) -> int:
        """``steps`` validated for this scheme (whole epochs for the epoch-based ones)."""
        t = self.epoch_length()
        if self.per_epoch and t and steps % t:
            raise ValueError(f"steps ({steps}) must be a whole number of epochs of {t} steps "
                             f"(1/sampling_rate) for this sampling scheme")
        return steps

    def default_relation(self) -> Relation:
        return self.relations[0]

    def describe(self) -> str:
        """One line naming the scheme that was accounted, with its parameters."""
        fields = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in dataclasses.fields(self))
        return f"{self.name} ({fields}): {self.summary}"

    def to_dict(self) -> dict[str, Any]:
        return {"sampling": self.name, **{f.name: getattr(self, f.name) for f in dataclasses.fields(self)}}

    def with_value(self, field: str, value) -> "SamplingScheme":
        """A copy with ``field`` set (calibration); only ``free_fields`` may change."""
        if field not in self.free_fields:
            raise ValueError(f"{field} of sampling {self.name!r} cannot be calibrated (free: "
                             f"{', '.join(self.free_fields) or 'none'})")
        return dataclasses.replace(self, **{field: value})

    # ---- accounting
    def step_mechanism(self, *, noise_multiplier: float, relation: Relation | None = None) -> Mechanism | None:
        """One step's mechanism for the accountants, or ``None`` where only ``epsilon`` answers."""
        return None

    def epsilon(self, run, *, delta: float, accountant: str = DEFAULT_ACCOUNTANT,
                eps_error: float | None = None, rel_error: float | None = None) -> Bounds:
        """Bounds on the epsilon of ``run`` (a ``tightdp.runs.TrainingRun`` of this scheme) at ``delta``: by
        default ``run.steps`` compositions of ``step_mechanism`` under ``accountant``."""
        mech = self.step_mechanism(noise_multiplier=run.noise_multiplier, relation=run.relation)
        if mech is None:  # pragma: no cover - a scheme without a step mechanism overrides this
            raise UnsupportedMechanismError(f"sampling {self.name!r} has no step mechanism")
        acc = create(accountant, eps_error=eps_error, rel_error=rel_error)
        acc.compose(mech, run.steps)
        return acc.epsilon(delta)

    def _dominance_only(self, accountant: str) -> None:
        if accountant != DEFAULT_ACCOUNTANT:
            raise ValueError(f"accountant must be {DEFAULT_ACCOUNTANT!r} for sampling={self.name!r} (its bounds "
                             f"come from dominance pairs only), got {accountant!r}")

    # ---- group privacy
    def group_step(self, *, noise_multiplier: float, group_size: int) -> Mechanism:
        """One step as seen by a group of up to ``group_size`` (``GroupAnalysis.MIXTURE`` schemes)."""
        raise UnsupportedMechanismError(f"group privacy for sampling={self.name!r}: {self.group_reason}")

    def group_lemma_step(self, *, noise_multiplier: float) -> Mechanism | None:
        """The one-epoch mechanism whose certified curve the group-privacy lemma uses
        (``GroupAnalysis.NO_AMPLIFICATION``; ``None``: the GDP bound alone)."""
        return None

    # ---- plain language
    def sentence(self) -> str:
        """The statement's sentence on how batches were drawn, with this scheme's numbers."""
        return self.summary

    @classmethod
    def relation_sentence(cls, relation: Relation | str | None = None) -> str:
        """The statement's sentence on the neighbouring relation (default: the scheme's own)."""
        return _RELATION_SENTENCES[Relation(relation) if relation is not None else cls.relations[0]]

    @classmethod
    def group_sentence(cls) -> str | None:
        """The statement's paragraph on group privacy (``None``: no group analysis)."""
        return None

    # ---- construction from keywords
    @classmethod
    def from_options(cls, **options) -> "SamplingScheme":
        """The scheme from the convenience keywords ``sampling_rate``, ``dataset_size``, ``batch_size``,
        ``max_batch_size`` (``None``: not given), validated under those names."""
        raise NotImplementedError


_RELATION_SENTENCES = {
    Relation.ADD_REMOVE: ("Neighbouring data sets differ by adding or removing one example (add-or-remove "
                          "adjacency); the bound is the worse of the two directions."),
    Relation.REMOVE: "Neighbouring data sets differ by removing one example (only this direction is accounted).",
    Relation.ADD: "Neighbouring data sets differ by adding one example (only this direction is accounted).",
    Relation.SUBSTITUTE: ("Neighbouring data sets differ by replacing one example with another (substitute "
                          "relation); the data set size is the same for both and treated as public."),
    Relation.ZERO_OUT: ("Neighbouring data sets differ in one example being replaced by a zero-contribution "
                        "example (Chua et al.'s zero-out relation); the number of batches is public."),
}


# ------------------------------------------------------------------------------------------- registry
#: every accepted spelling (lower case, hyphens) -> its scheme class
SCHEMES: dict[str, type[SamplingScheme]] = {}

#: spellings refused because they name more than one scheme, with the reason
AMBIGUOUS: dict[str, str] = {
    "balls-and-bins": ("'balls-and-bins' is ambiguous: say 'random-allocation' (a fresh step for every example "
                       "in every epoch; tightdp's former 'balls-and-bins') or 'cyclic-allocation' (alias "
                       "'balls-in-bins-fixed': one step per example for the whole run, repeated every cycle; "
                       "jax_privacy's BallsInBinsSampling), which is much less private"),
}


#: the scheme a front end assumes when none is named
DEFAULT_SCHEME = "poisson"


def _key(name: str) -> str:
    return name.strip().lower().replace("_", "-")


def register_scheme(cls: type[SamplingScheme]) -> type[SamplingScheme]:
    """Class decorator: make ``cls`` known under ``cls.name`` and ``cls.aliases`` to every front end."""
    if not (isinstance(cls, type) and issubclass(cls, SamplingScheme)) or not cls.name:
        raise ValueError(f"register_scheme needs a SamplingScheme subclass with a name, got {cls!r}")
    for n in (cls.name, *cls.aliases):
        k = _key(n)
        if k in AMBIGUOUS or (k in SCHEMES and SCHEMES[k] is not cls):
            raise ValueError(f"sampling name {n!r} is already taken")
        SCHEMES[k] = cls
    return cls


def unregister_scheme(cls: type[SamplingScheme]) -> None:
    """Forget ``cls`` (for tests that register a scheme of their own)."""
    for k in [k for k, v in SCHEMES.items() if v is cls]:
        del SCHEMES[k]


def scheme_names(*, step_mechanism: bool | None = None) -> tuple[str, ...]:
    """The registered names (not aliases), in registration order; ``step_mechanism=False``: only those
    answered by their own certified function (dominance accountant), ``True``: only the others."""
    out = []
    for cls in dict.fromkeys(SCHEMES.values()):
        if step_mechanism is None or cls.any_accountant == step_mechanism:
            out.append(cls.name)
    return tuple(out)


def scheme_class(name, *, argument: str = "sampling") -> type[SamplingScheme]:
    """The class registered under ``name`` (any spelling: hyphens or underscores, any case; ``None``: the
    default, ``DEFAULT_SCHEME``)."""
    if isinstance(name, type) and issubclass(name, SamplingScheme):
        return name
    if name is None:
        name = DEFAULT_SCHEME
    if not isinstance(name, str):
        raise ValueError(f"{argument} must be a sampling scheme name or object (one of {', '.join(scheme_names())}),"
                         f" got {name!r}")
    k = _key(name)
    if k in AMBIGUOUS:
        raise ValueError(f"{argument}: {AMBIGUOUS[k]}")
    if k not in SCHEMES:
        raise ValueError(f"{argument} must be one of {', '.join(scheme_names())}; got {name!r}")
    return SCHEMES[k]


def parse_sampling(sampling, *, argument: str = "sampling", **options) -> SamplingScheme:
    """A scheme object from a name and the convenience keywords (``SamplingScheme.from_options``), or
    ``sampling`` itself when it is already a scheme object (then the keywords must not contradict it)."""
    if isinstance(sampling, SamplingScheme):
        return sampling
    return scheme_class(sampling, argument=argument).from_options(**options)


def _count(name: str, v) -> int | None:
    return None if v is None else check_count(name, v)


def _whole_steps_per_epoch(sampling_rate) -> int:
    q = check_probability("sampling_rate", sampling_rate)
    t = round(1.0 / q)
    if abs(t * q - 1.0) > 1e-9:
        raise ValueError(f"sampling_rate must be 1/t for a whole number t of steps per epoch "
                         f"(batch size = dataset size / t), got {sampling_rate!r}")
    return t


def _epoch_options(name: str, sampling_rate, dataset_size) -> int:
    if sampling_rate is None:
        raise ValueError(f"sampling_rate (1/t, t steps per epoch) is required for sampling={name!r}")
    t = _whole_steps_per_epoch(sampling_rate)
    if dataset_size is not None and check_count("dataset_size", dataset_size) < t:
        raise ValueError(f"dataset_size ({dataset_size}) must be at least the {t} steps per epoch "
                         "(batch size at least 1)")
    return t


# ------------------------------------------------------------------------------------------- schemes
@register_scheme
@dataclass(frozen=True, kw_only=True)
class Poisson(SamplingScheme):
    """Poisson sampling: each example joins each batch independently with probability ``sampling_rate``."""

    sampling_rate: float  # type: ignore[assignment]

    name: ClassVar[str] = "poisson"
    relations: ClassVar[tuple[Relation, ...]] = (Relation.ADD_REMOVE, Relation.REMOVE, Relation.ADD,
                                                 Relation.SUBSTITUTE)
    random_batch_size: ClassVar[bool] = True
    group_analysis: ClassVar[GroupAnalysis] = GroupAnalysis.MIXTURE
    group_summary: ClassVar[str] = "Poisson sampling, sensitivity Binom(k, q) (002 Thm 3.1)"
    options: ClassVar[tuple[str, ...]] = ("sampling_rate",)
    free_fields: ClassVar[tuple[str, ...]] = ("sampling_rate",)
    summary: ClassVar[str] = "Poisson sampling: each example joins every batch independently with probability q"

    def __post_init__(self):
        object.__setattr__(self, "sampling_rate", check_probability("sampling_rate", self.sampling_rate))

    def step_mechanism(self, *, noise_multiplier, relation=None):
        rel = Relation(relation or self.default_relation()).value
        return PoissonSampled(mechanism=Gaussian(noise_multiplier=noise_multiplier),
                              sampling_rate=self.sampling_rate, relation=rel)

    def group_step(self, *, noise_multiplier, group_size):
        return GroupPoissonSampled(noise_multiplier=noise_multiplier, sampling_rate=self.sampling_rate,
                                   group_size=group_size)

    def sentence(self):
        return (f"Sampling: Poisson. At every step each example joins the batch independently with probability "
                f"q = {self.sampling_rate:.6g}, so batch sizes vary (the sampling of Opacus and of dp_accounting's "
                f"DP-SGD helpers).")

    @classmethod
    def group_sentence(cls):
        return _MIXTURE_GROUP_SENTENCE

    @classmethod
    def from_options(cls, *, sampling_rate=None, **_):
        if sampling_rate is None:
            raise ValueError("sampling_rate is required for sampling='poisson'")
        return cls(sampling_rate=sampling_rate)


_MIXTURE_GROUP_SENTENCE = (
    "Group privacy: a group is any set of up to k examples added or removed together (e.g. all records of one "
    "user, if no user has more than k). Its epsilon is computed directly from the group's mixture-of-Gaussians "
    "mechanism (Ganesh [002] Thm 3.1 / 3.3), not by the much looser group-privacy lemma.")


@dataclass(frozen=True, kw_only=True)
class _Batches(SamplingScheme):
    """Batches of exactly ``batch_size`` out of ``dataset_size`` (the shared fields and checks)."""

    batch_size: int
    dataset_size: int

    options: ClassVar[tuple[str, ...]] = ("sampling_rate", "dataset_size", "batch_size")

    def __post_init__(self):
        object.__setattr__(self, "batch_size", check_count("batch_size", self.batch_size))
        object.__setattr__(self, "dataset_size", check_count("dataset_size", self.dataset_size))
        if self.batch_size > self.dataset_size:
            raise ValueError(f"batch_size ({self.batch_size}) must be <= dataset_size ({self.dataset_size})")

    @property
    def sampling_rate(self) -> float:
        return self.batch_size / self.dataset_size

    def batches_per_epoch(self) -> int:
        return math.ceil(self.dataset_size / self.batch_size)


@register_scheme
@dataclass(frozen=True, kw_only=True)
class FixedBatch(_Batches):
    """Fixed batches of ``batch_size`` drawn without replacement from at least ``dataset_size`` other examples,
    add/remove neighbours: the mixture of Gaussians with sensitivity ``2 Hypergeom(B, N + k, k)``
    (Ganesh [002] Thm 3.3; ``k = 1`` for one example)."""

    name: ClassVar[str] = "fixed-batch"
    group_analysis: ClassVar[GroupAnalysis] = GroupAnalysis.MIXTURE
    group_summary: ClassVar[str] = "fixed batch size, sensitivity 2 Hypergeom(B, N + k, k) (002 Thm 3.3)"
    summary: ClassVar[str] = "fixed batches of B drawn without replacement, add/remove neighbours (002 Thm 3.3)"

    def step_mechanism(self, *, noise_multiplier, relation=None):
        return self.group_step(noise_multiplier=noise_multiplier, group_size=1)

    def group_step(self, *, noise_multiplier, group_size):
        return GroupFixedBatchSampled(noise_multiplier=noise_multiplier, batch_size=self.batch_size,
                                      dataset_size=self.dataset_size, group_size=group_size)

    def sentence(self):
        return (f"Sampling: fixed batches. Every step draws exactly B = {self.batch_size} examples uniformly "
                f"without replacement from a data set of at least N = {self.dataset_size} examples besides the "
                f"protected ones.")

    @classmethod
    def relation_sentence(cls, relation=None):
        return ("Neighbouring data sets differ by adding or removing one example (groups: up to k examples) to a "
                "data set of at least N others; with fixed batches a present example displaces another, so it "
                "moves the clipped-gradient sum by up to twice the clipping norm (Ganesh [002] Thm 3.3).")

    @classmethod
    def group_sentence(cls):
        return _MIXTURE_GROUP_SENTENCE

    @classmethod
    def from_options(cls, *, dataset_size=None, batch_size=None, **_):
        if dataset_size is None or batch_size is None:
            raise ValueError("sampling='fixed-batch' needs both dataset_size and batch_size")
        return cls(batch_size=batch_size, dataset_size=dataset_size)


class _Substitute:
    relations: ClassVar[tuple[Relation, ...]] = (Relation.SUBSTITUTE,)
    group_reason: ClassVar[str] = ("no group analysis for the substitute relation; use sampling='fixed-batch' "
                                   "(add/remove of a group, 002 Thm 3.3)")


@register_scheme
@dataclass(frozen=True, kw_only=True)
class WithoutReplacement(_Substitute, _Batches):
    """Batches of ``batch_size`` distinct records out of ``dataset_size``, substitute relation (001 Sec. 6.2)."""

    name: ClassVar[str] = "without-replacement"
    summary: ClassVar[str] = "fixed batches drawn without replacement, substitute neighbours (001 Sec. 6.2)"

    def step_mechanism(self, *, noise_multiplier, relation=None):
        return SampledWithoutReplacement(mechanism=Gaussian(noise_multiplier=noise_multiplier),
                                         sample_size=self.batch_size, dataset_size=self.dataset_size)

    def sentence(self):
        return (f"Sampling: fixed batches. Every step draws a batch uniformly without replacement (sampling rate "
                f"{self.sampling_rate:.6g}), independently across steps.")

    @classmethod
    def from_options(cls, *, sampling_rate=None, dataset_size=None, batch_size=None, **_):
        if dataset_size is not None and batch_size is not None:
            return cls(batch_size=batch_size, dataset_size=dataset_size)
        if sampling_rate is None:
            raise ValueError("sampling='without-replacement' needs dataset_size and batch_size (or sampling_rate)")
        # under the substitute relation the answer depends on q = B / N alone: any exact B / N will do
        q = check_probability("sampling_rate", sampling_rate)
        f = Fraction(q).limit_denominator(10 ** 9)
        if f.numerator < 1 or f.numerator / f.denominator != q:
            raise ValueError(f"sampling_rate {q!r} is not a ratio B / N with N <= 1e9; give dataset_size and "
                             "batch_size")
        return cls(batch_size=f.numerator, dataset_size=f.denominator)


@register_scheme
@dataclass(frozen=True, kw_only=True)
class WithReplacement(_Substitute, _Batches):
    """``batch_size`` draws with replacement from ``dataset_size`` records, substitute relation (001 Sec. 6.3)."""

    name: ClassVar[str] = "with-replacement"
    summary: ClassVar[str] = "batches drawn with replacement, substitute neighbours (001 Sec. 6.3)"

    def step_mechanism(self, *, noise_multiplier, relation=None):
        return SampledWithReplacement(mechanism=Gaussian(noise_multiplier=noise_multiplier),
                                      sample_size=self.batch_size, dataset_size=self.dataset_size)

    def sentence(self):
        return (f"Sampling: with replacement. Every step draws B = {self.batch_size} examples uniformly with "
                f"replacement from N = {self.dataset_size}, independently across steps.")

    @classmethod
    def from_options(cls, *, sampling_rate=None, dataset_size=None, batch_size=None, **_):
        if dataset_size is None:
            raise ValueError("dataset_size is required for sampling='with-replacement' (with replacement the "
                             "answer depends on N, not only on q)")
        n = check_count("dataset_size", dataset_size)
        if batch_size is None:
            if sampling_rate is None:
                raise ValueError("sampling='with-replacement' needs batch_size (or sampling_rate)")
            batch_size = max(1, round(check_probability("sampling_rate", sampling_rate) * n))
        return cls(batch_size=batch_size, dataset_size=n)


@dataclass(frozen=True, kw_only=True)
class _Epochs(SamplingScheme):
    """A scheme that runs whole epochs of ``steps_per_epoch`` steps (certified function, dominance only)."""

    any_accountant: ClassVar[bool] = False
    per_epoch: ClassVar[bool] = True
    options: ClassVar[tuple[str, ...]] = ("sampling_rate", "dataset_size")

    @property
    def sampling_rate(self) -> float:
        return 1.0 / self.epoch_length()  # type: ignore[operator]


_NO_AMPLIFICATION_LEMMA = (
    "Group privacy: a group is any set of up to k examples added or removed together. Its upper bound is the "
    "smaller of the group-privacy lemma (Ganesh [002] Lemma 1.1) on the certified example-level curve and k "
    "sqrt(epochs)/sigma-GDP without amplification; its lower bound is the example-level one (no tight group "
    "analysis of this sampling is known), so the interval is wide.")


@register_scheme
@dataclass(frozen=True, kw_only=True)
class RandomAllocation(_Epochs):
    """Every epoch each example is used in ``selected`` of the epoch's ``steps_per_epoch`` steps, drawn afresh
    every epoch (Feldman & Shenfeld 2602.17284; ``tightdp.schemes.allocation_epsilon``)."""

    steps_per_epoch: int  # type: ignore[assignment]
    selected: int = 1

    name: ClassVar[str] = "random-allocation"
    aliases: ClassVar[tuple[str, ...]] = ("balls-in-bins-fresh",)
    summary: ClassVar[str] = ("random allocation: every epoch each example is used in one of the epoch's steps, "
                              "drawn afresh every epoch")
    report_caveat: ClassVar[str | None] = (
        "Random allocation (each example in exactly one step per epoch, drawn afresh every epoch): both ends are "
        "certified (Feldman & Shenfeld 2026's PLD realisation, made certified by dominance). Poisson accounting "
        "describes a different sampling; it is the right figure only if batches were Poisson-sampled. This is "
        "not jax_privacy's balls-in-bins, which fixes each example's step for the whole run (cyclic-allocation).")

    def __post_init__(self):
        object.__setattr__(self, "steps_per_epoch", check_count("steps_per_epoch", self.steps_per_epoch))
        object.__setattr__(self, "selected", check_count("selected", self.selected))
        if self.selected > self.steps_per_epoch:
            raise ValueError(f"selected ({self.selected}) must be <= steps_per_epoch ({self.steps_per_epoch})")

    @property
    def sampling_rate(self) -> float:
        return self.selected / self.steps_per_epoch

    @property
    def group_analysis(self) -> GroupAnalysis:  # type: ignore[override]
        return GroupAnalysis.NO_AMPLIFICATION if self.selected == 1 else GroupAnalysis.NONE

    @property
    def group_reason(self) -> str:  # type: ignore[override]
        return "" if self.selected == 1 else ("not applicable: no certified group analysis of random allocation "
                                              "with more than one step per epoch is implemented")

    def epsilon(self, run, *, delta, accountant=DEFAULT_ACCOUNTANT, eps_error=None, rel_error=None):
        from .schemes import allocation_epsilon

        self._dominance_only(accountant)
        return allocation_epsilon(noise_multiplier=run.noise_multiplier, num_steps=self.steps_per_epoch,
                                  epochs=run.steps // self.steps_per_epoch, delta=delta,
                                  num_selected=self.selected, eps_error=eps_error, rel_error=rel_error)

    def group_lemma_step(self, *, noise_multiplier):
        from .mechanisms import RandomAllocation as AllocationMechanism

        return AllocationMechanism(mechanism=Gaussian(noise_multiplier=noise_multiplier),
                                   num_steps=self.steps_per_epoch)

    def sentence(self):
        which = "one" if self.selected == 1 else f"{self.selected}"
        return (f"Sampling: random allocation, a fresh step every epoch. In every epoch each example is used in "
                f"exactly {which} of the {self.steps_per_epoch} steps, chosen uniformly at random and "
                f"independently (not jax_privacy's balls-in-bins, which fixes the step for the whole run).")

    @classmethod
    def group_sentence(cls):
        return _NO_AMPLIFICATION_LEMMA

    @classmethod
    def from_options(cls, *, sampling_rate=None, dataset_size=None, **_):
        return cls(steps_per_epoch=_epoch_options(cls.name, sampling_rate, dataset_size))


@register_scheme
@dataclass(frozen=True, kw_only=True)
class CyclicAllocation(_Epochs):
    """Each example is assigned **one** of ``steps_per_cycle`` steps, uniformly, once for the whole run; every
    cycle repeats the assignment (Choquette-Choo et al. ICLR 2025's balls-in-bins; jax_privacy's
    ``BallsInBinsSampling(iterations, cycle_length)``, see ``from_jax_privacy``).
    ``tightdp.schemes.cyclic_allocation_epsilon``."""

    steps_per_cycle: int

    name: ClassVar[str] = "cyclic-allocation"
    aliases: ClassVar[tuple[str, ...]] = ("balls-in-bins-fixed",)
    group_reason: ClassVar[str] = ("not applicable: no certified group analysis of a fixed (cyclic) assignment "
                                   "is implemented")
    summary: ClassVar[str] = ("cyclic allocation: each example is assigned one step of the cycle once for the "
                              "whole run, repeated every cycle (jax_privacy's BallsInBinsSampling)")
    report_caveat: ClassVar[str | None] = (
        "Cyclic allocation (jax_privacy's balls-in-bins: each example's step drawn once for the whole run and "
        "repeated every cycle): far less private than a fresh allocation every epoch; Poisson accounting "
        "describes a different sampling.")

    def __post_init__(self):
        object.__setattr__(self, "steps_per_cycle", check_count("steps_per_cycle", self.steps_per_cycle))

    @property
    def steps_per_epoch(self) -> int:
        return self.steps_per_cycle

    def check_steps(self, steps):
        return steps  # a partial last cycle is accounted too (``cyclic_allocation_epsilon(steps=...)``)

    def epsilon(self, run, *, delta, accountant=DEFAULT_ACCOUNTANT, eps_error=None, rel_error=None):
        from .schemes import cyclic_allocation_epsilon

        self._dominance_only(accountant)
        return cyclic_allocation_epsilon(noise_multiplier=run.noise_multiplier, steps_per_cycle=self.steps_per_cycle,
                                         steps=run.steps, delta=delta, eps_error=eps_error, rel_error=rel_error)

    def sentence(self):
        return (f"Sampling: cyclic allocation (jax_privacy's balls-in-bins). Each example is assigned one of the "
                f"{self.steps_per_cycle} steps of a cycle, uniformly at random, once for the whole run; every "
                f"cycle uses the same assignment.")

    @classmethod
    def from_options(cls, *, sampling_rate=None, dataset_size=None, **_):
        return cls(steps_per_cycle=_epoch_options(cls.name, sampling_rate, dataset_size))


def from_jax_privacy(*, iterations: int, cycle_length: int) -> tuple[CyclicAllocation, int]:
    """``(scheme, steps)`` of jax_privacy's ``BallsInBinsSampling(iterations, cycle_length)``: one bin per
    example for the whole run, repeated every ``cycle_length`` steps (a partial last cycle allowed), so
    ``CyclicAllocation`` and never the fresh-every-epoch ``RandomAllocation``."""
    iterations = check_count("iterations", iterations)
    scheme = CyclicAllocation(steps_per_cycle=check_count("cycle_length", cycle_length))
    return scheme, scheme.check_steps(iterations)


@register_scheme
@dataclass(frozen=True, kw_only=True)
class Shuffle(_Epochs):
    """A fresh uniformly random permutation every epoch, cut into ``steps_per_epoch`` fixed batches; zero-out
    neighbours (Chua et al. 2403.17673; ``tightdp.schemes.shuffle_epsilon``)."""

    steps_per_epoch: int  # type: ignore[assignment]

    name: ClassVar[str] = "shuffle"
    relations: ClassVar[tuple[Relation, ...]] = (Relation.ZERO_OUT,)
    amplifies: ClassVar[bool] = False
    group_analysis: ClassVar[GroupAnalysis] = GroupAnalysis.NO_AMPLIFICATION
    summary: ClassVar[str] = "shuffling: a fresh random permutation cut into fixed batches every epoch"
    report_caveat: ClassVar[str | None] = (
        "Shuffled fixed batches: no amplification theorem is known. The upper end is the guarantee without "
        "amplification (sqrt(epochs)/σ-GDP), the lower end Chua et al.'s attack (2403.17673); the true ε lies in "
        "between and no theorem closes the gap. Publishing Poisson accounting's ε for shuffled training is not "
        "backed by any theorem.")
    caveat: ClassVar[str | None] = (
        "For shuffled batches no amplification theorem is known: the upper end is the guarantee without "
        "amplification, the lower end Chua et al.'s attack; the true epsilon is in between.")
    calibration_note: ClassVar[str | None] = (
        "shuffled batches: the certified upper bound is the one without amplification (no tighter certified "
        "bound is known), so this is the noise that bound needs; the certified lower bound (Chua et al.'s "
        "attack) cannot prove tightness")

    def __post_init__(self):
        object.__setattr__(self, "steps_per_epoch", check_count("steps_per_epoch", self.steps_per_epoch))

    def epsilon(self, run, *, delta, accountant=DEFAULT_ACCOUNTANT, eps_error=None, rel_error=None):
        from .schemes import shuffle_epsilon

        self._dominance_only(accountant)
        return shuffle_epsilon(noise_multiplier=run.noise_multiplier, num_batches=self.steps_per_epoch,
                               epochs=run.steps // self.steps_per_epoch, delta=delta, eps_error=eps_error,
                               rel_error=rel_error)

    def sentence(self):
        return (f"Sampling: shuffling. Every epoch a fresh uniformly random permutation of the data is cut into "
                f"1/q = {self.steps_per_epoch} consecutive batches.")

    @classmethod
    def group_sentence(cls):
        return ("Group privacy: a group is any set of up to k examples zeroed out together. Its upper bound is "
                "k sqrt(epochs)/sigma-GDP (no amplification; Dong, Roth, Su 2022 Thm 2.14); its lower bound is "
                "the example-level one (no tight group analysis of this sampling is known), so the interval is "
                "wide.")

    @classmethod
    def from_options(cls, *, sampling_rate=None, dataset_size=None, **_):
        return cls(steps_per_epoch=_epoch_options(cls.name, sampling_rate, dataset_size))


@register_scheme
@dataclass(frozen=True, kw_only=True)
class FixedOrder(_Epochs):
    """The data in one fixed order, cut into ``steps_per_epoch`` batches, the same every epoch (a
    ``SequentialSampler``): each example is in one known step per epoch, so ``E`` epochs are exactly the
    Gaussian mechanism composed ``E`` times (``sqrt(E)/sigma``-GDP), certified on both sides."""

    steps_per_epoch: int  # type: ignore[assignment]

    name: ClassVar[str] = "fixed-order"
    amplifies: ClassVar[bool] = False
    group_analysis: ClassVar[GroupAnalysis] = GroupAnalysis.NO_AMPLIFICATION
    summary: ClassVar[str] = "fixed order: the same batches every epoch, each example in one known step"
    report_caveat: ClassVar[str | None] = (
        "Fixed-order batches: no sampling randomness, so no amplification; the interval is the Gaussian mechanism "
        "composed once per epoch, which is exact.")

    def __post_init__(self):
        object.__setattr__(self, "steps_per_epoch", check_count("steps_per_epoch", self.steps_per_epoch))

    def epsilon(self, run, *, delta, accountant=DEFAULT_ACCOUNTANT, eps_error=None, rel_error=None):
        self._dominance_only(accountant)
        acc = create(accountant, eps_error=eps_error, rel_error=rel_error)
        out = acc.compose(Gaussian(noise_multiplier=run.noise_multiplier), run.steps // self.steps_per_epoch)
        return out.epsilon(delta)

    def sentence(self):
        return (f"Sampling: fixed order. The data is cut into the same {self.steps_per_epoch} batches every epoch, "
                "so each example is used in one known step per epoch.")

    @classmethod
    def group_sentence(cls):
        return ("Group privacy: a group is any set of up to k examples added or removed together. Its upper bound "
                "is k sqrt(epochs)/sigma-GDP (each epoch moves the sum by at most k); its lower bound is the "
                "example-level one, so the interval is wide.")

    @classmethod
    def from_options(cls, *, sampling_rate=None, dataset_size=None, **_):
        return cls(steps_per_epoch=_epoch_options(cls.name, sampling_rate, dataset_size))


@register_scheme
@dataclass(frozen=True, kw_only=True)
class TruncatedPoisson(SamplingScheme):
    """Poisson batches at ``sampling_rate`` cut to at most ``max_batch_size`` of ``dataset_size`` records
    (Ganesh 2025, 2508.15089; dp_accounting's ``TruncatedSubsampledGaussianDpEvent``;
    ``tightdp.schemes.truncated_poisson_epsilon``)."""

    sampling_rate: float  # type: ignore[assignment]
    dataset_size: int
    max_batch_size: int

    name: ClassVar[str] = "truncated-poisson"
    any_accountant: ClassVar[bool] = False
    random_batch_size: ClassVar[bool] = True
    group_reason: ClassVar[str] = (
        "not applicable: Ganesh 2025's dominating pair holds for one data-set size, while a group's add/remove "
        "chain passes through several and added records can displace others from a truncated batch; no "
        "certified group analysis for truncated Poisson is known")
    options: ClassVar[tuple[str, ...]] = ("sampling_rate", "dataset_size", "max_batch_size")
    free_fields: ClassVar[tuple[str, ...]] = ("sampling_rate",)
    summary: ClassVar[str] = "truncated Poisson: Poisson batches cut to a maximum size"
    report_caveat: ClassVar[str | None] = (
        "Truncated Poisson (batches capped at max_batch_size): the upper end is Ganesh 2025's dominating pair "
        "(dp-accounting's construction), the lower end Poisson sampling at the probability that a record survives "
        "the cut; the gap is the price of the analysis.")
    calibration_note: ClassVar[str | None] = (
        "truncated Poisson: the certified interval is as wide as the gap between Ganesh 2025's dominating pair "
        "and the explicit lower bound, so tightness can only be shown within that gap")

    def __post_init__(self):
        object.__setattr__(self, "sampling_rate", check_probability("sampling_rate", self.sampling_rate))
        object.__setattr__(self, "dataset_size", check_count("dataset_size", self.dataset_size))
        object.__setattr__(self, "max_batch_size", check_count("max_batch_size", self.max_batch_size))
        if self.max_batch_size > self.dataset_size:
            raise ValueError(f"max_batch_size ({self.max_batch_size}) must be <= dataset_size ({self.dataset_size})")

    def epsilon(self, run, *, delta, accountant=DEFAULT_ACCOUNTANT, eps_error=None, rel_error=None):
        from .schemes import truncated_poisson_epsilon

        self._dominance_only(accountant)
        return truncated_poisson_epsilon(noise_multiplier=run.noise_multiplier, sampling_rate=self.sampling_rate,
                                         dataset_size=self.dataset_size, max_batch_size=self.max_batch_size,
                                         steps=run.steps, delta=delta, eps_error=eps_error, rel_error=rel_error)

    def sentence(self):
        return (f"Sampling: truncated Poisson. Poisson batches at rate q = {self.sampling_rate:.6g} cut to at most "
                f"{self.max_batch_size} examples out of {self.dataset_size}.")

    @classmethod
    def from_options(cls, *, sampling_rate=None, dataset_size=None, max_batch_size=None, **_):
        missing = [n for n, v in (("dataset_size", dataset_size), ("max_batch_size", max_batch_size)) if v is None]
        if missing:
            raise ValueError(f"{' and '.join(missing)} required: sampling='truncated-poisson' needs dataset_size and "
                             "max_batch_size")
        if sampling_rate is None:
            raise ValueError("sampling_rate is required for sampling='truncated-poisson'")
        return cls(sampling_rate=sampling_rate, dataset_size=dataset_size, max_batch_size=max_batch_size)


def scheme_from_dict(d: Mapping[str, Any]) -> SamplingScheme:
    """Inverse of ``SamplingScheme.to_dict``."""
    d = dict(d)
    cls = scheme_class(d.pop("sampling", None))
    return cls(**d)


__all__.append("scheme_from_dict")

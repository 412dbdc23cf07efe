"""The base of the sampling schemes: the neighbouring relation, what group privacy can say, the abstract
``SamplingScheme`` and the one registry of their names (``SCHEMES``, ``register_scheme``, ``scheme_class``,
``parse_sampling``). The schemes themselves: ``tightdp.sampling.independent`` (every step drawn on its
own) and ``tightdp.sampling.epochs`` (epochs or cycles of steps)."""

from __future__ import annotations

import dataclasses
import enum
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from .._validation import check_count, check_probability
from ..accountants import DEFAULT_ACCOUNTANT, create
from ..bounds import Bounds
from ..errors import UnsupportedMechanismError
from ..mechanisms import Mechanism

__all__ = [
    "Relation",
    "GroupAnalysis",
    "SamplingScheme",
    "SCHEMES",
    "AMBIGUOUS",
    "DEFAULT_SCHEME",
    "register_scheme",
    "unregister_scheme",
    "scheme_class",
    "scheme_names",
    "parse_sampling",
    "scheme_from_dict",
]


class Relation(enum.StrEnum):
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
class SamplingScheme(ABC):
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
            raise ValueError(
                f"steps ({steps}) must be a whole number of epochs of {t} steps "
                f"(1/sampling_rate) for this sampling scheme"
            )
        return steps

    def default_relation(self) -> Relation:
        return self.relations[0]

    def describe(self) -> str:
        """One line naming the scheme that was accounted, with its parameters."""
        fields = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in dataclasses.fields(self))
        return f"{self.name} ({fields}): {self.summary}"

    def to_dict(self) -> dict[str, Any]:
        return {"sampling": self.name, **{f.name: getattr(self, f.name) for f in dataclasses.fields(self)}}

    def with_value(self, field: str, value) -> SamplingScheme:
        """A copy with ``field`` set (calibration); only ``free_fields`` may change."""
        if field not in self.free_fields:
            raise ValueError(
                f"{field} of sampling {self.name!r} cannot be calibrated (free: "
                f"{', '.join(self.free_fields) or 'none'})"
            )
        return dataclasses.replace(self, **{field: value})

    # ---- accounting
    def step_mechanism(self, *, noise_multiplier: float, relation: Relation | None = None) -> Mechanism | None:
        """One step's mechanism for the accountants, or ``None`` where only ``epsilon`` answers."""
        return None

    def epsilon(
        self,
        run,
        *,
        delta: float,
        accountant: str = DEFAULT_ACCOUNTANT,
        eps_error: float | None = None,
        rel_error: float | None = None,
    ) -> Bounds:
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
            raise ValueError(
                f"accountant must be {DEFAULT_ACCOUNTANT!r} for sampling={self.name!r} (its bounds "
                f"come from dominance pairs only), got {accountant!r}"
            )

    # ---- group privacy
    def group_step(self, *, noise_multiplier: float, group_size: int) -> Mechanism:
        """One step as seen by a group of up to ``group_size`` (``GroupAnalysis.MIXTURE`` schemes)."""
        if self.group_analysis is GroupAnalysis.NO_AMPLIFICATION:
            raise UnsupportedMechanismError(
                f"sampling={self.name!r} has no per-step group mechanism; "
                "tightdp.group_epsilon gives its bound without amplification"
            )
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
    @abstractmethod
    def from_options(cls, **options) -> SamplingScheme:
        """The scheme from the convenience keywords ``sampling_rate``, ``dataset_size``, ``batch_size``,
        ``max_batch_size`` (``None``: not given), validated under those names."""


_RELATION_SENTENCES = {
    Relation.ADD_REMOVE: (
        "Neighbouring data sets differ by adding or removing one example (add-or-remove "
        "adjacency); the bound is the worse of the two directions."
    ),
    Relation.REMOVE: "Neighbouring data sets differ by removing one example (only this direction is accounted).",
    Relation.ADD: "Neighbouring data sets differ by adding one example (only this direction is accounted).",
    Relation.SUBSTITUTE: (
        "Neighbouring data sets differ by replacing one example with another (substitute "
        "relation); the data set size is the same for both and treated as public."
    ),
    Relation.ZERO_OUT: (
        "Neighbouring data sets differ in one example being replaced by a zero-contribution "
        "example (Chua et al.'s zero-out relation); the number of batches is public."
    ),
}


# ------------------------------------------------------------------------------------------- registry
#: every accepted spelling (lower case, hyphens) -> its scheme class
SCHEMES: dict[str, type[SamplingScheme]] = {}

#: spellings refused because they name more than one scheme, with the reason
AMBIGUOUS: dict[str, str] = {
    "balls-and-bins": (
        "'balls-and-bins' is ambiguous: say 'random-allocation' (a fresh step for every example "
        "in every epoch; tightdp's former 'balls-and-bins') or 'cyclic-allocation' (alias "
        "'balls-in-bins-fixed': one step per example for the whole run, repeated every cycle; "
        "jax_privacy's BallsInBinsSampling), which is much less private"
    ),
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
        raise ValueError(
            f"{argument} must be a sampling scheme name or object (one of {', '.join(scheme_names())}), got {name!r}"
        )
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
        raise ValueError(
            f"sampling_rate must be 1/t for a whole number t of steps per epoch "
            f"(batch size = dataset size / t), got {sampling_rate!r}"
        )
    return t


def _epoch_options(name: str, sampling_rate, dataset_size) -> int:
    if sampling_rate is None:
        raise ValueError(f"sampling_rate (1/t, t steps per epoch) is required for sampling={name!r}")
    t = _whole_steps_per_epoch(sampling_rate)
    if dataset_size is not None and check_count("dataset_size", dataset_size) < t:
        raise ValueError(
            f"dataset_size ({dataset_size}) must be at least the {t} steps per epoch (batch size at least 1)"
        )
    return t


def scheme_from_dict(d: Mapping[str, Any]) -> SamplingScheme:
    """Inverse of ``SamplingScheme.to_dict``."""
    d = dict(d)
    cls = scheme_class(d.pop("sampling", None))
    return cls(**d)

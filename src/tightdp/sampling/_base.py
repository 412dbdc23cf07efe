"""The base of the sampling schemes: the neighbouring relation, what group privacy can say and the abstract
``SamplingScheme``. The one registry of their names is ``_registry``; the schemes themselves:
``tightdp.sampling.independent`` (every step drawn on its own) and ``tightdp.sampling.epochs`` (epochs or
cycles of steps)."""

from __future__ import annotations

import dataclasses
import enum
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from ..accountants import DEFAULT_ACCOUNTANT, create
from ..bounds import Bounds
from ..errors import UnsupportedMechanismError
from ..mechanisms import Mechanism

__all__ = ["Relation", "GroupAnalysis", "RunLike", "SamplingScheme"]


class Relation(enum.StrEnum):
    """The neighbouring relation a guarantee is stated for.

    Parameters
    ----------
    value : str
        The relation's spelling: ``"add-remove"``, ``"remove"``, ``"add"``, ``"substitute"`` or ``"zero-out"``
        (``Relation("substitute")`` is ``Relation.SUBSTITUTE``).
    names, module, qualname, type, start, boundary : optional
        The arguments of ``enum``'s functional API (creating a new enumeration); not used by tightdp.

    Raises
    ------
    ValueError
        If ``value`` is not one of the spellings.
    """

    ADD_REMOVE = "add-remove"
    REMOVE = "remove"
    ADD = "add"
    SUBSTITUTE = "substitute"
    ZERO_OUT = "zero-out"

    def __str__(self) -> str:
        return self.value


class GroupAnalysis(enum.Enum):
    """What group privacy (up to ``k`` examples) can say for a scheme (``tightdp.group``).

    Parameters
    ----------
    value : str
        ``"mixture"`` (the group's mixture-of-Gaussians step, Ganesh 2024, Thm 3.1 / 3.3),
        ``"no-amplification"`` or ``"none"``.
    names, module, qualname, type, start, boundary : optional
        The arguments of ``enum``'s functional API (creating a new enumeration); not used by tightdp.

    Raises
    ------
    ValueError
        If ``value`` is not one of the spellings.
    """

    MIXTURE = "mixture"  # the group's mixture-of-Gaussians step (Ganesh 2024, Thm 3.1 / 3.3), tight
    NO_AMPLIFICATION = "no-amplification"  # k sqrt(epochs)/sigma-GDP, with the group-privacy lemma if any
    NONE = "none"  # no certified group analysis: ``group_reason`` says why


class RunLike(Protocol):
    """What a scheme reads of a run (``tightdp.runs.TrainingRun``, which sits above this package)."""

    @property
    def noise_multiplier(self) -> float: ...
    @property
    def steps(self) -> int: ...
    @property
    def relation(self) -> Relation: ...


def _inherit_docstrings(cls: type) -> None:
    """Give each public method ``cls`` overrides without a docstring the docstring of the method it overrides:
    a scheme's override answers the same question under the same parameters."""
    for name, member in vars(cls).items():
        if name.startswith("_"):
            continue
        func = member.__func__ if isinstance(member, (classmethod, staticmethod)) else member
        if not callable(func) or getattr(func, "__doc__", None):
            continue
        for base in cls.__mro__[1:]:
            inherited = base.__dict__.get(name)
            inherited = inherited.__func__ if isinstance(inherited, (classmethod, staticmethod)) else inherited
            if getattr(inherited, "__doc__", None):
                func.__doc__ = inherited.__doc__
                break


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

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _inherit_docstrings(cls)

    # ---- what the run is (each scheme has ``sampling_rate``, a field or a property: the expected fraction of
    # the data in one step; the epoch-based ones ``steps_per_epoch``)
    def epoch_length(self) -> int | None:
        """Steps of one epoch.

        Returns
        -------
        int or None
            ``steps_per_epoch`` of an epoch-based scheme; ``None`` where the scheme has no epochs of its own.
        """
        length: int | None = getattr(self, "steps_per_epoch", None)
        return length

    def batches_per_epoch(self) -> int:
        """The steps one pass over the data counts (``steps = ceil(epochs * batches_per_epoch)``).

        Returns
        -------
        int
            The epoch length, else ``ceil(1 / sampling_rate)`` (fixed batches: ``ceil(N / B)``).
        """
        rate: float = getattr(self, "sampling_rate")  # noqa: B009 - every concrete scheme has one
        return self.epoch_length() or math.ceil(1.0 / rate)

    def check_steps(self, steps: int) -> int:
        """``steps`` validated for this scheme (whole epochs for the epoch-based ones).

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
            If the scheme runs whole epochs and ``steps`` is not a multiple of the epoch length.
        """
        t = self.epoch_length()
        if self.per_epoch and t and steps % t:
            raise ValueError(
                f"steps ({steps}) must be a whole number of epochs of {t} steps "
                f"(1/sampling_rate) for this sampling scheme"
            )
        return steps

    def default_relation(self) -> Relation:
        """The neighbouring relation the scheme's guarantee is stated for unless another is asked.

        Returns
        -------
        Relation
            The first of ``relations``.
        """
        return self.relations[0]

    def describe(self) -> str:
        """One line naming the scheme that was accounted, with its parameters.

        Returns
        -------
        str
            ``"name (field=value, ...): summary"``.
        """
        fields = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in dataclasses.fields(self))
        return f"{self.name} ({fields}): {self.summary}"

    def to_dict(self) -> dict[str, Any]:
        """The scheme as JSON-ready data (``scheme_from_dict`` is the inverse).

        Returns
        -------
        dict
            ``{"sampling": name, field: value, ...}``.
        """
        return {"sampling": self.name, **{f.name: getattr(self, f.name) for f in dataclasses.fields(self)}}

    def with_value(self, field: str, value: float) -> SamplingScheme:
        """A copy with ``field`` set (calibration); only ``free_fields`` may change.

        Parameters
        ----------
        field : str
            One of the scheme's ``free_fields`` (e.g. ``"sampling_rate"``).
        value : float
            Its new value, validated by the scheme's constructor.

        Returns
        -------
        SamplingScheme
            The copy.

        Raises
        ------
        ValueError
            If ``field`` is not free, or ``value`` is not valid for it.
        """
        if field not in self.free_fields:
            raise ValueError(
                f"{field} of sampling {self.name!r} cannot be calibrated (free: "
                f"{', '.join(self.free_fields) or 'none'})"
            )
        return dataclasses.replace(self, **{field: value})

    # ---- accounting
    def step_mechanism(self, *, noise_multiplier: float, relation: Relation | None = None) -> Mechanism | None:
        """One step's mechanism for the accountants, or ``None`` where only ``epsilon`` answers.

        Parameters
        ----------
        noise_multiplier : float
            The Gaussian noise multiplier sigma, > 0.
        relation : Relation, optional
            The neighbouring relation (default: the scheme's own, ``default_relation()``).

        Returns
        -------
        Mechanism or None
            The dominating pair of one step; ``None`` for a scheme accounted only by its certified function.

        Raises
        ------
        ValueError
            If ``noise_multiplier`` or ``relation`` is not valid for the scheme's mechanism.
        """
        return None

    def epsilon(
        self,
        run: RunLike,
        *,
        delta: float,
        accountant: str = DEFAULT_ACCOUNTANT,
        eps_error: float | None = None,
        rel_error: float | None = None,
    ) -> Bounds:
        """Bounds on the epsilon of ``run`` at ``delta``.

        By default ``run.steps`` compositions of ``step_mechanism`` under ``accountant``; a scheme without a
        step mechanism answers with its certified function of ``tightdp.schemes`` (dominance accountant only).

        Parameters
        ----------
        run : TrainingRun
            A ``tightdp.runs.TrainingRun`` of this scheme (its noise, steps and relation are read).
        delta : float
            The delta, in (0, 1).
        accountant : str, default ``DEFAULT_ACCOUNTANT``
            A registered accountant name (``tightdp.accountants.ACCOUNTANTS``).
        eps_error, rel_error : float, optional
            The accuracy (``tightdp._accuracy``; default: relative 1e-3).

        Returns
        -------
        Bounds
            Certified ``lower <= upper`` on epsilon (``upper`` a proven bound).

        Raises
        ------
        ValueError
            If an argument is out of its domain, or the scheme answers only under the dominance accountant
            and another is named.
        UnsupportedMechanismError
            If the scheme has neither a step mechanism nor a certified function of its own.
        """
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
        """One step as seen by a group of up to ``group_size`` (``GroupAnalysis.MIXTURE`` schemes).

        Parameters
        ----------
        noise_multiplier : float
            The Gaussian noise multiplier sigma, > 0.
        group_size : int
            The largest group ``k`` (``1``: one example), a positive whole number.

        Returns
        -------
        Mechanism
            The group's mixture-of-Gaussians step (Ganesh 2024, Thm 3.1 / 3.3).

        Raises
        ------
        UnsupportedMechanismError
            If the scheme has no per-step group mechanism (``group_reason`` says why).
        ValueError
            If an argument is out of its domain (e.g. a group larger than the data).
        """
        if self.group_analysis is GroupAnalysis.NO_AMPLIFICATION:
            raise UnsupportedMechanismError(
                f"sampling={self.name!r} has no per-step group mechanism; "
                "tightdp.group_epsilon gives its bound without amplification"
            )
        raise UnsupportedMechanismError(f"group privacy for sampling={self.name!r}: {self.group_reason}")

    def group_lemma_step(self, *, noise_multiplier: float) -> Mechanism | None:
        """The one-epoch mechanism whose certified curve the group-privacy lemma uses.

        Parameters
        ----------
        noise_multiplier : float
            The Gaussian noise multiplier sigma, > 0.

        Returns
        -------
        Mechanism or None
            The epoch's mechanism (``GroupAnalysis.NO_AMPLIFICATION`` schemes); ``None``: the GDP bound alone.

        Raises
        ------
        ValueError
            If ``noise_multiplier`` is not positive.
        """
        return None

    # ---- plain language
    def sentence(self) -> str:
        """The statement's sentence on how batches were drawn, with this scheme's numbers.

        Returns
        -------
        str
            One sentence.
        """
        return self.summary

    @classmethod
    def relation_sentence(cls, relation: Relation | str | None = None) -> str:
        """The statement's sentence on the neighbouring relation.

        Parameters
        ----------
        relation : Relation or str, optional
            The relation (default: the scheme's own, the first of ``relations``).

        Returns
        -------
        str
            One sentence.

        Raises
        ------
        ValueError
            If ``relation`` is not a ``Relation`` spelling.
        """
        return _RELATION_SENTENCES[Relation(relation) if relation is not None else cls.relations[0]]

    @classmethod
    def group_sentence(cls) -> str | None:
        """The statement's paragraph on group privacy.

        Returns
        -------
        str or None
            The paragraph; ``None``: no group analysis.
        """
        return None

    # ---- construction from keywords
    @classmethod
    @abstractmethod
    def from_options(
        cls,
        *,
        sampling_rate: float | None = None,
        dataset_size: int | None = None,
        batch_size: int | None = None,
        max_batch_size: int | None = None,
    ) -> SamplingScheme:
        """The scheme from the convenience keywords of the front ends (``None``: not given).

        Parameters
        ----------
        sampling_rate : float, optional
            The sampling rate ``q`` in (0, 1] (the epoch-based schemes: ``1/t``, ``t`` steps per epoch).
        dataset_size : int, optional
            The number of examples ``N``.
        batch_size : int, optional
            The (expected) batch size ``B``.
        max_batch_size : int, optional
            The cap on a batch (truncated Poisson).

        Returns
        -------
        SamplingScheme
            The scheme; the keywords it does not read are ignored (its ``options`` lists those it reads).

        Raises
        ------
        ValueError
            If a keyword the scheme needs is missing or out of its domain, named by its keyword.
        """


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

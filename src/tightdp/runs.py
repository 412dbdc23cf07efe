"""A DP-SGD training run as one object: noise, batch sampling, length, neighbouring relation.

``TrainingRun`` is what every front end takes (``dpsgd_epsilon(run=...)``, ``privacy_statement(run=...)``,
``group_epsilon(run=...)``, ``calibrate(run, ...)``) or builds from keywords (``TrainingRun.from_options``,
parsing the sampling name through the one registry, ``tightdp.sampling``). Like dp_accounting's
``DpEvent`` it describes what ran and nothing else; ``epsilon`` asks the scheme to account it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from ._validation import check_count, check_positive
from .accountants import DEFAULT_ACCOUNTANT
from .bounds import Bounds
from .mechanisms import Mechanism
from .sampling import Relation, SamplingScheme, parse_sampling, scheme_from_dict

__all__ = ["TrainingRun"]


@dataclass(frozen=True, kw_only=True)
class TrainingRun:
    """``steps`` DP-SGD steps with Gaussian noise ``noise_multiplier`` (unit clipping norm) and batches drawn
    by ``sampling`` (a ``tightdp.sampling`` scheme).

    Give ``steps`` or ``epochs`` (or both, if they agree): ``steps = ceil(epochs * batches per epoch)``
    (``ceil(N / B)`` or ``ceil(1 / q)``, as Opacus counts them); the epoch-based schemes need whole epochs.
    ``relation`` defaults to the scheme's own and must be one it supports.

    Parameters
    ----------
    noise_multiplier : float
        The noise multiplier sigma, > 0 (noise standard deviation over the clipping norm).
    sampling : SamplingScheme
        How the batches are drawn (a ``tightdp.sampling`` scheme object; ``from_options`` parses names).
    steps : int, optional
        The number of steps (required unless ``epochs`` is given); stored as an ``int`` in every case.
    epochs : float, optional
        The number of passes over the data (whole epochs for the epoch-based schemes).
    relation : Relation or str, optional
        The neighbouring relation (default: the scheme's own); stored as a ``Relation`` in every case.

    Raises
    ------
    ValueError
        If an argument is out of its domain, ``steps`` and ``epochs`` disagree (or neither is given), the
        steps are not whole epochs of an epoch-based scheme, or the scheme does not support ``relation``.

    Examples
    --------
    >>> from tightdp.sampling import Poisson
    >>> run = TrainingRun(noise_multiplier=1.1, sampling=Poisson(sampling_rate=0.01), epochs=2)
    >>> run.steps
    200
    """

    noise_multiplier: float
    sampling: SamplingScheme
    # ``None`` only as arguments: __post_init__ stores the steps (from ``epochs`` if need be) and the Relation
    steps: int = None  # type: ignore[assignment]
    epochs: float | None = None
    relation: Relation = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        object.__setattr__(self, "noise_multiplier", check_positive("noise_multiplier", self.noise_multiplier))
        if not isinstance(self.sampling, SamplingScheme):
            raise ValueError(
                f"sampling must be a tightdp.sampling scheme object, got {self.sampling!r} "
                "(TrainingRun.from_options parses names)"
            )
        scheme = self.sampling
        from_epochs = None
        if self.epochs is not None:
            e = check_positive("epochs", self.epochs)
            if scheme.per_epoch:
                from_epochs = check_count("epochs", e) * (scheme.epoch_length() or 1)
            else:
                from_epochs = math.ceil(e * scheme.batches_per_epoch() - 1e-9)
        if self.steps is not None:
            k = check_count("steps", self.steps)
            if from_epochs is not None and k != from_epochs:
                raise ValueError(
                    f"steps ({k}) conflicts with epochs ({self.epochs:g} epochs = {from_epochs} "
                    "steps); give one or the other"
                )
        elif from_epochs is None:
            raise ValueError("steps is required (or give epochs)")
        else:
            k = check_count("steps", from_epochs)
        object.__setattr__(self, "steps", scheme.check_steps(k))
        rel = scheme.default_relation() if self.relation is None else self.relation
        try:
            rel = Relation(rel)
        except ValueError:
            raise ValueError(
                f"relation must be one of {', '.join(r.value for r in Relation)}, got {self.relation!r}"
            ) from None
        if rel not in scheme.relations:
            raise ValueError(
                f"relation must be {' or '.join(r.value for r in scheme.relations)} for sampling="
                f"{scheme.name!r}, got {rel.value!r}"
            )
        object.__setattr__(self, "relation", rel)

    @classmethod
    def from_options(
        cls,
        *,
        noise_multiplier: float,
        sampling: str | SamplingScheme | None = "poisson",
        steps: int | None = None,
        epochs: float | None = None,
        relation: Relation | str | None = None,
        **options: Any,
    ) -> TrainingRun:
        """A run from the convenience keywords.

        Parameters
        ----------
        noise_multiplier : float
            The noise multiplier sigma, > 0.
        sampling : str or SamplingScheme, default ``"poisson"``
            A registered name (``tightdp.sampling.scheme_names()``) or a scheme object.
        steps : int, optional
            The number of steps.
        epochs : float, optional
            The number of passes over the data.
        relation : Relation or str, optional
            The neighbouring relation (default: the scheme's own).
        **options
            ``sampling_rate``, ``dataset_size``, ``batch_size``, ``max_batch_size``, as the scheme's
            ``from_options`` reads them.

        Returns
        -------
        TrainingRun
            The run.

        Raises
        ------
        ValueError
            If the name is not registered or an argument is out of its domain, naming the argument.
        """
        return cls(
            noise_multiplier=noise_multiplier,
            sampling=parse_sampling(sampling, **options),
            steps=cast(int, steps),  # None: from epochs (see the fields)
            epochs=epochs,
            relation=cast(Relation, relation),  # a spelling or None: __post_init__ stores the Relation
        )

    # ---- derived views
    @property
    def sampling_rate(self) -> float:
        """The scheme's sampling rate (the expected fraction of the data in one step)."""
        rate: float = getattr(self.sampling, "sampling_rate")  # noqa: B009 - every concrete scheme has one
        return rate

    @property
    def scheme_name(self) -> str:
        """The registered name of the run's sampling scheme."""
        return self.sampling.name

    def replace(self, **changes: Any) -> TrainingRun:
        """A copy with ``changes``; fields of the scheme (``sampling_rate``, ...) may be given too.

        Parameters
        ----------
        **changes
            New values of the run's fields, and of the scheme's ``free_fields``. ``steps`` replaces
            ``epochs`` (and the other way round).

        Returns
        -------
        TrainingRun
            The copy, validated as a new run.

        Raises
        ------
        ValueError
            If a scheme field is not free, or a value is out of its domain.
        TypeError
            If a name is neither a field of the run nor of its scheme.
        """
        scheme_fields = {f.name for f in dataclasses.fields(self.sampling)} | {"sampling_rate"}
        run_changes = {k: v for k, v in changes.items() if k not in scheme_fields}
        scheme = self.sampling
        for k in changes.keys() & scheme_fields:
            scheme = scheme.with_value(k, changes[k])
        if "steps" in run_changes and "epochs" not in run_changes:
            run_changes["epochs"] = None
        if "epochs" in run_changes and "steps" not in run_changes:
            run_changes["steps"] = None
        return dataclasses.replace(self, sampling=scheme, **run_changes)

    def step_mechanism(self) -> Mechanism | None:
        """One step's mechanism for the accountants.

        Returns
        -------
        Mechanism or None
            The step's dominating pair; ``None`` where only the scheme's own certified function answers.
        """
        return self.sampling.step_mechanism(noise_multiplier=self.noise_multiplier, relation=self.relation)

    def group_mechanism(self, *, group_size: int) -> Mechanism:
        """One step as seen by a group of up to ``group_size`` examples (Ganesh 2024, Thm 3.1 / 3.3).

        Parameters
        ----------
        group_size : int
            The largest group ``k``, a positive whole number.

        Returns
        -------
        Mechanism
            The group's mixture-of-Gaussians step.

        Raises
        ------
        UnsupportedMechanismError
            Saying why, where the scheme has none (``tightdp.group_epsilon`` answers the schemes with a bound
            without amplification).
        ValueError
            If ``group_size`` is not a positive whole number (or exceeds the data).
        """
        return self.sampling.group_step(
            noise_multiplier=self.noise_multiplier, group_size=check_count("group_size", group_size)
        )

    def epsilon(
        self,
        *,
        delta: float,
        accountant: str = DEFAULT_ACCOUNTANT,
        eps_error: float | None = None,
        rel_error: float | None = None,
    ) -> Bounds:
        """Bounds on the run's epsilon at ``delta``, as its scheme accounts it.

        Parameters
        ----------
        delta : float
            The delta, in (0, 1).
        accountant : str, default ``DEFAULT_ACCOUNTANT``
            A registered accountant name (the epoch-based and truncated schemes: the default only).
        eps_error, rel_error : float, optional
            The accuracy (``tightdp._accuracy``; default: relative 1e-3).

        Returns
        -------
        Bounds
            Certified ``lower <= upper``; ``details["scheme"]`` names the scheme accounted.

        Raises
        ------
        ValueError
            If an argument is out of its domain or the scheme does not answer under ``accountant``.
        """
        out = self.sampling.epsilon(self, delta=delta, accountant=accountant, eps_error=eps_error, rel_error=rel_error)
        details = dict(out.details)
        if "scheme" in details and details["scheme"] != self.sampling.describe():
            details["scheme_analysis"] = details["scheme"]  # the scheme function's own words, kept
        details["scheme"] = self.sampling.describe()
        return Bounds(out.lower, out.estimate, out.upper, out.quantity, out.kind, details)

    def to_dict(self) -> dict[str, Any]:
        """The run as JSON-ready data (``from_dict`` is the inverse).

        Returns
        -------
        dict
            ``noise_multiplier``, ``steps``, ``epochs``, ``relation`` and the scheme's ``to_dict()``.
        """
        return {
            "noise_multiplier": self.noise_multiplier,
            "steps": self.steps,
            "epochs": self.epochs,
            "relation": self.relation.value,
            "sampling": self.sampling.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TrainingRun:
        """Inverse of ``to_dict``.

        Parameters
        ----------
        d : mapping
            ``noise_multiplier``, ``steps``, ``sampling`` (a scheme's ``to_dict()``) and optionally ``relation``.

        Returns
        -------
        TrainingRun
            The run.

        Raises
        ------
        KeyError
            If ``noise_multiplier`` or ``sampling`` is missing.
        ValueError
            If a value is out of its domain.
        """
        d = dict(d)
        return cls(
            noise_multiplier=d["noise_multiplier"],
            sampling=scheme_from_dict(d["sampling"]),
            steps=cast(int, d.get("steps")),  # None: from epochs (see the fields)
            relation=cast(Relation, d.get("relation")),
        )

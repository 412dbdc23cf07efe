"""A DP-SGD training run as one object: noise, batch sampling, length, neighbouring relation.

``TrainingRun`` is what every front end takes (``dpsgd_epsilon(run=...)``, ``privacy_statement(run=...)``,
``group_epsilon(run=...)``, ``calibrate(run, ...)``) or builds from keywords (``TrainingRun.from_options``,
parsing the sampling name through the one registry, ``tightdp.sampling``). Like dp_accounting's
``DpEvent`` it describes what ran and nothing else; ``epsilon`` asks the scheme to account it.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from ._validation import check_count, check_positive
from .accountants import DEFAULT_ACCOUNTANT
from .bounds import Bounds
from .sampling import Relation, SamplingScheme, parse_sampling, scheme_from_dict

__all__ = ["TrainingRun"]


@dataclass(frozen=True, kw_only=True)
class TrainingRun:
    """``steps`` DP-SGD steps with Gaussian noise ``noise_multiplier`` (unit clipping norm) and batches drawn
    by ``sampling`` (a ``tightdp.sampling`` scheme).

    Give ``steps`` or ``epochs`` (or both, if they agree): ``steps = ceil(epochs * batches per epoch)``
    (``ceil(N / B)`` or ``ceil(1 / q)``, as Opacus counts them); the epoch-based schemes need whole epochs.
    ``relation`` defaults to the scheme's own and must be one it supports.
    """

    noise_multiplier: float
    sampling: SamplingScheme
    steps: int | None = None
    epochs: float | None = None
    relation: Relation | None = None

    def __post_init__(self):
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
                from_epochs = check_count("epochs", e) * scheme.epoch_length()
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
        cls, *, noise_multiplier, sampling="poisson", steps=None, epochs=None, relation=None, **options
    ) -> TrainingRun:
        """A run from the convenience keywords: ``sampling`` a registered name (or a scheme object) and
        ``sampling_rate`` / ``dataset_size`` / ``batch_size`` / ``max_batch_size`` as its ``from_options``
        reads them."""
        return cls(
            noise_multiplier=noise_multiplier,
            sampling=parse_sampling(sampling, **options),
            steps=steps,
            epochs=epochs,
            relation=relation,
        )

    # ---- derived views
    @property
    def sampling_rate(self) -> float:
        return self.sampling.sampling_rate  # type: ignore[attr-defined]

    @property
    def scheme_name(self) -> str:
        return self.sampling.name

    def replace(self, **changes) -> TrainingRun:
        """A copy with ``changes``; fields of the scheme (``sampling_rate``, ...) may be given too.
        ``steps`` replaces ``epochs`` (and the other way round)."""
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

    def step_mechanism(self):
        """One step's mechanism for the accountants (``None`` where only the scheme's own function answers)."""
        return self.sampling.step_mechanism(noise_multiplier=self.noise_multiplier, relation=self.relation)

    def group_mechanism(self, *, group_size: int):
        """One step as seen by a group of up to ``group_size`` examples (002 Thm 3.1 / 3.3); raises
        ``UnsupportedMechanismError`` saying why where the scheme has none (``tightdp.group_epsilon`` answers
        the schemes with a bound without amplification)."""
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
        """Bounds on the run's epsilon at ``delta``; ``details["scheme"]`` names the scheme accounted."""
        out = self.sampling.epsilon(self, delta=delta, accountant=accountant, eps_error=eps_error, rel_error=rel_error)
        details = dict(out.details)
        if "scheme" in details and details["scheme"] != self.sampling.describe():
            details["scheme_analysis"] = details["scheme"]  # the scheme function's own words, kept
        details["scheme"] = self.sampling.describe()
        return Bounds(out.lower, out.estimate, out.upper, out.quantity, out.kind, details)

    def to_dict(self) -> dict[str, Any]:
        return {
            "noise_multiplier": self.noise_multiplier,
            "steps": self.steps,
            "epochs": self.epochs,
            "relation": self.relation.value,
            "sampling": self.sampling.to_dict(),
        }  # type: ignore[union-attr]

    @classmethod
    def from_dict(cls, d) -> TrainingRun:
        d = dict(d)
        return cls(
            noise_multiplier=d["noise_multiplier"],
            sampling=scheme_from_dict(d["sampling"]),
            steps=d.get("steps"),
            relation=d.get("relation"),
        )

"""A one-call privacy statement for a DP-SGD run, in the style of TensorFlow Privacy's
``compute_dp_sgd_privacy_statement``, but certified.

``privacy_statement(...)`` answers, for the sampling scheme that actually ran:

* **example-level** epsilon at the chosen delta, as a certified interval
  (``tightdp.dpsgd_epsilon`` with the default, dominance-based accountant; the
  PLD accountants of Koskela et al. [001] and Gopi et al. [003]);
* **group-level** epsilon for groups of up to ``k`` examples (e.g. every record
  of one user) from Ganesh's mixture-of-Gaussians reduction [002 Thm 3.1 / 3.3],
  certified by the same engine (``tightdp.group_epsilon``); where no group
  analysis exists for the scheme, the row says "not applicable" and why;
* in plain language, what the guarantee assumes (the neighbouring relation, the
  sampling scheme, what an attacker sees) and what it does **not** cover
  (hyper-parameter tuning, data-dependent preprocessing, ...).

``tradeoff_lower_curve`` turns a certified upper delta(epsilon) curve into a
certified *lower* bound on the f-DP trade-off function beta(alpha)
(Dong, Roth, Su 2022, Prop. 2.12 / Cor. 2.13; Ganesh [002] Sec. 2 uses the same
hypothesis-testing view).

The statement's text and JSON (``PrivacyStatement.to_text`` / ``to_dict``) are what
``tightdp statement`` prints; the privacy report reuses ``guarantee_paragraphs``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ._accuracy import check_accuracy, describe_accuracy
from ._validation import (check_choice, check_count, check_delta, check_positive,
                          check_probability, check_real_array)
from .bounds import Bounds
from .group import SCHEME_GROUP

__all__ = ["STATEMENT_SAMPLINGS", "GroupRow", "PrivacyStatement", "privacy_statement", "guarantee_paragraphs",
           "tradeoff_lower_curve"]

#: The sampling schemes a statement can be made for.
#: ``poisson`` and ``fixed-batch`` have example- and group-level answers; the
#: others (``tightdp.dpsgd_epsilon(sampling=...)``) have example-level answers only.
STATEMENT_SAMPLINGS = ("poisson", "fixed-batch", "without-replacement", "random-allocation", "balls-and-bins",
                       "shuffle", "truncated-poisson")

_GROUP_SCHEMES = ("poisson", "fixed-batch")


# =========================================================================================== plain language
def _scheme_sentence(sampling: str, q: float | None, batch_size: int | None, dataset_size: int | None,
                     max_batch_size: int | None = None) -> str:
    rate = f"{q:.6g}" if q is not None else "q"
    if sampling == "poisson":
        return (f"Sampling: Poisson. At every step each example joins the batch independently with probability "
                f"q = {rate}, so batch sizes vary (the sampling of Opacus and of dp_accounting's DP-SGD helpers).")
    if sampling == "fixed-batch":
        return (f"Sampling: fixed batches. Every step draws exactly B = {batch_size} examples uniformly "
                f"without replacement "
                f"from a data set of at least N = {dataset_size} examples besides the protected ones.")
    if sampling == "without-replacement":
        return (f"Sampling: fixed batches. Every step draws a batch uniformly without replacement (sampling rate "
                f"{rate}), independently across steps.")
    if sampling in ("random-allocation", "balls-and-bins"):
        return (f"Sampling: random allocation (balls and bins). In every epoch each example is used in exactly "
                f"one of the "
                f"1/q = {round(1 / q) if q else 't'} steps, chosen uniformly at random and independently.")
    if sampling == "shuffle":
        return (f"Sampling: shuffling. Every epoch a fresh uniformly random permutation of the data is cut into 1/q = "
                f"{round(1 / q) if q else 't'} consecutive batches.")
    if sampling == "truncated-poisson":
        return (f"Sampling: truncated Poisson. Poisson batches at rate q = {rate} cut to at most "
                f"{max_batch_size} examples out of {dataset_size}.")
    raise ValueError(f"sampling must be one of {', '.join(STATEMENT_SAMPLINGS)}, got {sampling!r}")


def _relation_sentence(sampling: str, relation: str | None = None) -> str:
    if sampling == "without-replacement" or relation == "substitute":
        return ("Neighbouring data sets differ by replacing one example with another (substitute relation); the "
                "data set size is the same for both and treated as public.")
    if sampling == "fixed-batch":
        return ("Neighbouring data sets differ by adding or removing one example (groups: up to k examples) to a "
                "data set of at least N others; with fixed batches a present example displaces another, so it "
                "moves the clipped-gradient sum by up to twice the clipping norm (Ganesh [002] Thm 3.3).")
    if sampling == "shuffle":
        return ("Neighbouring data sets differ in one example being replaced by a zero-contribution example "
                "(Chua et al.'s zero-out relation); the number of batches is public.")
    if relation in ("remove", "add"):
        return (f"Neighbouring data sets differ by {'removing' if relation == 'remove' else 'adding'} one example "
                "(only this direction is accounted).")
    return ("Neighbouring data sets differ by adding or removing one example (add-or-remove adjacency); the "
            "bound is the worse of the two directions.")


def guarantee_paragraphs(*, sampling: str, sampling_rate: float | None = None, batch_size: int | None = None,
                         dataset_size: int | None = None, max_batch_size: int | None = None,
                         relation: str | None = None, group_sizes: Sequence[int] = (),
                         steps: int | None = None) -> dict[str, list[str]]:
    """What a DP-SGD guarantee of this configuration promises, in plain language.

    Returns ``{"guarantees": [...], "not_covered": [...]}``; each entry is one sentence
    or a short paragraph. Used by ``privacy_statement`` and by the privacy report.
    """
    check_choice("sampling", sampling, STATEMENT_SAMPLINGS)
    length = f"{steps:,} noisy gradient steps" if steps else "every noisy gradient step"
    guarantees = [
        "Mechanism: DP-SGD. Each example's gradient is clipped to L2 norm at most C and Gaussian noise of "
        "standard deviation sigma * C is added to the sum of the clipped gradients of the batch (sigma is the "
        "noise multiplier).",
        _scheme_sentence(sampling, sampling_rate, batch_size, dataset_size, max_batch_size)
        + " The guarantee holds only if the pipeline really sampled this way.",
        _relation_sentence(sampling, relation),
        f"What the attacker sees: every intermediate model (all {length}), not only the final one. The "
        "guarantee covers releasing all checkpoints, and by post-processing anything computed from them.",
        "Adaptive composition: it holds although each step's gradient depends on the models produced by the "
        "earlier steps; the per-step dominating pairs compose adaptively (Ganesh [002] Lemma 2.6; "
        "Koskela et al. [001], Gopi et al. [003] compose the same privacy-loss distributions).",
        "Certification: the upper end of every interval is a proven upper bound on the exact epsilon of this "
        "mechanism (discretisation, truncation and floating-point errors are charged to the safe side); the "
        "lower end is a proven lower bound, so no tighter analysis of this mechanism can go below it.",
    ]
    if group_sizes and sampling in _GROUP_SCHEMES:
        guarantees.append(
            "Group privacy: a group is any set of up to k examples added or removed together (e.g. all records "
            "of one user, if no user has more than k). Its epsilon is computed directly from the group's "
            "mixture-of-Gaussians mechanism (Ganesh [002] Thm 3.1 / 3.3), not by the much looser group-privacy "
            "lemma.")
    elif group_sizes and sampling in ("random-allocation", "balls-and-bins", "shuffle"):
        guarantees.append(
            "Group privacy: a group is any set of up to k examples " + ("zeroed out" if sampling == "shuffle" else
            "added or removed") + " together. Its upper bound is " + ("k sqrt(epochs)/sigma-GDP (no amplification; "
            "Dong, Roth, Su 2022 Thm 2.14)" if sampling == "shuffle" else "the smaller of the group-privacy lemma "
            "(Ganesh [002] Lemma 1.1) on the certified example-level curve and k sqrt(epochs)/sigma-GDP without "
            "amplification") + "; its lower bound is the example-level one (no tight group analysis of this "
            "sampling is known), so the interval is wide.")
    not_covered = [
        "Hyper-parameter tuning and repeated runs: every training run on the data (including runs for "
        "choosing hyper-parameters, and the choice of which run to publish) spends privacy that this "
        "statement does not account.",
        "Data-dependent preprocessing: statistics computed from the private data outside DP-SGD (normalisation, "
        "vocabularies, deduplication, feature selection, early stopping or model selection on private data) "
        "are not covered.",
        "Public facts: the number of steps, the batch size, the data set size and all hyper-parameters are "
        "assumed fixed in advance and public.",
        "Implementation: an ideal implementation is assumed (exact Gaussian noise from a cryptographically "
        "sound source, sampling exactly as stated, per-example clipping applied to every example).",
    ]
    if not group_sizes:
        not_covered.append("Users with several examples: the example-level epsilon protects one example; a person "
                           "contributing k examples is protected only at the group-level epsilon for groups of k "
                           "(give group sizes to compute it).")
    return {"guarantees": guarantees, "not_covered": not_covered}


# =========================================================================================== the statement
@dataclass(frozen=True)
class GroupRow:
    """Group-level epsilon for groups of up to ``group_size`` examples, or why it is not applicable."""

    group_size: int
    epsilon: Bounds | None
    not_applicable: str = ""

    def to_dict(self) -> dict[str, Any]:
        if self.epsilon is None:
            return {"group_size": self.group_size, "epsilon": None, "kind": None,
                    "not_applicable": self.not_applicable}
        d = self.epsilon.to_dict()
        return {"group_size": self.group_size,
                "epsilon": {"lower": d["lower"], "estimate": d["estimate"], "upper": d["upper"]},
                "kind": self.epsilon.kind, "note": (self.epsilon.details or {}).get("note")}


@dataclass(frozen=True)
class PrivacyStatement:
    """The answer of ``privacy_statement``; ``to_text()`` and ``to_dict()`` render it."""

    parameters: dict[str, Any]
    delta: float
    epsilon: Bounds
    groups: tuple[GroupRow, ...]
    guarantees: tuple[str, ...]
    not_covered: tuple[str, ...]
    accountant: str
    eps_error: float | None  # the accuracy as asked for (``tightdp._accuracy``; None, None: the default)
    seconds: float = 0.0
    notes: tuple[str, ...] = field(default_factory=tuple)
    rel_error: float | None = None

    @property
    def certified(self) -> bool:
        """Every epsilon in the statement has a finite proven upper bound."""
        rows = [self.epsilon] + [g.epsilon for g in self.groups if g.epsilon is not None]
        return all(_finite_upper(b) for b in rows)

    def uncertified(self) -> list[str]:
        """One line per epsilon of the statement that has no finite proven upper bound."""
        out = []
        if not _finite_upper(self.epsilon):
            out.append(f"example-level epsilon: no certified upper bound (upper = {self.epsilon.upper}): "
                       f"{(self.epsilon.details or {}).get('note') or 'the accountant gave no finite upper bound'}")
        for g in self.groups:
            if g.epsilon is not None and not _finite_upper(g.epsilon):
                out.append(f"group size {g.group_size}: no certified upper bound (upper = {g.epsilon.upper}): "
                           f"{(g.epsilon.details or {}).get('note') or 'no finite upper bound'}")
        return out

    def to_dict(self) -> dict[str, Any]:
        d = self.epsilon.to_dict()
        return {
            "epsilon": {"lower": d["lower"], "estimate": d["estimate"], "upper": d["upper"]},
            "delta": self.delta, "kind": self.epsilon.kind, "accountant": self.accountant,
            "eps_error": self.eps_error, "rel_error": self.rel_error,
            "accuracy": describe_accuracy(self.eps_error, self.rel_error), "parameters": dict(self.parameters),
            "groups": [g.to_dict() for g in self.groups],
            "guarantees": list(self.guarantees), "not_covered": list(self.not_covered),
            "notes": list(self.notes), "certified": self.certified, "seconds": self.seconds,
            "text": self.to_text(),
        }

    def to_text(self) -> str:
        p = self.parameters
        lines = [_run_sentence(p), ""]
        lines.append(f"Example-level DP at delta = {self.delta:g} ({self.accountant} accountant, "
                     f"accuracy: {describe_accuracy(self.eps_error, self.rel_error)}):")
        lines.append(f"    {'epsilon':22s}{_interval(self.epsilon)}")
        if self.groups:
            lines.append("")
            lines.append(f"Group-level DP (any group of up to k examples added or removed together) at "
                         f"delta = {self.delta:g}:")
            for g in self.groups:
                label = f"k = {g.group_size}"
                value = _interval(g.epsilon) if g.epsilon is not None else f"not applicable: {g.not_applicable}"
                lines.append(f"    {label:22s}{value}")
        lines.append("")
        lines.append("What this guarantees:")
        lines += _bullets(self.guarantees)
        lines.append("")
        lines.append("What it does not cover:")
        lines += _bullets(self.not_covered)
        for n in self.notes:
            lines.append(f"Note: {n}")
        return "\n".join(lines) + "\n"


def _finite_upper(b: Bounds) -> bool:
    if b.kind != "bound":
        return True  # an approximation says so in its kind; it is not a failed certificate
    return b.upper is not None and math.isfinite(float(b.upper))


def _fmt(v) -> str:
    if v is None:
        return "—"
    v = float(v)
    if math.isinf(v):
        return "inf"
    return f"{v:.4f}" if abs(v) < 1e4 else f"{v:.6g}"


def _interval(b: Bounds) -> str:
    if b.kind != "bound":
        return f"≈ {_fmt(b.estimate)} (approximation, no guarantee)"
    if b.lower is None:
        return f"≤ {_fmt(b.upper)} (certified upper bound)"
    return f"≤ {_fmt(b.upper)}   certified interval [{_fmt(b.lower)}, {_fmt(b.upper)}]"


def _bullets(items: Sequence[str]) -> list[str]:
    import textwrap

    out = []
    for item in items:
        out += textwrap.wrap(item, width=96, initial_indent="  - ", subsequent_indent="    ")
    return out


def _run_sentence(p: dict[str, Any]) -> str:
    parts = ["DP-SGD"]
    if p.get("dataset_size"):
        parts.append(f"over {p['dataset_size']:,} examples")
    if p.get("batch_size"):
        parts.append(f"with {'expected ' if p['sampling'] == 'poisson' else ''}batch size {p['batch_size']:,}")
    if p.get("schedule"):
        segs = ", ".join(f"sigma {s:g} at q {q:.6g} for {k:,} steps" for s, q, k in p["schedule"])
        parts.append(f"({p['sampling']} sampling), noise schedule: {segs}")
    else:
        parts.append(f"({p['sampling']} sampling, rate q = {p['sampling_rate']:.6g}), noise multiplier "
                     f"{p['noise_multiplier']:g}")
        ep = f"{p['epochs']:g} epochs = " if p.get("epochs") else ""
        parts.append(f"for {ep}{p['steps']:,} steps")
    return " ".join(parts) + "."


def privacy_statement(*, noise_multiplier: float | None = None, delta: float, steps: int | None = None,
                      epochs: float | None = None, sampling_rate: float | None = None,
                      dataset_size: int | None = None, batch_size: int | None = None, sampling: str = "poisson",
                      group_sizes: Sequence[int] = (), max_batch_size: int | None = None,
                      schedule: Sequence[Sequence[float]] | None = None, eps_error: float | None = None,
                      rel_error: float | None = None) -> PrivacyStatement:
    """A certified privacy statement for a DP-SGD run (example-level and group-level epsilon, assumptions).

    The run: ``noise_multiplier``; the sampling rate as ``sampling_rate`` or
    ``batch_size / dataset_size``; the length as ``steps`` or ``epochs``
    (``steps = ceil(epochs * ceil(dataset_size / batch_size))``, as Opacus and
    ``tightdp epsilon`` count them). ``sampling`` is one of ``STATEMENT_SAMPLINGS``:

    * ``"poisson"``: example-level epsilon by ``dpsgd_epsilon`` (add/remove, the
      default accountant); groups by ``group_epsilon`` (002 Thm 3.1);
    * ``"fixed-batch"``: batches of exactly ``batch_size`` from at least
      ``dataset_size`` other examples under add/remove adjacency: example- and
      group-level epsilon from the mixture of Gaussians with sensitivity
      ``2 Hypergeom(B, N + k, k)`` (002 Thm 3.3; k = 1 for the example level);
    * ``"without-replacement"``: fixed batches under the substitute relation
      (001 Sec. 6.2); no group analysis;
    * ``"random-allocation"``/``"balls-and-bins"``, ``"shuffle"``,
      ``"truncated-poisson"``: ``dpsgd_epsilon(sampling=...)``; no group analysis.

    ``schedule`` (Poisson only) replaces ``noise_multiplier``/``sampling_rate``/
    ``steps`` by segments ``(noise_multiplier, sampling_rate, steps)``.
    ``group_sizes`` lists the k to state group-level epsilon for. ``eps_error`` /
    ``rel_error``: the accuracy (``tightdp._accuracy``; by default relative 1e-3).

    >>> s = privacy_statement(noise_multiplier=1.1, dataset_size=50_000, batch_size=256, epochs=100, delta=1e-5)
    >>> s.epsilon.lower <= s.epsilon.upper
    True
    """
    t0 = time.perf_counter()
    delta = check_delta("delta", delta)
    eps_error, rel_error = check_accuracy(eps_error, rel_error)
    acc_kw = {"eps_error": eps_error, "rel_error": rel_error}
    sampling = check_choice("sampling", sampling, STATEMENT_SAMPLINGS)
    ks = [check_count(f"group_sizes[{i}]", k) for i, k in enumerate(_as_sequence("group_sizes", group_sizes))]
    n = None if dataset_size is None else check_count("dataset_size", dataset_size)
    b = None if batch_size is None else check_count("batch_size", batch_size)
    if n is not None and b is not None and b > n:
        raise ValueError(f"batch_size ({b}) must be <= dataset_size ({n})")
    from .accountants import DEFAULT_ACCOUNTANT

    params: dict[str, Any] = {"sampling": sampling, "dataset_size": n, "batch_size": b, "delta": delta}
    if schedule is not None:
        return _schedule_statement(schedule, sampling, ks, delta, acc_kw, params, t0,
                                   given=dict(noise_multiplier=noise_multiplier, steps=steps, epochs=epochs,
                                              sampling_rate=sampling_rate))
    if noise_multiplier is None:
        raise ValueError("noise_multiplier is required (or give a schedule)")
    sigma = check_positive("noise_multiplier", noise_multiplier)
    q = _rate(sampling_rate, n, b)
    k_steps = _steps(steps, epochs, n, b, q)
    params.update({"noise_multiplier": sigma, "sampling_rate": q, "steps": k_steps,
                   "epochs": None if epochs is None else float(epochs)})
    if max_batch_size is not None:
        max_batch_size = check_count("max_batch_size", max_batch_size)
    if sampling == "truncated-poisson":
        params["max_batch_size"] = max_batch_size

    from .dpsgd import dpsgd_epsilon
    from .group import group_epsilon

    groups: list[GroupRow] = []
    if sampling == "poisson":
        example = dpsgd_epsilon(noise_multiplier=sigma, sampling_rate=q, steps=k_steps, delta=delta,
                                **acc_kw)
        for k in ks:
            groups.append(GroupRow(k, example if k == 1 else group_epsilon(
                noise_multiplier=sigma, sampling_rate=q, steps=k_steps, delta=delta, group_size=k,
                **acc_kw)))
    elif sampling == "fixed-batch":
        if n is None or b is None:
            raise ValueError("sampling='fixed-batch' needs dataset_size and batch_size")

        def fixed(k: int) -> Bounds:
            return group_epsilon(noise_multiplier=sigma, steps=k_steps, delta=delta, group_size=k,
                                 sampling="fixed-batch", dataset_size=n, batch_size=b, **acc_kw)

        example = fixed(1)
        groups = [GroupRow(k, example if k == 1 else fixed(k)) for k in ks]
    elif sampling == "without-replacement":
        example = _without_replacement_epsilon(sigma, q, n, b, k_steps, delta, acc_kw)
        groups = [GroupRow(k, None, _NO_GROUP[sampling]) for k in ks]
    else:
        example = dpsgd_epsilon(noise_multiplier=sigma, sampling_rate=q, steps=k_steps, delta=delta,
                                sampling=sampling, dataset_size=n, max_batch_size=max_batch_size, **acc_kw)
        if _NO_GROUP.get(sampling):
            groups = [GroupRow(k, example if k == 1 else None, _NO_GROUP[sampling]) for k in ks]
        else:  # random allocation, shuffling: tightdp.group_epsilon(sampling=...) (group.py's docstring)
            groups = [GroupRow(k, example if k == 1 else group_epsilon(
                noise_multiplier=sigma, sampling_rate=q, steps=k_steps, delta=delta, group_size=k,
                sampling=sampling, dataset_size=n, **acc_kw)) for k in ks]
    text = guarantee_paragraphs(sampling=sampling, sampling_rate=q, batch_size=b, dataset_size=n,
                                max_batch_size=max_batch_size, group_sizes=ks, steps=k_steps)
    notes = []
    if sampling == "shuffle":
        notes.append("For shuffled batches no amplification theorem is known: the upper end is the guarantee "
                     "without amplification, the lower end Chua et al.'s attack; the true epsilon is in between.")
    return PrivacyStatement(parameters=params, delta=delta, epsilon=example, groups=tuple(groups),
                            guarantees=tuple(text["guarantees"]), not_covered=tuple(text["not_covered"]),
                            accountant=DEFAULT_ACCOUNTANT, seconds=time.perf_counter() - t0,
                            notes=tuple(notes), **acc_kw)


_NO_GROUP = {
    "without-replacement": "no group analysis for the substitute relation; use sampling='fixed-batch' "
                           "(add/remove of a group, 002 Thm 3.3)",
    # random allocation and shuffling: group_epsilon(sampling=...); truncated Poisson: why it does not apply
    "truncated-poisson": SCHEME_GROUP["truncated-poisson"],
}


def _as_sequence(name: str, v) -> list:
    if isinstance(v, (str, bytes)) or not isinstance(v, (list, tuple, range)):
        raise ValueError(f"{name} must be a list of whole numbers, got {v!r}")
    return list(v)


def _rate(sampling_rate, n, b) -> float:
    if sampling_rate is not None:
        q = check_probability("sampling_rate", sampling_rate)
        if n is not None and b is not None and abs(q - b / n) > 1e-12 * q:
            raise ValueError(f"sampling_rate ({q!r}) conflicts with batch_size / dataset_size = {b}/{n}; "
                             "give one or the other")
        return q
    if n is not None and b is not None:
        return b / n
    raise ValueError("sampling_rate is required (or give dataset_size and batch_size)")


def _steps(steps, epochs, n, b, q) -> int:
    from_epochs = None
    if epochs is not None:
        e = check_positive("epochs", epochs)
        per_epoch = math.ceil(n / b) if n is not None and b is not None else math.ceil(1.0 / q)
        from_epochs = math.ceil(e * per_epoch - 1e-9)
    if steps is not None:
        k = check_count("steps", steps)
        if from_epochs is not None and k != from_epochs:
            raise ValueError(f"steps ({k}) conflicts with epochs ({epochs:g} epochs = {from_epochs} steps); "
                             "give one or the other")
        return k
    if from_epochs is None:
        raise ValueError("steps is required (or give epochs)")
    return check_count("steps", from_epochs)


def _without_replacement_epsilon(sigma, q, n, b, steps, delta, acc_kw) -> Bounds:
    from fractions import Fraction

    from .accountants import DEFAULT_ACCOUNTANT, create
    from .mechanisms import Gaussian, SampledWithoutReplacement

    if n is None or b is None:
        f = Fraction(q).limit_denominator(10 ** 9)
        if f.numerator / f.denominator != q:
            raise ValueError(f"sampling_rate {q!r} is not a ratio B / N with N <= 1e9; give dataset_size and "
                             "batch_size")
        b, n = f.numerator, f.denominator
    mech = SampledWithoutReplacement(mechanism=Gaussian(noise_multiplier=sigma), sample_size=b, dataset_size=n)
    return create(DEFAULT_ACCOUNTANT, **acc_kw).compose(mech, steps).epsilon(delta)


def _schedule_statement(schedule, sampling, ks, delta, acc_kw, params, t0, *, given) -> PrivacyStatement:
    from .accountants import DEFAULT_ACCOUNTANT, create
    from .dpsgd import dpsgd_mechanism
    from .group import group_epsilon_schedule

    extra = [k for k, v in given.items() if v is not None]
    if extra:
        raise ValueError(f"schedule replaces {', '.join(extra)}; give one or the other")
    if sampling != "poisson":
        raise ValueError(f"schedule needs sampling='poisson', got {sampling!r}")
    segs = []
    for i, seg in enumerate(_as_sequence("schedule", schedule)):
        if not isinstance(seg, (list, tuple)) or len(seg) != 3:
            raise ValueError(f"schedule[{i}] must be (noise_multiplier, sampling_rate, steps), got {seg!r}")
        segs.append((check_positive(f"schedule[{i}].noise_multiplier", seg[0]),
                     check_probability(f"schedule[{i}].sampling_rate", seg[1]),
                     check_count(f"schedule[{i}].steps", seg[2])))
    if not segs:
        raise ValueError("schedule must not be empty")
    acc = create(DEFAULT_ACCOUNTANT, **acc_kw)
    for s, q, k in segs:
        acc.compose(dpsgd_mechanism(noise_multiplier=s, sampling_rate=q), k)
    example = acc.epsilon(delta)
    groups = [GroupRow(k, example if k == 1 else group_epsilon_schedule(schedule=segs, delta=delta, group_size=k,
                                                                         **acc_kw)) for k in ks]
    total = sum(k for _, _, k in segs)
    params.update({"schedule": segs, "steps": total, "noise_multiplier": None, "sampling_rate": None})
    rates = {q for _, q, _ in segs}
    text = guarantee_paragraphs(sampling=sampling, sampling_rate=rates.pop() if len(rates) == 1 else None,
                                group_sizes=ks, steps=total)
    return PrivacyStatement(parameters=params, delta=delta, epsilon=example, groups=tuple(groups),
                            guarantees=tuple(text["guarantees"]), not_covered=tuple(text["not_covered"]),
                            accountant=DEFAULT_ACCOUNTANT, seconds=time.perf_counter() - t0, **acc_kw)


def statement_from_config(config, *, delta: float | None = None, group_sizes: Sequence[int] | None = None,
                          eps_error: float | None = None, rel_error: float | None = None) -> PrivacyStatement:
    """The statement for a privacy report's configuration (``tightdp.report.load_config``).

    ``delta`` defaults to the config's first delta and ``group_sizes`` to its
    ``privacy.group_sizes``. The report's ``without_replacement`` sampling is the
    substitute relation (001 Sec. 6.2), the statement's ``without-replacement``.
    """
    if not getattr(config, "is_training", False):
        raise ValueError("config: a privacy statement needs a [training] table (a DP-SGD run), not [[events]]")
    d = config.deltas[0] if delta is None else delta
    ks = list(config.group_sizes if group_sizes is None else group_sizes)
    sampling = "poisson" if config.sampling == "poisson" else "without-replacement"
    segs = config.segments
    if len(segs) > 1:
        return privacy_statement(schedule=[(s.noise_multiplier, s.sampling_rate, s.steps) for s in segs],
                                 delta=d, sampling=sampling, group_sizes=ks, eps_error=eps_error,
                                 rel_error=rel_error,
                                 dataset_size=config.dataset_size, batch_size=config.batch_size)
    s = segs[0]
    kw: dict[str, Any] = {}
    if config.dataset_size is not None and config.batch_size is not None:
        kw.update(dataset_size=config.dataset_size, batch_size=config.batch_size)
    else:
        kw["sampling_rate"] = s.sampling_rate
    return privacy_statement(noise_multiplier=s.noise_multiplier, steps=s.steps, delta=d, sampling=sampling,
                             group_sizes=ks, eps_error=eps_error, rel_error=rel_error, **kw)


# =========================================================================================== f-DP
# The trade-off curve (Dong, Roth, Su 2022, Prop. 2.12) lives in tightdp.tradeoff, with certified lower
# and upper curves, attack TPR bounds and mu-GDP; re-exported here for existing imports.
from .tradeoff import _normal_tradeoff_for_tests as _normal_tradeoff  # noqa: E402,F401
from .tradeoff import tradeoff_from_accountant, tradeoff_lower_curve  # noqa: E402,F401

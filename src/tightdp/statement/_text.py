"""The statement's plain language and its rendering: what a guarantee promises and does not cover
(``guarantee_paragraphs``), the rows and the statement (``GroupRow``, ``PrivacyStatement``) and their text."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._accuracy import describe_accuracy
from ..bounds import Bounds
from ..sampling import SamplingScheme, scheme_class

if TYPE_CHECKING:
    from ..tuning import Tuning


# =========================================================================================== plain language
def guarantee_paragraphs(
    *,
    sampling: str | SamplingScheme,
    sampling_rate: float | None = None,
    batch_size: int | None = None,
    dataset_size: int | None = None,
    max_batch_size: int | None = None,
    relation: str | None = None,
    group_sizes: Sequence[int] = (),
    steps: int | None = None,
    tuning: Tuning | None = None,
) -> dict[str, list[str]]:
    """What a DP-SGD guarantee of this configuration promises, in plain language.

    Used by ``privacy_statement`` and by the privacy report.

    Parameters
    ----------
    sampling : str or SamplingScheme
        A scheme object (``tightdp.sampling``) or a registered name with the keywords its ``from_options``
        reads; where they do not determine the scheme's numbers (a schedule of several rates), the scheme's
        sentence is stated without them.
    sampling_rate, batch_size, dataset_size, max_batch_size : optional
        The keywords a named scheme is built from.
    relation : str, optional
        The neighbouring relation (default: the scheme's own).
    group_sizes : sequence of int, default ()
        The group sizes stated (non-empty: the scheme's group-privacy paragraph is added).
    steps : int, optional
        The number of steps, named in the sentence on what the attacker sees.
    tuning : tightdp.tuning.Tuning, optional
        The tuning procedure accounted; the hyper-parameter tuning item then leaves the "not covered" list.

    Returns
    -------
    dict
        ``{"guarantees": [...], "not_covered": [...]}``; each entry one sentence or a short paragraph.

    Raises
    ------
    ValueError
        If ``sampling`` is not a registered name or ``relation`` not a relation's spelling.
    """
    if isinstance(sampling, SamplingScheme):
        cls, scheme = type(sampling), sampling
    else:
        cls = scheme_class(sampling)
        try:
            scheme = cls.from_options(
                sampling_rate=sampling_rate,
                batch_size=batch_size,
                dataset_size=dataset_size,
                max_batch_size=max_batch_size,
            )
        except ValueError:
            scheme = None
    scheme_sentence = scheme.sentence() if scheme is not None else f"Sampling: {cls.summary}."
    length = f"{steps:,} noisy gradient steps" if steps else "every noisy gradient step"
    guarantees = [
        "Mechanism: DP-SGD. Each example's gradient is clipped to L2 norm at most C and Gaussian noise of "
        "standard deviation sigma * C is added to the sum of the clipped gradients of the batch (sigma is the "
        "noise multiplier).",
        scheme_sentence + " The guarantee holds only if the pipeline really sampled this way.",
        cls.relation_sentence(relation),
        f"What the attacker sees: every intermediate model (all {length}), not only the final one. The "
        "guarantee covers releasing all checkpoints, and by post-processing anything computed from them.",
        "Adaptive composition: it holds although each step's gradient depends on the models produced by the "
        "earlier steps; the per-step dominating pairs compose adaptively (Ganesh 2024, Lemma 2.6; "
        "Koskela et al. 2020, Gopi et al. 2021 compose the same privacy-loss distributions).",
        "Certification: the upper end of every interval is a proven upper bound on the exact epsilon of this "
        "mechanism (discretisation, truncation and floating-point errors are charged to the safe side); the "
        "lower end is a proven lower bound, so no tighter analysis of this mechanism can go below it.",
    ]
    group_text = (scheme if scheme is not None else cls).group_sentence() if group_sizes else None
    if group_text:
        guarantees.append(group_text)
    not_covered = _not_covered(group_sizes, training="DP-SGD", tuning=tuning is not None)
    return {"guarantees": guarantees, "not_covered": not_covered}


def _not_covered(group_sizes: Sequence[int], *, training: str, tuning: bool = False) -> list[str]:
    """What a guarantee of ``training`` (e.g. "DP-SGD") does not cover, in plain language; with ``tuning``
    the tuning procedure is accounted and its item is left out."""
    not_covered = (
        []
        if tuning
        else [
            "Hyper-parameter tuning and repeated runs: every training run on the data (including runs for "
            "choosing hyper-parameters, and the choice of which run to publish) spends privacy that this "
            "statement does not account; give the tuning procedure (privacy_statement(tuning=...), or "
            "--tuning-runs / --tuning-distribution on the command line) to account it."
        ]
    )
    not_covered += [
        f"Data-dependent preprocessing: statistics computed from the private data outside {training} "
        "(normalisation, vocabularies, deduplication, feature selection, early stopping or model selection on "
        "private data) are not covered.",
        "Public facts: the number of steps, the batch size, the data set size and all hyper-parameters are "
        "assumed fixed in advance and public.",
        "Implementation: an ideal implementation is assumed (exact Gaussian noise from a cryptographically "
        "sound source, sampling exactly as stated, per-example clipping applied to every example).",
    ]
    if not group_sizes:
        not_covered.append(
            "Users with several examples: the example-level epsilon protects one example; a person "
            "contributing k examples is protected only at the group-level epsilon for groups of k "
            "(give group sizes to compute it)."
        )
    return not_covered


# =========================================================================================== the statement
@dataclass(frozen=True)
class GroupRow:
    """Group-level epsilon for groups of up to ``group_size`` examples, or why it is not applicable.

    Parameters
    ----------
    group_size : int
        The group size ``k``.
    epsilon : Bounds or None
        The certified group-level epsilon; ``None`` where no group analysis applies.
    not_applicable : str, default ""
        Why not (with ``epsilon=None``).

    Raises
    ------
    TypeError
        If a field is missing (a plain record: the values are not checked).
    """

    group_size: int
    epsilon: Bounds | None
    not_applicable: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The row as JSON-ready data.

        Returns
        -------
        dict
            ``group_size``, ``epsilon`` (``lower``, ``estimate``, ``upper`` or ``None``), ``kind`` and the note
            or the reason it is not applicable.
        """
        if self.epsilon is None:
            return {"group_size": self.group_size, "epsilon": None, "kind": None, "not_applicable": self.not_applicable}
        d = self.epsilon.to_dict()
        return {
            "group_size": self.group_size,
            "epsilon": {"lower": d["lower"], "estimate": d["estimate"], "upper": d["upper"]},
            "kind": self.epsilon.kind,
            "note": (self.epsilon.details or {}).get("note"),
        }


@dataclass(frozen=True)
class PrivacyStatement:
    """The answer of ``privacy_statement``; ``to_text()`` and ``to_dict()`` render it.

    Parameters
    ----------
    parameters : dict
        The run as stated (sampling, sizes, rate, noise, steps, ...).
    delta : float
        The delta of every epsilon.
    epsilon : Bounds
        The certified example-level epsilon.
    groups : tuple of GroupRow
        One row per group size.
    guarantees, not_covered : tuple of str
        The plain-language paragraphs (``guarantee_paragraphs``).
    accountant : str
        The accountant's name.
    eps_error : float or None
        The accuracy as asked for (``tightdp._accuracy``; ``None`` with ``rel_error=None``: the default).
    seconds : float, default 0.0
        The time taken.
    notes : tuple of str, default ()
        Caveats (e.g. the scheme's).
    rel_error : float, optional
        The relative accuracy as asked for.

    Raises
    ------
    TypeError
        If a field is missing (a plain record: the values are not checked).
    """

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
        """One line per epsilon of the statement that has no finite proven upper bound.

        Returns
        -------
        list of str
            Empty when the statement is certified.
        """
        out = []
        if not _finite_upper(self.epsilon):
            out.append(
                f"example-level epsilon: no certified upper bound (upper = {self.epsilon.upper}): "
                f"{(self.epsilon.details or {}).get('note') or 'the accountant gave no finite upper bound'}"
            )
        for g in self.groups:
            if g.epsilon is not None and not _finite_upper(g.epsilon):
                out.append(
                    f"group size {g.group_size}: no certified upper bound (upper = {g.epsilon.upper}): "
                    f"{(g.epsilon.details or {}).get('note') or 'no finite upper bound'}"
                )
        return out

    def to_dict(self) -> dict[str, Any]:
        """The statement as JSON-ready data (what ``tightdp statement --json`` prints).

        Returns
        -------
        dict
            The epsilon, delta, accountant, accuracy, parameters, group rows, paragraphs, notes, whether it is
            certified, the time and the text.
        """
        d = self.epsilon.to_dict()
        return {
            "epsilon": {"lower": d["lower"], "estimate": d["estimate"], "upper": d["upper"]},
            "delta": self.delta,
            "kind": self.epsilon.kind,
            "accountant": self.accountant,
            "eps_error": self.eps_error,
            "rel_error": self.rel_error,
            "accuracy": describe_accuracy(self.eps_error, self.rel_error),
            "parameters": dict(self.parameters),
            "groups": [g.to_dict() for g in self.groups],
            "guarantees": list(self.guarantees),
            "not_covered": list(self.not_covered),
            "notes": list(self.notes),
            "certified": self.certified,
            "seconds": self.seconds,
            "text": self.to_text(),
        }

    def to_text(self) -> str:
        """The statement as text (what ``tightdp statement`` prints).

        Returns
        -------
        str
            The run, the example-level and group-level epsilon, what is guaranteed and what is not covered.
        """
        p = self.parameters
        lines = [_run_sentence(p), ""]
        if p.get("tuning"):
            from ..tuning import Tuning

            lines[-1:] = [
                f"Tuned: {Tuning(**p['tuning']).describe()}; the epsilon below is the whole tuning procedure's.",
                "",
            ]
        accuracy = describe_accuracy(self.eps_error, self.rel_error)
        route = str(((self.epsilon.details or {}) if p.get("tuning") else {}).get("method", ""))
        if route.startswith("Renyi"):
            accuracy = "an RDP-based upper bound; the interval's width is not controlled"
        elif route.startswith("privacy profile"):
            accuracy = (
                "a privacy-profile upper bound (Koskela, Redberg & Wang 2024); the interval's width is not controlled"
            )
        lines.append(
            f"Example-level DP at delta = {self.delta:g} ({self.accountant} accountant, accuracy: {accuracy}):"
        )
        lines.append(f"    {'epsilon':22s}{_interval(self.epsilon)}")
        if self.groups:
            lines.append("")
            lines.append(
                f"Group-level DP (any group of up to k examples added or removed together) at delta = {self.delta:g}:"
            )
            for g in self.groups:
                label = f"k = {g.group_size}"
                why = g.not_applicable.removeprefix("not applicable: ")
                value = _interval(g.epsilon) if g.epsilon is not None else f"not applicable: {why}"
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


def _fmt(v: float | None) -> str:
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
    if p.get("mechanism") == "matrix":
        return (
            f"Correlated-noise training (matrix mechanism) with strategy {p['strategy_text']}, "
            f"{p['sampler_text']}, noise multiplier {p['noise_multiplier']:g}, for {p['steps']:,} steps."
        )
    parts = ["DP-SGD"]
    if p.get("dataset_size"):
        parts.append(f"over {p['dataset_size']:,} examples")
    if p.get("batch_size"):
        expected = scheme_class(p["sampling"]).random_batch_size
        parts.append(f"with {'expected ' if expected else ''}batch size {p['batch_size']:,}")
    if p.get("schedule"):
        segs = ", ".join(f"sigma {s:g} at q {q:.6g} for {k:,} steps" for s, q, k in p["schedule"])
        parts.append(f"({p['sampling']} sampling), noise schedule: {segs}")
    else:
        parts.append(
            f"({p['sampling']} sampling, rate q = {p['sampling_rate']:.6g}), noise multiplier {p['noise_multiplier']:g}"
        )
        ep = f"{p['epochs']:g} epochs = " if p.get("epochs") else ""
        parts.append(f"for {ep}{p['steps']:,} steps")
    return " ".join(parts) + "."

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
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ._accuracy import check_accuracy, describe_accuracy
from ._validation import check_count, check_delta, check_positive, check_probability
from .bounds import Bounds
from .runs import TrainingRun
from .sampling import GroupAnalysis, Poisson, SamplingScheme, scheme_class

__all__ = ["GroupRow", "PrivacyStatement", "privacy_statement", "guarantee_paragraphs"]


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
    tuning=None,
) -> dict[str, list[str]]:
    """What a DP-SGD guarantee of this configuration promises, in plain language.

    ``sampling`` is a scheme object (``tightdp.sampling``) or a registered name with the keywords its
    ``from_options`` reads; where they do not determine the scheme's numbers (a schedule of several rates),
    the scheme's sentence is stated without them. Returns ``{"guarantees": [...], "not_covered": [...]}``;
    each entry is one sentence or a short paragraph. Used by ``privacy_statement`` and by the privacy report.
    With ``tuning`` (a ``tightdp.tuning.Tuning``) the hyper-parameter tuning item leaves the "not covered" list.
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
        "earlier steps; the per-step dominating pairs compose adaptively (Ganesh [002] Lemma 2.6; "
        "Koskela et al. [001], Gopi et al. [003] compose the same privacy-loss distributions).",
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
    """Group-level epsilon for groups of up to ``group_size`` examples, or why it is not applicable."""

    group_size: int
    epsilon: Bounds | None
    not_applicable: str = ""

    def to_dict(self) -> dict[str, Any]:
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
        p = self.parameters
        lines = [_run_sentence(p), ""]
        if p.get("tuning"):
            from .tuning import Tuning

            lines[-1:] = [
                f"Tuned: {Tuning(**p['tuning']).describe()}; the epsilon below is the whole tuning procedure's.",
                "",
            ]
        accuracy = describe_accuracy(self.eps_error, self.rel_error)
        if (p.get("tuning") or {}).get("distribution", "fixed") != "fixed":
            accuracy = "an RDP-based upper bound; the interval's width is not controlled"
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


def privacy_statement(
    *,
    noise_multiplier: float | None = None,
    delta: float,
    steps: int | None = None,
    epochs: float | None = None,
    sampling_rate: float | None = None,
    dataset_size: int | None = None,
    batch_size: int | None = None,
    sampling: str | SamplingScheme | None = None,
    group_sizes: Sequence[int] = (),
    max_batch_size: int | None = None,
    schedule: Sequence[Sequence[float]] | None = None,
    eps_error: float | None = None,
    rel_error: float | None = None,
    run: TrainingRun | None = None,
    strategy=None,
    sampler=None,
    tuning=None,
) -> PrivacyStatement:
    """A certified privacy statement for a DP-SGD run (example-level and group-level epsilon, assumptions).

    Parameters
    ----------
    run : TrainingRun, optional
        The run (``tightdp.runs.TrainingRun``); replaces the run keywords.
    noise_multiplier, sampling_rate, dataset_size, batch_size, steps, epochs, sampling, max_batch_size
        The run as keywords: the sampling rate as ``sampling_rate`` or ``batch_size / dataset_size``; the
        length as ``steps`` or ``epochs`` (``steps = ceil(epochs * ceil(dataset_size / batch_size))``, as
        Opacus and ``tightdp epsilon`` count them); ``sampling`` a registered name
        (``tightdp.sampling.scheme_names()``) or a scheme object. The example-level epsilon is the run's
        (``TrainingRun.epsilon`` with the default accountant); group rows come from ``group_epsilon``
        (Poisson: 002 Thm 3.1; ``fixed-batch``: 002 Thm 3.3, ``2 Hypergeom(B, N + k, k)``; random
        allocation and shuffling: the no-amplification bound) or say why no group analysis applies.
    strategy, sampler : optional
        A correlated-noise (matrix-mechanism) run instead of DP-SGD: the strategy matrix ``C`` (anything
        ``tightdp.matrix.as_strategy`` takes) and how a user's participations are drawn (a
        ``tightdp.matrix`` sampler, default ``NoAmplification()``: one participation), with
        ``noise_multiplier``, ``steps`` and ``delta``; the epsilon is ``tightdp.matrix.matrix_epsilon``'s
        (add/remove). The batch-sampling keywords do not apply; group rows say "not applicable" (state a
        user's several participations through the sampler's participation instead).
    schedule : sequence of (noise_multiplier, sampling_rate, steps), optional
        Poisson only: replaces ``noise_multiplier``/``sampling_rate``/``steps``.
    group_sizes : sequence of int
        The k to state group-level epsilon for.
    tuning : tightdp.tuning.Tuning or dict, optional
        The hyper-parameter tuning procedure that trained this run several times (``Tuning(distribution=
        "fixed", runs=K)``, or a random number of runs: ``"poisson"``, ``"geometric"``, ``"logarithmic"``,
        ``"negative-binomial"`` with ``mean`` and ``shape``; ``release="best"`` or ``"all"``). The epsilon is
        then the whole procedure's (``tightdp.tuning.tuning_epsilon`` of the run's per-step ledger: the
        ``K``-fold composition, or Papernot & Steinke 2022 Thm 2 / Thm 6, RDP-based), and hyper-parameter
        tuning leaves the "not covered" list. Group rows of ``k > 1`` say "not applicable". DP-SGD runs only.
    eps_error, rel_error : float, optional
        The accuracy (``tightdp._accuracy``; by default relative 1e-3).

    Returns
    -------
    PrivacyStatement

    Raises
    ------
    ValueError
        Bad or conflicting input, naming the argument.

    >>> s = privacy_statement(noise_multiplier=1.1, dataset_size=50_000, batch_size=256, epochs=100, delta=1e-5)
    >>> s.epsilon.lower <= s.epsilon.upper
    True
    """
    t0 = time.perf_counter()
    delta = check_delta("delta", delta)
    eps_error, rel_error = check_accuracy(eps_error, rel_error)
    acc_kw = {"eps_error": eps_error, "rel_error": rel_error}
    ks = [check_count(f"group_sizes[{i}]", k) for i, k in enumerate(_as_sequence("group_sizes", group_sizes))]
    if tuning is not None:
        from .tuning import Tuning

        tuning = Tuning.parse(tuning)
    if strategy is not None or sampler is not None:
        if tuning is not None:
            raise ValueError("tuning does not apply to a correlated-noise run (strategy=, sampler=)")
        return _matrix_statement(
            strategy,
            sampler,
            noise_multiplier,
            steps,
            ks,
            delta,
            acc_kw,
            t0,
            given=dict(
                epochs=epochs,
                sampling_rate=sampling_rate,
                dataset_size=dataset_size,
                batch_size=batch_size,
                sampling=sampling,
                max_batch_size=max_batch_size,
                schedule=schedule,
                run=run,
            ),
        )
    if run is not None:
        return _run_statement(
            run,
            ks,
            delta,
            acc_kw,
            t0,
            tuning=tuning,
            given=dict(
                noise_multiplier=noise_multiplier,
                steps=steps,
                epochs=epochs,
                sampling_rate=sampling_rate,
                dataset_size=dataset_size,
                batch_size=batch_size,
                max_batch_size=max_batch_size,
                schedule=schedule,
            ),
        )
    cls = scheme_class(sampling) if not isinstance(sampling, SamplingScheme) else type(sampling)
    n = None if dataset_size is None else check_count("dataset_size", dataset_size)
    b = None if batch_size is None else check_count("batch_size", batch_size)
    if n is not None and b is not None and b > n:
        raise ValueError(f"batch_size ({b}) must be <= dataset_size ({n})")
    params: dict[str, Any] = {"sampling": cls.name, "dataset_size": n, "batch_size": b, "delta": delta}
    if schedule is not None:
        if cls is not Poisson:
            raise ValueError(f"schedule needs sampling='poisson', got {sampling!r}")
        return _schedule_statement(
            schedule,
            cls.name,
            ks,
            delta,
            acc_kw,
            params,
            t0,
            tuning=tuning,
            given=dict(noise_multiplier=noise_multiplier, steps=steps, epochs=epochs, sampling_rate=sampling_rate),
        )
    if noise_multiplier is None:
        raise ValueError("noise_multiplier is required (or give a schedule)")
    sigma = check_positive("noise_multiplier", noise_multiplier)
    if isinstance(sampling, SamplingScheme):
        scheme = sampling
        q = scheme.sampling_rate  # type: ignore[attr-defined]
    else:
        q = _rate(sampling_rate, n, b)
    k_steps = _steps(steps, epochs, n, b, q)
    if max_batch_size is not None:
        max_batch_size = check_count("max_batch_size", max_batch_size)
    if not isinstance(sampling, SamplingScheme):
        scheme = cls.from_options(sampling_rate=q, dataset_size=n, batch_size=b, max_batch_size=max_batch_size)
    params["epochs"] = None if epochs is None else float(epochs)
    return _run_statement(
        TrainingRun(noise_multiplier=sigma, sampling=scheme, steps=k_steps),
        ks,
        delta,
        acc_kw,
        t0,
        params=params,
        tuning=tuning,
    )


def _run_statement(
    run: TrainingRun,
    ks: list[int],
    delta: float,
    acc_kw: dict,
    t0: float,
    *,
    params: dict[str, Any] | None = None,
    given: dict | None = None,
    tuning=None,
) -> PrivacyStatement:
    """The statement of one ``TrainingRun``: its epsilon, a row per group size, the scheme's sentences."""
    from .accountants import DEFAULT_ACCOUNTANT
    from .group import group_epsilon

    if given:
        extra = [k for k, v in given.items() if v is not None]
        if extra:
            raise ValueError(f"run replaces {', '.join(extra)}; give one or the other")
    if not isinstance(run, TrainingRun):
        raise ValueError(f"run must be a tightdp.TrainingRun, got {run!r}")
    scheme = run.sampling
    n, b = getattr(scheme, "dataset_size", None), getattr(scheme, "batch_size", None)
    params = dict(
        params or {"sampling": scheme.name, "dataset_size": n, "batch_size": b, "delta": delta, "epochs": run.epochs}
    )
    params.update(
        {
            "noise_multiplier": run.noise_multiplier,
            "sampling_rate": run.sampling_rate,
            "steps": run.steps,
            "scheme": scheme.describe(),
            "relation": run.relation.value,
        }
    )
    params.setdefault("epochs", None)
    if getattr(scheme, "max_batch_size", None) is not None:
        params["max_batch_size"] = scheme.max_batch_size  # type: ignore[attr-defined]
    if tuning is not None:
        step = run.step_mechanism()
        if step is None:
            raise ValueError(
                f"tuning: no per-step mechanism for the {scheme.name} scheme, so its tuning runs "
                "cannot be composed; leave tuning out"
            )
        return _tuned_statement(
            [(step, run.steps)],
            tuning,
            ks,
            delta,
            acc_kw,
            t0,
            params=params,
            text=guarantee_paragraphs(
                sampling=scheme, relation=run.relation.value, group_sizes=(), steps=run.steps, tuning=tuning
            ),
            notes=[scheme.caveat] if scheme.caveat else [],
        )
    example = run.epsilon(delta=delta, **acc_kw)
    groups: list[GroupRow] = []
    for k in ks:
        if k == 1:
            groups.append(GroupRow(k, example))
        elif scheme.group_analysis is GroupAnalysis.NONE:
            groups.append(GroupRow(k, None, scheme.group_reason))
        else:
            groups.append(GroupRow(k, group_epsilon(run=run, delta=delta, group_size=k, **acc_kw)))
    text = guarantee_paragraphs(sampling=scheme, relation=run.relation.value, group_sizes=ks, steps=run.steps)
    notes = [scheme.caveat] if scheme.caveat else []
    return PrivacyStatement(
        parameters=params,
        delta=delta,
        epsilon=example,
        groups=tuple(groups),
        guarantees=tuple(text["guarantees"]),
        not_covered=tuple(text["not_covered"]),
        accountant=DEFAULT_ACCOUNTANT,
        seconds=time.perf_counter() - t0,
        notes=tuple(notes),
        **acc_kw,
    )


def _tuned_statement(ledger, tuning, ks, delta, acc_kw, t0, *, params, text, notes) -> PrivacyStatement:
    """The statement of a tuning procedure over one run's ledger (``tightdp.tuning.tuning_epsilon``)."""
    from .accountants import DEFAULT_ACCOUNTANT

    if acc_kw.get("eps_error") is not None or acc_kw.get("rel_error") is not None:
        notes = list(notes) + [
            "the tuning bounds use the accountants' default accuracy; eps_error / rel_error do not apply to them"
        ]
    eps = tuning.epsilon(run=ledger, delta=delta)
    details = dict(eps.details or {})
    params["tuning"] = tuning.to_dict()
    rdp = tuning.distribution != "fixed"
    sentence = (
        f"Hyper-parameter tuning: the epsilon covers the whole tuning procedure, {tuning.describe()}; "
        "every run is assumed to be a run as stated above (same sampling, noise and length; other "
        "hyper-parameters may differ) and the choice of the run to release may use the private data. "
        f"Upper end: {details.get('method', 'tuning_epsilon')}"
        + (" (only Renyi-DP proofs exist for a random number of runs, so this bound may be loose)" if rdp else "")
        + f". Lower end: {details.get('lower_method', 'none')}: "
        + (
            "every run's output is released, so the composition's certified lower end is attained."
            if tuning.release == "all"
            else "with a constant score every run is equally good and the released output is one run's, so "
            "one run's certified lower end is attained by the procedure."
        )
    )
    why = "not applicable: no group analysis of tuning runs is implemented"
    groups = tuple(GroupRow(k, eps) if k == 1 else GroupRow(k, None, why) for k in ks)
    accountant = "rdp (Papernot-Steinke)" if rdp else DEFAULT_ACCOUNTANT
    return PrivacyStatement(
        parameters=params,
        delta=delta,
        epsilon=eps,
        groups=groups,
        guarantees=tuple(text["guarantees"]) + (sentence,),
        not_covered=tuple(text["not_covered"]),
        accountant=accountant,
        seconds=time.perf_counter() - t0,
        notes=tuple(notes),
        eps_error=None,
        rel_error=None,
    )


#: what each matrix sampler means for a user, after its own ``describe()``
_MATRIX_SAMPLING = {
    "no_amplification": "fixed in advance (no sampling); no amplification by sampling is claimed",
    "cyclic_poisson": "the data split into groups used in turn, each record of the active group joining the batch "
    "independently (BandMF's cyclic Poisson sampling, Choquette-Choo et al. 2023 Thm 1)",
    "poisson": "each record joining every step's batch independently",
    "balls_in_bins": "each record assigned once to one uniformly random bin of steps for the whole run "
    "(Choquette-Choo et al. 2025)",
    "epoch_allocation": "each record in exactly one uniformly random step of each epoch, drawn afresh each epoch",
}


def _matrix_statement(
    strategy, sampler, noise_multiplier, steps, ks, delta, acc_kw, t0, *, given: dict
) -> PrivacyStatement:
    """The statement of a correlated-noise run (``tightdp.matrix.matrix_epsilon``)."""
    from .matrix import NoAmplification, Sampler, as_strategy, matrix_epsilon

    extra = [k for k, v in given.items() if v is not None]
    if extra:
        raise ValueError(
            f"{extra[0]} does not apply to a correlated-noise run (strategy=, sampler=); give one or the other"
        )
    if strategy is None:
        raise ValueError("strategy is required with sampler (the correlated-noise run's matrix C)")
    strat = as_strategy(strategy)
    samp = NoAmplification() if sampler is None else sampler
    if not isinstance(samp, Sampler):
        raise ValueError(
            f"sampler must be a tightdp.matrix sampler (NoAmplification, CyclicPoisson, "
            f"PoissonSampling, BallsInBins, EpochAllocation), got {sampler!r}"
        )
    if noise_multiplier is None:
        raise ValueError("noise_multiplier is required")
    if steps is None:
        raise ValueError("steps is required")
    sigma, n = check_positive("noise_multiplier", noise_multiplier), check_count("steps", steps)
    example = matrix_epsilon(strategy=strat, noise_multiplier=sigma, steps=n, delta=delta, sampler=samp, **acc_kw)
    why = (
        "not applicable: no group analysis of correlated noise is implemented; state a user's several "
        "participations through the sampler's participation pattern instead"
    )
    groups = tuple(GroupRow(k, example) if k == 1 else GroupRow(k, None, why) for k in ks)
    params = {
        "mechanism": "matrix",
        "strategy": strat.to_dict(),
        "sampler": samp.to_dict(),
        "strategy_text": strat.describe(),
        "sampler_text": samp.describe(),
        "noise_multiplier": sigma,
        "steps": n,
        "delta": delta,
        "relation": "add-remove",
    }
    guarantees = [
        "Mechanism: correlated-noise training (the matrix mechanism: DP-FTRL / tree aggregation, banded matrix "
        "factorisation, BLT). Each example's gradient is clipped to L2 norm at most 1 (noise in units of the "
        "clipping norm); the run releases C x + z, where x stacks the steps' sums of clipped gradients, C is the "
        f"strategy matrix ({strat.describe()}, {n:,} steps) and z ~ N(0, sigma^2 I) with noise multiplier "
        f"sigma = {sigma:g}.",
        f"Participation and sampling: {samp.describe()}: "
        f"{_MATRIX_SAMPLING.get(samp.type_name, samp.type_name)}. The guarantee holds only if the pipeline "
        "really drew participations this way.",
        "Neighbouring data sets: add or remove one example (with all of its participations).",
        "What the attacker sees: every intermediate model, not only the final one (they are post-processing "
        "of the noisy release).",
        "Certification: the upper end of the interval is a proven upper bound on the exact epsilon of this "
        "mechanism (the strategy's sensitivity bounded from above, discretisation and truncation charged to the "
        "safe side); the lower end is attained by an explicit pair of neighbouring inputs. Where the sampler's "
        "amplification theory is incomplete the interval is wide rather than optimistic.",
    ]
    not_covered = _not_covered([1], training="the matrix mechanism") + [
        "Users with several examples: the epsilon protects one example with the participations stated above; "
        "a person contributing several examples is covered only if the participation pattern given to the "
        "sampler bounds all of that person's participations together."
    ]
    notes = [example.details[k] for k in ("note",) if isinstance((example.details or {}).get(k), str)]
    return PrivacyStatement(
        parameters=params,
        delta=delta,
        epsilon=example,
        groups=groups,
        guarantees=tuple(guarantees),
        not_covered=tuple(not_covered),
        accountant="connect-dots",
        seconds=time.perf_counter() - t0,
        notes=tuple(notes),
        **acc_kw,
    )


def _as_sequence(name: str, v) -> list:
    if isinstance(v, (str, bytes)) or not isinstance(v, (list, tuple, range)):
        raise ValueError(f"{name} must be a list of whole numbers, got {v!r}")
    return list(v)


def _rate(sampling_rate, n, b) -> float:
    if sampling_rate is not None:
        q = check_probability("sampling_rate", sampling_rate)
        if n is not None and b is not None and abs(q - b / n) > 1e-12 * q:
            raise ValueError(
                f"sampling_rate ({q!r}) conflicts with batch_size / dataset_size = {b}/{n}; give one or the other"
            )
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
            raise ValueError(
                f"steps ({k}) conflicts with epochs ({epochs:g} epochs = {from_epochs} steps); give one or the other"
            )
        return k
    if from_epochs is None:
        raise ValueError("steps is required (or give epochs)")
    return check_count("steps", from_epochs)


def _schedule_statement(schedule, sampling, ks, delta, acc_kw, params, t0, *, given, tuning=None) -> PrivacyStatement:
    from .accountants import DEFAULT_ACCOUNTANT, create
    from .dpsgd import dpsgd_mechanism
    from .group import group_epsilon_schedule

    extra = [k for k, v in given.items() if v is not None]
    if extra:
        raise ValueError(f"schedule replaces {', '.join(extra)}; give one or the other")
    segs = []
    for i, seg in enumerate(_as_sequence("schedule", schedule)):
        if not isinstance(seg, (list, tuple)) or len(seg) != 3:
            raise ValueError(f"schedule[{i}] must be (noise_multiplier, sampling_rate, steps), got {seg!r}")
        segs.append(
            (
                check_positive(f"schedule[{i}].noise_multiplier", seg[0]),
                check_probability(f"schedule[{i}].sampling_rate", seg[1]),
                check_count(f"schedule[{i}].steps", seg[2]),
            )
        )
    if not segs:
        raise ValueError("schedule must not be empty")
    if tuning is not None:
        total = sum(k for _, _, k in segs)
        params.update({"schedule": segs, "steps": total, "noise_multiplier": None, "sampling_rate": None})
        rates = {q for _, q, _ in segs}
        text = guarantee_paragraphs(
            sampling=sampling,
            sampling_rate=rates.pop() if len(rates) == 1 else None,
            group_sizes=(),
            steps=total,
            tuning=tuning,
        )
        ledger = [(dpsgd_mechanism(noise_multiplier=s, sampling_rate=q), k) for s, q, k in segs]
        return _tuned_statement(ledger, tuning, ks, delta, acc_kw, t0, params=params, text=text, notes=[])
    acc = create(DEFAULT_ACCOUNTANT, **acc_kw)
    for s, q, k in segs:
        acc.compose(dpsgd_mechanism(noise_multiplier=s, sampling_rate=q), k)
    example = acc.epsilon(delta)
    groups = [
        GroupRow(k, example if k == 1 else group_epsilon_schedule(schedule=segs, delta=delta, group_size=k, **acc_kw))
        for k in ks
    ]
    total = sum(k for _, _, k in segs)
    params.update({"schedule": segs, "steps": total, "noise_multiplier": None, "sampling_rate": None})
    rates = {q for _, q, _ in segs}
    text = guarantee_paragraphs(
        sampling=sampling, sampling_rate=rates.pop() if len(rates) == 1 else None, group_sizes=ks, steps=total
    )
    return PrivacyStatement(
        parameters=params,
        delta=delta,
        epsilon=example,
        groups=tuple(groups),
        guarantees=tuple(text["guarantees"]),
        not_covered=tuple(text["not_covered"]),
        accountant=DEFAULT_ACCOUNTANT,
        seconds=time.perf_counter() - t0,
        **acc_kw,
    )


def statement_from_config(
    config,
    *,
    delta: float | None = None,
    group_sizes: Sequence[int] | None = None,
    eps_error: float | None = None,
    rel_error: float | None = None,
) -> PrivacyStatement:
    """The statement for a privacy report's configuration (``tightdp.report.load_config``).

    ``delta`` defaults to the config's first delta and ``group_sizes`` to its
    ``privacy.group_sizes``; the config's ``training.sampling`` is parsed by the registry of
    ``tightdp.sampling`` (``without_replacement``: the substitute relation, 001 Sec. 6.2).
    """
    if not getattr(config, "is_training", False):
        raise ValueError("config: a privacy statement needs a [training] table (a DP-SGD run), not [[events]]")
    d = config.deltas[0] if delta is None else delta
    ks = list(config.group_sizes if group_sizes is None else group_sizes)
    cls = config.sampling_scheme
    segs = config.segments
    if len(segs) > 1:
        return privacy_statement(
            schedule=[(s.noise_multiplier, s.sampling_rate, s.steps) for s in segs],
            delta=d,
            sampling=cls.name,
            group_sizes=ks,
            eps_error=eps_error,
            rel_error=rel_error,
            dataset_size=config.dataset_size,
            batch_size=config.batch_size,
        )
    s = segs[0]
    kw: dict[str, Any] = {"max_batch_size": config.max_batch_size}
    if config.dataset_size is not None and config.batch_size is not None and not cls.per_epoch:
        kw.update(dataset_size=config.dataset_size, batch_size=config.batch_size)
    else:  # the epoch-based schemes: the rate 1/t of t = ceil(N / B) batches an epoch
        kw["sampling_rate"] = s.sampling_rate
        if "dataset_size" in cls.options:
            kw["dataset_size"] = config.dataset_size
    return privacy_statement(
        noise_multiplier=s.noise_multiplier,
        steps=s.steps,
        delta=d,
        sampling=cls.name,
        group_sizes=ks,
        eps_error=eps_error,
        rel_error=rel_error,
        **kw,
    )

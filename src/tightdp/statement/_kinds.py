"""The statements of the runs that are not one ``TrainingRun``: a tuning procedure, a correlated-noise
(matrix-mechanism) run and a Poisson noise schedule; and the checks of the run keywords."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypedDict

from .._validation import check_count, check_positive, check_probability

if TYPE_CHECKING:
    from ..matrix import Sampler
    from ..tuning import RunLedger, Tuning

from ._text import GroupRow, PrivacyStatement, _not_covered, guarantee_paragraphs


class AccuracyKw(TypedDict):
    """The accuracy keywords passed through to the accountants (``tightdp._accuracy``)."""

    eps_error: float | None
    rel_error: float | None


def _tuned_statement(
    ledger: RunLedger,
    tuning: Tuning,
    ks: list[int],
    delta: float,
    acc_kw: AccuracyKw,
    t0: float,
    *,
    params: dict[str, Any],
    text: dict[str, list[str]],
    notes: list[str],
) -> PrivacyStatement:
    """The statement of a tuning procedure over one run's ledger (``tightdp.tuning.tuning_epsilon``)."""
    from ..accountants import DEFAULT_ACCOUNTANT

    if acc_kw.get("eps_error") is not None or acc_kw.get("rel_error") is not None:
        notes = list(notes) + [
            "the tuning bounds use the accountants' default accuracy; eps_error / rel_error do not apply to them"
        ]
    eps = tuning.epsilon(run=ledger, delta=delta)
    details = dict(eps.details or {})
    params["tuning"] = tuning.to_dict()
    method = str(details.get("method", "tuning_epsilon"))
    routes = [
        f"{name} {details[key]:.6g}"
        for name, key in (
            ("composition", "composition_epsilon"),
            ("Renyi DP (Papernot & Steinke 2022)", "rdp_epsilon"),
            ("privacy profile (Koskela, Redberg & Wang 2024)", "profile_epsilon"),
        )
        if isinstance(details.get(key), float)
    ]
    sentence = (
        f"Hyper-parameter tuning: the epsilon covers the whole tuning procedure, {tuning.describe()}; "
        "every run is assumed to be a run as stated above (same sampling, noise and length; other "
        "hyper-parameters may differ) and the choice of the run to release may use the private data. "
        f"Upper end: {method}"
        + (f" (the smallest of the certified routes: {'; '.join(routes)})" if len(routes) > 1 else "")
        + f". Lower end: {details.get('lower_method', 'none')}: "
        + (
            "every run's output is released, so the composition's certified lower end is attained."
            if tuning.release == "all"
            else "the best run released under the score 'privacy loss above a threshold' (some run above it) is "
            "a concrete instance of the procedure, so its certified lower end is attained by the procedure."
            if details.get("lower_method", "").startswith("threshold")
            else "with a constant score every run is equally good and the released output is one run's, so "
            "one run's certified lower end is attained by the procedure."
        )
    )
    why = "not applicable: no group analysis of tuning runs is implemented"
    groups = tuple(GroupRow(k, eps) if k == 1 else GroupRow(k, None, why) for k in ks)
    if method.startswith("Renyi"):
        accountant = "rdp (Papernot-Steinke)"
    elif method.startswith("privacy profile"):
        accountant = "privacy-profile (Koskela-Redberg-Wang, on the connect-dots profile)"
    else:
        accountant = DEFAULT_ACCOUNTANT
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
    "min_sep": "each record joining a step's batch independently unless it took part in the previous min_sep - 1 "
    "steps (b-min-sep sampling, Dong & Ganesh 2026)",
}


def _matrix_statement(
    strategy: Any,
    sampler: Sampler | None,
    noise_multiplier: float | None,
    steps: int | None,
    ks: list[int],
    delta: float,
    acc_kw: AccuracyKw,
    t0: float,
    *,
    given: dict[str, Any],
) -> PrivacyStatement:
    """The statement of a correlated-noise run (``tightdp.matrix.matrix_epsilon``)."""
    from ..matrix import NoAmplification, Sampler, as_strategy, matrix_epsilon

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
    if "counting the participations" in str((example.details or {}).get("lower", "")):
        notes.append(
            "The lower end comes from a linear statistic of the release that counts how often the example took "
            "part: a strategy that makes the total of the steps precise reveals that count, so sampling amplifies "
            "this run less than it would DP-SGD."
        )
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


def _as_sequence(name: str, v: Any) -> list[Any]:
    if isinstance(v, (str, bytes)) or not isinstance(v, (list, tuple, range)):
        raise ValueError(f"{name} must be a list of whole numbers, got {v!r}")
    return list(v)


def _rate(sampling_rate: float | None, n: int | None, b: int | None) -> float:
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


def _steps(steps: int | None, epochs: float | None, n: int | None, b: int | None, q: float) -> int:
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


def _schedule_statement(
    schedule: Sequence[Sequence[float]],
    sampling: str,
    ks: list[int],
    delta: float,
    acc_kw: AccuracyKw,
    params: dict[str, Any],
    t0: float,
    *,
    given: dict[str, Any],
    tuning: Tuning | None = None,
) -> PrivacyStatement:
    from ..accountants import DEFAULT_ACCOUNTANT, create
    from ..dpsgd import dpsgd_mechanism
    from ..group import group_epsilon_schedule

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

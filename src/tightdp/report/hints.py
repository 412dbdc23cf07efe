"""The report's hints: calibration (noise or epochs for target epsilons) and group-level epsilon.

Each hint is one independent job for ``tightdp.report.compute``: ``_calibration_plan`` /
``_group_plan`` say what will be computed (or why nothing is), ``_calibration_job`` /
``_group_job`` compute one entry (``tightdp.calibration``; ``tightdp.group_epsilon``, Ganesh 2024).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._sections import _upper
from .config import ReportConfig

__all__: list[str] = []

#: Epoch hints search up to this many times the configured number of steps.
_EPOCH_HINT_FACTOR = 20


def _calibration_plan(config: ReportConfig) -> tuple[str, list[tuple[str, float]]]:
    """The note above the hints and the ``(kind, target)`` jobs."""
    if not config.target_epsilons:
        return "No target epsilons given (privacy.target_epsilons).", []
    if not config.is_training:
        return "Calibration hints are given for training runs (a [training] table).", []
    if "batch_size" in config.sampling_scheme.options:
        return (
            f"Calibration hints are given for schemes set by their sampling rate; this run samples "
            f"{config.sampling_scheme.summary}."
        ), []
    if len({s.sampling_rate for s in config.segments}) != 1:
        return "Calibration hints need one sampling rate across the schedule.", []
    q, k, delta = config.segments[0].sampling_rate, config.total_steps, config.deltas[0]
    from .._accuracy import describe_accuracy
    from ..accountants import DEFAULT_ACCOUNTANT

    note = (
        f"Certified by the {DEFAULT_ACCOUNTANT} upper bound at accuracy {describe_accuracy()} (the default of "
        f"`tightdp epsilon`, so re-checking an answer there gives at most the target) at δ = {delta:g}, sampling "
        f"rate {q:.6g}"
        + (f", {config.scheme} sampling" if config.scheme else "")
        + f". Noise: the smallest constant noise multiplier for {k} steps that meets the target, "
        "rounded up in the printed digits; the note column says when a little less noise is not shown to "
        "exceed it. "
    )
    jobs = [("noise", t) for t in config.target_epsilons]
    if len(config.segments) == 1 and config.steps_per_epoch:
        note += "Epochs: the most whole epochs the configured noise affords."
        jobs += [("epochs", t) for t in config.target_epsilons]
    return note, jobs


def _calibration_job(config: ReportConfig, what: str, t: float) -> dict[str, Any]:
    """One calibration hint: the noise (``what == "noise"``) or the epochs (``"epochs"``) for epsilon <= ``t``."""
    from ..calibration import CalibrationError, calibrate_noise, calibrate_steps

    q, k, delta = config.segments[0].sampling_rate, config.total_steps, config.deltas[0]
    scheme: dict[str, Any] = {}
    if config.scheme:  # calibrate the scheme that ran (tightdp.calibration, sampling=...)
        scheme = {
            "sampling": config.scheme,
            "dataset_size": config.dataset_size,
            "max_batch_size": config.max_batch_size,
        }
    try:
        if what == "noise":
            cal = calibrate_noise(target_epsilon=t, delta=delta, sampling_rate=q, steps=k, **scheme)
            tight = cal.details.get("tightness", {})
            return {
                "question": f"noise for ε ≤ {t:g}",
                "answer": f"σ = {cal.noise_multiplier:.6g}",
                "noise_multiplier": cal.noise_multiplier,
                "target_epsilon": t,
                "epsilon_upper": cal.epsilon.upper,
                "eps_error": cal.eps_error,
                "note": ""
                if tight.get("overshoots")
                else (cal.details.get("note_sampling") or tight.get("note", cal.details.get("note", ""))),
            }
        sigma, spe = config.segments[0].noise_multiplier, config.steps_per_epoch
        if spe is None:
            raise ValueError("training: epoch hints need a number of steps per epoch")
        cal = calibrate_steps(
            target_epsilon=t,
            delta=delta,
            noise_multiplier=sigma,
            sampling_rate=q,
            multiple_of=spe,
            max_steps=_EPOCH_HINT_FACTOR * k,
            **scheme,
        )
        note = ""
        if "note" in cal.details:
            note = f"at least; not searched beyond {_EPOCH_HINT_FACTOR}× the configured run"
        return {
            "question": f"epochs at σ = {sigma:g} for ε ≤ {t:g}",
            "answer": f"{cal.steps // spe} epochs ({cal.steps} steps)",
            "steps": cal.steps,
            "target_epsilon": t,
            "epsilon_upper": cal.epsilon.upper,
            "note": note,
        }
    except (CalibrationError, ArithmeticError) as exc:
        return {
            "question": f"{what} for ε ≤ {t:g}",
            "answer": "—",
            "target_epsilon": t,
            "epsilon_upper": None,
            "note": str(exc),
        }


def _group_functions() -> tuple[Callable[..., Any] | None, Callable[..., Any] | None]:
    """``(group_epsilon, group_epsilon_schedule)``; the report's tests replace this to check the report without
    group rows."""
    from ..group import group_epsilon, group_epsilon_schedule

    return group_epsilon, group_epsilon_schedule


def _group_plan(config: ReportConfig) -> tuple[str, list[int]]:
    """The note above the group rows and the group sizes to compute (none, with the reason, when none apply)."""
    if not config.group_sizes:
        return "", []
    fn, sched = _group_functions()
    if fn is None:
        return "Group-level epsilon needs `tightdp.group_epsilon`, which this installation does not provide.", []
    if config.scheme:
        from ..sampling import GroupAnalysis

        cls = config.sampling_scheme
        if cls.group_analysis is GroupAnalysis.NONE:
            return f"Group-level epsilon for {config.scheme} sampling: {cls.group_reason}.", []
        return (
            f"Certified upper bounds on epsilon for groups of up to k examples under {config.scheme} sampling "
            f"(`tightdp.group_epsilon(sampling=...)`). {cls.group_sentence()}"
        ), list(config.group_sizes)
    from ..sampling import Poisson

    if not config.is_training or config.sampling_scheme is not Poisson:
        return (
            "Group-level epsilon is computed for Poisson-sampled training runs (add/remove of up to k examples)."
        ), []
    if len(config.segments) > 1 and sched is None:
        return "Group-level epsilon for a noise schedule needs `tightdp.group_epsilon_schedule`.", []
    return (
        "Certified upper bounds on epsilon when any group of up to k examples is added or removed together "
        "(the T-fold mixture-of-Gaussians mechanism with Binomial(k, q) sensitivity, Ganesh 2024, Thm. 3.1)."
    ), list(config.group_sizes)


def _group_job(config: ReportConfig, g: int) -> tuple[dict[str, Any], list[str]]:
    """Group size ``g``'s certified epsilon upper bound at every delta, and the failures."""
    fn, sched = _group_functions()
    if fn is None:
        raise ValueError("group_sizes: this installation provides no group_epsilon")
    eps: dict[str, float | None] = {}
    errors: list[str] = []
    for d in config.deltas:
        try:
            if len(config.segments) == 1:
                s = config.segments[0]
                extra = {"sampling": config.scheme} if config.scheme else {}
                b = fn(
                    group_size=g,
                    noise_multiplier=s.noise_multiplier,
                    sampling_rate=s.sampling_rate,
                    steps=s.steps,
                    delta=d,
                    **extra,
                )
            else:
                if sched is None:
                    raise ValueError("group_sizes: a noise schedule needs group_epsilon_schedule")
                b = sched(
                    schedule=[(s.noise_multiplier, s.sampling_rate, s.steps) for s in config.segments],
                    group_size=g,
                    delta=d,
                )
            eps[repr(d)] = _upper(b)
            if eps[repr(d)] is None:
                errors.append(f"group size {g}, δ = {d:g}: {b.details.get('note', 'no finite bound')}")
        except (ValueError, TypeError, ArithmeticError) as exc:
            errors.append(f"group size {g}, δ = {d:g}: {type(exc).__name__}: {exc}")
            eps[repr(d)] = None
    return {"group_size": g, "epsilon": eps}, errors

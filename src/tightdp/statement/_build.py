"""``privacy_statement`` (one call: the run's epsilon, a row per group size, the plain language) and
``statement_from_config`` (the same for a privacy report's configuration)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .._accuracy import check_accuracy
from .._validation import check_count, check_delta, check_positive
from ..runs import TrainingRun
from ..sampling import GroupAnalysis, Poisson, SamplingScheme, scheme_class
from ._kinds import AccuracyKw, _as_sequence, _matrix_statement, _rate, _schedule_statement, _steps, _tuned_statement
from ._text import GroupRow, PrivacyStatement, guarantee_paragraphs

if TYPE_CHECKING:
    from ..matrix import Sampler
    from ..tuning import Tuning


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
    strategy: Any = None,
    sampler: Sampler | None = None,
    tuning: Tuning | dict[str, Any] | None = None,
) -> PrivacyStatement:
    """A certified privacy statement for a DP-SGD run (example-level and group-level epsilon, assumptions).

    Parameters
    ----------
    delta : float
        The delta of every epsilon, in (0, 1).
    run : TrainingRun, optional
        The run (``tightdp.runs.TrainingRun``); replaces the run keywords.
    noise_multiplier, sampling_rate, dataset_size, batch_size, steps, epochs, sampling, max_batch_size
        The run as keywords: the sampling rate as ``sampling_rate`` or ``batch_size / dataset_size``; the
        length as ``steps`` or ``epochs`` (``steps = ceil(epochs * ceil(dataset_size / batch_size))``, as
        Opacus and ``tightdp epsilon`` count them); ``sampling`` a registered name
        (``tightdp.sampling.scheme_names()``) or a scheme object. The example-level epsilon is the run's
        (``TrainingRun.epsilon`` with the default accountant); group rows come from ``group_epsilon``
        (Poisson: Ganesh 2024, Thm 3.1; ``fixed-batch``: Ganesh 2024, Thm 3.3, ``2 Hypergeom(B, N + k, k)``; random
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
        smaller of the ``K``-fold composition and the privacy-profile bound of Koskela, Redberg & Wang 2024, or of
        Papernot & Steinke 2022 Thm 2 / Thm 6 (RDP) and that privacy-profile bound), and hyper-parameter
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
    acc_kw: AccuracyKw = {"eps_error": eps_error, "rel_error": rel_error}
    ks = [check_count(f"group_sizes[{i}]", k) for i, k in enumerate(_as_sequence("group_sizes", group_sizes))]
    if tuning is not None:
        from ..tuning import Tuning

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
    acc_kw: AccuracyKw,
    t0: float,
    *,
    params: dict[str, Any] | None = None,
    given: dict[str, Any] | None = None,
    tuning: Tuning | None = None,
) -> PrivacyStatement:
    """The statement of one ``TrainingRun``: its epsilon, a row per group size, the scheme's sentences."""
    from ..accountants import DEFAULT_ACCOUNTANT
    from ..group import group_epsilon

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


def statement_from_config(
    config: Any,
    *,
    delta: float | None = None,
    group_sizes: Sequence[int] | None = None,
    eps_error: float | None = None,
    rel_error: float | None = None,
) -> PrivacyStatement:
    """The statement for a privacy report's configuration (``tightdp.report.load_config``).

    The config's ``training.sampling`` is parsed by the registry of ``tightdp.sampling``
    (``without_replacement``: the substitute relation, Koskela et al. 2020, Sec. 6.2).

    Parameters
    ----------
    config : tightdp.report.ReportConfig
        A loaded configuration with a ``[training]`` table.
    delta : float, optional
        The delta (default: the config's first).
    group_sizes : sequence of int, optional
        The group sizes (default: the config's ``privacy.group_sizes``).
    eps_error, rel_error : float, optional
        The accuracy (``tightdp._accuracy``; default: relative 1e-3).

    Returns
    -------
    PrivacyStatement
        The statement, as ``privacy_statement`` gives it.

    Raises
    ------
    ValueError
        If the config describes events rather than a training run, or a value is out of its domain.
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

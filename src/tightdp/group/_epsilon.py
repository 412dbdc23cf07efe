"""Group-level epsilon of a run: the group's step mechanism (``group_mechanism``), its ledger, and
``group_epsilon`` / ``group_epsilon_schedule`` for every scheme of ``tightdp.sampling``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .._accuracy import check_accuracy
from .._validation import check_choice, check_count, check_delta, check_positive, check_probability
from ..accountants import DEFAULT_ACCOUNTANT
from ..accountants.base import Accountant
from ..accountants.connect_dots import ConnectDotsAccountant
from ..bounds import Bounds
from ..errors import UnsupportedMechanismError
from ..mechanisms import Mechanism
from ..runs import TrainingRun
from ..sampling import GroupAnalysis, SamplingScheme, scheme_class
from ._lemma import ExampleCurve, _lemma_accountant, group_privacy_lemma_epsilon


# ------------------------------------------------------------------------------------ mechanisms
def _group_scheme(
    *,
    sampling: str | SamplingScheme | None,
    sampling_rate: float | None,
    dataset_size: int | None,
    batch_size: int | None,
    group_size: int,
) -> SamplingScheme:
    """The scheme a group question is about, from a scheme object or a name and its keywords; keywords the
    scheme does not read are refused, and a given ``sampling_rate`` must be the scheme's."""
    if isinstance(sampling, SamplingScheme):
        given = [
            k
            for k, v in (("sampling_rate", sampling_rate), ("dataset_size", dataset_size), ("batch_size", batch_size))
            if v is not None
        ]
        if given:
            raise ValueError(f"the sampling scheme object replaces {', '.join(given)}; give one or the other")
        return sampling
    cls = scheme_class(sampling)
    if batch_size is not None and "batch_size" not in cls.options:
        raise ValueError(
            f"batch_size applies only to sampling='fixed-batch', not {cls.name!r}"
            + ("; give sampling_rate = 1/t (t steps per epoch)" if cls.per_epoch else "")
        )
    if dataset_size is not None and "dataset_size" not in cls.options:
        n = check_count("dataset_size", dataset_size)
        k = check_count("group_size", group_size)
        if k > n:
            raise ValueError(f"group_size ({k}) must be <= dataset_size ({n})")
    scheme = cls.from_options(sampling_rate=sampling_rate, dataset_size=dataset_size, batch_size=batch_size)
    if scheme.group_analysis is GroupAnalysis.MIXTURE:  # the group's own checks (size against the data) first
        scheme.group_step(noise_multiplier=1.0, group_size=check_count("group_size", group_size))
    if sampling_rate is not None:
        q = check_probability("sampling_rate", sampling_rate)
        rate: float = getattr(scheme, "sampling_rate")  # noqa: B009 - every concrete scheme has one
        if not math.isclose(q, rate, rel_tol=1e-9):
            raise ValueError(
                f"sampling_rate ({q!r}) must equal batch_size / dataset_size "
                f"({batch_size}/{dataset_size} = {rate!r}) "
                f"for sampling={cls.name!r}; omit it to use the ratio"
            )
    return scheme


def group_mechanism(
    *,
    noise_multiplier: float,
    group_size: int,
    sampling: str | SamplingScheme = "poisson",
    sampling_rate: float | None = None,
    dataset_size: int | None = None,
    batch_size: int | None = None,
) -> Mechanism:
    """The mechanism of one DP-SGD step as seen by a group of up to ``group_size`` examples.

    Parameters
    ----------
    noise_multiplier : float
        The noise multiplier sigma, > 0.
    group_size : int
        The group size ``k``, a positive whole number.
    sampling : str or SamplingScheme, default ``"poisson"``
        A scheme with a mixture-of-Gaussians group step (``GroupAnalysis.MIXTURE``): ``"poisson"`` needs
        ``sampling_rate`` (Ganesh 2024, Thm 3.1); ``"fixed-batch"`` needs ``batch_size`` and ``dataset_size``
        (a lower bound on the number of examples outside the group, Ganesh 2024, Thm 3.3), ``sampling_rate``
        is then optional and, if given, must equal ``batch_size / dataset_size``.
    sampling_rate : float, optional
        The Poisson sampling rate ``q``.
    dataset_size : int, optional
        The lower bound ``N`` on the examples outside the group (fixed batches).
    batch_size : int, optional
        The batch size ``B`` (fixed batches).

    Returns
    -------
    Mechanism
        The group's mixture-of-Gaussians step (``GroupPoissonSampled`` or ``GroupFixedBatchSampled``).

    Raises
    ------
    ValueError
        Bad input, naming the argument; a scheme without a mixture-of-Gaussians group step.
    """
    k = check_count("group_size", group_size)
    sigma = check_positive("noise_multiplier", noise_multiplier)
    scheme = _group_scheme(
        sampling=sampling, sampling_rate=sampling_rate, dataset_size=dataset_size, batch_size=batch_size, group_size=k
    )
    if scheme.group_analysis is not GroupAnalysis.MIXTURE:
        raise ValueError(
            f"sampling must be a scheme with a mixture-of-Gaussians group step (poisson, fixed-batch), "
            f"got {scheme.name!r}"
        )
    return scheme.group_step(noise_multiplier=sigma, group_size=k)


def group_ledger(
    *, schedule: Sequence[Sequence[Any]], group_size: int, sampling: str = "poisson", dataset_size: int | None = None
) -> list[tuple[Mechanism, int]]:
    """``(mechanism, steps)`` entries for a schedule of DP-SGD segments.

    Each segment is ``(noise_multiplier, sampling_rate, steps)`` for Poisson
    sampling or ``(noise_multiplier, batch_size, steps)`` for fixed batches
    (all sharing ``dataset_size``). Everything is validated before returning.

    Parameters
    ----------
    schedule : sequence of (float, float, int)
        The segments.
    group_size : int
        The group size ``k``, a positive whole number.
    sampling : str, default ``"poisson"``
        ``"poisson"`` or ``"fixed-batch"`` (a scheme with a mixture-of-Gaussians group step).
    dataset_size : int, optional
        The lower bound ``N`` on the examples outside the group (fixed batches).

    Returns
    -------
    list of (Mechanism, int)
        One ``(group step, steps)`` entry per segment.

    Raises
    ------
    ValueError
        If the schedule is empty or malformed, or a segment's value is out of its domain (named with its
        index), or the scheme has no mixture-of-Gaussians group step.
    """
    cls = scheme_class(sampling)
    if cls.group_analysis is not GroupAnalysis.MIXTURE:
        raise ValueError(
            f"sampling must be a scheme with a mixture-of-Gaussians group step (poisson, fixed-batch), got {sampling!r}"
        )
    by_batch = "batch_size" in cls.options  # the segment's middle entry is a batch size, else a rate
    if isinstance(schedule, (str, bytes)) or not hasattr(schedule, "__iter__"):
        raise ValueError(f"schedule must be a sequence of (noise_multiplier, rate or batch, steps), got {schedule!r}")
    out: list[tuple[Mechanism, int]] = []
    for i, seg in enumerate(schedule):
        if isinstance(seg, (str, bytes)) or not hasattr(seg, "__len__") or len(seg) != 3:
            raise ValueError(
                f"schedule[{i}] must be a (noise_multiplier, sampling_rate or batch_size, steps) triple, got {seg!r}"
            )
        sigma, rate_or_batch, steps = seg
        steps = check_count(f"schedule[{i}] steps", steps)
        which = {"batch_size" if by_batch else "sampling_rate": rate_or_batch}
        try:
            mech = group_mechanism(
                noise_multiplier=sigma, group_size=group_size, sampling=cls.name, dataset_size=dataset_size, **which
            )
        except ValueError as exc:
            raise ValueError(f"schedule[{i}]: {exc}") from None
        out.append((mech, steps))
    if not out:
        raise ValueError("schedule must contain at least one segment")
    return out


def _make_accountant(
    accountant: str | Accountant, eps_error: float | None, rel_error: float | None = None
) -> Accountant:
    from ..accountants import ACCOUNTANTS, create

    if isinstance(accountant, Accountant):
        if accountant.ledger:
            raise ValueError("accountant must be an accountant name or an empty Accountant instance")
        return type(accountant)(**accountant.options())
    check_choice("accountant", accountant, sorted(ACCOUNTANTS))
    return create(accountant, eps_error=eps_error, rel_error=rel_error)


# ------------------------------------------------------------------------------------ epsilon
def _group_run(
    *,
    run: TrainingRun | None,
    noise_multiplier: float | None,
    sampling: str | SamplingScheme | None,
    sampling_rate: float | None,
    steps: int | None,
    dataset_size: int | None,
    batch_size: int | None,
    group_size: int,
) -> TrainingRun:
    """The run a group question is about: ``run`` itself (then the keywords must be absent) or one built from
    the keywords (``sampling`` parsed by the registry of ``tightdp.sampling``)."""
    if run is not None:
        if not isinstance(run, TrainingRun):
            raise ValueError(f"run must be a tightdp.TrainingRun, got {run!r}")
        given = [
            k
            for k, v in (
                ("noise_multiplier", noise_multiplier),
                ("sampling_rate", sampling_rate),
                ("steps", steps),
                ("dataset_size", dataset_size),
                ("batch_size", batch_size),
            )
            if v is not None
        ]
        if given or sampling is not None:
            raise ValueError(f"run replaces {', '.join(given) or 'sampling'}; give one or the other")
        return run
    sigma = check_positive("noise_multiplier", noise_multiplier)
    if not isinstance(sampling, SamplingScheme):
        cls = scheme_class(sampling)
        if cls.group_analysis is GroupAnalysis.NONE:  # refused before its own arguments are asked for
            raise UnsupportedMechanismError(f"group privacy for sampling={cls.name!r}: {cls.group_reason}")
    scheme = _group_scheme(
        sampling=sampling,
        sampling_rate=sampling_rate,
        dataset_size=dataset_size,
        batch_size=batch_size,
        group_size=group_size,
    )
    return TrainingRun(noise_multiplier=sigma, sampling=scheme, steps=check_count("steps", steps))


def group_epsilon(
    *,
    noise_multiplier: float | None = None,
    sampling_rate: float | None = None,
    steps: int | None = None,
    delta: float,
    group_size: int,
    sampling: str | SamplingScheme | None = None,
    dataset_size: int | None = None,
    batch_size: int | None = None,
    eps_error: float | None = None,
    rel_error: float | None = None,
    accountant: str | Accountant = DEFAULT_ACCOUNTANT,
    run: TrainingRun | None = None,
) -> Bounds:
    """Certified bounds on DP-SGD's epsilon for groups of up to ``group_size`` examples.

    For a scheme with a mixture-of-Gaussians group step (Poisson, fixed batches; Ganesh 2024, Thm 3.1 / 3.3):
    the ``T = steps``-fold composition of the MoG mechanism of ``group_mechanism`` under
    add-or-remove-up-to-k adjacency (Ganesh 2024, Sec. 2.2: the worse of the add and remove compositions),
    composed by ``accountant`` (default: the dominance-based ``connect-dots`` accountant, whose ``upper`` is a
    proven bound, at the accuracy asked for: ``tightdp._accuracy``). ``group_size = 1`` is example-level DP-SGD.

    Random allocation and shuffling (``GroupAnalysis.NO_AMPLIFICATION``; ``sampling_rate = 1/t`` and whole
    epochs) get the certified bounds of the module docstring (``details`` says which one is the upper end,
    and that the lower end is the example-level one).

    Parameters
    ----------
    noise_multiplier : float, optional
        The noise multiplier sigma, > 0 (with the run keywords).
    sampling_rate : float, optional
        The sampling rate (Poisson: ``q``; the epoch-based schemes: ``1/t``; fixed batches: optional, and if
        given equal to ``batch_size / dataset_size``).
    steps : int, optional
        The number of steps (the epoch-based schemes: whole epochs).
    delta : float
        The delta, in (0, 1).
    group_size : int
        The group size ``k`` (``1``: example-level DP-SGD), a positive whole number.
    sampling : str or SamplingScheme, optional
        A registered name (``tightdp.sampling.scheme_names()``; default ``"poisson"``) or a scheme object.
    dataset_size : int, optional
        The data set size (fixed batches: a lower bound on the examples outside the group).
    batch_size : int, optional
        The batch size (fixed batches).
    eps_error, rel_error : float, optional
        The accuracy (``tightdp._accuracy``; default: relative 1e-3).
    accountant : str or Accountant, default ``DEFAULT_ACCOUNTANT``
        An accountant name or an empty accountant instance (the ``NO_AMPLIFICATION`` schemes: the default only).
    run : TrainingRun, optional
        The run; replaces ``noise_multiplier``, ``sampling_rate``, ``steps``, ``sampling``, ``dataset_size``,
        ``batch_size``.

    Returns
    -------
    Bounds
        Certified ``lower <= upper`` on the group-level epsilon; ``details`` name the mechanisms (or, for the
        ``NO_AMPLIFICATION`` schemes, which bound is the upper end).

    Raises
    ------
    ValueError
        Bad input, naming the argument (``sampling`` that is not a scheme name or object among them).
    UnsupportedMechanismError
        No group analysis applies to the scheme (the message says why).
    """
    run = _group_run(
        run=run,
        noise_multiplier=noise_multiplier,
        sampling=sampling,
        sampling_rate=sampling_rate,
        steps=steps,
        dataset_size=dataset_size,
        batch_size=batch_size,
        group_size=group_size,
    )
    scheme = run.sampling
    if scheme.group_analysis is not GroupAnalysis.MIXTURE:
        return _scheme_group_epsilon(
            run=run, delta=delta, group_size=group_size, eps_error=eps_error, rel_error=rel_error, accountant=accountant
        )
    mech = scheme.group_step(noise_multiplier=run.noise_multiplier, group_size=check_count("group_size", group_size))
    return _epsilon_of(
        [(mech, run.steps)], delta=delta, eps_error=eps_error, rel_error=rel_error, accountant=accountant
    )


def group_epsilon_schedule(
    *,
    schedule: Sequence[Sequence[Any]],
    delta: float,
    group_size: int,
    sampling: str = "poisson",
    dataset_size: int | None = None,
    eps_error: float | None = None,
    rel_error: float | None = None,
    accountant: str | Accountant = DEFAULT_ACCOUNTANT,
) -> Bounds:
    """``group_epsilon`` for a heterogeneous schedule: segments ``(noise_multiplier, q or B, steps)``.

    The per-step dominating pairs compose adaptively (Ganesh 2024, Lemma 2.6), so the
    schedule's guarantee is that of the composed MoG mechanisms.

    Parameters
    ----------
    schedule : sequence of (float, float, int)
        The segments ``(noise_multiplier, sampling_rate or batch_size, steps)`` (``group_ledger``).
    delta : float
        The delta, in (0, 1).
    group_size : int
        The group size ``k``, a positive whole number.
    sampling : str, default ``"poisson"``
        ``"poisson"`` or ``"fixed-batch"``.
    dataset_size : int, optional
        The lower bound ``N`` on the examples outside the group (fixed batches).
    eps_error, rel_error : float, optional
        The accuracy (``tightdp._accuracy``; default: relative 1e-3).
    accountant : str or Accountant, default ``DEFAULT_ACCOUNTANT``
        An accountant name or an empty accountant instance.

    Returns
    -------
    Bounds
        Certified ``lower <= upper`` on the group-level epsilon of the whole schedule.

    Raises
    ------
    ValueError
        If the schedule or an argument is out of its domain, naming it.
    """
    ledger = group_ledger(schedule=schedule, group_size=group_size, sampling=sampling, dataset_size=dataset_size)
    return _epsilon_of(ledger, delta=delta, eps_error=eps_error, rel_error=rel_error, accountant=accountant)


def _epsilon_of(
    ledger: list[tuple[Mechanism, int]],
    *,
    delta: float,
    eps_error: float | None,
    rel_error: float | None = None,
    accountant: str | Accountant,
) -> Bounds:
    delta = check_delta("delta", delta)
    eps_error, rel_error = check_accuracy(eps_error, rel_error)
    acc = _make_accountant(accountant, eps_error, rel_error)
    acc.compose(ledger)
    out = acc.epsilon(delta)
    details = {
        **dict(out.details),
        "accountant": acc.name,
        "mechanisms": [{"mechanism": m.to_dict(), "steps": c} for m, c in ledger],
    }
    return Bounds(out.lower, out.estimate, out.upper, out.quantity, out.kind, details)


def _scheme_group_epsilon(
    *,
    run: TrainingRun,
    delta: float,
    group_size: int,
    eps_error: float | None,
    rel_error: float | None,
    accountant: str | Accountant,
    shared: dict[str, Any] | None = None,
) -> Bounds:
    """Group privacy for the ``NO_AMPLIFICATION`` schemes (random allocation, shuffling; module docstring);
    the ``NONE`` ones are refused with their reason. ``shared`` (a dict, filled on first use) carries the
    example-level answer and the lemma's example curve from one group size to the next (``group_curve``),
    which do not depend on it."""
    shared = {} if shared is None else shared
    from ..mechanisms import Gaussian

    scheme = run.sampling
    sigma = run.noise_multiplier
    k = check_count("group_size", group_size)
    delta = check_delta("delta", delta)
    eps_error, rel_error = check_accuracy(eps_error, rel_error)
    if scheme.group_analysis is not GroupAnalysis.NO_AMPLIFICATION:
        raise UnsupportedMechanismError(f"group privacy for sampling={scheme.name!r}: {scheme.group_reason}")
    if accountant != DEFAULT_ACCOUNTANT:
        raise ValueError(
            f"accountant must be {DEFAULT_ACCOUNTANT!r} for sampling={scheme.name!r} (its bounds come "
            f"from dominance pairs only), got {accountant!r}"
        )
    t = scheme.epoch_length() or 1  # NO_AMPLIFICATION schemes run whole epochs
    epochs = run.steps // t
    if "example" not in shared:
        shared["example"] = run.epsilon(delta=delta, eps_error=eps_error, rel_error=rel_error)
    example: Bounds = shared["example"]
    if k == 1:
        return example
    # (b) no amplification: every allocation / permutation shifts the epoch's mean by at most k in L2
    gdp = (
        ConnectDotsAccountant(eps_error=eps_error, rel_error=rel_error)
        .compose(Gaussian(noise_multiplier=sigma, sensitivity=float(k)), epochs)
        .epsilon(delta)
    )
    upper, how = (
        gdp.upper,
        (
            f"no amplification: {k * math.sqrt(epochs) / sigma:.6g}-GDP (each epoch's mean shift "
            f"has L2 norm <= k = {k} for every allocation or permutation; joint convexity)"
        ),
    )
    details: dict[str, Any] = {
        "sampling": dict(example.details).get("sampling", scheme.name),
        "group_size": k,
        "scheme": scheme.describe(),
        "no_amplification_epsilon": gdp.upper,
    }
    lemma_step = scheme.group_lemma_step(noise_multiplier=sigma)
    if lemma_step is not None:  # (a) the group-privacy lemma on the certified example-level curve
        if "curve" not in shared:
            example_acc = ConnectDotsAccountant(eps_error=eps_error, rel_error=rel_error).compose(lemma_step, epochs)
            shared["curve"] = ExampleCurve(_lemma_accountant(example_acc))
        lemma = group_privacy_lemma_epsilon(shared["curve"], delta=delta, group_size=k)
        details["group_privacy_lemma_epsilon"] = lemma.epsilon
        if lemma.note:
            details["group_privacy_lemma_note"] = lemma.note
        if lemma.epsilon is not None and lemma.epsilon < upper:
            upper, how = (
                lemma.epsilon,
                (
                    f"group-privacy lemma (Ganesh 2024, Lemma 1.1) on the certified example-level "
                    f"curve: ({lemma.example_epsilon:.6g}, {lemma.example_delta:.3g}) for one "
                    f"example gives ({lemma.epsilon:.6g}, {delta:g}) for {k}"
                ),
            )
    else:
        how += "; the GDP group-privacy bound of the example-level sqrt(E)/sigma-GDP (Dong, Roth, Su 2022, Thm 2.14)"
    lower = min(float(example.lower), upper)
    details.update(
        {
            "upper": how,
            "lower": "the example-level certified lower bound (a group of up to k includes one example); "
            "loose: no tight group analysis of this scheme is known",
            "example_epsilon": [example.lower, example.upper],
        }
    )
    return Bounds(lower, upper, upper, "epsilon", "bound", details)


# ------------------------------------------------------------------------------------ baselines

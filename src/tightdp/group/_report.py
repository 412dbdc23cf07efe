"""Group-level epsilon beside the example-level epsilon and both baselines of Ganesh 2024, Sec. 4:
``GroupReport``, ``group_report`` and ``group_curve``."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .._accuracy import check_accuracy
from .._validation import check_count, check_delta
from ..accountants import DEFAULT_ACCOUNTANT
from ..accountants.base import Accountant
from ..bounds import Bounds, _jsonable
from ..runs import TrainingRun
from ..sampling import GroupAnalysis, SamplingScheme
from ._epsilon import _epsilon_of, _group_run, _make_accountant, _scheme_group_epsilon
from ._lemma import ExampleCurve, LemmaResult, _lemma_accountant, group_privacy_lemma_epsilon


@dataclass(frozen=True)
class GroupReport:
    """Group-level epsilon with the two baselines of Ganesh 2024, Sec. 4 (JSON via ``to_dict``).

    Parameters
    ----------
    group_size : int
        The group size ``k``.
    delta : float
        The delta of every epsilon.
    sampling : str
        The scheme's name.
    epsilon : Bounds
        The certified group-level epsilon.
    example_epsilon : Bounds
        The certified example-level epsilon at the same delta.
    group_privacy_lemma : LemmaResult
        The group-privacy-lemma baseline.
    details : dict, optional
        The mechanisms, accountant and timings.

    Raises
    ------
    TypeError
        If a field is missing (a plain record: the values are not checked).
    """

    group_size: int
    delta: float
    sampling: str
    epsilon: Bounds
    example_epsilon: Bounds
    group_privacy_lemma: LemmaResult
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def linear_lower_bound(self) -> float:
        """``k * eps_1`` (Ganesh 2024, Sec. 4), from the certified lower bound on ``eps_1``."""
        return self.group_size * float(self.example_epsilon.lower)

    @property
    def group_privacy_lemma_epsilon(self) -> float | None:
        """The group-privacy lemma's certified epsilon (``None`` where it gives none)."""
        return self.group_privacy_lemma.epsilon

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data (what ``tightdp group --json`` prints).

        Returns
        -------
        dict
            The epsilon, both baselines, the example-level epsilon, notes and details.
        """
        lemma = self.group_privacy_lemma
        eps = self.epsilon.to_dict()
        out: dict[str, Any] = {
            "epsilon": {"lower": eps["lower"], "estimate": eps["estimate"], "upper": eps["upper"]},
            "group_privacy_lemma_epsilon": lemma.epsilon,
            "linear_lower_bound": self.linear_lower_bound,
            "group_size": self.group_size,
            "delta": self.delta,
            "sampling": self.sampling,
            "kind": self.epsilon.kind,
            "example_epsilon": {k: v for k, v in self.example_epsilon.to_dict().items() if k != "details"},
            "group_privacy_lemma": {
                "example_epsilon": lemma.example_epsilon,
                "example_delta": lemma.example_delta,
                "note": lemma.note,
            },
        }
        notes = [n for n in (dict(self.epsilon.details).get("note"), lemma.note) if n]
        if notes:
            out["notes"] = notes
        out["details"] = _jsonable(self.details)
        return out


def group_report(
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
) -> GroupReport:
    """``group_epsilon`` plus the example-level epsilon and both baselines (Ganesh 2024, Sec. 4).

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
        The group size ``k``, a positive whole number.
    sampling : str or SamplingScheme, optional
        A registered name (default ``"poisson"``) or a scheme object.
    dataset_size : int, optional
        The data set size (fixed batches: a lower bound on the examples outside the group).
    batch_size : int, optional
        The batch size (fixed batches).
    eps_error, rel_error : float, optional
        The accuracy (``tightdp._accuracy``; default: relative 1e-3).
    accountant : str or Accountant, default ``DEFAULT_ACCOUNTANT``
        An accountant name or an empty accountant instance (the ``NO_AMPLIFICATION`` schemes: the default only).
    run : TrainingRun, optional
        The run; replaces the run keywords.

    Returns
    -------
    GroupReport
        The report for ``group_size``.

    Raises
    ------
    ValueError
        Bad input, naming the argument.
    UnsupportedMechanismError
        No group analysis applies to the scheme (the message says why).
    """
    return group_curve(
        noise_multiplier=noise_multiplier,
        sampling_rate=sampling_rate,
        steps=steps,
        delta=delta,
        group_sizes=[group_size],
        sampling=sampling,
        dataset_size=dataset_size,
        batch_size=batch_size,
        eps_error=eps_error,
        rel_error=rel_error,
        accountant=accountant,
        run=run,
    )[0]


def group_curve(
    *,
    noise_multiplier: float | None = None,
    sampling_rate: float | None = None,
    steps: int | None = None,
    delta: float,
    group_sizes: Iterable[int],
    sampling: str | SamplingScheme | None = None,
    dataset_size: int | None = None,
    batch_size: int | None = None,
    eps_error: float | None = None,
    rel_error: float | None = None,
    accountant: str | Accountant = DEFAULT_ACCOUNTANT,
    run: TrainingRun | None = None,
) -> list[GroupReport]:
    """``GroupReport`` for each group size (Ganesh 2024, Fig. 1-2); the example-level curve is composed once.

    For the ``NO_AMPLIFICATION`` schemes each report is ``group_epsilon``'s certified bound, with the
    group-privacy lemma where that bound computed it (random allocation).

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
    group_sizes : iterable of int
        The group sizes, non-empty, each a positive whole number.
    sampling : str or SamplingScheme, optional
        A registered name (default ``"poisson"``) or a scheme object.
    dataset_size : int, optional
        The data set size (fixed batches: a lower bound on the examples outside the group).
    batch_size : int, optional
        The batch size (fixed batches).
    eps_error, rel_error : float, optional
        The accuracy (``tightdp._accuracy``; default: relative 1e-3).
    accountant : str or Accountant, default ``DEFAULT_ACCOUNTANT``
        An accountant name or an empty accountant instance (the ``NO_AMPLIFICATION`` schemes: the default only).
    run : TrainingRun, optional
        The run; replaces the run keywords.

    Returns
    -------
    list of GroupReport
        One report per group size, in order.

    Raises
    ------
    ValueError
        Bad input, naming the argument (an empty ``group_sizes`` among them).
    UnsupportedMechanismError
        No group analysis applies to the scheme (the message says why).
    """
    if isinstance(group_sizes, (str, bytes)) or not hasattr(group_sizes, "__iter__"):
        raise ValueError(f"group_sizes must be a list of whole numbers, got {group_sizes!r}")
    sizes = [check_count("group_size", k) for k in group_sizes]
    if not sizes:
        raise ValueError("group_sizes must not be empty")
    if run is None:
        steps = check_count("steps", steps)
    delta = check_delta("delta", delta)
    eps_error, rel_error = check_accuracy(eps_error, rel_error)
    run = _group_run(
        run=run,
        noise_multiplier=noise_multiplier,
        sampling=sampling,
        sampling_rate=sampling_rate,
        steps=steps,
        dataset_size=dataset_size,
        batch_size=batch_size,
        group_size=max(sizes),
    )
    scheme, steps = run.sampling, run.steps
    if scheme.group_analysis is not GroupAnalysis.MIXTURE:
        return _scheme_group_curve(
            run=run, delta=delta, sizes=sizes, eps_error=eps_error, rel_error=rel_error, accountant=accountant
        )
    sigma = run.noise_multiplier
    mechs = [scheme.group_step(noise_multiplier=sigma, group_size=k) for k in sizes]  # validate before any work
    example_mech = scheme.group_step(noise_multiplier=sigma, group_size=1)
    example_acc = _make_accountant(accountant, eps_error, rel_error).compose(example_mech, steps)
    curve = ExampleCurve(_lemma_accountant(example_acc))
    t0 = time.perf_counter()
    example = example_acc.epsilon(delta)
    t_example = time.perf_counter() - t0
    reports = []
    for k, mech in zip(sizes, mechs):
        t0 = time.perf_counter()
        eps = (
            example
            if k == 1
            else _epsilon_of(
                [(mech, steps)], delta=delta, eps_error=eps_error, rel_error=rel_error, accountant=accountant
            )
        )
        t1 = time.perf_counter()
        lemma = group_privacy_lemma_epsilon(curve, delta=delta, group_size=k)
        t2 = time.perf_counter()
        reports.append(
            GroupReport(
                k,
                delta,
                scheme.name,
                eps,
                example,
                lemma,
                {
                    "mechanism": mech.to_dict(),
                    "steps": steps,
                    "accountant": example_acc.name,
                    "scheme": scheme.describe(),
                    "eps_error": eps_error,
                    "rel_error": rel_error,
                    "seconds": {"group": t1 - t0, "example": t_example, "lemma": t2 - t1},
                },
            )
        )
    return reports


def _scheme_group_curve(
    *,
    run: TrainingRun,
    delta: float,
    sizes: list[int],
    eps_error: float | None,
    rel_error: float | None,
    accountant: str | Accountant,
) -> list[GroupReport]:
    """``group_curve`` for the ``NO_AMPLIFICATION`` schemes: ``group_epsilon`` per size (the lemma is part of
    the upper end where the scheme has a lemma step; shuffling's no-amplification GDP group bound needs none)."""
    shared: dict[str, Any] = {}  # the example-level answer and curve, computed once for every size

    def of(k: int) -> Bounds:
        return _scheme_group_epsilon(
            run=run,
            delta=delta,
            group_size=k,
            eps_error=eps_error,
            rel_error=rel_error,
            accountant=accountant,
            shared=shared,
        )

    name = run.sampling.name
    t0 = time.perf_counter()
    example = of(1)
    t_example = time.perf_counter() - t0
    reports = []
    for k in sizes:
        t0 = time.perf_counter()
        eps = example if k == 1 else of(k)
        d = dict(eps.details)
        if k == 1:
            lemma = LemmaResult(float(example.upper), float(example.upper), delta)
        elif "group_privacy_lemma_epsilon" in d:
            lemma = LemmaResult(d["group_privacy_lemma_epsilon"], note=d.get("group_privacy_lemma_note"))
        else:
            lemma = LemmaResult(
                None,
                note=f"not computed: for {name} the certified bound is already the GDP group "
                "bound of the example-level sqrt(E)/sigma-GDP guarantee",
            )
        reports.append(
            GroupReport(
                k,
                delta,
                name,
                eps,
                example,
                lemma,
                {
                    "sampling": name,
                    "scheme": run.sampling.describe(),
                    "upper": d.get("upper", "the example-level bound"),
                    "steps": run.steps,
                    "accountant": DEFAULT_ACCOUNTANT,
                    "eps_error": eps_error,
                    "rel_error": rel_error,
                    "seconds": {"group": time.perf_counter() - t0, "example": t_example},
                },
            )
        )
    return reports

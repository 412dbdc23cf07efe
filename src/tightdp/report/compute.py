"""What the report computes: every accountant's epsilon, the certified band, dense curves, hints.

``build_report(config)`` splits the work into independent jobs (one per accountant row, per
accountant's training curve, per calibration hint, per group size), runs them in order or in
forked worker processes, and returns a ``tightdp.report.render.Report``.

Curves are dense where they are cheap: epsilon(delta) on ``curve_points`` (50) log-spaced deltas
and epsilon over training at ``training_points`` (50) checkpoints for the accountants whose
queries cost milliseconds (``_DENSE``); the PRV accountant (about a second per query) gets
``_SPARSE_POINTS`` of them; Fourier (several seconds) appears in the table only, unless
``report.plot_accountants`` names it. An accountant that cannot analyse the run at its
defaults is a row "not applicable: reason", found at compose time (no query is run).
"""

from __future__ import annotations

import datetime as _dt
import math
import sys
import time
from typing import Any, TextIO

import numpy as np

from .._validation import check_count
from ._jobs import _audit_job, _row_job, _scheme_job, _tradeoff, _train_job
from ._sections import _upper
from .config import ReportConfig
from .hints import _calibration_job, _calibration_plan, _group_job, _group_plan
from .render import AccountantResult, Report

#: one unit of work: ``(kind, *arguments)``, e.g. ``("row", "prv", deltas)`` or ``("group", 4)``
Job = tuple[Any, ...]
#: a certified band: ``(largest certified lower, smallest certified upper)`` (``None`` where none is known)
Band = tuple[float | None, float | None]

__all__ = ["build_report", "band"]

#: Left out of the plots unless named in ``report.plot_accountants``: the same certified
#: answer as PRV (both compose discretised PLDs) at several times the cost.
_SLOW_IN_PLOTS = ("fourier",)
#: Accountants whose epsilon queries take milliseconds: plotted on every curve point.
_DENSE = ("connect-dots", "rdp", "gdp")
#: How many curve points the other plotted accountants get (spread over the range): Edgeworth
#: takes about 0.1 s per query; PRV about a second, so it is drawn at the configured deltas only.
_SPARSE_POINTS = {"edgeworth": 12, "prv": 0}
#: The same over training (each checkpoint is a composition of its own): PRV at 3 checkpoints.
_TRAIN_SPARSE_POINTS = {"edgeworth": 12, "prv": 3}
_DEFAULT_SPARSE = 3
#: Rows that take seconds: started first so that the workers balance.
_SLOW_ROWS = ("fourier", "prv")
#: The delta range of the epsilon(delta) curve (the configured deltas are added); up to 0.3 so
#: that the trade-off curve built from it reaches small epsilon.
_CURVE_DELTAS = (1e-10, 0.3)


# ============================================================================= progress
class _Progress:
    """A rich progress bar that appears only on a terminal and only after ``delay`` seconds."""

    def __init__(
        self, total: int, *, enabled: bool | None = None, delay: float = 1.0, stream: TextIO | None = None
    ) -> None:
        self.total, self.done, self.delay = total, 0, delay
        self.stream = sys.stdout if stream is None else stream
        if enabled is None:
            enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self.enabled = enabled
        self.t0 = time.perf_counter()
        self._bar: Any = None  # a rich Progress once shown (rich is optional and untyped here)
        self._task: Any = None

    def advance(self, what: str = "") -> None:
        self.done += 1
        if not self.enabled:
            return
        if self._bar is None and time.perf_counter() - self.t0 >= self.delay:
            try:
                from rich.console import Console
                from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
            except ImportError:
                self.enabled = False
                return
            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TextColumn("{task.completed}/{task.total}"),
                TimeElapsedColumn(),
                transient=True,
                console=Console(file=self.stream),
            )
            self._bar.start()
            self._task = self._bar.add_task("privacy report", total=self.total, completed=self.done)
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done, description=what or "privacy report")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


# ============================================================================= building
def _available_accountants(config: ReportConfig) -> list[str]:
    """The accountants of the table: the configured ones, or every registered one."""
    from ..accountants import ACCOUNTANTS

    if config.accountants is not None:
        return list(config.accountants)
    return sorted(ACCOUNTANTS)


def band(results: list[AccountantResult], delta: float) -> Band:
    """The certified band at ``delta``: the largest certified lower and the smallest certified upper bound.

    Parameters
    ----------
    results : list of AccountantResult
        The accountants' answers (only certified ``"bound"`` answers at ``delta`` count).
    delta : float
        The delta, one of the deltas the results were queried at.

    Returns
    -------
    tuple
        ``(lower, upper)``: the largest finite certified lower bound and the smallest finite certified upper
        bound, each ``None`` when no accountant gives one.

    Raises
    ------
    AttributeError
        If an entry of ``results`` is not an ``AccountantResult``.
    """
    lows: list[float] = []
    ups: list[float] = []
    for r in results:
        b = r.bounds.get(delta)
        if b is None or b.kind != "bound":
            continue
        if b.lower is not None and math.isfinite(b.lower):
            lows.append(float(b.lower))
        if b.upper is not None and math.isfinite(float(b.upper)):
            ups.append(float(b.upper))
    return (max(lows) if lows else None, min(ups) if ups else None)


def _monotone_band(pairs: list[Band]) -> tuple[list[float | None], list[float | None]]:
    """The band on an increasing delta grid, tightened by the monotonicity of epsilon(delta).

    epsilon(delta) is non-increasing, so an upper bound at delta' <= delta also bounds epsilon(delta)
    (running minimum from the small-delta end) and a lower bound at delta' >= delta also bounds it
    from below (running maximum from the large-delta end). Where accountants answer at different
    deltas (PRV at a few points, RDP at all) this removes jumps that are not in the truth.
    """
    lo = [p[0] for p in pairs]
    up = [p[1] for p in pairs]
    best: float | None = None
    for i, u in enumerate(up):
        if u is not None:
            best = u if best is None else min(best, u)
        up[i] = best
    best = None
    for i in range(len(lo) - 1, -1, -1):
        low = lo[i]
        if low is not None:
            best = low if best is None else max(best, low)
        lo[i] = best
    return lo, up


def _sparse(values: list[Any], n: int) -> list[Any]:
    """``n`` entries of ``values`` spread over it (all if there are fewer)."""
    if n <= 0:
        return []
    if len(values) <= n:
        return list(values)
    idx = sorted({int(round(i * (len(values) - 1) / (n - 1))) for i in range(n)})
    return [values[i] for i in idx]


def _plot_points(
    name: str, points: list[Any], plot_names: list[str], sparse: dict[str, int] = _SPARSE_POINTS
) -> list[Any]:
    """The points of ``points`` at which accountant ``name`` is plotted (all, a spread few, or none)."""
    if name not in plot_names:
        return []
    return list(points) if name in _DENSE else _sparse(points, sparse.get(name, _DEFAULT_SPARSE))


def build_report(
    config: ReportConfig,
    *,
    progress: bool | None = None,
    workers: int = 1,
    curve_points: int = 50,
    training_points: int = 50,
) -> Report:
    """Compute everything the report shows.

    Parameters
    ----------
    config : ReportConfig
        The validated configuration (``load_config``).
    progress : bool, optional
        Show a progress bar; ``None``: only on a terminal (and only after a second).
    workers : int, default 1
        Run the independent computations (one per accountant row, training curve, calibration hint and group
        size) in that many forked worker processes; the results are identical to ``workers=1``.
    curve_points : int, default 50
        Deltas of the epsilon(delta) curve (log-spaced over 1e-10 ... 0.3, plus the configured ones), >= 1.
    training_points : int, default 50
        Checkpoints of the epsilon-over-training curve (every epoch when there are fewer epochs), >= 1.

    Returns
    -------
    Report
        Every accountant's epsilon, the certified band, curves, calibration and group hints, the audit.

    Raises
    ------
    ValueError
        If ``config`` is not a ``ReportConfig`` or a count is not a whole number >= 1. An accountant that
        cannot analyse the run is a "not applicable" row, not an error.

    References
    ----------
    Koskela et al. 2020 (PLD accounting); Gopi et al. 2021 (PRV); Wang et al. 2023 (Edgeworth); Ganesh 2024
    (group privacy).
    """
    if not isinstance(config, ReportConfig):
        raise ValueError(f"config must be a ReportConfig (see load_config), got {config!r}")
    workers = check_count("workers", workers)
    curve_points = check_count("curve_points", curve_points)
    training_points = check_count("training_points", training_points)
    t0 = time.perf_counter()
    names = _available_accountants(config)
    plot_names = [
        n
        for n in names
        if (n in config.plot_accountants if config.plot_accountants is not None else n not in _SLOW_IN_PLOTS)
    ]
    deltas = list(config.deltas)
    curve_deltas = (
        sorted(
            set(deltas)
            | set(np.logspace(math.log10(_CURVE_DELTAS[0]), math.log10(_CURVE_DELTAS[1]), curve_points).tolist())
        )
        if config.plots
        else []
    )
    train_x = _training_checkpoints(config, training_points) if config.plots and config.is_training else []
    calibration_note, calib_jobs = _calibration_plan(config)
    group_note, group_jobs = _group_plan(config)

    # every independent computation is one job; the slow kinds go first so that workers balance
    rows = [
        ("row", n, tuple(sorted(set(deltas) | set(_plot_points(n, curve_deltas, plot_names)), reverse=True)))
        for n in names
    ]
    jobs: list[Job] = [("scheme",)] if config.scheme else []
    jobs += [r for r in rows if r[1] in _SLOW_ROWS]
    jobs += [("calib", what, t) for what, t in calib_jobs] + [("group", g) for g in group_jobs]
    jobs += [r for r in rows if r[1] not in _SLOW_ROWS]
    jobs += [
        ("train", n, tuple(_plot_points(n, train_x, plot_names, _TRAIN_SPARSE_POINTS))) for n in plot_names if train_x
    ]
    bar = _Progress(max(len(jobs), 1), enabled=progress)
    try:
        out = _run_jobs(config, jobs, workers, bar)
    finally:
        bar.close()
    by_job = dict(zip(jobs, out))

    notes: list[str] = []
    results: list[AccountantResult] = []
    for job in rows:  # in the configured order, whatever order the jobs ran in
        res, row_notes = by_job[job]
        results.append(res)
        notes += row_notes
    bands = {d: band(results, d) for d in deltas}
    curve: dict[str, Any] = {}
    if curve_deltas:
        curve = {
            "delta": curve_deltas,
            "series": {
                f"{r.name} ({r.kind})": [_upper(r.bounds.get(d)) for d in curve_deltas]
                for r in results
                if r.bounds and r.name in plot_names and not r.not_applicable
            },
            "band": _monotone_band([band(results, d) for d in curve_deltas]),
        }
    training_curve = _training_curve(config, [j for j in jobs if j[0] == "train"], train_x, by_job) if train_x else {}
    calibration = [by_job[("calib", what, t)] for what, t in calib_jobs]
    groups: list[Any] = []
    group_errors: list[str] = []
    for g in group_jobs:
        row, errs = by_job[("group", g)]
        groups.append(row)
        group_errors += errs
    if group_errors:
        group_note += " Failures: " + "; ".join(group_errors)
    scheme = by_job[("scheme",)] if config.scheme else {}
    if config.scheme:  # the band of what ran: the scheme's certified interval (the rows are Poisson's)
        bands = {
            r["delta"]: ((r["scheme"]["lower"], r["scheme"]["upper"]) if "scheme" in r else (None, None))
            for r in scheme["rows"]
        }
    if config.scheme:  # the band is Poisson accounting's, not the scheme's: no f-DP curve from it
        tradeoff = {
            "note": f"The f-DP trade-off curve is not drawn: it would be built from Poisson accounting's "
            f"certified band, and this run used {config.scheme} sampling."
        }
    else:
        tradeoff = _tradeoff(curve) if curve else {}
    audit = _audit_job(config) if config.audit is not None else {}
    return Report(
        config=config,
        results=results,
        band=bands,
        calibration=calibration,
        calibration_note=calibration_note,
        groups=groups,
        group_note=group_note,
        curve=curve,
        training_curve=training_curve,
        created=_dt.datetime.now().strftime("%Y-%m-%d %H:%M"),
        seconds=time.perf_counter() - t0,
        notes=notes,
        plot_names=list(plot_names),
        tradeoff=tradeoff,
        guarantee=_guarantee(config),
        scheme=scheme,
        audit=audit,
    )


def _guarantee(config: ReportConfig) -> dict[str, list[str]]:
    """The "what this guarantees" paragraphs (``tightdp.statement.guarantee_paragraphs``) for a training run."""
    from ..statement import guarantee_paragraphs

    if not config.is_training:
        return {}
    rates = {s.sampling_rate for s in config.segments}
    return guarantee_paragraphs(
        sampling=config.sampling,
        sampling_rate=rates.pop() if len(rates) == 1 else None,
        batch_size=config.batch_size,
        dataset_size=config.dataset_size,
        max_batch_size=config.max_batch_size,
        # the statement's group sentence describes Ganesh 2024's mixture-of-Gaussians analysis, which does not cover the
        # schemes with their own function: their group section says which bound it gives (hints._group_plan)
        group_sizes=() if config.scheme else config.group_sizes,
        steps=config.total_steps,
    )


def _run_jobs(config: ReportConfig, jobs: list[Job], workers: int, bar: _Progress) -> list[Any]:
    """Run the jobs in order (``workers == 1``) or in forked processes; results in job order."""
    if workers == 1 or len(jobs) <= 1:
        out: list[Any] = []
        for job in jobs:
            out.append(_run_job(config, job))
            bar.advance(_job_label(job))
        return out
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    ctx = multiprocessing.get_context("fork")
    results: dict[int, Any] = {}
    with ProcessPoolExecutor(max_workers=min(workers, len(jobs)), mp_context=ctx) as pool:
        futures = {pool.submit(_run_job, config, job): i for i, job in enumerate(jobs)}
        for fut in as_completed(futures):
            i = futures[fut]
            results[i] = fut.result()
            bar.advance(_job_label(jobs[i]))
    return [results[i] for i in range(len(jobs))]


def _job_label(job: Job) -> str:
    """What a job computes, for the progress bar."""
    kind = job[0]
    if kind == "row":
        return f"{job[1]}: epsilon"
    if kind == "train":
        return f"{job[1]}: epsilon over training"
    if kind == "calib":
        return f"calibration: {job[1]} for epsilon <= {job[2]:g}"
    if kind == "scheme":
        return "the sampling scheme that ran vs Poisson accounting"
    return f"group privacy: size {job[1]}"


def _run_job(config: ReportConfig, job: Job) -> Any:
    """Run one job (in this process or a worker)."""
    kind = job[0]
    if kind == "row":
        return _row_job(config, job[1], job[2])
    if kind == "train":
        return _train_job(config, job[1], job[2])
    if kind == "calib":
        return _calibration_job(config, job[1], job[2])
    if kind == "group":
        return _group_job(config, job[1])
    if kind == "scheme":
        return _scheme_job(config)
    raise ValueError(f"unknown job {job!r}")  # pragma: no cover


def _training_checkpoints(config: ReportConfig, points: int) -> list[int]:
    """Every epoch when there are at most ``points`` of them, else ``points`` evenly spread steps."""
    total = config.total_steps
    spe = config.steps_per_epoch
    if spe and len(config.segments) == 1 and math.ceil(total / spe) <= points:
        return sorted({min(total, spe * (i + 1)) for i in range(math.ceil(total / spe))})
    return sorted({max(1, int(round(total * (i + 1) / points))) for i in range(points)})


def _training_curve(
    config: ReportConfig, train_jobs: list[Job], xs: list[int], by_job: dict[Job, Any]
) -> dict[str, Any]:
    """The epsilon-over-training curve: each plotted accountant's upper end and the band, at the checkpoints."""
    delta = config.deltas[0]
    series: dict[str, list[float | None]] = {}
    per: dict[int, list[AccountantResult]] = {k: [] for k in xs}
    for job in train_jobs:
        name, ks = job[1], job[2]
        kind, bounds = by_job[job]
        at = dict(zip(ks, bounds))
        for k in xs:
            r = AccountantResult(name=name, kind=kind)
            if at.get(k) is not None:
                r.bounds[delta] = at[k]
            per[k].append(r)
        ys = [_upper(at.get(k)) for k in xs]
        if any(y is not None for y in ys):
            series[f"{name} ({kind})"] = ys
    lo_up = [band(per[k], delta) for k in xs]
    x: list[float] | list[int]
    if config.steps_per_epoch:
        x, label = [k / config.steps_per_epoch for k in xs], "epochs"
    else:
        x, label = xs, "steps"
    return {
        "x": x,
        "steps": xs,
        "x_label": label,
        "series": series,
        "band": ([b[0] for b in lo_up], [b[1] for b in lo_up]),
    }

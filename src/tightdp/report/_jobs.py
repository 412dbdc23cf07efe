"""The report's computing jobs: one accountant's row, one accountant's curve over training, the scheme that ran
against Poisson accounting, the audit section and the certified trade-off curve.

Each job is independent (``tightdp.report.compute`` runs them in order or in worker processes) and turns an
accountant's refusal into a "not applicable" row or a note rather than an error.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

from ..bounds import Bounds
from ..errors import PrecisionError, TightDPError, UnsupportedMechanismError
from .config import ReportConfig
from .render import AccountantResult

if TYPE_CHECKING:
    from ..accountants import Accountant


def _make_accountant(name: str) -> Accountant:
    """A fresh accountant of that name, at its defaults."""
    from ..accountants import create

    acc: Accountant = create(name)
    return acc


def _safe_epsilon(acc: Accountant, delta: float) -> tuple[Bounds | None, str]:
    """``(acc.epsilon(delta), "")``, or ``(None, the error)`` when the accountant cannot answer."""
    try:
        b: Bounds = acc.epsilon(delta)
        return b, ""
    except (TightDPError, ArithmeticError, ValueError) as exc:
        return None, f"{type(exc).__name__}: {exc}"


def _verdict(scheme: Bounds, poisson: Bounds) -> str:
    """How the scheme's certified interval compares with Poisson accounting's."""
    if scheme.upper < poisson.lower:
        return "more private than Poisson accounting says (certified)"
    if scheme.lower > poisson.upper:
        return "less private than Poisson accounting claims (certified): its ε would under-report"
    return "the intervals overlap: neither is certified to be larger"


def _scheme_job(config: ReportConfig) -> dict[str, Any]:
    """The scheme's certified interval against Poisson accounting at the same noise, rate and steps, per delta."""
    from ..dpsgd import dpsgd_epsilon

    seg = config.segments[0]
    kw: dict[str, Any] = dict(noise_multiplier=seg.noise_multiplier, sampling_rate=seg.sampling_rate, steps=seg.steps)
    rows: list[dict[str, Any]] = []
    for d in config.deltas:
        row: dict[str, Any] = {"delta": d}
        try:
            sb = dpsgd_epsilon(
                **kw,
                delta=d,
                sampling=config.scheme,
                dataset_size=config.dataset_size,
                max_batch_size=config.max_batch_size,
            )
            pb = dpsgd_epsilon(**kw, delta=d)
        except (TightDPError, ArithmeticError, ValueError) as exc:
            row["error"] = _reason(exc)
            rows.append(row)
            continue
        row.update(
            {
                "scheme": {"lower": sb.lower, "upper": sb.upper, "note": (sb.details or {}).get("note")},
                "poisson": {"lower": pb.lower, "upper": pb.upper},
                "verdict": _verdict(sb, pb),
            }
        )
        rows.append(row)
    cls = config.sampling_scheme
    return {"sampling": config.scheme, "scheme": cls.summary, "caveat": cls.report_caveat or cls.summary, "rows": rows}


def _audit_run_keywords(config: ReportConfig) -> tuple[dict[str, Any] | None, str]:
    """The run keywords of ``tightdp.audit.audit_run`` for the run the report describes, or ``(None, why not)``.

    The audit's verdict compares against the certified curve of the Poisson-subsampled Gaussian under
    add/remove neighbours (``tightdp.audit.run_curve``): a Poisson run of one segment is given by its
    noise multiplier, rate and steps; a Poisson schedule by its composed connect-dots accountant. Any other
    scheme (fixed batches, shuffling, random allocation, ...) or a list of mechanisms is not one the
    verdict supports: the section says so rather than audit against another run's curve.
    """
    if not config.is_training:
        return None, (
            "the audit's verdict supports DP-SGD training runs with Poisson sampling; this report "
            "describes a list of mechanisms"
        )
    if config.sampling_scheme.name != "poisson":
        return None, (
            f"the audit's verdict supports Poisson sampling (add/remove neighbours) only; this run used "
            f"{config.sampling} sampling, whose certified curve the audit does not take"
        )
    if len(config.segments) == 1:
        seg = config.segments[0]
        return {"noise_multiplier": seg.noise_multiplier, "sampling_rate": seg.sampling_rate, "steps": seg.steps}, ""
    from ..accountants import ConnectDotsAccountant

    return {"accountant": ConnectDotsAccountant().compose(config.ledger())}, ""


def _audit_job(config: ReportConfig) -> dict[str, Any]:
    """The "Audit" section: ``tightdp.audit.audit_section`` for the run, or why it is not computed.

    Keys: ``computed`` (bool), ``note`` (why not, when not computed), ``scores``, ``method``, ``beta``,
    ``delta``, and when computed every key of ``audit_section`` (``verdict``, ``message``, ``rows``, ...).
    """
    from ..audit import audit_section

    a = config.audit
    if a is None:
        raise ValueError("config.audit: the report has no [audit] table")
    out: dict[str, Any] = {
        "scores": a.scores,
        "method": a.method,
        "beta": a.beta,
        "delta": a.delta,
        "canaries": len(a.in_scores) + len(a.out_scores),
    }
    run, why = _audit_run_keywords(config)
    if run is None:
        return {**out, "computed": False, "note": f"Not computed: {why}."}
    try:
        sec = audit_section(
            in_scores=list(a.in_scores),
            out_scores=list(a.out_scores),
            delta=a.delta,
            beta=a.beta,
            method=a.method,
            **run,
        )
    except (TightDPError, ArithmeticError, ValueError) as exc:
        return {**out, "computed": False, "note": f"Not computed: {_reason(exc)}."}
    return {**out, "computed": True, **sec}


def _tradeoff(curve: dict[str, Any]) -> dict[str, Any]:
    """The certified lower f-DP trade-off curve from the band's certified (upper epsilon, delta) pairs.

    Every point of the epsilon(delta) curve is an (eps_upper(delta), delta)-DP guarantee, so
    ``tightdp.tradeoff.tradeoff_lower_curve`` over them is a certified lower bound on the
    trade-off function, at no further cost.
    """
    from ..tradeoff import tradeoff_lower_curve

    pairs = [(up, d) for d, up in zip(curve["delta"], curve["band"][1]) if up is not None and math.isfinite(up)]
    if not pairs:
        return {"note": "trade-off curve not available: no certified upper epsilon on the delta grid"}
    alpha, beta = tradeoff_lower_curve([max(0.0, e) for e, _ in pairs], [d for _, d in pairs])
    return {"alpha": alpha.tolist(), "beta": beta.tolist(), "accountant": "certified band", "points": len(pairs)}


def _row_job(config: ReportConfig, name: str, queries: tuple[float, ...]) -> tuple[AccountantResult, list[str]]:
    """One accountant's epsilon at every queried delta (time counted for the configured deltas only).

    An accountant that refuses the run at compose time is "not applicable" with its reason; one
    whose every configured delta fails is "not applicable" with the first failure (no plot query is run).
    """
    acc = _make_accountant(name)
    res = AccountantResult(name=name, kind=acc.kind)
    notes: list[str] = []
    try:
        acc.compose(config.ledger())
    except (UnsupportedMechanismError, PrecisionError, ValueError) as exc:
        res.not_applicable = _reason(exc)
        return res, notes
    ordered = [d for d in queries if d in config.deltas] + [d for d in queries if d not in config.deltas]
    failures: list[str] = []
    for d in ordered:
        plot_only = d not in config.deltas
        if plot_only and len(failures) == len(config.deltas):
            break  # nothing at the configured deltas: the plot queries would fail the same way
        ts = time.perf_counter()
        b, err = _safe_epsilon(acc, d)
        if not plot_only:
            res.seconds += time.perf_counter() - ts
        if b is not None:
            res.bounds[d] = b
            if b.kind == "bound" and (b.upper is None or not math.isfinite(float(b.upper))):
                why = (b.details or {}).get("note") or "no finite upper bound"
                notes.append(
                    f"{name} at δ = {d:g}{' (plot only)' if plot_only else ''}: not certified "
                    f"(upper bound {b.upper}): {why}"
                )
        elif not plot_only:
            failures.append(err)
        else:
            notes.append(f"{name} at δ = {d:g} (plot only): {err}")
    if failures and len(failures) == len(config.deltas):
        res.not_applicable = failures[0]
        res.bounds.clear()
    else:
        notes += [f"{name}: {e}" for e in failures]
    return res, notes


def _reason(exc: Exception) -> str:
    """An error's message on one line, at most 200 characters."""
    text = " ".join(str(exc).split())
    return text if len(text) <= 200 else text[:197] + "..."


def _train_job(config: ReportConfig, name: str, ks: tuple[int, ...]) -> tuple[str, list[Bounds | None]]:
    """One accountant's epsilon at ``config.deltas[0]`` after each number of steps in ``ks``."""
    kind = "bound"
    out: list[Bounds | None] = []
    for k in ks:
        acc = _make_accountant(name)
        kind = acc.kind
        try:
            acc.compose(config.ledger(upto=k))
        except (UnsupportedMechanismError, PrecisionError, ValueError):
            return kind, [None] * len(ks)
        out.append(_safe_epsilon(acc, config.deltas[0])[0])
    return kind, out

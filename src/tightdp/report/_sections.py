"""The pieces of the report's content that do not need the ``Report`` itself: the run's table and JSON, the
scheme-vs-Poisson and audit sections, the number formats, the versions and the references.

Used by ``tightdp.report.render`` (which assembles them) and the report's hints.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from ..bounds import Bounds
from .config import ReportConfig


def _scheme_upper(scheme: dict[str, Any], delta: float) -> float | None:
    """The scheme's certified upper bound at ``delta`` (``None`` if it has none)."""
    for row in scheme.get("rows", []):
        if row["delta"] == delta and "scheme" in row:
            up: float | None = row["scheme"]["upper"]
            return up
    return None


def _scheme_sections(scheme: dict[str, Any]) -> list[tuple[str, Any]]:
    """ "What you ran vs what Poisson accounting says": the scheme's certified interval next to
    Poisson accounting's at the same noise multiplier, sampling rate and steps, with the scheme's caveat."""
    name = scheme["sampling"]
    out: list[tuple[str, Any]] = [("h2", "What you ran vs what Poisson accounting says")]
    out.append(
        (
            "p",
            f"This run used **{name}** sampling. Most libraries (Opacus, dp_accounting's DP-SGD helpers) "
            "report the ε of Poisson sampling at the same noise multiplier, sampling rate and steps; the "
            f"table sets the certified interval for {name} sampling against that figure. " + scheme["caveat"],
        )
    )
    rows, notes = [], []
    for r in scheme["rows"]:
        if "error" in r:
            rows.append([f"{r['delta']:g}", "—", "—", r["error"]])
            continue
        sb, pb = r["scheme"], r["poisson"]
        rows.append(
            [
                f"{r['delta']:g}",
                f"[{_f(sb['lower'])}, {_f(sb['upper'])}]",
                f"[{_f(pb['lower'])}, {_f(pb['upper'])}]",
                r["verdict"],
            ]
        )
        if sb.get("note"):
            notes.append(f"δ = {r['delta']:g}: {sb['note']}")
    out.append(
        (
            "table",
            (
                ["δ", f"{name}: certified [lower, upper]", "Poisson accounting [lower, upper]", "what ran vs Poisson"],
                rows,
            ),
        )
    )
    if notes:
        out.append(("ul", notes))
    return out


def _audit_sections(audit: dict[str, Any]) -> list[tuple[str, Any]]:
    """ "Audit": the empirical lower bound from the canary scores against the certified interval, and the verdict
    (``tightdp.audit.audit_section``), or why the audit was not computed."""
    out: list[tuple[str, Any]] = [("h2", "Audit")]
    src = (
        f"{audit['canaries']} canaries from `{Path(audit['scores']).name}`, method {audit['method']}, "
        f"confidence {100 * (1 - audit['beta']):g} %, δ = {audit['delta']:g}"
    )
    if not audit.get("computed"):
        out.append(("p", f"Canary scores: {src}. {audit['note']}"))
        return out
    out.append(
        (
            "p",
            f"Canary scores: {src}. An empirical lower bound on ε from a membership attack on inserted "
            "canaries, set against the certified interval of this run.",
        )
    )
    out.append(("p", f"Verdict: {audit['message']}."))  # the message opens with the verdict
    out.append(("table", (["", "value"], [[str(k), str(v)] for k, v in audit["rows"]])))
    return out


def _upper(b: Bounds | None) -> float | None:
    """The value to plot: the certified upper bound, or the estimate of an approximation."""
    if b is None:
        return None
    v = b.upper if b.kind == "bound" else b.estimate
    if v is None or not math.isfinite(v):
        return None
    return float(v)


def _jsonable_curve(curve: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in curve.items() if k != "png"}


def _version() -> str:
    try:
        from .._version import __version__

        return __version__
    except ImportError:  # pragma: no cover
        return "?"


#: Significant digits of every epsilon the report prints (trailing zeros kept, so columns read alike).
_DIGITS = 4


def _f(v: float | None) -> str:
    """A number as the report prints it (``_DIGITS`` significant digits; None as a dash, inf as ∞)."""
    if v is None:
        return "—"
    if isinstance(v, float) and math.isinf(v):
        return "∞"
    if v == 0:
        return "0"
    return f"{v:#.{_DIGITS}g}".rstrip(".") if abs(v) < 10**_DIGITS else f"{v:.{_DIGITS}g}"


def _fmt_bounds(b: Bounds) -> str:
    if b.kind != "bound":
        return f"≈ {_f(b.estimate)}"
    up = _f(b.upper)
    if b.lower is None:
        return f"≤ {up}"
    return f"{up} [{_f(b.lower)}, {up}]"


#: The papers the report's methods come from, each led by the author-year key the report cites it by.
REFERENCES = (
    "Koskela et al. 2020: A. Koskela, J. Jälkö, A. Honkela. Computing Tight Differential Privacy Guarantees Using "
    "FFT. AISTATS 2020 (the Fourier accountant).",
    "Gopi et al. 2021: S. Gopi, Y. T. Lee, L. Wutschitz. Numerical Composition of Differential Privacy. NeurIPS "
    "2021 (the PRV accountant).",
    "Wang et al. 2023: H. Wang et al. Analytical Composition of Differential Privacy via the Edgeworth Accountant. "
    "ICLR 2023.",
    "Koskela et al. 2023: A. Koskela, M. Tobaben, A. Honkela. Individual Privacy Accounting with Gaussian "
    "Differential Privacy. ICLR 2023.",
    "Ganesh 2024: A. Ganesh. Tight Group-Level DP Guarantees for DP-SGD with Sampling via Mixture of Gaussians "
    "Mechanisms (group privacy).",
)


def _library_versions() -> str:
    import platform

    import scipy  # a core dependency, like numpy

    parts = [
        f"tightdp {_version()}",
        f"Python {platform.python_version()}",
        f"numpy {np.__version__}",
        f"scipy {scipy.__version__}",
    ]
    return ", ".join(parts)


def _run_dict(c: ReportConfig) -> dict[str, Any]:
    if c.is_training:
        return {
            "dataset_size": c.dataset_size,
            "batch_size": c.batch_size,
            "sampling": c.sampling,
            "max_batch_size": c.max_batch_size,
            "steps_per_epoch": c.steps_per_epoch,
            "total_steps": c.total_steps,
            "segments": [
                {"noise_multiplier": s.noise_multiplier, "sampling_rate": s.sampling_rate, "steps": s.steps}
                for s in c.segments
            ],
        }
    return {"events": [{"mechanism": m.to_dict(), "count": n} for m, n in c.events]}


def _run_rows(c: ReportConfig) -> list[list[str]]:
    rows = []
    if c.is_training:
        if c.dataset_size:
            rows.append(["data set size", f"{c.dataset_size:,}"])
        if c.batch_size:
            rows.append(["batch size", f"{c.batch_size:,}"])
        cls = c.sampling_scheme
        rows.append(["sampling", f"{cls.summary} ({cls.relations[0].value} neighbours)"])
        if c.max_batch_size:
            rows.append(["maximum batch size", f"{c.max_batch_size:,}"])
        if c.steps_per_epoch:
            rows.append(["steps per epoch", f"{c.steps_per_epoch:,} (rounded up: safe side)"])
        for i, s in enumerate(c.segments):
            label = "noise multiplier σ" if len(c.segments) == 1 else f"segment {i + 1}"
            ep = f" ≈ {s.steps / c.steps_per_epoch:g} epochs" if c.steps_per_epoch else ""
            rows.append(
                [label, f"σ = {s.noise_multiplier:g}, sampling rate q = {s.sampling_rate:.6g}, {s.steps:,} steps{ep}"]
            )
        rows.append(["total steps", f"{c.total_steps:,}"])
    else:
        for m, n in c.events:
            rows.append([m.describe(), f"× {n:,}"])
    rows.append(["δ", ", ".join(f"{d:g}" for d in c.deltas)])
    return rows

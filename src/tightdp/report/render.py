"""How the report looks: the ``Report`` (everything it shows) and its Markdown, HTML and JSON renderings.

Renderer-neutral content first (``Report._sections``: a list of ``(kind, payload)``), then one
small writer per format. The HTML file is self-contained (plots embedded as data URIs) and
carries a tiny script that marks ``<body data-images="loaded">`` once every image has decoded
with a non-zero size (``data-images="broken"`` otherwise), so a headless browser can check it.
"""

from __future__ import annotations

import base64
import html as _html
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._validation import check_choice
from ..bounds import Bounds
from ._sections import (
    REFERENCES,
    _audit_sections,
    _f,
    _fmt_bounds,
    _jsonable_curve,
    _library_versions,
    _run_dict,
    _run_rows,
    _scheme_sections,
    _scheme_upper,
    _version,
)
from .config import FORMATS, ReportConfig

__all__ = ["AccountantResult", "Report", "REFERENCES"]


@dataclass
class AccountantResult:
    """One accountant's answers: ``bounds[delta] -> Bounds``; ``not_applicable`` says why there are none.

    Parameters
    ----------
    name : str
        The accountant's registry name.
    kind : str
        ``"bound"`` (certified) or ``"approximation"``.
    bounds : dict of float to Bounds, default {}
        Its answer at each delta queried.
    seconds : float, default 0.0
        Time spent on the configured deltas.
    not_applicable : str, default ""
        Why the accountant has no answers (empty when it has).

    Raises
    ------
    ValueError
        Not raised: ``build_report`` fills the fields from the accountants' answers.
    """

    name: str
    kind: str
    bounds: dict[float, Bounds] = field(default_factory=dict)
    seconds: float = 0.0
    not_applicable: str = ""

    @property
    def note(self) -> str:
        """Why the accountant has no answers (``not_applicable``)."""
        return self.not_applicable


#: Marks <body data-images="loaded"> once every <img> has decoded with a non-zero size.
_IMAGE_CHECK = (
    "<script>window.addEventListener('load',function(){var i=[].slice.call(document.images);"
    "document.body.dataset.images=i.every(function(x){return x.complete&&x.naturalWidth>0})"
    "?'loaded':'broken';document.body.dataset.imageCount=String(i.length)});</script>"
)


@dataclass
class Report:
    """Everything a report shows; ``write`` renders it (built by ``build_report``).

    Parameters
    ----------
    config : ReportConfig
        The configuration the report describes.
    results : list of AccountantResult
        Every accountant's answers, in the configured order.
    band : dict
        ``{delta: (certified lower, certified upper)}``.
    calibration : list of dict
        The calibration hints.
    calibration_note : str
        The note above them.
    groups : list of dict
        Group-level epsilon rows.
    group_note : str
        The note above them.
    curve : dict
        The epsilon(delta) curves and band.
    training_curve : dict
        The epsilon-over-training curves and band.
    created : str
        When the report was built.
    seconds : float
        How long it took.
    notes : list of str, default []
        Notes (failures, uncertified answers).
    plot_names : list of str, default []
        The accountants plotted.
    tradeoff : dict, default {}
        The certified lower trade-off curve (or why it is not drawn).
    guarantee : dict, default {}
        The "what this guarantees" paragraphs.
    scheme : dict, default {}
        A scheme with its own certified function: its interval against Poisson accounting, per delta; empty for
        Poisson and fixed batches.
    audit : dict, default {}
        The "Audit" section; empty when the config has no ``[audit]``.
    pngs : dict, default {}
        The plots' file names, set by ``write``.

    Raises
    ------
    ValueError
        Not raised by the constructor; ``build_report`` validates its input.

    References
    ----------
    The report's ``REFERENCES``: Koskela et al. 2020; Gopi et al. 2021; Wang et al. 2023; Koskela et al. 2023;
    Ganesh 2024.
    """

    config: ReportConfig
    results: list[AccountantResult]
    band: dict[float, tuple[float | None, float | None]]
    calibration: list[dict[str, Any]]
    calibration_note: str
    groups: list[dict[str, Any]]
    group_note: str
    curve: dict[str, Any]
    training_curve: dict[str, Any]
    created: str
    seconds: float
    notes: list[str] = field(default_factory=list)
    plot_names: list[str] = field(default_factory=list)
    tradeoff: dict[str, Any] = field(default_factory=dict)
    guarantee: dict[str, list[str]] = field(default_factory=dict)
    #: a scheme with its own certified function: its interval against Poisson accounting, per delta
    #: (``tightdp.report._jobs._scheme_job``); empty for Poisson and fixed batches
    scheme: dict[str, Any] = field(default_factory=dict)
    #: the "Audit" section (``tightdp.report._jobs._audit_job``); empty when the config has no ``[audit]``
    audit: dict[str, Any] = field(default_factory=dict)
    pngs: dict[str, str] = field(default_factory=dict)

    # ------------------------------------------------------------------ data
    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data (``report.json``).

        Returns
        -------
        dict
            The run, every accountant's answers, the certified band, hints, curves, notes, settings and
            references.
        """
        c = self.config
        return {
            "title": c.title,
            "created": self.created,
            "seconds": self.seconds,
            "run": _run_dict(c),
            "deltas": list(c.deltas),
            "accountants": [
                {
                    "name": r.name,
                    "kind": r.kind,
                    "seconds": r.seconds,
                    "not_applicable": r.not_applicable or None,
                    "epsilon": {repr(d): b.to_dict() for d, b in r.bounds.items()},
                }
                for r in self.results
            ],
            "certified_band": {repr(d): {"lower": lo, "upper": up} for d, (lo, up) in self.band.items()},
            "calibration": self.calibration,
            "calibration_note": self.calibration_note,
            "groups": self.groups,
            "group_note": self.group_note,
            "guarantees": self.guarantee.get("guarantees", []),
            "not_covered": self.guarantee.get("not_covered", []),
            "curves": {
                "epsilon_vs_delta": _jsonable_curve(self.curve),
                "epsilon_over_training": _jsonable_curve(self.training_curve),
                "tradeoff": self.tradeoff,
            },
            "notes": self.notes,
            "settings": dict(_settings_rows(self)),
            "references": list(REFERENCES),
            "scheme_vs_poisson": self.scheme or None,
            "audit": self.audit or None,
        }

    # -------------------------------------------------------------- rendering
    def _sections(self, img: Callable[[str, str], str]) -> list[tuple[str, Any]]:
        """Renderer-neutral content: a list of (kind, payload)."""
        c = self.config
        out: list[tuple[str, Any]] = [("h1", c.title)]
        meta = f"Generated by tightdp {_version()} on {self.created} in {self.seconds:.1f} s"
        if c.source:
            meta += f" from `{Path(c.source).name}`"
        out.append(("p", meta + "."))
        if c.description:
            out.append(("p", c.description))
        out.append(("h2", "What ran"))
        out.append(("table", (["setting", "value"], _run_rows(c))))
        if self.guarantee:
            out.append(("h2", "What this guarantees"))
            if self.scheme:
                first = _scheme_upper(self.scheme, c.deltas[0])
                if first is not None:
                    out.append(
                        (
                            "p",
                            f"Publish: ε ≤ {_f(first)} at δ = {c.deltas[0]:g} (the certified upper bound "
                            f"for {self.scheme['sampling']} sampling, the scheme that ran; see below) under "
                            "these assumptions.",
                        )
                    )
            else:
                first = self.band.get(c.deltas[0], (None, None))[1]
                if first is not None:
                    out.append(
                        (
                            "p",
                            f"Publish: ε ≤ {_f(first)} at δ = {c.deltas[0]:g} (the upper end of the "
                            "certified band below) under these assumptions.",
                        )
                    )
            out.append(("ul", self.guarantee.get("guarantees", [])))
            out.append(("p", "Not covered:"))
            out.append(("ul", self.guarantee.get("not_covered", [])))
        if self.scheme:
            out += _scheme_sections(self.scheme)
        out.append(("h2", "Epsilon by accountant" + (" — Poisson accounting (not what ran)" if self.scheme else "")))
        out.append(
            (
                "p",
                "*bound*: each cell is the certified upper bound (the epsilon to report) with the "
                "certified interval `[lower, upper]` where the accountant gives a lower bound too. "
                "*approximation*: an estimate `≈` with no guarantee. *not applicable*: the accountant "
                "cannot analyse this run at its defaults, and why.",
            )
        )
        header = ["accountant", "kind"] + [f"δ = {d:g}" for d in c.deltas] + ["time"]
        rows = []
        for r in self.results:
            if r.not_applicable:
                rows.append([r.name, "not applicable", r.not_applicable] + ["—"] * (len(c.deltas) - 1) + ["—"])
                continue
            cells = [r.name, r.kind]
            for d in c.deltas:
                b = r.bounds.get(d)
                cells.append(_fmt_bounds(b) if b is not None else "—")
            cells.append(f"{r.seconds:.2f} s")
            rows.append(cells)
        out.append(("table", (header, rows)))
        if self.scheme:
            out.append(("h2", f"Certified band — {self.scheme['sampling']} sampling (what ran)"))
            out.append(
                (
                    "p",
                    f"The true epsilon of the run ({self.scheme['sampling']} sampling) lies in this "
                    "interval (`tightdp.dpsgd_epsilon(sampling=...)`; the accountant table above is Poisson "
                    "accounting, for comparison only). Report the upper end.",
                )
            )
        else:
            out.append(("h2", "Certified band"))
            out.append(
                (
                    "p",
                    "The true epsilon lies in this interval: the largest certified lower bound and the "
                    "smallest certified upper bound over the certified accountants (approximations "
                    "excluded). Report the upper end.",
                )
            )
        rows = [
            [f"{d:g}", _f(lo), _f(up), _f(None if lo is None or up is None else up - lo)]
            for d, (lo, up) in self.band.items()
        ]
        out.append(("table", (["δ", "lower", "upper (report this)", "width"], rows)))
        if self.pngs.get("curve"):
            out.append(
                (
                    "p",
                    ("Poisson accounting (not what ran): " if self.scheme else "")
                    + f"ε(δ) on {len(self.curve.get('delta', []))} values of δ (log axis). Lower panel: each "
                    "accountant's distance from the upper end of the certified band (0 = the band; the grey "
                    "strip below 0 is the band's width, the room left between the proven bounds).",
                )
            )
            out.append(("img", img(self.pngs["curve"], "epsilon against delta")))
        if self.pngs.get("training"):
            out.append(("h2", "Privacy over training" + (" (Poisson accounting)" if self.scheme else "")))
            tc = self.training_curve
            out.append(
                (
                    "p",
                    f"ε at δ = {c.deltas[0]:g} after each of {len(tc.get('steps', []))} checkpoints, "
                    "with the certified band and each accountant's distance from its upper end.",
                )
            )
            out.append(("img", img(self.pngs["training"], "epsilon over training")))
        if self.pngs.get("tradeoff"):
            out.append(("h2", "Hypothesis-testing view (f-DP)"))
            out.append(
                (
                    "p",
                    "Any test that tries to tell whether one example was in the training data, with "
                    "false-positive rate α, misses with probability at least β(α) on this curve: a "
                    "certified lower bound on the trade-off function, from the certified band's upper ε at "
                    f"{self.tradeoff.get('points', 0)} values of δ (β(α) ≥ max over them of "
                    "1 − δ − e^ε α "
                    "and e^−ε (1 − δ − α); Dong, Roth, Su 2022, Prop. 2.12). The diagonal is perfect "
                    "privacy.",
                )
            )
            out.append(("img", img(self.pngs["tradeoff"], "trade-off curve")))
        elif self.tradeoff.get("note"):
            self.notes.append(self.tradeoff["note"])
        out.append(("h2", "Calibration hints"))
        if self.calibration_note:
            out.append(("p", self.calibration_note))
        if self.calibration:
            rows = [
                [h["question"], h["answer"], _f(h.get("epsilon_upper")), h.get("note", "")] for h in self.calibration
            ]
            out.append(("table", (["question", "answer", "certified ε at the answer", "note"], rows)))
        if c.group_sizes:
            out.append(("h2", "Group privacy"))
            if self.group_note:
                out.append(("p", self.group_note))
            if self.groups:
                rows = [[str(g["group_size"])] + [_f(g["epsilon"].get(repr(d))) for d in c.deltas] for g in self.groups]
                out.append(("table", (["group size"] + [f"δ = {d:g}" for d in c.deltas], rows)))
        if self.audit:
            out += _audit_sections(self.audit)
        left_out = [r.name for r in self.results if r.name not in self.plot_names and not r.not_applicable]
        if left_out and (self.pngs.get("curve") or self.pngs.get("training")):
            out.append(
                (
                    "p",
                    f"Left out of the plots: {', '.join(left_out)} (the same certified answer as PRV, both "
                    "compose discretised PLDs, at several times the cost); name it in "
                    "`report.plot_accountants` to draw it. PRV is drawn at the configured δ only and at 3 "
                    "points of training (about a second per query), Edgeworth at a dozen.",
                )
            )
        if self.notes:
            out.append(("h2", "Notes"))
            out.append(("ul", self.notes))
        out.append(("h2", "Settings"))
        out.append(("table", (["", "value"], _settings_rows(self))))
        out.append(("h2", "References"))
        out.append(("ul", list(REFERENCES)))
        return out

    def to_markdown(self, plot_dir: str = "plots") -> str:
        """The report as Markdown.

        Parameters
        ----------
        plot_dir : str, default "plots"
            The directory the image links point to, relative to the Markdown file.

        Returns
        -------
        str
            The Markdown text.

        Raises
        ------
        ValueError
            If ``plot_dir`` is not a str or path.
        """
        if not isinstance(plot_dir, (str, Path)):
            raise ValueError(f"plot_dir must be a directory name, got {plot_dir!r}")
        lines: list[str] = []
        for kind, payload in self._sections(lambda name, alt: f"![{alt}]({plot_dir}/{name})"):
            if kind == "h1":
                lines += [f"# {payload}", ""]
            elif kind == "h2":
                lines += [f"## {payload}", ""]
            elif kind in ("p", "img"):
                lines += [payload, ""]
            elif kind == "ul":
                lines += [f"- {x}" for x in payload] + [""]
            elif kind == "table":
                header, rows = payload
                lines.append("| " + " | ".join(header) + " |")
                lines.append("|" + "|".join("---" for _ in header) + "|")
                lines += ["| " + " | ".join(str(x).replace("|", "\\|") for x in row) + " |" for row in rows]
                lines.append("")
        return "\n".join(lines)

    def to_html(self, plot_dir: Path | None = None) -> str:
        """The report as a single self-contained HTML file (plots embedded as data URIs).

        Parameters
        ----------
        plot_dir : Path, optional
            Where the plots were written (``write_plots``); ``None``: no images.

        Returns
        -------
        str
            The HTML text.

        Raises
        ------
        OSError
            If a plot file named in ``pngs`` cannot be read.
        """

        def img(name: str, alt: str) -> str:
            if plot_dir is None:
                return ""
            data = base64.b64encode((Path(plot_dir) / name).read_bytes()).decode("ascii")
            return f'<img alt="{_html.escape(alt)}" src="data:image/png;base64,{data}">'

        def inline(text: str) -> str:
            parts = _html.escape(text).split("`")
            return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))

        body: list[str] = []
        for kind, payload in self._sections(img):
            if kind == "h1":
                body.append(f"<h1>{_html.escape(payload)}</h1>")
            elif kind == "h2":
                body.append(f"<h2>{_html.escape(payload)}</h2>")
            elif kind == "p":
                text = inline(payload)
                for word in ("bound", "approximation", "not applicable"):
                    text = text.replace(f"*{word}*", f"<em>{word}</em>")
                body.append(f"<p>{text}</p>")
            elif kind == "img":
                if payload:
                    body.append(f"<figure>{payload}</figure>")
            elif kind == "ul":
                body.append("<ul>" + "".join(f"<li>{inline(x)}</li>" for x in payload) + "</ul>")
            elif kind == "table":
                header, rows = payload
                h = "".join(f"<th>{_html.escape(x)}</th>" for x in header)
                r = "".join("<tr>" + "".join(f"<td>{inline(str(x))}</td>" for x in row) + "</tr>" for row in rows)
                body.append(f"<table><thead><tr>{h}</tr></thead><tbody>{r}</tbody></table>")
        css = (
            "body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}"
            "table{border-collapse:collapse;margin:1rem 0}td,th{border:1px solid #ccc;padding:.3rem .6rem;"
            "text-align:left}th{background:#f3f3f3}code{background:#f3f3f3;padding:0 .2rem}"
            "img{max-width:100%}"
        )
        return (
            f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>'
            f"{_html.escape(self.config.title)}</title><style>{css}</style>{_IMAGE_CHECK}</head><body>\n"
            + "\n".join(body)
            + "\n</body></html>\n"
        )

    def write(self, out_dir: str | Path, formats: Iterable[str] | None = None) -> dict[str, Path]:
        """Write the report files into ``out_dir`` (``report.md``, ``report.html``, ``report.json``, plots).

        Parameters
        ----------
        out_dir : str or Path
            The output directory (created if missing).
        formats : iterable of str, optional
            Formats among ``FORMATS`` (default: the config's); ``report.json`` is always written.

        Returns
        -------
        dict of str to Path
            ``{format: path}``, plots under ``"plot_..."``.

        Raises
        ------
        ValueError
            For a format outside ``FORMATS`` (naming ``formats[i]``).
        OSError
            If a file cannot be written.
        """
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        formats = tuple(self.config.formats if formats is None else formats)
        for i, f in enumerate(formats):
            check_choice(f"formats[{i}]", f, FORMATS)
        written: dict[str, Path] = {}
        plot_dir = out / "plots"
        if self.config.plots:
            from .plots import write_plots

            written.update(write_plots(self, plot_dir))
        if "markdown" in formats:
            p = out / "report.md"
            p.write_text(self.to_markdown("plots"), encoding="utf-8")
            written["markdown"] = p
        if "html" in formats:
            p = out / "report.html"
            p.write_text(self.to_html(plot_dir), encoding="utf-8")
            written["html"] = p
        p = out / "report.json"
        p.write_text(json.dumps(self.to_dict(), indent=2), encoding="utf-8")
        written["json"] = p
        return written


def _settings_rows(report: Report) -> list[list[str]]:
    from ..accountants import DEFAULT_ACCOUNTANT, create

    rows = []
    for r in report.results:
        try:
            opts = create(r.name).options()
        except Exception:
            opts = {}
        shown = ", ".join(
            f"{k} = {v:g}" if isinstance(v, float) else f"{k} = {v}" for k, v in opts.items() if v is not None
        )
        rows.append(
            [
                f"accountant {r.name}",
                (shown or "defaults") + (" (default accountant)" if r.name == DEFAULT_ACCOUNTANT else ""),
            ]
        )
    rows.append(["libraries", _library_versions()])
    return rows

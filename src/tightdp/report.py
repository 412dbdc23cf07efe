"""Privacy report: one config in, a self-contained report out (Markdown / HTML / JSON + PNG plots).

``tightdp report CONFIG --out DIR`` (or ``build_report(load_config(path)).write(DIR)``).
CONFIG is TOML (``tomllib``) or JSON and describes either a DP-SGD training run
or a list of mechanisms::

    title = "CIFAR-10-like DP-SGD run"

    [training]
    dataset_size = 50000
    batch_size = 256           # or: sampling_rate = 0.00512
    epochs = 100               # or: steps = 19600
    noise_multiplier = 1.1     # or a schedule of [[training.schedule]] segments
    sampling = "poisson"       # or "without_replacement" (fixed batches, substitute relation)

    [privacy]
    deltas = [1e-5, 1e-6, 1e-7]
    target_epsilons = [1.0, 3.0, 8.0]   # calibration hints
    group_sizes = [2, 4]                # optional: group-level epsilon

    [report]
    accountants = ["prv", "rdp"]        # default: every registered accountant
    formats = ["markdown", "html"]      # also written: report.json
    plots = true

A schedule is a list of segments run in order, each with ``noise_multiplier``
and ``epochs`` or ``steps`` (and optionally its own ``sampling_rate`` or
``batch_size``). Instead of ``[training]``, ``[[events]]`` entries with a
``mechanism`` table (``tightdp.mechanisms.mechanism_from_dict`` format, e.g.
``{type = "gaussian", noise_multiplier = 2.0}``) and a ``count`` describe any
composition.

The report states, for every delta, epsilon from every available accountant
with its kind (certified ``bound`` or ``approximation``), the **certified
band** (the largest certified lower bound and the smallest certified upper
bound over the certified accountants), calibration hints (the smallest noise
for a few target epsilons, from ``tightdp.calibration``, and how many epochs the
configured noise affords), group-level epsilon when asked (``tightdp.group_epsilon``),
and two plots: epsilon against delta, and epsilon over the course of training.

A progress bar (``rich``, optional) appears on a terminal once the work takes
more than a second; it is silent when stdout is not a terminal.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html as _html
import json
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from ._validation import check_choice, check_count, check_delta, check_positive, check_probability, check_real
from .bounds import Bounds
from .errors import PrecisionError, UnsupportedMechanismError
from .mechanisms import Gaussian, Mechanism, PoissonSampled, SampledWithoutReplacement, mechanism_from_dict

__all__ = ["ReportConfig", "Segment", "Report", "load_config", "build_report"]

SAMPLINGS = ("poisson", "without_replacement")
FORMATS = ("markdown", "html", "json")
_DEFAULT_DELTAS = (1e-5,)
_DEFAULT_TARGETS = (1.0, 3.0, 8.0)
#: Epoch hints search up to this many times the configured number of steps.
_EPOCH_HINT_FACTOR = 20
#: Left out of the plots unless named in ``report.plot_accountants``: the same certified
#: answer as PRV (both compose discretised PLDs) at several times the cost.
_SLOW_IN_PLOTS = ("fourier",)


# =============================================================================== config
@dataclass(frozen=True)
class Segment:
    """``steps`` DP-SGD steps at ``noise_multiplier`` with sampling rate ``sampling_rate``."""

    noise_multiplier: float
    sampling_rate: float
    steps: int


@dataclass(frozen=True)
class ReportConfig:
    """A parsed, validated report configuration (see the module docstring for the file format)."""

    title: str = "Privacy report"
    description: str = ""
    segments: tuple[Segment, ...] = ()
    events: tuple[tuple[Mechanism, int], ...] = ()
    dataset_size: int | None = None
    batch_size: int | None = None
    sampling: str = "poisson"
    steps_per_epoch: int | None = None
    deltas: tuple[float, ...] = _DEFAULT_DELTAS
    target_epsilons: tuple[float, ...] = _DEFAULT_TARGETS
    group_sizes: tuple[int, ...] = ()
    accountants: tuple[str, ...] | None = None
    plot_accountants: tuple[str, ...] | None = None
    formats: tuple[str, ...] = ("markdown", "html")
    plots: bool = True
    source: str = ""

    @property
    def is_training(self) -> bool:
        return bool(self.segments)

    @property
    def total_steps(self) -> int:
        return sum(s.steps for s in self.segments) if self.segments else sum(c for _, c in self.events)

    def segment_mechanism(self, seg: Segment) -> Mechanism:
        g = Gaussian(noise_multiplier=seg.noise_multiplier)
        if self.sampling == "without_replacement":
            return SampledWithoutReplacement(mechanism=g, sample_size=self.batch_size, dataset_size=self.dataset_size)
        return PoissonSampled(mechanism=g, sampling_rate=seg.sampling_rate)

    def ledger(self, upto: int | None = None) -> list[tuple[Mechanism, int]]:
        """The composed ``(mechanism, count)`` entries, optionally only the first ``upto`` steps."""
        out: list[tuple[Mechanism, int]] = []
        if self.segments:
            left = math.inf if upto is None else upto
            for seg in self.segments:
                n = int(min(seg.steps, left))
                if n <= 0:
                    break
                out.append((self.segment_mechanism(seg), n))
                left -= n
            return out
        return list(self.events)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "") -> "ReportConfig":
        if not isinstance(data, Mapping):
            raise ValueError("config must be a table (TOML) / object (JSON)")
        known = {"title", "description", "training", "events", "privacy", "report"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"config: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        title = str(data.get("title", "Privacy report"))
        description = str(data.get("description", ""))
        has_training, has_events = "training" in data, "events" in data
        if has_training == has_events:
            raise ValueError("config must have exactly one of [training] and [[events]]")
        kw: dict[str, Any] = {}
        if has_training:
            kw.update(_parse_training(data["training"]))
        else:
            kw["events"] = _parse_events(data["events"])
        priv = _table(data, "privacy")
        _no_unknown("privacy", priv, {"delta", "deltas", "target_epsilons", "group_sizes"})
        if "delta" in priv and "deltas" in priv:
            raise ValueError("privacy: give delta or deltas, not both")
        deltas = priv.get("deltas", [priv["delta"]] if "delta" in priv else list(_DEFAULT_DELTAS))
        kw["deltas"] = tuple(check_delta(f"privacy.deltas[{i}]", d) for i, d in enumerate(_as_list("deltas", deltas)))
        if not kw["deltas"]:
            raise ValueError("privacy.deltas must not be empty")
        kw["target_epsilons"] = tuple(check_real(f"privacy.target_epsilons[{i}]", e, low=0.0) for i, e in
                                      enumerate(_as_list("target_epsilons",
                                                         priv.get("target_epsilons", list(_DEFAULT_TARGETS)))))
        kw["group_sizes"] = tuple(check_count(f"privacy.group_sizes[{i}]", g) for i, g in
                                  enumerate(_as_list("group_sizes", priv.get("group_sizes", []))))
        rep = _table(data, "report")
        _no_unknown("report", rep, {"accountants", "plot_accountants", "formats", "plots"})
        for key in ("accountants", "plot_accountants"):
            if key in rep:
                accs = tuple(str(a) for a in _as_list(key, rep[key]))
                from .accountants import ACCOUNTANTS

                for i, a in enumerate(accs):
                    check_choice(f"report.{key}[{i}]", a, sorted(ACCOUNTANTS))
                kw[key] = accs
        if "formats" in rep:
            kw["formats"] = tuple(check_choice(f"report.formats[{i}]", f, FORMATS)
                                  for i, f in enumerate(_as_list("formats", rep["formats"])))
        if "plots" in rep:
            if not isinstance(rep["plots"], bool):
                raise ValueError(f"report.plots must be true or false, got {rep['plots']!r}")
            kw["plots"] = rep["plots"]
        return cls(title=title, description=description, source=source, **kw)


def _table(data, key) -> Mapping[str, Any]:
    t = data.get(key, {})
    if not isinstance(t, Mapping):
        raise ValueError(f"{key} must be a table")
    return t


def _no_unknown(where: str, table: Mapping[str, Any], known: set[str]) -> None:
    unknown = sorted(set(table) - known)
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")


def _as_list(name: str, v) -> list:
    if isinstance(v, (list, tuple)):
        return list(v)
    raise ValueError(f"{name} must be a list, got {v!r}")


def _parse_training(t) -> dict[str, Any]:
    if not isinstance(t, Mapping):
        raise ValueError("training must be a table")
    _no_unknown("training", t, {"dataset_size", "batch_size", "sampling_rate", "epochs", "steps",
                                "noise_multiplier", "schedule", "sampling"})
    sampling = check_choice("training.sampling", t.get("sampling", "poisson"), SAMPLINGS)
    n = check_count("training.dataset_size", t["dataset_size"]) if "dataset_size" in t else None
    b = check_count("training.batch_size", t["batch_size"]) if "batch_size" in t else None
    if "sampling_rate" in t and b is not None:
        raise ValueError("training: give batch_size or sampling_rate, not both")
    if b is not None:
        if n is None:
            raise ValueError("training.dataset_size is required with training.batch_size")
        if b > n:
            raise ValueError(f"training.batch_size ({b}) must be <= training.dataset_size ({n})")
        q = b / n
        per_epoch = math.ceil(n / b)
    elif "sampling_rate" in t:
        q = check_probability("training.sampling_rate", t["sampling_rate"])
        per_epoch = math.ceil(1.0 / q)
    else:
        q, per_epoch = None, None
    if sampling == "without_replacement" and (n is None or b is None):
        raise ValueError("training.sampling = 'without_replacement' needs dataset_size and batch_size")

    def seg(where: str, s: Mapping[str, Any], default_sigma=None) -> Segment:
        sigma = s.get("noise_multiplier", default_sigma)
        if sigma is None:
            raise ValueError(f"{where}.noise_multiplier is required")
        sigma = check_positive(f"{where}.noise_multiplier", sigma)
        sq, spe = q, per_epoch
        if "sampling_rate" in s or "batch_size" in s:
            if sampling == "without_replacement":
                raise ValueError(f"{where}: per-segment sampling needs sampling = 'poisson'")
            if "batch_size" in s:
                if n is None:
                    raise ValueError(f"training.dataset_size is required with {where}.batch_size")
                bs = check_count(f"{where}.batch_size", s["batch_size"])
                sq, spe = bs / n, math.ceil(n / bs)
            else:
                sq = check_probability(f"{where}.sampling_rate", s["sampling_rate"])
                spe = math.ceil(1.0 / sq)
        if sq is None:
            raise ValueError(f"{where}: give training.batch_size (with dataset_size) or training.sampling_rate")
        if ("epochs" in s) == ("steps" in s):
            raise ValueError(f"{where}: give exactly one of epochs and steps")
        steps = (check_count(f"{where}.epochs", s["epochs"]) * spe if "epochs" in s
                 else check_count(f"{where}.steps", s["steps"]))
        return Segment(sigma, sq, steps)

    if "schedule" in t:
        if "noise_multiplier" in t or "epochs" in t or "steps" in t:
            raise ValueError("training: with a schedule, give noise_multiplier and epochs/steps per segment")
        sched = _as_list("training.schedule", t["schedule"])
        if not sched:
            raise ValueError("training.schedule must not be empty")
        segs = []
        for i, s in enumerate(sched):
            if not isinstance(s, Mapping):
                raise ValueError(f"training.schedule[{i}] must be a table")
            _no_unknown(f"training.schedule[{i}]", s, {"noise_multiplier", "epochs", "steps", "sampling_rate",
                                                       "batch_size"})
            segs.append(seg(f"training.schedule[{i}]", s))
    else:
        segs = [seg("training", t)]
    return {"segments": tuple(segs), "dataset_size": n, "batch_size": b, "sampling": sampling,
            "steps_per_epoch": per_epoch}


def _parse_events(ev) -> tuple[tuple[Mechanism, int], ...]:
    items = _as_list("events", ev)
    if not items:
        raise ValueError("events must not be empty")
    out = []
    for i, e in enumerate(items):
        if not isinstance(e, Mapping) or "mechanism" not in e:
            raise ValueError(f"events[{i}] must be a table with a 'mechanism' table and an optional count")
        _no_unknown(f"events[{i}]", e, {"mechanism", "count"})
        out.append((mechanism_from_dict(dict(e["mechanism"])), check_count(f"events[{i}].count", e.get("count", 1))))
    return tuple(out)


def load_config(path: str | Path) -> ReportConfig:
    """Read a TOML (``.toml``) or JSON config file."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"config: no such file {str(p)!r}")
    text = p.read_text(encoding="utf-8")
    try:
        if p.suffix.lower() == ".json":
            data = json.loads(text)
        else:
            import tomllib

            data = tomllib.loads(text)
    except (ValueError, json.JSONDecodeError) as exc:  # tomllib.TOMLDecodeError is a ValueError
        raise ValueError(f"config: cannot parse {p.name}: {exc}") from None
    return ReportConfig.from_dict(data, source=str(p))


# ============================================================================= progress
class _Progress:
    """A rich progress bar that appears only on a terminal and only after ``delay`` seconds."""

    def __init__(self, total: int, *, enabled: bool | None = None, delay: float = 1.0, stream=None):
        self.total, self.done, self.delay = total, 0, delay
        self.stream = sys.stdout if stream is None else stream
        if enabled is None:
            enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self.enabled = enabled
        self.t0 = time.perf_counter()
        self._bar = None
        self._task = None

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
            self._bar = Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                                 TimeElapsedColumn(), transient=True, console=Console(file=self.stream))
            self._bar.start()
            self._task = self._bar.add_task("privacy report", total=self.total, completed=self.done)
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done, description=what or "privacy report")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


# ============================================================================= results
@dataclass
class AccountantResult:
    """One accountant's answers: ``bounds[delta] -> Bounds`` or an error note."""

    name: str
    kind: str
    bounds: dict[float, Bounds] = field(default_factory=dict)
    seconds: float = 0.0
    note: str = ""


@dataclass
class Report:
    """Everything a report shows; ``write`` renders it."""

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

    # ------------------------------------------------------------------ data
    def to_dict(self) -> dict[str, Any]:
        c = self.config
        return {
            "title": c.title, "created": self.created, "seconds": self.seconds,
            "run": _run_dict(c),
            "deltas": list(c.deltas),
            "accountants": [{"name": r.name, "kind": r.kind, "seconds": r.seconds, "note": r.note,
                             "epsilon": {repr(d): b.to_dict() for d, b in r.bounds.items()}} for r in self.results],
            "certified_band": {repr(d): {"lower": lo, "upper": up} for d, (lo, up) in self.band.items()},
            "calibration": self.calibration, "calibration_note": self.calibration_note,
            "groups": self.groups, "group_note": self.group_note,
            "notes": self.notes, "settings": dict(_settings_rows(self)), "references": list(REFERENCES),
        }

    # -------------------------------------------------------------- rendering
    def _sections(self, img: Callable[[str, str], str], fmt: str) -> list[tuple[str, Any]]:
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
        out.append(("h2", "Epsilon by accountant"))
        out.append(("p", "*bound*: each cell is the certified upper bound (the epsilon to report) with the "
                         "certified interval `[lower, upper]` where the accountant gives a lower bound too. "
                         "*approximation*: an estimate `≈` with no guarantee. A dash: not available."))
        header = ["accountant", "kind"] + [f"δ = {d:g}" for d in c.deltas] + ["time"]
        rows = []
        for r in self.results:
            cells = [r.name, r.kind]
            for d in c.deltas:
                b = r.bounds.get(d)
                cells.append(_fmt_bounds(b) if b is not None else "—")
            cells.append(f"{r.seconds:.2f} s" if not r.note else r.note)
            rows.append(cells)
        out.append(("table", (header, rows)))
        out.append(("h2", "Certified band"))
        out.append(("p", "The true epsilon lies in this interval: the largest certified lower bound and the smallest "
                         "certified upper bound over the certified accountants (approximations excluded). Report "
                         "the upper end."))
        rows = [[f"{d:g}", _f(lo), _f(up), _f(None if lo is None or up is None else up - lo)]
                for d, (lo, up) in self.band.items()]
        out.append(("table", (["δ", "lower", "upper (report this)", "width"], rows)))
        if self.curve.get("png"):
            out.append(("img", img(self.curve["png"], "epsilon against delta")))
        if self.training_curve.get("png"):
            out.append(("h2", "Privacy over training"))
            out.append(("p", f"Certified band and accountants' epsilon at δ = {c.deltas[0]:g} as training proceeds."))
            out.append(("img", img(self.training_curve["png"], "epsilon over training")))
        out.append(("h2", "Calibration hints"))
        if self.calibration_note:
            out.append(("p", self.calibration_note))
        if self.calibration:
            rows = [[h["question"], h["answer"], _f(h.get("epsilon_upper")), h.get("note", "")]
                    for h in self.calibration]
            out.append(("table", (["question", "answer", "certified ε at the answer", "note"], rows)))
        if c.group_sizes:
            out.append(("h2", "Group privacy"))
            if self.group_note:
                out.append(("p", self.group_note))
            if self.groups:
                rows = [[str(g["group_size"])] + [_f(g["epsilon"].get(repr(d))) for d in c.deltas]
                        for g in self.groups]
                out.append(("table", (["group size"] + [f"δ = {d:g}" for d in c.deltas], rows)))
        left_out = [n for n in (r.name for r in self.results) if n not in self.plot_names] if self.plot_names else []
        if left_out and (self.curve.get("png") or self.training_curve.get("png")):
            out.append(("p", f"Left out of the plots: {', '.join(left_out)} (the same certified answer as PRV, both "
                             "compose discretised PLDs, at several times the cost); name it in "
                             "`report.plot_accountants` to draw it."))
        if self.notes:
            out.append(("h2", "Notes"))
            out.append(("ul", self.notes))
        out.append(("h2", "Settings"))
        out.append(("table", (["", "value"], _settings_rows(self))))
        out.append(("h2", "References"))
        out.append(("ul", [f"[{i}] {ref}" for i, ref in enumerate(REFERENCES, 1)]))
        return out

    def to_markdown(self, plot_dir: str = "plots") -> str:
        lines: list[str] = []
        for kind, payload in self._sections(lambda name, alt: f"![{alt}]({plot_dir}/{name})", "markdown"):
            if kind == "h1":
                lines += [f"# {payload}", ""]
            elif kind == "h2":
                lines += [f"## {payload}", ""]
            elif kind == "p":
                lines += [payload, ""]
            elif kind == "img":
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
        """A single self-contained HTML file (plots embedded as data URIs)."""
        def img(name: str, alt: str) -> str:
            if plot_dir is None:
                return ""
            data = base64.b64encode((Path(plot_dir) / name).read_bytes()).decode("ascii")
            return f'<img alt="{_html.escape(alt)}" src="data:image/png;base64,{data}">'

        def inline(text: str) -> str:
            parts = _html.escape(text).split("`")
            return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))

        body: list[str] = []
        for kind, payload in self._sections(img, "html"):
            if kind == "h1":
                body.append(f"<h1>{_html.escape(payload)}</h1>")
            elif kind == "h2":
                body.append(f"<h2>{_html.escape(payload)}</h2>")
            elif kind == "p":
                text = inline(payload)
                text = text.replace("*bound*", "<em>bound</em>").replace("*approximation*", "<em>approximation</em>")
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
        css = ("body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}"
               "table{border-collapse:collapse;margin:1rem 0}td,th{border:1px solid #ccc;padding:.3rem .6rem;"
               "text-align:left}th{background:#f3f3f3}code{background:#f3f3f3;padding:0 .2rem}"
               "img{max-width:100%}")
        return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>"
                f"{_html.escape(self.config.title)}</title><style>{css}</style></head><body>\n"
                + "\n".join(body) + "\n</body></html>\n")

    def write(self, out_dir: str | Path, formats: Iterable[str] | None = None) -> dict[str, Path]:
        """Write the report files into ``out_dir``; returns ``{format: path}`` (plots under ``"plots"``)."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        formats = tuple(self.config.formats if formats is None else formats)
        for i, f in enumerate(formats):
            check_choice(f"formats[{i}]", f, FORMATS)
        written: dict[str, Path] = {}
        plot_dir = out / "plots"
        if self.config.plots:
            written.update(self._plots(plot_dir))
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

    def _plots(self, plot_dir: Path) -> dict[str, Path]:
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            self.notes.append("Plots skipped: matplotlib is not installed (pip install 'tightdp[plot]').")
            self.curve.pop("png", None)
            self.training_curve.pop("png", None)
            return {}
        plot_dir.mkdir(parents=True, exist_ok=True)
        written = {}
        if self.curve.get("series"):
            fig, ax = plt.subplots(figsize=(7, 4.2))
            _plot_series(ax, self.curve, x_key="delta")
            ax.set_xscale("log")
            ax.set_xlabel("δ")
            ax.set_ylabel("ε")
            ax.set_title("ε(δ) by accountant; shaded: certified band")
            ax.legend(fontsize=8)
            fig.tight_layout()
            p = plot_dir / "epsilon_vs_delta.png"
            fig.savefig(p, dpi=110)
            plt.close(fig)
            self.curve["png"] = p.name
            written["plot_epsilon_vs_delta"] = p
        if self.training_curve.get("series"):
            fig, ax = plt.subplots(figsize=(7, 4.2))
            _plot_series(ax, self.training_curve, x_key="x")
            ax.set_xlabel(self.training_curve.get("x_label", "steps"))
            ax.set_ylabel(f"ε at δ = {self.config.deltas[0]:g}")
            ax.set_title("privacy spent over training; shaded: certified band")
            ax.legend(fontsize=8)
            fig.tight_layout()
            p = plot_dir / "epsilon_over_training.png"
            fig.savefig(p, dpi=110)
            plt.close(fig)
            self.training_curve["png"] = p.name
            written["plot_epsilon_over_training"] = p
        return written


def _plot_series(ax, curve: dict[str, Any], *, x_key: str) -> None:
    x = np.asarray(curve[x_key], float)
    band = curve.get("band")
    if band is not None:
        lo = np.array([np.nan if v is None else v for v in band[0]], float)
        up = np.array([np.nan if v is None else v for v in band[1]], float)
        ok = np.isfinite(lo) & np.isfinite(up)
        if ok.any():
            ax.fill_between(x[ok], lo[ok], up[ok], color="0.55", alpha=0.35, hatch="//", linewidth=0,
                            label="certified band")
    for name, ys in curve["series"].items():
        y = np.array([np.nan if v is None else v for v in ys], float)
        ax.plot(x, y, marker="o", ms=3, label=name)


# ============================================================================= building
def _available_accountants(config: ReportConfig) -> list[str]:
    from .accountants import ACCOUNTANTS

    if config.accountants is not None:
        return list(config.accountants)
    return sorted(ACCOUNTANTS)


def _make_accountant(name: str):
    from .accountants import create

    return create(name)


def _safe_epsilon(acc, delta: float) -> tuple[Bounds | None, str]:
    try:
        return acc.epsilon(delta), ""
    except (PrecisionError, UnsupportedMechanismError) as exc:
        return None, f"{type(exc).__name__}: {exc}"
    except (ArithmeticError, ValueError) as exc:
        return None, f"{type(exc).__name__}: {exc}"


def _band(results: list[AccountantResult], delta: float) -> tuple[float | None, float | None]:
    lows, ups = [], []
    for r in results:
        b = r.bounds.get(delta)
        if b is None or b.kind != "bound":
            continue
        if b.lower is not None and math.isfinite(b.lower):
            lows.append(float(b.lower))
        if b.upper is not None:
            ups.append(float(b.upper))
    return (max(lows) if lows else None, min(ups) if ups else None)


def build_report(config: ReportConfig, *, progress: bool | None = None, workers: int = 1,
                 curve_points: int = 4, training_points: int = 5) -> Report:
    """Compute everything the report shows.

    ``progress=None``: a progress bar only on a terminal (and only after a
    second). ``workers > 1`` runs the independent computations (one per
    accountant row, plot point, calibration hint and group size) in that many
    forked worker processes; the results are identical to ``workers=1``.
    """
    if not isinstance(config, ReportConfig):
        raise ValueError(f"config must be a ReportConfig (see load_config), got {config!r}")
    workers = check_count("workers", workers)
    t0 = time.perf_counter()
    names = _available_accountants(config)
    plot_names = [n for n in names if (n in config.plot_accountants if config.plot_accountants is not None
                                       else n not in _SLOW_IN_PLOTS)]
    deltas = list(config.deltas)
    curve_deltas = sorted(set(deltas) | set(np.logspace(-10, -3, curve_points).tolist())) if config.plots else []
    train_x = _training_checkpoints(config, training_points) if config.plots and config.is_training else []
    calibration_note, calib_jobs = _calibration_plan(config)
    group_note, group_jobs = _group_plan(config)

    # every independent computation is one job; the slow kinds go first so that workers balance
    jobs: list[tuple] = [("calib", what, t) for what, t in calib_jobs] + [("group", g) for g in group_jobs]
    jobs += [("row", n, tuple(sorted(set(deltas) | (set(curve_deltas) if n in plot_names else set()),
                                     reverse=True))) for n in names]
    jobs += [("train", n, k) for n in plot_names for k in train_x]
    bar = _Progress(max(len(jobs), 1), enabled=progress)
    try:
        out = _run_jobs(config, jobs, workers, bar)
    finally:
        bar.close()
    by_job = dict(zip(jobs, out))

    notes: list[str] = []
    results = []
    for job in jobs:
        if job[0] == "row":
            res, row_notes = by_job[job]
            results.append(res)
            notes += row_notes
    band = {d: _band(results, d) for d in deltas}
    curve = {}
    if curve_deltas:
        curve = {"delta": curve_deltas,
                 "series": {f"{r.name} ({r.kind})": [_upper(r.bounds.get(d)) for d in curve_deltas]
                            for r in results if r.bounds and r.name in plot_names},
                 "band": ([_band(results, d)[0] for d in curve_deltas],
                          [_band(results, d)[1] for d in curve_deltas])}
    training_curve = _training_curve(config, plot_names, train_x, by_job) if train_x else {}
    calibration = [by_job[("calib", what, t)] for what, t in calib_jobs]
    groups, group_errors = [], []
    for g in group_jobs:
        row, errs = by_job[("group", g)]
        groups.append(row)
        group_errors += errs
    if group_errors:
        group_note += " Failures: " + "; ".join(group_errors)
    return Report(config=config, results=results, band=band, calibration=calibration,
                  calibration_note=calibration_note, groups=groups, group_note=group_note, curve=curve,
                  training_curve=training_curve, created=_dt.datetime.now().strftime("%Y-%m-%d %H:%M"),
                  seconds=time.perf_counter() - t0, notes=notes, plot_names=list(plot_names))


def _run_jobs(config: ReportConfig, jobs: list[tuple], workers: int, bar: _Progress) -> list[Any]:
    """Run the jobs in order (``workers == 1``) or in forked processes; results in job order."""
    if workers == 1 or len(jobs) <= 1:
        out = []
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


def _job_label(job: tuple) -> str:
    kind = job[0]
    if kind == "row":
        return f"{job[1]}: epsilon"
    if kind == "train":
        return f"{job[1]}: epsilon after {job[2]} steps"
    if kind == "calib":
        return f"calibration: {job[1]} for epsilon <= {job[2]:g}"
    return f"group privacy: size {job[1]}"


def _run_job(config: ReportConfig, job: tuple) -> Any:
    kind = job[0]
    if kind == "row":
        return _row_job(config, job[1], job[2])
    if kind == "train":
        return _train_job(config, job[1], job[2])
    if kind == "calib":
        return _calibration_job(config, job[1], job[2])
    if kind == "group":
        return _group_job(config, job[1])
    raise ValueError(f"unknown job {job!r}")  # pragma: no cover


def _row_job(config: ReportConfig, name: str, queries: tuple[float, ...]) -> tuple[AccountantResult, list[str]]:
    """One accountant's epsilon at every queried delta (time counted for the configured deltas only)."""
    acc = _make_accountant(name)
    res = AccountantResult(name=name, kind=acc.kind)
    notes: list[str] = []
    try:
        acc.compose(config.ledger())
    except UnsupportedMechanismError as exc:
        res.note = f"cannot analyse this run ({exc})"
        return res, notes
    for d in queries:
        ts = time.perf_counter()
        b, err = _safe_epsilon(acc, d)
        if d in config.deltas:
            res.seconds += time.perf_counter() - ts
        if b is not None:
            res.bounds[d] = b
            if b.kind == "bound" and (b.upper is None or not math.isfinite(float(b.upper))):
                why = (b.details or {}).get("note") or "no finite upper bound"
                notes.append(f"{name} at δ = {d:g}{'' if d in config.deltas else ' (plot only)'}: not certified "
                             f"(upper bound {b.upper}): {why}")
        else:
            notes.append(f"{name} at δ = {d:g}{'' if d in config.deltas else ' (plot only)'}: {err}")
    return res, notes


def _train_job(config: ReportConfig, name: str, k: int) -> tuple[str, Bounds | None]:
    acc = _make_accountant(name)
    try:
        acc.compose(config.ledger(upto=k))
    except UnsupportedMechanismError:
        return acc.kind, None
    return acc.kind, _safe_epsilon(acc, config.deltas[0])[0]


def _upper(b: Bounds | None) -> float | None:
    """The value to plot: the certified upper bound, or the estimate of an approximation."""
    if b is None:
        return None
    v = b.upper if b.kind == "bound" else b.estimate
    if v is None or not math.isfinite(v):
        return None
    return float(v)


def _training_checkpoints(config: ReportConfig, points: int) -> list[int]:
    total = config.total_steps
    xs = sorted({max(1, int(round(total * (i + 1) / points))) for i in range(points)})
    return xs


def _training_curve(config: ReportConfig, names: list[str], xs: list[int], by_job: dict) -> dict[str, Any]:
    delta = config.deltas[0]
    series: dict[str, list] = {}
    per: list[list[AccountantResult]] = [[] for _ in xs]
    for name in names:
        ys = []
        kind = "bound"
        for i, k in enumerate(xs):
            kind, b = by_job[("train", name, k)]
            r = AccountantResult(name=name, kind=kind)
            if b is not None:
                r.bounds[delta] = b
            per[i].append(r)
            ys.append(_upper(b))
        if any(y is not None for y in ys):
            series[f"{name} ({kind})"] = ys
    band = ([_band(rs, delta)[0] for rs in per], [_band(rs, delta)[1] for rs in per])
    if config.steps_per_epoch:
        x, label = [k / config.steps_per_epoch for k in xs], "epochs"
    else:
        x, label = xs, "steps"
    return {"x": x, "steps": xs, "x_label": label, "series": series, "band": band}


def _calibration_plan(config: ReportConfig) -> tuple[str, list[tuple[str, float]]]:
    """The note above the hints and the ``(kind, target)`` jobs."""
    if not config.target_epsilons:
        return "No target epsilons given (privacy.target_epsilons).", []
    if not config.is_training:
        return "Calibration hints are given for training runs (a [training] table).", []
    if config.sampling != "poisson":
        return "Calibration hints use Poisson sampling; this run samples fixed batches without replacement.", []
    if len({s.sampling_rate for s in config.segments}) != 1:
        return "Calibration hints need one sampling rate across the schedule.", []
    q, k, delta = config.segments[0].sampling_rate, config.total_steps, config.deltas[0]
    from .accountants import DEFAULT_ACCOUNTANT
    from .calibration import DEFAULT_EPS_ERROR

    note = (f"Certified by the {DEFAULT_ACCOUNTANT} upper bound at eps_error {DEFAULT_EPS_ERROR:g} (the default of "
            f"`tightdp epsilon`, so re-checking an answer there gives at most the target) at δ = {delta:g}, sampling "
            f"rate {q:.6g}. Noise: the smallest constant noise multiplier for {k} steps that meets the target, "
            "rounded up in the printed digits; the note column says when a little less noise is not shown to "
            "exceed it. ")
    jobs = [("noise", t) for t in config.target_epsilons]
    if len(config.segments) == 1 and config.steps_per_epoch:
        note += "Epochs: the most whole epochs the configured noise affords."
        jobs += [("epochs", t) for t in config.target_epsilons]
    return note, jobs


def _calibration_job(config: ReportConfig, what: str, t: float) -> dict[str, Any]:
    from .calibration import CalibrationError, calibrate_noise, calibrate_steps

    q, k, delta = config.segments[0].sampling_rate, config.total_steps, config.deltas[0]
    try:
        if what == "noise":
            cal = calibrate_noise(target_epsilon=t, delta=delta, sampling_rate=q, steps=k)
            tight = cal.details.get("tightness", {})
            return {"question": f"noise for ε ≤ {t:g}", "answer": f"σ = {cal.noise_multiplier:.6g}",
                    "noise_multiplier": cal.noise_multiplier, "target_epsilon": t,
                    "epsilon_upper": cal.epsilon.upper, "eps_error": cal.eps_error,
                    "note": "" if tight.get("overshoots") else tight.get("note", cal.details.get("note", ""))}
        sigma, spe = config.segments[0].noise_multiplier, config.steps_per_epoch
        cal = calibrate_steps(target_epsilon=t, delta=delta, noise_multiplier=sigma, sampling_rate=q,
                              multiple_of=spe, max_steps=_EPOCH_HINT_FACTOR * k)
        note = ""
        if "note" in cal.details:
            note = f"at least; not searched beyond {_EPOCH_HINT_FACTOR}× the configured run"
        return {"question": f"epochs at σ = {sigma:g} for ε ≤ {t:g}",
                "answer": f"{cal.steps // spe} epochs ({cal.steps} steps)", "steps": cal.steps,
                "target_epsilon": t, "epsilon_upper": cal.epsilon.upper, "note": note}
    except (CalibrationError, ArithmeticError) as exc:
        return {"question": f"{what} for ε ≤ {t:g}", "answer": "—", "target_epsilon": t,
                "epsilon_upper": None, "note": str(exc)}


def _group_functions():
    """``(group_epsilon, group_epsilon_schedule)`` if this installation has them, else ``(None, None)``."""
    import tightdp

    fn = getattr(tightdp, "group_epsilon", None)
    sched = getattr(tightdp, "group_epsilon_schedule", None)
    if fn is None:
        try:
            from . import group as _group
        except ImportError:
            return None, None
        fn, sched = getattr(_group, "group_epsilon", None), getattr(_group, "group_epsilon_schedule", None)
    return fn, sched


def _group_plan(config: ReportConfig) -> tuple[str, list[int]]:
    if not config.group_sizes:
        return "", []
    fn, sched = _group_functions()
    if fn is None:
        return "Group-level epsilon needs `tightdp.group_epsilon`, which this installation does not provide.", []
    if not config.is_training or config.sampling != "poisson":
        return ("Group-level epsilon is computed for Poisson-sampled training runs "
                "(add/remove of up to k examples)."), []
    if len(config.segments) > 1 and sched is None:
        return "Group-level epsilon for a noise schedule needs `tightdp.group_epsilon_schedule`.", []
    return ("Certified upper bounds on epsilon when any group of up to k examples is added or removed together "
            "(the T-fold mixture-of-Gaussians mechanism with Binomial(k, q) sensitivity, Ganesh [5] Thm 3.1)."), \
        list(config.group_sizes)


def _group_job(config: ReportConfig, g: int) -> tuple[dict[str, Any], list[str]]:
    fn, sched = _group_functions()
    eps, errors = {}, []
    for d in config.deltas:
        try:
            if len(config.segments) == 1:
                s = config.segments[0]
                b = fn(group_size=g, noise_multiplier=s.noise_multiplier, sampling_rate=s.sampling_rate,
                       steps=s.steps, delta=d)
            else:
                b = sched(schedule=[(s.noise_multiplier, s.sampling_rate, s.steps) for s in config.segments],
                          group_size=g, delta=d)
            eps[repr(d)] = _upper(b)
            if eps[repr(d)] is None:
                errors.append(f"group size {g}, δ = {d:g}: {b.details.get('note', 'no finite bound')}")
        except (ValueError, TypeError, ArithmeticError) as exc:
            errors.append(f"group size {g}, δ = {d:g}: {type(exc).__name__}: {exc}")
            eps[repr(d)] = None
    return {"group_size": g, "epsilon": eps}, errors


# ============================================================================= formatting
def _version() -> str:
    try:
        from . import __version__

        return __version__
    except ImportError:  # pragma: no cover
        return "?"


#: Significant digits of every epsilon the report prints (trailing zeros kept, so columns read alike).
_DIGITS = 4


def _f(v) -> str:
    if v is None:
        return "—"
    if isinstance(v, float) and math.isinf(v):
        return "∞"
    if v == 0:
        return "0"
    return f"{v:#.{_DIGITS}g}".rstrip(".") if abs(v) < 10 ** _DIGITS else f"{v:.{_DIGITS}g}"


def _fmt_bounds(b: Bounds) -> str:
    if b.kind != "bound":
        return f"≈ {_f(b.estimate)}"
    up = _f(b.upper)
    if b.lower is None:
        return f"≤ {up}"
    return f"{up} [{_f(b.lower)}, {up}]"


#: The papers the report's methods come from (cited as [n]).
REFERENCES = (
    "A. Koskela, J. Jälkö, A. Honkela. Computing Tight Differential Privacy Guarantees Using FFT. AISTATS 2020 "
    "(the Fourier accountant).",
    "S. Gopi, Y. T. Lee, L. Wutschitz. Numerical Composition of Differential Privacy. NeurIPS 2021 "
    "(the PRV accountant).",
    "H. Wang et al. Analytical Composition of Differential Privacy via the Edgeworth Accountant. ICLR 2023.",
    "A. Koskela, M. Tobaben, A. Honkela. Individual Privacy Accounting with Gaussian Differential Privacy. ICLR 2023.",
    "A. Ganesh. Tight Group-Level DP Guarantees for DP-SGD with Sampling via Mixture of Gaussians Mechanisms "
    "(group privacy).",
)


def _library_versions() -> str:
    import platform

    parts = [f"tightdp {_version()}", f"Python {platform.python_version()}", f"numpy {np.__version__}"]
    try:
        import scipy

        parts.append(f"scipy {scipy.__version__}")
    except ImportError:  # pragma: no cover
        pass
    return ", ".join(parts)


def _settings_rows(report: "Report") -> list[list[str]]:
    from .accountants import DEFAULT_ACCOUNTANT

    rows = []
    for r in report.results:
        try:
            opts = _make_accountant(r.name).options()
        except Exception:  # noqa: BLE001 - a description only
            opts = {}
        shown = ", ".join(f"{k} = {v:g}" if isinstance(v, float) else f"{k} = {v}" for k, v in opts.items()
                          if v is not None)
        rows.append([f"accountant {r.name}", (shown or "defaults") + (" (default accountant)"
                                                                      if r.name == DEFAULT_ACCOUNTANT else "")])
    rows.append(["libraries", _library_versions()])
    return rows


def _run_dict(c: ReportConfig) -> dict[str, Any]:
    if c.is_training:
        return {"dataset_size": c.dataset_size, "batch_size": c.batch_size, "sampling": c.sampling,
                "steps_per_epoch": c.steps_per_epoch, "total_steps": c.total_steps,
                "segments": [{"noise_multiplier": s.noise_multiplier, "sampling_rate": s.sampling_rate,
                              "steps": s.steps} for s in c.segments]}
    return {"events": [{"mechanism": m.to_dict(), "count": n} for m, n in c.events]}


def _run_rows(c: ReportConfig) -> list[list[str]]:
    rows = []
    if c.is_training:
        if c.dataset_size:
            rows.append(["data set size", f"{c.dataset_size:,}"])
        if c.batch_size:
            rows.append(["batch size", f"{c.batch_size:,}"])
        rows.append(["sampling", "Poisson (add/remove neighbours)" if c.sampling == "poisson"
                     else "fixed batches without replacement (substitute neighbours)"])
        if c.steps_per_epoch:
            rows.append(["steps per epoch", f"{c.steps_per_epoch:,} (rounded up: safe side)"])
        for i, s in enumerate(c.segments):
            label = "noise multiplier σ" if len(c.segments) == 1 else f"segment {i + 1}"
            ep = f" ≈ {s.steps / c.steps_per_epoch:g} epochs" if c.steps_per_epoch else ""
            rows.append([label, f"σ = {s.noise_multiplier:g}, sampling rate q = {s.sampling_rate:.6g}, "
                                f"{s.steps:,} steps{ep}"])
        rows.append(["total steps", f"{c.total_steps:,}"])
    else:
        for m, n in c.events:
            rows.append([m.describe(), f"× {n:,}"])
    rows.append(["δ", ", ".join(f"{d:g}" for d in c.deltas)])
    return rows

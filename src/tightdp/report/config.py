"""The report's configuration: a TOML or JSON file describing a DP-SGD run or a list of mechanisms.

See ``tightdp.report`` for the file format. ``load_config(path)`` reads and validates it into a
frozen ``ReportConfig``; every bad value raises ``ValueError`` naming the key (``training.batch_size``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._validation import check_choice, check_count, check_delta, check_positive, check_probability, check_real
from ..mechanisms import Gaussian, Mechanism, PoissonSampled, mechanism_from_dict
from ..sampling import SamplingScheme, scheme_class

__all__ = ["FORMATS", "AuditConfig", "Segment", "ReportConfig", "load_config"]

FORMATS = ("markdown", "html", "json")
_DEFAULT_DELTAS = (1e-5,)
_DEFAULT_TARGETS = (1.0, 3.0, 8.0)


@dataclass(frozen=True)
class Segment:
    """``steps`` DP-SGD steps at ``noise_multiplier`` with sampling rate ``sampling_rate``.

    Parameters
    ----------
    noise_multiplier : float
        The noise multiplier, > 0.
    sampling_rate : float
        The sampling rate, in (0, 1].
    steps : int
        The steps, >= 1.

    Raises
    ------
    ValueError
        If a value is out of its range (the message names it).
    """

    noise_multiplier: float
    sampling_rate: float
    steps: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "noise_multiplier", check_positive("noise_multiplier", self.noise_multiplier))
        object.__setattr__(self, "sampling_rate", check_probability("sampling_rate", self.sampling_rate))
        object.__setattr__(self, "steps", check_count("steps", self.steps))


@dataclass(frozen=True)
class AuditConfig:
    """The ``[audit]`` table: canary scores (``tightdp.audit.read_scores_csv`` format) and the audit's settings.

    ``scores`` is the path as resolved (relative paths are relative to the config file); ``in_scores`` /
    ``out_scores`` are the scores read from it at load time, so a bad file fails before any computation.
    ``delta`` is the delta the verdict is stated at (default: the first of ``privacy.deltas``).

    Parameters
    ----------
    scores : str
        The scores file, as resolved.
    in_scores : tuple of float
        The scores of the canaries that were in.
    out_scores : tuple of float
        The scores of the canaries that were out.
    beta : float, default 0.05
        One minus the audit's confidence, in (0, 1).
    method : str, default "one-run"
        One of ``tightdp.audit.RUN_METHODS``.
    delta : float, default 1e-5
        The delta the verdict is stated at.

    Raises
    ------
    ValueError
        Not raised by the constructor itself: ``load_config`` validates the ``[audit]`` table (naming the key)
        before building it.

    References
    ----------
    Steinke, Nasr, Jagielski 2023 (one-run audit); Mahloujifar, Melis, Chaudhuri 2024 (f-DP audit).
    """

    scores: str
    in_scores: tuple[float, ...] = field(repr=False)
    out_scores: tuple[float, ...] = field(repr=False)
    beta: float = 0.05
    method: str = "one-run"
    delta: float = 1e-5


@dataclass(frozen=True)
class ReportConfig:
    """A parsed, validated report configuration (see ``tightdp.report`` for the file format).

    Parameters
    ----------
    title : str, default "Privacy report"
        The report's title.
    description : str, default ""
        A paragraph under the title.
    segments : tuple of Segment, default ()
        The training run (``[training]``): constant-noise segments in order; empty for a list of events.
    events : tuple of (Mechanism, int), default ()
        The mechanisms and counts (``[[events]]``); empty for a training run.
    dataset_size : int, optional
        ``training.dataset_size``.
    batch_size : int, optional
        ``training.batch_size``.
    sampling : str, default "poisson"
        ``training.sampling``, in the config's spelling (underscores).
    steps_per_epoch : int, optional
        Steps per epoch, derived from the batch size or rate.
    max_batch_size : int, optional
        ``training.max_batch_size`` (truncated Poisson).
    deltas : tuple of float, default (1e-5,)
        The deltas reported.
    target_epsilons : tuple of float, default (1.0, 3.0, 8.0)
        The epsilons calibrated for.
    group_sizes : tuple of int, default ()
        The group sizes reported.
    accountants : tuple of str, optional
        The accountants of the table (default: all that apply).
    plot_accountants : tuple of str, optional
        The accountants plotted.
    formats : tuple of str, default ("markdown", "html")
        The formats written (``FORMATS``).
    plots : bool, default True
        Whether to draw plots.
    source : str, default ""
        The config file's path (relative audit paths are resolved against it).
    audit : AuditConfig, optional
        The ``[audit]`` table; ``None``: no audit section.

    Raises
    ------
    ValueError
        The constructor trusts its fields; ``load_config`` and ``from_dict`` validate a file's content and raise
        ``ValueError`` naming the key (``training.batch_size``).
    """

    title: str = "Privacy report"
    description: str = ""
    segments: tuple[Segment, ...] = ()
    events: tuple[tuple[Mechanism, int], ...] = ()
    dataset_size: int | None = None
    batch_size: int | None = None
    sampling: str = "poisson"
    steps_per_epoch: int | None = None
    max_batch_size: int | None = None
    deltas: tuple[float, ...] = _DEFAULT_DELTAS
    target_epsilons: tuple[float, ...] = _DEFAULT_TARGETS
    group_sizes: tuple[int, ...] = ()
    accountants: tuple[str, ...] | None = None
    plot_accountants: tuple[str, ...] | None = None
    formats: tuple[str, ...] = ("markdown", "html")
    plots: bool = True
    source: str = ""
    #: the optional "Audit" section's input (``[audit]``); ``None``: no audit section
    audit: AuditConfig | None = None

    @property
    def is_training(self) -> bool:
        """Whether the config describes a training run (``[training]``) rather than ``[[events]]``."""
        return bool(self.segments)

    @property
    def sampling_scheme(self) -> type[SamplingScheme]:
        """The class of ``training.sampling`` in the registry of ``tightdp.sampling``."""
        return scheme_class(self.sampling)

    @property
    def scheme(self) -> str | None:
        """The registry name of a scheme answered by its own certified function (random allocation,
        shuffling, truncated Poisson, ...); ``None`` for a scheme whose step mechanism the accountants analyse
        themselves (Poisson, fixed batches)."""
        cls = self.sampling_scheme
        return None if cls.any_accountant else cls.name

    def segment_scheme(self, seg: Segment) -> SamplingScheme:
        """The scheme object of one segment (its rate; the config's sizes).

        Parameters
        ----------
        seg : Segment
            A segment of ``segments``.

        Returns
        -------
        SamplingScheme
            The ``training.sampling`` scheme at the segment's rate.

        Raises
        ------
        ValueError
            If the scheme refuses the rate or sizes.
        """
        return self.sampling_scheme.from_options(
            sampling_rate=seg.sampling_rate,
            dataset_size=self.dataset_size,
            batch_size=self.batch_size,
            max_batch_size=self.max_batch_size,
        )

    @property
    def total_steps(self) -> int:
        """The steps of the run (segments) or the sum of the event counts."""
        return sum(s.steps for s in self.segments) if self.segments else sum(c for _, c in self.events)

    def segment_mechanism(self, seg: Segment) -> Mechanism:
        """The step the accountants compose.

        For a scheme with its own certified function (``scheme``) the Poisson-subsampled Gaussian at the same rate:
        the report's accountant table is then "what Poisson accounting says".

        Parameters
        ----------
        seg : Segment
            A segment of ``segments``.

        Returns
        -------
        Mechanism
            One step's mechanism.

        Raises
        ------
        ValueError
            If the scheme refuses the rate or sizes.
        """
        if self.sampling_scheme.any_accountant:
            mech = self.segment_scheme(seg).step_mechanism(noise_multiplier=seg.noise_multiplier)
            if mech is not None:
                return mech
        return PoissonSampled(
            mechanism=Gaussian(noise_multiplier=seg.noise_multiplier), sampling_rate=seg.sampling_rate
        )

    def ledger(self, upto: int | None = None) -> list[tuple[Mechanism, int]]:
        """The composed ``(mechanism, count)`` entries, optionally only the first ``upto`` steps.

        Parameters
        ----------
        upto : int, optional
            Only the first ``upto`` steps of a training run (``None``: all; events are always all).

        Returns
        -------
        list of (Mechanism, int)
            The ledger, segment by segment.

        Raises
        ------
        ValueError
            If the scheme refuses a segment's rate or sizes.
        """
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
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "") -> ReportConfig:
        """Validate a parsed config (the TOML table or JSON object) into a ``ReportConfig``.

        Parameters
        ----------
        data : mapping
            The config's top-level table.
        source : str, default ""
            The file it came from (relative audit paths are resolved against it).

        Returns
        -------
        ReportConfig
            The validated configuration.

        Raises
        ------
        ValueError
            For any unknown key or bad value, naming the key (``training.batch_size``).
        """
        if not isinstance(data, Mapping):
            raise ValueError("config must be a table (TOML) / object (JSON)")
        known = {"title", "description", "training", "events", "privacy", "report", "audit"}
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
        kw["target_epsilons"] = tuple(
            check_real(f"privacy.target_epsilons[{i}]", e, low=0.0)
            for i, e in enumerate(_as_list("target_epsilons", priv.get("target_epsilons", list(_DEFAULT_TARGETS))))
        )
        kw["group_sizes"] = tuple(
            check_count(f"privacy.group_sizes[{i}]", g)
            for i, g in enumerate(_as_list("group_sizes", priv.get("group_sizes", [])))
        )
        rep = _table(data, "report")
        _no_unknown("report", rep, {"accountants", "plot_accountants", "formats", "plots"})
        for key in ("accountants", "plot_accountants"):
            if key in rep:
                accs = tuple(str(a) for a in _as_list(key, rep[key]))
                from ..accountants import ACCOUNTANTS

                for i, a in enumerate(accs):
                    check_choice(f"report.{key}[{i}]", a, sorted(ACCOUNTANTS))
                kw[key] = accs
        if "formats" in rep:
            kw["formats"] = tuple(
                check_choice(f"report.formats[{i}]", f, FORMATS)
                for i, f in enumerate(_as_list("formats", rep["formats"]))
            )
        if "plots" in rep:
            if not isinstance(rep["plots"], bool):
                raise ValueError(f"report.plots must be true or false, got {rep['plots']!r}")
            kw["plots"] = rep["plots"]
        if "audit" in data:
            kw["audit"] = _parse_audit(data["audit"], deltas=kw["deltas"], source=source)
            if kw["audit"].method == "fdp-gdp" and any(s.sampling_rate < 1.0 for s in kw.get("segments", ())):
                raise ValueError(
                    "audit.method 'fdp-gdp' assumes a Gaussian (mu-GDP) trade-off curve and a subsampled "
                    "run's is not one (a correct run could be flagged); use 'fdp-eps-delta' or 'one-run'"
                )
        return cls(title=title, description=description, source=source, **kw)


def _table(data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """``data[key]`` (default empty), which must be a table."""
    t = data.get(key, {})
    if not isinstance(t, Mapping):
        raise ValueError(f"{key} must be a table")
    table: Mapping[str, Any] = t
    return table


def _no_unknown(where: str, table: Mapping[str, Any], known: set[str]) -> None:
    """``ValueError`` for a key of ``table`` outside ``known``."""
    unknown = sorted(set(table) - known)
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")


def _as_list(name: str, v: Any) -> list[Any]:
    """``v`` as a list; it must be a list or tuple."""
    if isinstance(v, (list, tuple)):
        return list(v)
    raise ValueError(f"{name} must be a list, got {v!r}")


def _parse_training(t: Any) -> dict[str, Any]:
    """The ``[training]`` table as ``ReportConfig`` keywords."""
    if not isinstance(t, Mapping):
        raise ValueError("training must be a table")
    _no_unknown(
        "training",
        t,
        {
            "dataset_size",
            "batch_size",
            "sampling_rate",
            "epochs",
            "steps",
            "noise_multiplier",
            "schedule",
            "sampling",
            "max_batch_size",
        },
    )
    cls = scheme_class(t.get("sampling"), argument="training.sampling")
    sampling = cls.name.replace("-", "_")  # the config's spelling
    epoch_based = cls.per_epoch
    max_b = check_count("training.max_batch_size", t["max_batch_size"]) if "max_batch_size" in t else None
    if (max_b is not None) != ("max_batch_size" in cls.options):
        raise ValueError(
            f"training.max_batch_size is required with sampling = {sampling!r} and applies "
            "to schemes with a batch cap only"
        )
    if not cls.any_accountant and "schedule" in t:
        raise ValueError(
            f"training.schedule needs sampling = 'poisson' (sampling = {sampling!r} is accounted "
            "for one constant noise multiplier)"
        )
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
        if epoch_based:  # ceil(N / B) batches an epoch, each record in one of them
            q = 1.0 / per_epoch
    elif "sampling_rate" in t:
        q = check_probability("training.sampling_rate", t["sampling_rate"])
        per_epoch = math.ceil(1.0 / q)
        if epoch_based and abs(per_epoch * q - 1.0) > 1e-9:
            raise ValueError(
                f"training.sampling_rate must be 1/t (t steps per epoch) for sampling = {sampling!r}, "
                f"got {q!r}; or give dataset_size and batch_size"
            )
    else:
        q, per_epoch = None, None
    fixed_batches = "batch_size" in cls.options  # the scheme needs the batch size itself
    if fixed_batches and (n is None or b is None):
        raise ValueError(f"training.sampling = {sampling!r} needs dataset_size and batch_size")
    if q is not None:  # the scheme's own checks (e.g. a batch cap within the data set), under the config's keys
        try:
            cls.from_options(sampling_rate=q, dataset_size=n, batch_size=b, max_batch_size=max_b)
        except ValueError as exc:
            raise ValueError(f"training: {exc}") from None

    def seg(where: str, s: Mapping[str, Any], default_sigma: float | None = None) -> Segment:
        sigma = s.get("noise_multiplier", default_sigma)
        if sigma is None:
            raise ValueError(f"{where}.noise_multiplier is required")
        sigma = check_positive(f"{where}.noise_multiplier", sigma)
        sq, spe = q, per_epoch
        if "sampling_rate" in s or "batch_size" in s:
            if fixed_batches:
                raise ValueError(f"{where}: per-segment sampling needs sampling = 'poisson'")
            if "batch_size" in s:
                if n is None:
                    raise ValueError(f"training.dataset_size is required with {where}.batch_size")
                bs = check_count(f"{where}.batch_size", s["batch_size"])
                sq, spe = bs / n, math.ceil(n / bs)
                if epoch_based:
                    sq = 1.0 / spe
            else:
                sq = check_probability(f"{where}.sampling_rate", s["sampling_rate"])
                spe = math.ceil(1.0 / sq)
        if sq is None or spe is None:
            raise ValueError(f"{where}: give training.batch_size (with dataset_size) or training.sampling_rate")
        if ("epochs" in s) == ("steps" in s):
            raise ValueError(f"{where}: give exactly one of epochs and steps")
        steps = (
            check_count(f"{where}.epochs", s["epochs"]) * spe
            if "epochs" in s
            else check_count(f"{where}.steps", s["steps"])
        )
        if epoch_based and steps % spe:
            raise ValueError(
                f"{where}.steps ({steps}) must be a whole number of epochs of {spe} steps for sampling = {sampling!r}"
            )
        return Segment(sigma, sq, steps)

    if "schedule" in t:
        if "noise_multiplier" in t or "epochs" in t or "steps" in t:
            raise ValueError("training: with a schedule, give noise_multiplier and epochs/steps per segment")
        sched = _as_list("training.schedule", t["schedule"])
        if not sched:
            raise ValueError("training.schedule must not be empty")
        segs: list[Segment] = []
        for i, s in enumerate(sched):
            if not isinstance(s, Mapping):
                raise ValueError(f"training.schedule[{i}] must be a table")
            _no_unknown(
                f"training.schedule[{i}]", s, {"noise_multiplier", "epochs", "steps", "sampling_rate", "batch_size"}
            )
            segs.append(seg(f"training.schedule[{i}]", s))
    else:
        segs = [seg("training", t)]
    return {
        "segments": tuple(segs),
        "dataset_size": n,
        "batch_size": b,
        "sampling": sampling,
        "steps_per_epoch": per_epoch,
        "max_batch_size": max_b,
    }


def _parse_audit(t: Any, *, deltas: tuple[float, ...], source: str) -> AuditConfig:
    """The ``[audit]`` table: ``scores`` (a CSV of ``score,in`` rows, read by ``tightdp.audit.read_scores_csv``),
    ``beta`` (default 0.05), ``method`` (one of ``tightdp.audit.RUN_METHODS``, default ``"one-run"``) and
    ``delta`` (default the first of ``privacy.deltas``)."""
    from ..audit import RUN_METHODS, read_scores_csv

    if not isinstance(t, Mapping):
        raise ValueError("audit must be a table")
    _no_unknown("audit", t, {"scores", "beta", "method", "delta"})
    if "scores" not in t:
        raise ValueError("audit.scores is required: a CSV file of 'score,in' rows (as `tightdp audit` reads)")
    if not isinstance(t["scores"], str) or not t["scores"].strip():
        raise ValueError(f"audit.scores must be a file path, got {t['scores']!r}")
    path = Path(t["scores"])
    if not path.is_absolute() and source:
        path = Path(source).resolve().parent / path
    if not path.is_file():
        raise ValueError(f"audit.scores: no such file {str(path)!r}")
    try:
        scores = read_scores_csv(path)
    except ValueError as exc:
        raise ValueError(f"audit.scores: {exc}") from None
    beta = check_real("audit.beta", t.get("beta", 0.05), low=0.0, high=1.0)  # one minus the confidence, in (0, 1)
    method = check_choice("audit.method", t.get("method", "one-run"), RUN_METHODS)
    delta = check_delta("audit.delta", t["delta"]) if "delta" in t else deltas[0]
    return AuditConfig(
        scores=str(path),
        in_scores=tuple(float(x) for x in scores.in_scores),
        out_scores=tuple(float(x) for x in scores.out_scores),
        beta=beta,
        method=method,
        delta=delta,
    )


def _parse_events(ev: Any) -> tuple[tuple[Mechanism, int], ...]:
    """The ``[[events]]`` array as ``(mechanism, count)`` pairs."""
    items = _as_list("events", ev)
    if not items:
        raise ValueError("events must not be empty")
    out: list[tuple[Mechanism, int]] = []
    for i, e in enumerate(items):
        if not isinstance(e, Mapping) or "mechanism" not in e:
            raise ValueError(f"events[{i}] must be a table with a 'mechanism' table and an optional count")
        _no_unknown(f"events[{i}]", e, {"mechanism", "count"})
        out.append((mechanism_from_dict(dict(e["mechanism"])), check_count(f"events[{i}].count", e.get("count", 1))))
    return tuple(out)


def load_config(path: str | Path) -> ReportConfig:
    """Read a TOML (``.toml``) or JSON config file and validate it.

    Parameters
    ----------
    path : str or Path
        The config file (``.json``: JSON; anything else: TOML).

    Returns
    -------
    ReportConfig
        The validated configuration.

    Raises
    ------
    ValueError
        If the file does not exist or cannot be parsed, or for any unknown key or bad value (naming the key).
    """
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

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
    sampling = "poisson"       # or "without_replacement" (fixed batches, substitute relation), or the
                               # scheme that ran: "random_allocation" (a fresh step every epoch),
                               # "cyclic_allocation" (jax_privacy's balls-in-bins), "shuffle",
                               # "truncated_poisson" (with max_batch_size = ...); any name of
                               # tightdp.sampling, hyphens or underscores

    [privacy]
    deltas = [1e-5, 1e-6, 1e-7]
    target_epsilons = [1.0, 3.0, 8.0]   # calibration hints
    group_sizes = [2, 4]                # optional: group-level epsilon

    [report]
    accountants = ["prv", "rdp"]        # default: every registered accountant
    formats = ["markdown", "html"]      # also written: report.json
    plots = true

    [audit]                             # optional: an "Audit" section
    scores = "canaries.csv"             # rows 'score,in' (tightdp.audit.read_scores_csv); relative to the config
    beta = 0.05                         # one minus the confidence (default 0.05)
    method = "one-run"                  # one of tightdp.audit.RUN_METHODS (default "one-run")
    delta = 1e-5                        # default: the first of privacy.deltas

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

For the schemes answered by their own certified function (``sampling`` = random allocation, cyclic
allocation, shuffle, truncated Poisson; ``tightdp.sampling``) the report leads with **what you ran vs what Poisson accounting says**: the scheme's
certified interval (``tightdp.dpsgd_epsilon(sampling=...)``) against Poisson accounting at the same
noise, rate and steps, with each scheme's caveat (shuffling: the gap no theorem closes). The
accountant table and band are then Poisson accounting's, labelled as such, and the published
epsilon is the scheme's upper bound; calibration hints and group privacy use the scheme.

With an ``[audit]`` table the report adds an **Audit** section: the empirical lower bound on epsilon from
the canary scores against the run's certified interval, and the verdict ("consistent", "too weak",
"violates"; ``tightdp.audit.audit_section``, docs/audit.md). The verdict covers Poisson-sampled runs
(one segment or a schedule); for any other scheme or a list of mechanisms the section says it is not
computed and why.

A progress bar (``rich``, optional) appears on a terminal once the work takes
more than a second; it is silent when stdout is not a terminal.

The package: ``config`` (the file format, ``load_config``), ``compute`` (``build_report``: the
plan of jobs, the certified band, dense curves), ``_jobs`` (each job: an accountant's row or curve, the
scheme against Poisson, the audit), ``hints`` (calibration and group privacy), ``render`` (``Report``:
Markdown, HTML, JSON), ``_sections`` (the tables, formats and references it assembles) and ``plots``
(the figures; matplotlib is imported only there). The report also states what the guarantee covers
(``tightdp.statement.guarantee_paragraphs``) and draws the certified lower f-DP trade-off curve
(``tightdp.tradeoff.tradeoff_lower_curve``).
"""

from .compute import band, build_report
from .config import FORMATS, ReportConfig, Segment, load_config
from .render import REFERENCES, AccountantResult, Report

__all__ = [
    "ReportConfig",
    "Segment",
    "Report",
    "AccountantResult",
    "load_config",
    "build_report",
    "band",
    "FORMATS",
    "REFERENCES",
]

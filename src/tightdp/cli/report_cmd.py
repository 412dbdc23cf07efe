"""``tightdp report CONFIG``: a self-contained privacy report (Markdown / HTML / JSON + PNG plots).

    tightdp report examples/report_config.toml --out report/
    tightdp report run.json --out report/ --format html --no-plots

The config format is described in ``tightdp.report``. A progress bar appears
on a terminal once the work takes over a second (needs ``rich``); it is
silent when stdout is not a terminal.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..report import Report, ReportConfig


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from ..report import FORMATS

    p = subparsers.add_parser(
        "report",
        help="write a privacy report for a training run or a list of mechanisms",
        description="Write a privacy report (epsilon for several deltas from every accountant, "
        "the certified band, calibration hints, group privacy, plots).",
    )
    p.add_argument("config", help="TOML or JSON file describing the run (see tightdp.report)")
    p.add_argument("--out", default="privacy_report", help="output directory (default: ./privacy_report)")
    p.add_argument(
        "--format",
        action="append",
        choices=FORMATS,
        dest="formats",
        help="output format (repeatable; default: the config's, else markdown and html; report.json is always written)",
    )
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--no-progress", action="store_true", help="never show a progress bar")
    p.add_argument(
        "--json",
        action="store_true",
        help="print a JSON summary (the certified band and the files written) instead of text",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="worker processes for the independent computations (default: CPU count, at most 4)",
    )
    p.set_defaults(run=run)


def _check_out_dir(out: str) -> None:
    """Create ``--out`` (or refuse at once, in one line, when it cannot be created or written)."""
    from pathlib import Path

    p = Path(out)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"--out: cannot create directory {out!r}: {exc.strerror or exc}") from None
    if not os.access(p, os.W_OK):
        raise ValueError(f"--out: cannot write into directory {out!r} (permission denied)")


def run(args: argparse.Namespace) -> int:
    import dataclasses

    from ..report import build_report, load_config

    if args.jobs is not None and args.jobs < 1:
        raise ValueError(f"--jobs must be >= 1, got {args.jobs}")
    config = load_config(args.config)
    _check_out_dir(args.out)  # before the computation, not after it
    if args.no_plots:
        config = dataclasses.replace(config, plots=False)
    jobs = args.jobs if args.jobs is not None else max(1, min(4, os.cpu_count() or 1))
    report = build_report(config, progress=False if args.no_progress or args.json else None, workers=jobs)
    written = report.write(args.out, args.formats)
    if args.json:
        _print_json(config, report, written)
    else:
        _print_summary(config, report, written)
    sys.stdout.flush()
    missing = [d for d in config.deltas if report.band[d][1] is None]
    if missing:
        sys.stderr.write(
            f"tightdp: cannot answer: no certified upper bound on epsilon at delta = "
            f"{', '.join(f'{d:g}' for d in missing)} (see the report's notes)\n"
        )
        return 1
    return 0


def _print_json(config: ReportConfig, report: Report, written: dict[str, Path]) -> None:
    """The shared JSON shape: ``epsilon`` {lower, estimate, upper} (the certified band at the first delta)."""
    import json

    d0 = config.deltas[0]
    lo, up = report.band[d0]
    out = {
        "epsilon": {"lower": lo, "estimate": None, "upper": up},
        "delta": d0,
        "kind": "bound",
        "accountant": "certified band (every certified accountant)",
        "certified_band": {repr(d): {"lower": a, "upper": b} for d, (a, b) in report.band.items()},
        "files": {k: str(v) for k, v in written.items()},
        "title": config.title,
        "seconds": report.seconds,
        "audit": report.audit or None,
    }
    json.dump(out, sys.stdout, indent=2)
    sys.stdout.write("\n")


def _print_summary(config: ReportConfig, report: Report, written: dict[str, Path]) -> None:
    """The human summary: the published epsilon at each delta, the audit's verdict and the files written."""
    from ..report._sections import _f

    print(f"privacy report for {config.title!r} in {report.seconds:.1f} s:")
    for d in config.deltas:
        lo, up = report.band[d]
        if up is not None:
            interval = f" (certified interval [{_f(lo)}, {_f(up)}])" if lo is not None else ""
            print(f"  delta = {d:g}: epsilon <= {_f(up)}{interval}")
    if report.audit:
        a = report.audit
        print(f"  audit: {a['message'] if a.get('computed') else a['note']}")
    for kind, path in written.items():
        print(f"  {kind}: {path}")

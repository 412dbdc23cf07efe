"""Benchmark: calibration and the privacy report (the `make demo` job).

    .venv/bin/python benchmarks/bench_calibration_report.py [--out benchmarks/results/calibration_report.json]

Prints one line per measurement: wall seconds, CPU seconds of this process and
its workers, and the answer; writes the results file (schema: benchmarks/README.md).
Goals: each calibration a few seconds; the demo report (examples/report_config.toml)
well under a minute.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path

from tightdp.calibration import calibrate_noise, calibrate_steps
from tightdp.report import build_report, load_config

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
ROWS: list[dict] = []


def cpu() -> float:
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def timed(label, fn):
    w, c = time.perf_counter(), cpu()
    out = fn()
    wall, used = time.perf_counter() - w, cpu() - c
    print(f"{label:<58} wall {wall:6.2f} s  cpu {used:6.2f} s  {out}", flush=True)
    ROWS.append({"setting": label, "tightdp": {"answer": out, "wall s": round(wall, 2), "CPU s": round(used, 2)}})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "calibration_report.json"))
    args = ap.parse_args(argv)
    load = os.getloadavg()[0]
    date = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    print(f"load average {load:.1f} on {os.cpu_count()} CPUs; python {sys.version.split()[0]}")
    for t in (0.05, 3.0, 80.0):
        timed(
            f"calibrate_noise target={t:g} q=0.01 steps=1000",
            lambda: (lambda c: f"sigma={c.noise_multiplier:.5g} eps<={c.epsilon.upper:.5g} evals={c.evaluations}")(
                calibrate_noise(target_epsilon=t, delta=1e-5, sampling_rate=0.01, steps=1000)
            ),
        )
    for t in (1.0, 3.0, 8.0):
        timed(
            f"calibrate_noise target={t:g} CIFAR q=256/50000 steps=19600",
            lambda: (lambda c: f"sigma={c.noise_multiplier:.5g} eps<={c.epsilon.upper:.5g} evals={c.evaluations}")(
                calibrate_noise(target_epsilon=t, delta=1e-5, sampling_rate=256 / 50000, steps=19600)
            ),
        )
    timed(
        "calibrate_steps target=3 CIFAR sigma=1.1 (whole epochs)",
        lambda: (lambda c: f"steps={c.steps} eps<={c.epsilon.upper:.5g} evals={c.evaluations}")(
            calibrate_steps(
                target_epsilon=3.0, delta=1e-5, noise_multiplier=1.1, sampling_rate=256 / 50000, multiple_of=196
            )
        ),
    )
    cfg = load_config(ROOT / "examples" / "report_config.toml")
    for workers in (1, 2):
        with tempfile.TemporaryDirectory() as tmp:
            timed(
                f"demo report examples/report_config.toml workers={workers}",
                lambda: (lambda r: (r.write(tmp), f"eps<={r.band[1e-5][1]:.4g} at 1e-5")[1])(
                    build_report(cfg, progress=False, workers=workers)
                ),
            )
    import results_schema

    doc = {
        "title": "Calibration and the privacy report (make demo)",
        "what": (
            "Wall and CPU seconds (this process and its workers) of `calibrate_noise` / `calibrate_steps` at the "
            "default accuracy, and of the demo privacy report (examples/report_config.toml) with 1 and 2 workers. "
            "Every calibration is certified (the answer's upper bound is at most the target). No peer calibrates "
            "on a certified bound."
        ),
        "command": "python benchmarks/bench_calibration_report.py",
        "machine": f"{os.cpu_count()} cores, {platform.machine()}, Python {platform.python_version()}, "
        f"load average {load:.1f} at the start",
        "date": date,
        "rows": [{**r, "peers": {}} for r in ROWS],
        "notes": [],
    }
    print("wrote", results_schema.write("calibration_report", {"rows": ROWS}, args.out, doc=doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

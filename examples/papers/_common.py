"""Shared plumbing of the paper reproductions: arguments, the Markdown table, plots, JSON.

Every script writes, into its output directory (default ``examples/papers/out/``):

* ``pNNN_<name>.md``: a table ``quantity | paper value | tightdp value | certified interval | note``
  (the note says where and why a number differs from the paper);
* ``pNNN_<name>.json``: the same rows, machine-readable (the tests read it);
* one or more PNG figures.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_OUT = Path(__file__).resolve().parent / "out"


def parse_args(doc: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output directory (default: %(default)s)")
    p.add_argument("--quick", action="store_true", help="the pinned numbers only, smaller figures (for tests)")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG figures")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    return args


def fmt(x: Any, digits: int = 6) -> str:
    if x is None:
        return "—"
    if isinstance(x, str):
        return x
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, int):
        return str(x)
    x = float(x)
    if math.isinf(x):
        return "∞"
    return f"{x:.{digits}g}"


def interval(b) -> str:
    """``[lower, upper]`` of a ``Bounds``, or a dash for an approximation without one."""
    if b is None:
        return "—"
    if b.upper is None or b.kind != "bound":
        return "— (approximation)"
    if b.lower is None:
        return f"[—, {fmt(float(b.upper))}] (upper bound only)"
    return f"[{fmt(float(b.lower))}, {fmt(float(b.upper))}]"


@dataclass
class Row:
    quantity: str
    paper: Any
    tightdp: Any
    certified: str = "—"
    note: str = ""
    key: str = ""  # stable name the tests look up
    extra: dict = field(default_factory=dict)


class Report:
    def __init__(self, name: str, title: str, source: str, out: Path):
        self.name, self.title, self.source, self.out = name, title, source, out
        self.rows: list[Row] = []
        self.figures: list[str] = []
        self.text: list[str] = []
        self.t0 = time.perf_counter()

    def row(self, *args, **kw) -> Row:
        r = Row(*args, **kw)
        self.rows.append(r)
        return r

    def say(self, line: str) -> None:
        self.text.append(line)

    def figure(self, fig, filename: str, caption: str) -> None:
        path = self.out / filename
        fig.savefig(path, dpi=110, bbox_inches="tight")
        self.figures.append(f"![{caption}]({filename})\n\n*{caption}*")

    def value(self, key: str) -> Any:
        return next(r.tightdp for r in self.rows if r.key == key)

    def write(self) -> Path:
        seconds = time.perf_counter() - self.t0
        lines = [
            f"# {self.title}",
            "",
            f"Paper: {self.source}",
            "",
            "| quantity | paper value | tightdp value | certified interval | note |",
            "| --- | --- | --- | --- | --- |",
        ]
        for r in self.rows:
            lines.append(f"| {r.quantity} | {fmt(r.paper, 12)} | {fmt(r.tightdp, 12)} | {r.certified} | {r.note} |")
        lines += [""] + [f"{t}\n" for t in self.text] + self.figures + ["", f"Computed in {seconds:.1f} s."]
        md = self.out / f"{self.name}.md"
        md.write_text("\n".join(lines) + "\n")

        def clean(v):
            if isinstance(v, float) and not math.isfinite(v):
                return None
            return v

        data = {
            "name": self.name,
            "seconds": seconds,
            "rows": [{k: clean(v) for k, v in asdict(r).items()} for r in self.rows],
        }
        (self.out / f"{self.name}.json").write_text(json.dumps(data, indent=1, default=float))
        print(md.read_text())
        return md


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt

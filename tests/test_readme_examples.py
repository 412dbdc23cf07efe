"""The copy-paste examples of the README's user sections run as written.

Every fenced ``python`` block under the headings below is extracted from
README.md and executed in a fresh namespace; the blocks carry their own
asserts. The Opacus block needs PyTorch and Opacus (skipped without them).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
SECTIONS = {
    "## User guide": (),
    "## Per-example privacy": (),
    "## Group privacy": (),
    "## For Opacus users": ("torch", "opacus"),
    "## For dp-accounting / JAX users": ("dp_accounting",),
    "## For analysts (calibration and reports)": (),
}


def python_blocks(heading: str) -> list[str]:
    text = README.read_text(encoding="utf-8")
    start = text.find("\n" + heading + "\n")
    assert start >= 0, f"README.md has no section {heading!r}"
    body = text[start + len(heading) + 2:]
    nxt = re.search(r"^## ", body, flags=re.M)
    body = body[: nxt.start()] if nxt else body
    return re.findall(r"^```python\n(.*?)^```", body, flags=re.M | re.S)


CASES = [(h, i) for h in SECTIONS for i in range(len(python_blocks(h)))]


def test_every_section_has_an_example():
    for heading in SECTIONS:
        assert python_blocks(heading), f"{heading} has no python example"


@pytest.mark.parametrize("heading, index", CASES, ids=[f"{h[3:]}-{i}" for h, i in CASES])
def test_readme_example_runs(heading, index, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # examples that write files (ledgers, reports) write them here
    for module in SECTIONS[heading]:
        pytest.importorskip(module)
    code = python_blocks(heading)[index]
    exec(compile(code, f"README.md[{heading}][{index}]", "exec"), {"__name__": "__readme__"})

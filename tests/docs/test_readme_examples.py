"""The copy-paste examples of the README's user sections run as written.

Every fenced ``python`` block under the headings below is extracted from
README.md and executed in a fresh namespace; the blocks carry their own
asserts. The Opacus block needs PyTorch and Opacus (skipped without them).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
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
    body = text[start + len(heading) + 2 :]
    nxt = re.search(r"^## ", body, flags=re.M)
    body = body[: nxt.start()] if nxt else body
    return re.findall(r"^```python\n(.*?)^```", body, flags=re.M | re.S)


#: what a section's examples need, as markers: PyTorch / Opacus (``torch``), a peer library (``peers``)
NEEDS = {"torch": pytest.mark.torch, "opacus": pytest.mark.torch, "dp_accounting": pytest.mark.peers}
#: sections whose examples take a few seconds (per-example accounting of a whole run, a calibration and a report)
SLOW_SECTIONS = ("## Per-example privacy", "## For analysts (calibration and reports)")
CASES = [
    pytest.param(
        h,
        i,
        marks=list({NEEDS[m].name: NEEDS[m] for m in SECTIONS[h]}.values())
        + ([pytest.mark.slow] if h in SLOW_SECTIONS else []),
        id=f"{h[3:]}-{i}",
    )
    for h in SECTIONS
    for i in range(len(python_blocks(h)))
]


def test_every_section_has_an_example():
    for heading in SECTIONS:
        assert python_blocks(heading), f"{heading} has no python example"


@pytest.mark.parametrize("heading, index", CASES)
def test_readme_example_runs(heading, index, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # examples that write files (ledgers, reports) write them here
    for module in SECTIONS[heading]:
        pytest.importorskip(module)
    code = python_blocks(heading)[index]
    exec(compile(code, f"README.md[{heading}][{index}]", "exec"), {"__name__": "__readme__"})


# ----------------------------------------------------------------- command-line examples
#: sections whose ``tightdp ...`` command lines (fenced blocks without a language) run as written
CLI_SECTIONS = (
    "### Command line",
    "## Choosing an accountant (RDP, GDP, Edgeworth)",
    "## For analysts (calibration and reports)",
)
#: commands that take over ~10 s on two cores (the Fourier accountant, plots over many step counts)
_SLOW = ("--accountant fourier", "--plot", "tightdp report")


def cli_commands(heading: str) -> list[str]:
    text = README.read_text(encoding="utf-8")
    start = text.find("\n" + heading + "\n")
    assert start >= 0, f"README.md has no section {heading!r}"
    body = text[start + len(heading) + 2 :]
    nxt = re.search(r"^#{2,3} ", body, flags=re.M)
    body = body[: nxt.start()] if nxt else body
    blocks, current, lang = [], None, None
    for line in body.splitlines(keepends=True):
        if line.startswith("```"):
            if current is None:
                current, lang = [], line[3:].strip()
            else:
                if not lang:
                    blocks.append("".join(current))
                current = None
            continue
        if current is not None:
            current.append(line)
    commands = []
    for block in blocks:
        joined = re.sub(r"\\\n\s*", "", block)
        for line in joined.splitlines():
            line = line.split("  #")[0].strip()
            if line.startswith("tightdp "):
                commands.append(line)
    return commands


CLI_CASES = [c for h in CLI_SECTIONS for c in cli_commands(h)]


def test_cli_sections_have_commands():
    for heading in CLI_SECTIONS:
        assert cli_commands(heading), f"{heading} has no tightdp command"


@pytest.mark.parametrize(
    "command", [pytest.param(c, marks=pytest.mark.slow) if any(s in c for s in _SLOW) else c for c in CLI_CASES]
)
def test_readme_command_runs(command, tmp_path, monkeypatch, capsys):
    import shlex

    from tightdp.cli import main

    repo = README.parent
    monkeypatch.chdir(tmp_path)  # commands that write files (plots, reports) write them here
    argv = [a.replace("examples/", f"{repo}/examples/") for a in shlex.split(command)[1:]]
    try:
        code = main(argv)
    except SystemExit as exc:  # --version
        code = exc.code
    out = capsys.readouterr()
    assert code == 0, out.err
    assert out.out

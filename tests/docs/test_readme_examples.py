"""The examples of the README and of the documentation site run as written.

Every fenced ``python`` block of README.md is executed in a fresh namespace (the blocks carry their own
asserts); the site's ``python`` blocks run when the site is built (tests/docs/test_docs_site.py checks each carries
``exec="on"`` or is listed with the test that runs it). Every ``tightdp ...`` command line in a fenced block
without a language, in README.md and in the site's pages, runs through ``tightdp.cli.main`` and exits 0.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]


def python_blocks(path: Path = README) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", path.read_text(encoding="utf-8"), flags=re.M | re.S)


def cli_commands(path: Path) -> list[str]:
    """The ``tightdp ...`` lines of the fenced blocks without a language (continuation lines joined)."""
    blocks, current, lang = [], None, ""
    for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
        if line.lstrip().startswith("```"):
            if current is None:
                current, lang = [], line.strip()[3:].strip()
            else:
                if not lang:
                    blocks.append("".join(current))
                current = None
        elif current is not None:
            current.append(line)
    commands = []
    for block in blocks:
        for line in re.sub(r"\\\n\s*", "", block).splitlines():
            line = line.split("  #")[0].strip()
            if line.startswith("tightdp "):
                commands.append(line)
    return commands


#: each distinct command once, with the first page that shows it (the report and calibration examples recur)
CASES: list[tuple[Path, str]] = []
for _page in PAGES:
    for _command in cli_commands(_page):
        if all(_command != c for _, c in CASES):
            CASES.append((_page, _command))
#: commands that take over ~10 s on two cores (the Fourier accountant, plots over many step counts, reports)
_SLOW = ("--accountant fourier", "--plot", "tightdp report", "tightdp compare")


def test_the_readme_has_an_example_and_the_pages_have_commands():
    assert python_blocks(README)
    assert len(cli_commands(README)) == 3
    assert len(CASES) >= 20


@pytest.mark.parametrize("index", range(len(python_blocks(README))))
def test_readme_example_runs(index, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    code = python_blocks(README)[index]
    exec(compile(code, f"README.md[{index}]", "exec"), {"__name__": "__readme__"})


@pytest.mark.parametrize(
    "page, command",
    [pytest.param(p, c, marks=pytest.mark.slow) if any(s in c for s in _SLOW) else (p, c) for p, c in CASES],
    ids=[f"{p.relative_to(ROOT).as_posix()}:{c[8:60]}" for p, c in CASES],
)
def test_command_runs(page, command, tmp_path, monkeypatch, capsys):
    from tightdp.cli import main

    monkeypatch.chdir(tmp_path)  # commands that write files (plots, reports) write them here
    argv = [a.replace("examples/", f"{ROOT}/examples/") for a in shlex.split(command)[1:]]
    for name in (a for a in argv if a.endswith(".csv") and not Path(a).exists()):
        # the audit examples read a CSV of canary scores (score,in): a small simulated one
        import numpy as np

        rng = np.random.default_rng(0)
        rows = [f"{s},1" for s in rng.normal(0.5, 1, 200)] + [f"{s},0" for s in rng.normal(0, 1, 200)]
        (tmp_path / name).write_text("score,in\n" + "\n".join(rows) + "\n")
    try:
        code = main(argv)
    except SystemExit as exc:  # --version
        code = exc.code
    out = capsys.readouterr()
    assert code == 0, out.err
    assert out.out

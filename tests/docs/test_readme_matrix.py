"""The correlated-noise guide's command line runs as written and prints the interval of its Python example
(the page's Python blocks run when the site is built)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from test_readme_examples import cli_commands

PAGE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "matrix.md"
COMMANDS = cli_commands(PAGE)


def test_the_page_has_a_python_example_and_a_command():
    assert COMMANDS and all(c.startswith("tightdp matrix") for c in COMMANDS)
    text = PAGE.read_text(encoding="utf-8")
    assert "matrix_epsilon(" in text and "calibrate_matrix_noise(" in text


@pytest.mark.parametrize("command", COMMANDS)
def test_matrix_command_runs(command, capsys):
    from tightdp.cli import main

    assert main(shlex.split(command)[1:]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "banded Toeplitz, 3 bands" in out and "9.18641" in out

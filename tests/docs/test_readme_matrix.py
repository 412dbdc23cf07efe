"""The README's "Correlated noise" command lines run as written (its python block runs with the "User guide"
section in tests/docs/test_readme_examples.py)."""

from __future__ import annotations

import shlex

import pytest
from test_readme_examples import cli_commands, python_blocks

HEADING = "### Correlated noise (DP-FTRL, BandMF, BLT)"
COMMANDS = cli_commands(HEADING)


def test_the_section_has_a_python_example_and_a_command():
    assert COMMANDS and all(c.startswith("tightdp matrix") for c in COMMANDS)
    assert any("matrix_epsilon" in b for b in python_blocks("## User guide"))


@pytest.mark.parametrize("command", COMMANDS)
def test_readme_matrix_command_runs(command, capsys):
    from tightdp.cli import main

    assert main(shlex.split(command)[1:]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "banded Toeplitz, 3 bands" in out and "9.18641" in out

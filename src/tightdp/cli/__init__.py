"""The ``tightdp`` command line. Each subcommand lives in its own module ``tightdp.cli.<name>_cmd``
with ``register(subparsers)`` (adding a parser with ``set_defaults(run=run)``) and ``run(args) -> int``.

Exit codes: 0 success; 1 an answer that cannot be given (unreachable target,
numerics that cannot certify); 2 bad input (one line on stderr naming the
argument, no traceback).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from ..errors import TightDPError

COMMANDS = ("epsilon", "delta", "compare", "group", "calibrate", "report")


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error message and exit code 2."""

    def error(self, message: str):  # type: ignore[override]
        sys.stderr.write(f"tightdp: error: {message}\n")
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tightdp", description="Tight differential-privacy accounting with certified bounds.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"tightdp.cli.{name}_cmd")
        except ModuleNotFoundError as exc:  # a subcommand whose module is not present in this build
            if exc.name == f"tightdp.cli.{name}_cmd":
                continue
            raise
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except ValueError as exc:
        sys.stderr.write(f"tightdp: error: {exc}\n")
        return 2
    except TightDPError as exc:
        sys.stderr.write(f"tightdp: cannot answer: {exc}\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write("tightdp: interrupted\n")
        return 130


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

"""The ``tightdp`` command line. Each subcommand module ``tightdp.cli.<name>_cmd`` has
``register(subparsers)`` (adding parsers with ``set_defaults(run=run)``) and ``run(args) -> int``;
``query_cmd`` registers both ``epsilon`` and ``delta``.

Exit codes: 0 success; 1 an answer that cannot be given (unreachable target,
numerics that cannot certify: an infinite or missing upper bound); 2 bad input
or a file that cannot be read or written (one line on stderr naming the
option, no traceback).
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
from typing import NoReturn

from ..errors import TightDPError

COMMANDS = ("epsilon", "delta", "statement", "compare", "group", "calibrate", "report", "tradeoff", "audit", "matrix")
#: the module registering each command (epsilon and delta share one)
MODULES = ("query", "statement", "compare", "group", "calibrate", "report", "tradeoff", "audit", "matrix")

#: Shown at the end of each subcommand's --help (a command's own epilog takes precedence).
EXAMPLES = {
    "epsilon": [
        "tightdp epsilon --noise-multiplier 1.1 --dataset-size 50000 --batch-size 256 --epochs 100 --delta 1e-5",
        "tightdp epsilon --noise-multiplier 1.0 --sampling-rate 0.01 --steps 1000 --delta 1e-5 --json",
    ],
    "delta": [
        "tightdp delta --epsilon 1 --noise-multiplier 1.5 --sampling-rate 0.01 --steps 10000 "
        "--relation remove --accountant fourier"
    ],
    "compare": [
        "tightdp compare --noise-multiplier 1.1 --sampling-rate 0.00512 --steps 19600 --delta 1e-5",
        "tightdp compare --noise-multiplier 0.8 --sampling-rate 0.001 --steps 2000 --delta 1e-7 "
        "--accountants connect-dots,rdp,gdp --plot compare.png",
    ],
    "group": [
        "tightdp group --noise-multiplier 1 --sampling-rate 0.01 --steps 2000 --delta 1e-6 --group-size 9",
        "tightdp group --noise-multiplier 2 --steps 2000 --delta 1e-6 --group-size 4 --sampling fixed-batch "
        "--dataset-size 50000 --batch-size 500 --json",
    ],
    "calibrate": [
        "tightdp calibrate --target-epsilon 3 --delta 1e-5 --sampling-rate 0.01 --steps 1000",
        "tightdp calibrate --solve steps --noise-multiplier 1.1 --target-epsilon 8 --delta 1e-5 "
        "--sampling-rate 0.005 --json",
    ],
    "report": [
        "tightdp report examples/report_config.toml --out demo-report",
        "tightdp report run.json --out report/ --format html --no-plots --json",
    ],
    "tradeoff": [
        "tightdp tradeoff --noise-multiplier 1.0 --sampling-rate 0.01 --steps 1000 --fpr 0.01,0.001",
        "tightdp tradeoff --noise-multiplier 2.0 --sampling-rate 1 --steps 9 --alphas 0.001,0.1 --json",
    ],
    "audit": [
        "tightdp audit scores.csv --delta 1e-5",
        "tightdp audit scores.csv --delta 1e-5 --method fdp-eps-delta --noise-multiplier 1.0 "
        "--sampling-rate 0.1 --steps 100 --json",
    ],
    "matrix": [
        "tightdp matrix --strategy banded --c-col 1,0.5,0.25 --sampler cyclic-poisson --sampling-rate 0.1 "
        "--noise-multiplier 1.0 --steps 300 --delta 1e-5",
        "tightdp matrix --strategy tree --participations 2 --min-sep 32 --noise-multiplier 3 --steps 64 "
        "--delta 1e-5 --json",
        "tightdp matrix --strategy-file strategy.json --sampler balls-in-bins --cycle-length 8 "
        "--target-epsilon 8 --steps 64 --delta 1e-6",
    ],
}

_NEGATIVE_NUMBER = re.compile(r"^-(\d|\.\d|inf|nan)", re.IGNORECASE)


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error message and exit code 2."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"tightdp: error: {message}\n")
        raise SystemExit(2)


def _version() -> str:
    from .._version import __version__

    return __version__


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tightdp", description="Tight differential-privacy accounting with certified bounds.")
    parser.add_argument("--version", action="version", version=f"tightdp {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in MODULES:
        try:
            module = importlib.import_module(f"tightdp.cli.{name}_cmd")
        except ModuleNotFoundError as exc:  # a subcommand whose module is not present in this build
            if exc.name == f"tightdp.cli.{name}_cmd":
                continue
            raise
        module.register(sub)
    for name, sub_parser in sub.choices.items():
        if name in EXAMPLES and not sub_parser.epilog:
            sub_parser.epilog = "examples:\n" + "\n".join(f"  {line}" for line in EXAMPLES[name])
            sub_parser.formatter_class = argparse.RawDescriptionHelpFormatter
    return parser


def join_negative_values(argv: list[str]) -> list[str]:
    """``--opt -1e-5`` -> ``--opt=-1e-5``: argparse would take ``-1e-5`` for an option and say
    "expected one argument"; joined, the value reaches the validation, whose message names the option."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        tok = argv[i]
        if (
            tok.startswith("--")
            and "=" not in tok
            and len(tok) > 2
            and i + 1 < len(argv)
            and _NEGATIVE_NUMBER.match(argv[i + 1])
        ):
            out.append(f"{tok}={argv[i + 1]}")
            i += 2
            continue
        out.append(tok)
        i += 1
    return out


def _option_names(parser: argparse.ArgumentParser, command: str | None) -> dict[str, str]:
    """``{python name: --option}`` for the subcommand's options (``target_epsilon`` -> ``--target-epsilon``)."""
    names: dict[str, str] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            for a in action.choices[command]._actions:
                longs = [o for o in a.option_strings if o.startswith("--")]
                if longs:
                    names[a.dest] = longs[0]
    return names


def name_options(message: str, names: dict[str, str]) -> str:
    """Replace API argument names in ``message`` by the command-line options the user typed."""
    for dest, opt in sorted(names.items(), key=lambda kv: -len(kv[0])):
        if "_" in dest:
            message = re.sub(rf"(?<![\w-]){re.escape(dest)}\b", opt, message)
        elif message.startswith(dest + " "):
            message = opt + message[len(dest) :]
    return message


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = join_negative_values(list(sys.argv[1:] if argv is None else argv))
    args = parser.parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except BrokenPipeError:  # the reader went away (``tightdp ... | head``): stop quietly, as Unix tools do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's final flush does not fail again
        return 0
    except OSError as exc:  # a file that cannot be read or written: say which, no traceback
        where = f" {exc.filename!s}" if getattr(exc, "filename", None) else ""
        sys.stderr.write(f"tightdp: error: cannot access{where}: {exc.strerror or exc}\n")
        return 2
    except ValueError as exc:
        message = " ".join(str(exc).split())  # one line
        sys.stderr.write(f"tightdp: error: {name_options(message, _option_names(parser, args.command))}\n")
        return 2
    except TightDPError as exc:
        message = " ".join(str(exc).split())
        sys.stderr.write(f"tightdp: cannot answer: {message}\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write("tightdp: interrupted\n")
        return 130


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

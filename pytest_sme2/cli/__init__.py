"""``pytest-sme2``: the library's commands outside pytest.

    pytest-sme2 analyze ETDUMP [--etrecord F] [--warmup N] [--xnntrace LOG] [--kernel-trace CSV]
                        [--kernel-sample CSV]
                        [--device-sme2 yes|no|unknown | --device-facts JSON]
                        [--json OUT] [--csv-dir DIR]
    pytest-sme2 compare BASE.etdump CANDIDATE.etdump [--etrecord F] [--name1 A --name2 B]
                        [--warmup N] [--json J] [--md M]
    pytest-sme2 export MODEL [--dtype DTYPE] [--out DIR] [--cache-dir DIR] [--force]
    pytest-sme2 run PTE --runner {python|native|PATH}[,label=value...] [--device SPEC]
                    [--threads N] [--runs N] [--warmup N] --etdump OUT [--kernel-trace CSV]
                    [--kernel-sample CSV]
    pytest-sme2 report RESULTS.json [--out DIR] [--no-charts]
    pytest-sme2 gate RESULTS.json --baseline-dir DIR [--fail-on-regression PCT]
                     [--allow-foreign-baseline] [--categories LIST]
    pytest-sme2 aa MODEL [--dtype D] [--threads N] [--runner R] [--device SPEC]
                   [--judgements N] [--threshold PCT] [--max-pairs N] [--budget S] [--json F]
    pytest-sme2 setup qemu|history [--dry-run]
    pytest-sme2 history import|report ...
    pytest-sme2 bisect [--setup CMD] [--improvement] [--resume] [--json F] GOOD BAD [PYTEST_ARGS]
    pytest-sme2 fake-phone [--no-sme2] [--cpu CPU]

User errors print one line on stderr and exit with status 2; no traceback.
"""

from __future__ import annotations

import argparse
import sys

from pytest_sme2._util.text import plain
from pytest_sme2.cli import (aa, analyze, bisect, compare, export, fake_phone, gate, history,
                             report, run, setup)
from pytest_sme2.errors import Sme2Error

# One function per subcommand, each adding its parser; in the order --help lists them.
SUBCOMMANDS = (analyze.add_parser, compare.add_parser, export.add_parser, run.add_parser,
               report.add_parser, gate.add_parser, aa.add_parser, setup.add_parser,
               history.add_parser, bisect.add_parser, fake_phone.add_parser)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pytest-sme2", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for add in SUBCOMMANDS:
        add(sub)
    _plain_help(parser)
    return parser


def _plain_help(parser: argparse.ArgumentParser) -> None:
    """Every help text of ``parser`` and its subcommands without reST markup: many are
    docstrings, and a terminal would show their ``literals`` as they are."""
    parser.description = plain(parser.description) if parser.description else None
    parser.epilog = plain(parser.epilog) if parser.epilog else None
    for action in parser._actions:
        if isinstance(action.help, str):
            action.help = plain(action.help)
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                choice.help = plain(choice.help) if choice.help else choice.help
            for subparser in action.choices.values():
                _plain_help(subparser)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if (getattr(args, "warmup", None) or 0) < 0:     # None: the ETDump's record says
        print("pytest-sme2: --warmup must be 0 or more", file=sys.stderr)
        return 2
    try:
        return args.func(args)
    except Sme2Error as e:
        print(f"pytest-sme2: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:       # a command may say what it kept (bisect: --resume)
        print(f"pytest-sme2: interrupted{'; ' + str(e) if str(e) else ''}", file=sys.stderr)
        return 130

"""``pytest-sme2 bisect GOOD BAD [pytest args ...]``: the commit that made a benchmark slower
(or, with --improvement, faster), found by the gate's paired rule; see docs/bisect.md.

Run from the root of the git repository; bisect's own options come before GOOD, everything
after BAD is the pytest selection, as you would pass it to pytest."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pytest_sme2._util.fsutil import atomic_write_text
from pytest_sme2.errors import Sme2Error
from pytest_sme2.gate.decide import PairBudget
from pytest_sme2.gate.policy import (DEFAULT_INSTRUCTIONS_PCT, DEFAULT_MAX_PAIRS,
                                     DEFAULT_PRECISION_BUDGET_S, DEFAULT_THRESHOLD_PCT)
from pytest_sme2.measure.options import FLAGS, OPTIONS
from pytest_sme2.measure.settings import BenchSettings
from pytest_sme2.runners.spec import parse_runner_spec


def runner_specs(pytest_args: list[str]) -> dict[str, str]:
    """``--runner NAME=SPEC`` values in the pytest arguments, by runner name."""
    out: dict[str, str] = {}
    for i, arg in enumerate(pytest_args):
        value = pytest_args[i + 1] if arg == "--runner" and i + 1 < len(pytest_args) else \
            arg.split("=", 1)[1] if arg.startswith("--runner=") else None
        if value:
            out[parse_runner_spec(value).name] = value
    return out


def split_misplaced(pytest_args: list[str], own: dict[str, bool]
                    ) -> tuple[list[str], list[str]]:
    """(bisect's own options among the arguments after BAD, with their values; the rest).
    ``own``: bisect's options that pytest does not have, and whether each takes a value. After
    BAD every argument is pytest's: ``--json b.json`` there reaches pytest, which stops with a
    usage error at every commit."""
    found: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(pytest_args):
        arg = pytest_args[i]
        takes = own.get(arg.split("=", 1)[0])
        if takes is None:
            rest.append(arg)
        else:
            found.append(arg)
            if takes and "=" not in arg and i + 1 < len(pytest_args):
                i += 1
                found.append(pytest_args[i])
        i += 1
    return found, rest


def _own_options(parser: argparse.ArgumentParser) -> dict[str, bool]:
    """Bisect's options that pytest (with this plugin) does not have too, and whether each
    takes a value (``--runs`` and ``--warmup`` are both bisect's and the plugin's: after BAD
    they are the plugin's)."""
    pytest_flags = {"--" + dest.replace("_", "-") for dest in (*OPTIONS, *FLAGS)}
    return {flag: action.nargs != 0 for action in parser._actions
            for flag in action.option_strings
            if flag.startswith("--") and flag not in pytest_flags and flag != "--help"}


def _bisect(args: argparse.Namespace) -> int:
    from pytest_sme2.bisect import measures, report, run  # measure.block, pandas: not at --help

    pytest_args = list(args.pytest_args)
    if pytest_args[:1] == ["--"]:
        pytest_args = pytest_args[1:]
    misplaced, selection = split_misplaced(pytest_args, args.own_options)
    if misplaced:
        flags = [a.split("=", 1)[0] for a in misplaced
                 if a.split("=", 1)[0] in args.own_options]
        raise Sme2Error(f"bisect's own option(s) {', '.join(flags)} come after BAD, where "
                        "every argument is pytest's selection: put them before GOOD "
                        f"(pytest-sme2 bisect {' '.join(misplaced)} {args.good} {args.bad} "
                        f"{' '.join(selection)})")
    for flag, least in (("max_pairs", 2), ("runs", 1), ("warmup", 0), ("most_steps", 1)):
        if getattr(args, flag) < least:
            raise Sme2Error(f"--{flag.replace('_', '-')} must be {least} or more, got "
                            f"{getattr(args, flag)}")
    settings = BenchSettings(runs=args.runs, warmup=args.warmup, loads=1, trace_runs=3,
                             sample="off")
    plan = measures.ProbePlan(args.threshold, PairBudget(args.max_pairs, args.budget), settings)
    ask = run.Ask(args.good, args.bad, tuple(pytest_args), args.setup, args.improvement,
              args.all_commits, args.resume, plan, runner_specs(pytest_args),
              most_steps=args.most_steps, measure=args.measure,
              instructions_pct=args.instructions_threshold, fresh_exports=args.fresh_exports)
    outcome = run.Bisect(Path.cwd(), ask).run()
    for line in report.terminal(outcome):
        print(line)
    if args.json:
        atomic_write_text(args.json, json.dumps(outcome.to_json(), indent=2) + "\n")
        print(f"wrote {args.json}")
    if args.md:
        atomic_write_text(args.md, report.markdown(outcome))
        print(f"wrote {args.md}")
    return 0


def add_parser(sub) -> None:
    b = sub.add_parser("bisect", help="find the commit between GOOD and BAD that made a "
                       "benchmark slower, measured by the gate's paired rule",
                       description=__doc__.split("\n\n")[0])
    b.add_argument("good", metavar="GOOD", help="a commit (ref) where the benchmark was fine")
    b.add_argument("bad", metavar="BAD", help="a later commit (ref) where it is slower")
    b.add_argument("pytest_args", nargs=argparse.REMAINDER, metavar="PYTEST_ARGS",
                   help="the pytest selection: paths, -k, --device, --runner, ...")
    b.add_argument("--setup", metavar="CMD", help="a shell command run in each commit's "
                   "worktree before its benchmarks (e.g. building the project's runner)")
    b.add_argument("--improvement", action="store_true",
                   help="look for the commit that made it faster instead")
    b.add_argument("--all-commits", action="store_true",
                   help="search merged branches' commits too (default: first-parent only)")
    b.add_argument("--resume", action="store_true",
                   help="continue a bisect of the same range stopped by Ctrl-C or a lost "
                        "device (its state is kept under .git/sme2-bisect/)")
    b.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD_PCT, metavar="PCT",
                   help=f"the change to find, percent (default {DEFAULT_THRESHOLD_PCT:g})")
    b.add_argument("--max-pairs", type=int, default=DEFAULT_MAX_PAIRS,
                   help=f"most pairs of blocks per comparison (default {DEFAULT_MAX_PAIRS})")
    b.add_argument("--budget", type=float, default=DEFAULT_PRECISION_BUDGET_S, metavar="S",
                   help="seconds of extra pairs per comparison while it cannot tell "
                        f"(default {DEFAULT_PRECISION_BUDGET_S:g})")
    b.add_argument("--runs", type=int, default=BenchSettings.runs,
                   help=f"timed runs per block (default {BenchSettings.runs})")
    b.add_argument("--warmup", type=int, default=BenchSettings.warmup,
                   help=f"warm-up runs per block (default {BenchSettings.warmup})")
    b.add_argument("--most-steps", type=int, default=3,
                   help="most steps (culprits) to search for in the range (default 3)")
    b.add_argument("--measure", choices=("time", "instructions", "kernels"), default="time",
                   help="what each probe compares: time (the A/B gate's paired blocks); "
                        "instructions per execute under valgrind (host; deterministic, one "
                        "count per program), the culprit then confirmed in time; or kernels: "
                        "the set of SME2 kernels that ran (--device qemu; emulated times are "
                        "never used)")
    b.add_argument("--instructions-threshold", type=float, default=DEFAULT_INSTRUCTIONS_PCT,
                   metavar="PCT", help="--measure instructions: a count moving more than this "
                   f"is a change (default {DEFAULT_INSTRUCTIONS_PCT:g})")
    b.add_argument("--fresh-exports", action="store_true",
                   help="export each commit in a new pytest process instead of a fork of the "
                        "pre-warmed exporter (slower: for a conftest that cannot share one)")
    b.add_argument("--json", type=Path, help="write the outcome here (verdict, culprits, "
                   "skipped, reused, probes)")
    b.add_argument("--md", type=Path, help="write a markdown report here")
    b.set_defaults(func=_bisect, own_options=_own_options(b))

"""``pytest-sme2 compare``: two ETDumps compared offline."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pytest_sme2.errors import Sme2Error


def _compare(args: argparse.Namespace) -> int:
    # Light like analyze: no torch, no executorch.
    from pytest_sme2.analysis.diff import compare_analyses  # pandas: not at --help
    from pytest_sme2.measure.offline import analyze_recorded  # pandas: not at --help
    from pytest_sme2.report.etdump_diff import (compare_lines, render_markdown,
                                                with_recommendations)  # pandas: not at --help

    if args.name1 == args.name2:
        raise Sme2Error(f"--name1 and --name2 must differ (both {args.name1!r})")
    found = [analyze_recorded(path, args.warmup, etrecord=args.etrecord)
             for path in (args.base, args.candidate)]
    base, cand = (f.analysis for f in found)
    options = tuple(f.record.runs_option if f.record else "" for f in found)
    diff = with_recommendations(
        compare_analyses(base, cand, base_name=args.name1, candidate_name=args.name2), base,
        cand, options)
    print("\n".join(f"{name}: {f.warmup_said}"
                    for name, f in zip((args.name1, args.name2), found)))
    print("\n".join(compare_lines(diff)))
    for path, text in ((args.json, lambda: json.dumps(diff.to_json(), indent=2) + "\n"),
                       (args.md, lambda: render_markdown(diff))):
        if path:
            try:
                Path(path).write_text(text())
            except OSError as e:
                raise Sme2Error(f"{path}: cannot write ({e.strerror or e})") from None
            print(f"wrote {path}")
    return 0


def add_parser(sub) -> None:
    c = sub.add_parser("compare", help="compare two ETDumps (base, candidate) offline: "
                                       "speed-up, category and operator deltas")
    c.add_argument("base", type=Path)
    c.add_argument("candidate", type=Path)
    c.add_argument("--etrecord", type=Path,
                   help="the .etrecord of the model (both traces; backends, op types)")
    c.add_argument("--name1", default="base", help="label of the base trace (e.g. SME2-Off)")
    c.add_argument("--name2", default="candidate",
                   help="label of the candidate trace (e.g. SME2-On)")
    c.add_argument("--warmup", type=int, default=None,
                   help="leading runs (an LLM's: generations) to discard from each trace "
                        "(default: what the record a session writes beside each ETDump says, "
                        "X.etdump.runs.json; 0 without one)")
    c.add_argument("--json", type=Path, help="write the comparison document here")
    c.add_argument("--md", type=Path, help="write a markdown report here")
    c.set_defaults(func=_compare)

"""``pytest-sme2 history import|report``: arguments in, the history package's functions
called, one line per outcome."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from pytest_sme2.history import MIN_CHANGE_PCT
from pytest_sme2.results import atomic_write_text


def add_parser(sub) -> None:
    h = sub.add_parser("history", help="the history store: import sessions, report change "
                                       "points and write the page (docs/history.md)")
    hs = h.add_subparsers(dest="history_command", required=True)
    imp = hs.add_parser("import", help="add results.json files (e.g. CI artifacts) to the store")
    imp.add_argument("results", type=Path, nargs="+")
    imp.add_argument("--store", help="history URL: a SQLite path or sqlite:///..., or "
                                     "postgresql://... (default sme2-history.sqlite)")
    imp.set_defaults(func=run_import)
    rep = hs.add_parser("report", help="series in commit order, change points; --html, --md, "
                                       "--json (stdout: the markdown when none is given)")
    rep.add_argument("--store")
    rep.add_argument("--html", type=Path)
    rep.add_argument("--md", type=Path)
    rep.add_argument("--json", type=Path)
    for name in ("device", "model", "dtype", "runner", "branch"):
        rep.add_argument(f"--{name}")
    rep.add_argument("--threads", type=int)
    rep.add_argument("--since", help="sessions at or after this ISO date/time")
    rep.add_argument("--min-change", type=_percent, metavar="PCT",
                     help="the least change (percent, either way) called a regression or an "
                          "improvement; smaller ones are listed apart as shifts (default: per "
                          f"series, the larger of {MIN_CHANGE_PCT:g}%% and the series' noise "
                          "floor, docs/history.md)")
    rep.set_defaults(func=run_report)


def _percent(text: str) -> float:
    try:
        value = float(text.rstrip("%"))
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"a percentage of 0 or more, got {text!r}")
    return value


def run_import(args: argparse.Namespace) -> int:
    # The records and the .pte reader (flatbuffers): only this command needs them.
    from pytest_sme2.history.importer import import_files  # flatbuffers: 14 ms of --help
    from pytest_sme2.history.store import open_store  # flatbuffers: with the importer

    store = open_store(args.store)
    try:
        for line in import_files(store, args.results):
            print(line)
    finally:
        store.close()
    return 0


def run_report(args: argparse.Namespace) -> int:
    # pandas and numpy: only this command needs them, not `pytest-sme2 --help`.
    from pytest_sme2.history import page, report  # pandas: not at --help
    from pytest_sme2.history.series import Filters  # pandas: not at --help
    from pytest_sme2.history.store import open_store  # flatbuffers: 14 ms of --help

    store = open_store(args.store)
    try:
        points = store.frame()
    finally:
        store.close()
    filters = Filters(device=args.device, model=args.model, dtype=args.dtype,
                      threads=args.threads, runner=args.runner, branch=args.branch,
                      since=args.since)
    built = report.build(points, filters, args.min_change)
    if args.json:
        atomic_write_text(args.json, json.dumps(built.to_json(), indent=2, default=str) + "\n")
    if args.md:
        atomic_write_text(args.md, built.to_markdown())
    if args.html:
        atomic_write_text(args.html, page.render(built))
    if not (args.json or args.md or args.html):
        print(built.to_markdown(), end="")
    print(f"history: {len(built.series)} series, {len(built.commits)} commits, "
          f"{len(built.change_points)} change point(s) of at least {built.min_change_text()}, "
          f"{len(built.shifts)} shift(s) below")
    if args.json or args.md or args.html:       # the markdown printed holds them already
        for cmd in built.bisect_commands():
            print(f"find it: {cmd}")
    return 0

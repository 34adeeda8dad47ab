"""``pytest-sme2 report``: report.md (and charts) from a results.json."""

from __future__ import annotations

import argparse
from pathlib import Path

from pytest_sme2.errors import Sme2Error
from pytest_sme2.results import load_results


def _report(args: argparse.Namespace) -> int:
    from pytest_sme2.report.markdown.render import render_report  # jinja2: not at --help

    doc = load_results(args.results)      # one line naming the file for anything unreadable
    out_dir = Path(args.out or Path(args.results).parent)
    try:
        out = render_report(doc, out_dir, charts=not args.no_charts)
    except OSError as e:
        raise Sme2Error(f"{out_dir}: cannot write the report ({e.strerror or e})") from None
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise Sme2Error(f"{args.results}: a results document this version cannot render "
                        f"({type(e).__name__}: {e}); was it edited by hand?") from None
    print(out)
    return 0


def add_parser(sub) -> None:
    r = sub.add_parser("report", help="render report.md (and charts) from a results.json")
    r.add_argument("results", type=Path)
    r.add_argument("--out", type=Path, help="folder for report.md (default: beside the JSON)")
    r.add_argument("--no-charts", action="store_true")
    r.set_defaults(func=_report)

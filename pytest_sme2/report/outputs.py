"""A finished session's files: the final results.json, report.md with its charts and pages,
``--sme2-benchmark-json``, ``--sme2-llama-bench`` and, in GitHub Actions, the step summary.
The session records; this renders (the layer above it), so the session never imports the
report."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_sme2.errors import Sme2Error
from pytest_sme2.measure.artifacts.earlier import ARTIFACTS, remove_earlier_artifacts
from pytest_sme2.report.benchmark_json import write_benchmark_json
from pytest_sme2.report.llama_bench import build_info, llama_bench_rows, write_llama_bench
from pytest_sme2.report.view import SessionView
from pytest_sme2.results import SessionInfo

if TYPE_CHECKING:
    from pytest_sme2.measure.session import BenchSession


def session_view(session: BenchSession) -> SessionView:
    """The session's records as every renderer reads them, grouped once: the records it holds,
    as they are (results.json is written from them)."""
    return SessionView.of(session.results, session.comparisons,
                          SessionInfo.from_json(session.document_session()))


def write_reports(session: BenchSession, view: SessionView | None = None) -> list[Path]:
    """Final results.json and report.md (with charts); returns the files written. ``view``:
    the session's, when the terminal summary built it already. A report that fails to render
    costs nothing measured: one line says how to render it again."""
    if not session.results:
        return []
    session.write()
    # As report.md is replaced, so are the artifacts: none of an earlier session stays.
    remove_earlier_artifacts(session.settings.report_dir / ARTIFACTS, session.started)
    from pytest_sme2.report.markdown.render import render_report  # jinja2: not at start-up

    view = view or session_view(session)
    extra, problems = _write_ci_files(session, view)
    report_dir = session.settings.report_dir
    try:
        written = [session.results_path, render_report(view, report_dir), *extra]
    except Exception as e:  # noqa: BLE001 - the measurements are safe in results.json
        raise Sme2Error(f"{report_dir / 'report.md'}: not written ({type(e).__name__}: {e}); "
                        f"results.json is complete, rerun `pytest-sme2 report "
                        f"{session.results_path}`") from None
    if problems:  # after report.md: one unwritable file costs no other
        raise Sme2Error("; ".join(problems))
    return written


def _write_ci_files(session: BenchSession, view: SessionView
                    ) -> tuple[list[Path], list[str]]:
    """--sme2-benchmark-json (pytest-benchmark's format) and, in GitHub Actions, the step
    summary: written before report.md, so a report that fails to render loses neither.
    Returns what was written and, one line each, what could not be."""
    # The step summary's tables: 39 ms of the plugin's start-up, for the session's end.
    from pytest_sme2.report.github import append_step_summary  # report.github: 39 ms

    written: list[Path] = []
    problems: list[str] = []
    target = session.config.benchmark_json
    if target is not None:
        try:
            written.append(write_benchmark_json(target, view, identity=session.identity))
        except OSError as e:
            problems.append(f"--sme2-benchmark-json {target}: cannot write it "
                            f"({e.strerror or e})")
    if session.config.llama_bench is not None:
        try:
            written.append(write_llama_bench(session.config.llama_bench, llama_bench_rows(
                view, build_info(session.config.rootdir or Path.cwd(),
                                 session.identity.get("commit")))))
        except (OSError, sqlite3.Error) as e:
            problems.append(f"--sme2-llama-bench {session.config.llama_bench}: cannot write "
                            f"it ({getattr(e, 'strerror', None) or e})")
    try:
        summary = append_step_summary(view, session.settings.report_dir, written)
    except OSError as e:
        summary = None
        problems.append(f"GITHUB_STEP_SUMMARY={os.environ.get('GITHUB_STEP_SUMMARY')}: "
                        f"cannot append the summary ({e.strerror or e})")
    return written + ([summary] if summary else []), problems


def warm_up() -> None:
    """What the session's end imports anyway, done while a fork server imports torch beside
    us (``BenchSession.warm_ups``): the charts' plotting library and the compiled templates."""
    from pytest_sme2.report.markdown.render import environment  # jinja2: not at start-up

    try:
        import matplotlib.figure  # matplotlib: the report's charts, at the end  # noqa: F401
    except ImportError:
        pass   # the report says charts were left out
    environment()   # the report's templates, compiled once per process

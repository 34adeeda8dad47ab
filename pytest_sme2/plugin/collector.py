"""The process that reports (the xdist controller, or the only one): results arrive on test
reports — from every worker alike — and go into the session; live lines, the progress lines,
the saved baselines and the summary table at the end go to the terminal."""

from __future__ import annotations

from contextlib import nullcontext
from types import ModuleType
from typing import TYPE_CHECKING, Callable

import pytest

from pytest_sme2.measure import cost as session_cost
from pytest_sme2.report.outputs import session_view, write_reports
from pytest_sme2.errors import Sme2Error
from pytest_sme2.plugin.progress import SessionProgress
from pytest_sme2.programs.export_output import ExportOutput
from pytest_sme2.results import BlockResult, ComparisonRecord
from pytest_sme2.plugin import progress

if TYPE_CHECKING:
    from pytest_sme2.measure.session import BenchSession

COLLECTOR_NAME = "sme2-collector"
BENCH_FIXTURES = ("sme2_bench", "sme2_compare")   # a test using one is a benchmark case
RESULT_PROPERTY = "sme2_result"                   # a block, on its test's report
COMPARISON_PROPERTY = "sme2_comparison"           # a comparison, on its test's report
# A skip whose reason starts so is a test that cannot apply to the device (an SME2 test on a
# device without SME2): the session's summary says how many and why, not only ``-rs``.
NOT_APPLICABLE = "does not apply here: "


def _terminal() -> ModuleType:
    """The terminal's lines (:mod:`pytest_sme2.report.terminal`), for the first block reported:
    a session that measures nothing never imports them."""
    from pytest_sme2.report import terminal  # report.terminal: 38 ms of the plugin's start-up

    return terminal


def is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def write_live(config: pytest.Config, line: str) -> None:
    """Write to the terminal now, even while output capture is on."""
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if tr is None or is_xdist_worker(config):
        return
    capman = config.pluginmanager.get_plugin("capturemanager")
    with capman.global_and_fixture_disabled() if capman else nullcontext():
        if tr._tw.width_of_current_line:  # after progress dots: start a fresh line
            tr._tw.line()
        tr.write_line(line)


def live_progress(config: pytest.Config) -> Callable[[str], None]:
    """A progress callback writing ``sme2: ...`` lines now; what an export's third-party code
    warned and printed (an :class:`ExportOutput`) only under -v: the session's own lines are
    not to be lost among them (a failed export's error carries them anyway)."""
    def say(message: str) -> None:
        if not isinstance(message, ExportOutput) or config.option.verbose > 0:
            write_live(config, f"sme2: {message}")
    return say


def block_done(config: pytest.Config, block: int, blocks: int | None = None) -> None:
    """A progress line after a block, when one is due (pytest_sme2.plugin.progress); none on an
    xdist worker, which has no collector."""
    collector = config.pluginmanager.get_plugin(COLLECTOR_NAME)
    tracker = collector.progress if collector is not None else None
    line = tracker.block_done(block, blocks) if tracker is not None else None
    if line:
        write_live(config, f"sme2: {line}")


def not_applicable_reason(report: pytest.TestReport) -> str | None:
    """The reason of a skip that says the test cannot apply to the device, else None."""
    if not getattr(report, "skipped", False) or not isinstance(report.longrepr, tuple):
        return None
    text = str(report.longrepr[2]).removeprefix("Skipped: ")
    return text[len(NOT_APPLICABLE):] if text.startswith(NOT_APPLICABLE) else None


class Collector:
    """Registered as :data:`COLLECTOR_NAME` on the process that reports, only there."""

    def __init__(self, config: pytest.Config, session: BenchSession):
        self.config = config
        self.session = session
        self.cases: set[str] = set()        # node ids of the benchmark cases
        self.progress: SessionProgress | None = None
        self.cooldown_told = False          # "--sme2-cooldown cannot be applied": said once
        self.pytest_session: pytest.Session | None = None
        self.not_applicable: dict[str, int] = {}     # reason -> tests that skipped for it
        self.comparing: set[str] = set()    # node ids of the cases that compare two runners
        self.running: str | None = None     # the test now running (named if Ctrl-C cuts it)

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.pytest_session = session

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """Count the benchmark cases for the progress lines (pytest_sme2.plugin.progress). Under
        pytest-xdist the controller collects nothing and workers print no live lines: none."""

        self.cases = {item.nodeid for item in session.items
                      if any(f in getattr(item, "fixturenames", ()) for f in BENCH_FIXTURES)}
        self.comparing = {item.nodeid for item in session.items
                          if "sme2_compare" in getattr(item, "fixturenames", ())}
        every = progress.interval(self.session.config.progress, self.config.option.verbose)
        if self.cases and every is not None:
            self.progress = SessionProgress(len(self.cases), every, clock=progress.clock)

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        self.running = nodeid
        if self.progress is not None and nodeid in self.cases:
            line = self.progress.case_started(nodeid.split("::")[-1])
            if line:
                write_live(self.config, f"sme2: {line}")

    def pytest_runtest_logfinish(self, nodeid: str) -> None:
        self.running = None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        reason = not_applicable_reason(report)
        if reason is not None:
            self.not_applicable[reason] = self.not_applicable.get(reason, 0) + 1
        ours = [(name, value) for name, value in report.user_properties
                if name in (RESULT_PROPERTY, COMPARISON_PROPERTY)]
        if report.when != "call" or not ours:
            return  # a test that measured nothing costs no import of the measuring stack
        for name, value in ours:
            if name == RESULT_PROPERTY:
                self._add_block(value)
            else:
                self._add_comparison(value)
        self.session.write()        # once per test, however many blocks it measured

    def _add_block(self, value: dict) -> None:
        terminal = _terminal()
        result = BlockResult.from_json(value)
        self.session.add(result, write=False)
        if result.block is None:
            several = len(self.session.devices or ()) > 1
            write_live(self.config, terminal.benchmark_line(result, device=several))
        for line in terminal.cooldown_lines(result, told=self.cooldown_told):
            write_live(self.config, line)
        held = result.context.cooldown
        self.cooldown_told |= held is not None and not held.applied

    def _add_comparison(self, value: dict) -> None:
        terminal = _terminal()
        record = ComparisonRecord.from_json(value)
        self.session.add_comparison(record, write=False)
        write_live(self.config, terminal.comparison_line(record, self._device_of(record)))
        for line in terminal.side_evidence_lines(record, self.session.results):
            write_live(self.config, line)
        for note in terminal.comparison_notes(record):
            write_live(self.config, f"sme2:   {note}")

    def _device_of(self, record) -> str | None:
        """The device a comparison ran on, in a session on several (its blocks say)."""
        if len(self.session.devices or ()) < 2:
            return None
        blocks = set(record.base_blocks)
        return next((r.device_label for r in self.session.results if r.nodeid in blocks), None)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if exitstatus == pytest.ExitCode.INTERRUPTED:   # results.json and report.md say so
            self.session.interrupted = {
                "by": "KeyboardInterrupt (Ctrl-C)", "in_flight": self.running,
                "comparison": self.running in self.comparing}
        if not self.session.config.save_baseline or not self.session.results:
            return
        if exitstatus == pytest.ExitCode.INTERRUPTED:
            write_live(self.config, "sme2: interrupted: no baseline saved from a partial session")
            return
        try:
            saved = self.session.save_baselines()
        except Sme2Error as e:
            write_live(self.config, f"sme2: {e}")
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
            return
        write_live(self.config, f"sme2: saved {len(saved)} baseline(s) in "
                                f"{self.session.config.baseline_dir}")

    def pytest_terminal_summary(self, terminalreporter) -> None:
        for reason, n in self.not_applicable.items():
            tests = f"{n} tests do" if n > 1 else "1 test does"
            terminalreporter.write_line(f"sme2: {tests} not apply here: {reason}", yellow=True)
        if not self.session.results:
            return
        terminal = _terminal()
        terminalreporter.section("pytest-sme2 summary")
        view = session_view(self.session)     # grouped once, for every output below
        for line in terminal.summary_table(view):
            terminalreporter.write_line(line)
        if self.session.config.gate.on_unresolved != "pass":
            for line in terminal.unresolved_lines(self.session.results,
                                                  self.session.comparisons):
                terminalreporter.write_line(line, yellow=True)
        for line in terminal.session_lines(self.session.results):
            terminalreporter.write_line(line, yellow=True)
        try:
            written = write_reports(self.session, view)
        except Sme2Error as e:
            terminalreporter.write_line(f"sme2: {e}", red=True)
            written = [self.session.results_path]
        except KeyboardInterrupt:
            terminalreporter.write_line(f"sme2: interrupted while writing report.md; "
                                        f"{self.session.results_path} is complete", red=True)
            # A Ctrl-C is status 2 wherever it lands, here too (the status is read after this
            # hook: pytest returns session.exitstatus).
            if self.pytest_session is not None:
                self.pytest_session.exitstatus = pytest.ExitCode.INTERRUPTED
            return
        for path in written:
            terminalreporter.write_line(f"wrote {path}")
        if self.session.config.history:
            from pytest_sme2.history.recording import (  # flatbuffers: 15 ms of start-up
                record_session)

            line, ok = record_session(self.session.config.history, self.session.results_path)
            terminalreporter.write_line(line, red=not ok)
        session_cost.skip_exit_collection()

"""pytest_sme2.plugin.collector without a pytest session: where progress lines after a block come
from (the reporting process's collector, none on an xdist worker) and where live lines go."""

from __future__ import annotations

import types

from pytest_sme2.gate.policy import GatePolicy
from pytest_sme2.plugin import collector
from pytest_sme2.plugin.progress import SessionProgress


class _Writer:
    def __init__(self):
        self.lines: list[str] = []
        self._tw = types.SimpleNamespace(width_of_current_line=0, line=lambda: None)

    def write_line(self, line, **markup):
        self.lines.append(line)


def _config(plugins: dict, worker: bool = False):
    config = types.SimpleNamespace(
        pluginmanager=types.SimpleNamespace(get_plugin=plugins.get))
    if worker:
        config.workerinput = {}
    return config


def test_a_block_done_line_comes_from_the_collectors_tracker_when_due():
    tr = _Writer()
    progress = SessionProgress(2, every_s=0, clock=lambda: 0.0)
    progress.case_started("test_x")
    plugins = {"terminalreporter": tr,
               collector.COLLECTOR_NAME: types.SimpleNamespace(progress=progress)}
    collector.block_done(_config(plugins), 3, 10)
    assert tr.lines == ["sme2: case 1 of 2, block 3 of 10 done: test_x (0 s elapsed)"]


def test_no_collector_no_progress_line_and_a_worker_writes_nothing():
    tr = _Writer()
    collector.block_done(_config({"terminalreporter": tr}), 1)     # an xdist worker: no collector
    collector.write_live(_config({"terminalreporter": tr}, worker=True), "sme2: hello")
    assert tr.lines == []
    collector.write_live(_config({"terminalreporter": tr}), "sme2: hello")
    assert tr.lines == ["sme2: hello"]


def test_a_test_with_many_blocks_writes_results_json_once():
    """A --sme2-precision test can measure 200 blocks: results.json (tens of MB by then) is
    rewritten once per test, not once per block."""
    from tests.fakes.results_docs import benchmark, steady

    writes: list[int] = []
    session = types.SimpleNamespace(results=[], devices=("host",))
    session.add = lambda result, write=True: (session.results.append(result),
                                              write and writes.append(len(session.results)))
    session.write = lambda: writes.append(len(session.results))
    config = _config({"terminalreporter": _Writer()})
    c = collector.Collector.__new__(collector.Collector)
    c.config, c.session, c.cooldown_told, c.progress = config, session, False, None
    blocks = [benchmark("t.py::test_x", "native", steady(1.0), {"GEMM": 0.9}, [], block=i)
              for i in range(5)]
    report = types.SimpleNamespace(when="call", user_properties=[
        (collector.RESULT_PROPERTY, b) for b in blocks])
    c.pytest_runtest_logreport(report)
    assert len(session.results) == 5 and writes == [5]


def test_ctrl_c_while_writing_report_md_is_still_status_2(monkeypatch, tmp_path):
    """Issue 32, item 5: a Ctrl-C that lands while report.md is written (after pytest settled
    the session's status) was swallowed, and the session ended 0 or 1. results.json is complete
    at that point (written after every benchmark): the line says so, the status is 2."""
    import pytest

    from pytest_sme2.report import terminal

    def interrupted(session, view):
        raise KeyboardInterrupt

    monkeypatch.setattr(collector, "write_reports", interrupted)
    monkeypatch.setattr(collector, "session_view", lambda session: None)
    monkeypatch.setattr(terminal, "summary_table", lambda view: [])
    monkeypatch.setattr(terminal, "unresolved_lines", lambda results, comparisons=(): [])
    monkeypatch.setattr(terminal, "session_lines", lambda results: [])
    bench = types.SimpleNamespace(results=[{"nodeid": "t"}], comparisons=[],
                                  results_path=tmp_path / "results.json",
                                  config=types.SimpleNamespace(history=None, gate=GatePolicy()))
    c = collector.Collector(_config({}), bench)
    session = types.SimpleNamespace(exitstatus=pytest.ExitCode.OK)
    c.pytest_sessionstart(session)
    writer = _Writer()
    writer.section = lambda title: writer.lines.append(title)
    c.pytest_terminal_summary(writer)
    assert session.exitstatus == pytest.ExitCode.INTERRUPTED
    assert writer.lines[-1] == (f"sme2: interrupted while writing report.md; {tmp_path}/"
                                "results.json is complete")


def test_tests_that_do_not_apply_to_the_device_are_counted_in_the_summary():
    """An SME2 test on a device with SME but no SME2 skips saying why; the summary says it
    too, without -rs (under xdist the reports come from the workers alike)."""
    reason = "device qemu-sme1 has SME but no SME2 (SME (no SME2) in its hwcaps): ..."
    c = collector.Collector.__new__(collector.Collector)
    c.config, c.not_applicable = _config({}), {}
    c.session = types.SimpleNamespace(results=[])
    for i in range(2):
        c.pytest_runtest_logreport(types.SimpleNamespace(
            when="setup", skipped=True, user_properties=[],
            longrepr=("t.py", i, f"Skipped: {collector.NOT_APPLICABLE}{reason}")))
    c.pytest_runtest_logreport(types.SimpleNamespace(     # any other skip is pytest's own
        when="setup", skipped=True, user_properties=[], longrepr=("t.py", 9, "Skipped: other")))
    tr = _Writer()
    c.pytest_terminal_summary(tr)
    assert tr.lines == [f"sme2: 2 tests do not apply here: {reason}"]

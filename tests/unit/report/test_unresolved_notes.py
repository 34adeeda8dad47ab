"""A "cannot tell" reaches the summaries on a line of its own, and fails the test only under
--sme2-on-unresolved fail (pytest_sme2.report.unresolved_notes, GateReport.failure)."""

from __future__ import annotations

from dataclasses import replace

from pytest_sme2.gate.ab import Pairs, judge_ab
from pytest_sme2.gate.policy import GatePolicy
from pytest_sme2.gate.rule import GateReport
from pytest_sme2.report.github import step_summary
from pytest_sme2.report.terminal import baseline_cell
from pytest_sme2.report.unresolved_notes import unresolved_lines
from pytest_sme2.report.view import SessionView
from tests.fakes.baselines import bench_result

WIDE = judge_ab(Pairs((1.0,) * 6, (0.97, 1.12, 1.06, 0.95, 1.1, 1.04)))
TIGHT = judge_ab(Pairs((1.0,) * 6, (1.0, 1.01, 0.99, 1.005, 0.995, 1.0)))


def _judged(name: str, j) -> object:
    r = bench_result((1.0, 1.0, 1.0))
    r.nodeid = name
    GateReport((j,)).record_on(r)
    return r


def test_cannot_tell_is_never_ok_in_a_table_cell():
    assert baseline_cell(WIDE).startswith("CANNOT TELL 1.04x [") and "(6 pairs)" in \
        baseline_cell(WIDE)
    assert baseline_cell(TIGHT).startswith("no change 1.00x [")


def test_the_summary_names_each_unresolved_benchmark_and_what_it_could_resolve():
    lines = unresolved_lines([_judged("t.py::a", WIDE), _judged("t.py::b", TIGHT)])
    assert len(lines) == 1
    assert lines[0].startswith("cannot tell: 1 of 2 judged benchmark(s) could neither call nor "
                               "rule out a change of their threshold's size: a (python) "
                               "end to end: 10% is not resolvable here (interval [")
    assert "after 6 pairs" in lines[0] and "b (python)" not in lines[0]
    assert unresolved_lines([_judged("t.py::b", TIGHT)]) == []


def test_the_github_summary_says_it_apart_from_the_regressions():
    text = step_summary(SessionView.of([_judged("t.py::a", WIDE)]))
    assert "**Regressions:** none" in text
    assert "**Cannot tell:** 1 of 1 judged benchmark(s)" in text


def test_cannot_tell_fails_only_when_the_user_asks_it_to():
    report = GateReport((WIDE,))
    enforced = GatePolicy(fail_on_regression=10)
    assert report.failure(enforced) is None                            # warn, the default
    assert report.failure(replace(enforced, on_unresolved="pass")) is None
    failed = report.failure(replace(enforced, on_unresolved="fail"))
    # one short line (issue 49: it was the whole reason, 1,500 characters)
    assert failed.startswith("--sme2-on-unresolved fail: cannot tell 1.04x [")
    assert "(6 pairs): 10% is not resolvable here (interval [" in failed and len(failed) < 300
    assert report.failure(replace(GatePolicy(), on_unresolved="fail")) is None  # not enforced

"""--sme2-precision in the summaries (pytest_sme2.report.precision_notes): pure records."""

from __future__ import annotations

from types import SimpleNamespace

from pytest_sme2.report.precision_notes import precision_lines
from pytest_sme2.results import PrecisionOutcome


def _block(name: str, reached: bool, why: str = "") -> SimpleNamespace:
    return SimpleNamespace(name=name, precision=PrecisionOutcome(2.0, reached=reached, why=why))


def test_nothing_is_said_when_precision_was_not_asked():
    assert precision_lines([SimpleNamespace(name="test_a", precision=None)]) == []


def test_the_benchmarks_that_missed_are_named_with_what_stopped_them():
    why = "time budget 60 s spent after 41 pair(s): interval ±2.6%, not ±2%"
    lines = precision_lines([
        _block("test_a[toy_cnn-fp32-t1]", True),
        _block("test_a[toy_cnn-fp32-t1]", True),            # its second block counts once
        _block("test_cmp[python#0]", False, why), _block("test_cmp[native#0]", False, why),
        _block("test_cmp[python#1]", False, why)])
    assert lines == [f"--sme2-precision 2%: 1 of 2 within ±2%; not reached: test_cmp ({why})"]

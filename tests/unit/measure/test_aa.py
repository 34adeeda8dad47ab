"""A/A calibration's arithmetic (pytest_sme2.measure.aa): the false-alarm rate's interval, the
smallest change resolved, and the advice it gives."""

from __future__ import annotations

import math

import pytest

from pytest_sme2.measure.aa import AaJudgement, Calibration, wilson
from pytest_sme2.results import Judgement
from pytest_sme2.stats import Interval


def test_the_wilson_interval_is_sane_at_zero_and_agrees_with_tables():
    low, high = wilson(0, 20)
    assert low == 0.0 and high == pytest.approx(0.161, abs=0.001)     # 0 of 20: up to 16%
    low, high = wilson(1, 100)
    assert (low, high) == pytest.approx((0.0018, 0.0545), abs=0.0005)
    assert wilson(0, 0) == (0.0, 1.0)


def _j(status: str, detect: float, straddled: int = 0, probed: int = 6) -> AaJudgement:
    return AaJudgement(Judgement(status, Interval(1.0, 0.97, 1.03), 10.0, 0.0, status), 6,
                       straddled, detect, 1.0, probed)


def test_the_report_gives_the_rate_the_resolution_and_a_threshold_that_holds():
    cal = Calibration("toy_cnn fp32 t1 native@host", 10.0,
                      [_j("no_change", 5.0), _j("no_change", 6.0), _j("regression", 7.0, 2),
                       _j("cannot_tell", 14.2, 4)])
    lines = cal.lines()
    assert lines[0] == ("false alarms: 1 of 4 judgements called a change on identical code "
                        "(25%, 95% CI 5%-70%)")
    assert lines[1] == "verdicts: no change 2, cannot tell 1, regression 1, improvement 0"
    assert lines[2].startswith("smallest change this machine resolves within the pair budget: "
                               "~6% typically, ~14% at worst")
    assert lines[3].startswith("the machine switched speed under 6 of 24 probed pairs")
    assert lines[4] == "on this runner, gate at --fail-on-regression 15 or more"


def test_a_machine_that_resolves_nothing_says_so():
    lines = Calibration("x", 10.0, [_j("cannot_tell", math.inf)]).lines()
    assert lines[-1].startswith("this runner could not resolve a change at all")


def test_pairs_the_probe_did_not_read_are_said_unwatched_not_steady():
    """At 2 threads the probe reads no block: '0 of 24 pairs switched' would claim a steady
    machine that nobody watched."""
    cal = Calibration("toy_cnn fp32 t2 native@host", 10.0, [_j("no_change", 5.0, probed=0)])
    assert cal.judgements[0].watched == "pairs not probed (the probe reads 1-thread blocks)"
    assert ("the machine's speed was not watched: the machine-state probe reads 1-thread "
            "blocks only (at more threads it moves on its own)") in cal.lines()

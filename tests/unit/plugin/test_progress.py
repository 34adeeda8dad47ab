"""Progress lines of a long session: when one is due, in each verbosity, with a fake clock."""

from __future__ import annotations

import pytest

from pytest_sme2.measure.config import BaseDirs, config_from_options
from pytest_sme2.errors import Sme2Error
from pytest_sme2.plugin.progress import SessionProgress, elapsed_text, interval


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("setting,verbosity,expected", [
    ("auto", 0, 30.0), ("auto", 1, 30.0), ("auto", -1, 300.0), ("auto", -2, None),
    (0.0, -1, 0.0), (12.0, -2, 12.0), (None, 0, None)])
def test_interval_follows_the_option_then_the_verbosity(setting, verbosity, expected):
    assert interval(setting, verbosity) == expected


def test_a_short_session_prints_nothing_and_a_long_one_a_line_per_interval():
    clock = Clock()
    p = SessionProgress(total=40, every_s=30.0, clock=clock)
    lines = []
    for case in range(40):               # cases of 10 s each
        lines.append(p.case_started(f"test_lat[{case}]"))
        clock.now += 10
    printed = [line for line in lines if line]
    # the first at 30 s, then one every 30 s: not one per case
    assert printed[0] == "case 4 of 40: test_lat[3] (30 s elapsed)"
    assert len(printed) == 13
    assert printed[-1] == "case 40 of 40: test_lat[39] (6 min 30 s elapsed)"


def test_quiet_mode_prints_ten_times_less():
    clock = Clock()
    p = SessionProgress(total=40, every_s=interval("auto", -1), clock=clock)
    printed = []
    for case in range(40):
        printed.append(p.case_started(f"c{case}"))
        clock.now += 10
    assert [line.split(":")[0] for line in printed if line] == ["case 31 of 40"]


def test_a_long_block_inside_a_case_reports_when_it_finishes():
    clock = Clock()
    p = SessionProgress(total=3, every_s=30.0, clock=clock)
    assert p.block_done(1) is None                       # no case started yet
    assert p.case_started("test_sme2[x]") is None
    clock.now = 95.0                                      # one slow block
    assert p.block_done(1, 10) == ("case 1 of 3, block 1 of 10 done: test_sme2[x] "
                                   "(1 min 35 s elapsed)")
    clock.now = 100.0
    assert p.block_done(2, 10) is None                   # 5 s later: not due
    clock.now = 3700.0
    assert p.block_done(3) == "case 1 of 3, block 3 done: test_sme2[x] (1 h 01 min elapsed)"


def test_every_case_and_block_with_0_and_none_when_off():
    p = SessionProgress(total=2, every_s=0.0, clock=Clock())
    assert p.case_started("a") == "case 1 of 2: a (0 s elapsed)"
    assert p.block_done(1, 1) == "case 1 of 2, block 1 of 1 done: a (0 s elapsed)"
    off = SessionProgress(total=2, every_s=None, clock=Clock())
    assert off.case_started("a") is None and off.block_done(1) is None


@pytest.mark.parametrize("seconds,text", [(0, "0 s"), (59.9, "59 s"), (60, "1 min 00 s"),
                                          (245, "4 min 05 s"), (3720, "1 h 02 min")])
def test_elapsed_text(seconds, text):
    assert elapsed_text(seconds) == text


def _progress(text: str):
    from pathlib import Path

    return config_from_options({"sme2_progress": text}, {}, BaseDirs(Path("/"), Path("/"))
                               ).progress


def test_the_option():
    assert (_progress("auto"), _progress("OFF"), _progress("0"), _progress("45")) == \
        ("auto", None, 0.0, 45.0)
    with pytest.raises(Sme2Error, match="--sme2-progress must be auto, off or a number of "
                                        "seconds .0 or more., got '-3'"):
        _progress("-3")

"""The one verdict rule (pytest_sme2.gate.decide): four verdicts, and pairs that double until
the verdict is told or the budget is spent. Pure numbers and a fake clock, no timing."""

from __future__ import annotations

import math

import pytest

from pytest_sme2.gate.decide import (PairBudget, decide, detectable_pct, pairs_to_resolve,
                                     unresolved, until_told)
from pytest_sme2.results.judgement import (CANNOT_TELL, IMPROVEMENT, NO_CHANGE, REGRESSION,
                                           Judgement)
from pytest_sme2.stats import Interval

@pytest.mark.parametrize("point,low,high,expected", [
    (1.12, 1.06, 1.20, REGRESSION),    # clears the 2% margin, point past half the threshold
    (1.07, 1.05, 1.09, REGRESSION),    # a 7% change, precisely measured: called
    (1.03, 1.02, 1.04, NO_CHANGE),     # clear of noise but a quarter of the threshold: not
    (0.88, 0.80, 0.94, IMPROVEMENT),
    (1.00, 0.95, 1.06, NO_CHANGE),     # rules out 10% either way
    (1.07, 0.97, 1.19, CANNOT_TELL),   # admits both none and +10%
    (0.95, 0.88, 1.02, CANNOT_TELL),   # admits -10% (below 1/1.1) and none
    (1.07, 1.01, 1.12, CANNOT_TELL),   # past half the threshold, but not clear of the margin
])
def test_four_verdicts_from_one_interval(point, low, high, expected):
    status, _ = decide(Interval(point, low, high), 10)
    assert status == expected


def test_drift_the_interval_cannot_see_widens_it_before_anything_is_said():
    ratio = Interval(1.0, 0.97, 1.04)
    assert decide(ratio, 10)[0] == NO_CHANGE
    assert decide(ratio, 10, spread=0.25)[0] == CANNOT_TELL   # floor 25%: cannot rule out 10%
    assert decide(ratio, 10, spread=0.03)[0] == NO_CHANGE      # 1.04 * 1.03 < 1.10
    slower = Interval(1.3, 1.2, 1.4)
    assert decide(slower, 10, spread=0.25)[0] == CANNOT_TELL   # 1.2 < 1.02 * 1.25
    assert decide(slower, 10, spread=0.10)[0] == REGRESSION


def test_counts_have_no_noise_margin():
    assert decide(Interval(1.011, 1.010, 1.012), 1, margin=0.0)[0] == REGRESSION


def test_the_word_says_the_size_or_what_was_ruled_out():
    assert decide(Interval(1.21, 1.15, 1.27), 10) == (REGRESSION, "21.0% slower")
    assert decide(Interval(1.0, 0.98, 1.02), 5) == (NO_CHANGE, "no change of 5%")


def test_what_the_data_can_resolve_is_said_with_the_pairs_it_would_take():
    wide = Interval(1.08, 0.97, 1.19)
    h = (math.log(1.19) - math.log(0.97)) / 2
    assert detectable_pct(wide) == pytest.approx(100 * (1.02 * math.exp(h) - 1))
    need = pairs_to_resolve(wide, 40, 10)
    assert need == math.ceil(40 * (h / math.log(1.1 / 1.02)) ** 2) and need > 40
    text = unresolved(wide, 40, 10)
    assert text.startswith("10% is not resolvable here (interval [0.97, 1.19] after 40 pairs; "
                           "minimum detectable change now ~")
    assert text.endswith(f"; ~{need} pairs would resolve 10%)")
    assert pairs_to_resolve(Interval(1.0, 0.99, 1.01), 5, 10) == 5     # already resolved


def _judgement(status: str) -> Judgement:
    return Judgement(status, Interval(1.0, 0.9, 1.1), 10.0, 0.0, status)


class _Data:
    """Pairs measured so far; the verdict turns at ``told_at`` pairs."""

    def __init__(self, told_at: int | None, status: str = REGRESSION):
        self.n, self.told_at, self.status, self.looks = 3, told_at, status, []

    def measure(self) -> None:
        self.n += 1

    def judge(self) -> Judgement:
        self.looks.append(self.n)
        told = self.told_at is not None and self.n >= self.told_at
        return _judgement(self.status if told else CANNOT_TELL)


def test_pairs_double_until_the_verdict_is_told():
    data = _Data(told_at=10)
    told = until_told(data.n, data.measure, data.judge, PairBudget(max_pairs=40, seconds=1e9))
    assert data.looks == [3, 6, 12] and told.pairs == 12
    assert told.judgement.status == REGRESSION and told.spent == ""


def test_the_most_pairs_stop_it_still_cannot_tell_and_say_why():
    data = _Data(told_at=None)
    told = until_told(data.n, data.measure, data.judge, PairBudget(max_pairs=20, seconds=1e9))
    assert data.looks == [3, 6, 12, 20] and told.pairs == 20
    assert told.judgement.status == CANNOT_TELL
    assert told.spent == "the most pairs asked (20, --sme2-max-pairs)"


def test_the_time_budget_stops_it_mid_doubling():
    data = _Data(told_at=None)
    ticks = iter(range(100))
    told = until_told(data.n, data.measure, data.judge, PairBudget(max_pairs=40, seconds=5),
                      clock=lambda: next(ticks))
    assert told.judgement.status == CANNOT_TELL and told.pairs < 12
    assert told.spent == "the time budget (5 s, --sme2-precision-budget)"


def test_a_told_verdict_takes_no_more_pairs():
    data = _Data(told_at=3, status=NO_CHANGE)
    told = until_told(data.n, data.measure, data.judge)
    assert data.looks == [3] and told.pairs == 3 and told.spent == ""

"""Precision on demand (pytest_sme2.measure.precision): a fake clock and fake blocks, no timing."""

from __future__ import annotations

import itertools

import pytest

from pytest_sme2.errors import Sme2Error
from pytest_sme2.measure.precision import until_precise


class Clock:
    def __init__(self, step: float):
        self.t, self.step = 0.0, step

    def __call__(self) -> float:
        self.t += self.step
        return self.t


def _wobbly(spread: float):
    signs = itertools.cycle((1, -1, 0.5, -0.5))
    return lambda i: (1.0, 1.1 * (1 + spread * next(signs)))


def test_a_quiet_benchmark_stops_at_the_least_pairs():
    # 6: the fewest pairs a 95% signed-rank interval needs (below, it is unbounded)
    p = until_precise(_wobbly(0.001), 2.0, clock=Clock(0.1))
    assert p.reached and len(p.pairs.base) == 6 and p.why == ""
    assert p.half_width_pct <= 2.0


def test_a_noisy_one_says_what_limited_it():
    p = until_precise(_wobbly(0.3), 2.0, budget_s=5.0, clock=Clock(0.5))
    assert not p.reached
    assert p.why.startswith("time budget 5 s spent after")
    assert "not ±2%" in p.why


def test_the_pair_cap_is_said_too():
    p = until_precise(_wobbly(0.3), 2.0, budget_s=1e9, max_pairs=6, clock=Clock(0.0))
    assert not p.reached and p.why.startswith("6 pairs taken")


def test_a_target_of_zero_is_refused():
    with pytest.raises(Sme2Error, match="--sme2-precision: must be above 0%"):
        until_precise(_wobbly(0.0), 0.0)


def test_a_benchmark_alone_is_made_precise_on_its_level_over_processes():
    from pytest_sme2.measure.precision import Goal, level

    goal = Goal(5.0, budget_s=100.0, clock=Clock(0.1)).start()
    values: tuple[float, ...] = ()
    for v in itertools.cycle((1.0, 1.04, 0.97, 1.02)):
        values += (v,)
        if not goal.more(values):
            break
    got = goal.outcome(values)
    assert got.reached and got.blocks == len(values) >= 3 and got.pairs.base == ()
    assert got.record().paired is False and got.half_width_pct <= 5.0
    assert level((1.0, 1.0)).low == pytest.approx(1.0)      # no spread: a point
    spread = level((1.0, 1.2, 0.8))
    assert spread.low < 1.0 < spread.high


def test_a_level_that_cannot_get_there_names_its_blocks():
    from pytest_sme2.measure.precision import Goal

    goal = Goal(1.0, budget_s=1.0, clock=Clock(0.3)).start()
    values: tuple[float, ...] = (1.0,)
    while goal.more(values):
        values += (1.5 if len(values) % 2 else 1.0,)
    got = goal.outcome(values)
    assert not got.reached and "block(s): interval ±" in got.why
    assert got.why.startswith("time budget 1 s spent after")

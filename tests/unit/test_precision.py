"""Precision on demand (pytest_sme2.precision): a fake clock and fake blocks, no timing."""

from __future__ import annotations

import itertools

import pytest

from pytest_sme2.errors import Sme2Error
from pytest_sme2.precision import until_precise


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
    p = until_precise(_wobbly(0.001), 2.0, clock=Clock(0.1))
    assert p.reached and len(p.pairs.base) == 3 and p.why == ""
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

"""Precision on demand (``--sme2-precision PCT``): take more interleaved pairs of blocks until
the interval is within ±PCT% of its point, stopping early when it already is, up to a time
budget — as pyperf calibrates, criterion.rs samples until its time is spent and hyperfine has
``--min-runs``/``--max-runs``. Usable without pytest: give it a function that measures one
pair of blocks."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from pytest_sme2 import formats
from pytest_sme2.errors import Sme2Error
from pytest_sme2.gate_ab import Pairs, slowdown
from pytest_sme2.gate_policy import parse_precision  # noqa: F401  (one parser, re-exported)
from pytest_sme2.stats import Interval

MIN_PAIRS = 3
DEFAULT_BUDGET_S = 60.0


@dataclass(frozen=True)
class Precision:
    """What ``--sme2-precision`` asked and got, for the report."""

    target_pct: float
    pairs: Pairs
    interval: Interval | None
    seconds: float
    reached: bool
    why: str            # "" when reached; else what limited it

    @property
    def half_width_pct(self) -> float | None:
        return None if self.interval is None else half_width_pct(self.interval)


def half_width_pct(interval: Interval) -> float:
    """The larger distance from the point to either bound, in percent of the point."""
    return max(interval.high / interval.point - 1, 1 - interval.low / interval.point) * 100


def until_precise(measure_pair: Callable[[int], tuple[float, float]], target_pct: float,
                  budget_s: float = DEFAULT_BUDGET_S, min_pairs: int = MIN_PAIRS,
                  max_pairs: int = 200, clock: Callable[[], float] = time.monotonic
                  ) -> Precision:
    """Measure pairs (``measure_pair(i) -> (base, candidate)`` block values) until the
    interval is within ±target_pct%, the budget is spent, or ``max_pairs`` are taken."""
    if target_pct <= 0:
        raise Sme2Error(f"--sme2-precision: must be above 0%, got {target_pct:g}")
    start = clock()
    pairs = Pairs((), ())
    interval: Interval | None = None
    while True:
        b, c = measure_pair(len(pairs.base))
        pairs = pairs + Pairs((b,), (c,))
        if len(pairs.base) >= 2:
            interval = slowdown(pairs)
        spent = clock() - start
        if len(pairs.base) >= min_pairs and interval and half_width_pct(interval) <= target_pct:
            return Precision(target_pct, pairs, interval, spent, True, "")
        per_pair = spent / len(pairs.base)
        if spent + per_pair > budget_s:
            why = f"time budget {budget_s:g} s spent after {len(pairs.base)} pair(s)"
            break
        if len(pairs.base) >= max_pairs:
            why = f"{max_pairs} pairs taken"
            break
    got = formats.plus_minus(half_width_pct(interval)) if interval else "no interval"
    return Precision(target_pct, pairs, interval, clock() - start, False,
                     f"{why}: interval {got}, not ±{target_pct:g}% (the blocks vary too much "
                     "between pairs on this machine)")

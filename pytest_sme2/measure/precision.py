"""Precision on demand (``--sme2-precision PCT``): take more blocks until the interval is within
±PCT% of its point, stopping early when it already is, up to a time budget — as pyperf
calibrates, criterion.rs samples until its measurement time is spent and hyperfine has
``--min-runs``/``--max-runs``. Usable without pytest.

Two intervals are made precise:

- **paired** (a comparison, the A/B gate): ``candidate / base`` over interleaved pairs of
  blocks (:func:`pytest_sme2.gate.ab.slowdown`);
- **level** (a benchmark alone): its typical block median over fresh processes — a t-interval
  on the mean log block median, since between-process drift is what one block cannot show.

:class:`Goal` is the stopping rule; :func:`until_precise` drives it over a function that
measures one pair, and the benchmark loop (:mod:`pytest_sme2.measure.benchmark`) asks it after
each block.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

from pytest_sme2 import units
from pytest_sme2.errors import Sme2Error
from pytest_sme2.gate.ab import Pairs, slowdown
from pytest_sme2.results import PrecisionOutcome
from pytest_sme2.stats import Interval, t_quantile

MIN_PAIRS = 3
DEFAULT_BUDGET_S = 60.0
MAX_PAIRS = 200


# What is made precise: interleaved pairs (paired), or one benchmark's block medians (level).
Sample = Pairs | tuple[float, ...]


def _paired(sample: Sample) -> bool:
    return isinstance(sample, Pairs)


def _size(sample: Sample) -> int:
    return len(sample.candidate) if isinstance(sample, Pairs) else len(sample)


@dataclass(frozen=True)
class Precision:
    """What ``--sme2-precision`` asked and got, for the report."""

    target_pct: float
    sample: Sample
    interval: Interval | None
    seconds: float
    reached: bool
    why: str            # "" when reached; else what limited it

    @property
    def half_width_pct(self) -> float | None:
        return None if self.interval is None else half_width_pct(self.interval)

    @property
    def pairs(self) -> Pairs:
        """The pairs measured (empty for a level)."""
        return self.sample if isinstance(self.sample, Pairs) else Pairs((), ())

    @property
    def blocks(self) -> int:
        """Blocks of the program under test (one per pair when paired)."""
        return _size(self.sample)

    def record(self) -> PrecisionOutcome:
        """As results.json keeps it (``precision`` on each block of the benchmark)."""
        return PrecisionOutcome(
            target_pct=self.target_pct, half_width_pct=self.half_width_pct, blocks=self.blocks,
            paired=_paired(self.sample), seconds=round(self.seconds, 3), reached=self.reached,
            why=self.why)


def half_width_pct(interval: Interval) -> float:
    """The larger distance from the point to either bound, in percent of the point."""
    if not math.isfinite(interval.high) or interval.low <= 0:
        return math.inf
    return max(interval.high / interval.point - 1, 1 - interval.low / interval.point) * 100


def level(values: Sequence[float], confidence: float = 0.95) -> Interval:
    """The typical block median of one benchmark: geometric mean of ``values`` (block medians,
    one per process) with a t-interval on their logs; unbounded below two blocks."""
    if not values or min(values) <= 0:
        raise Sme2Error("precision: block medians must be positive")
    logs = [math.log(v) for v in values]
    mean = sum(logs) / len(logs)
    if len(logs) < 2:
        return Interval(math.exp(mean), 0.0, math.inf, confidence)
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))
    half = t_quantile(0.5 + confidence / 2, len(logs) - 1) * sd / math.sqrt(len(logs))
    return Interval(math.exp(mean), math.exp(mean - half), math.exp(mean + half), confidence)


def interval_of(sample: Sample) -> Interval | None:
    """The interval being made precise: paired, or the level of block medians."""
    if _size(sample) < 2:
        return None
    if isinstance(sample, Pairs):   # the pairs a verdict rests on: at one machine speed each
        kept = sample.kept
        return slowdown(kept if len(kept.base) >= 2 else sample)
    return level(sample)


@dataclass
class Goal:
    """The stopping rule: at least ``min_pairs``, then stop once the interval is within
    ±``target_pct``%, or when one more block (pair) would overrun ``budget_s``, or at
    ``max_pairs``. Start the clock with :meth:`start`; ask :meth:`more` after each."""

    target_pct: float
    budget_s: float = DEFAULT_BUDGET_S
    min_pairs: int = MIN_PAIRS
    max_pairs: int = MAX_PAIRS
    clock: Callable[[], float] = time.monotonic
    started: float | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if self.target_pct <= 0:
            raise Sme2Error(f"--sme2-precision: must be above 0%, got {self.target_pct:g}")
        if self.budget_s <= 0:
            raise Sme2Error(f"--sme2-precision-budget: must be above 0 s, got "
                            f"{self.budget_s:g}")

    def start(self, already_s: float = 0.0) -> Goal:
        """``already_s``: time the blocks measured before this call took (counted against the
        budget)."""
        self.started = self.clock() - already_s
        return self

    def spent(self) -> float:
        if self.started is None:
            raise Sme2Error("precision: the goal was asked before start()")
        return self.clock() - self.started

    def more(self, sample: Sample) -> bool:
        """Whether to measure another pair (block)."""
        now = self.outcome(sample, final=False)
        return not now.reached and not now.why

    def outcome(self, sample: Sample, final: bool = True) -> Precision:
        """Where ``sample`` stands. ``why`` is empty while more are wanted (``final`` False)
        and when reached; else what stops it."""
        n = _size(sample)
        noun = "pair" if _paired(sample) else "block"
        interval = interval_of(sample)
        spent = self.spent()
        width = half_width_pct(interval) if interval else math.inf
        if n >= self.min_pairs and width <= self.target_pct:
            return Precision(self.target_pct, sample, interval, spent, True, "")
        why = ""
        if n >= self.max_pairs:
            why = f"{self.max_pairs} {noun}s taken"
        elif n and spent + spent / n > self.budget_s:
            why = f"time budget {self.budget_s:g} s spent after {n} {noun}(s)"
        elif final:
            why = f"stopped after {n}"
        if why:
            got = units.plus_minus(width) if interval and math.isfinite(width) \
                else "no interval"
            why = (f"{why}: interval {got}, not ±{self.target_pct:g}% (the blocks vary too "
                   "much between processes on this machine)")
        return Precision(self.target_pct, sample, interval, spent, False, why)


def until_precise(measure_pair: Callable[[int], tuple[float, float]], target_pct: float,
                  budget_s: float = DEFAULT_BUDGET_S, min_pairs: int = MIN_PAIRS,
                  max_pairs: int = MAX_PAIRS, clock: Callable[[], float] = time.monotonic
                  ) -> Precision:
    """Measure pairs (``measure_pair(i) -> (base, candidate)`` block values) until the
    interval is within ±target_pct%, the budget is spent, or ``max_pairs`` are taken."""
    goal = Goal(target_pct, budget_s, min_pairs, max_pairs, clock).start()
    pairs = Pairs((), ())
    while True:
        b, c = measure_pair(len(pairs.base))
        pairs = pairs + Pairs((b,), (c,))
        if not goal.more(pairs):
            return goal.outcome(pairs)

"""The one verdict every comparison ends in — the stored-baseline gate, the A/B gate (per phase
for an LLM), ``sme2_compare`` and ``pytest-sme2 bisect``'s probes — and the rule that measures
more pairs until it can be given.

Four verdicts (:func:`decide`), from a ratio interval (candidate / base, above 1 = slower); the
threshold ``T`` is the change to detect:

- **regression**: the interval clears the noise margin (2%: drift between processes here),
  widened by what it cannot see (``spread``: the stored gate's noise floor), *and* its point
  passes half the threshold — noise cannot explain it, and it is big enough to matter;
- **improvement**: the same, downwards;
- **no change**: the interval rules out a change of the threshold's size either way — its
  upper bound below ``1 + T`` and its lower bound above ``1 / (1 + T)``, each widened by
  ``spread`` (0 for pairs, whose drift cancels within a pair);
- **cannot tell**: anything else. The interval admits both "no change" and a change of the
  threshold's size. It is never printed as ``ok``.

On "cannot tell" the caller measures more pairs (:func:`until_told`): the count doubles, as
Chromium's Pinpoint doubles its attempts, up to ``PairBudget.max_pairs`` and a time budget.
Doubling keeps the number of looks at the data small (3, 6, 12, 24, 40: five looks), so
judging after each look inflates the false-alarm rate little, while a change near the
threshold still gets the pairs it needs. When the budget is spent the verdict stays "cannot
tell" and says what the data can resolve (:func:`unresolved`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable

from pytest_sme2.gate.policy import DEFAULT_MAX_PAIRS, DEFAULT_PRECISION_BUDGET_S
from pytest_sme2.results.judgement import (CANNOT_TELL, IMPROVEMENT, LOAD, MEMORY, NO_CHANGE,
                                           REGRESSION, TIME, Judgement)
from pytest_sme2.stats import DEFAULT_MARGIN, Interval

START_PAIRS = 6          # the first look (the fewest pairs a 95% signed-rank interval needs)


def decide(ratio: Interval, threshold_pct: float, margin: float = DEFAULT_MARGIN,
           spread: float = 0.0, relevant_pct: float | None = None,
           words: tuple[str, str] = ("slower", "faster")) -> tuple[str, str]:
    """The verdict on ``ratio`` (candidate / base) and its word for people:
    ``("regression", "21.0% slower")``, ``("no_change", "no change of 10%")``,
    ``("cannot_tell", "cannot tell")``.

    - ``margin``: the least change that is not noise (a fraction); the interval must clear it,
      widened by ``spread`` (drift the interval does not hold: the stored gate's noise floor);
    - ``relevant_pct``: the size the point estimate must pass to be called a change at all
      (default half the threshold: a change of the threshold's size is called once the data
      are precise enough, a change of a quarter of it never)."""
    more, fewer = words
    relevant = 1 + (threshold_pct / 2 if relevant_pct is None else relevant_pct) / 100
    clear = (1 + margin) * (1 + spread)
    if ratio.low > clear and ratio.point > relevant:
        return REGRESSION, f"{(ratio.point - 1) * 100:.1f}% {more}"
    if ratio.high < 1 / clear and ratio.point < 1 / relevant:
        return IMPROVEMENT, f"{(1 - ratio.point) * 100:.1f}% {fewer}"
    band = 1 + threshold_pct / 100
    if ratio.high * (1 + spread) < band and ratio.low / (1 + spread) > 1 / band:
        return NO_CHANGE, f"no change of {threshold_pct:g}%"
    return CANNOT_TELL, "cannot tell"


def half_width(ratio: Interval) -> float:
    """Half the interval's width on the log scale (inf when unbounded)."""
    if ratio.low <= 0 or not math.isfinite(ratio.high):
        return math.inf
    return (math.log(ratio.high) - math.log(ratio.low)) / 2


def detectable_pct(ratio: Interval, margin: float = DEFAULT_MARGIN) -> float:
    """The smallest change (percent) data this precise would call: one whose interval, of this
    half-width ``h`` on the log scale, clears the noise margin: ``(1 + margin) e^h - 1``."""
    h = half_width(ratio)
    return math.inf if h > 50 else 100 * ((1 + margin) * math.exp(h) - 1)


def pairs_to_resolve(ratio: Interval, pairs: int, threshold_pct: float,
                     margin: float = DEFAULT_MARGIN) -> int:
    """About how many pairs would resolve ``threshold_pct`` — call a change of its size, and
    rule it out when there is none: the half-width shrinks as 1/sqrt(n), and both hold once
    ``h < ln((1 + T) / (1 + margin))``."""
    h = half_width(ratio)
    need = math.log((1 + threshold_pct / 100) / (1 + margin))
    if not math.isfinite(h) or need <= 0:
        return 0
    return max(pairs, math.ceil(pairs * (h / need) ** 2))


def unresolved(ratio: Interval, pairs: int, threshold_pct: float, what: str = "pairs") -> str:
    """``10% is not resolvable here (interval [0.97, 1.19] after 40 pairs; minimum detectable
    change now ~14%; ~120 pairs would resolve 10%)``."""
    detect = detectable_pct(ratio)
    need = pairs_to_resolve(ratio, pairs, threshold_pct)
    now = f"~{detect:.0f}%" if math.isfinite(detect) else "unbounded"
    tail = f"; ~{need} {what} would resolve {threshold_pct:g}%" if need else ""
    return (f"{threshold_pct:g}% is not resolvable here (interval [{ratio.low:.2f}, "
            f"{ratio.high:.2f}] after {pairs} {what}; minimum detectable change now {now}"
            f"{tail})")


# The option whose threshold a measure is judged at; end to end and an LLM's phases are the
# ones the gate can also judge in pairs against the base program.
THRESHOLD_OPTION = {LOAD: "--sme2-load-threshold", MEMORY: "--sme2-memory-threshold"}


def floor_remedy(floor_pct: float, threshold_pct: float, measure: str = TIME) -> str:
    """What resolves a stored gate whose sessions drift more than the change to detect — more
    blocks of this session cannot: ``the baseline's sessions drift 45% between themselves,
    more than the 10% to detect; to judge it, ...`` (load and memory are judged against the
    stored sessions only: no pairs for them)."""
    option = THRESHOLD_OPTION.get(measure, "--fail-on-regression")
    pairs = "" if measure in THRESHOLD_OPTION else (
        "record the baseline again on the base commit with --save-baseline (it keeps the base "
        "program, which the gate then re-measures beside yours in pairs), or ")
    return (f"the baseline's sessions drift {floor_pct:.0f}% between themselves, more than the "
            f"{threshold_pct:g}% to detect, and more blocks of this session cannot narrow that; "
            f"to judge it, {pairs}raise {option} above {floor_pct:.0f}%, or record the baseline "
            "on a quieter machine")


@dataclass(frozen=True)
class PairBudget:
    """How far a "cannot tell" may go: ``max_pairs`` pairs in all, and ``seconds`` of
    measuring from the first extra pair (``--sme2-max-pairs``, ``--sme2-precision-budget``)."""

    max_pairs: int = DEFAULT_MAX_PAIRS
    seconds: float = DEFAULT_PRECISION_BUDGET_S


@dataclass(frozen=True)
class Told:
    """What :func:`until_told` ended with: the verdict, the pairs it rests on, and whether the
    budget stopped it (``spent``: why, "" when the verdict came first)."""

    judgement: Judgement
    pairs: int
    seconds: float
    spent: str = ""


@dataclass
class Doubling:
    """The stopping rule of :func:`until_told`, for callers that measure pairs in their own
    loop (a comparison's interleaved blocks): ask :meth:`more` after every pair."""

    budget: PairBudget = PairBudget()
    clock: Callable[[], float] = time.monotonic
    started: float | None = None
    target: int = 0
    spent: str = ""                 # why the budget stopped it ("" when told)
    last: Judgement | None = None   # the verdict at the latest look

    def more(self, pairs: int, judge: Callable[[], Judgement]) -> bool:
        """Another pair is due: short of the doubled count within the time budget, or, at
        it, the verdict is still "cannot tell" and the budget not spent."""
        if self.started is None:
            self.started = self.clock()
        out_of_time = self.clock() - self.started >= self.budget.seconds
        if pairs < self.target and not out_of_time:
            return True
        self.last = judge()
        self.spent = ""
        if self.last.status != CANNOT_TELL:
            return False
        if pairs >= self.budget.max_pairs:
            self.spent = f"the most pairs asked ({self.budget.max_pairs}, --sme2-max-pairs)"
        elif out_of_time:
            self.spent = f"the time budget ({self.budget.seconds:g} s, --sme2-precision-budget)"
        else:
            self.target = min(max(2 * pairs, START_PAIRS), self.budget.max_pairs)
            return True
        return False

    @property
    def seconds(self) -> float:
        return 0.0 if self.started is None else self.clock() - self.started


def until_told(pairs: int, measure_pair: Callable[[], None], judge: Callable[[], Judgement],
               budget: PairBudget = PairBudget(),
               clock: Callable[[], float] = time.monotonic) -> Told:
    """Judge; while the verdict is "cannot tell", measure pairs (``measure_pair`` measures one
    and keeps it where ``judge`` reads it) until their count doubles, then judge again — up to
    ``budget.max_pairs`` pairs and ``budget.seconds``. ``pairs``: how many there are now."""
    doubling = Doubling(budget, clock)
    while doubling.more(pairs, judge):
        measure_pair()
        pairs += 1
    verdict = doubling.last or judge()
    return Told(verdict, pairs, doubling.seconds, doubling.spent)

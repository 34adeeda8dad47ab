"""The same-job A/B gate (``--sme2-gate-mode ab``): the base program re-measured in this
session, in interleaved blocks with the candidate, judged by the paired rule ``sme2_compare``
uses (:func:`pytest_sme2.stats.paired_ratio`).

Why: timings on a shared machine drift ±30% between sessions (docs/regression-gate.md), so a
stored baseline's noise floor is wide, and one slow baseline session blinds it. Two programs
measured minutes apart, block by block, share the machine's state: the drift cancels within a
pair (Chromium's Pinpoint, duet benchmarking).

The rule. ``ratio = candidate / base`` per pair (above 1 = slower), its t-interval on the mean
log ratio. In this mode the threshold is the change to detect: ``regression`` when the
interval's lower bound exceeds ``1 + threshold / 2`` — halfway between no change and the
threshold — so a change of the threshold's size is caught once the interval's half-width is
below half the threshold, and an unchanged program is called only if its interval misses 1 by
half the threshold. ``improvement`` symmetrically. A regression is *suspected* when the point
estimate passes the same line; the caller then measures confirmation pairs one at a time,
judging all after each, until the interval clears the line or :data:`CONFIRM_PAIRS` more pairs
are taken (:func:`needs_more`). One disturbed pair widens a 5-pair interval past the line; a
sixth or seventh pair outvotes it (``benchmarks/scripts/timegate_eval.py``: +10% at 1 thread
caught 19/20 with 3 + 2 fixed pairs, 20/20 sequentially, on the same blocks, with no false
alarm in 200 unchanged trials either way).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pytest_sme2.errors import Sme2Error
from pytest_sme2.gate import (IMPROVEMENT, OK, REGRESSION, Judgement,
                              not_compared)
from pytest_sme2.gate_policy import DEFAULT_THRESHOLD_PCT
from pytest_sme2.stats import Interval, paired_ratio

AGAINST = "the base program, re-measured in this session"
CONFIDENCE = 0.95
CONFIRM_PAIRS = 5       # at most this many pairs after the first ones, when suspected


@dataclass(frozen=True)
class Pairs:
    """Block values (median ms) of base and candidate, ``base[i]`` next to ``candidate[i]``."""

    base: tuple[float, ...]
    candidate: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.base) != len(self.candidate):
            raise Sme2Error(f"A/B gate: {len(self.base)} base block(s) but "
                            f"{len(self.candidate)} candidate block(s); they must pair up")

    def __add__(self, other: Pairs) -> Pairs:
        return Pairs(self.base + other.base, self.candidate + other.candidate)


def line(threshold_pct: float) -> float:
    """The ratio a lower bound must pass to call a regression (see the module docstring)."""
    return 1 + threshold_pct / 200


def slowdown(pairs: Pairs, confidence: float = CONFIDENCE) -> Interval:
    """candidate / base from paired blocks (paired_ratio gives base / candidate)."""
    s = paired_ratio(list(pairs.base), list(pairs.candidate), confidence)
    inf = float("inf")
    return Interval(1 / s.point, 1 / s.high if s.high else 0.0,
                    1 / s.low if s.low else inf, confidence)


def suspected(pairs: Pairs, threshold_pct: float = DEFAULT_THRESHOLD_PCT) -> bool:
    """Worth confirmation pairs: the point estimate alone passes the line."""
    return len(pairs.base) > 0 and slowdown(pairs).point > line(threshold_pct)


def needs_more(pairs: Pairs, threshold_pct: float = DEFAULT_THRESHOLD_PCT,
               max_pairs: int = 3 + CONFIRM_PAIRS) -> bool:
    """Another confirmation pair is due: a regression is suspected, not yet called, and
    fewer than ``max_pairs`` are measured."""
    return (len(pairs.base) < max_pairs and suspected(pairs, threshold_pct)
            and judge_ab(pairs, threshold_pct).status == OK)


def judge_ab(pairs: Pairs, threshold_pct: float = DEFAULT_THRESHOLD_PCT,
             confidence: float = CONFIDENCE, category: str | None = None) -> Judgement:
    """The verdict on paired blocks; ``summary`` reads
    ``regression 1.21x [1.15, 1.27] vs the base program, re-measured in this session``."""
    if threshold_pct < 0:
        raise Sme2Error(f"the regression threshold must be 0% or more, got {threshold_pct:g}%")
    n = len(pairs.base)
    if n < 2:
        return _unjudged(f"A/B gate needs 2 or more pairs of blocks, got {n}", threshold_pct)
    if min(pairs.base + pairs.candidate) <= 0:
        return _unjudged("a zero time cannot form a ratio", threshold_pct)
    r = slowdown(pairs, confidence)
    limit = line(threshold_pct)
    if r.low > limit:
        status, word = REGRESSION, f"{(r.point - 1) * 100:.1f}% slower"
    elif r.high < 1 / limit:
        status, word = IMPROVEMENT, f"{(1 - r.point) * 100:.1f}% faster"
    else:
        status, word = OK, "within noise"
    reason = (f"{word}: {n} interleaved pair(s) of blocks against {AGAINST}; ratio {r} "
              f"{int(confidence * 100)}% CI; limit {(limit - 1) * 100:.1f}% = half the "
              f"threshold {threshold_pct:g}% (the change to detect)")
    base_level = sorted(pairs.base)[n // 2]
    cur_level = sorted(pairs.candidate)[n // 2]
    return Judgement(status, r, threshold_pct, 0.0, reason, base_level, cur_level, 1, n,
                     category, against=AGAINST)


def missing_base(why: str, threshold_pct: float = DEFAULT_THRESHOLD_PCT) -> Judgement:
    """The one line when there is no base to re-measure."""
    return _unjudged(f"the base program is missing: {why}; record a baseline with "
                     "--save-baseline (it keeps the program) or name a base runner",
                     threshold_pct)


def _unjudged(reason: str, threshold_pct: float) -> Judgement:
    return replace(not_compared(reason, threshold_pct), against=AGAINST)

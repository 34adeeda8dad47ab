"""The regression gate's rule: a benchmark's block-level values judged against a baseline's
sessions (:func:`judge_levels`); the verdict on a ratio interval is
:mod:`pytest_sme2.gate.decide`'s, shared with every other comparison.
:mod:`pytest_sme2.gate.rule` finds the baseline and applies it.

The rule (:func:`judge_levels`) and why it looks like this
----------------------------------------------------------
Timings on a shared machine drift between processes and between sessions far more than runs
within one process vary (±30% between sessions, 15% between two processes a minute apart,
1-3% within one: docs/regression-gate.md). So:

1. The unit of replication is a block (its median), never a run. Pooling runs would make a
   30-run block look like 30 independent observations and shrink every interval to nothing.
2. Levels are medians of medians: a session's level is the median of its block medians, the
   baseline's level the median of its session levels (every session weighs the same, however
   many blocks it had); the candidate's level is the median of its block medians.
   ``ratio = candidate / baseline`` (above 1 = slower).
3. Interval: a two-level (cluster) percentile bootstrap — resample baseline sessions, then
   blocks within each drawn session; resample candidate blocks — of the ratio of levels
   (:func:`pytest_sme2.stats.two_level_bootstrap`).
4. Noise floor: how far one fresh session may land from the baseline level with no change in
   the code — the baseline's own spread between sessions, as a one-sided 97.5% prediction
   bound on the log scale (:func:`pytest_sme2.stats.noise_floor`). Below 3 sessions all blocks
   are pooled instead and the floor is at least 25%: drift between sessions has not been
   observed yet. End to end, a session that ran slow or fast while the next one agrees with
   the rest is left out first and named (:mod:`pytest_sme2.gate.robust`).
5. Verdict (:func:`pytest_sme2.gate.decide.decide`, one rule for every comparison):
   ``regression`` only when the interval's *lower* bound exceeds ``1 + max(threshold, noise
   floor)``; ``improvement`` when its upper bound is below the reciprocal; ``no change`` when
   the interval, widened by the noise floor, lies within the threshold either way; else
   ``cannot tell``. A baseline from another device is ``not_compared`` with the
   reason, never compared silently; a change under test (model, recipe, versions, runner
   build) is judged, and named.
6. Confirmation: a regression suspected on one block is measured again in fresh processes and
   judged on all blocks, so one process in a bad state cannot fail CI.

This trades sensitivity for the absence of false alarms: a CI gate that cries wolf gets
disabled. On a quiet, pinned device the floor is small and the threshold decides; on a noisy VM
the floor grows until recording more sessions (or a quieter runner) narrows it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from pytest_sme2 import units
from pytest_sme2.errors import Sme2Error
from pytest_sme2.gate.policy import DEFAULT_THRESHOLD_PCT
from pytest_sme2.gate.decide import decide
from pytest_sme2.results.judgement import (CANNOT_TELL, IMPROVEMENT, INSTRUCTIONS,  # noqa: F401
                                           LOAD, MEMORY, NO_CHANGE, NOT_COMPARED, OK,
                                           PREFILL, PREFILL_INSTRUCTIONS, REGRESSION, TIME,
                                           TTFT, Judgement)
from pytest_sme2.stats import (DEFAULT_MARGIN, UNMEASURED_DRIFT, UNMEASURED_DRIFT_INSTRUCTIONS,
                               UNMEASURED_DRIFT_MEMORY, Interval, noise_floor,
                               two_level_bootstrap)

CONFIDENCE = 0.95
RESAMPLES = 4000


@dataclass(frozen=True)
class _Measure:
    unit: str               # how its values are written in the reason
    more: str               # the word for up ...
    fewer: str              # ... and for down
    unmeasured: float       # the least noise floor below MIN_SESSIONS
    margin: float           # the least change that is not noise (counts: none)


_MEASURES = {
    TIME: _Measure("ms", "slower", "faster", UNMEASURED_DRIFT, DEFAULT_MARGIN),
    INSTRUCTIONS: _Measure("instructions", "more", "fewer", UNMEASURED_DRIFT_INSTRUCTIONS, 0.0),
    LOAD: _Measure("ms", "slower", "faster", UNMEASURED_DRIFT, DEFAULT_MARGIN),
    MEMORY: _Measure("kB", "more", "less", UNMEASURED_DRIFT_MEMORY, 0.0),
    PREFILL: _Measure("ms", "slower", "faster", UNMEASURED_DRIFT, DEFAULT_MARGIN),
    TTFT: _Measure("ms", "slower", "faster", UNMEASURED_DRIFT, DEFAULT_MARGIN),
    PREFILL_INSTRUCTIONS: _Measure("instructions", "more", "fewer",
                                   UNMEASURED_DRIFT_INSTRUCTIONS, 0.0),
}


@dataclass(frozen=True)
class Bootstrap:
    """How the rule's interval is drawn (:func:`pytest_sme2.stats.two_level_bootstrap`)."""

    confidence: float = CONFIDENCE
    resamples: int = RESAMPLES
    seed: int = 0


def not_compared(reason: str, threshold_pct: float = DEFAULT_THRESHOLD_PCT,
                 category: str | None = None) -> Judgement:
    return Judgement(NOT_COMPARED, None, threshold_pct, None, reason, category=category)


def judge_levels(base_sessions: Sequence[Sequence[float]], current: Sequence[float],
                 threshold_pct: float = DEFAULT_THRESHOLD_PCT, measure: str = TIME,
                 category: str | None = None, bootstrap: Bootstrap = Bootstrap()) -> Judgement:
    """The rule on block-level values: ``base_sessions`` holds one value per block for each
    baseline session, ``current`` one value per block of this session. ``measure``
    INSTRUCTIONS: instruction counts (--sme2-measure instructions), judged by the same rule;
    below 3 baseline sessions their noise floor is at least ``UNMEASURED_DRIFT_INSTRUCTIONS``
    (0.1%) instead of time's 25%, and the judgement says it is of instructions. ``measure``
    LOAD or MEMORY: one value per cold process (load ms, peak kB), with their own least floor.
    Each measure's unit and words are in ``_MEASURES``."""
    kind = _MEASURES[measure]
    unit = kind.unit
    if threshold_pct < 0:
        raise Sme2Error(f"the regression threshold must be 0% or more, got {threshold_pct:g}%")
    sessions = [np.asarray(s, dtype=float) for s in base_sessions if len(s)]
    cur = np.asarray(current, dtype=float)
    if not sessions:
        return not_compared("the baseline holds no sessions; record one with --save-baseline",
                            threshold_pct, category)
    if cur.size == 0:
        return not_compared("nothing measured to compare", threshold_pct, category)
    if (cur <= 0).any() or any((s <= 0).any() for s in sessions):
        return not_compared("a zero time cannot form a ratio", threshold_pct, category)
    base_level = float(np.median([np.median(s) for s in sessions]))
    cur_level = float(np.median(cur))
    point = cur_level / base_level
    confidence = bootstrap.confidence
    low, high = two_level_bootstrap(sessions, cur, confidence, bootstrap.resamples,
                                    bootstrap.seed)
    ratio = Interval(point, min(low, point), max(high, point), confidence)
    floor, source = noise_floor(sessions, kind.unmeasured)
    more, fewer = kind.more, kind.fewer
    status, word = decide(ratio, threshold_pct, kind.margin, floor, words=(more, fewer))
    clear = (1 + kind.margin) * (1 + floor) - 1
    if status == CANNOT_TELL:
        word = (f"cannot tell: {threshold_pct:g}% is not resolvable against this baseline "
                f"(the interval and the noise floor {units.fraction(floor)} admit both no "
                f"change and a change of {threshold_pct:g}%)")
    what = f"{category} " if category else ""
    if measure != TIME:
        what = f"{measure} {what}"
    reason = (f"{what}{word}: median {cur_level:.4g} {unit} ({cur.size} block(s)) vs baseline "
              f"{base_level:.4g} {unit} ({len(sessions)} session(s)); ratio {ratio} "
              f"{int(confidence * 100)}% CI; a change is called when the interval clears "
              f"{units.fraction(clear)} (margin {units.fraction(kind.margin)} and noise floor "
              f"{units.fraction(floor)} from {source}) and its point passes half the "
              f"threshold {threshold_pct:g}%")
    return Judgement(status, ratio, threshold_pct, floor * 100, reason, base_level, cur_level,
                     len(sessions), int(cur.size), category, measure=measure)

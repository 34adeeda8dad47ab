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
half the threshold. ``improvement`` symmetrically.

Disturbed pairs. On a shared machine one block in a few runs while something else takes the
core, and its pair's ratio lands 20-40% off (measured: ``1.10 1.37 1.11 0.94 1.13 …`` for a
+10% change). Two things keep such a pair from hiding a change:

- **screening** (:func:`screen`): a pair whose log ratio lies more than ``SCREEN_SCALES``
  robust scales (1.4826 x MAD) *and* more than 5% from the median of the others is left out
  of the interval, at most one pair in four, and the verdict names it;
- **pairs until told** (:func:`pytest_sme2.gate.decide.until_told`): while the verdict is
  "cannot tell", the caller doubles the pairs, up to ``--sme2-max-pairs`` and the time budget,
  and judges again; then "cannot tell" stays, saying what the pairs can resolve.

The verdicts (regression, improvement, no change, cannot tell) are
:func:`pytest_sme2.gate.decide.decide`'s, the rule every comparison shares; measured in
docs/regression-gate.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from statistics import median
from typing import Sequence

from pytest_sme2.errors import Sme2Error
from pytest_sme2.gate.decide import decide, unresolved
from pytest_sme2.gate.levels import PREFILL, TTFT, Judgement, not_compared
from pytest_sme2.results.judgement import CANNOT_TELL, IMPROVEMENT, REGRESSION
from pytest_sme2.gate.policy import DEFAULT_THRESHOLD_PCT
from pytest_sme2.results import BlockResult
from pytest_sme2.stats import DEFAULT_MARGIN, Interval, paired_ratio

AGAINST = "the base program, re-measured in this session"
CONFIDENCE = 0.95
SCREEN_SCALES = 4.0     # robust scales from the others' median that make a pair disturbed ...
SCREEN_LEAST = math.log(1.05)   # ... and at least 5% away: ordinary spread stays in
SIGN_ALPHA = 0.05       # the sign test's one-sided level (5 pairs of 5 is the least that pass)


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
    """The ratio the point estimate must pass to call a regression: half the threshold."""
    return 1 + threshold_pct / 200


def slowdown(pairs: Pairs, confidence: float = CONFIDENCE) -> Interval:
    """candidate / base from paired blocks (paired_ratio gives base / candidate)."""
    s = paired_ratio(list(pairs.base), list(pairs.candidate), confidence)
    inf = float("inf")
    return Interval(1 / s.point, 1 / s.high if s.high else 0.0,
                    1 / s.low if s.low else inf, confidence)


def _logs(pairs: Pairs) -> list[float]:
    return [math.log(c / b) for b, c in zip(pairs.base, pairs.candidate)]


def screen(pairs: Pairs) -> list[int]:
    """The disturbed pairs to leave out (0-based, worst first): each lies more than
    ``SCREEN_SCALES`` robust scales and ``SCREEN_LEAST`` from the median of the pairs still
    kept besides it; at most one pair in four."""
    if min(pairs.base + pairs.candidate, default=0) <= 0:
        return []
    logs = _logs(pairs)
    out: list[int] = []
    while len(out) < len(logs) // 4:
        kept = [i for i in range(len(logs)) if i not in out]
        centre = median(logs[i] for i in kept)
        worst = max(kept, key=lambda i: abs(logs[i] - centre))
        others = [logs[i] for i in kept if i != worst]
        middle = median(others)
        scale = 1.4826 * median(abs(x - middle) for x in others)
        if abs(logs[worst] - middle) <= max(SCREEN_SCALES * scale, SCREEN_LEAST):
            break
        out.append(worst)
    return out


def _kept(pairs: Pairs, out: list[int]) -> Pairs:
    keep = [i for i in range(len(pairs.base)) if i not in out]
    return Pairs(tuple(pairs.base[i] for i in keep), tuple(pairs.candidate[i] for i in keep))


def _most_pairs_agree(pairs: Pairs, status: str) -> bool:
    """The sign test beside the interval: more pairs clear the noise margin in the change's
    direction than chance gives (one-sided binomial p below ``SIGN_ALPHA``). A machine whose
    blocks switch between two speeds (2 threads on 2 shared cores: 0.039 or 0.063 ms, ratios
    of 0.62, 1.0 or 1.6) makes a few lopsided pairs that move the mean log ratio, and the
    t-interval with it; the pairs' majority does not move."""
    up = status == REGRESSION
    n = len(pairs.base)
    agree = sum((c / b > 1 + DEFAULT_MARGIN) if up else (c / b < 1 / (1 + DEFAULT_MARGIN))
                for b, c in zip(pairs.base, pairs.candidate))
    p = sum(math.comb(n, k) for k in range(agree, n + 1)) / 2 ** n
    return p < SIGN_ALPHA


def judge_ab(pairs: Pairs, threshold_pct: float = DEFAULT_THRESHOLD_PCT,
             confidence: float = CONFIDENCE, category: str | None = None) -> Judgement:
    """The verdict on paired blocks (disturbed pairs screened out and named); ``summary``
    reads ``regression 1.21x [1.15, 1.27] vs the base program, re-measured in this session``."""
    if threshold_pct < 0:
        raise Sme2Error(f"the regression threshold must be 0% or more, got {threshold_pct:g}%")
    n = len(pairs.base)
    if n < 2:
        return _unjudged(f"A/B gate needs 2 or more pairs of blocks, got {n}", threshold_pct)
    if min(pairs.base + pairs.candidate) <= 0:
        return _unjudged("a zero time cannot form a ratio", threshold_pct)
    out = screen(pairs)
    kept = _kept(pairs, out)
    r = slowdown(kept, confidence)
    status, word = decide(r, threshold_pct)
    if status in (REGRESSION, IMPROVEMENT) and not _most_pairs_agree(kept, status):
        status = CANNOT_TELL
    if status == CANNOT_TELL:
        word = f"cannot tell: {unresolved(r, len(pairs.base) - len(out), threshold_pct)}"
    left_out = ""
    if out:
        ratios = [pairs.candidate[i] / pairs.base[i] for i in out]
        left_out = " (" + ", ".join(f"pair {i + 1} left out: ratio {x:.2f}x, disturbed"
                                    for i, x in zip(out, ratios)) + ")"
    reason = (f"{word}: {n} interleaved pair(s) of blocks against {AGAINST}{left_out}; "
              f"ratio {r} {int(confidence * 100)}% CI; a change is called when the interval "
              f"clears the {DEFAULT_MARGIN:.0%} noise margin and its point passes "
              f"{(line(threshold_pct) - 1) * 100:.1f}% = half the threshold {threshold_pct:g}% "
              "(the change to detect)")
    base_level = sorted(pairs.base)[n // 2]
    cur_level = sorted(pairs.candidate)[n // 2]
    return Judgement(status, r, threshold_pct, 0.0, reason, base_level, cur_level, 1, n,
                     category, against=AGAINST)


def judge_phases(base: Sequence[BlockResult], candidate: Sequence[BlockResult],
                 threshold_pct: float = DEFAULT_THRESHOLD_PCT) -> list[Judgement]:
    """An LLM's prefill time and time to first token by the same paired rule, base block ``i``
    beside candidate block ``i`` (each block's median over its generations); its decode is
    the blocks' own end to end. Nothing for blocks that are not generations."""
    out = []
    for measure, value in ((PREFILL, lambda g: g.prefill.median_ms), (TTFT, lambda g: g.ttft_ms)):
        pairs = [(value(b.generation), value(c.generation)) for b, c in zip(base, candidate)
                 if b.generation is not None and c.generation is not None]
        kept = [(x, y) for x, y in pairs if x is not None and y is not None]
        if not kept:
            continue
        j = judge_ab(Pairs(tuple(x for x, _ in kept), tuple(y for _, y in kept)), threshold_pct)
        out.append(replace(j, measure=measure, reason=f"{measure} {j.reason}"))
    return out


def missing_base(why: str, threshold_pct: float = DEFAULT_THRESHOLD_PCT) -> Judgement:
    """The one line when there is no base to re-measure."""
    return _unjudged(f"the base program is missing: {why}; record a baseline with "
                     "--save-baseline (it keeps the program) or name a base runner",
                     threshold_pct)


def _unjudged(reason: str, threshold_pct: float) -> Judgement:
    return replace(not_compared(reason, threshold_pct), against=AGAINST)

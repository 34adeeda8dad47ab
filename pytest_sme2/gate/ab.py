"""The paired rule: two programs (or runners) measured in interleaved pairs of blocks in this
session, judged — the A/B gate (``--sme2-gate-mode ab``), the stored gate's confirmation pairs,
``sme2_compare`` and bisect's probes all call :func:`judge_pairs`.

Why pairs: timings on a shared machine drift ±30% between sessions (docs/regression-gate.md),
so a stored baseline's noise floor is wide. Two programs measured minutes apart, block by
block, share the machine's state: the drift cancels within a pair (Chromium's Pinpoint, duet
benchmarking).

The rule. ``ratio = candidate / base`` per pair (above 1 = slower). Its estimate and interval
are robust (:func:`pytest_sme2.stats.paired_ratio`: Hodges-Lehmann with the signed-rank
interval), because a machine that switches between speeds makes pairs whose two blocks ran at
different speeds; their ratios (0.55 or 1.8 on a VM whose two speeds are 1.8x apart) swing a
mean. Where the machine-state probe saw the two blocks of a pair at different speeds
(:mod:`pytest_sme2.analysis.machine_state`), the pair is left out altogether and the verdict
says how many: such a pair measures the machine, not the programs. Beside the interval, most
kept pairs must agree on the direction of a change (a sign test). The verdict is
:func:`pytest_sme2.gate.decide.decide`'s, the rule every comparison shares; while it is "cannot
tell", the caller doubles its pairs (:mod:`pytest_sme2.measure.pairs`). Measured in
docs/regression-gate.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from statistics import median
from typing import Callable, Sequence

from pytest_sme2.analysis.machine_state import straddle
from pytest_sme2.errors import Sme2Error
from pytest_sme2.gate.decide import decide, unresolved
from pytest_sme2.gate.levels import Judgement, not_compared
from pytest_sme2.results.judgement import CANNOT_TELL, IMPROVEMENT, REGRESSION
from pytest_sme2.gate.policy import DEFAULT_THRESHOLD_PCT
from pytest_sme2.results import BLOCK_PHASES, BlockResult, block_phases
from pytest_sme2.stats import DEFAULT_MARGIN, Interval, paired_ratio

AGAINST = "the base program, re-measured in this session"
CONFIDENCE = 0.95
SIGN_ALPHA = 0.05       # the sign test's one-sided level (5 pairs of 5 is the least that pass)


@dataclass(frozen=True)
class Pairs:
    """Block values (median ms) of base and candidate, ``base[i]`` next to ``candidate[i]``;
    ``straddled``: the pairs (0-based) whose two blocks the machine-state probe saw at
    different machine speeds, and ``switch`` the largest speed ratio it saw across one."""

    base: tuple[float, ...]
    candidate: tuple[float, ...]
    straddled: tuple[int, ...] = ()
    switch: float = 1.0

    def __post_init__(self) -> None:
        if len(self.base) != len(self.candidate):
            raise Sme2Error(f"A/B gate: {len(self.base)} base block(s) but "
                            f"{len(self.candidate)} candidate block(s); they must pair up")

    def __add__(self, other: Pairs) -> Pairs:
        moved = tuple(i + len(self.base) for i in other.straddled)
        return Pairs(self.base + other.base, self.candidate + other.candidate,
                     self.straddled + moved, max(self.switch, other.switch))

    @property
    def kept(self) -> Pairs:
        """The pairs the probe did not see straddle a change of machine speed."""
        keep = [i for i in range(len(self.base)) if i not in self.straddled]
        return Pairs(tuple(self.base[i] for i in keep), tuple(self.candidate[i] for i in keep))

    @property
    def straddle_note(self) -> str:
        """``the machine switched speed 1.8x in 14 of 40 pairs (left out)``, or ""."""
        if not self.straddled:
            return ""
        return (f"the machine switched speed {self.switch:.1f}x in {len(self.straddled)} of "
                f"{len(self.base)} pairs (left out)")


def block_value(result: BlockResult) -> float:
    """A block's one number in a pair: its end-to-end median."""
    return float(median(result.e2e_ms))


def pairs_of(base: Sequence[BlockResult], candidate: Sequence[BlockResult],
             value: Callable[[BlockResult], float] = block_value) -> Pairs:
    """Each pair's ``value`` (by default its end-to-end median), base block ``i`` beside
    candidate block ``i``, with the pairs the machine-state probe saw straddle two speeds."""
    n = min(len(base), len(candidate))
    scale = probe_scale(base[:n], candidate[:n])
    seen = [straddle(b.probe, c.probe, 1.0, scale) for b, c in zip(base[:n], candidate[:n])]
    return Pairs(tuple(value(b) for b in base[:n]), tuple(value(c) for c in candidate[:n]),
                 tuple(i for i, s in enumerate(seen) if s),
                 max((s for s in seen if s), default=1.0))


def probe_scale(base: Sequence[BlockResult], candidate: Sequence[BlockResult]) -> float:
    """How much slower the candidate's runner times the probe than the base's at one machine
    speed (1.0 for one runner; the Python runtime adds its binding's microseconds): the median
    over the probed pairs of their probe ratio. Most pairs run both blocks at one speed, and
    the ABBA order makes the others straddle either way, so the median is the runners'."""
    ratios = [c.probe.level / b.probe.level for b, c in zip(base, candidate)
              if b.probe is not None and c.probe is not None and b.probe.before_us
              and c.probe.before_us and b.probe.level > 0]
    return float(median(ratios)) if ratios else 1.0


def line(threshold_pct: float) -> float:
    """The ratio the point estimate must pass to call a regression: half the threshold."""
    return 1 + threshold_pct / 200


def slowdown(pairs: Pairs, confidence: float = CONFIDENCE) -> Interval:
    """candidate / base from paired blocks (paired_ratio gives base / candidate)."""
    s = paired_ratio(list(pairs.base), list(pairs.candidate), confidence)
    inf = float("inf")
    return Interval(1 / s.point, 1 / s.high if s.high else 0.0,
                    1 / s.low if s.low else inf, confidence)


def _most_pairs_agree(pairs: Pairs, status: str, margin: float) -> bool:
    """The sign test beside the interval: more pairs clear the noise margin in the change's
    direction than chance gives (one-sided binomial p below ``SIGN_ALPHA``). A few lopsided
    pairs (a block in a bad process state) move an estimate; the pairs' majority does not."""
    up = status == REGRESSION
    n = len(pairs.base)
    agree = sum((c / b > 1 + margin) if up else (c / b < 1 / (1 + margin))
                for b, c in zip(pairs.base, pairs.candidate))
    p = sum(math.comb(n, k) for k in range(agree, n + 1)) / 2 ** n
    return p < SIGN_ALPHA


def judge_pairs(pairs: Pairs, threshold_pct: float = DEFAULT_THRESHOLD_PCT,
                margin: float = DEFAULT_MARGIN, relevant_pct: float | None = None,
                against: str = AGAINST, category: str | None = None) -> Judgement:
    """The verdict on paired blocks, pairs that straddled a change of machine speed left out
    and counted; ``summary`` reads ``regression 1.21x [1.15, 1.27] vs the base program,
    re-measured in this session``. ``margin`` and ``relevant_pct``:
    :func:`pytest_sme2.gate.decide.decide`'s (a comparison's own margin; the gate's 2%)."""
    if threshold_pct < 0:
        raise Sme2Error(f"the regression threshold must be 0% or more, got {threshold_pct:g}%")
    n = len(pairs.base)
    if n < 2:
        return _unjudged(f"A/B gate needs 2 or more pairs of blocks, got {n}", threshold_pct)
    if min(pairs.base + pairs.candidate) <= 0:
        return _unjudged("a zero time cannot form a ratio", threshold_pct)
    kept = pairs.kept
    note = pairs.straddle_note
    if len(kept.base) < 2:
        r = slowdown(pairs, CONFIDENCE)
        status, word = CANNOT_TELL, f"cannot tell: {note}; too few pairs ran at one speed"
    else:
        r = slowdown(kept, CONFIDENCE)
        status, word = decide(r, threshold_pct, margin, relevant_pct=relevant_pct)
        if status in (REGRESSION, IMPROVEMENT) and not _most_pairs_agree(kept, status, margin):
            status = CANNOT_TELL
        if status == CANNOT_TELL:
            cause = f"; {note}" if note else ""
            word = (f"cannot tell: {unresolved(r, len(kept.base), threshold_pct)}{cause}")
    left_out = f" ({note})" if note and status != CANNOT_TELL else ""
    relevant = line(threshold_pct) if relevant_pct is None else 1 + relevant_pct / 100
    reason = (f"{word}: {n} interleaved pair(s) of blocks against {against}{left_out}; "
              f"ratio {r} {int(CONFIDENCE * 100)}% CI (Hodges-Lehmann, signed-rank); a change "
              f"is called when the interval clears the {margin:.0%} noise margin and its point "
              f"passes {(relevant - 1) * 100:.1f}%, and most pairs agree")
    base_level = sorted(pairs.base)[n // 2]
    cur_level = sorted(pairs.candidate)[n // 2]
    return Judgement(status, r, threshold_pct, 0.0, reason, base_level, cur_level, 1, n,
                     category, against=against)


def judge_ab(pairs: Pairs, threshold_pct: float = DEFAULT_THRESHOLD_PCT,
             category: str | None = None) -> Judgement:
    """The gate's paired verdict: :func:`judge_pairs` with its 2% noise margin, a change
    called once its point passes half the threshold."""
    return judge_pairs(pairs, threshold_pct, category=category)


def judge_phases(base: Sequence[BlockResult], candidate: Sequence[BlockResult],
                 threshold_pct: float = DEFAULT_THRESHOLD_PCT) -> list[Judgement]:
    """An LLM's prefill time and time to first token by the same paired rule, base block ``i``
    beside candidate block ``i`` (each block's median over its generations); its decode is
    the blocks' own end to end. Nothing for blocks that are not generations."""
    out = []
    for key in block_phases([*base, *candidate]) if base else ():
        measure = BLOCK_PHASES[key]
        j = judge_ab(pairs_of(base, candidate, lambda r, k=key: r.block_phase(k)),
                     threshold_pct)
        out.append(replace(j, measure=measure, reason=f"{measure} {j.reason}"))
    return out


def _unjudged(reason: str, threshold_pct: float) -> Judgement:
    return replace(not_compared(reason, threshold_pct), against=AGAINST)

""""Cannot tell" in the summaries, on a line of its own (``--sme2-on-unresolved warn``, the
default): which benchmarks' gate could neither call a change of its threshold's size nor rule
one out, and what their data could resolve — from the verdicts every block of a judged
benchmark carries. A "cannot tell" is never summed up as ``ok``."""

from __future__ import annotations

from typing import Iterable

from pytest_sme2.gate.decide import floor_remedy, unresolved
from pytest_sme2.results import BlockResult, ComparisonRecord, Judgement

NAMED = 5      # benchmarks a note names; results.json has them all


def _benchmark(r: BlockResult) -> str:
    """A comparison's blocks (``test[runner#3]``) count once per side, as their test."""
    return r.benchmark.split("::")[-1]


def _why(j: Judgement) -> str:
    """What the data could resolve: pairs say their minimum detectable change; a stored
    baseline its noise floor."""
    if j.ratio is None:
        return j.reason
    if _paired(j):
        return unresolved(j.ratio, j.current_blocks, j.threshold_pct)
    floor = j.noise_floor_pct or 0.0
    why = (f"{j.threshold_pct:g}% is not resolvable against the stored baseline (ratio "
           f"{j.ratio}; its noise floor {floor:.1f}%)")
    if floor >= j.threshold_pct:
        why += f": {floor_remedy(floor, j.threshold_pct, j.measure)}"
    return why


def _paired(j: Judgement) -> bool:
    """Judged on pairs measured in this session (more pairs could narrow it), not against the
    stored sessions."""
    return j.against != "baseline"


def _what(r: BlockResult) -> Iterable[tuple[str, str, bool]]:
    """(what was judged, why it is unresolved, whether by pairs) for each unresolved verdict
    on the block."""
    judged = [("end to end", r.judgement),
              *((c, j) for c, j in (r.category_judgements or {}).items()),
              *((p, j) for p, j in (r.phase_judgements or {}).items()),
              *((m, j) for m, j in (r.startup_judgements or {}).items()),
              ("instructions", r.instructions_judgement)]
    # Judged and reported only (a threshold "off") is never a failure: not a warning either.
    return [(what, _why(j), _paired(j)) for what, j in judged
            if j is not None and j.unresolved and j.enforced]


def comparison_lines(comparisons: Iterable[ComparisonRecord]) -> list[str]:
    """``cannot tell: test_x: native vs python: 5% is not resolvable here (...)``: a
    comparison that could neither call a difference nor rule one out (on a real CPU; an
    emulated one's times say nothing)."""
    out = []
    for c in comparisons:
        if c.verdict != "cannot tell" or c.emulated:
            continue
        reason = c.judgement.reason.split(": ", 1)[1] if c.judgement is not None else ""
        why = reason.split(": ")[0] if reason else "cannot tell"
        out.append(f"cannot tell: {c.name}: {c.candidate} vs {c.base}: {why} (more pairs: "
                   "--sme2-max-pairs, --sme2-precision-budget; calibrate with pytest-sme2 aa)")
    return out


def unresolved_lines(blocks: Iterable[BlockResult],
                     comparisons: Iterable[ComparisonRecord] = ()) -> list[str]:
    """``cannot tell: 2 of 6 judged benchmarks could neither call nor rule out a change of
    their threshold's size: test_x end to end (10% is not resolvable here (…)); …``; nothing
    when every verdict was told."""
    judged: dict[tuple[str, str], list[tuple[str, str, bool]]] = {}
    for r in blocks:
        if r.judgement is None or r.judgement.status == "not_compared":
            continue
        judged.setdefault((_benchmark(r), r.runner_name), _what(r))
    missed = {k: v for k, v in judged.items() if v}
    if not missed:
        return comparison_lines(comparisons)
    named = list(missed.items())[:NAMED]
    line = (f"cannot tell: {len(missed)} of {len(judged)} judged benchmark(s) could neither "
            "call nor rule out a change of their threshold's size: "
            + "; ".join(f"{name} ({runner}) {what}: {why}"
                        for (name, runner), got in named for what, why, _ in got[:1]))
    if len(missed) > NAMED:
        line += f"; and {len(missed) - NAMED} more (results.json)"
    # More pairs help only verdicts made of pairs; the stored ones say their own remedy.
    if any(paired for got in missed.values() for _, _, paired in got):
        line += " (more pairs: --sme2-max-pairs, --sme2-precision-budget)"
    return [line] + comparison_lines(comparisons)

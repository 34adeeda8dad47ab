"""``--sme2-precision`` in the summaries: how many benchmarks (and comparisons) got within the
asked interval, and, by name, those that did not with what stopped them — from the ``precision``
record every block of such a benchmark carries
(:class:`pytest_sme2.results.PrecisionOutcome`)."""

from __future__ import annotations

import re
from typing import Iterable

from pytest_sme2.results import BlockResult, PrecisionOutcome

NAMED = 5      # benchmarks a note names; results.json has them all


def _benchmark(r: BlockResult) -> str:
    """A comparison's blocks (``test[runner#3]``) count once, as their test."""
    return re.sub(r"\[[^\[\]#]*#\d+\]$", "", r.name)


def precision_lines(blocks: Iterable[BlockResult]) -> list[str]:
    """``--sme2-precision 2%: 5 of 6 within ±2%; not reached: test_x (time budget 60 s spent
    after 41 pair(s): interval ±2.6%, not ±2% …)``; nothing when precision was not asked."""
    outcome: dict[str, PrecisionOutcome] = {}
    for r in blocks:
        if r.precision is not None:
            outcome.setdefault(_benchmark(r), r.precision)
    if not outcome:
        return []
    target = next(iter(outcome.values())).target_pct
    missed = {name: got for name, got in outcome.items() if not got.reached}
    line = (f"--sme2-precision {target:g}%: {len(outcome) - len(missed)} of {len(outcome)} "
            f"within ±{target:g}%")
    if missed:
        named = list(missed.items())[:NAMED]
        line += "; not reached: " + "; ".join(f"{n} ({got.why or '?'})" for n, got in named)
        if len(missed) > NAMED:
            line += f"; and {len(missed) - NAMED} more (results.json)"
    return [line]

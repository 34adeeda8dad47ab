"""The gate's power on synthetic data, over more simulated gates than the fast tier affords
(the rule and its fast checks: tests/unit/gate/test_gate.py)."""

from __future__ import annotations

import re

from pytest_sme2.gate.levels import REGRESSION, judge_levels
from tests.unit.gate.test_gate import _count, _world


def test_a_30_percent_slowdown_is_flagged():
    """(b) With ten 3-block baseline sessions and 3 current blocks, a 30% slowdown under ±15%
    drift between processes is flagged in 143 of 200 seeds (72%: three blocks cannot pin a
    median down better, and the interval must clear the noise floor; the rest cannot tell,
    and a session then measures pairs against the kept base program), a 50% one in all; a
    flagged case says its numbers."""
    j = judge_levels(*_world(0, 1.5, sessions=10, blocks=3, current=3), threshold_pct=10)
    assert j.status == REGRESSION and j.regressed
    assert re.match(r"\d+\.\d% slower: median [\d.]+ ms \(3 block\(s\)\) vs baseline [\d.]+ ms "
                    r"\(10 session\(s\)\); ratio [\d.]+x \[[\d.]+, [\d.]+\] 95% CI", j.reason)
    assert _count(1.3, REGRESSION, 200, sessions=10, blocks=3, current=3) >= 130
    assert _count(1.5, REGRESSION, 100, sessions=10, blocks=3, current=3) == 100

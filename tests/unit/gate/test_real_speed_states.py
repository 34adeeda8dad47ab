"""The paired rule on real blocks of a 2-vCPU VM, with the probe's readings
(tests/data/speed_states/toy_cnn_native_probed.json: 600 native toy_cnn blocks back to back,
recorded beside other work): identical code is never called a change, a +10% one is."""

from __future__ import annotations

import json
from pathlib import Path

from pytest_sme2.gate.ab import Pairs, judge_ab
from pytest_sme2.results.judgement import IMPROVEMENT, REGRESSION

DATA = Path(__file__).parents[2] / "data" / "speed_states" / "toy_cnn_native_probed.json"


def _pairs(start: int, n: int, factor: float = 1.0) -> Pairs:
    """``n`` pairs of consecutive blocks from ``start`` (A B, A B, ...), the candidate's times
    times ``factor``; straddles as the probe saw them."""
    blocks = json.loads(DATA.read_text())["blocks"][start:start + 2 * n]
    base, cand = blocks[0::2], blocks[1::2]
    level = [(b["before_us"][0] + b["after_us"][0]) / 2 for b in blocks]
    moved = [max(b["before_us"][0], b["after_us"][0]) / min(b["before_us"][0], b["after_us"][0])
             for b in blocks]
    straddled = tuple(i for i in range(n)
                      if max(level[2 * i], level[2 * i + 1]) / min(level[2 * i],
                                                                     level[2 * i + 1]) > 1.15
                      or max(moved[2 * i], moved[2 * i + 1]) > 1.15)
    return Pairs(tuple(b["runs"][0] for b in base),
                 tuple(b["runs"][0] * factor for b in cand), straddled, 1.2)


def test_identical_code_is_never_a_change_and_ten_percent_is_caught():
    starts = range(0, 600 - 2 * 12, 24)
    same = [judge_ab(_pairs(s, 12)).status for s in starts]
    assert REGRESSION not in same and IMPROVEMENT not in same
    slower = [judge_ab(_pairs(s, 12, 1.10)).status for s in starts]
    assert slower.count(REGRESSION) >= 0.9 * len(slower), slower

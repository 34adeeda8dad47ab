"""The machine's speed in the outputs (pytest_sme2.report.machine_notes): a benchmark whose runs
fell into two speeds says so, a comparison the machine swung says how, the median of a mixture
never stands without its mark, and the session says it once."""

from __future__ import annotations

import pytest

from pytest_sme2.analysis.latency import latency_stats
from pytest_sme2.measure.comparison import make_comparison
from pytest_sme2.report.machine_notes import (block_notes, comparison_notes, mixed,
                                              report_lines, session_lines)
from pytest_sme2.report.terminal import MIXED_SUMMARY, benchmark_line, summary_table
from pytest_sme2.results.machine import Mode, ProbeReading
from pytest_sme2.report.view import SessionView
from pytest_sme2.results import BlockResult
from tests.fakes.baselines import bench_result
from tests.fakes.results_docs import generation_block

TWO = (Mode(0.107, 0.62, 19), Mode(0.19, 0.38, 11))


def _block(median: float, probe: float | None = 14.0, moved: float = 1.0, nodeid="b.py::t[x]",
           runner="python", block=None):
    r = bench_result((median,) * 3, nodeid=nodeid, extra={"block": block},
                     runner={"name": runner, "kind": "x", "labels": {}})
    r.e2e = latency_stats([median] * 3)
    if probe is not None:
        r.probe = ProbeReading([probe] * 24, [probe * moved] * 24)
    return r


def test_a_block_whose_runs_fell_into_two_speeds_says_so_on_its_line():
    r = _block(0.12)
    r.modes = TWO
    note = "its runs fell into two speeds: 62% at 0.107 ms, 38% at 0.190 ms (1.8x): its median " \
           "is a mixture's"
    assert block_notes(r) == [note]
    assert benchmark_line(r).endswith(f" | {note}")
    assert mixed([r])


def test_a_block_the_machine_moved_during_says_how_far():
    r = _block(0.12, moved=1.6)
    assert block_notes(r) == ["the machine's speed moved 1.6x during its runs (probe 14.0 -> "
                              "22.4 us)"]
    assert block_notes(_block(0.12, moved=1.05)) == []      # the probe's own noise


def test_the_summary_marks_a_mixtures_median_and_says_what_the_mark_means():
    steady = _block(0.1, nodeid="b.py::steady")
    swung = _block(0.12, nodeid="b.py::swung")
    swung.modes = TWO
    lines = summary_table(SessionView.of([steady, swung]))
    row = next(line for line in lines if line.startswith("swung"))
    assert "0.120*" in row and "0.100*" not in "".join(lines)
    assert MIXED_SUMMARY in lines


def test_the_mark_is_explained_only_where_a_row_carries_it():
    # An LLM's row is the generation table's, which marks its own mixtures (RATES_MARK): a
    # session of generations alone has no latency row, so no "*" for MIXED_SUMMARY to explain.
    llm = BlockResult.from_json(generation_block())
    llm.modes = TWO
    lines = summary_table(SessionView.of([llm]))
    assert any(line.startswith("generation (LLMs") for line in lines)
    assert MIXED_SUMMARY not in lines


def _comparison(base, cand, probes_b, probes_c):
    a = [_block(m, p, nodeid=f"b.py::c[off#{i}]", runner="off", block=i)
         for i, (m, p) in enumerate(zip(base, probes_b))]
    b = [_block(m, p, nodeid=f"b.py::c[on#{i}]", runner="on", block=i)
         for i, (m, p) in enumerate(zip(cand, probes_c))]
    return make_comparison(a, b, nodeid="b.py::c").record()


def test_a_comparison_names_the_pairs_the_machine_swung_and_the_sides_mixtures():
    # pairs 3 and 4 ran their two blocks at speeds 1.8x apart; both sides' blocks at two speeds
    base = (0.107, 0.107, 0.107, 0.19, 0.107, 0.19, 0.19, 0.19)
    cand = tuple(m * 1.04 for m in (0.107, 0.107, 0.107, 0.107, 0.19, 0.19, 0.19, 0.19))
    probes_b = tuple(14.0 if m < 0.15 else 25.2 for m in base)
    probes_c = tuple(14.0 if m < 0.15 else 25.2 for m in cand)
    c = _comparison(base, cand, probes_b, probes_c)
    assert c.straddled_pairs == [3, 4] and c.machine_switch == 1.8
    notes = comparison_notes(c)
    assert notes[0] == ("2 of 8 pairs ran their two blocks at machine speeds 1.8x apart (the "
                        "probe saw it): left out of the verdict")
    assert any(n.startswith("off's blocks fell into two speeds: ") for n in notes)
    # the 6 pairs at one speed each: the candidate's steady 4% is what they show
    assert c.verdict == "slower" and 1 / c.speedup.point == pytest.approx(1.04)
    lines = report_lines([], [c])
    assert lines[0].startswith("c: 2 of 8 pairs ran their two blocks")


def test_the_session_says_the_machine_changed_speed_once():
    blocks = [_block(0.1, 14.0)] * 6 + [_block(0.18, 25.0)] * 4
    [line] = session_lines(blocks)
    assert line.startswith("sme2: the machine changed speed (10 blocks probed): two speeds 1.8x "
                           "apart: 60% at the fastest, 40% of blocks at 1.79x")
    assert session_lines([_block(0.1, 14.0)] * 6) == []
    assert session_lines([_block(0.1, None)]) == [
        "sme2: no block was probed (--sme2-probe off, or runners that cannot time the probe in "
        "their own process): the machine's speed was not watched"]

"""One grouping of blocks per question, the same in every report: the terminal summary, the
pytest-benchmark JSON, the GitHub step summary and the markdown report's units."""

from __future__ import annotations

from pathlib import Path

from pytest_sme2.report.benchmark_json import benchmark_document
from pytest_sme2.report.digest import units
from pytest_sme2.report.github import step_summary
from pytest_sme2.report.grouping import (benchmark_sides, benchmarks_by_test, comparison_blocks,
                                         point_runners, sides_per_device, unclaimed)
from pytest_sme2.report.terminal import summary_table
from pytest_sme2.report.view import SessionView
from pytest_sme2.results import load_results, pool
from tests.fakes.results_docs import mixed_doc

TOY = "bench.py::test_latency[toy_cnn-fp32-t1]"
OFF = [f"bench.py::test_sme2[sme2_off#{i}]" for i in range(5)]
ON = [f"bench.py::test_sme2[sme2_on#{i}]" for i in range(5)]
ON5 = ON + ["bench.py::test_sme2[sme2_on#5]"]    # the candidate's confirmation block is its side's


def _ids(blocks):
    return [(b.nodeid, b.block, b.device_label) for b in blocks]


def test_a_tests_benchmark_is_its_first_block_and_its_confirmation_blocks_on_its_device():
    doc = load_results(mixed_doc())
    assert [_ids(bs) for bs in benchmarks_by_test(doc.benchmarks)] == [
        [(TOY, None, "vm"), (TOY, 1, "vm"), (TOY, 2, "vm")],
        [("other.py::test_again", None, "vm")],
        [(TOY, None, "R5CX1234")]]                    # not the host's confirmation blocks


def test_the_benchmark_sides_every_summary_lists():
    doc = load_results(mixed_doc())
    sides = benchmark_sides(doc.benchmarks, doc.comparisons)
    assert [(s.test, s.role, s.runner, [b.nodeid for b in s.blocks]) for s in sides] == [
        ("test_latency[toy_cnn-fp32-t1]", "", "python", [TOY] * 3),
        ("test_again", "", "python", ["other.py::test_again"]),
        ("test_latency[toy_cnn-fp32-t1]", "", "python", [TOY]),
        ("test_sme2", "base", "sme2_off", OFF),
        ("test_sme2", "candidate", "sme2_on", ON5)]
    per_device = sides_per_device(sides, ["vm", "R5CX1234"])
    assert list(per_device) == ["vm", "R5CX1234"]
    assert [[s.blocks for s in v] for v in per_device.values()] == \
        [[s.blocks for s in sides[:2]], [s.blocks for s in sides[2:]]]
    # the view's tables share its sides: each pools its blocks once, whichever table shows it
    view = SessionView.of(doc.benchmarks, [c.to_json() for c in doc.comparisons])
    assert [s for v in view.per_device(view.sides).values() for s in v] == view.sides


def test_terminal_json_and_step_summary_group_alike():
    doc = load_results(mixed_doc())
    sides = benchmark_sides(doc.benchmarks, doc.comparisons)
    medians = [f"{pool(s.blocks).median_ms:.3f}" for s in sides]
    assert medians == ["2.100", "2.400", "1.000", "10.000", "4.000"]
    rows = [line.split() for line in summary_table(doc)[2:7]]
    assert [(r[0], r[1], r[5], r[6], r[9]) for r in rows] == [
        (s.first.device_label, s.test, s.runner, m, str(sum(len(b.e2e_ms) for b in s.blocks)))
        for s, m in zip(sides, medians)]
    entries = benchmark_document(doc, cwd=Path("/"))["benchmarks"]
    assert [(e["extra_info"]["nodeid"], e["params"]["runner"], e["extra_info"]["blocks"],
             f"{e['extra_info']['median_ms']:.3f}") for e in entries] == [
        (s.nodeid, s.runner, len(s.blocks), m) for s, m in zip(sides, medians)]
    table = [line.split(" | ") for line in step_summary(doc)
             .splitlines() if line.startswith("| test")]
    assert [(t[0][2:], t[1], t[2]) for t in table] == [
        (s.test, s.runner, m) for s, m in zip(sides, medians)]


def test_the_reports_units_pool_a_point_across_tests_and_keep_the_comparisons_sides():
    doc = load_results(mixed_doc())
    c = doc.comparisons[0]
    assert [[b.nodeid for b in side] for side in comparison_blocks(c, doc.benchmarks)] == \
        [OFF, ON5]
    assert [b.nodeid for b in unclaimed(doc.benchmarks, doc.comparisons)] == \
        [TOY, TOY, TOY, "other.py::test_again", TOY]
    assert list(point_runners(doc.benchmarks, per_device=False)) == [
        ("toy_cnn", "fp32", 1, "", 0), ("mobilenet_v3_small", "fp16", 1, "", 0)]
    us = units(doc)
    assert [(u.point, [(s.runner, _ids(s.blocks)) for s in u.sides]) for u in us] == [
        ("mobilenet_v3_small fp16 t1 on R5CX1234",
         [("sme2_off", [(n, i, "R5CX1234") for i, n in enumerate(OFF)]),
          ("sme2_on", [(n, i, "R5CX1234") for i, n in enumerate(ON5)])]),
        ("toy_cnn fp32 t1 on vm", [("python", [(TOY, 1, "vm"), (TOY, 2, "vm"), (TOY, None, "vm"),
                                               ("other.py::test_again", None, "vm")])]),
        ("toy_cnn fp32 t1 on R5CX1234", [("python", [(TOY, None, "R5CX1234")])])]
    # a comparison's sides are the same blocks in the units and in the summaries
    sides = benchmark_sides(doc.benchmarks, doc.comparisons)
    assert [s.blocks for s in us[0].sides] == [sides[3].blocks, sides[4].blocks]

"""pytest_sme2.report.columns: each latency figure declared once, and the outputs' headers,
order and cells as they read the declaration."""

from __future__ import annotations

from pytest_sme2 import units
from pytest_sme2.report import benchmark_json, github, terminal
from pytest_sme2.report.columns import (GITHUB, JSON, LATENCY, MARKDOWN, MS, TERMINAL, Figure,
                                        shown)
from pytest_sme2.report.grouping import benchmark_sides
from pytest_sme2.report.markdown import sections
from pytest_sme2.results import PooledLatency, pool
from pytest_sme2.report.view import SessionView
from tests.fakes.baselines import bench_result


def _titles(output: str, table_unit: str = "") -> list[str]:
    return [f.title(output, table_unit) for f in shown(LATENCY, output)]


def test_each_output_lists_the_figures_it_shows_in_its_order_with_its_headers():
    assert _titles(TERMINAL) == ["median ms", "p90 ms", "CV %", "runs"]
    assert _titles(MARKDOWN, MS) == ["blocks", "n", "median", "mean", "min", "max", "std",
                                     "CV %"]
    assert _titles(GITHUB) == ["median ms", "CV %"]
    assert [f.key for f in shown(LATENCY, JSON)] == ["median_ms", "p90_ms", "cv_pct", "blocks"]


def test_the_renderers_read_the_declaration():
    assert terminal.COLUMNS[5:9] == tuple(_titles(TERMINAL))
    assert sections.LATENCY_HEADERS == [">" + t for t in _titles(MARKDOWN, MS)]
    p = pool([bench_result((1.0, 1.2, 0.9))])
    summary = github.step_summary(SessionView.of([bench_result((1.0, 1.2, 0.9))]))
    assert "| benchmark | runner | median ms | CV % | SME2 | vs baseline |" in summary
    side = benchmark_sides([bench_result((1.0, 1.2, 0.9))], [])[0]
    extra = benchmark_json.benchmark_entry(side)["extra_info"]
    assert [k for k in extra if k in {f.key for f in LATENCY}] == \
        ["median_ms", "p90_ms", "cv_pct", "blocks"]
    assert extra["median_ms"] == p.median_ms


def test_a_cell_is_formatted_by_its_unit_and_says_what_is_missing():
    p = PooledLatency(median_ms=1.23456, p90_ms=float("nan"), std_ms=0.1, cv_pct=7.25,
                      mean_ms=1.2, min_ms=1.0, max_ms=1.5, n=30, blocks=3,
                      block_medians_ms=(1.2, 1.23, 1.25))
    by_key = {f.key: f for f in LATENCY}
    assert by_key["median_ms"].cell(p) == "1.235"
    assert by_key["cv_pct"].cell(p) == units.percent(7.25)
    assert by_key["n"].cell(p) == "30"
    assert by_key["p90_ms"].cell(p, "—") == "—"
    p99 = Figure("p99_ms", "p99", MS, {TERMINAL: 2.5})     # a new figure: one line
    assert [f.header for f in shown((*LATENCY, p99), TERMINAL)] == ["median", "p90", "p99",
                                                                     "CV", "n"]

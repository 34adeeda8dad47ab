"""The terminal summary table: one row per benchmark, showing what the gate judged."""

from __future__ import annotations

from pytest_sme2.analysis.latency import latency_stats
from pytest_sme2.report.terminal import summary_table
from pytest_sme2.results import BenchmarkResult


def _result(samples, nodeid="b.py::test_latency[x]", block=None, baseline=None, threads=1):
    extra = {"categories_ms": {"GEMM": 0.5}, "block": block}
    if baseline is not None:
        extra["baseline"] = baseline
    return BenchmarkResult(nodeid=nodeid, model="toy_cnn", dtype="fp32", threads=threads,
                           runner={"name": "python", "kind": "python", "labels": {}},
                           device={"kind": "host"}, runs=len(samples), warmup=1,
                           e2e_ms=list(samples), e2e=latency_stats(samples), etdump="a.etdump",
                           pte="m.pte", extra=extra)


OK_3_BLOCKS = {"status": "ok", "ratio": {"point": 1.01, "low": 0.98, "high": 1.6}}


def test_confirmation_blocks_are_pooled_into_their_benchmarks_row():
    first = _result([1.6, 1.6, 1.6], baseline=OK_3_BLOCKS)       # the outvoted process
    blocks = [_result([1.0, 1.0, 1.0], block=1), _result([1.02, 1.02, 1.02], block=2)]
    other = _result([0.5, 0.5], nodeid="b.py::test_latency[y]", threads=2)
    lines = summary_table(blocks + [first, other])              # blocks are recorded first
    rows = lines[2:]
    assert len(rows) == 2                                       # one row per benchmark
    cells = rows[0].split()
    assert cells[0] == "test_latency[x]"
    assert "1.020" in cells and "9" in cells                    # median of block medians; 9 runs
    assert "ok 1.01x [0.98, 1.60]" in rows[0]
    assert "0.500" in rows[1].split() and "2" in rows[1].split()  # untouched by x's blocks


def test_a_single_block_benchmark_shows_its_own_figures():
    lines = summary_table([_result([2.0, 2.2, 2.1])])
    assert "2.100" in lines[2].split() and "3" in lines[2].split()


def test_a_category_regression_shows_beside_the_end_to_end_verdict():
    r = _result([1.0, 1.0], baseline=OK_3_BLOCKS)
    r.extra["baseline_categories"] = {
        "Convolution": {"status": "regression", "ratio": {"point": 2.86, "low": 2.8, "high": 3.4}},
        "GEMM": {"status": "ok", "ratio": {"point": 1.0, "low": 0.9, "high": 1.1}}}
    row = summary_table([r])[2]
    assert row.endswith("ok 1.01x [0.98, 1.60]; Convolution REGRESSION 2.86x")

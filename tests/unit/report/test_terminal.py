"""The terminal summary table: one row per benchmark, showing what the gate judged."""

from __future__ import annotations

from pytest_sme2.analysis.latency import latency_stats
from pytest_sme2.report.terminal import (benchmark_line, comparison_line, side_evidence_lines,
                                         summary_table)
from pytest_sme2.results import BlockResult, ResultAnalysis, RunContext, load_results
from pytest_sme2.report.view import SessionView
from tests.fakes.results_docs import evidence, sme2_doc


def _result(samples, nodeid="b.py::test_latency[x]", block=None, baseline=None, threads=1):
    return BlockResult(nodeid=nodeid, model="toy_cnn", dtype="fp32", threads=threads,
                           runner={"name": "python", "kind": "python", "labels": {}},
                           device={"kind": "host"}, runs=len(samples), warmup=1,
                           e2e_ms=list(samples), e2e=latency_stats(samples), etdump="a.etdump",
                           pte="m.pte", analysis=ResultAnalysis(categories_ms={"GEMM": 0.5}),
                           context=RunContext(block=block), judgement=baseline)


OK_3_BLOCKS = {"status": "ok", "ratio": {"point": 1.01, "low": 0.98, "high": 1.6}}


def test_confirmation_blocks_are_pooled_into_their_benchmarks_row():
    first = _result([1.6, 1.6, 1.6], baseline=OK_3_BLOCKS)       # the outvoted process
    blocks = [_result([1.0, 1.0, 1.0], block=1), _result([1.02, 1.02, 1.02], block=2)]
    other = _result([0.5, 0.5], nodeid="b.py::test_latency[y]", threads=2)
    lines = summary_table(SessionView.of(blocks + [first, other]))  # blocks are recorded first
    rows = lines[2:]
    assert len(rows) == 2                                       # one row per benchmark
    cells = rows[0].split()
    assert cells[0] == "test_latency[x]"
    assert "1.020" in cells and "9" in cells                    # median of block medians; 9 runs
    assert "ok 1.01x [0.98, 1.60]" in rows[0]
    assert "0.500" in rows[1].split() and "2" in rows[1].split()  # untouched by x's blocks


def test_a_single_block_benchmark_shows_its_own_figures():
    lines = summary_table(SessionView.of([_result([2.0, 2.2, 2.1])]))
    assert "2.100" in lines[2].split() and "3" in lines[2].split()


def test_a_category_regression_shows_beside_the_end_to_end_verdict():
    r = _result([1.0, 1.0], baseline=OK_3_BLOCKS)
    r.category_judgements = {
        "Convolution": {"status": "regression", "ratio": {"point": 2.86, "low": 2.8, "high": 3.4}},
        "GEMM": {"status": "ok", "ratio": {"point": 1.0, "low": 0.9, "high": 1.1}}}
    row = summary_table(SessionView.of([r]))[2]
    assert row.endswith("ok 1.01x [0.98, 1.60]; Convolution REGRESSION 2.86x")


def test_a_comparison_shows_its_tests_name_and_the_reports_medians():
    from pytest_sme2.report.markdown.render import render_markdown

    doc = load_results(sme2_doc())
    lines = summary_table(doc)
    off, on = (line.split() for line in lines[2:4])
    assert off[0] == on[0] == "test_sme2"
    assert off[5] == "10.000" and on[5] == "4.000" and on[9:12] == ["-", "-", "2.50x"]
    report = render_markdown(doc)
    assert "| sme2_off | 5 | 100 | 10.000 |" in report and "| 10.000 | 4.000 | 2.500x |" in report
    as_reported = [c.to_json() for c in doc.comparisons]     # as they travel on a test report
    assert summary_table(SessionView.of(doc.benchmarks, as_reported)) == lines
    assert comparison_line(doc.comparisons[0]).startswith(
        "sme2: sme2_on vs sme2_off on mobilenet_v3_small fp16 t1: speed-up 2.500x [2.450, "
        "2.550], medians 10.000 -> 4.000 ms over 5 blocks each: faster, outputs equal")


def test_the_sme2_verdict_shows_on_a_line_only_for_a_traced_run():
    doc = sme2_doc()
    untraced = load_results(doc).benchmarks[0]
    assert "SME2" not in benchmark_line(untraced)
    doc["benchmarks"][0]["kernel_evidence"] = evidence("absent", executed=[])
    assert benchmark_line(load_results(doc).benchmarks[0]).endswith("; SME2 absent")


SME1_MOPA = "kai_run_matmul_clamp_f32_f32p2vlx1_f32p2vlx1b_2vlx2vl_sme_mopa"
SME1_PACK = "kai_run_lhs_pack_f32p2vlx1_f32_sme"


def _sme1_only_doc() -> dict:
    """The SME pair on a device with SME but no SME2: SME1 kernels on the SME side, none on
    the masked one, SME2 absent on both."""
    doc = sme2_doc()
    executed = [{"name": n, "isa_family": "SME", "kind": "kleidiai", "library": "x.so",
                 "blocks": 3} for n in (SME1_PACK, SME1_MOPA)]
    for b in doc["benchmarks"]:
        on = b["runner"] == "sme2_on"
        b["kernel_evidence"] = {**evidence("absent", executed=executed if on else []),
                                "sme": "proven" if on else "absent",
                                "sme_reason": "kernel trace: 2 SME1 kernels executed" if on
                                else "the process's hwcaps report no SME"}
    return doc


def test_the_sme_level_shows_beside_sme2_where_sme2_did_not_run():
    doc = load_results(_sme1_only_doc())
    on = next(b for b in doc.benchmarks if b.runner_name == "sme2_on")
    off = next(b for b in doc.benchmarks if b.runner_name == "sme2_off")
    # compute kernels before packing ones
    assert benchmark_line(on).endswith(
        f"; SME: proven (SME1 kernels: {SME1_MOPA}, {SME1_PACK}); SME2: absent")
    assert benchmark_line(off).endswith("; SME: absent; SME2: absent")
    rows = summary_table(doc)[2:4]
    assert "absent (SME proven)" in rows[1] and "(SME" not in rows[0]
    lines = side_evidence_lines(doc.comparisons[0], doc.benchmarks)
    assert lines == ["sme2:   sme2_off: SME: absent; SME2: absent",
                     f"sme2:   sme2_on: SME: proven (SME1 kernels: {SME1_MOPA}, {SME1_PACK}); "
                     "SME2: absent"]


def test_sme2_proven_keeps_the_line_as_it_was():
    """SME1 packing beside SME2 kernels (QEMU -cpu max) is a detail: SME2's verdict alone."""
    doc = _sme1_only_doc()
    for b in doc["benchmarks"]:
        b["kernel_evidence"]["sme2"] = "proven"
    on = next(b for b in load_results(doc).benchmarks if b.runner_name == "sme2_on")
    assert benchmark_line(on).endswith("; SME2 proven")


def test_what_tracing_costs_is_said_in_the_line_only_when_it_is_loud():
    from tests.fakes.results_docs import single_doc

    doc = single_doc()
    b = doc["benchmarks"][0]
    b["timing"] = {"mode": "untraced", "source": "the runner's clock", "overhead_pct": 6.8,
                   "traced_median_ms": 2.1, "traced_mean_ms": 2.1, "traced_runs": 10}
    assert "tracing" not in benchmark_line(load_results(doc).benchmarks[0])
    b["timing"]["overhead_pct"] = 52.0
    b["timing"]["traced_median_ms"] = 3.04                      # beyond the timed runs' p90
    assert benchmark_line(load_results(doc).benchmarks[0]).split(" | ")[1] == (
        "operator tracing adds +52.0% here: latency from untraced runs, breakdown from traced "
        "ones")
    # Within the timed runs' own spread (a slow spell makes it as well as tracing): said, with
    # that (issue 49, item 4: tiny_llama t2's +98.65% was hidden).
    b["timing"]["traced_median_ms"] = b["p90_ms"]
    assert benchmark_line(load_results(doc).benchmarks[0]).split(" | ")[1] == (
        f"operator tracing adds +52.0% here (within the timed runs' own spread: traced median "
        f"{b['p90_ms']:.3f} ms <= their p90 {b['p90_ms']:.3f} ms): latency from untraced runs, "
        "breakdown from traced ones")
    # A runner that cannot run without its tracer: said in its line, whatever it cost.
    b["timing"] = {"mode": "operator-traced", "source": "ETDump"}
    assert " | timed through the operator tracer (python cannot run without it)" in \
        benchmark_line(load_results(doc).benchmarks[0])

"""report.md, each benchmark's page and the charts, from crafted results documents
(tests/fakes/results_docs.py)."""

from __future__ import annotations

import copy
import json
import os
import platform
import re
import socket
import statistics

import jinja2
import pytest

from pytest_sme2.analysis.latency import latency_stats
from pytest_sme2.report.markdown import render as markdown
from pytest_sme2.report.markdown import charts
from pytest_sme2.report.digest import by_model, units
from pytest_sme2.report.cells import code
from pytest_sme2.report.markdown.render import render_details, render_markdown, render_report
from pytest_sme2.report.markdown.unit_page import VERDICT_WORDING
from pytest_sme2.results import load_results
from tests.fakes.results_docs import (HOST_NO_SME2, evidence, interval, matrix_doc, noisy, op,
                                      single_doc, sme2_doc)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# The seed kit's section names, in its order (Summary and Regressions are ours).
SECTIONS = ("## Summary", "## Metadata", "## Latency Comparison", "## Speedup",
            "## Operator Category Breakdown", "## Acceleration Analysis",
            "## Bottleneck Identification", "## Portable vs Delegated Operator Analysis",
            "## Kernel Evidence", "## Actionable Recommendations")


def section(text: str, heading: str) -> str:
    """The text of one ``## heading`` section (up to the next ``## ``)."""
    start = text.index(f"## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else None]


def table_rows(text: str, first_cell: str) -> list[list[str]]:
    """Cells of the table rows whose first cell is ``first_cell``."""
    rows = []
    for line in text.splitlines():
        cells = split_row(line)
        if cells and cells[0] == first_cell:
            rows.append(cells)
    return rows


def split_row(line: str) -> list[str] | None:
    if not line.startswith("|"):
        return None
    cells = re.split(r"(?<!\\)\|", line)[1:-1]
    return [c.strip() for c in cells]


def assert_tables_valid(text: str) -> None:
    """Every table: a header, a separator of the same width, rows of the same width."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].startswith("|"):
            i += 1
            continue
        assert i == 0 or not lines[i - 1].strip(), f"table without a blank line before: {lines[i]}"
        block = []
        while i < len(lines) and lines[i].startswith("|"):
            block.append(lines[i])
            i += 1
        widths = {len(split_row(row)) for row in block}
        assert len(widths) == 1, "ragged table:\n" + "\n".join(block)
        assert all(re.fullmatch(r"-{3}:?", c) for c in split_row(block[1])), block[1]
        assert len(block) >= 3, "a table without rows"


def visible(text: str) -> str:
    """The report as it opens: <details> blocks folded."""
    return re.sub(r"<details>.*?</details>", "", text, flags=re.S)


def page(doc) -> str:
    """The page of a document's one benchmark point (details/<slug>.md)."""
    (text,) = render_details(doc).values()
    return text


@pytest.fixture
def sme2_text() -> str:
    return render_markdown(sme2_doc())


@pytest.fixture
def sme2_page() -> str:
    return page(sme2_doc())


def test_every_section_appears_in_order(sme2_text):
    positions = [sme2_text.index(h + "\n") for h in SECTIONS]
    assert positions == sorted(positions)
    assert_tables_valid(sme2_text)


def test_latency_table_pools_blocks_and_gives_the_ci(sme2_text):
    lat = section(sme2_text, "Latency Comparison")
    (off,) = table_rows(lat, "mobilenet_v3_small")[:1]
    on = table_rows(lat, "mobilenet_v3_small")[1]
    # model dtype threads runner blocks n median mean min max std CV speed-up
    assert off[3:8] == ["sme2_off", "5", "100", "10.000", "10.000"]
    assert on[3:8] == ["sme2_on", "5", "100", "4.000", "4.000"]
    assert off[-1] == "base"
    assert on[-1] == "2.500x [2.450, 2.550]"
    assert re.fullmatch(r"\d+\.\d{3}", on[10]) and re.fullmatch(r"\d+\.\d", on[11])


def test_speedup_section_has_point_ci_verdict_and_outputs(sme2_text):
    (row,) = table_rows(section(sme2_text, "Speedup"), "mobilenet_v3_small fp16 t1")
    assert row[1:] == ["sme2_off → sme2_on", "5", "10.000", "4.000", "2.500x",
                       "[2.450, 2.550]", "**faster**",
                       "equal (max abs diff 0.001, tolerance 0.01)"]


def test_category_breakdown_in_the_report_one_row_per_runner(sme2_text):
    cats = section(sme2_text, "Operator Category Breakdown")
    assert "### mobilenet_v3_small" in cats
    link = "[mobilenet_v3_small fp16 t1](details/mobilenet_v3_small-fp16-t1-sme2_off-vs-sme2_on.md)"
    assert table_rows(cats, "benchmark")[0][1:] == [
        "runner", "E2E ms", "Convolution %", "GEMM %", "Data Movement %", "Elementwise %",
        "Pooling %", "Other %"]
    off, on = table_rows(cats, link)
    assert off[1:] == ["sme2_off (base)", "10.000", "60.0", "20.0", "10.0", "5.0", "2.0", "3.0"]
    assert on[1:] == ["sme2_on (candidate)", "4.000", "37.5", "12.5", "25.0", "12.5", "5.0",
                      "7.5"]
    assert "No time in: Normalization." in cats


def test_category_breakdown_side_by_side(sme2_page):
    cats = section(sme2_page, "Operator Category Breakdown")
    assert table_rows(cats, "category")[0][1:] == ["sme2_off ms", "sme2_off %", "sme2_on ms",
                                                   "sme2_on %"]
    assert table_rows(cats, "Convolution")[0][1:] == ["6.000", "60.0", "1.500", "37.5"]
    assert table_rows(cats, "Data Movement")[0][1:] == ["1.000", "10.0", "1.000", "25.0"]
    assert table_rows(cats, "**E2E**")[0][1:] == ["10.000", "100.0", "4.000", "100.0"]
    # taxonomy order, Other last; a category with no time on any side is named, not tabulated
    order = [r[0] for r in (split_row(line) for line in cats.splitlines()) if r]
    assert order[2:] == ["Convolution", "GEMM", "Data Movement", "Elementwise", "Pooling",
                         "Other", "**E2E**"]
    assert "No time in: Normalization." in cats


def test_acceleration_in_the_report_names_what_got_faster_and_what_grew(sme2_text):
    acc = section(sme2_text, "Acceleration Analysis")
    (row,) = table_rows(acc, "[mobilenet_v3_small fp16 t1](details/"
                             "mobilenet_v3_small-fp16-t1-sme2_off-vs-sme2_on.md)")
    assert row[1:] == ["sme2_off → sme2_on",
                       "Convolution 4.000x [3.900, 4.100], GEMM 4.000x [3.800, 4.200]", "—",
                       "Data Movement 10.0% → 25.0% (+15.0 pp), Elementwise 5.0% → 12.5% "
                       "(+7.5 pp), Other 3.0% → 7.5% (+4.5 pp), Pooling 2.0% → 5.0% (+3.0 pp)"]
    assert ("- mobilenet_v3_small fp16 t1: **Data Movement** is the largest of them at 25.0% of "
            "E2E on sme2_on: with Convolution and GEMM faster, it is the next bottleneck.") in acc


def test_acceleration_flags_the_growing_data_movement_share(sme2_page):
    acc = section(sme2_page, "Acceleration Analysis")
    conv = table_rows(acc, "Convolution")[0]
    assert conv[3:6] == ["4.000x", "[3.900, 4.100]", "faster"]
    dm = table_rows(acc, "Data Movement")[0]
    assert dm[3:] == ["1.000x", "[0.980, 1.020]", "no significant difference", "10.0%",
                      "25.0%", "+15.0 pp ▲"]
    assert "▲" not in table_rows(acc, "Convolution")[0][-1]
    assert "Data Movement 10.0% → 25.0% (+15.0 pp)" in acc
    assert ("**Data Movement** is the largest of them at 25.0% of E2E on sme2_on: with "
            "Convolution and GEMM faster, it is the next bottleneck.") in acc


def test_bottlenecks_in_the_report_count_and_name_the_largest(sme2_text):
    bot = section(sme2_text, "Bottleneck Identification")
    link = "[mobilenet_v3_small fp16 t1](details/mobilenet_v3_small-fp16-t1-sme2_off-vs-sme2_on.md)"
    off, on = table_rows(bot, link)
    assert off[1:] == ["sme2_off (base)", "3",
                       "`Convolution (NHWC, F16) IGEMM #1` 60.0%, "
                       "`Fully Connected (NC, F16) #1` 20.0%, `Transpose (ND, X16) #1` 6.0%"]
    # the portable copy (7.5%) is the 5th of five: only the largest three are named
    assert on[1:3] == ["sme2_on (candidate)", "5"]
    assert on[3].startswith("`Convolution (NHWC, F16) IGEMM #1` 37.5%, "
                            "`Transpose (ND, X16) #1` 15.0%, ")
    assert "native_call__to_dim_order_copy" not in on[3]


def test_bottlenecks_are_operators_above_5_percent(sme2_page):
    bot = section(sme2_page, "Bottleneck Identification")
    names = [r[0] for r in (split_row(x) for x in bot.splitlines()) if r][2:]
    assert "`native_call__to_dim_order_copy.out`" in names
    assert "`Convert (NC, F32, F16) #1`" not in names          # 1.0% and 2.5%
    assert "`Mean (ND) #1`" not in names
    row = table_rows(bot, "`native_call__to_dim_order_copy.out`")[0]
    assert row[1:] == ["7", "Data Movement", "portable", "18", "0.300", "3.0", "0.300", "7.5"]
    # a KleidiAI-renamed operator exists on one side only
    assert table_rows(bot, "`Fully Connected (NC, PF16) #1`")[0][5:7] == ["—", "—"]


def test_portable_vs_delegated_in_the_report(sme2_text):
    port = section(sme2_text, "Portable vs Delegated Operator Analysis")
    link = "[mobilenet_v3_small fp16 t1](details/mobilenet_v3_small-fp16-t1-sme2_off-vs-sme2_on.md)"
    off, on = table_rows(port, link)
    assert on[1:] == ["sme2_on (candidate)", "85.0", "7.5", "7.5", "6 / 1",
                      "`native_call__to_dim_order_copy.out`"]
    assert off[-1] == "—"                                     # 3.0% of E2E: nothing to delegate


def test_portable_vs_delegated(sme2_page):
    port = section(sme2_page, "Portable vs Delegated Operator Analysis")
    assert table_rows(port, "sme2_on")[0][1:] == ["3.400", "85.0", "0.300", "7.5", "0.300",
                                                  "7.5", "6 / 1"]
    row = table_rows(port, "`native_call__to_dim_order_copy.out`")[0]
    assert row[6] == "**yes**"
    assert row[7] == "`aten._to_copy.default`"
    assert row[8].startswith("`features.1.block.1.scale_activation`, ")
    assert row[8].endswith("(+5 more)")


def test_kernel_evidence_in_the_report_a_row_per_runner_and_evidence(sme2_text):
    ev = section(sme2_text, "Kernel Evidence")
    (on,) = table_rows(ev, "sme2_on (candidate)")
    assert on[1:4] == ["**indicated**", "`Fully Connected (NC, PF16)`", "no kernel trace"]
    doc = matrix_doc()
    rows = table_rows(section(render_markdown(doc), "Kernel Evidence"), "native")
    (native,) = rows                   # 18 benchmarks with the same evidence share one row
    assert native[4].count("](details/") == 18


def test_kernel_evidence_wording_follows_the_verdict_exactly(sme2_text, sme2_page):
    ev = section(sme2_page, "Kernel Evidence")
    on = next(line for line in ev.splitlines() if line.startswith("- **sme2_on**"))
    assert "**indicated**" in on and VERDICT_WORDING["indicated"] in on
    assert "KleidiAI packed operators: `Fully Connected (NC, PF16)`." in ev
    assert "no kernel trace was captured" in ev
    # nowhere does the report or the page call the on side's SME2 proven or confirmed
    for line in (sme2_text + sme2_page).splitlines():
        if "sme2_on" in line:
            assert not re.search(r"\bproven\b|confirm", line, re.IGNORECASE), line
    assert "sme2_on kernel evidence: indicated" in section(sme2_text, "Summary")


@pytest.mark.parametrize("verdict", ["proven", "absent", "unknown"])
def test_each_verdict_has_its_own_wording(verdict):
    kernels = [{"name": "xnn_pf16_gemm_minmax_ukernel_32x32c2__neonsme2", "kind": "gemm",
                "isa": "neonsme2", "sme2": True}] if verdict == "proven" else []
    text = page(sme2_doc(on_evidence=evidence(verdict, kernels=kernels)))
    on = next(line for line in section(text, "Kernel Evidence").splitlines()
              if line.startswith("- **sme2_on**"))
    assert f"**{verdict}**" in on and VERDICT_WORDING[verdict] in on
    if verdict == "proven":
        assert "`xnn_pf16_gemm_minmax_ukernel_32x32c2__neonsme2` (gemm, neonsme2)" in text
        assert "(1 of 1 SME2)" in text
    else:
        assert "micro-kernels ran: the XNNPACK kernel trace" not in on


def test_blocks_that_disagree_get_no_single_verdict():
    doc = sme2_doc()
    doc["benchmarks"][-1]["kernel_evidence"] = evidence("proven")
    text = page(doc)
    on = next(line for line in section(text, "Kernel Evidence").splitlines()
              if line.startswith("- **sme2_on**"))
    assert "**mixed**" in on and "indicated in 4, proven in 1 of 5 blocks" in on


def test_executed_kernels_show_for_traced_runs_only():
    kai = {"name": "kai_run_matmul_clamp_f32_f32p2vlx1_f32p2vlx1biasf32_sme2_mopa",
           "isa_family": "SME2", "kind": "kleidiai", "library": "libexecutorch.so", "blocks": 3}
    doc = sme2_doc(on_evidence=evidence("proven", executed=[kai], streaming_blocks=3))
    for b in doc["benchmarks"]:
        if b["runner"] == "sme2_off":
            b["kernel_evidence"] = evidence("absent", executed=[])
    ev = section(page(doc), "Kernel Evidence")
    off, on = ev.split("\n- **")[1:]                       # each runner with its sub-items
    assert on.startswith("sme2_on**") and off.startswith("sme2_off**")
    assert f"Micro-kernels executed (kernel trace): `{kai['name']}` (SME2)." in on
    assert "Micro-kernels executed (kernel trace): no KleidiAI or exported XNNPACK" in off
    assert "no kernel trace was captured" not in on + off
    untraced = section(page(sme2_doc()), "Kernel Evidence")    # no trace, no claim
    assert "Micro-kernels executed" not in untraced


def test_one_median_per_runner_in_latency_comparison_and_speedup():
    """Blocks whose runs, pooled, have another median than the median of the block medians:
    every section shows the latter."""
    doc = sme2_doc(blocks=3)
    for b, tail in zip(doc["benchmarks"][:3], (9.0, 10.0, 11.0)):
        samples = [tail - 1.0] * 12 + [30.0] * 8          # medians 8, 9, 10; pooled: 10
        stats = latency_stats(samples)
        b.update(e2e_ms=samples, median_ms=stats.median_ms, p90_ms=stats.p90_ms,
                 cv_pct=stats.cv_pct, e2e=stats.to_dict())
    assert statistics.median(v for b in doc["benchmarks"][:3] for v in b["e2e_ms"]) == 10.0
    text = render_markdown(doc)
    (off, _) = table_rows(section(text, "Latency Comparison"), "mobilenet_v3_small")
    (row,) = table_rows(section(text, "Speedup"), "mobilenet_v3_small fp16 t1")
    assert off[6] == row[3] == "9.000"


def test_bottlenecks_are_the_ones_the_analysis_flagged():
    doc = single_doc()
    doc["benchmarks"][0]["operators"][0]["bottleneck"] = False    # the analysis' word stands
    assert "No operator above 5% of E2E." in section(page(doc), "Bottleneck Identification")
    (row,) = table_rows(section(render_markdown(doc), "Bottleneck Identification"),
                        "[toy_cnn fp32 t1](details/toy_cnn-fp32-t1-python.md)")
    assert row[2:] == ["0", "—"]


def test_a_comparisons_regression_row_names_its_test():
    doc = sme2_doc()
    doc["comparisons"][0]["baselines"] = {"sme2_on": {
        "status": "regression", "ratio": {"point": 1.3, "low": 1.2, "high": 1.4},
        "reason": "30.0% slower", "foreign": False}}
    (row,) = table_rows(section(render_markdown(doc), "Regressions"), "test_sme2")
    assert row[1:3] == ["sme2_on", "**regression**"]


def test_the_device_metadata_names_its_sme_class():
    from tests.fakes.results_docs import ANDROID

    meta = section(render_markdown(sme2_doc(device={**ANDROID, "sme2": False})), "Metadata")
    assert table_rows(meta, "SME class")[0][1] == "SME (no SME2)"


def test_device_metadata_comes_from_the_document_not_the_host(monkeypatch):
    for name in ("machine", "processor", "node", "platform", "system", "release"):
        monkeypatch.setattr(platform, name, lambda *a, **k: "HOST-SENTINEL")
    monkeypatch.setattr(os, "cpu_count", lambda: 4242)
    monkeypatch.setattr(socket, "gethostname", lambda: "HOST-SENTINEL")
    text = render_markdown(sme2_doc())
    meta = section(text, "Metadata")
    assert "HOST-SENTINEL" not in text and "4242" not in text
    assert table_rows(meta, "kind")[0][1] == "android"
    assert table_rows(meta, "ABI")[0][1] == "arm64-v8a"
    assert table_rows(meta, "CPU / SoC")[0][1] == "Test SoC (Cortex-X925)"
    assert table_rows(meta, "SME2 (hwcaps)")[0][1] == "yes"
    assert table_rows(meta, "SME class")[0][1] == "SME2"
    assert table_rows(meta, "cores")[0][1] == "8"
    assert "- torch: 2.13.0" in meta
    assert table_rows(meta, "`sme2_on`")[0][1:] == ["binary", "build_type=Release, sme2=on",
                                                    "/opt/runners/sme2_on"]
    assert "- timed runs per benchmark: 20 (+3 warm-up discarded)" in meta
    assert "- interleaved blocks per side: 5" in meta


def test_two_devices_get_a_column_each():
    doc = sme2_doc()
    for b in doc["benchmarks"][5:]:
        b["device"] = copy.deepcopy(HOST_NO_SME2)
    meta = section(render_markdown(doc), "Metadata")
    # Each column is named as the rest of the report names the device (results without the
    # --device spec: its serial).
    assert table_rows(meta, "fact")[0] == ["fact", "R5CX1234", "vm"]
    assert table_rows(meta, "ABI")[0][1:] == ["arm64-v8a", "x86_64"]


def test_pipes_in_operator_names_are_escaped():
    e2e = 2.0
    ops = [op("Convolution (NHWC, F32) IGEMM #1", 1.4, e2e, "Convolution"),
           op("native_call_my|op.out", 0.3, e2e, "Other", delegated=False,
              op_types=["my::a|b"])]
    doc = single_doc(operators=ops, categories={"Convolution": 1.4})
    assert_tables_valid(render_markdown(doc))
    text = page(doc)
    assert "`native_call_my\\|op.out`" in text
    assert "`my::a\\|b`" in text
    assert_tables_valid(text)
    row = table_rows(section(text, "Bottleneck Identification"), "`native_call_my\\|op.out`")[0]
    assert row[1:] == ["0", "Other", "portable", "1", "0.300", "15.0"]


def test_code_spans_survive_backticks_and_pipes():
    assert code("a|b") == "`a\\|b`"
    assert code("x`y") == "``x`y``"
    assert code("`edge") == "`` `edge ``"


def test_single_benchmark_report():
    text = render_markdown(single_doc())
    assert "No comparisons were run" in text
    assert "## Acceleration Analysis" not in text and "## Speedup" not in text
    cats = section(text, "Operator Category Breakdown")
    assert "### toy_cnn\n" in cats
    (row,) = table_rows(cats, "[toy_cnn fp32 t1](details/toy_cnn-fp32-t1-python.md)")
    assert row[1:4] == ["python", "2.000", "80.0"]
    assert table_rows(section(page(single_doc()), "Operator Category Breakdown"),
                      "Convolution")[0][1:] == ["1.600", "80.0"]
    (row,) = table_rows(section(text, "Latency Comparison"), "toy_cnn")
    assert row[3] == "python" and row[-1] == "—"
    ev = section(page(single_doc()), "Kernel Evidence")
    assert "**absent**" in ev and VERDICT_WORDING["absent"] in ev
    assert "x86_64" in section(text, "Metadata")
    assert_tables_valid(text)


@pytest.mark.parametrize("doc", [{}, {"schema": "pytest-sme2/results/1", "session": {},
                                      "benchmarks": [], "comparisons": []}])
def test_an_empty_document_renders_a_short_report(doc, tmp_path):
    path = render_report(doc, tmp_path)
    text = path.read_text()
    assert "No benchmarks were run" in text
    assert len(text.splitlines()) < 8
    assert "## " not in text                    # no section headings over empty tables
    assert not (tmp_path / markdown.CHART_DIR).exists()


def test_a_comparison_whose_blocks_are_missing_still_renders():
    doc = sme2_doc()
    doc["benchmarks"] = []
    text = render_markdown(doc)
    (row,) = table_rows(section(text, "Speedup"), "mobilenet_v3_small fp16 t1")
    assert row[5] == "2.500x"
    for heading in ("## Latency Comparison", "## Operator Category Breakdown",
                    "## Acceleration Analysis", "## Bottleneck Identification",
                    "## Kernel Evidence"):
        assert heading not in text
    assert_tables_valid(text)


def test_report_embeds_the_overview_and_a_category_chart_per_model(tmp_path):
    path = render_report(sme2_doc(), tmp_path)
    text = path.read_text()
    for name in ("overview.png", "categories-mobilenet_v3_small.png"):
        png = tmp_path / "charts" / name
        assert png.read_bytes()[:8] == PNG_SIGNATURE and png.stat().st_size > 1000
        assert f"](charts/{name})" in text
    assert text.count("![") == 2
    assert text.index("](charts/overview.png)") < text.index("\n## Metadata")
    detail = (tmp_path / "details" / "mobilenet_v3_small-fp16-t1-sme2_off-vs-sme2_on.md")
    assert "](../charts/categories-mobilenet_v3_small.png)" in detail.read_text()


def test_charts_can_be_left_out(tmp_path):
    text = render_report(sme2_doc(), tmp_path, charts=False).read_text()
    assert "![" not in text
    assert not (tmp_path / "charts").exists()
    (detail,) = (tmp_path / "details").iterdir()
    assert "![" not in detail.read_text()


def test_missing_matplotlib_leaves_a_note_not_a_crash(tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name, *a, **k):
        if name.startswith("matplotlib"):
            raise ModuleNotFoundError("No module named 'matplotlib'", name="matplotlib")
        return real_import(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    text = render_report(sme2_doc(), tmp_path).read_text()
    assert "Charts left out: matplotlib is not installed" in text
    assert "![" not in text


def test_charts_of_a_comparison_and_of_a_plain_benchmark_write_pngs(tmp_path):
    (compared,) = units(load_results(sme2_doc()))
    (plain,) = units(load_results(single_doc()))
    paths = [charts.overview_chart([compared, plain], tmp_path / "a" / "o.png"),
             charts.model_chart("mobilenet_v3_small", [compared], tmp_path / "m.png"),
             charts.model_chart("toy_cnn", [plain], tmp_path / "t.png")]
    for p in paths:
        data = p.read_bytes()
        assert data[:8] == PNG_SIGNATURE and len(data) > 1000


def _drawn(fig) -> set[tuple[str, str]]:
    """(panel title, bar label) of every bar a figure labels."""
    return {(ax.get_title(loc="left") or ax.get_title(), t.get_text()) for ax in fig.axes
            for t in (ax.get_yticklabels() if ax.get_title(loc="left") else
                      ax.get_xticklabels())}


def test_the_overview_figure_covers_every_case_of_the_matrix():
    doc = load_results(matrix_doc())
    fig = charts.overview_figure(units(doc))
    drawn = _drawn(fig)
    assert [ax.get_title(loc="left") for ax in fig.axes] == ["toy_cnn", "mobilenet_v3_small",
                                                             "vit_tiny"]
    # every (model, dtype, threads, runner) measured, comparisons' sides with their role
    for b in doc.benchmarks:
        role = "" if b.block is None else \
            (" (base)" if b.runner_name == "sme2_off" else " (candidate)")
        assert (b.model, f"{b.dtype} t{b.threads} {b.runner_name}{role}") in drawn, b.nodeid
    bars = sum(len(ax.patches) for ax in fig.axes)
    assert bars == 3 * 3 * 2 + 9 * 2                   # plain cases + both sides of comparisons
    speedups = [t.get_text() for ax in fig.axes for t in ax.texts if "x [" in t.get_text()]
    assert speedups == ["1.80x [1.70, 1.90] faster"] * 9


def test_the_overview_says_emulated_speed_is_no_speed():
    doc = sme2_doc()
    for b in doc["benchmarks"]:
        b["device"]["extra"] = {"emulated": True}
    doc["comparisons"][0]["emulated"] = True
    fig = charts.overview_figure(units(load_results(doc)))
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "emulated: not a speed" in texts and not any("x [" in t for t in texts)
    assert "emulated CPU" in fig.axes[0].get_title(loc="left")
    summary = section(render_markdown(doc), "Summary")
    assert "(faster, emulated CPU: not a speed)" in summary and "**faster**" not in summary


def test_a_category_figure_per_model_stacks_every_case_of_it():
    doc = load_results(matrix_doc())
    for model, mu in by_model(units(doc)).items():
        fig = charts.model_figure(model, mu)
        (ax,) = [a for a in fig.axes]
        labels = [t.get_text() for t in ax.get_xticklabels()]
        assert len(labels) == 3 * 2 + 3 * 2                  # plain cases + comparison sides
        assert "fp16 t1\nsme2_on\n(candidate)" in labels and "int8 t2\nnative" in labels
        assert ax.get_title() == f"{model}: where the time goes"


def test_a_default_size_report_is_figures_and_rows_with_each_benchmarks_page_linked(tmp_path):
    doc = matrix_doc()
    text = render_report(doc, tmp_path).read_text()
    us = units(load_results(doc))
    models = {u.model for u in us}
    # one overview + one category figure per model, whatever the number of benchmarks
    assert text.count("![") == 1 + len(models)
    assert sorted(p.name for p in (tmp_path / "charts").iterdir()) == sorted(
        ["overview.png"] + [f"categories-{m}.png" for m in models])
    # the detail is folded into a page per benchmark point, each linked from the report
    pages = sorted((tmp_path / "details").iterdir())
    assert len(pages) == len(us) == 27
    for p in pages:
        assert f"](details/{p.name})" in text
        assert "## Operator Category Breakdown" in p.read_text()
    # no per-benchmark sub-sections: a heading per model only, and one row per benchmark and
    # runner in the per-benchmark sections
    assert {h for h in text.splitlines() if h.startswith("### ")} >= {f"### {m}" for m in models}
    assert not [h for h in text.splitlines() if h.startswith("### ") and " t1" in h]
    # what shows before anything is unfolded grows by a row per benchmark and runner in each
    # per-benchmark table, not by a section per benchmark (the earlier layout: ~55 lines each)
    sides = sum(len(u.sides) for u in us)
    lines = len(visible(text).splitlines())
    one = len(visible(render_markdown(sme2_doc())).splitlines())
    assert lines < one + 6 * sides, lines
    assert_tables_valid(text)


def test_recommendations_beyond_the_first_ten_are_folded():
    doc = matrix_doc()
    recs = section(render_markdown(doc), "Actionable Recommendations")
    n = sum(1 for line in recs.splitlines() if re.match(r"\d+\. ", line))
    assert n > markdown.TOP_RECOMMENDATIONS
    shown, folded = recs.split("<details>")
    assert sum(1 for line in shown.splitlines() if re.match(r"\d+\. ", line)) == \
        markdown.TOP_RECOMMENDATIONS
    assert f"<summary>{n - markdown.TOP_RECOMMENDATIONS} more recommendations</summary>" in folded
    assert folded.rstrip().endswith("</details>")


def test_a_page_per_benchmark_point_even_when_slugs_collide():
    doc = sme2_doc()
    twin = copy.deepcopy(doc["comparisons"][0])
    twin["nodeid"] = "bench.py::test_again"
    doc["comparisons"].append(twin)
    assert sorted(render_details(doc)) == [
        "details/mobilenet_v3_small-fp16-t1-sme2_off-vs-sme2_on-2.md",
        "details/mobilenet_v3_small-fp16-t1-sme2_off-vs-sme2_on.md"]


def test_an_earlier_reports_pages_and_charts_are_removed(tmp_path):
    render_report(matrix_doc(), tmp_path)
    render_report(sme2_doc(), tmp_path)
    assert [p.name for p in (tmp_path / "details").iterdir()] == [
        "mobilenet_v3_small-fp16-t1-sme2_off-vs-sme2_on.md"]
    assert sorted(p.name for p in (tmp_path / "charts").iterdir()) == [
        "categories-mobilenet_v3_small.png", "overview.png"]


def test_importing_the_report_does_not_import_matplotlib():
    import subprocess
    import sys

    code_ = ("import sys, pytest_sme2.report.markdown.render, pytest_sme2.report.markdown.charts; "
             "print('matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code_], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_template_undefined_is_strict():
    env = markdown.environment()
    assert env.undefined is jinja2.StrictUndefined
    with pytest.raises(jinja2.UndefinedError):
        env.from_string("{{ nothing.here }}").render()


def test_the_summary_says_what_got_faster_and_where_the_time_goes(sme2_text):
    summary = section(sme2_text, "Summary")
    assert "speed-up 2.500x [2.450, 2.550] (**faster**)" in summary
    assert ("- Where the time goes in mobilenet_v3_small: the largest category is "
            "**Convolution** in 2 of 2 (37.5–60.0% of E2E).") in summary
    doc = sme2_doc()
    doc["comparisons"][0]["baselines"] = {"sme2_on": {
        "status": "regression", "ratio": {"point": 1.3, "low": 1.2, "high": 1.4},
        "reason": "30.0% slower", "foreign": False}}
    assert ("- Against the stored baselines: 1 regression — **regressed**: test_sme2 (sme2_on) "
            "(see Regressions).") in section(render_markdown(doc), "Summary")


def test_noisy_blocks_show_in_cv_and_recommendations():
    text = render_markdown(sme2_doc(on_samples=noisy))
    on = table_rows(section(text, "Latency Comparison"), "mobilenet_v3_small")[1]
    assert float(on[11]) > 10
    assert "CV above 10%" in section(text, "Actionable Recommendations")


def test_outputs_that_differ_are_shouted():
    doc = sme2_doc(outputs={"max_abs_diff": 0.5, "tolerance": 0.01, "equal": False})
    text = render_markdown(doc)
    assert "**DIFFER** (max abs diff 0.5, tolerance 0.01)" in section(text, "Speedup")
    recs = section(text, "Actionable Recommendations")
    assert recs.splitlines()[2].startswith("1. Outputs of sme2_on differ from sme2_off")


def test_no_significant_difference_is_reported_as_such():
    doc = sme2_doc(verdict="no significant difference", speedup=interval(1.01, 0.99, 1.03),
                   on_conv=6.0)
    text = render_markdown(doc)
    (row,) = table_rows(section(text, "Speedup"), "mobilenet_v3_small fp16 t1")
    assert row[7] == "**no significant difference**"
    assert "check sme2_on's build flags" in section(text, "Actionable Recommendations")


def test_regressions_section_lists_judged_benchmarks(tmp_path):
    from pytest_sme2.report.markdown.render import render_markdown

    doc = json.loads(json.dumps(_gate_doc()))
    text = render_markdown(doc, charts={})
    section = text.split("## Regressions", 1)[1].split("\n## ", 1)[0]
    assert "| test_a | python | **regression** | 1.400x | [1.300, 1.500] | 40.0% slower" in section
    assert "| test_b | python | **not compared (foreign baseline)** | - | - | not compared: CPU" \
        in section
    assert "test_c" not in section  # no baseline at all: nothing to say here


def test_regressions_section_shows_the_instruction_gate(tmp_path):
    from pytest_sme2.report.markdown.render import render_markdown

    doc = json.loads(json.dumps(_gate_doc()))
    doc["benchmarks"][2]["baseline_instructions"] = {
        "status": "regression", "ratio": {"point": 1.05, "low": 1.049, "high": 1.051},
        "reason": "instructions 5.0% more: 2.7e+06 instructions vs baseline 2.57e+06",
        "foreign": False, "measure": "instructions"}
    section = render_markdown(doc, charts={}).split("## Regressions", 1)[1].split("\n## ", 1)[0]
    assert "| test_c (instructions) | python | **regression** | 1.050x | [1.049, 1.051] | " \
        "instructions 5.0% more" in section


def _gate_doc():
    def bench(name, judgement):
        return {"nodeid": f"t.py::{name}", "model": "toy_cnn", "dtype": "fp32", "threads": 1,
                "runner": "python", "runner_info": {"name": "python", "kind": "python",
                                                    "labels": {}},
                "device": {"kind": "host"}, "runs": 3, "warmup": 0, "e2e_ms": [1.0, 1.0, 1.0],
                "median_ms": 1.0, "p90_ms": 1.0, "cv_pct": 0.0,
                "e2e": {"n": 3, "median_ms": 1.0, "mean_ms": 1.0, "p10_ms": 1.0, "p90_ms": 1.0,
                        "min_ms": 1.0, "max_ms": 1.0, "std_ms": 0.0, "cv_pct": 0.0,
                        "mad_ms": 0.0, "outliers": 0},
                "etdump": "", "pte": "", "categories_ms": {"Other": 1.0}, "operators": [],
                "overheads_ms": {}, "kernel_evidence": {}, "block": None,
                "baseline": judgement}
    regression = {"status": "regression", "ratio": {"point": 1.4, "low": 1.3, "high": 1.5},
                  "reason": "40.0% slower: median 1.4 ms vs baseline 1.0 ms", "foreign": False}
    foreign = {"status": "not_compared", "ratio": None, "foreign": True,
               "reason": "not compared: CPU/SoC 'x' -> 'y'"}
    missing = {"status": "not_compared", "ratio": None, "foreign": False,
               "reason": "no baseline"}
    return {"schema": "pytest-sme2/results/1", "session": {},
            "benchmarks": [bench("test_a", regression), bench("test_b", foreign),
                           bench("test_c", missing)], "comparisons": []}


def test_the_breakdown_says_what_tracing_added_and_shares_are_of_the_traced_e2e():
    doc = single_doc()
    b = doc["benchmarks"][0]
    # Timed untraced: 2.0 ms; the breakdown's traced runs took 2.136 ms on average.
    b["categories_ms"]["Other"] += 0.136
    b["timing"] = {"mode": "untraced", "source": "the runner's clock", "overhead_pct": 6.8,
                   "traced_median_ms": 2.136, "traced_mean_ms": 2.136, "traced_runs": 10}
    cats = section(render_markdown(doc), "Operator Category Breakdown")
    assert ("python: operator tracing added +6.8% to Method::execute; the breakdown below is "
            "from traced runs (Other = their own E2E 2.136 ms - the named categories)") in cats
    (row,) = table_rows(cats, "[toy_cnn fp32 t1](details/toy_cnn-fp32-t1-python.md)")
    assert row[2] == "2.136"                                    # the traced E2E
    assert sum(float(v) for v in row[3:]) == pytest.approx(100.0, abs=0.2)
    assert "operator tracing added +6.8%" in section(page(doc), "Operator Category Breakdown")


def test_operators_under_the_clocks_resolution_are_named_above_the_breakdown():
    """Their 0 ms is not their time: report.md says their time is in Other (issue 49)."""
    doc = single_doc()
    b = doc["benchmarks"][0]
    b["operators"].append({**op("Mean (ND) #1", 0.0, 2.0, "Pooling"), "below_resolution": True})
    text = section(page(doc), "Operator Category Breakdown")
    assert ("python: 1 operator(s) ran under their clock's resolution (XNNPACK times its "
            "operators in whole microseconds; every event read 0), so their time is in Other: "
            "Mean (ND)") in text
    assert "clock's resolution" not in section(page(single_doc()), "Operator Category Breakdown")


def test_a_session_cut_short_says_so_first_and_names_the_test_it_cut():
    doc = single_doc()
    assert "Interrupted" not in render_markdown(doc)
    doc["session"]["interrupted"] = {"by": "KeyboardInterrupt (Ctrl-C)",
                                     "in_flight": "b.py::test_cmp", "comparison": True}
    loaded = load_results(doc)
    assert loaded.session.interrupted["in_flight"] == "b.py::test_cmp"
    assert loaded.session.to_json()["interrupted"] == doc["session"]["interrupted"]
    text = render_markdown(doc)
    assert text.index("**Interrupted** by KeyboardInterrupt (Ctrl-C) while `b.py::test_cmp` was "
                      "running (a comparison: the blocks it had measured are not in this "
                      "report") < text.index("benchmark")

"""The GitHub Actions step summary (GITHUB_STEP_SUMMARY), appended at session end."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path


from pytest_sme2.report.outputs import write_reports
from pytest_sme2.measure.config import Sme2Config
from pytest_sme2.report.github import append_step_summary, step_summary
from pytest_sme2.results import load_results
from pytest_sme2.measure.session import BenchSession
from pytest_sme2.measure.settings import BenchSettings
from pytest_sme2.report.view import SessionView
from tests.fakes.results_docs import single_doc, sme2_doc

REGRESSION = {"status": "regression", "ratio": {"point": 1.3, "low": 1.2, "high": 1.4}}


def _doc():
    doc = load_results(sme2_doc())
    single = load_results(single_doc())
    single.benchmarks[0].judgement = REGRESSION
    doc.benchmarks += single.benchmarks
    return doc


def test_the_summary_has_the_table_regressions_speedups_and_report_path():
    doc = _doc()
    text = step_summary(doc, Path("sme2-report"))
    lines = text.splitlines()
    assert "| benchmark | runner | median ms | CV % | SME2 | vs baseline |" in lines
    rows = [ln for ln in lines if ln.startswith("| test_")]
    assert len(rows) == 3
    assert rows[0].startswith("| test_latency[toy_cnn-fp32-t1] | python | 2.000 |")
    assert "REGRESSION 1.30x [1.20, 1.40]" in rows[0]
    assert rows[2].startswith("| test_sme2 | sme2_on | 4.000 |") and "indicated" in rows[2]
    assert "- `test_latency[toy_cnn-fp32-t1]` python: end to end REGRESSION 1.30x" in text
    assert ("- `test_sme2` mobilenet_v3_small fp16 t1: sme2_on vs sme2_off 2.50x [2.45, 2.55] "
            "(95% CI), faster") in lines
    assert "emulated" not in text
    assert "Report: `sme2-report/report.md`, charts in `sme2-report/charts`, a page per " \
        "benchmark in `sme2-report/details`" in lines
    assert "http" not in text and "](" not in text                    # no links


def test_emulated_speedups_are_marked_and_nothing_regressed():
    doc = load_results(sme2_doc())
    doc.comparisons[0].emulated = True
    text = step_summary(doc)
    assert "**Regressions:** none" in text
    assert "2.50x [2.45, 2.55] (95% CI), faster *(emulated: says nothing about speed)*" in text


def test_appended_only_when_github_step_summary_is_set(tmp_path, monkeypatch):
    doc = _doc()
    target = tmp_path / "step_summary.md"
    assert append_step_summary(doc, env={}) is None
    target.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(target))
    assert append_step_summary(doc) == target
    text = target.read_text()
    assert text.startswith("earlier step\n\n## pytest-sme2\n")


def test_the_session_appends_it_at_the_end(tmp_path, monkeypatch):
    import pytest_sme2.report.markdown.render as markdown

    monkeypatch.setattr(markdown, "render_report", lambda doc, out: out / "report.md")
    target = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(target))
    cfg = Sme2Config(benchmark_json=tmp_path / "b.json")
    cfg = replace(cfg, settings=replace(cfg.settings, report_dir=tmp_path / "r"))
    written = write_reports(BenchSession(cfg, results=load_results(single_doc()).benchmarks))
    assert target in written
    text = target.read_text()
    assert "| test_latency[toy_cnn-fp32-t1] | python | 2.000 |" in text
    assert f"Also written: `{tmp_path / 'b.json'}`" in text
    monkeypatch.delenv("GITHUB_STEP_SUMMARY")
    assert target not in write_reports(
        BenchSession(cfg, results=load_results(single_doc()).benchmarks))


def test_session_finish_is_gone_write_reports_writes_them(tmp_path):
    from pytest_sme2.report.outputs import write_reports

    cfg = Sme2Config(settings=BenchSettings(report_dir=tmp_path))
    session = BenchSession(cfg, results=load_results(single_doc()).benchmarks)
    assert not hasattr(session, "finish")
    assert (tmp_path / "report.md") in write_reports(session)


def test_llm_generations_get_their_own_rows():
    from tests.fakes.results_docs import llm_doc

    text = step_summary(SessionView.of(load_results(llm_doc()).benchmarks))
    assert "**LLM generations** (prefill + decode" in text
    assert ("| test_llm[tiny_llama-8da8w-t1] | native | 8da8w | 1 | pp64, tg32 | 8,000 | 2,000 | "
            "0.500 | 0.600 | 8.050 | - | - |  | proven | proven | - |") in text
    # once: the forward-pass table holds no LLM's row
    assert text.count("| test_llm[tiny_llama-8da8w-t1] |") == 1


def test_llm_generations_at_depth_are_named_as_llama_bench_names_them():
    from tests.fakes.results_docs import generation_block, single_doc

    doc = single_doc()
    doc["benchmarks"] += [generation_block("8da8w", depth=512)]
    text = step_summary(SessionView.of(load_results(doc).benchmarks))
    row = "| test_llm[tiny_llama-8da8w-t1-d512] | native | 8da8w | 1 | pp64 @ d512, tg32 @ d512 |"
    assert row in text


def test_a_prefill_regression_is_listed():
    from tests.fakes.results_docs import interval, llm_doc

    d = llm_doc()
    d["benchmarks"][1]["baseline_phases"] = {
        "prefill": {"status": "regression", "reason": "slower",
                    "ratio": interval(1.3, 1.2, 1.4)}}
    text = step_summary(SessionView.of(load_results(d).benchmarks))
    assert "- `test_llm[tiny_llama-8da4w-t1]` native: prefill REGRESSION 1.30x [1.20, 1.40]" \
        in text


def test_no_llm_rows_without_generations():
    from tests.fakes.results_docs import single_doc

    text = step_summary(SessionView.of(load_results(single_doc()).benchmarks))
    assert "LLM generations" not in text


def test_write_reports_renders_the_sessions_records_as_results_json_would(tmp_path,
                                                                          monkeypatch):
    """No round trip through a document at the session's end, and the same report.md as
    ``pytest-sme2 report results.json`` gives."""
    import pytest_sme2.results.block as block
    from pytest_sme2.report.markdown.render import render_report

    cfg = Sme2Config(settings=BenchSettings(report_dir=tmp_path / "r"))
    doc = load_results(sme2_doc())
    session = BenchSession(cfg, results=doc.benchmarks, comparisons=doc.comparisons)
    monkeypatch.setattr(block.BlockResult, "from_json", None)   # any reload fails
    write_reports(session)
    monkeypatch.undo()
    again = render_report(load_results(session.results_path), tmp_path / "again")
    assert (tmp_path / "r" / "report.md").read_text() == again.read_text()
